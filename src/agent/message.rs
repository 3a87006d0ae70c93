//! Conversation messages as agentd stores them in threads, and how they become model input.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::{ChatMessage, ContentPart, ToolCall};
use crate::tasks::Task;
use crate::tasks::signal::{ShownState, SignalKind};

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions.
    System,
    /// The end user, or the task-list signal speaking for the system.
    User,
    /// The model.
    Assistant,
    /// Tool results.
    Tool,
}

/// One piece of message content.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Part {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// Reasoning the model exposed.
    Reasoning {
        /// The text.
        text: String,
    },
    /// An image by URL or inline bytes.
    Image {
        /// URL of the image, if by reference.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        /// Inline bytes, if given.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            with = "base64_bytes"
        )]
        data: Option<Vec<u8>>,
        /// MIME type.
        #[serde(default)]
        mime_type: String,
    },
    /// A file by URL or inline bytes.
    File {
        /// URL of the file, if by reference.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        /// Inline bytes, if given.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            with = "base64_bytes"
        )]
        data: Option<Vec<u8>>,
        /// MIME type.
        #[serde(default)]
        mime_type: String,
        /// File name shown to the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        filename: Option<String>,
    },
    /// A tool call made by the model.
    ToolCall {
        /// Call id.
        tool_call_id: String,
        /// Tool name.
        tool_name: String,
        /// Arguments.
        args: Value,
    },
    /// The outcome of a tool call.
    ToolResult {
        /// Call id.
        tool_call_id: String,
        /// Tool name.
        tool_name: String,
        /// Arguments the tool was called with.
        args: Value,
        /// The result object, or the error text for a failed call.
        result: Value,
        /// True for failed or unknown tools.
        #[serde(default)]
        is_error: bool,
        /// What the model reads instead of the result, when that differs (a sub-agent's
        /// answer: its text, not the whole result object).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model_output: Option<String>,
    },
}

/// The task-list signal a message carries, kept so that later runs know what the model saw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalMeta {
    /// `snapshot` or `delta`.
    pub kind: SignalMetaKind,
    /// The list as shown once this signal is applied.
    pub tasks: Vec<Task>,
}

/// Kind of a stored signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SignalMetaKind {
    /// A whole-list snapshot.
    Snapshot,
    /// A delta on the last snapshot.
    Delta,
}

impl From<SignalKind> for SignalMetaKind {
    fn from(kind: SignalKind) -> Self {
        match kind {
            SignalKind::Snapshot => Self::Snapshot,
            SignalKind::Delta => Self::Delta,
        }
    }
}

/// A message of a thread.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Stable id.
    pub id: String,
    /// Author.
    pub role: Role,
    /// Content, in order.
    pub parts: Vec<Part>,
    /// Creation time, Unix milliseconds.
    pub created_at_ms: i64,
    /// Set on task-list signal messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<SignalMeta>,
}

impl Message {
    /// A message with a fresh id, created now.
    pub fn new(role: Role, parts: Vec<Part>) -> Self {
        Self {
            id: new_id(),
            role,
            parts,
            created_at_ms: now_ms(),
            signal: None,
        }
    }

    /// The concatenated text parts.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Appends this message to a model conversation (a tool message becomes one entry per
    /// result).
    pub fn push_chat(&self, out: &mut Vec<ChatMessage>) {
        match self.role {
            Role::System => out.push(ChatMessage::system(self.text())),
            Role::User => out.push(ChatMessage::User {
                content: self.parts.iter().filter_map(user_part).collect(),
            }),
            Role::Assistant => {
                let text = self.text();
                let tool_calls: Vec<ToolCall> = self
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::ToolCall {
                            tool_call_id,
                            tool_name,
                            args,
                        } => Some(ToolCall {
                            id: tool_call_id.clone(),
                            name: tool_name.clone(),
                            arguments: args.to_string(),
                        }),
                        _ => None,
                    })
                    .collect();
                out.push(ChatMessage::Assistant {
                    content: (!text.is_empty()).then_some(text),
                    tool_calls,
                });
            }
            Role::Tool => {
                for part in &self.parts {
                    if let Part::ToolResult {
                        tool_call_id,
                        result,
                        model_output,
                        ..
                    } = part
                    {
                        out.push(ChatMessage::tool(
                            tool_call_id.clone(),
                            model_output.clone().unwrap_or_else(|| tool_content(result)),
                        ));
                    }
                }
            }
        }
    }
}

/// Appends `text` to the first message after an empty line when it is a system message, else
/// starts the conversation with a system message of `text`.
pub fn append_to_first_system(messages: &mut Vec<ChatMessage>, text: &str) {
    match messages.first_mut() {
        Some(ChatMessage::System { content }) => {
            content.push_str("\n\n");
            content.push_str(text);
        }
        _ => messages.insert(0, ChatMessage::system(text)),
    }
}

/// What the model reads as a tool's result: text as is, anything else as JSON.
pub fn tool_content(result: &Value) -> String {
    match result {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn user_part(part: &Part) -> Option<ContentPart> {
    match part {
        Part::Text { text } | Part::Reasoning { text } => Some(ContentPart::Text(text.clone())),
        Part::Image { url: Some(url), .. } => Some(ContentPart::ImageUrl {
            url: url.clone(),
            detail: None,
        }),
        Part::Image {
            data: Some(data),
            mime_type,
            ..
        } => Some(ContentPart::ImageData {
            data: data.clone(),
            mime_type: mime_type.clone(),
        }),
        Part::File {
            data: Some(data),
            mime_type,
            filename,
            ..
        } => Some(ContentPart::File {
            data: data.clone(),
            mime_type: mime_type.clone(),
            filename: filename.clone(),
        }),
        Part::File { url: Some(url), .. } => Some(ContentPart::Text(url.clone())),
        _ => None,
    }
}

/// What a stored message is for counting history rows, read without decoding its content.
#[derive(Deserialize)]
pub struct RowPeek {
    role: Role,
    #[serde(default)]
    signal: Option<serde::de::IgnoredAny>,
}

impl RowPeek {
    /// Part of a run's response (an assistant or tool message, not a signal).
    fn is_response(&self) -> bool {
        self.signal.is_none() && matches!(self.role, Role::Assistant | Role::Tool)
    }
}

/// Where the last `rows` rows of a thread's messages begin, counted as the reference stores
/// them: a user message or a task-list signal is one row, and one run's consecutive assistant
/// and tool messages (its whole response between two of those) are one row. `peeks` are the
/// newest stored messages, oldest first. `None` when they may begin inside the earliest row
/// wanted, so more must be read; `whole_thread` says they are the entire thread.
pub fn last_rows_start(peeks: &[RowPeek], rows: usize, whole_thread: bool) -> Option<usize> {
    if rows == 0 {
        return Some(peeks.len());
    }
    let starts: Vec<usize> = (0..peeks.len())
        .filter(|&i| i == 0 || !peeks[i].is_response() || !peeks[i - 1].is_response())
        .collect();
    if starts.len() > rows {
        return Some(starts[starts.len() - rows]);
    }
    // Fewer rows than wanted: all of them, unless the first may be the tail of a longer row.
    whole_thread.then_some(0)
}

/// Drops what a history window cut in half: tool results whose call is outside the window
/// (providers reject them) and system messages (history never carries instructions). Tool
/// calls without a result (cut off, or a call that never got one) are left out too when
/// `filter_incomplete` (the reference's default); otherwise each is kept and answered by a
/// `{"status":"pending"}` placeholder so the conversation stays well-formed.
pub fn sanitize_history(messages: Vec<Message>, filter_incomplete: bool) -> Vec<Message> {
    let ids = |want_calls: bool| -> std::collections::HashSet<String> {
        messages
            .iter()
            .flat_map(|m| m.parts.iter())
            .filter_map(|p| match p {
                Part::ToolCall { tool_call_id, .. } if want_calls => Some(tool_call_id.clone()),
                Part::ToolResult { tool_call_id, .. } if !want_calls => Some(tool_call_id.clone()),
                _ => None,
            })
            .collect()
    };
    let (called, answered) = (ids(true), ids(false));
    let mut out = Vec::with_capacity(messages.len());
    for mut m in messages {
        if m.role == Role::System {
            continue;
        }
        let mut placeholders = Vec::new();
        m.parts.retain(|p| match p {
            Part::ToolCall {
                tool_call_id,
                tool_name,
                args,
            } => {
                let kept = answered.contains(tool_call_id);
                if !kept && !filter_incomplete {
                    placeholders.push(Part::ToolResult {
                        tool_call_id: tool_call_id.clone(),
                        tool_name: tool_name.clone(),
                        args: args.clone(),
                        result: serde_json::json!({"status": "pending"}),
                        is_error: false,
                        model_output: None,
                    });
                }
                kept || !filter_incomplete
            }
            Part::ToolResult { tool_call_id, .. } => called.contains(tool_call_id),
            _ => true,
        });
        if m.parts.is_empty() {
            continue;
        }
        out.push(m);
        if !placeholders.is_empty() {
            out.push(Message::new(Role::Tool, placeholders));
        }
    }
    out
}

/// What the model was shown of the task list, rebuilt from the signals in a window of
/// messages: the last snapshot and the deltas after it.
pub fn shown_state<'a>(window: impl IntoIterator<Item = &'a Message>) -> ShownState {
    let signals: Vec<&SignalMeta> = window
        .into_iter()
        .filter_map(|m| m.signal.as_ref())
        .collect();
    let Some(base) = signals
        .iter()
        .rposition(|s| s.kind == SignalMetaKind::Snapshot)
    else {
        return ShownState::default();
    };
    let last = signals[signals.len() - 1];
    ShownState {
        tasks: Some(last.tasks.clone()),
        deltas_since_snapshot: u32::try_from(signals.len() - 1 - base).unwrap_or(u32::MAX),
        last_key: Some(crate::tasks::signal::change_key(&last.tasks)),
    }
}

/// A new random id (UUID v7: time-ordered, so ids sort by creation).
pub fn new_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

/// The current time in Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Serializes inline bytes as base64 text rather than a JSON array of numbers.
mod base64_bytes {
    use super::{BASE64, Engine};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(data: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match data {
            Some(bytes) => s.serialize_str(&BASE64.encode(bytes)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        let text: Option<String> = Option::deserialize(d)?;
        text.map(|t| BASE64.decode(t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::TaskStatus;
    use serde_json::json;

    fn call(id: &str) -> Part {
        Part::ToolCall {
            tool_call_id: id.into(),
            tool_name: "t".into(),
            args: json!({}),
        }
    }

    fn result(id: &str) -> Part {
        Part::ToolResult {
            tool_call_id: id.into(),
            tool_name: "t".into(),
            args: json!({}),
            result: json!({"ok": true}),
            is_error: false,
            model_output: None,
        }
    }

    #[test]
    fn rows_group_a_run_s_response_as_the_reference_stores_it() {
        let text = |role, t: &str| Message::new(role, vec![Part::Text { text: t.into() }]);
        let mut signal = text(Role::User, "<current-task-list/>");
        signal.signal = Some(SignalMeta {
            kind: SignalMetaKind::Snapshot,
            tasks: Vec::new(),
        });
        let thread = vec![
            text(Role::User, "q1"),
            text(Role::Assistant, "a1"),
            text(Role::User, "q2"),
            Message::new(Role::Assistant, vec![call("L1")]),
            Message::new(Role::Tool, vec![result("L1")]),
            signal,
            text(Role::Assistant, "a2"),
            text(Role::User, "q3"),
            text(Role::Assistant, "a3"),
        ];
        let peeks: Vec<RowPeek> = thread
            .iter()
            .map(|m| serde_json::from_slice(&serde_json::to_vec(m).unwrap()).unwrap())
            .collect();
        assert_eq!(last_rows_start(&peeks, 2, true), Some(7), "q3, a3");
        assert_eq!(
            last_rows_start(&peeks, 3, true),
            Some(6),
            "a2 is a row of its own"
        );
        assert_eq!(
            last_rows_start(&peeks, 5, true),
            Some(3),
            "the call and its result are one row"
        );
        assert_eq!(
            last_rows_start(&peeks[4..], 5, false),
            None,
            "a window starting inside a response needs more"
        );
        assert_eq!(last_rows_start(&peeks[7..], 5, true), Some(0));
        assert_eq!(last_rows_start(&peeks, 0, true), Some(9));
    }

    #[test]
    fn sanitize_drops_half_cut_tool_pairs_and_system() {
        let history = vec![
            Message::new(Role::Tool, vec![result("cut")]),
            Message::new(Role::System, vec![Part::Text { text: "s".into() }]),
            Message::new(Role::Assistant, vec![call("a"), call("b")]),
            Message::new(Role::Tool, vec![result("a")]),
        ];
        let kept = sanitize_history(history.clone(), true);
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0].parts, vec![call("a")]);
        assert_eq!(kept[1].parts, vec![result("a")]);
        let unfiltered = sanitize_history(history, false);
        assert_eq!(unfiltered.len(), 3, "b is kept with a placeholder result");
        assert_eq!(unfiltered[0].parts, vec![call("a"), call("b")]);
        assert!(matches!(
            &unfiltered[1].parts[..],
            [Part::ToolResult { tool_call_id, result, .. }]
                if tool_call_id == "b" && result == &json!({"status": "pending"})
        ));
    }

    #[test]
    fn shown_state_uses_last_snapshot_and_later_deltas() {
        let task = |id: &str| Task {
            id: id.into(),
            content: id.into(),
            status: TaskStatus::Pending,
            active_form: id.into(),
        };
        let signal = |kind, tasks: Vec<Task>| {
            let mut m = Message::new(Role::User, vec![Part::Text { text: "x".into() }]);
            m.signal = Some(SignalMeta { kind, tasks });
            m
        };
        assert_eq!(shown_state(&[]), ShownState::default());
        let only_delta = [signal(SignalMetaKind::Delta, vec![task("a")])];
        assert_eq!(
            shown_state(&only_delta).tasks,
            None,
            "a delta alone has no base"
        );
        let history = [
            signal(SignalMetaKind::Snapshot, vec![task("a")]),
            signal(SignalMetaKind::Delta, vec![task("a"), task("b")]),
        ];
        let state = shown_state(&history);
        assert_eq!(state.tasks, Some(vec![task("a"), task("b")]));
        assert_eq!(state.deltas_since_snapshot, 1);
    }

    #[test]
    fn inline_bytes_round_trip_as_base64() {
        let m = Message::new(
            Role::User,
            vec![Part::Image {
                url: None,
                data: Some(vec![1, 2, 3]),
                mime_type: "image/png".into(),
            }],
        );
        let text = serde_json::to_string(&m).unwrap();
        assert!(text.contains("\"AQID\""), "{text}");
        assert_eq!(serde_json::from_str::<Message>(&text).unwrap(), m);
    }
}
