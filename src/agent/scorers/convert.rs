//! A run's messages as a scorer reads them: the reference's `scoringData`, with messages in its
//! DB format (format 2). The response's assistant and tool messages merge into one assistant
//! message per run, as the reference stores a response: tool calls become `tool-invocation`
//! parts (state `result` once answered), each later step opens with a `step-start` part.

use serde_json::{Map, Value, json};

use super::data::{DbContent, DbMessage, ScorerInput, ScorerRun};
use crate::agent::message::{Message, Part, Role};

/// What a finished run's scorers read: `system` (its system messages), `history` (remembered),
/// `input` (the request's messages) and `response` (what the run added).
pub fn scorer_run(
    system: Vec<String>,
    history: &[Message],
    input: &[Message],
    response: &[Message],
    model: (&str, &str),
) -> ScorerRun {
    ScorerRun {
        input: ScorerInput {
            input_messages: input.iter().filter_map(plain).collect(),
            remembered_messages: history.iter().filter_map(plain).collect(),
            system_messages: system
                .into_iter()
                .map(|content| json!({"role": "system", "content": content}))
                .collect(),
            tagged_system_messages: Map::new(),
        },
        output: merged_response(response, model).into_iter().collect(),
    }
}

/// A user, system or assistant message as it stands (task-list signals left out: they are
/// agentd's bookkeeping, not conversation).
fn plain(message: &Message) -> Option<DbMessage> {
    if message.signal.is_some() {
        return None;
    }
    let mut parts = Vec::new();
    let mut invocations = Vec::new();
    for part in &message.parts {
        push_part(part, &mut parts, &mut invocations, message.created_at_ms);
    }
    Some(db_message(message, parts, invocations, None))
}

/// The response as one assistant message (none when the run added no assistant content).
fn merged_response(response: &[Message], (provider, model): (&str, &str)) -> Option<DbMessage> {
    let mut parts: Vec<Value> = Vec::new();
    let mut invocations: Vec<Value> = Vec::new();
    let mut first: Option<&Message> = None;
    let mut after_tools = false;
    for message in response.iter().filter(|m| m.signal.is_none()) {
        match message.role {
            Role::Assistant => {
                if first.is_some() && after_tools {
                    parts.push(
                        json!({"type": "step-start", "createdAt": time(message.created_at_ms)}),
                    );
                }
                first.get_or_insert(message);
                after_tools = false;
                for part in &message.parts {
                    push_part(part, &mut parts, &mut invocations, message.created_at_ms);
                }
            }
            Role::Tool => {
                after_tools = true;
                for part in &message.parts {
                    if let Part::ToolResult {
                        tool_call_id,
                        result,
                        ..
                    } = part
                    {
                        answer(&mut parts, &mut invocations, tool_call_id, result);
                    }
                }
            }
            Role::User | Role::System => {}
        }
    }
    let first = first?;
    let metadata = json!({"modelId": model, "provider": provider});
    Some(db_message(first, parts, invocations, Some(metadata)))
}

/// Adds a message part in the DB format (text, reasoning, files; tool calls as invocations).
fn push_part(part: &Part, parts: &mut Vec<Value>, invocations: &mut Vec<Value>, at: i64) {
    match part {
        Part::Text { text } => {
            parts.push(json!({"type": "text", "text": text, "createdAt": time(at)}));
        }
        Part::Reasoning { text } => {
            parts.push(json!({"type": "reasoning", "reasoning": text, "createdAt": time(at)}));
        }
        Part::Image { url, mime_type, .. } | Part::File { url, mime_type, .. } => {
            parts.push(
                json!({"type": "file", "mimeType": mime_type, "url": url, "createdAt": time(at)}),
            );
        }
        Part::ToolCall {
            tool_call_id,
            tool_name,
            args,
        } => {
            let invocation = json!({
                "state": "call",
                "toolCallId": tool_call_id,
                "toolName": tool_name,
                "args": args,
            });
            parts.push(json!({"type": "tool-invocation", "toolInvocation": invocation, "createdAt": time(at)}));
            invocations.push(invocation);
        }
        Part::ToolResult {
            tool_call_id,
            tool_name,
            args,
            result,
            ..
        } => {
            let invocation = json!({
                "state": "result",
                "toolCallId": tool_call_id,
                "toolName": tool_name,
                "args": args,
                "result": result,
            });
            parts.push(json!({"type": "tool-invocation", "toolInvocation": invocation, "createdAt": time(at)}));
            invocations.push(invocation);
        }
    }
}

/// Marks the call `id` answered with `result`, in its part and in the invocation list.
fn answer(parts: &mut [Value], invocations: &mut [Value], id: &str, result: &Value) {
    let resolve = |invocation: &mut Value| {
        if invocation["toolCallId"] == id {
            invocation["state"] = json!("result");
            invocation["result"] = result.clone();
        }
    };
    for part in parts.iter_mut() {
        if let Some(invocation) = part.get_mut("toolInvocation") {
            resolve(invocation);
        }
    }
    invocations.iter_mut().for_each(resolve);
}

fn db_message(
    message: &Message,
    parts: Vec<Value>,
    invocations: Vec<Value>,
    metadata: Option<Value>,
) -> DbMessage {
    let text: String = parts
        .iter()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str())
        .collect();
    DbMessage {
        id: message.id.clone(),
        role: match message.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
        .to_owned(),
        created_at: Some(time(message.created_at_ms)),
        content: DbContent {
            format: 2,
            parts,
            content: (!text.is_empty()).then_some(text),
            tool_invocations: (!invocations.is_empty()).then_some(invocations),
            metadata,
        },
    }
}

/// The reference's time of Unix milliseconds (`Date.toISOString`).
fn time(ms: i64) -> String {
    crate::dates::iso(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_step_and_a_text_step_merge_into_one_assistant_message() {
        let call = Message::new(
            Role::Assistant,
            vec![Part::ToolCall {
                tool_call_id: "c1".into(),
                tool_name: "weather".into(),
                args: json!({"city": "Paris"}),
            }],
        );
        let result = Message::new(
            Role::Tool,
            vec![Part::ToolResult {
                tool_call_id: "c1".into(),
                tool_name: "weather".into(),
                args: json!({"city": "Paris"}),
                result: json!({"temp": 21}),
                is_error: false,
                model_output: None,
            }],
        );
        let text = Message::new(
            Role::Assistant,
            vec![Part::Text {
                text: "It is 21 degrees.".into(),
            }],
        );
        let input = Message::new(
            Role::User,
            vec![Part::Text {
                text: "Weather?".into(),
            }],
        );
        let run = scorer_run(
            vec!["Be brief.".into()],
            &[],
            &[input],
            &[call, result, text],
            ("mock", "m"),
        );
        assert_eq!(
            run.input.input_messages[0].content.content.as_deref(),
            Some("Weather?")
        );
        assert_eq!(
            run.input.system_messages,
            [json!({"role": "system", "content": "Be brief."})]
        );
        let [out] = run.output.as_slice() else {
            panic!("one assistant message: {:?}", run.output)
        };
        let kinds: Vec<&str> = out
            .content
            .parts
            .iter()
            .filter_map(|p| p["type"].as_str())
            .collect();
        assert_eq!(kinds, ["tool-invocation", "step-start", "text"]);
        assert_eq!(out.content.content.as_deref(), Some("It is 21 degrees."));
        let invocation = json!({"state": "result", "toolCallId": "c1", "toolName": "weather", "args": {"city": "Paris"}, "result": {"temp": 21}});
        assert_eq!(out.content.tool_invocations, Some(vec![invocation.clone()]));
        assert_eq!(out.content.parts[0]["toolInvocation"], invocation);
        assert_eq!(
            out.content.metadata,
            Some(json!({"modelId": "m", "provider": "mock"}))
        );
    }
}
