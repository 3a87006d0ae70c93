//! Spans and metrics reach an OTLP/HTTP (protobuf) collector, configured the way operators
//! do it: standard `OTEL_*` variables read by `init`. One test per binary: the environment,
//! subscriber and providers are global to the process.

mod support;

use agentd::config::LogConfig;
use agentd::telemetry;
use support::otlp::OtlpCollector;
use support::span_tree;

#[test]
fn spans_and_metrics_reach_an_otlp_http_collector_configured_by_env() {
    // Ports first, so the environment is complete before any other thread exists.
    let grpc = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let http = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let endpoint = format!("http://{}", http.local_addr().expect("address"));
    let vars = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ("OTEL_SERVICE_NAME", "agentd-http-test"),
        ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test"),
        ("OTEL_TRACES_SAMPLER", "parentbased_always_on"),
    ];
    for (name, value) in vars {
        // SAFETY: the only test of this binary, before the runtime starts: no other thread
        // reads the environment.
        unsafe { std::env::set_var(name, value) };
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let collector = OtlpCollector::start_on(grpc, http).await;
        let guard = telemetry::init(&LogConfig::default(), false).expect("init");

        span_tree::exercise(&collector, &guard, "agentd-http-test").await;

        assert!(collector.http_calls() > 0);
        assert_eq!(collector.grpc_calls(), 0);
        let resource = collector.trace_requests()[0].resource_spans[0]
            .resource
            .clone()
            .expect("resource");
        assert!(
            resource
                .attributes
                .iter()
                .any(|kv| kv.key == "deployment.environment")
        );
        assert!(
            resource
                .attributes
                .iter()
                .any(|kv| kv.key == "service.version")
        );
        guard.shutdown().expect("shutdown");
    });
}
