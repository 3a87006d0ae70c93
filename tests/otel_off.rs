//! Without an OTLP endpoint nothing is exported: no exporter, no OTel layer, no-op metrics;
//! the finish chunk still carries the caller's trace id. One test per binary: the subscriber
//! is global to the process.

mod support;

use agentd::config::LogConfig;
use agentd::telemetry::{self, OtelSettings, RunSpanAttrs};
use http::{HeaderMap, HeaderValue};
use opentelemetry::trace::{Span as _, Tracer as _, TracerProvider as _};
use support::otlp::OtlpCollector;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_exported_without_an_endpoint() {
    let collector = OtlpCollector::start().await;
    // Every OTEL_* setting but an endpoint: still off.
    let settings = OtelSettings::from_lookup(|name| match name {
        "OTEL_EXPORTER_OTLP_PROTOCOL" => Some("grpc".to_owned()),
        "OTEL_SERVICE_NAME" => Some("agentd-off".to_owned()),
        "OTEL_TRACES_SAMPLER" => Some("always_on".to_owned()),
        _ => None,
    })
    .expect("settings");
    assert!(settings.is_none());
    let guard = telemetry::init_with(&LogConfig::default(), settings, false).expect("init");
    assert!(!guard.is_exporting());
    assert!(!telemetry::otel_layer_installed());

    let trace_id = "0af7651916cd43dd8448eb211c80319c";
    let mut headers = HeaderMap::new();
    headers.insert("x-trace-id", HeaderValue::from_static(trace_id));
    headers.insert(
        "x-parent-span-id",
        HeaderValue::from_static("b7ad6b7169203331"),
    );
    let parent = telemetry::parent_context(&headers, "", "").expect("valid ids");
    let run = telemetry::run_span(
        &RunSpanAttrs {
            agent_id: "a",
            run_id: "r",
            ..RunSpanAttrs::default()
        },
        parent.as_ref(),
        &[],
    );
    run.in_scope(|| {
        let model = telemetry::model_span("openai", "m");
        telemetry::record_error(&model, "slow");
    });
    // No OTel layer: the span has no ids, the caller's trace id is what the run reports.
    assert!(telemetry::trace_ids(&run).is_none());
    assert_eq!(
        telemetry::run_trace_ids(&run, parent.as_ref()),
        (trace_id.to_owned(), String::new())
    );
    drop(run);

    // The global providers are the no-op ones.
    let mut span = opentelemetry::global::tracer_provider()
        .tracer("probe")
        .start("probe");
    assert!(!span.span_context().is_valid());
    span.end();
    let m = telemetry::metrics();
    m.run_finished("a", "stop");
    m.tokens(1, 1);
    drop(m.stream_opened());

    // A real Generate: the finish chunk names the caller's trace, nothing is exported.
    let mock = agentd::model::MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = support::start(support::agent_config(
        &mock,
        support::AGENTS_TOML,
        "embedded",
        dir.path(),
    ))
    .await;
    let mut request = tonic::Request::new(agentd::pb::GenerateRequest {
        agent_id: "plain".into(),
        prompt: "hello".into(),
        ..Default::default()
    });
    request
        .metadata_mut()
        .insert("x-trace-id", trace_id.parse().expect("ascii"));
    let mut client = support::agents_client(&server).await;
    let chunks = support::collect(
        client
            .generate(request)
            .await
            .expect("generate")
            .into_inner(),
    )
    .await;
    let result = support::finish(&chunks);
    assert_eq!(result.trace_id, trace_id);
    assert!(result.span_id.is_empty(), "no span of ours exists");
    server.stop().await.expect("stop");

    guard.force_flush().expect("flush");
    guard.shutdown().expect("shutdown");
    assert_eq!(collector.grpc_calls() + collector.http_calls(), 0);
    assert!(collector.spans().is_empty());
}
