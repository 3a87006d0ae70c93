//! A real Generate with a tool call, exported to an OTLP/gRPC collector in the test: every span
//! carries the caller's trace, the call's rpc span is the root under the caller's span, the tree
//! is rpc → run → step → model/tool with GenAI attributes (a sub-agent's run under its
//! delegation's tool span), and the finish chunk reports the same trace. One test per binary: the subscriber and providers are global to the process.

mod support;

use std::time::Duration;

use agentd::config::LogConfig;
use agentd::model::{MockOpenAi, MockReply};
use agentd::pb;
use agentd::telemetry::{self, OtelSettings, OtlpProtocol};
use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::json;
use support::otlp::{OtlpCollector, hex, int_attr, str_attr};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

/// Runs a Generate whose finish must name `trace`; returns the exported spans once the run's
/// `agent.run` span in that trace has arrived, and that span.
async fn traced_run(
    client: &mut pb::agent_service_client::AgentServiceClient<tonic::transport::Channel>,
    collector: &OtlpCollector,
    request: tonic::Request<pb::GenerateRequest>,
    trace: &str,
) -> (Vec<Span>, Span) {
    let chunks = support::collect(
        client
            .generate(request)
            .await
            .expect("generate")
            .into_inner(),
    )
    .await;
    assert_eq!(support::finish(&chunks).trace_id, trace);
    let is_run = |s: &Span| s.name == "agent.run" && hex(&s.trace_id) == trace;
    let spans = collector
        .wait_for_spans(|spans| spans.iter().any(is_run), Duration::from_secs(20))
        .await;
    let run = spans.iter().find(|s| is_run(s)).cloned().expect("run span");
    (spans, run)
}

fn children<'a>(spans: &'a [Span], parent: &Span) -> Vec<&'a Span> {
    spans
        .iter()
        .filter(|s| s.parent_span_id == parent.span_id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_is_traced_under_the_callers_trace() {
    let collector = OtlpCollector::start().await;
    let mut settings = OtelSettings::new(collector.endpoint_grpc(), OtlpProtocol::Grpc);
    settings.metric_interval = Some(Duration::from_millis(500));
    let log = LogConfig {
        filter: "warn".to_owned(),
        ..LogConfig::default()
    };
    let guard = telemetry::init_with(&log, Some(settings), false).expect("init");

    let mock = MockOpenAi::start().await.expect("mock");
    mock.push(MockReply::ToolCalls(vec![(
        "task_write".into(),
        json!({"tasks": [{"content": "Trace me", "status": "pending", "activeForm": "Tracing"}]}),
    )]));
    mock.push(MockReply::Text("Traced.".into()));
    let dir = tempfile::tempdir().expect("dir");
    // A prepare_step webhook that changes nothing: its calls are spans under their steps.
    let hook_app = axum::Router::new().route(
        "/hook",
        axum::routing::post(|| async { axum::Json(json!({})) }),
    );
    let (hook_url, _hook) = support::serve_http(hook_app).await;
    let agents = format!(
        "{}\n[[agents]]\nid = \"careful\"\nmodel = \"mock/test-model\"\ntools = [\"tasks\"]\nrequire_approval = [\"task_write\"]\n\n[[agents]]\nid = \"hooked\"\nmodel = \"mock/test-model\"\n[[agents.webhooks]]\nurl = \"{hook_url}/hook\"\nkinds = [\"prepare_step\"]\n\n[[agents]]\nid = \"boss\"\nmodel = \"mock/test-model\"\n[agents.sub_agents]\nhelper = \"plain\"\n",
        support::AGENTS_TOML
    );
    let server = support::start(support::agent_config(
        &mock,
        &agents,
        "embedded",
        dir.path(),
    ))
    .await;
    let mut client = support::agents_client(&server).await;

    // x-trace-id / x-parent-span-id, as the reference's tracingOptions.
    let mut request = tonic::Request::new(pb::GenerateRequest {
        agent_id: "planner".into(),
        prompt: "trace this".into(),
        memory: Some(support::memory(&support::unique("t"), "r", None)),
        ..Default::default()
    });
    request
        .metadata_mut()
        .insert("x-trace-id", TRACE.parse().expect("ascii"));
    request
        .metadata_mut()
        .insert("x-parent-span-id", PARENT.parse().expect("ascii"));
    let response = client.generate(request).await.expect("generate");
    assert_eq!(
        response
            .metadata()
            .get("x-trace-id")
            .and_then(|v| v.to_str().ok()),
        Some(TRACE),
        "the response metadata names the trace"
    );
    let chunks = support::collect(response.into_inner()).await;
    let result = support::finish(&chunks);
    assert_eq!(
        result.trace_id, TRACE,
        "the finish chunk carries the caller's trace"
    );
    assert_eq!(result.span_id.len(), 16);

    let spans = collector
        .wait_for_spans(
            |spans| {
                spans.iter().any(|s| s.name == "agent.run")
                    && spans.iter().filter(|s| s.name.starts_with("chat ")).count() >= 2
                    && spans.iter().any(|s| s.name.starts_with("execute_tool "))
            },
            Duration::from_secs(20),
        )
        .await;
    let ours: Vec<Span> = spans
        .into_iter()
        .filter(|s| hex(&s.trace_id) == TRACE)
        .collect();
    let run = ours
        .iter()
        .find(|s| s.name == "agent.run")
        .expect("run span");
    let rpc = ours
        .iter()
        .find(|s| s.span_id == run.parent_span_id)
        .expect("the run's parent is the Generate call's span");
    assert_eq!(rpc.name, "agentd.v1.AgentService/Generate");
    assert_eq!(
        hex(&rpc.parent_span_id),
        PARENT,
        "the root's parent is the caller's span"
    );
    assert_eq!(hex(&run.span_id), result.span_id);
    assert_eq!(str_attr(run, "gen_ai.agent.id").as_deref(), Some("planner"));
    assert_eq!(
        str_attr(run, "agentd.run.id").as_deref(),
        Some(result.run_id.as_str())
    );

    let steps = children(&ours, run);
    assert_eq!(steps.len(), 2, "two steps under the run");
    assert!(steps.iter().all(|s| s.name == "agent.step"));
    let first_step = steps
        .iter()
        .find(|s| {
            children(&ours, s)
                .iter()
                .any(|c| c.name.starts_with("execute_tool "))
        })
        .expect("the step with the tool call");
    let under_first = children(&ours, first_step);
    let model = under_first
        .iter()
        .find(|s| s.name == "chat test-model")
        .expect("model span");
    assert_eq!(str_attr(model, "gen_ai.system").as_deref(), Some("mock"));
    assert_eq!(
        str_attr(model, "gen_ai.request.model").as_deref(),
        Some("test-model")
    );
    assert!(int_attr(model, "gen_ai.usage.input_tokens").unwrap_or(0) > 0);
    assert!(int_attr(model, "gen_ai.usage.output_tokens").is_some());
    let tool = under_first
        .iter()
        .find(|s| s.name == "execute_tool task_write")
        .expect("tool span");
    assert_eq!(
        str_attr(tool, "gen_ai.tool.name").as_deref(),
        Some("task_write")
    );
    assert!(str_attr(tool, "gen_ai.tool.call.id").is_some());

    // W3C traceparent works the same way.
    let other = "0af7651916cd43dd8448eb211c80319c";
    mock.push(MockReply::Text("Again.".into()));
    let mut request = tonic::Request::new(pb::GenerateRequest {
        agent_id: "plain".into(),
        prompt: "again".into(),
        ..Default::default()
    });
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{other}-b7ad6b7169203331-01")
            .parse()
            .expect("ascii"),
    );
    let (spans, run) = traced_run(&mut client, &collector, request, other).await;
    let rpc = spans
        .iter()
        .find(|s| s.span_id == run.parent_span_id)
        .expect("the run's parent is the Generate call's span");
    assert_eq!(hex(&rpc.parent_span_id), "b7ad6b7169203331");

    // Trace ids in the request win over metadata: the run joins them, the call's span stays
    // in the metadata's trace.
    let (fields_trace, fields_parent) = ("22222222222222222222222222222222", "3333333333333333");
    mock.push(MockReply::Text("Fields.".into()));
    let mut request = tonic::Request::new(pb::GenerateRequest {
        agent_id: "plain".into(),
        prompt: "fields".into(),
        tracing_options: Some(pb::TracingOptions {
            trace_id: fields_trace.into(),
            parent_span_id: fields_parent.into(),
            ..Default::default()
        }),
        ..Default::default()
    });
    // Not read: a valid request field hides a malformed header, as before the layer.
    request
        .metadata_mut()
        .insert("traceparent", "garbage".parse().expect("ascii"));
    let (_, run) = traced_run(&mut client, &collector, request, fields_trace).await;
    assert_eq!(hex(&run.parent_span_id), fields_parent);

    // Without request fields a malformed header is still INVALID_ARGUMENT naming it.
    let mut request = tonic::Request::new(pb::GenerateRequest {
        agent_id: "plain".into(),
        prompt: "x".into(),
        ..Default::default()
    });
    request
        .metadata_mut()
        .insert("traceparent", "garbage".parse().expect("ascii"));
    let bad = client.generate(request).await.expect_err("bad header");
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    assert!(bad.message().contains("traceparent"), "{}", bad.message());

    // A malformed id is INVALID_ARGUMENT naming the field.
    let bad = client
        .generate(pb::GenerateRequest {
            agent_id: "plain".into(),
            prompt: "x".into(),
            tracing_options: Some(pb::TracingOptions {
                trace_id: "not-hex".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect_err("bad trace id");
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    assert!(
        bad.message().contains("tracing_options.trace_id"),
        "{}",
        bad.message()
    );

    // TaskService calls get spans in the caller's trace too.
    let mut tasks = support::tasks_client(&server).await;
    let mut check = tonic::Request::new(pb::CheckRequest {
        thread_id: "t".into(),
        resource_id: "r".into(),
    });
    check
        .metadata_mut()
        .insert("x-trace-id", other.parse().expect("ascii"));
    check
        .metadata_mut()
        .insert("x-parent-span-id", PARENT.parse().expect("ascii"));
    tasks.check(check).await.expect("check");
    collector
        .wait_for_spans(
            |spans| {
                spans
                    .iter()
                    .any(|s| hex(&s.trace_id) == other && s.name.contains("TaskService/Check"))
            },
            Duration::from_secs(20),
        )
        .await;

    // An approval's continuation joins the Approve call's trace and links to the run's.
    mock.push(MockReply::ToolCalls(vec![(
        "task_write".into(),
        json!({"tasks": [{"content": "Gated", "status": "pending", "activeForm": "Gating"}]}),
    )]));
    mock.push(MockReply::Text("Approved and done.".into()));
    let mut request = tonic::Request::new(pb::GenerateRequest {
        agent_id: "careful".into(),
        prompt: "gated".into(),
        memory: Some(support::memory(&support::unique("t"), "r", None)),
        ..Default::default()
    });
    request
        .metadata_mut()
        .insert("x-trace-id", TRACE.parse().expect("ascii"));
    let suspended = support::finish(
        &support::collect(
            client
                .generate(request)
                .await
                .expect("generate")
                .into_inner(),
        )
        .await,
    );
    assert_eq!(suspended.finish_reason(), pb::FinishReason::Suspended);
    let approver = "11111111111111111111111111111111";
    let mut approve = tonic::Request::new(pb::ApproveRequest {
        run_id: suspended.run_id.clone(),
        tool_call_id: suspended.suspend_payload.expect("payload").tool_call_id,
        ..Default::default()
    });
    approve
        .metadata_mut()
        .insert("x-trace-id", approver.parse().expect("ascii"));
    approve
        .metadata_mut()
        .insert("x-parent-span-id", PARENT.parse().expect("ascii"));
    let mut approvals =
        pb::approval_service_client::ApprovalServiceClient::new(support::channel(&server).await);
    let rest = support::collect(
        approvals
            .approve(approve)
            .await
            .expect("approve")
            .into_inner(),
    )
    .await;
    let done = support::finish(&rest);
    assert_eq!(done.text, "Approved and done.");
    assert_eq!(
        done.trace_id, approver,
        "the continuation reports the Approve call's trace"
    );
    let spans = collector
        .wait_for_spans(
            |spans| {
                spans
                    .iter()
                    .any(|s| s.name == "agent.run" && hex(&s.trace_id) == approver)
            },
            Duration::from_secs(20),
        )
        .await;
    let continuation = spans
        .iter()
        .find(|s| s.name == "agent.run" && hex(&s.trace_id) == approver)
        .expect("continuation run span");
    let rpc = spans
        .iter()
        .find(|s| s.span_id == continuation.parent_span_id)
        .expect("the continuation's parent is the Approve call's span");
    assert!(rpc.name.contains("ApprovalService/Approve"), "{}", rpc.name);
    assert!(
        continuation
            .links
            .iter()
            .any(|l| hex(&l.trace_id) == TRACE && hex(&l.span_id) == suspended.span_id),
        "linked to the original run"
    );

    // A hook call is a span under its step, with its kind and outcome.
    let hooked_trace = "44444444444444444444444444444444";
    mock.push(MockReply::Text("Hooked.".into()));
    let mut request = tonic::Request::new(pb::GenerateRequest {
        agent_id: "hooked".into(),
        prompt: "hook me".into(),
        ..Default::default()
    });
    request
        .metadata_mut()
        .insert("x-trace-id", hooked_trace.parse().expect("ascii"));
    let (spans, run) = traced_run(&mut client, &collector, request, hooked_trace).await;
    let step = children(&spans, &run)
        .into_iter()
        .find(|s| s.name == "agent.step")
        .expect("step span");
    let hook = children(&spans, step)
        .into_iter()
        .find(|s| s.name == "hook prepare_step")
        .expect("hook span under the step");
    assert_eq!(
        str_attr(hook, "agentd.hook.kind").as_deref(),
        Some("prepare_step")
    );
    assert_eq!(
        str_attr(hook, "agentd.hook.outcome").as_deref(),
        Some("answered")
    );
    assert!(hook.end_time_unix_nano > hook.start_time_unix_nano);

    // A sub-agent's run is a child of its delegation's tool span, in the same trace.
    let team_trace = "55555555555555555555555555555555";
    mock.push(MockReply::ToolCalls(vec![(
        "agent-helper".into(),
        json!({"prompt": "help"}),
    )]));
    mock.push(MockReply::Text("Helped.".into()));
    mock.push(MockReply::Text("Done.".into()));
    let mut request = tonic::Request::new(pb::GenerateRequest {
        agent_id: "boss".into(),
        prompt: "delegate".into(),
        ..Default::default()
    });
    request
        .metadata_mut()
        .insert("x-trace-id", team_trace.parse().expect("ascii"));
    traced_run(&mut client, &collector, request, team_trace).await;
    let spans = collector
        .wait_for_spans(
            |spans| {
                spans
                    .iter()
                    .filter(|s| s.name == "agent.run" && hex(&s.trace_id) == team_trace)
                    .count()
                    >= 2
            },
            Duration::from_secs(20),
        )
        .await;
    let delegation = spans
        .iter()
        .find(|s| s.name == "execute_tool agent-helper" && hex(&s.trace_id) == team_trace)
        .expect("the delegation's tool span");
    let sub_run = spans
        .iter()
        .find(|s| {
            s.name == "agent.run"
                && hex(&s.trace_id) == team_trace
                && str_attr(s, "gen_ai.agent.id").as_deref() == Some("plain")
        })
        .expect("the sub-agent's run span");
    assert_eq!(sub_run.parent_span_id, delegation.span_id);

    collector
        .wait_for_metrics(
            &[
                "agentd.runs",
                "agentd.tokens",
                "agentd.model.duration",
                "agentd.hook.duration",
            ],
            Duration::from_secs(30),
        )
        .await;
    server.stop().await.expect("stop");
    guard.shutdown().expect("shutdown");
}
