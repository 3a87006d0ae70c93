//! Every agentd method gets an `rpc` span (server kind, `rpc.*` attributes) under the trace its
//! metadata names, made by one layer: AgentService and TaskService.Watch included. One test per
//! binary: the subscriber and providers are global to the process.

mod support;

use std::time::Duration;

use agentd::config::LogConfig;
use agentd::telemetry::{self, OtelSettings, OtlpProtocol};
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use support::otlp::{OtlpCollector, hex, str_attr};

const TRACE: &str = "5bf92f3577b34da6a3ce929d0e0e4737";
const PARENT: &str = "10f067aa0ba902b8";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_agentd_method_gets_an_rpc_span_in_the_callers_trace() {
    let collector = OtlpCollector::start().await;
    let settings = OtelSettings::new(collector.endpoint_grpc(), OtlpProtocol::Grpc);
    let log = LogConfig {
        filter: "warn".to_owned(),
        ..LogConfig::default()
    };
    let guard = telemetry::init_with(&log, Some(settings), false).expect("init");
    let dir = tempfile::tempdir().expect("dir");
    let mut config = support::test_config("embedded", dir.path());
    config.auth.api_keys = vec!["k".into()];
    let server = support::start(config).await;

    // Rejected calls make no span: nothing of an unauthenticated caller reaches the trace.
    let unauthenticated = [("x-trace-id", "77777777777777777777777777777777")];
    for (_, outcome) in support::call_every_method(&server, &unauthenticated).await {
        assert_eq!(
            outcome.expect_err("no key").code(),
            tonic::Code::Unauthenticated
        );
    }
    let metadata = [
        ("authorization", "Bearer k"),
        ("x-trace-id", TRACE),
        ("x-parent-span-id", PARENT),
    ];
    support::call_every_method(&server, &metadata).await;
    let mut health =
        tonic_health::pb::health_client::HealthClient::new(support::channel(&server).await);
    let probe = support::with_metadata(
        &metadata[1..],
        tonic_health::pb::HealthCheckRequest {
            service: "liveness".into(),
        },
    );
    health.check(probe).await.expect("health needs no key");

    let name = |(service, method): (&str, &str)| format!("{service}/{method}");
    let spans = collector
        .wait_for_spans(
            |spans| {
                support::AGENTD_METHODS.iter().all(|m| {
                    spans
                        .iter()
                        .any(|s| s.name == name(*m) && hex(&s.trace_id) == TRACE)
                })
            },
            Duration::from_secs(20),
        )
        .await;
    for (service, method) in support::AGENTD_METHODS {
        let span = spans
            .iter()
            .find(|s| s.name == name((service, method)) && hex(&s.trace_id) == TRACE)
            .expect("span of the method");
        assert_eq!(hex(&span.parent_span_id), PARENT, "{service}/{method}");
        assert_eq!(span.kind, SpanKind::Server as i32, "{service}/{method}");
        assert_eq!(str_attr(span, "rpc.system").as_deref(), Some("grpc"));
        assert_eq!(str_attr(span, "rpc.service").as_deref(), Some(service));
        assert_eq!(str_attr(span, "rpc.method").as_deref(), Some(method));
    }
    assert!(
        !spans
            .iter()
            .any(|s| hex(&s.trace_id) == "77777777777777777777777777777777"),
        "no span for rejected calls"
    );
    // Health is outside the layer.
    assert!(
        !spans.iter().any(|s| s.name.starts_with("grpc.")),
        "no span for health"
    );

    server.stop().await.expect("stop");
    guard.shutdown().expect("shutdown");
}
