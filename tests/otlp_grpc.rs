//! Spans and metrics reach an OTLP/gRPC collector, configured in-process with `init_with`.
//! One test per binary: the subscriber and providers are global to the process.

mod support;

use agentd::config::LogConfig;
use agentd::telemetry::{self, OtelSettings, OtlpProtocol};
use support::otlp::OtlpCollector;
use support::span_tree;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_and_metrics_reach_an_otlp_grpc_collector() {
    let collector = OtlpCollector::start().await;
    let mut settings = OtelSettings::new(collector.endpoint_grpc(), OtlpProtocol::Grpc);
    settings.service_name = Some("agentd-grpc-test".to_owned());
    // A quiet log must not silence spans.
    let log = LogConfig {
        filter: "warn".to_owned(),
        ..LogConfig::default()
    };
    let guard = telemetry::init_with(&log, Some(settings), false).expect("init");

    span_tree::exercise(&collector, &guard, "agentd-grpc-test").await;

    assert!(collector.grpc_calls() > 0);
    assert_eq!(collector.http_calls(), 0);
    guard.shutdown().expect("shutdown");
}
