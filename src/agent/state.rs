//! What a run knows while it runs, and what a suspended run stores to continue on any replica:
//! its steps, tool calls and results, pending decisions and messages. The run record around
//! it (status, ownership) is in `record.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::event::{GeneratedFile, Source};
use super::hooks::ClientBinding;
use super::message::Message;
use super::processors::Tripwire;
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
    /// What the model reads instead of `result`, when that differs (a sub-agent's text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_output: Option<String>,
}

impl ResultRecord {
    /// The result of `call`.
    pub fn of(call: &CallRecord, result: Value, is_error: bool) -> Self {
        Self {
            id: call.id.clone(),
            name: call.name.clone(),
            args: call.args.clone(),
            result,
            is_error,
            model_output: None,
        }
    }

    /// Whether the tool produced an output (an error result of a tool that ran counts): false
    /// for unknown tools, unparsable arguments, failures and declined calls, whose result is
    /// the text the model reads instead.
    pub fn is_output(&self) -> bool {
        !self.is_error || !self.result.is_string()
    }
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
    /// Provider-specific metadata of the step's response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<Value>,
    /// Citations the provider returned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<Source>,
    /// Files the model generated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<GeneratedFile>,
    /// An output processor rejected the step: a retry when `is_continued`, else the run's
    /// tripwire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tripwire: Option<Tripwire>,
}

impl StepRecord {
    /// A step that has produced nothing yet.
    pub fn empty(index: u32) -> Self {
        Self {
            index,
            text: String::new(),
            reasoning: String::new(),
            tool_calls: Vec::new(),
            tool_results: Vec::new(),
            finish_reason: FinishReason::Other,
            usage: Usage::default(),
            response: ResponseRecord::default(),
            warnings: Vec::new(),
            is_continued: false,
            provider_metadata: None,
            sources: Vec::new(),
            files: Vec::new(),
            tripwire: None,
        }
    }
}

/// Why a tool call waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PendingKind {
    /// Approve or Decline.
    Approval,
    /// A client tool: Resume with the result.
    ClientTool,
    /// A delegation whose sub-agent's run waits for decisions of its own; it continues when
    /// that run ends.
    SubAgent,
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
    /// The sub-agent's run of a delegation ended (a [`crate::agent::delegation::SubRunEnd`]);
    /// only the runtime records it.
    Delegated(Value),
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
    /// For a client tool: the JSON Schema of the answer (none: any value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_schema: Option<Value>,
    /// For a delegation: the sub-agent's run it waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_run_id: Option<String>,
}

impl PendingCall {
    /// A delegation `call` waiting for its sub-agent's run `sub_run`.
    pub fn on_sub_run(call: &CallRecord, sub_run: String) -> Self {
        Self {
            call: call.clone(),
            kind: PendingKind::SubAgent,
            decision: None,
            resume_schema: None,
            sub_run_id: Some(sub_run),
        }
    }
}

/// A client-tool call of an earlier run of the thread, still waiting, that this run's model
/// may answer from the user's message (`auto_resume_suspended_tools`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SuspendedTool {
    /// The suspended run.
    pub run_id: String,
    /// The waiting call.
    pub call: CallRecord,
    /// JSON Schema of the answer.
    pub resume_schema: Value,
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
    /// Calls of `done` whose chunks were already streamed (they ran before the step
    /// suspended on a sub-agent): not streamed again when it continues.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub announced: Vec<String>,
}

/// Everything needed to continue a run elsewhere.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    /// The request, shared with the run record's copy (written until the first checkpoint).
    pub request: Arc<RunRequest>,
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
    /// The step waiting for decisions, when suspended (or whose calls are about to run, in a
    /// checkpoint).
    pub open_step: Option<OpenStep>,
    /// Continued after a decision: the reference leaves the task-list guidance out of the
    /// prompts from then on (kept here so a takeover continues the same way).
    #[serde(default)]
    pub resumed: bool,
    /// Waiting client-tool calls of the thread the model may answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suspended_tools: Vec<SuspendedTool>,
    /// Runs whose waiting call this run answered (they end when it does).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answered_runs: Vec<String>,
    /// The hooks the starting client answered: a continuation without a handler applies
    /// their policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_hooks: Option<ClientBinding>,
    /// The conversation `prepare_step` put in place, and how many response messages existed
    /// then: the model reads it followed by the response messages added since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_override: Option<(Vec<Message>, usize)>,
    /// Working memory: its settings and the system message computed at the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_memory: Option<crate::memory::working::RunWorkingMemory>,
    /// Semantic recall's system message of other threads' hits, found before the first step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recalled_system: Option<String>,
    /// Output processors' retry feedback, each text once, in order: system messages of every
    /// later model call of the run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processor_feedback: Vec<String>,
    /// Retries asked for in a row (reset by an accepted step).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub processor_retries: u32,
    /// The run's text as output processors rewrote the response, when they did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_text: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl RunState {
    /// The state of a new run: nothing done yet.
    pub fn new(
        request: impl Into<Arc<RunRequest>>,
        history: Vec<Message>,
        thread_existed: bool,
    ) -> Self {
        let request = request.into();
        let title_pending = !thread_existed
            && request
                .memory
                .as_ref()
                .is_some_and(|m| m.generate_title && !m.read_only && m.title.is_none());
        Self {
            request,
            history,
            response: Vec::new(),
            saved: 0,
            thread_existed,
            title_pending,
            steps: Vec::new(),
            warnings: Vec::new(),
            open_step: None,
            resumed: false,
            suspended_tools: Vec::new(),
            answered_runs: Vec::new(),
            client_hooks: None,
            prompt_override: None,
            working_memory: None,
            recalled_system: None,
            processor_feedback: Vec::new(),
            processor_retries: 0,
            result_text: None,
        }
    }

    /// The messages of the run so far, oldest first: remembered history, input, response.
    pub fn conversation(&self) -> impl Iterator<Item = &Message> {
        self.history
            .iter()
            .chain(&self.request.input)
            .chain(&self.response)
    }

    /// The messages the model reads, oldest first: history, context, input, response (or
    /// what `prepare_step` replaced them with, then the response added since).
    pub fn prompt_messages(&self) -> Box<dyn Iterator<Item = &Message> + '_> {
        match &self.prompt_override {
            Some((messages, from)) => Box::new(
                messages
                    .iter()
                    .chain(self.response.get(*from..).unwrap_or_default()),
            ),
            None => Box::new(
                self.history
                    .iter()
                    .chain(&self.request.context)
                    .chain(&self.request.input)
                    .chain(&self.response),
            ),
        }
    }
}
