//! An MCP tool call is traced like any tool call: an `execute_tool` span in the run's tree.

use std::time::Duration;

use agentd::config::LogConfig;
use agentd::model::{MockOpenAi, MockReply};
use agentd::pb;
use agentd::telemetry::{self, OtelSettings, OtlpProtocol};
use serde_json::json;

use super::{start, wait_for_tool};
use crate::support;
use crate::support::otlp::{OtlpCollector, hex, str_attr};

const TRACE: &str = "5bf92f3577b34da6a3ce929d0e0e4737";

// The only test of this binary that installs the global exporter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_call_is_an_execute_tool_span_of_its_run() {
    let collector = OtlpCollector::start().await;
    let settings = OtelSettings::new(collector.endpoint_grpc(), OtlpProtocol::Grpc);
    let log = LogConfig {
        filter: "warn".to_owned(),
        ..LogConfig::default()
    };
    let _guard = telemetry::init_with(&log, Some(settings), false).expect("init");
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let toml = format!(
        "[[mcp_servers]]\nname = \"everything\"\ncommand = \"node\"\nargs = [\"{}\", \"stdio\"]\n\n[[agents]]\nid = \"traced\"\nmodel = \"mock/test-model\"\nmcp_servers = [\"everything\"]\n",
        super::everything_js().display()
    );
    let server = start(&mock, &toml, dir.path()).await;
    wait_for_tool(&server, "traced", "everything_echo").await;
    mock.push(MockReply::ToolCalls(vec![(
        "everything_echo".into(),
        json!({"message": "traced"}),
    )]));
    mock.push(MockReply::Text("Done.".into()));
    let mut request = tonic::Request::new(pb::GenerateRequest {
        agent_id: "traced".into(),
        prompt: "trace".into(),
        ..Default::default()
    });
    request
        .metadata_mut()
        .insert("x-trace-id", TRACE.parse().expect("ascii"));
    let chunks = support::collect(
        support::agents_client(&server)
            .await
            .generate(request)
            .await
            .expect("generate")
            .into_inner(),
    )
    .await;
    assert_eq!(support::finish(&chunks).text, "Done.");
    let is_tool = |s: &opentelemetry_proto::tonic::trace::v1::Span| {
        s.name == "execute_tool everything_echo" && hex(&s.trace_id) == TRACE
    };
    let spans = collector
        .wait_for_spans(|spans| spans.iter().any(is_tool), Duration::from_secs(20))
        .await;
    let tool = spans.iter().find(|s| is_tool(s)).expect("tool span");
    assert_eq!(
        str_attr(tool, "gen_ai.tool.name").as_deref(),
        Some("everything_echo")
    );
    let step = spans
        .iter()
        .find(|s| s.span_id == tool.parent_span_id)
        .expect("the tool span has a parent in the trace");
    assert!(
        spans
            .iter()
            .any(|s| s.span_id == step.parent_span_id && s.name == "agent.run")
            || step.name == "agent.run",
        "under the run: {}",
        step.name
    );
    server.stop().await.expect("stop");
}
