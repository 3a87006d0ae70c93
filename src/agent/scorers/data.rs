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
