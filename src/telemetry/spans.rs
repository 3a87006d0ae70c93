//! Span helpers for runs, steps, model calls, tool calls and RPCs.
//!
//! All spans are INFO `tracing` spans, so they cost next to nothing when no layer records them.
//! Children (`step_span`, `model_span`, `tool_span`) take their parent from the current span:
//! create them inside the parent's scope (`.instrument(parent)` / `parent.in_scope(..)`).
//! Attribute names follow the OpenTelemetry GenAI semantic conventions where one exists
//! (`gen_ai.*`), else `agentd.*`.

use opentelemetry::trace::{SpanContext, Status, TraceContextExt};
use opentelemetry::{Array, Context, StringValue, Value};
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::context::{RootInTrace, requested_trace_id};
use super::ids::with_root_trace_id;

/// Target of every span created here (for filters).
pub const TARGET: &str = "agentd::telemetry";

/// Longest prompt / output recorded on a span, in bytes; longer values are cut.
pub const MAX_IO_BYTES: usize = 16 * 1024;

/// Attribute holding the prompt messages (only with `record_inputs`).
pub const GEN_AI_INPUT_MESSAGES: &str = "gen_ai.input.messages";
/// Attribute holding the model output (only with `record_outputs`).
pub const GEN_AI_OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
/// Attribute holding a tool call's arguments (only with `record_inputs`).
pub const GEN_AI_TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
/// Attribute holding a tool call's result (only with `record_outputs`).
pub const GEN_AI_TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";
/// Prefix of run-span attributes copied from `tracing_options.metadata`.
pub const METADATA_PREFIX: &str = "agentd.metadata.";
/// Prefix of run-span attributes copied from `request_context` (chosen keys only).
pub const REQUEST_CONTEXT_PREFIX: &str = "agentd.request_context.";

/// What the run span records about a run.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunSpanAttrs<'a> {
    /// The agent (`gen_ai.agent.id`).
    pub agent_id: &'a str,
    /// The run (`agentd.run.id`).
    pub run_id: &'a str,
    /// The memory thread, empty when none (`gen_ai.conversation.id`).
    pub thread_id: &'a str,
    /// The memory resource, empty when none (`agentd.resource.id`).
    pub resource_id: &'a str,
    /// `tracing_options.tags` (`agentd.tags`, a string array).
    pub tags: &'a [String],
    /// `tracing_options.metadata`, one `agentd.metadata.<key>` attribute per entry.
    pub metadata: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// The request's `request_context`.
    pub request_context: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// `tracing_options.request_context_keys`: the `request_context` entries recorded, as
    /// `agentd.request_context.<key>`.
    pub request_context_keys: &'a [String],
}

/// The `agent.run` span: under `parent` (from `parent_context`; `None`: the current span),
/// linked to `links` (e.g. the original run of an approval's continuation).
pub fn run_span(attrs: &RunSpanAttrs<'_>, parent: Option<&Context>, links: &[SpanContext]) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "agent.run",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.id = attrs.agent_id,
        agentd.run.id = attrs.run_id,
        gen_ai.conversation.id = Empty,
        agentd.resource.id = Empty,
        error.type = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    if !attrs.thread_id.is_empty() {
        span.record("gen_ai.conversation.id", attrs.thread_id);
    }
    if !attrs.resource_id.is_empty() {
        span.record("agentd.resource.id", attrs.resource_id);
    }
    // Dynamic keys and arrays cannot be `tracing` fields; they go straight to the OTel span,
    // which only exists when the OTel layer is installed.
    if super::otel_layer_installed() {
        if !attrs.tags.is_empty() {
            let tags: Vec<StringValue> = attrs.tags.iter().map(|t| t.clone().into()).collect();
            span.set_attribute("agentd.tags", Value::Array(Array::String(tags)));
        }
        for (key, value) in attrs.metadata.into_iter().flatten() {
            if let Some(value) = json_attribute(value) {
                span.set_attribute(format!("{METADATA_PREFIX}{key}"), value);
            }
        }
        if let Some(context) = attrs.request_context {
            for key in attrs.request_context_keys {
                if let Some(value) = context.get(key).and_then(json_attribute) {
                    span.set_attribute(format!("{REQUEST_CONTEXT_PREFIX}{key}"), value);
                }
            }
        }
        for link in links {
            span.add_link(link.clone());
        }
    }
    apply_parent(&span, parent);
    span
}

/// The `agent.step` span of step `step_index` (0-based), a child of the current span.
pub fn step_span(step_index: u32) -> Span {
    tracing::info_span!(
        target: TARGET,
        "agent.step",
        // i64: tracing-opentelemetry records unsigned fields as strings.
        agentd.step.index = i64::from(step_index),
        error.type = Empty,
    )
}

/// A model call (`chat {model}`), a child of the current span; fill in the response with
/// [`record_model_response`].
pub fn model_span(system: &str, model: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "gen_ai.chat",
        otel.name = format!("chat {model}"),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.system = system,
        gen_ai.provider.name = system,
        gen_ai.request.model = model,
        gen_ai.response.id = Empty,
        gen_ai.response.model = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        error.type = Empty,
    )
}

/// What a model call returned, for [`record_model_response`]; empty / `None` parts are skipped.
#[derive(Clone, Copy, Debug, Default)]
pub struct ModelResponse<'a> {
    /// Provider's response id.
    pub id: &'a str,
    /// Model that answered.
    pub model: &'a str,
    /// Prompt tokens.
    pub input_tokens: Option<u64>,
    /// Completion tokens.
    pub output_tokens: Option<u64>,
    /// Why generation stopped, one per choice (`stop`, `length`, `tool_calls`, …).
    pub finish_reasons: &'a [&'a str],
}

/// Records a model call's response on its [`model_span`].
pub fn record_model_response(span: &Span, response: &ModelResponse<'_>) {
    if !response.id.is_empty() {
        span.record("gen_ai.response.id", response.id);
    }
    if !response.model.is_empty() {
        span.record("gen_ai.response.model", response.model);
    }
    // i64: tracing-opentelemetry records unsigned fields as strings.
    if let Some(tokens) = response.input_tokens {
        span.record("gen_ai.usage.input_tokens", saturating_i64(tokens));
    }
    if let Some(tokens) = response.output_tokens {
        span.record("gen_ai.usage.output_tokens", saturating_i64(tokens));
    }
    if !response.finish_reasons.is_empty() && super::otel_layer_installed() {
        let reasons = response
            .finish_reasons
            .iter()
            .map(|r| StringValue::from(r.to_string()))
            .collect();
        span.set_attribute(
            "gen_ai.response.finish_reasons",
            Value::Array(Array::String(reasons)),
        );
    }
}

/// A hook call (`hook {kind}`), a child of the current span (the step, or its tool call);
/// its outcome is recorded when the answer (or the failure) comes.
pub fn hook_span(kind: &'static str, call_id: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "agentd.hook",
        otel.name = format!("hook {kind}"),
        agentd.hook.kind = kind,
        agentd.hook.call_id = call_id,
        agentd.hook.outcome = Empty,
        error.type = Empty,
    )
}

/// A tool call (`execute_tool {name}`), a child of the current span.
pub fn tool_span(name: &str, call_id: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "gen_ai.execute_tool",
        otel.name = format!("execute_tool {name}"),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        gen_ai.tool.call.id = call_id,
        gen_ai.tool.type = "function",
        error.type = Empty,
    )
}

/// An agentd call (`{service}/{method}`, server kind; made by `api::layer::RpcLayer`) under `parent`
/// (`None`: the current span).
pub fn rpc_span(service: &str, method: &str, parent: Option<&Context>) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "rpc",
        otel.name = format!("{service}/{method}"),
        otel.kind = "server",
        rpc.system = "grpc",
        rpc.service = service,
        rpc.method = method,
        error.type = Empty,
    );
    apply_parent(&span, parent);
    span
}

/// Marks a span failed: OTel status `ERROR` with `message`, and `error.type` `_OTHER` (the
/// semantic conventions' catch-all class). Never pass secrets.
pub fn record_error(span: &Span, message: &str) {
    span.record("error.type", "_OTHER");
    span.set_status(Status::error(message.to_owned()));
}

/// The (32-hex trace id, 16-hex span id) of a span; `None` when the OTel layer is not
/// installed (or the span is disabled). Starts the OTel span, so call it after the parent is
/// set (the helpers here set it before returning).
pub fn trace_ids(span: &Span) -> Option<(String, String)> {
    if span.is_disabled() {
        return None;
    }
    let cx = span.context();
    let span_context = cx.span().span_context().clone();
    span_context.is_valid().then(|| {
        (
            span_context.trace_id().to_string(),
            span_context.span_id().to_string(),
        )
    })
}

/// The OTel context of a span, to pass as an explicit `parent` elsewhere (e.g. the
/// continuation an Approve call starts); empty when the OTel layer is not installed.
pub fn otel_context(span: &Span) -> Context {
    span.context()
}

/// The ids for the `finish` chunk / response metadata: the run span's ids when OTel records
/// spans; otherwise the caller's trace id (from `parent`) and an empty span id, since no span
/// of ours exists; `("", "")` when the caller named no trace either.
pub fn run_trace_ids(span: &Span, parent: Option<&Context>) -> (String, String) {
    if let Some(ids) = trace_ids(span) {
        return ids;
    }
    let trace_id = parent
        .and_then(requested_trace_id)
        .map(|id| id.to_string())
        .unwrap_or_default();
    (trace_id, String::new())
}

/// Whether prompts and outputs go on spans, from `tracing_options.record_inputs/outputs`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordIo {
    /// Record prompts and tool arguments.
    pub inputs: bool,
    /// Record outputs and tool results.
    pub outputs: bool,
}

impl RecordIo {
    /// Records an input (e.g. [`GEN_AI_INPUT_MESSAGES`]) if inputs are recorded.
    pub fn input(&self, span: &Span, key: &'static str, value: &str) {
        if self.inputs {
            record_io(span, key, value);
        }
    }

    /// Records an output (e.g. [`GEN_AI_OUTPUT_MESSAGES`]) if outputs are recorded.
    pub fn output(&self, span: &Span, key: &'static str, value: &str) {
        if self.outputs {
            record_io(span, key, value);
        }
    }
}

/// Records a prompt or output on a span, cut to [`MAX_IO_BYTES`]; the caller checks the
/// request's flags (or uses [`RecordIo`]).
pub fn record_io(span: &Span, key: &'static str, value: &str) {
    if span.is_disabled() || !super::otel_layer_installed() {
        return;
    }
    span.set_attribute(
        key,
        crate::error_text::prefix(value, MAX_IO_BYTES).to_owned(),
    );
}

/// Sets the parent BEFORE the span is first entered: tracing-opentelemetry 0.34 silently
/// ignores a parent set later.
fn apply_parent(span: &Span, parent: Option<&Context>) {
    let Some(parent) = parent else {
        return;
    };
    if span.is_disabled() || !super::otel_layer_installed() {
        return;
    }
    if let Some(RootInTrace(trace_id)) = parent.get::<RootInTrace>() {
        // A trace without a parent span: make this a root span and have the id generator hand
        // out the requested trace id while the OTel span is built (now, by `context()`).
        let _ = span.set_parent(Context::new());
        with_root_trace_id(*trace_id, || {
            let _ = span.context();
        });
    } else if let Err(e) = span.set_parent(parent.clone()) {
        tracing::debug!(target: TARGET, "trace parent not set: {e}");
    }
}

/// A JSON value as an attribute: scalars as themselves, arrays and objects as JSON text, null
/// skipped.
fn json_attribute(value: &serde_json::Value) -> Option<Value> {
    Some(match value {
        serde_json::Value::Null => return None,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::I64(i),
            None => Value::F64(n.as_f64()?),
        },
        serde_json::Value::String(s) => Value::String(s.clone().into()),
        other => Value::String(other.to_string().into()),
    })
}

fn saturating_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_values_become_attributes() {
        assert_eq!(json_attribute(&json!(null)), None);
        assert_eq!(json_attribute(&json!(true)), Some(Value::Bool(true)));
        assert_eq!(json_attribute(&json!(3)), Some(Value::I64(3)));
        assert_eq!(json_attribute(&json!(2.5)), Some(Value::F64(2.5)));
        assert_eq!(json_attribute(&json!("x")), Some(Value::from("x")));
        assert_eq!(
            json_attribute(&json!({"a": [1]})),
            Some(Value::from(r#"{"a":[1]}"#))
        );
    }

    #[test]
    fn without_a_subscriber_spans_are_disabled_and_ids_come_from_the_caller() {
        let parent = super::super::parent_context(
            &http::HeaderMap::new(),
            "4bf92f3577b34da6a3ce929d0e0e4736",
            "00f067aa0ba902b7",
        )
        .unwrap();
        let span = run_span(&RunSpanAttrs::default(), parent.as_ref(), &[]);
        assert!(trace_ids(&span).is_none());
        assert_eq!(
            run_trace_ids(&span, parent.as_ref()),
            ("4bf92f3577b34da6a3ce929d0e0e4736".to_owned(), String::new())
        );
        assert_eq!(run_trace_ids(&span, None), (String::new(), String::new()));
    }
}
