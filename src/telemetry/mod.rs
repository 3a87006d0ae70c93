//! Logging and OpenTelemetry: the `tracing` subscriber, OTLP export of spans and metrics,
//! the trace parent of a request, and span helpers for runs.
//!
//! - [`init`] installs the subscriber; spans and metrics are exported only when an OTLP
//!   endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT`, see [`OtelSettings::from_env`]).
//! - [`parent_context`] reads the trace a request joins; [`run_span`] and friends build the
//!   span tree `agent.run` → `agent.step` → `chat {model}` / `execute_tool {name}`.
//! - [`metrics`] holds the instruments; [`prometheus_text`] renders them for `/metrics`.

mod context;
mod ids;
mod init;
mod metrics;
mod prometheus;
mod spans;

use std::sync::atomic::{AtomicBool, Ordering};

pub use context::{
    InvalidTraceField, PARENT_SPAN_ID_FIELD, TRACE_ID_FIELD, TRACEPARENT, TRACESTATE,
    X_PARENT_SPAN_ID, X_SPAN_ID, X_TRACE_ID, insert_trace_ids, parent_context, remote_span_context,
};
pub use init::{OtelSettings, OtlpProtocol, TelemetryGuard, init, init_with};
pub use metrics::{ActiveStream, Metrics, metrics};
pub use prometheus::{PROMETHEUS_CONTENT_TYPE, prometheus_enabled, prometheus_text};
pub use spans::{
    GEN_AI_INPUT_MESSAGES, GEN_AI_OUTPUT_MESSAGES, GEN_AI_TOOL_CALL_ARGUMENTS,
    GEN_AI_TOOL_CALL_RESULT, MAX_IO_BYTES, METADATA_PREFIX, ModelResponse, REQUEST_CONTEXT_PREFIX,
    RecordIo, RunSpanAttrs, TARGET, hook_span, model_span, otel_context, record_error, record_io,
    record_model_response, rpc_span, run_span, run_trace_ids, step_span, tool_span, trace_ids,
};

/// Set once the OTel layer is part of the global subscriber; lets span helpers skip work
/// (attribute conversion, links) that only that layer would use.
static OTEL_LAYER: AtomicBool = AtomicBool::new(false);

/// Whether spans are exported (the OTel layer is installed).
pub fn otel_layer_installed() -> bool {
    OTEL_LAYER.load(Ordering::Relaxed)
}
