//! What the judged scorers read of a run, as the evals' `utils.ts` reads it: the user's
//! message, the response text, the system prompt, the remembered conversation and the tool
//! calls. These walk the messages as JSON because the reference's rules are written over
//! loosely shaped objects (a `content` that is a string, a part list or a record).

use serde_json::Value;

use super::js;
use crate::agent::scorers::data::truthy;
use crate::agent::scorers::{DbMessage, ScorerInput};

/// A message as the JSON the reference walks.
fn as_value(message: &DbMessage) -> Value {
    serde_json::to_value(message).unwrap_or(Value::Null)
}

/// `getEffectiveMessageRole`: a signal message counts as the role it carries.
fn effective_role(message: &Value) -> Option<&str> {
    let role = message.get("role").and_then(Value::as_str);
    if role != Some("signal") {
        return role;
    }
    let signal = message
        .get("content")
        .and_then(|c| c.get("metadata"))
        .and_then(|m| m.get("signal"));
    field(signal, "tagName")
        .or_else(|| field(signal, "type"))
        .or_else(|| field(Some(message), "type"))
}

/// A string field of an optional record.
fn field<'a>(record: Option<&'a Value>, key: &str) -> Option<&'a str> {
    record.and_then(|r| r.get(key)).and_then(Value::as_str)
}

/// A non-empty string field.
fn non_empty<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// `getTextFromValue`: a non-empty string, the last text part of a part list, or of a
/// record its `content`, `text`, `body` or `parts`, in that order.
fn text_from_value(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => (!s.is_empty()).then(|| s.clone()),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .next_back()
            .map(str::to_owned),
        Value::Object(map) => map
            .get("content")
            .and_then(text_from_value)
            .or_else(|| non_empty(value, "text").map(str::to_owned))
            .or_else(|| non_empty(value, "body").map(str::to_owned))
            .or_else(|| match map.get("parts") {
                Some(parts @ Value::Array(_)) => text_from_value(parts),
                _ => None,
            }),
        _ => None,
    }
}

/// `getTextContentFromMastraDBMessage`: the content text, else the last text part ("" when
/// none).
fn message_text(message: &Value) -> String {
    let content = message.get("content").unwrap_or(&Value::Null);
    let last_text_part = |parts: &Vec<Value>| {
        parts
            .iter()
            .rfind(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .and_then(|p| p.get("text").and_then(Value::as_str))
            .unwrap_or("")
            .to_owned()
    };
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => last_text_part(parts),
        _ => {
            if let Some(text) = non_empty(content, "content").or_else(|| non_empty(content, "text"))
            {
                return text.to_owned();
            }
            match content.get("parts") {
                Some(Value::Array(parts)) => last_text_part(parts),
                _ => String::new(),
            }
        }
    }
}

/// `getUserMessageFromRunInput`: the text of the first user message (which may be empty);
/// `None` when there is no user message or it has no text.
pub(super) fn user_text(input: &ScorerInput) -> Option<String> {
    input
        .input_messages
        .iter()
        .map(as_value)
        .find(|m| effective_role(m) == Some("user"))
        .and_then(|m| text_from_value(&m))
}

/// `getAssistantMessageFromRunOutput`: the text of the last assistant message that has some.
pub(super) fn assistant_text(output: &[DbMessage]) -> Option<String> {
    output
        .iter()
        .rev()
        .map(as_value)
        .filter(|m| effective_role(m) == Some("assistant"))
        // A trailing message may hold only tool calls: the last one with text counts.
        .find_map(|m| text_from_value(&m).filter(|t| !t.is_empty()))
}

/// `getCombinedSystemPrompt`: the system messages, the input's system-role messages and the
/// tagged system messages, joined by a blank line.
pub(super) fn system_prompt(input: &ScorerInput) -> String {
    let mut texts: Vec<String> = input
        .system_messages
        .iter()
        .map(|m| match m.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .map(|p| match p.get("text") {
                    Some(Value::String(s)) if !s.is_empty() => s.clone(),
                    _ => String::new(),
                })
                .collect::<Vec<_>>()
                .join(" "),
            _ => String::new(),
        })
        .filter(|s| !s.is_empty())
        .collect();
    texts.extend(
        input
            .input_messages
            .iter()
            .filter(|m| m.role == "system")
            .filter_map(|m| text_from_value(&as_value(m)))
            .filter(|t| !t.is_empty()),
    );
    for messages in input.tagged_system_messages.values() {
        if let Value::Array(messages) = messages {
            texts.extend(
                messages
                    .iter()
                    .filter_map(text_from_value)
                    .filter(|t| !t.is_empty()),
            );
        }
    }
    texts.join("\n\n")
}

/// `getConversationHistoryFromRunInput`: the last `max_messages` remembered messages as
/// `role: text` lines; `None` when none has text.
pub(super) fn conversation_history(input: &ScorerInput, max_messages: u32) -> Option<String> {
    let max = max_messages as usize;
    if max == 0 {
        return None;
    }
    let remembered = &input.remembered_messages;
    let lines: Vec<String> = remembered[remembered.len().saturating_sub(max)..]
        .iter()
        .map(as_value)
        .filter_map(|m| {
            let role = effective_role(&m)?.to_owned();
            let text = message_text(&m);
            let text = js::trim(&text);
            (!role.is_empty() && !text.is_empty()).then(|| format!("{role}: {text}"))
        })
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// The faithfulness scorer's default context: `JSON.stringify` of each finished tool call's
/// result in the assistant messages' `toolInvocations` (an absent result prints as nothing,
/// as `undefined` does when joined).
pub(super) fn tool_result_context(output: &[DbMessage]) -> Vec<String> {
    output
        .iter()
        .filter(|m| m.role == "assistant")
        .flat_map(|m| m.content.tool_invocations.iter().flatten())
        .filter(|call| call.get("state").and_then(Value::as_str) == Some("result"))
        .map(|call| call.get("result").map(js::stringify).unwrap_or_default())
        .collect()
}

/// `extractToolCalls`: every tool call of the output that ran or was asked for (states
/// `result`, `call`, `output-error`), as `{ actualTools, hasToolCalls, toolCallInfos }`.
pub(super) fn tool_calls(output: &[DbMessage]) -> (Vec<String>, Vec<Value>) {
    let mut names = Vec::new();
    let mut infos = Vec::new();
    for (message_index, message) in output.iter().enumerate() {
        for (invocation_index, invocation) in
            message.merged_tool_invocations().into_iter().enumerate()
        {
            let name = invocation
                .get("toolName")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty());
            let state = invocation.get("state").and_then(Value::as_str);
            let (Some(name), Some("result" | "call" | "output-error")) = (name, state) else {
                continue;
            };
            let call_id = match invocation.get("toolCallId") {
                Some(id) if truthy(id) => id.clone(),
                _ => Value::String(format!("{message_index}-{invocation_index}")),
            };
            names.push(name.to_owned());
            infos.push(serde_json::json!({
                "toolName": name,
                "toolCallId": call_id,
                "messageIndex": message_index,
                "invocationIndex": invocation_index,
            }));
        }
    }
    (names, infos)
}

#[cfg(test)]
mod tests {
    //! Expectations taken from the reference's `utils.ts` run on the same messages (node,
    //! `@mastra/evals` 1.10.2): the shapes the recording does not exercise.

    use serde_json::{Value, json};

    use super::*;

    fn message(id: &str, role: &str, content: Value) -> DbMessage {
        serde_json::from_value(json!({ "id": id, "role": role, "content": content }))
            .expect("a message")
    }

    fn text(t: &str) -> Value {
        json!({ "type": "text", "text": t })
    }

    fn call(id: &str, name: &str, result: Value) -> Value {
        json!({ "state": "result", "toolCallId": id, "toolName": name, "args": {}, "result": result })
    }

    fn invocation(v: Value) -> Value {
        json!({ "type": "tool-invocation", "toolInvocation": v })
    }

    #[test]
    fn tool_calls_merge_parts_and_legacy_calls() {
        let first = message(
            "a1",
            "assistant",
            json!({ "format": 2, "content": "one",
                "parts": [
                    text("one"),
                    invocation(call("p1", "search", json!(1))),
                    invocation(json!({ "state": "partial-call", "toolCallId": "p2", "toolName": "weather" })),
                    invocation(call("s1", "weather", json!(1))),
                    invocation(json!({ "state": "output-error", "toolName": "weather", "errorText": "x" })),
                ],
                "toolInvocations": [
                    call("l0", "legacyA", json!(1)),
                    call("p1", "search", json!(1)),
                    call("l1", "legacyB", json!(1)),
                    call("s1", "weather", json!(1)),
                    call("l2", "legacyC", json!(1)),
                    { "state": "call", "toolName": "noid" },
                ] }),
        );
        let second = message(
            "a2",
            "assistant",
            json!({ "format": 2, "parts": [invocation(call("", "search", json!(1)))] }),
        );
        let (names, infos) = tool_calls(&[first, second]);
        assert_eq!(
            names,
            [
                "legacyA", "search", "legacyB", "weather", "weather", "legacyC", "noid", "search"
            ]
        );
        let ids: Vec<(&str, u64)> = infos
            .iter()
            .map(|i| {
                (
                    i["toolCallId"].as_str().unwrap(),
                    i["invocationIndex"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            ids,
            [
                ("l0", 0),
                ("p1", 1),
                ("l1", 3),
                ("s1", 4),
                ("0-5", 5),
                ("l2", 6),
                ("0-7", 7),
                ("1-0", 0)
            ]
        );
    }

    #[test]
    fn tool_result_context_stringifies_like_javascript() {
        let response = message(
            "a1",
            "assistant",
            json!({ "format": 2, "parts": [], "toolInvocations": [
                call("c1", "t", serde_json::from_str(r#"{"b":1.0,"10":"x","2":[1e21,1e-7,0.5],"a":{"z":null,"y":true}}"#).unwrap()),
                { "state": "result", "toolCallId": "c2", "toolName": "t" },
                { "state": "call", "toolCallId": "c3", "toolName": "t" },
                call("c4", "t", json!("plain")),
            ] }),
        );
        let user = message(
            "u9",
            "user",
            json!({ "format": 2, "parts": [], "toolInvocations": [call("c9", "t", json!("no"))] }),
        );
        assert_eq!(
            tool_result_context(&[response, user]).join("\n"),
            "{\"2\":[1e+21,1e-7,0.5],\"10\":\"x\",\"b\":1,\"a\":{\"z\":null,\"y\":true}}\n\n\"plain\""
        );
    }

    #[test]
    fn texts_follow_the_reference_lookups() {
        let input: ScorerInput = serde_json::from_value(json!({
            "inputMessages": [
                { "id": "s1", "role": "system", "content": { "format": 2, "parts": [text("Inline system.")] } },
                { "id": "u1", "role": "signal", "content": { "format": 2, "parts": [text("x")], "content": "Pick one.",
                    "metadata": { "signal": { "type": "user" } } } },
                { "id": "u2", "role": "user", "content": { "format": 2, "parts": [text("second")] } },
            ],
            "rememberedMessages": [
                { "id": "r1", "role": "user", "content": { "format": 2, "parts": [text("  hello  ")], "content": "  hello  " } },
                { "id": "r2", "role": "assistant", "content": { "format": 2, "parts": [text("")] } },
                { "id": "r3", "role": "signal", "content": { "format": 2, "parts": [text("x")], "content": "sig",
                    "metadata": { "signal": { "tagName": "notice" } } } },
                { "id": "r4", "role": "assistant", "content": { "format": 2, "parts": [text("a"), text("b")] } },
            ],
            "systemMessages": [
                { "role": "system", "content": [text("Part one."), text("Part two.")] },
                { "role": "system", "content": "" },
            ],
            "taggedSystemMessages": {
                "memory": [{ "role": "system", "content": "Tagged." }],
                "other": [{ "role": "system", "content": [text("T1"), text("T2")] }],
            },
        }))
        .expect("input");
        assert_eq!(user_text(&input).as_deref(), Some("Pick one."));
        assert_eq!(
            system_prompt(&input),
            "Part one. Part two.\n\nInline system.\n\nTagged.\n\nT2"
        );
        assert_eq!(
            conversation_history(&input, 10).as_deref(),
            Some("user: hello\nnotice: sig\nassistant: b")
        );
        assert_eq!(
            conversation_history(&input, 1).as_deref(),
            Some("assistant: b")
        );
        assert_eq!(conversation_history(&input, 0), None);

        let output = [
            message(
                "a1",
                "assistant",
                json!({ "format": 2, "parts": [text("Answer A.")], "content": "Answer A." }),
            ),
            message(
                "a2",
                "assistant",
                json!({ "format": 2, "parts": [text("")], "content": "" }),
            ),
            message(
                "a3",
                "assistant",
                json!({ "format": 2, "parts": [invocation(call("c", "search", json!(1)))] }),
            ),
        ];
        assert_eq!(assistant_text(&output).as_deref(), Some("Answer A."));
        assert_eq!(assistant_text(&output[2..]), None);
    }
}
