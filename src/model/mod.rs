//! Model provider layer: the provider-neutral request/event types, the [`ModelProvider`] trait,
//! an OpenAI-compatible streaming client ([`OpenAiProvider`]) and, with the `mock` feature, a
//! scripted mock server (`MockOpenAi`) for tests and demos.
//!
//! The agent loop talks only to [`ModelProvider`]; everything provider-specific (wire format,
//! retries, timeouts, SSE quirks) stays behind it.

pub mod embed;
#[cfg(feature = "mock")]
mod mock;
mod openai;
mod sse;
#[cfg(feature = "mock")]
mod worker;

use std::collections::BTreeMap;
use std::fmt;
use std::ops::{Add, AddAssign};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Deserializer};
use tokio_util::sync::CancellationToken;

pub use embed::{Embedder, OpenAiEmbedder};
#[cfg(feature = "mock")]
pub use mock::{
    Fallback, MOCK_EMBEDDING_DIMENSIONS, MockOpenAi, MockReply, MockRich, MockUsageDetails,
    mock_embedding, planner_reply,
};
pub use openai::OpenAiProvider;
pub use sse::{SseEvent, SseParser};
#[cfg(feature = "mock")]
pub use worker::{call_reply, scripted_reply, worker_reply};

/// One call to a chat model: what to send and how to sample.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelRequest {
    /// The provider's model name, e.g. `gpt-4o-mini`.
    pub model: String,
    /// The conversation, oldest first.
    pub messages: Vec<ChatMessage>,
    /// Tools the model may call (shared with the agent's tool specs).
    pub tools: Vec<std::sync::Arc<ToolDefinition>>,
    /// How the model must use the tools; `None` leaves it to the provider.
    pub tool_choice: Option<ToolChoice>,
    /// Sampling and length settings.
    pub settings: ModelSettings,
    /// Ask for JSON output, with or without a schema.
    pub response_format: Option<ResponseFormat>,
    /// Options by provider, as the reference's `providerOptions` (`{"openai": {...}}`): each
    /// provider reads its own keys and ignores the others.
    pub provider_options: serde_json::Map<String, serde_json::Value>,
    /// Raw top-level body fields, merged last (they win).
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// Emit [`ModelEvent::Raw`] for every SSE data payload.
    pub include_raw: bool,
}

/// One message of the conversation sent to the model.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatMessage {
    /// Instructions from the system.
    System {
        /// The instruction text.
        content: String,
    },
    /// Input from the user: text and media parts.
    User {
        /// The parts, in order.
        content: Vec<ContentPart>,
    },
    /// A previous model turn: text and/or tool calls.
    Assistant {
        /// The text the model produced, if any.
        content: Option<String>,
        /// The tool calls the model made.
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        /// The id of the call this answers.
        tool_call_id: String,
        /// The result as text (usually JSON).
        content: String,
    },
}

impl ChatMessage {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::System {
            content: content.into(),
        }
    }

    /// A user message with a single text part.
    pub fn user(text: impl Into<String>) -> Self {
        Self::User {
            content: vec![ContentPart::Text(text.into())],
        }
    }

    /// An assistant message with text only.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::Assistant {
            content: Some(text.into()),
            tool_calls: Vec::new(),
        }
    }

    /// A tool result message.
    pub fn tool(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self::Tool {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
        }
    }
}

/// One part of a user message.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentPart {
    /// Plain text.
    Text(String),
    /// An image the provider fetches by URL (or a `data:` URL).
    ImageUrl {
        /// The image URL.
        url: String,
        /// OpenAI's `detail` hint: `low`, `high` or `auto`.
        detail: Option<String>,
    },
    /// Image bytes, sent inline as a base64 `data:` URL.
    ImageData {
        /// The raw image bytes.
        data: Vec<u8>,
        /// The image's media type, e.g. `image/png`.
        mime_type: String,
    },
    /// A file (PDF, …), sent inline as base64; images are sent as images.
    File {
        /// The raw file bytes.
        data: Vec<u8>,
        /// The file's media type.
        mime_type: String,
        /// The file name shown to the model.
        filename: Option<String>,
    },
}

/// A tool the model may call. Built once per agent (and shared by its runs), so its wire
/// form is serialized once, not on every model call.
#[derive(Debug, Clone)]
pub struct ToolDefinition {
    /// The tool's name, as the model must spell it.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the tool's arguments.
    pub parameters: serde_json::Value,
    /// The Chat Completions `tools[]` entry, serialized on first use.
    function_json: std::sync::OnceLock<Box<serde_json::value::RawValue>>,
}

impl ToolDefinition {
    /// A tool definition.
    pub fn new(name: String, description: String, parameters: serde_json::Value) -> Self {
        Self {
            name,
            description,
            parameters,
            function_json: std::sync::OnceLock::new(),
        }
    }

    /// The Chat Completions `tools[]` entry (`{"type": "function", "function": {...}}`),
    /// serialized once per definition.
    pub fn function_json(&self) -> &serde_json::value::RawValue {
        self.function_json.get_or_init(|| {
            let mut function = serde_json::Map::new();
            function.insert("name".into(), self.name.clone().into());
            if !self.description.is_empty() {
                function.insert("description".into(), self.description.clone().into());
            }
            let parameters = match &self.parameters {
                // OpenAI insists on an object schema even for argument-less tools.
                serde_json::Value::Null => serde_json::json!({"type": "object", "properties": {}}),
                schema => schema.clone(),
            };
            function.insert("parameters".into(), parameters);
            let entry = serde_json::json!({"type": "function", "function": function});
            // A `Value` always serializes, and its text is valid JSON.
            serde_json::value::to_raw_value(&entry)
                .unwrap_or_else(|_| serde_json::value::RawValue::NULL.to_owned())
        })
    }
}

impl PartialEq for ToolDefinition {
    fn eq(&self, other: &Self) -> bool {
        // The cached wire form follows from the other fields.
        (&self.name, &self.description, &self.parameters)
            == (&other.name, &other.description, &other.parameters)
    }
}

/// How the model must use the offered tools.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// The model must not call tools.
    None,
    /// The model must call at least one tool.
    Required,
    /// The model must call this tool.
    Tool(String),
}

/// Sampling and length settings; `None` leaves the provider's default.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelSettings {
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Maximum number of tokens to generate (sent as `max_tokens`).
    pub max_output_tokens: Option<u32>,
    /// Nucleus sampling mass.
    pub top_p: Option<f64>,
    /// Top-k sampling; only sent when set, since OpenAI itself rejects it.
    pub top_k: Option<u32>,
    /// Presence penalty.
    pub presence_penalty: Option<f64>,
    /// Frequency penalty.
    pub frequency_penalty: Option<f64>,
    /// Sequences that stop generation.
    pub stop_sequences: Vec<String>,
    /// Seed for reproducible sampling.
    pub seed: Option<i64>,
    /// Retries for this call; overrides [`ProviderConfig::max_retries`].
    pub max_retries: Option<u32>,
}

/// Ask the model for JSON output.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseFormat {
    /// JSON matching a schema (native structured output).
    JsonSchema {
        /// The schema's name, as the provider requires one.
        name: String,
        /// The JSON Schema.
        schema: serde_json::Value,
        /// Ask the provider to enforce the schema strictly.
        strict: bool,
    },
    /// Any JSON object.
    JsonObject,
}

/// One tool call made by the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The call's id, echoed back in the tool result.
    pub id: String,
    /// The called tool's name.
    pub name: String,
    /// The arguments as raw JSON text.
    pub arguments: String,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum FinishReason {
    /// Natural end or a stop sequence.
    Stop,
    /// The output token limit was reached.
    Length,
    /// The provider's content filter stopped the output.
    ContentFilter,
    /// The model wants tools to run.
    ToolCalls,
    /// The provider reported an error.
    Error,
    /// A reason this client does not know.
    Other,
}

impl FinishReason {
    /// The name used in agentd chunks (`stop`, `length`, `content-filter`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ContentFilter => "content-filter",
            Self::ToolCalls => "tool-calls",
            Self::Error => "error",
            Self::Other => "other",
        }
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Token counts of one call (or a sum of calls).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens (reasoning included).
    pub output_tokens: u64,
    /// Input plus output, as reported.
    pub total_tokens: u64,
    /// Generated tokens spent on reasoning.
    pub reasoning_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    pub cached_input_tokens: u64,
}

impl Add for Usage {
    type Output = Usage;

    fn add(mut self, rhs: Usage) -> Usage {
        self += rhs;
        self
    }
}

impl AddAssign for Usage {
    fn add_assign(&mut self, rhs: Usage) {
        // Saturating: a misbehaving provider must not be able to panic a debug build.
        self.input_tokens = self.input_tokens.saturating_add(rhs.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(rhs.output_tokens);
        self.total_tokens = self.total_tokens.saturating_add(rhs.total_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(rhs.reasoning_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(rhs.cached_input_tokens);
    }
}

impl std::iter::Sum for Usage {
    fn sum<I: Iterator<Item = Usage>>(iter: I) -> Usage {
        iter.fold(Usage::default(), Add::add)
    }
}

/// One event of a streamed model response.
///
/// Order: `ResponseMetadata` first (exactly once), then the `Warning`s about the request, then
/// deltas, sources, files and provider warnings as they arrive, then one `ToolCallEnd` per call
/// in index order, then `Finish` exactly once. `Raw` events precede the events derived from the
/// same payload.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// Response id, model and the provider headers worth keeping.
    ResponseMetadata {
        /// The provider's response id.
        id: Option<String>,
        /// The model that actually answered.
        model: Option<String>,
        /// Unix seconds when the response was created.
        created: Option<i64>,
        /// The response headers (lower-case names; repeated ones joined with `, `), except
        /// hop-by-hop headers (`connection`, `keep-alive`, `transfer-encoding`, …) and cookies
        /// (`set-cookie`, `set-cookie2`, `cookie`).
        headers: BTreeMap<String, String>,
    },
    /// A piece of the answer text.
    TextDelta(String),
    /// A piece of the model's reasoning (`reasoning_content` / `reasoning`).
    ReasoningDelta(String),
    /// A tool call begins.
    ToolCallStart {
        /// Position of the call in this response.
        index: u32,
        /// The call's id.
        id: String,
        /// The called tool's name.
        name: String,
    },
    /// A fragment of a tool call's arguments.
    ToolCallDelta {
        /// Position of the call in this response.
        index: u32,
        /// The call's id.
        id: String,
        /// The next piece of the JSON arguments text.
        args_delta: String,
    },
    /// A tool call is complete.
    ToolCallEnd {
        /// Position of the call in this response.
        index: u32,
        /// The call's id.
        id: String,
        /// The called tool's name.
        name: String,
        /// The full JSON arguments text (`{}` when the model sent none).
        arguments: String,
    },
    /// A warning about the call (an unsupported setting, a provider notice).
    Warning(String),
    /// A citation the answer refers to.
    Source {
        /// Source id (generated when the provider gives none).
        id: String,
        /// `url` or `document`.
        source_type: String,
        /// Where it is.
        url: String,
        /// Its title.
        title: String,
    },
    /// A file the model generated (an image, audio).
    File {
        /// The bytes.
        data: Vec<u8>,
        /// Media type.
        mime_type: String,
    },
    /// The response is complete.
    Finish {
        /// Why the model stopped.
        reason: FinishReason,
        /// Token counts (zeros when the provider reported none).
        usage: Usage,
        /// Provider-specific metadata, keyed by provider (`{"openai": {...}}`).
        provider_metadata: Option<serde_json::Value>,
    },
    /// A provider payload as received (only with [`ModelRequest::include_raw`]).
    Raw(serde_json::Value),
}

/// The events of one model call.
pub type ModelStream = futures::stream::BoxStream<'static, Result<ModelEvent, ModelError>>;

/// A failed model call. Never carries the API key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// The provider answered with an error status.
    #[error("provider returned HTTP {status}: {body}")]
    Http {
        /// The HTTP status code.
        status: u16,
        /// The provider's error body, truncated to about 2 KiB.
        body: String,
        /// Whether trying again later may succeed (429, 5xx).
        retryable: bool,
    },
    /// The provider could not be reached.
    #[error("cannot connect to provider: {0}")]
    Connect(String),
    /// The provider took too long (to connect, to answer, or between events).
    #[error("provider timed out: {0}")]
    Timeout(String),
    /// The provider's response could not be understood, or reported an error mid-stream.
    #[error("provider protocol error: {0}")]
    Protocol(String),
    /// The provider configuration is unusable (e.g. the API key variable is not set).
    #[error("invalid provider configuration: {0}")]
    Config(String),
    /// The call was cancelled by the caller.
    #[error("model call cancelled")]
    Cancelled,
}

impl ModelError {
    /// Whether the same call may succeed if tried again.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Http { retryable, .. } => *retryable,
            Self::Connect(_) | Self::Timeout(_) => true,
            Self::Protocol(_) | Self::Config(_) | Self::Cancelled => false,
        }
    }
}

/// A source of model responses (an OpenAI-compatible endpoint, a scripted fake, …).
#[async_trait]
pub trait ModelProvider: Send + Sync {
    /// The provider's configured name.
    fn name(&self) -> &str;

    /// Whether the provider takes a native `response_format` JSON schema.
    fn supports_structured_output(&self) -> bool;

    /// Start one model call; connection and HTTP status errors are returned here, later
    /// failures as stream items. Cancelling `cancel` or dropping the stream drops the request.
    async fn stream(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> Result<ModelStream, ModelError>;
}

/// How to reach one OpenAI-compatible provider.
///
/// Deserializes from config (unknown fields rejected). Durations are either a number of seconds
/// (`10`, `0.5`) or a string with a unit: `"500ms"`, `"10s"`, `"2m"`, `"1h"` (a bare `"10"`
/// means seconds).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The provider's name, used in logs and errors.
    pub name: String,
    /// The API root, e.g. `https://api.openai.com/v1`; `/chat/completions` is appended.
    pub base_url: String,
    /// Name of the environment variable holding the API key (read once, at construction).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Extra headers sent with every request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Ask for a final usage chunk (`stream_options.include_usage`).
    #[serde(default = "default_true")]
    pub include_usage: bool,
    /// Whether the provider supports `response_format: json_schema`.
    #[serde(default = "default_true")]
    pub structured_output: bool,
    /// Maximum time to establish a connection.
    #[serde(
        default = "default_connect_timeout",
        deserialize_with = "deserialize_duration"
    )]
    pub connect_timeout: Duration,
    /// Maximum silence: waiting for response headers, and between received stream bytes.
    #[serde(
        default = "default_idle_timeout",
        deserialize_with = "deserialize_duration"
    )]
    pub idle_timeout: Duration,
    /// Retries on connect errors, 429 and 5xx, unless the request sets its own.
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// Speak HTTP/2 from the first byte (h2c on `http://`), so one connection carries every
    /// concurrent call; `https://` providers negotiate HTTP/2 by themselves. Only for servers
    /// known to speak it: an HTTP/1-only server refuses every call. Calls past the server's
    /// concurrent-stream limit wait for a free stream (the client opens no second connection).
    #[serde(default)]
    pub http2_prior_knowledge: bool,
    /// A missing key is not a configuration error (`--check-config` passes; its agents fail
    /// when run, saying why).
    #[serde(default)]
    pub optional: bool,
}

impl ProviderConfig {
    /// A config with the given name and base URL, no key, and default limits.
    pub fn new(name: impl Into<String>, base_url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            base_url: base_url.into(),
            api_key_env: None,
            headers: BTreeMap::new(),
            include_usage: true,
            structured_output: true,
            connect_timeout: default_connect_timeout(),
            idle_timeout: default_idle_timeout(),
            max_retries: default_max_retries(),
            http2_prior_knowledge: false,
            optional: false,
        }
    }
}

fn default_true() -> bool {
    true
}

fn default_connect_timeout() -> Duration {
    Duration::from_secs(10)
}

fn default_idle_timeout() -> Duration {
    Duration::from_secs(60)
}

fn default_max_retries() -> u32 {
    2
}

/// Accepts seconds as a number, or a string such as `"250ms"`, `"10s"`, `"2m"`, `"1h"`.
fn deserialize_duration<'de, D: Deserializer<'de>>(de: D) -> Result<Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Seconds(f64),
        Text(String),
    }
    let seconds = match Raw::deserialize(de)? {
        Raw::Seconds(s) => s,
        Raw::Text(text) => parse_duration_secs(&text).map_err(serde::de::Error::custom)?,
    };
    Duration::try_from_secs_f64(seconds).map_err(serde::de::Error::custom)
}

fn parse_duration_secs(text: &str) -> Result<f64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("invalid duration {text:?}: expected e.g. \"10s\" or \"500ms\""))?;
    let scale = match unit.trim() {
        "ms" => 0.001,
        "" | "s" | "sec" | "secs" => 1.0,
        "m" | "min" | "mins" => 60.0,
        "h" => 3600.0,
        other => return Err(format!("invalid duration unit {other:?} in {text:?}")),
    };
    Ok(number * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration_secs("500ms"), Ok(0.5));
        assert_eq!(parse_duration_secs("10s"), Ok(10.0));
        assert_eq!(parse_duration_secs(" 2m "), Ok(120.0));
        assert_eq!(parse_duration_secs("1.5"), Ok(1.5));
        assert!(parse_duration_secs("ten").is_err());
        assert!(parse_duration_secs("5d").is_err());
    }

    #[test]
    fn usage_adds_fieldwise() {
        let a = Usage {
            input_tokens: 1,
            output_tokens: 2,
            total_tokens: 3,
            reasoning_tokens: 4,
            cached_input_tokens: 5,
        };
        let sum: Usage = [a, a].into_iter().sum();
        assert_eq!(sum.total_tokens, 6);
        assert_eq!(sum.cached_input_tokens, 10);
        assert_eq!(a + Usage::default(), a);
    }
}
