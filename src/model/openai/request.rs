//! The JSON body of a Chat Completions request: messages and their content parts, tools and
//! tool choice, sampling settings, response format, then the provider options and `extra_body`.
//!
//! The body is written straight to bytes: messages serialize from the request without a copy,
//! and each tool's entry is its definition's cached text ([`ToolDefinition::function_json`]),
//! so the schemas (most of a request) are serialized once per agent, not once per model call.

use std::sync::Arc;

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value, json};

use super::OpenAiProvider;
use super::options::provider_option_fields;
use crate::model::{
    ChatMessage, ContentPart, ModelRequest, ResponseFormat, ToolCall, ToolChoice, ToolDefinition,
};

impl OpenAiProvider {
    /// The JSON body of a Chat Completions request, and warnings about what it leaves out.
    pub(super) fn request_body(&self, req: &ModelRequest) -> (Vec<u8>, Vec<String>) {
        let mut warnings = Vec::new();
        let options = provider_option_fields(&req.provider_options, &self.name);
        // The small fields go in a map (provider options and `extra_body` override any of
        // them in place); `messages` and `tools` hold places that `Body` fills when writing.
        let mut body = Map::new();
        body.insert("model".into(), req.model.clone().into());
        body.insert("messages".into(), Value::Null);
        if !req.tools.is_empty() {
            body.insert("tools".into(), Value::Null);
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
        let mut own_messages = true;
        let mut own_tools = !req.tools.is_empty();
        for (key, value) in options.body.into_iter().chain(req.extra_body.clone()) {
            own_messages &= key != "messages";
            own_tools &= key != "tools";
            body.insert(key, value);
        }
        let body = Body {
            fields: &body,
            messages: own_messages.then_some(req.messages.as_slice()),
            tools: own_tools.then_some(req.tools.as_slice()),
        };
        // Writing to a Vec fails only for a map key that is not a string, which `Body` never has.
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        (bytes, warnings)
    }
}

/// The request body as written: `fields` in order, with the request's own messages and tools
/// in their places (unless provider options or `extra_body` replaced them).
struct Body<'a> {
    fields: &'a Map<String, Value>,
    messages: Option<&'a [ChatMessage]>,
    tools: Option<&'a [Arc<ToolDefinition>]>,
}

impl<'a> Serialize for Body<'a> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.fields.len()))?;
        for (key, value) in self.fields {
            match (key.as_str(), self.messages, self.tools) {
                ("messages", Some(messages), _) => {
                    map.serialize_entry(key, &Seq(messages, Message))?;
                }
                ("tools", _, Some(tools)) => {
                    let entry = |t: &'a Arc<ToolDefinition>| t.function_json();
                    map.serialize_entry(key, &Seq(tools, entry))?;
                }
                _ => map.serialize_entry(key, value)?,
            }
        }
        map.end()
    }
}

/// A slice serialized item by item through `view`.
struct Seq<'a, T, F>(&'a [T], F);

impl<'a, T, F, V> Serialize for Seq<'a, T, F>
where
    F: Fn(&'a T) -> V,
    V: Serialize,
{
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for item in self.0 {
            seq.serialize_element(&(self.1)(item))?;
        }
        seq.end()
    }
}

/// A message as Chat Completions spells it, serialized from the request without a copy.
struct Message<'a>(&'a ChatMessage);

impl Serialize for Message<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self.0 {
            ChatMessage::System { content } => {
                map.serialize_entry("role", "system")?;
                map.serialize_entry("content", content)?;
            }
            ChatMessage::User { content } => {
                map.serialize_entry("role", "user")?;
                match content.as_slice() {
                    // A lone text part goes as a plain string: older local servers accept
                    // nothing else.
                    [ContentPart::Text(text)] => map.serialize_entry("content", text)?,
                    parts => map.serialize_entry("content", &Seq(parts, content_part_json))?,
                }
            }
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => {
                map.serialize_entry("role", "assistant")?;
                // An empty string rather than null: several compatible servers reject null.
                map.serialize_entry("content", content.as_deref().unwrap_or_default())?;
                if !tool_calls.is_empty() {
                    map.serialize_entry("tool_calls", &Seq(tool_calls, WireCall))?;
                }
            }
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => {
                map.serialize_entry("role", "tool")?;
                map.serialize_entry("tool_call_id", tool_call_id)?;
                map.serialize_entry("content", content)?;
            }
        }
        map.end()
    }
}

/// A tool call of an assistant message.
struct WireCall<'a>(&'a ToolCall);

impl Serialize for WireCall<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("id", &self.0.id)?;
        map.serialize_entry("type", "function")?;
        let function = Function {
            name: &self.0.name,
            arguments: &self.0.arguments,
        };
        map.serialize_entry("function", &function)?;
        map.end()
    }
}

/// The called function of a tool call.
#[derive(serde::Serialize)]
struct Function<'a> {
    name: &'a str,
    arguments: &'a str,
}

/// A content part (media parts are rare, and carry their own base64 copy anyway).
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
