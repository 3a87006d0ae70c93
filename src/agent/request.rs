//! A run's request in domain terms (converted from `GenerateRequest` at the gRPC edge).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::message::Message;
use crate::config::{AgentConfig, CompletionConfig, ProcessorOverrides};
use crate::model::{FinishReason, ModelSettings, ToolChoice};

/// A declarative stop condition, checked after each step that would continue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum StopCondition {
    /// Holds once this many steps ran.
    StepCountIs(u32),
    /// Holds once the last step called this tool.
    HasToolCall(String),
    /// Holds when the last step ended with this reason.
    FinishReasonIs(FinishReason),
    /// Holds once the run used at least this many total tokens.
    TotalTokensAtLeast(u64),
}

/// What to do when the structured object does not validate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorStrategy {
    /// The run fails.
    #[default]
    Strict,
    /// A warning; no object.
    Warn,
    /// The fallback value is returned.
    Fallback,
}

/// Structured output options.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StructuredOutput {
    /// JSON Schema of the object.
    pub schema: Value,
    /// What a validation failure does.
    pub error_strategy: ErrorStrategy,
    /// Returned with the fallback strategy.
    pub fallback_value: Option<Value>,
    /// Extra instructions on producing the object.
    pub instructions: Option<String>,
    /// How the schema reaches the model (`None`: native when the provider supports it, else
    /// in the system prompt).
    pub injection: Option<Injection>,
    /// A separate structuring model, `provider/model`.
    #[serde(default)]
    pub model: Option<String>,
}

/// How the schema reaches the model (the reference's `jsonPromptInjection`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Injection {
    /// The provider's `response_format`.
    Native,
    /// Appended to the first system message.
    System,
    /// A text part of the latest user message.
    Inline,
    /// Native when the provider supports it, else inline.
    Auto,
}

/// Conversation memory of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryRequest {
    /// Thread id.
    pub thread_id: String,
    /// Resource owning the thread.
    pub resource_id: String,
    /// Title stored when the thread is created.
    pub title: Option<String>,
    /// Metadata stored when the thread is created.
    pub metadata: Map<String, Value>,
    /// Remembered messages sent to the model (0 = none).
    pub last_messages: usize,
    /// Save nothing.
    pub read_only: bool,
    /// Generate a title for a thread this run creates.
    #[serde(default)]
    pub generate_title: bool,
    /// Wait for the title before `finish` and stream it (`data-thread-title`).
    #[serde(default)]
    pub emit_title_event: bool,
    /// Leave remembered tool calls without a result out of the prompt (else they are answered
    /// by a pending placeholder).
    #[serde(default = "yes")]
    pub filter_incomplete_tool_calls: bool,
    /// The request's changes to the agent's working-memory settings.
    #[serde(
        default,
        skip_serializing_if = "crate::memory::working::Overrides::is_empty"
    )]
    pub working_memory: crate::memory::working::Overrides,
    /// The request's semantic recall settings (over the agent's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semantic_recall: Option<crate::memory::RecallOverride>,
}

fn yes() -> bool {
    true
}

/// A tool executed by the caller.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClientTool {
    /// Tool name.
    pub name: String,
    /// Description for the model.
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
    /// JSON Schema of the result the caller answers with.
    #[serde(default)]
    pub resume_schema: Option<Value>,
}

/// Tracing options of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TracingRequest {
    /// Trace to join.
    pub trace_id: String,
    /// Parent span in that trace.
    pub parent_span_id: String,
    /// Attributes for the run span.
    pub metadata: Map<String, Value>,
    /// Tags for the run span.
    pub tags: Vec<String>,
    /// Request-context keys recorded on the run span.
    pub request_context_keys: Vec<String>,
    /// Record prompts on spans.
    pub record_inputs: bool,
    /// Record outputs on spans.
    pub record_outputs: bool,
}

/// What happens when the caller goes away mid-run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum OnDisconnect {
    /// Stop the run.
    #[default]
    Abort,
    /// Let it finish; re-attach with Observe.
    Continue,
}

/// Everything a run was asked for, validated.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunRequest {
    /// The agent.
    pub agent_id: String,
    /// Caller-chosen run id.
    pub run_id: Option<String>,
    /// Input messages (the prompt shortcut already appended).
    pub input: Vec<Message>,
    /// Step cap.
    pub max_steps: Option<u32>,
    /// Stop conditions.
    pub stop_when: Vec<StopCondition>,
    /// Tools offered (empty: all).
    pub active_tools: Vec<String>,
    /// Tool choice passed to the model.
    pub tool_choice: Option<ToolChoice>,
    /// Every tool call needs approval.
    pub require_tool_approval: bool,
    /// Resume suspended tools from the next user message.
    pub auto_resume_suspended_tools: bool,
    /// Tool calls of one step running at once.
    pub tool_call_concurrency: Option<u32>,
    /// Extra messages after history.
    pub context: Vec<Message>,
    /// Structured output.
    pub structured_output: Option<StructuredOutput>,
    /// Instructions override.
    pub instructions: Option<String>,
    /// Extra system messages.
    pub system: Vec<String>,
    /// Memory.
    pub memory: Option<MemoryRequest>,
    /// Model settings.
    pub settings: ModelSettings,
    /// Client tools.
    pub client_tools: Vec<ClientTool>,
    /// Options by provider (`{"openai": {...}}`), as the reference's `providerOptions`.
    pub provider_options: Map<String, Value>,
    /// Raw fields merged into the provider's request body last.
    #[serde(default)]
    pub extra_body: Map<String, Value>,
    /// Request context.
    pub request_context: Map<String, Value>,
    /// Tracing.
    pub tracing: TracingRequest,
    /// Stream raw provider events.
    pub include_raw: bool,
    /// Save after every step.
    pub save_per_step: bool,
    /// Idempotency key.
    pub idempotency_key: Option<String>,
    /// Disconnect behaviour.
    pub on_disconnect: OnDisconnect,
    /// Completion scorers (the request's, else the agent's).
    #[serde(default)]
    pub is_task_complete: Option<CompletionConfig>,
    /// The tenant starting the run (empty: unscoped); set by the API from the caller.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    /// The request's processor lists and retries, each replacing the agent's.
    #[serde(default, skip_serializing_if = "ProcessorOverrides::is_empty")]
    pub processors: ProcessorOverrides,
    /// Set on a sub-agent's run: the supervisor's run and call that started it (never from a
    /// client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentLink>,
    /// The request's scorers, replacing the agent's (`None`: the agent's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scorers: Option<Vec<crate::agent::scorers::scorer::RequestedScorer>>,
    /// Scoring ends before `finish`, whose result carries what the scorers read and gave.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub return_scorer_data: bool,
}

/// The supervisor's side of a sub-agent's run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentLink {
    /// The supervisor's run.
    pub run_id: String,
    /// Its delegation call.
    pub tool_call_id: String,
    /// The delegation tool (`agent-{key}`).
    pub tool_name: String,
    /// Levels of supervisors above this run (1: a direct sub-agent of a top-level run).
    pub depth: u32,
    /// The thread the supervisor's result names for this run (`{thread}-{uuid}`, or a bare
    /// uuid without memory).
    pub sub_thread_id: String,
    /// The resource the supervisor's result names for this run (`{resource}-{key}`).
    pub sub_resource_id: String,
    /// The top supervisor's thread and resource, where pending decisions of the whole tree
    /// are listed (empty without memory).
    pub root_thread_id: String,
    /// See `root_thread_id`.
    pub root_resource_id: String,
}

impl RunRequest {
    /// Fills what the request leaves unset from the agent's `[agents.default_options]` and its
    /// completion scorers; the request wins.
    pub fn apply_defaults(&mut self, agent: &AgentConfig) {
        if self.is_task_complete.is_none() {
            self.is_task_complete.clone_from(&agent.is_task_complete);
        }
        let defaults = &agent.default_options;
        self.max_steps = self.max_steps.or(defaults.max_steps);
        self.tool_call_concurrency = self
            .tool_call_concurrency
            .or(defaults.tool_call_concurrency);
        // `require_tool_approval` is on the agent's tools already (see `Agents::from_config`).
        self.settings.temperature = self.settings.temperature.or(defaults.temperature);
        self.settings.max_output_tokens = self
            .settings
            .max_output_tokens
            .or(defaults.max_output_tokens);
    }

    /// A fingerprint of the request for idempotency: equal requests give equal fingerprints.
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        // Message ids and times are generated per call; the content is what identifies a request.
        let strip = |messages: &[Message]| -> Vec<Value> {
            messages
                .iter()
                .map(|m| serde_json::json!({"role": m.role, "parts": m.parts}))
                .collect()
        };
        let mut copy = self.clone();
        copy.input.clear();
        copy.context.clear();
        let body = serde_json::json!({
            "request": copy,
            "input": strip(&self.input),
            "context": strip(&self.context),
        });
        hasher.update(body.to_string().as_bytes());
        hex::encode(hasher.finalize())
    }
}
