//! A run's state as it is stored: the run record (status, ownership, fingerprint) and, for a
//! suspended run, everything needed to continue it on any replica.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::message::Message;
use super::request::RunRequest;
use crate::model::{FinishReason, Usage};

/// A tool call the model made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Parsed arguments (the raw text as a string when it was not JSON).
    pub args: Value,
    /// Set when the arguments were not valid JSON: the error the model sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_error: Option<String>,
}

/// The outcome of one tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultRecord {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments.
    pub args: Value,
    /// Result object, or the error text.
    pub result: Value,
    /// True for failed, unknown or declined tools and error results.
    pub is_error: bool,
}

/// Provider response metadata of one step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponseRecord {
    /// Provider response id.
    pub id: String,
    /// Model that answered.
    pub model: String,
    /// Unix milliseconds of the response.
    pub timestamp_ms: i64,
    /// Provider headers worth keeping.
    pub headers: BTreeMap<String, String>,
}

/// One finished step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// 0-based index.
    pub index: u32,
    /// Text of the step.
    pub text: String,
    /// Reasoning text of the step.
    pub reasoning: String,
    /// Tool calls.
    pub tool_calls: Vec<CallRecord>,
    /// Tool results in call order.
    pub tool_results: Vec<ResultRecord>,
    /// Why the step ended.
    pub finish_reason: FinishReason,
    /// Tokens of the step.
    pub usage: Usage,
    /// Provider response metadata.
    pub response: ResponseRecord,
    /// Warnings of the step.
    pub warnings: Vec<String>,
    /// Whether another step followed.
    pub is_continued: bool,
}

/// Why a tool call waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PendingKind {
    /// Approve or Decline.
    Approval,
    /// A client tool: Resume with the result.
    ClientTool,
}

/// A decision on a pending call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Decision {
    /// Run the tool.
    Approved,
    /// Do not run it; the model reads this text.
    Declined(String),
    /// The caller supplied the result.
    Resumed(Value),
}

/// A tool call waiting for a decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    /// The call.
    pub call: CallRecord,
    /// What it waits for.
    pub kind: PendingKind,
    /// The decision, once made.
    pub decision: Option<Decision>,
}

/// The step a suspended run stopped in: its model output and the tool results so far.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpenStep {
    /// The step as the model produced it (results still incomplete).
    pub step: StepRecord,
    /// Results already known, by call id (calls that ran or failed before suspending).
    pub done: Vec<ResultRecord>,
    /// Calls waiting for decisions, in call order.
    pub pending: Vec<PendingCall>,
}

/// Everything needed to continue a run elsewhere.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    /// The request.
    pub request: RunRequest,
    /// Remembered history loaded at the start.
    pub history: Vec<Message>,
    /// Messages of this run after the input (assistant, tool, signals).
    pub response: Vec<Message>,
    /// How many of `input` + `response` are already saved to memory.
    pub saved: usize,
    /// Whether the thread existed when the run started.
    pub thread_existed: bool,
    /// A title is still to be generated for the thread this run created.
    #[serde(default)]
    pub title_pending: bool,
    /// Finished steps.
    pub steps: Vec<StepRecord>,
    /// Run-level warnings.
    pub warnings: Vec<String>,
    /// The step waiting for decisions, when suspended.
    pub open_step: Option<OpenStep>,
}

/// Lifecycle of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Executing on `owner`.
    Running,
    /// Waiting for decisions on tool calls.
    Suspended,
    /// Ended.
    Finished,
}

/// The stored record of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run.
    pub run_id: String,
    /// Its agent.
    pub agent_id: String,
    /// Lifecycle state.
    pub status: RunStatus,
    /// Thread, if the run has memory.
    #[serde(default)]
    pub thread_id: String,
    /// Resource, if the run has memory.
    #[serde(default)]
    pub resource_id: String,
    /// Fingerprint of the request (idempotency).
    pub fingerprint: String,
    /// Replica executing the run.
    pub owner: String,
    /// Unix milliseconds of creation.
    pub created_at_ms: i64,
    /// Unix milliseconds of the last change.
    pub updated_at_ms: i64,
    /// Sequence of the last chunk written for the run.
    pub last_sequence: u64,
    /// Finish reason once finished or suspended.
    #[serde(default)]
    pub finish_reason: Option<FinishReason>,
    /// When suspended: the state to continue from.
    #[serde(default)]
    pub state: Option<RunState>,
    /// When suspended: undecided calls expire at this Unix millisecond.
    #[serde(default)]
    pub expires_at_ms: Option<i64>,
    /// The trace of the run's first span, for links from continuations.
    #[serde(default)]
    pub trace: Option<(String, String)>,
}
