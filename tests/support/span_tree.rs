//! A run's span tree built with the telemetry helpers the way the agent loop uses them, the
//! checks of what a collector received for it, and the scenario the export tests share.

use std::time::Duration;

use agentd::telemetry::{
    self, GEN_AI_INPUT_MESSAGES, GEN_AI_OUTPUT_MESSAGES, ModelResponse, RecordIo, RunSpanAttrs,
    TelemetryGuard,
};
use http::{HeaderMap, HeaderValue};
use opentelemetry::Context;
use opentelemetry::trace::SpanContext;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::{Span, span};
use serde_json::json;
use tracing::Instrument;

use super::otlp::{OtlpCollector, hex, int_attr, str_array_attr, str_attr};

/// How long to wait for exports; generous, as the machine may be busy.
pub const WAIT: Duration = Duration::from_secs(60);

/// Builds `agent.run` → step 0 (model call, failing tool call) → step 1 (model call) under
/// `parent`, linked to `links`; returns `trace_ids` of the run span.
pub async fn build_run(
    run_id: &str,
    parent: Option<&Context>,
    links: &[SpanContext],
) -> (String, String) {
    let metadata = json_object(json!({"env": "test", "attempt": 2, "nested": {"a": 1}}));
    let request_context = json_object(json!({"user": "u-1", "api_token": "never-recorded"}));
    let tags = ["beta".to_owned(), "weather".to_owned()];
    let keys = ["user".to_owned(), "missing".to_owned()];
    let attrs = RunSpanAttrs {
        agent_id: "weather-agent",
        run_id,
        thread_id: "thread-1",
        resource_id: "user-1",
        tags: &tags,
        metadata: Some(&metadata),
        request_context: Some(&request_context),
        request_context_keys: &keys,
    };
    let run = telemetry::run_span(&attrs, parent, links);
    let io = RecordIo {
        inputs: true,
        outputs: false,
    };
    async {
        async {
            let model = telemetry::model_span("openai", "gpt-4o-mini");
            io.input(
                &model,
                GEN_AI_INPUT_MESSAGES,
                "What is the weather in Paris?",
            );
            io.output(
                &model,
                GEN_AI_OUTPUT_MESSAGES,
                "not recorded: outputs are off",
            );
            tokio::task::yield_now().instrument(model.clone()).await;
            telemetry::record_model_response(
                &model,
                &ModelResponse {
                    id: "resp-1",
                    model: "gpt-4o-mini-2024-07-18",
                    input_tokens: Some(12),
                    output_tokens: Some(7),
                    finish_reasons: &["tool_calls"],
                },
            );
            let tool = telemetry::tool_span("get_weather", "call-1");
            // A tool runs on its own task, as the loop runs them concurrently.
            tokio::spawn(tokio::task::yield_now().instrument(tool.clone()))
                .await
                .expect("tool task");
            telemetry::record_error(&tool, "weather service down");
        }
        .instrument(telemetry::step_span(0))
        .await;
        async {
            let model = telemetry::model_span("openai", "gpt-4o-mini");
            tokio::task::yield_now().instrument(model.clone()).await;
            telemetry::record_model_response(
                &model,
                &ModelResponse {
                    input_tokens: Some(30),
                    output_tokens: Some(5),
                    finish_reasons: &["stop"],
                    ..ModelResponse::default()
                },
            );
        }
        .instrument(telemetry::step_span(1))
        .await;
    }
    .instrument(run.clone())
    .await;
    telemetry::trace_ids(&run).expect("the run span has ids when OTel is on")
}

/// The spans of one run, as received.
pub struct RunTree {
    pub run: Span,
    pub steps: Vec<Span>,
    pub models: Vec<Span>,
    pub tool: Span,
}

/// The run `run_id` and its descendants, once all six spans arrived.
pub fn run_tree(spans: &[Span], run_id: &str) -> Option<RunTree> {
    let run = spans
        .iter()
        .find(|s| s.name == "agent.run" && str_attr(s, "agentd.run.id").as_deref() == Some(run_id))?
        .clone();
    let children = |parent: &Span| -> Vec<Span> {
        spans
            .iter()
            .filter(|s| s.parent_span_id == parent.span_id && s.trace_id == parent.trace_id)
            .cloned()
            .collect()
    };
    let mut steps = children(&run);
    steps.sort_by_key(|s| int_attr(s, "agentd.step.index"));
    if steps.len() != 2 {
        return None;
    }
    let first = children(&steps[0]);
    let mut models: Vec<Span> = first
        .iter()
        .chain(children(&steps[1]).iter())
        .filter(|s| s.name.starts_with("chat "))
        .cloned()
        .collect();
    models.sort_by_key(|s| s.start_time_unix_nano);
    let tool = first
        .iter()
        .find(|s| s.name.starts_with("execute_tool "))?
        .clone();
    (models.len() == 2).then_some(RunTree {
        run,
        steps,
        models,
        tool,
    })
}

/// Waits for the run's tree and checks its shape and attributes: every span in `trace_id`,
/// the root's parent `parent_span_id` (empty: a root span).
pub async fn expect_run_tree(
    collector: &OtlpCollector,
    run_id: &str,
    trace_id: &str,
    parent_span_id: &str,
) -> RunTree {
    let spans = collector
        .wait_for_spans(|spans| run_tree(spans, run_id).is_some(), WAIT)
        .await;
    let tree = run_tree(&spans, run_id).expect("complete tree");
    let all = [
        &tree.run,
        &tree.steps[0],
        &tree.steps[1],
        &tree.models[0],
        &tree.models[1],
        &tree.tool,
    ];
    for span in all {
        assert_eq!(hex(&span.trace_id), trace_id, "trace of {}", span.name);
    }
    assert_eq!(
        hex(&tree.run.parent_span_id),
        parent_span_id,
        "parent of the run span"
    );
    assert_eq!(hex(&tree.steps[0].parent_span_id), hex(&tree.run.span_id));

    let run = &tree.run;
    assert_eq!(
        str_attr(run, "gen_ai.operation.name").as_deref(),
        Some("invoke_agent")
    );
    assert_eq!(
        str_attr(run, "gen_ai.agent.id").as_deref(),
        Some("weather-agent")
    );
    assert_eq!(
        str_attr(run, "gen_ai.conversation.id").as_deref(),
        Some("thread-1")
    );
    assert_eq!(
        str_attr(run, "agentd.resource.id").as_deref(),
        Some("user-1")
    );
    assert_eq!(
        str_array_attr(run, "agentd.tags"),
        Some(vec!["beta".into(), "weather".into()])
    );
    assert_eq!(
        str_attr(run, "agentd.metadata.env").as_deref(),
        Some("test")
    );
    assert_eq!(int_attr(run, "agentd.metadata.attempt"), Some(2));
    assert_eq!(
        str_attr(run, "agentd.metadata.nested").as_deref(),
        Some(r#"{"a":1}"#)
    );
    assert_eq!(
        str_attr(run, "agentd.request_context.user").as_deref(),
        Some("u-1")
    );
    assert!(
        str_attr(run, "agentd.request_context.api_token").is_none(),
        "only chosen keys"
    );

    assert_eq!(tree.steps[0].name, "agent.step");
    assert_eq!(int_attr(&tree.steps[1], "agentd.step.index"), Some(1));

    let model = &tree.models[0];
    assert_eq!(model.name, "chat gpt-4o-mini");
    assert_eq!(model.kind, SpanKind::Client as i32);
    assert_eq!(hex(&model.parent_span_id), hex(&tree.steps[0].span_id));
    assert_eq!(
        str_attr(model, "gen_ai.operation.name").as_deref(),
        Some("chat")
    );
    assert_eq!(str_attr(model, "gen_ai.system").as_deref(), Some("openai"));
    assert_eq!(
        str_attr(model, "gen_ai.request.model").as_deref(),
        Some("gpt-4o-mini")
    );
    assert_eq!(
        str_attr(model, "gen_ai.response.model").as_deref(),
        Some("gpt-4o-mini-2024-07-18")
    );
    assert_eq!(
        str_attr(model, "gen_ai.response.id").as_deref(),
        Some("resp-1")
    );
    assert_eq!(int_attr(model, "gen_ai.usage.input_tokens"), Some(12));
    assert_eq!(int_attr(model, "gen_ai.usage.output_tokens"), Some(7));
    assert_eq!(
        str_array_attr(model, "gen_ai.response.finish_reasons"),
        Some(vec!["tool_calls".into()])
    );
    assert_eq!(
        str_attr(model, GEN_AI_INPUT_MESSAGES).as_deref(),
        Some("What is the weather in Paris?")
    );
    assert!(
        str_attr(model, GEN_AI_OUTPUT_MESSAGES).is_none(),
        "outputs are not recorded"
    );
    assert_eq!(
        hex(&tree.models[1].parent_span_id),
        hex(&tree.steps[1].span_id)
    );
    assert_eq!(
        str_array_attr(&tree.models[1], "gen_ai.response.finish_reasons"),
        Some(vec!["stop".into()])
    );

    let tool = &tree.tool;
    assert_eq!(tool.name, "execute_tool get_weather");
    assert_eq!(
        str_attr(tool, "gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );
    assert_eq!(
        str_attr(tool, "gen_ai.tool.name").as_deref(),
        Some("get_weather")
    );
    assert_eq!(
        str_attr(tool, "gen_ai.tool.call.id").as_deref(),
        Some("call-1")
    );
    assert_eq!(str_attr(tool, "error.type").as_deref(), Some("_OTHER"));
    let status = tool.status.clone().expect("tool status");
    assert_eq!(status.code, StatusCode::Error as i32);
    assert_eq!(status.message, "weather service down");
    tree
}

/// The scenario both export tests run: trees under x-trace-id headers, a traceparent, a bare
/// trace id and an approval continuation, plus every metric; checks what `collector` got.
pub async fn exercise(collector: &OtlpCollector, guard: &TelemetryGuard, service_name: &str) {
    assert!(guard.is_exporting());
    assert!(telemetry::otel_layer_installed());

    // 1. x-trace-id / x-parent-span-id.
    let (trace_1, parent_1) = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
    let mut headers = HeaderMap::new();
    headers.insert("x-trace-id", HeaderValue::from_static(trace_1));
    headers.insert("x-parent-span-id", HeaderValue::from_static(parent_1));
    let parent = telemetry::parent_context(&headers, "", "").expect("valid ids");
    let ids_1 = build_run("run-x-headers", parent.as_ref(), &[]).await;
    assert_eq!(ids_1.0, trace_1);
    assert_eq!(
        telemetry::run_trace_ids(&tracing::Span::none(), parent.as_ref()).0,
        trace_1
    );

    // 2. W3C traceparent.
    let (trace_2, parent_2) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let mut headers = HeaderMap::new();
    let traceparent = format!("00-{trace_2}-{parent_2}-01");
    headers.insert(
        "traceparent",
        HeaderValue::from_str(&traceparent).expect("header"),
    );
    headers.insert("tracestate", HeaderValue::from_static("vendor=value"));
    let parent = telemetry::parent_context(&headers, "", "").expect("valid traceparent");
    let ids_2 = build_run("run-traceparent", parent.as_ref(), &[]).await;
    assert_eq!(ids_2.0, trace_2);

    // 3. A trace id alone (request field, short form): a root span in that trace.
    let parent = telemetry::parent_context(&HeaderMap::new(), "abc123", "").expect("valid id");
    let ids_3 = build_run("run-trace-only", parent.as_ref(), &[]).await;
    let trace_3 = format!("{:0>32}", "abc123");
    assert_eq!(ids_3.0, trace_3);

    // 4. An approval's continuation: under the Approve call (which joined the caller's
    //    trace), linked to the original run.
    let (trace_4, parent_4) = ("11112222333344445555666677778888", "1234567890abcdef");
    let mut headers = HeaderMap::new();
    headers.insert("x-trace-id", HeaderValue::from_static(trace_4));
    headers.insert("x-parent-span-id", HeaderValue::from_static(parent_4));
    let approve_parent = telemetry::parent_context(&headers, "", "").expect("valid ids");
    let rpc = telemetry::rpc_span(
        "agentd.v1.ApprovalService",
        "Approve",
        approve_parent.as_ref(),
    );
    let (_, rpc_span_id) = telemetry::trace_ids(&rpc).expect("rpc span ids");
    let original = telemetry::remote_span_context(&ids_1.0, &ids_1.1).expect("stored ids");
    let ids_4 = build_run(
        "run-continuation",
        Some(&telemetry::otel_context(&rpc)),
        &[original],
    )
    .await;
    drop(rpc);
    assert_eq!(ids_4.0, trace_4);

    // Metrics.
    let m = telemetry::metrics();
    m.run_finished("weather-agent", "stop");
    m.tokens(42, 12);
    m.step(Duration::from_millis(120));
    m.model_call("gpt-4o-mini", Duration::from_millis(80), false);
    m.tool_call("get_weather", Duration::from_millis(15), true);
    drop(m.stream_opened());
    m.store_error("append_chunk");

    guard.force_flush().expect("flush");

    let tree_1 = expect_run_tree(collector, "run-x-headers", trace_1, parent_1).await;
    assert_eq!((hex(&tree_1.run.trace_id), hex(&tree_1.run.span_id)), ids_1);
    let tree_2 = expect_run_tree(collector, "run-traceparent", trace_2, parent_2).await;
    assert_eq!((hex(&tree_2.run.trace_id), hex(&tree_2.run.span_id)), ids_2);
    assert_eq!(tree_2.run.trace_state, "vendor=value");
    let tree_3 = expect_run_tree(collector, "run-trace-only", &trace_3, "").await;
    assert_eq!(hex(&tree_3.run.span_id), ids_3.1);
    let tree_4 = expect_run_tree(collector, "run-continuation", trace_4, &rpc_span_id).await;
    let link = tree_4.run.links.first().expect("link to the original run");
    assert_eq!((hex(&link.trace_id), hex(&link.span_id)), ids_1);

    let spans = collector
        .wait_for_spans(
            |s| {
                s.iter()
                    .any(|s| s.name == "agentd.v1.ApprovalService/Approve")
            },
            WAIT,
        )
        .await;
    let approve = spans
        .iter()
        .find(|s| s.name == "agentd.v1.ApprovalService/Approve")
        .expect("rpc span");
    assert_eq!(hex(&approve.trace_id), trace_4);
    assert_eq!(hex(&approve.parent_span_id), parent_4);
    assert_eq!(approve.kind, span::SpanKind::Server as i32);
    assert_eq!(str_attr(approve, "rpc.system").as_deref(), Some("grpc"));
    assert_eq!(str_attr(approve, "rpc.method").as_deref(), Some("Approve"));

    let resource = collector.trace_requests()[0].resource_spans[0]
        .resource
        .clone()
        .expect("resource");
    let service = resource
        .attributes
        .iter()
        .find(|kv| kv.key == "service.name")
        .and_then(|kv| kv.value.clone())
        .and_then(|v| v.value);
    assert_eq!(
        service,
        Some(
            opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(
                service_name.to_owned()
            )
        )
    );

    collector
        .wait_for_metrics(
            &[
                "agentd.runs",
                "agentd.tokens",
                "agentd.step.duration",
                "agentd.model.duration",
                "agentd.tool.duration",
                "agentd.streams.active",
                "agentd.store.errors",
            ],
            WAIT,
        )
        .await;
}

fn json_object(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    match value {
        serde_json::Value::Object(map) => map,
        _ => unreachable!("an object literal"),
    }
}
