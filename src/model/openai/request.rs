//! The JSON body of a Chat Completions request: messages and their content parts, tools and
//! tool choice, sampling settings, response format, then the provider options and `extra_body`.

use serde_json::{Map, Value, json};

use super::OpenAiProvider;
use super::options::provider_option_fields;
use crate::model::{ChatMessage, ContentPart, ModelRequest, ResponseFormat, ToolChoice};

impl OpenAiProvider {
    /// The JSON body of a Chat Completions request, and warnings about what it leaves out.
    pub(super) fn request_body(&self, req: &ModelRequest) -> (Map<String, Value>, Vec<String>) {
        let mut warnings = Vec::new();
        let options = provider_option_fields(&req.provider_options, &self.name);
        let mut body = Map::new();
        body.insert("model".into(), req.model.clone().into());
        body.insert(
            "messages".into(),
            req.messages.iter().map(message_json).collect(),
        );
        if !req.tools.is_empty() {
            let tools = req
                .tools
                .iter()
                .map(|tool| {
                    let mut function = Map::new();
                    function.insert("name".into(), tool.name.clone().into());
                    if !tool.description.is_empty() {
                        function.insert("description".into(), tool.description.clone().into());
                    }
                    let parameters = match &tool.parameters {
                        // OpenAI insists on an object schema even for argument-less tools.
                        Value::Null => json!({"type": "object", "properties": {}}),
                        schema => schema.clone(),
                    };
                    function.insert("parameters".into(), parameters);
                    json!({"type": "function", "function": function})
                })
                .collect();
            body.insert("tools".into(), tools);
            if let Some(choice) = &req.tool_choice {
                let choice = match choice {
                    ToolChoice::Auto => json!("auto"),
                    ToolChoice::None => json!("none"),
                    ToolChoice::Required => json!("required"),
                    ToolChoice::Tool(name) => {
                        json!({"type": "function", "function": {"name": name}})
                    }
                };
                body.insert("tool_choice".into(), choice);
            }
        } else if let Some(choice @ (ToolChoice::Required | ToolChoice::Tool(_))) = &req.tool_choice
        {
            // `Auto` and `None` hold trivially without tools; these two cannot.
            let choice = match choice {
                ToolChoice::Tool(name) => format!("tool {name:?}"),
                _ => "required".to_owned(),
            };
            warnings.push(format!(
                "toolChoice {choice} is not sent: no tools are offered"
            ));
        }
        let s = &req.settings;
        let optional = [
            ("temperature", s.temperature.map(Value::from)),
            ("max_tokens", s.max_output_tokens.map(Value::from)),
            ("top_p", s.top_p.map(Value::from)),
            ("top_k", s.top_k.map(Value::from)),
            ("presence_penalty", s.presence_penalty.map(Value::from)),
            ("frequency_penalty", s.frequency_penalty.map(Value::from)),
            ("seed", s.seed.map(Value::from)),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                body.insert(key.into(), value);
            }
        }
        if !s.stop_sequences.is_empty() {
            body.insert("stop".into(), s.stop_sequences.clone().into());
        }
        match &req.response_format {
            Some(ResponseFormat::JsonSchema {
                name,
                schema,
                strict,
            }) if self.structured_output => {
                let strict = options.strict_json_schema.unwrap_or(*strict);
                body.insert(
                    "response_format".into(),
                    json!({"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": strict}}),
                );
            }
            Some(format) => {
                if matches!(format, ResponseFormat::JsonSchema { .. }) {
                    warnings.push(
                        "responseFormat: a JSON schema is only supported with structured outputs; \
                         sent json_object without the schema"
                            .to_owned(),
                    );
                }
                body.insert("response_format".into(), json!({"type": "json_object"}));
            }
            None => {}
        }
        body.insert("stream".into(), true.into());
        if self.include_usage {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        for (key, value) in options.body.into_iter().chain(req.extra_body.clone()) {
            body.insert(key, value);
        }
        (body, warnings)
    }
}

fn message_json(message: &ChatMessage) -> Value {
    match message {
        ChatMessage::System { content } => json!({"role": "system", "content": content}),
        ChatMessage::User { content } => {
            // A lone text part goes as a plain string: older local servers accept nothing else.
            let content = match content.as_slice() {
                [ContentPart::Text(text)] => Value::from(text.clone()),
                parts => parts.iter().map(content_part_json).collect(),
            };
            json!({"role": "user", "content": content})
        }
        ChatMessage::Assistant {
            content,
            tool_calls,
        } => {
            // An empty string rather than null: several compatible servers reject null content.
            let mut msg =
                json!({"role": "assistant", "content": content.clone().unwrap_or_default()});
            if !tool_calls.is_empty() {
                msg["tool_calls"] = tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        })
                    })
                    .collect();
            }
            msg
        }
        ChatMessage::Tool {
            tool_call_id,
            content,
        } => json!({"role": "tool", "tool_call_id": tool_call_id, "content": content}),
    }
}

fn content_part_json(part: &ContentPart) -> Value {
    match part {
        ContentPart::Text(text) => json!({"type": "text", "text": text}),
        ContentPart::ImageUrl { url, detail } => {
            let mut image = json!({"url": url});
            if let Some(detail) = detail {
                image["detail"] = detail.clone().into();
            }
            json!({"type": "image_url", "image_url": image})
        }
        ContentPart::ImageData { data, mime_type } => {
            json!({"type": "image_url", "image_url": {"url": data_url(mime_type, data)}})
        }
        ContentPart::File {
            data,
            mime_type,
            filename,
        } => match mime_type.as_str() {
            m if m.starts_with("image/") => {
                json!({"type": "image_url", "image_url": {"url": data_url(m, data)}})
            }
            "audio/wav" | "audio/x-wav" | "audio/wave" => {
                json!({"type": "input_audio", "input_audio": {"data": base64(data), "format": "wav"}})
            }
            "audio/mpeg" | "audio/mp3" => {
                json!({"type": "input_audio", "input_audio": {"data": base64(data), "format": "mp3"}})
            }
            m => json!({
                "type": "file",
                "file": {
                    "filename": filename.as_deref().unwrap_or("file"),
                    "file_data": data_url(m, data),
                },
            }),
        },
    }
}

fn data_url(mime_type: &str, data: &[u8]) -> String {
    format!("data:{mime_type};base64,{}", base64(data))
}

/// Standard base64 with padding (RFC 4648 §4).
fn base64(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (input, expected) in cases {
            assert_eq!(base64(input.as_bytes()), expected);
        }
    }
}
