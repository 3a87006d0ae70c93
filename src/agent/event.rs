//! What a run reports while it happens, in domain terms. The loop emits these; `wire.rs` turns
//! each into the `agentd.v1` chunk that clients read and the run log keeps.

use serde_json::Value;

use super::completion::CompletionCheck;
use super::error::RunFailure;
use super::hooks::HookNote;
use super::result::RunResult;
use super::state::{CallRecord, PendingCall, ResultRecord, StepRecord};

/// Who produced an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Producer {
    /// The agent (the model and its tools).
    Agent,
    /// agentd itself (the task-list signal).
    System,
    /// A tool's streamed output (a sub-agent's chunks), as the reference marks it.
    User,
}

/// A citation the provider returned.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Source {
    /// Source id.
    pub id: String,
    /// `url` or `document`.
    pub source_type: String,
    /// Where it is.
    pub url: String,
    /// Its title.
    pub title: String,
}

/// A file the model generated.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GeneratedFile {
    /// The bytes.
    pub data: Vec<u8>,
    /// Media type.
    pub mime_type: String,
}

/// One thing that happened in a run.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// The run started.
    Start {
        /// Agent id.
        agent_id: String,
        /// Thread, when the run has memory.
        thread_id: String,
        /// Resource, when the run has memory.
        resource_id: String,
        /// For a sub-agent's run: the supervisor's run and call.
        parent: Option<(String, String)>,
    },
    /// A step (model call) starts.
    StepStart {
        /// 0-based step index.
        index: u32,
        /// Id of the assistant message the step produces.
        message_id: String,
    },
    /// A text block starts.
    TextStart(String),
    /// A piece of text.
    TextDelta {
        /// Block id.
        id: String,
        /// The text.
        text: String,
    },
    /// A text block ends.
    TextEnd(String),
    /// A reasoning block starts.
    ReasoningStart(String),
    /// A piece of reasoning.
    ReasoningDelta {
        /// Block id.
        id: String,
        /// The text.
        text: String,
    },
    /// A reasoning block ends.
    ReasoningEnd(String),
    /// A citation.
    Source(Source),
    /// A generated file.
    File(GeneratedFile),
    /// A piece of a tool call's arguments.
    ToolCallDelta {
        /// Call id.
        call_id: String,
        /// Tool name.
        tool_name: String,
        /// The next piece of the JSON arguments.
        delta: String,
    },
    /// A complete tool call.
    ToolCall(CallRecord),
    /// A call waits for Approve / Decline.
    ApprovalRequested(PendingCall),
    /// A call waits for Resume (client tool).
    Suspended(PendingCall),
    /// A tool's result.
    ToolResult(ResultRecord),
    /// A tool failed (or was unknown); the text is what the model reads.
    ToolError(ResultRecord),
    /// A call was declined.
    ToolDenied {
        /// The call's outcome as the model reads it.
        record: ResultRecord,
        /// The decline reason.
        reason: String,
    },
    /// A step ended; carries the whole step.
    StepFinish(StepRecord),
    /// A typed data payload (`data-signal`, `data-thread-title`).
    Data {
        /// The data type name.
        kind: &'static str,
        /// The payload.
        data: Value,
    },
    /// The structured object so far, while streaming.
    Object(Value),
    /// The object so far, while a separate structuring model writes it (marked
    /// `metadata.from = "structured-output"`, as the reference).
    StructuringObject(Value),
    /// The final structured object.
    ObjectResult {
        /// The object.
        object: Value,
        /// The fallback value replaced an invalid object.
        used_fallback: bool,
    },
    /// A raw provider payload.
    Raw(Value),
    /// The run was aborted.
    Abort(String),
    /// The run failed.
    Error(RunFailure),
    /// The completion scorers ran.
    CompletionCheck(CompletionCheck),
    /// A hook failed or missed its deadline.
    HookError(HookNote),
    /// A processor stopped the run.
    Tripwire(super::processors::Tripwire),
    /// A chunk of a sub-agent's run, while its delegation call runs.
    ToolOutput {
        /// The delegation call.
        tool_call_id: String,
        /// The delegation tool.
        tool_name: String,
        /// The sub-agent.
        agent_id: String,
        /// The sub-run's own chunk.
        chunk: Box<crate::pb::Chunk>,
    },
    /// The run ended (or suspended); carries the whole result.
    Finish(Box<RunResult>),
}

impl Event {
    /// Who produced the event.
    pub fn producer(&self) -> Producer {
        match self {
            Self::Data { kind, .. } if *kind == "data-signal" => Producer::System,
            // As the reference marks a tool's streamed output.
            Self::ToolOutput { .. } => Producer::User,
            _ => Producer::Agent,
        }
    }
}
