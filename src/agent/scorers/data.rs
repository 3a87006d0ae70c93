//! What a scorer reads of a run, in the reference's shapes (`scoringData`): the input messages
//! and the response messages in its DB message format, and the text and tool calls scorers
//! take out of them.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A run as a scorer sees it; also the result's `scoring_data`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ScorerRun {
    /// What the run was given.
    pub input: ScorerInput,
    /// The response messages.
    pub output: Vec<DbMessage>,
}

/// The input side of a scored run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ScorerInput {
    /// The request's messages.
    pub input_messages: Vec<DbMessage>,
    /// The thread's earlier messages the model was shown.
    #[serde(default)]
    pub remembered_messages: Vec<DbMessage>,
    /// The system messages (`{role: "system", content}`).
    #[serde(default)]
    pub system_messages: Vec<Value>,
    /// Tagged system messages (agentd has none; kept for the shape).
    #[serde(default)]
    pub tagged_system_messages: Map<String, Value>,
}

/// A message in the reference's DB format (format 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DbMessage {
    /// Its id.
    pub id: String,
    /// `user`, `assistant`, `system` or `tool`.
    pub role: String,
    /// When it was made (RFC 3339), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// Its content.
    pub content: DbContent,
}

/// A DB message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DbContent {
    /// Always 2.
    pub format: u8,
    /// Its parts (`text`, `tool-invocation`, `step-start`, …), as the reference writes them.
    pub parts: Vec<Value>,
    /// Its text, when it has any (the reference's `content.content`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The tool calls it made, with their results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_invocations: Option<Vec<Value>>,
    /// Model metadata (`modelId`, `provider`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// The text a scorer reads of a message, as the reference's
/// `getTextContentFromMastraDBMessage`: `content.content` when it is not empty, else the
/// last text part's text, else nothing.
impl DbMessage {
    /// The message's text ("" when it has none).
    pub fn text(&self) -> &str {
        if let Some(content) = self.content.content.as_deref().filter(|c| !c.is_empty()) {
            return content;
        }
        // Only the last text part, as the AI SDK does.
        self.content
            .parts
            .iter()
            .rev()
            .find(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .and_then(|p| p.get("text"))
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// The message's tool invocations, the parts' and the legacy `toolInvocations` merged as
    /// the reference's `mergeToolInvocations`: a call in both is taken from the parts (they
    /// hold the terminal state), a legacy-only call stays before its next shared anchor.
    pub fn merged_tool_invocations(&self) -> Vec<&Value> {
        let from_parts: Vec<&Value> = self
            .content
            .parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("tool-invocation"))
            .filter_map(|p| p.get("toolInvocation"))
            .filter(|v| truthy(v))
            .collect();
        let part_ids: Vec<&Value> = from_parts
            .iter()
            .filter_map(|v| v.get("toolCallId"))
            .filter(|id| truthy(id))
            .collect();
        let in_parts = |inv: &Value| {
            inv.get("toolCallId")
                .is_some_and(|id| part_ids.contains(&id))
        };
        let legacy: &[Value] = self.content.tool_invocations.as_deref().unwrap_or(&[]);
        // The last legacy position of an id wins, as in the reference's `Map`.
        let legacy_position = |id: &Value| {
            legacy
                .iter()
                .rposition(|inv| inv.get("toolCallId") == Some(id))
        };
        let mut merged = Vec::with_capacity(from_parts.len() + legacy.len());
        let mut next = 0;
        for invocation in from_parts {
            let shared = invocation
                .get("toolCallId")
                .filter(|id| truthy(id))
                .and_then(legacy_position);
            if let Some(shared) = shared.filter(|&s| s >= next) {
                merged.extend(
                    legacy[next..shared]
                        .iter()
                        .filter(|p| truthy(p) && !in_parts(p)),
                );
                next = shared + 1;
            }
            merged.push(invocation);
        }
        merged.extend(
            legacy[next.min(legacy.len())..]
                .iter()
                .filter(|p| truthy(p) && !in_parts(p)),
        );
        merged
    }
}

impl ScorerRun {
    /// The input messages' texts joined with ", ", as the rule-based scorers read the input.
    pub fn input_text(&self) -> String {
        join_texts(&self.input.input_messages)
    }

    /// The response messages' texts joined with ", ".
    pub fn output_text(&self) -> String {
        join_texts(&self.output)
    }

    /// The tools the response called, in order, as the reference's `extractToolCalls`.
    pub fn tool_calls(&self) -> Vec<ToolCallInfo> {
        let mut calls = Vec::new();
        for (message_index, message) in self.output.iter().enumerate() {
            for (invocation_index, invocation) in
                message.merged_tool_invocations().into_iter().enumerate()
            {
                // A thrown call (`output-error`) counts: the tool ran. A partial call does not.
                let state = invocation.get("state").and_then(Value::as_str);
                if !matches!(state, Some("result" | "call" | "output-error")) {
                    continue;
                }
                let Some(tool_name) = invocation
                    .get("toolName")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
                else {
                    continue;
                };
                let tool_call_id = match invocation.get("toolCallId") {
                    Some(Value::String(id)) if !id.is_empty() => id.clone(),
                    Some(id) if truthy(id) => id.to_string(),
                    _ => format!("{message_index}-{invocation_index}"),
                };
                calls.push(ToolCallInfo {
                    tool_name: tool_name.to_owned(),
                    tool_call_id,
                    message_index,
                    invocation_index,
                });
            }
        }
        calls
    }
}

/// One tool call of a response (the reference's `ToolCallInfo`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallInfo {
    /// The tool's name.
    pub tool_name: String,
    /// The call's id, or `"<message>-<invocation>"` when it has none.
    pub tool_call_id: String,
    /// The index of its message in the response.
    pub message_index: usize,
    /// Its index among the message's merged invocations.
    pub invocation_index: usize,
}

fn join_texts(messages: &[DbMessage]) -> String {
    messages
        .iter()
        .map(DbMessage::text)
        .collect::<Vec<_>>()
        .join(", ")
}

/// JavaScript truthiness of a JSON value.
pub(crate) fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0 && !x.is_nan()),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}
