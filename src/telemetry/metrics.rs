//! agentd's metrics, exported over OTLP by the global meter provider `init` installs.
//!
//! Instruments are created once, on first use of [`metrics`]: call `init` before anything
//! records a metric, or the instruments stay bound to the no-op provider (which is also what
//! happens, cheaply, when no OTLP endpoint is configured).
//!
//! Attribute values must have few distinct values (agent ids, configured model and tool
//! names, finish reasons): pass `"client"` for caller-defined tools, never free text.

use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::metrics::{Counter, Histogram, UpDownCounter};
use opentelemetry::{InstrumentationScope, KeyValue, global};

/// Bucket bounds (seconds) for step, model and tool latencies: 5 ms to 5 min.
const LATENCY_BOUNDS: [f64; 15] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// agentd's instruments.
#[derive(Debug)]
pub struct Metrics {
    runs: Counter<u64>,
    tokens: Counter<u64>,
    step_duration: Histogram<f64>,
    model_duration: Histogram<f64>,
    tool_duration: Histogram<f64>,
    hook_duration: Histogram<f64>,
    hook_failures: Counter<u64>,
    score_duration: Histogram<f64>,
    active_streams: UpDownCounter<i64>,
    store_errors: Counter<u64>,
}

/// The process's instruments (from the global meter provider at first call).
pub fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

impl Metrics {
    fn new() -> Self {
        let scope = InstrumentationScope::builder("agentd")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        let meter = global::meter_with_scope(scope);
        let latency = |name: &'static str, description: &'static str| {
            meter
                .f64_histogram(name)
                .with_unit("s")
                .with_description(description)
                .with_boundaries(LATENCY_BOUNDS.to_vec())
                .build()
        };
        Self {
            runs: meter
                .u64_counter("agentd.runs")
                .with_unit("{run}")
                .with_description("Runs finished, by finish reason")
                .build(),
            tokens: meter
                .u64_counter("agentd.tokens")
                .with_unit("{token}")
                .with_description("Model tokens used, by type (input or output)")
                .build(),
            step_duration: latency("agentd.step.duration", "Duration of one agent step"),
            model_duration: latency("agentd.model.duration", "Duration of one model call"),
            tool_duration: latency("agentd.tool.duration", "Duration of one tool call"),
            hook_duration: latency(
                "agentd.hook.duration",
                "Duration of one hook call, by kind and outcome",
            ),
            hook_failures: meter
                .u64_counter("agentd.hook.failures")
                .with_unit("{failure}")
                .with_description("Hook calls that failed or missed their deadline, by kind")
                .build(),
            score_duration: latency(
                "agentd.score.duration",
                "Duration of one scorer on one run, by scorer and outcome",
            ),
            active_streams: meter
                .i64_up_down_counter("agentd.streams.active")
                .with_unit("{stream}")
                .with_description("Response streams currently open")
                .build(),
            store_errors: meter
                .u64_counter("agentd.store.errors")
                .with_unit("{error}")
                .with_description("Failed store operations, by operation")
                .build(),
        }
    }

    /// A hook call of `kind` took `duration` and ended with `outcome` (`answered`, `error`,
    /// `timeout`, `gone`, `failed`).
    pub fn hook_call(&self, kind: &'static str, outcome: &'static str, duration: Duration) {
        let attrs = [
            KeyValue::new("hook.kind", kind),
            KeyValue::new("hook.outcome", outcome),
        ];
        self.hook_duration.record(duration.as_secs_f64(), &attrs);
        if !matches!(outcome, "answered") {
            self.hook_failures.add(1, &attrs[..1]);
        }
    }

    /// The scorer `scorer_id` scored a run in `duration`, with `outcome` (`scored`, `none`:
    /// its hook gave no score, `failed`).
    pub fn scored(&self, scorer_id: &str, outcome: &'static str, duration: Duration) {
        let attrs = [
            KeyValue::new("scorer.id", scorer_id.to_owned()),
            KeyValue::new("score.outcome", outcome),
        ];
        self.score_duration.record(duration.as_secs_f64(), &attrs);
    }

    /// A run of `agent_id` ended with `finish_reason` (e.g. `stop`, `error`, `suspended`).
    pub fn run_finished(&self, agent_id: &str, finish_reason: &str) {
        self.runs.add(
            1,
            &[
                KeyValue::new("gen_ai.agent.id", agent_id.to_owned()),
                KeyValue::new("finish_reason", finish_reason.to_owned()),
            ],
        );
    }

    /// A model call used `input` prompt and `output` completion tokens.
    pub fn tokens(&self, input: u64, output: u64) {
        self.tokens.add(input, &[KeyValue::new("type", "input")]);
        self.tokens.add(output, &[KeyValue::new("type", "output")]);
    }

    /// One agent step took `duration`.
    pub fn step(&self, duration: Duration) {
        self.step_duration.record(duration.as_secs_f64(), &[]);
    }

    /// One call to `model` took `duration`; `failed` when it returned an error.
    pub fn model_call(&self, model: &str, duration: Duration, failed: bool) {
        self.model_duration.record(
            duration.as_secs_f64(),
            &[
                KeyValue::new("gen_ai.request.model", model.to_owned()),
                outcome(failed),
            ],
        );
    }

    /// One call of tool `tool` took `duration`; `failed` when it returned an error.
    pub fn tool_call(&self, tool: &str, duration: Duration, failed: bool) {
        self.tool_duration.record(
            duration.as_secs_f64(),
            &[
                KeyValue::new("gen_ai.tool.name", tool.to_owned()),
                outcome(failed),
            ],
        );
    }

    /// A response stream opened; it counts as active until the guard is dropped.
    pub fn stream_opened(&self) -> ActiveStream {
        self.active_streams.add(1, &[]);
        ActiveStream(self.active_streams.clone())
    }

    /// A store `operation` (e.g. `append_chunk`) failed.
    pub fn store_error(&self, operation: &'static str) {
        self.store_errors
            .add(1, &[KeyValue::new("operation", operation)]);
    }
}

/// An open response stream; dropping it closes it in `agentd.streams.active`.
#[must_use = "the stream counts as closed when this is dropped"]
#[derive(Debug)]
pub struct ActiveStream(UpDownCounter<i64>);

impl Drop for ActiveStream {
    fn drop(&mut self) {
        self.0.add(-1, &[]);
    }
}

fn outcome(failed: bool) -> KeyValue {
    KeyValue::new("outcome", if failed { "error" } else { "ok" })
}
