//! Logging setup: `tracing` to stdout, human-readable or JSON.

use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat};

/// Installs the global subscriber; an invalid filter is an error naming it.
pub fn init_logging(config: &LogConfig) -> anyhow::Result<()> {
    let filter = EnvFilter::try_new(&config.filter)
        .map_err(|e| anyhow::anyhow!("invalid log filter {:?}: {e}", config.filter))?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let installed = match config.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    installed.map_err(|e| anyhow::anyhow!("cannot install the logger: {e}"))
}

// --- Span and metric helpers used by the agent loop. -------------------------------------------

use std::sync::OnceLock;
use std::time::Duration;

use tracing::Span;
use tracing::field::Empty;

use crate::model::Usage;

/// The span of one step.
pub fn step_span(index: u32) -> Span {
    tracing::info_span!("agent.step", agentd.step.index = index)
}

/// The span of one model call (GenAI semantic conventions).
pub fn model_span(system: &str, model: &str) -> Span {
    tracing::info_span!(
        "chat",
        gen_ai.operation.name = "chat",
        gen_ai.system = system,
        gen_ai.request.model = model,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.response.id = Empty,
        gen_ai.response.model = Empty,
    )
}

/// Records a model call's outcome on its span.
pub fn record_model_result(span: &Span, usage: &Usage, reason: &str, id: &str, model: &str) {
    span.record("gen_ai.usage.input_tokens", usage.input_tokens);
    span.record("gen_ai.usage.output_tokens", usage.output_tokens);
    span.record("gen_ai.response.finish_reasons", reason);
    span.record("gen_ai.response.id", id);
    span.record("gen_ai.response.model", model);
}

/// The span of one tool call.
pub fn tool_span(name: &str, call_id: &str) -> Span {
    tracing::info_span!(
        "execute_tool",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        gen_ai.tool.call.id = call_id,
        otel.status_code = Empty,
        otel.status_message = Empty,
    )
}

/// Marks a span as failed.
pub fn record_error(span: &Span, message: &str) {
    span.record("otel.status_code", "ERROR");
    span.record("otel.status_message", message);
}

/// Run metrics.
#[derive(Debug, Default)]
pub struct Metrics;

impl Metrics {
    /// A model call ended.
    pub fn model_call(&self, _elapsed: Duration) {}
    /// A tool call ended.
    pub fn tool_call(&self, _name: &str, _elapsed: Duration, _failed: bool) {}
    /// Tokens were used.
    pub fn tokens(&self, _input: u64, _output: u64) {}
}

/// The process-wide metrics.
pub fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::default)
}
