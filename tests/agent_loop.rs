//! AgentService.Generate over real gRPC against a scripted OpenAI-compatible HTTP server that
//! records every request: the loop, the task tools and their signal, stop rules, tool errors,
//! memory, structured output, usage, cancellation, Observe and idempotency.

mod support;

use std::time::Duration;

use agentd::model::{MockOpenAi, MockReply};
use agentd::pb;
use agentd::pb::chunk::Payload;
use futures::StreamExt;
use serde_json::{Value, json};
use support::redis::Deployment;
use tonic::Code;
use tonic_types::StatusExt;

/// A server on the embedded store with the standard test agents.
async fn setup(mock: &MockOpenAi) -> (tempfile::TempDir, agentd::server::RunningServer) {
    setup_with(mock, support::AGENTS_TOML).await
}

async fn setup_with(
    mock: &MockOpenAi,
    agents: &str,
) -> (tempfile::TempDir, agentd::server::RunningServer) {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = support::agent_config(mock, agents, "embedded", dir.path());
    let server = support::start(config).await;
    (dir, server)
}

fn request(agent: &str, prompt: &str) -> pb::GenerateRequest {
    pb::GenerateRequest {
        agent_id: agent.into(),
        prompt: prompt.into(),
        ..Default::default()
    }
}

/// The messages the model received in its n-th request.
fn sent(mock: &MockOpenAi, n: usize) -> Vec<Value> {
    mock.requests()[n]["messages"]
        .as_array()
        .expect("messages array")
        .clone()
}

fn contents(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

const SNAPSHOT: &str = "<current-task-list count=\"2\">\n  ○ [pending] {id: task_alpha} Alpha\n  ○ [pending] {id: task_beta} Beta\n</current-task-list>";
const DELTA: &str = "<task-list-update changes=\"1\">\n  ▸ {id: task_alpha} [in_progress] Alpha\n</task-list-update>";

fn alpha_beta() -> MockReply {
    MockReply::ToolCalls(vec![(
        "task_write".into(),
        json!({"tasks": [
            {"content": "Alpha", "status": "pending", "activeForm": "Doing Alpha"},
            {"content": "Beta", "status": "pending", "activeForm": "Doing Beta"}
        ]}),
    )])
}

#[tokio::test]
async fn reference_scenario_with_task_tools_and_signals() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push(alpha_beta());
    mock.push(MockReply::ToolCalls(vec![(
        "task_update".into(),
        json!({"id": "task_alpha", "status": "in_progress"}),
    )]));
    mock.push(MockReply::Text("Working on Alpha now.".into()));
    let (_dir, server) = setup(&mock).await;
    let mut client = support::agents_client(&server).await;
    let (thread, resource) = (support::unique("t"), support::unique("r"));
    let chunks = support::generate(
        &mut client,
        pb::GenerateRequest {
            memory: Some(support::memory(&thread, &resource, None)),
            ..request("planner", "Plan Alpha and Beta")
        },
    )
    .await;

    let mut order = support::kinds(&chunks);
    order.dedup();
    assert_eq!(
        order,
        [
            "start",
            "step-start",
            "tool-call-delta",
            "tool-call",
            "tool-result",
            "step-finish",
            "data",
            "step-start",
            "tool-call-delta",
            "tool-call",
            "tool-result",
            "step-finish",
            "data",
            "step-start",
            "text-start",
            "text-delta",
            "text-end",
            "step-finish",
            "finish"
        ],
        "chunk order (repeats collapsed)"
    );
    let sequences: Vec<u64> = chunks.iter().map(|c| c.sequence).collect();
    assert_eq!(sequences, (1..=chunks.len() as u64).collect::<Vec<_>>());
    let result = support::finish(&chunks);
    assert_eq!(result.finish_reason(), pb::FinishReason::Stop);
    assert_eq!(result.text, "Working on Alpha now.");
    assert_eq!(result.steps.len(), 3);
    for step in &result.steps[..2] {
        assert!(!step.tool_results[0].is_error, "task tools succeed");
    }

    // The model saw the instructions, the guidance, then the snapshot and delta signals.
    let first = sent(&mock, 0);
    assert_eq!(first[0]["role"], "system");
    assert_eq!(first[0]["content"], "You plan work with the task tools.");
    assert!(
        first[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("Task list state may appear in the conversation")
    );
    let second = sent(&mock, 1);
    let last = second.last().unwrap();
    assert_eq!(last["role"], "user");
    assert_eq!(
        last["content"], SNAPSHOT,
        "snapshot right after the tool result"
    );
    assert_eq!(second[second.len() - 2]["role"], "tool");
    let third = sent(&mock, 2);
    assert_eq!(third.last().unwrap()["content"], DELTA);
    assert!(contents(&third).contains(&SNAPSHOT.to_owned()));

    // The list is stored, for TaskService too.
    let mut tasks = support::tasks_client(&server).await;
    let list = tasks
        .check(pb::CheckRequest {
            thread_id: thread.clone(),
            resource_id: resource.clone(),
        })
        .await
        .expect("check")
        .into_inner();
    let ids: Vec<(&str, pb::TaskStatus)> = list
        .tasks
        .iter()
        .map(|t| (t.id.as_str(), t.status()))
        .collect();
    assert_eq!(
        ids,
        [
            ("task_alpha", pb::TaskStatus::InProgress),
            ("task_beta", pb::TaskStatus::Pending)
        ]
    );

    // The data-signal chunk carries the same text.
    let Some(Payload::Data(signal)) = chunks.iter().find_map(|c| match &c.payload {
        Some(Payload::Data(d)) => Some(Payload::Data(d.clone())),
        _ => None,
    }) else {
        panic!("a data chunk");
    };
    assert_eq!(signal.r#type, "data-signal");
    assert_eq!(
        signal
            .data
            .map(|d| agentd::json::from_proto_value(&d))
            .and_then(|d| d["text"].as_str().map(str::to_owned)),
        Some(SNAPSHOT.to_owned())
    );
    server.stop().await.expect("stop");
}

#[tokio::test]
async fn default_cap_is_five_steps_and_tools_of_the_last_step_run() {
    let mock = MockOpenAi::start().await.expect("mock");
    for _ in 0..6 {
        mock.push(MockReply::ToolCalls(vec![("task_check".into(), json!({}))]));
    }
    let (_dir, server) = setup(&mock).await;
    let mut client = support::agents_client(&server).await;
    let chunks = support::generate(&mut client, request("planner", "loop forever")).await;
    assert_eq!(mock.requests().len(), 5, "exactly five model calls");
    let result = support::finish(&chunks);
    assert_eq!(result.finish_reason(), pb::FinishReason::ToolCalls);
    assert_eq!(result.steps.len(), 5);
    assert_eq!(result.steps[4].tool_results.len(), 1, "step 5's tools ran");
    assert!(!result.steps[4].is_continued);
    server.stop().await.expect("stop");
}

#[tokio::test]
async fn max_steps_and_stop_when_whichever_comes_first() {
    let mock = MockOpenAi::start().await.expect("mock");
    for _ in 0..4 {
        mock.push(MockReply::ToolCalls(vec![("task_check".into(), json!({}))]));
    }
    let (_dir, server) = setup(&mock).await;
    let mut client = support::agents_client(&server).await;
    let stop_on = |tool: &str| pb::StopCondition {
        condition: Some(pb::stop_condition::Condition::HasToolCall(tool.into())),
    };
    // The condition holds after step 1.
    let chunks = support::generate(
        &mut client,
        pb::GenerateRequest {
            max_steps: Some(2),
            stop_when: vec![stop_on("task_check")],
            ..request("planner", "go")
        },
    )
    .await;
    assert_eq!(support::finish(&chunks).steps.len(), 1);
    assert_eq!(mock.requests().len(), 1);
    // The condition never holds: max_steps ends it.
    let chunks = support::generate(
        &mut client,
        pb::GenerateRequest {
            max_steps: Some(2),
            stop_when: vec![stop_on("task_write")],
            ..request("planner", "go")
        },
    )
    .await;
    assert_eq!(support::finish(&chunks).steps.len(), 2);
    assert_eq!(mock.requests().len(), 3);
    server.stop().await.expect("stop");
}

/// A tiny HTTP tool endpoint: `/fail` answers 500, `/echo` returns the args.
async fn tool_server() -> (String, tokio::task::JoinHandle<()>) {
    use axum::Json;
    use axum::http::StatusCode;
    use axum::routing::post;
    let app = axum::Router::new()
        .route(
            "/fail",
            post(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "boom") }),
        )
        .route(
            "/echo",
            post(|Json(body): Json<Value>| async move { Json(json!({"echo": body["args"]})) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}"), task)
}

#[tokio::test]
async fn unknown_and_failing_tools_are_fed_back_and_the_run_goes_on() {
    let (tools, _task) = tool_server().await;
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push(MockReply::ToolCalls(vec![
        ("search".into(), json!({"q": "x"})),
        ("flaky".into(), json!({})),
        ("echo".into(), json!({"v": 1})),
    ]));
    mock.push(MockReply::Text("Recovered.".into()));
    let agents = format!(
        r#"
[[agents]]
id = "tooly"
model = "mock/test-model"
tools = ["tasks"]
[[agents.http_tools]]
name = "flaky"
url = "{tools}/fail"
[[agents.http_tools]]
name = "echo"
url = "{tools}/echo"
"#
    );
    let (_dir, server) = setup_with(&mock, &agents).await;
    let mut client = support::agents_client(&server).await;
    let chunks = support::generate(&mut client, request("tooly", "try tools")).await;
    let result = support::finish(&chunks);
    assert_eq!(result.finish_reason(), pb::FinishReason::Stop);
    assert_eq!(result.text, "Recovered.");
    let kinds = support::kinds(&chunks);
    assert_eq!(kinds.iter().filter(|k| **k == "tool-error").count(), 2);
    assert_eq!(kinds.iter().filter(|k| **k == "tool-result").count(), 1);

    let tool_messages: Vec<Value> = sent(&mock, 1)
        .into_iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tool_messages.len(), 3, "results in call order");
    assert_eq!(
        tool_messages[0]["content"],
        "Tool \"search\" not found. Available tools: task_write, task_update, task_complete, task_check, flaky, echo. Call tools by their exact name only — never add prefixes, namespaces, or colons."
    );
    assert_eq!(
        tool_messages[1]["content"],
        "Tool \"flaky\" failed with HTTP 500: boom"
    );
    assert_eq!(tool_messages[2]["content"], "{\"echo\":{\"v\":1}}");
    server.stop().await.expect("stop");
}

#[tokio::test]
async fn memory_history_read_only_and_fresh_snapshot() {
    let mock = MockOpenAi::start().await.expect("mock");
    let (_dir, server) = setup(&mock).await;
    let mut client = support::agents_client(&server).await;
    let (thread, resource) = (support::unique("t"), support::unique("r"));
    let turn = |prompt: &str, last: Option<i32>, read_only: bool| {
        let mut memory = support::memory(&thread, &resource, last);
        if let Some(options) = memory.options.as_mut() {
            options.read_only = read_only;
        }
        pb::GenerateRequest {
            memory: Some(memory),
            ..request("planner", prompt)
        }
    };
    // Turn 1 writes a list (the snapshot goes before its 2nd call).
    mock.push(alpha_beta());
    mock.push(MockReply::Text("Planned.".into()));
    support::generate(&mut client, turn("first", None, false)).await;
    // Turn 2 sees all of turn 1 (user, assistant call, tool result, signal, answer).
    mock.push(MockReply::Text("Second.".into()));
    let chunks = support::generate(&mut client, turn("second", None, false)).await;
    let result = support::finish(&chunks);
    assert_eq!(result.remembered_messages.len(), 5);
    let seen = contents(&sent(&mock, 2));
    assert!(seen.contains(&"first".to_owned()) && seen.contains(&"Planned.".to_owned()));
    assert!(
        !support::kinds(&chunks).contains(&"data"),
        "the snapshot is still in the window"
    );

    // A read-only turn saves nothing.
    mock.push(MockReply::Text("Ignored.".into()));
    support::generate(&mut client, turn("read only", None, true)).await;
    mock.push(MockReply::Text("Fourth.".into()));
    support::generate(&mut client, turn("fourth", Some(100), false)).await;
    let seen = contents(&sent(&mock, 4));
    assert!(
        !seen.contains(&"read only".to_owned()),
        "read_only saved nothing"
    );
    assert!(seen.contains(&"second".to_owned()));

    // With last_messages 2 the old snapshot is out of the window: a fresh one is sent.
    mock.push(MockReply::Text("Fifth.".into()));
    let chunks = support::generate(&mut client, turn("fifth", Some(2), false)).await;
    assert!(
        support::kinds(&chunks).contains(&"data"),
        "a new data-signal chunk"
    );
    let fifth = sent(&mock, 5);
    assert_eq!(fifth.last().unwrap()["content"], SNAPSHOT);
    assert_eq!(
        fifth.iter().filter(|m| m["role"] != "system").count(),
        4,
        "2 remembered + input + snapshot"
    );
    server.stop().await.expect("stop");
}

fn structured(strategy: pb::ErrorStrategy) -> pb::StructuredOutput {
    let schema =
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let Value::Object(schema) = schema else {
        unreachable!()
    };
    pb::StructuredOutput {
        schema: Some(agentd::json::to_proto_struct(&schema)),
        error_strategy: strategy.into(),
        fallback_value: Some(agentd::json::to_proto_value(&json!({"n": -1}))),
        ..Default::default()
    }
}

#[tokio::test]
async fn structured_output_in_all_three_strategies() {
    let mock = MockOpenAi::start().await.expect("mock");
    let (_dir, server) = setup(&mock).await;
    let mut client = support::agents_client(&server).await;
    let ask = |strategy| pb::GenerateRequest {
        structured_output: Some(structured(strategy)),
        ..request("plain", "give n")
    };
    let object = |r: &pb::GenerateResult| r.object.as_ref().map(agentd::json::from_proto_value);

    mock.push(MockReply::Text("{\"n\": 7}".into()));
    let chunks = support::generate(&mut client, ask(pb::ErrorStrategy::Strict)).await;
    let result = support::finish(&chunks);
    assert_eq!(object(&result), Some(json!({"n": 7})));
    assert!(support::kinds(&chunks).contains(&"object-result"));
    let partials: Vec<Value> = chunks
        .iter()
        .filter_map(|c| match &c.payload {
            Some(Payload::Object(o)) => o.object.as_ref().map(agentd::json::from_proto_value),
            _ => None,
        })
        .collect();
    assert_eq!(
        partials.last(),
        Some(&json!({"n": 7})),
        "partial objects while streaming"
    );
    assert_eq!(
        mock.requests()[0]["response_format"]["type"],
        "json_schema",
        "native structured output"
    );

    mock.push(MockReply::Text("{\"n\": \"seven\"}".into()));
    let result =
        support::finish(&support::generate(&mut client, ask(pb::ErrorStrategy::Strict)).await);
    assert_eq!(result.finish_reason(), pb::FinishReason::Error);
    assert_eq!(
        result.error.expect("error").id,
        "STRUCTURED_OUTPUT_SCHEMA_VALIDATION_FAILED"
    );

    mock.push(MockReply::Text("not json".into()));
    let result =
        support::finish(&support::generate(&mut client, ask(pb::ErrorStrategy::Warn)).await);
    assert_eq!(result.finish_reason(), pb::FinishReason::Stop);
    assert_eq!(object(&result), None);
    assert!(!result.warnings.is_empty());

    mock.push(MockReply::Text("{}".into()));
    let result =
        support::finish(&support::generate(&mut client, ask(pb::ErrorStrategy::Fallback)).await);
    assert_eq!(object(&result), Some(json!({"n": -1})));
    assert!(result.used_fallback_value);

    // Prompt injection instead of response_format.
    mock.push(MockReply::Text("{\"n\": 1}".into()));
    let mut injected = ask(pb::ErrorStrategy::Strict);
    if let Some(o) = injected.structured_output.as_mut() {
        o.json_prompt_injection = Some(true);
    }
    support::generate(&mut client, injected).await;
    let last = mock.requests().last().cloned().expect("a request");
    assert!(last.get("response_format").is_none());
    assert!(
        contents(last["messages"].as_array().unwrap())[0]
            .ends_with("\nYou MUST answer with a JSON object that matches the JSON schema above."),
        "the reference's system-prompt injection"
    );
    server.stop().await.expect("stop");
}

#[tokio::test]
async fn usage_is_summed_over_steps() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push(MockReply::ToolCalls(vec![("task_check".into(), json!({}))]));
    mock.push(MockReply::Text("one two three".into()));
    let (_dir, server) = setup(&mock).await;
    let mut client = support::agents_client(&server).await;
    let chunks = support::generate(&mut client, request("planner", "count")).await;
    let per_step: Vec<pb::Usage> = chunks
        .iter()
        .filter_map(|c| match &c.payload {
            Some(Payload::StepFinish(s)) => s.usage,
            _ => None,
        })
        .collect();
    assert_eq!(per_step.len(), 2);
    let result = support::finish(&chunks);
    let total = result.usage.expect("usage");
    assert_eq!(
        total.input_tokens,
        per_step.iter().map(|u| u.input_tokens).sum::<i64>()
    );
    assert_eq!(
        total.output_tokens,
        per_step.iter().map(|u| u.output_tokens).sum::<i64>()
    );
    assert!(total.input_tokens > 0 && total.output_tokens > 0);
    assert_eq!(result.total_usage, result.usage);
    server.stop().await.expect("stop");
}

#[tokio::test]
async fn cancelling_the_rpc_closes_the_model_connection_and_records_abort() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push(MockReply::Slow {
        text: "a b c d e f g h i j".into(),
        delay_per_delta: Duration::from_secs(1),
    });
    let (_dir, server) = setup(&mock).await;
    let mut client = support::agents_client(&server).await;
    let mut stream = client
        .generate(request("plain", "slow"))
        .await
        .expect("starts")
        .into_inner();
    let mut run_id = String::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.expect("chunk");
        run_id = chunk.run_id.clone();
        if matches!(chunk.payload, Some(Payload::TextDelta(_))) {
            break;
        }
    }
    drop(stream);
    assert!(
        support::eventually(Duration::from_secs(5), || async { mock.disconnects() >= 1 }).await,
        "the mock model saw the connection close"
    );
    let replay = support::collect(
        client
            .observe(pb::ObserveRequest {
                run_id,
                after_sequence: 0,
            })
            .await
            .expect("observe")
            .into_inner(),
    )
    .await;
    assert!(support::kinds(&replay).contains(&"abort"));
    assert_eq!(
        support::finish(&replay).finish_reason(),
        pb::FinishReason::Aborted
    );
    server.stop().await.expect("stop");
}

async fn observe_on_another_replica_gets_every_chunk_once_and_abort_works_anywhere(
    redis: Deployment,
) {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push(MockReply::Slow {
        text: "one two three four five six".into(),
        delay_per_delta: Duration::from_millis(150),
    });
    let dir = tempfile::tempdir().expect("dir");
    let a = support::start(support::agent_config(
        &mock,
        support::AGENTS_TOML,
        &redis.url(),
        dir.path(),
    ))
    .await;
    let b = support::start(support::agent_config(
        &mock,
        support::AGENTS_TOML,
        &redis.url(),
        dir.path(),
    ))
    .await;
    let mut on_a = support::agents_client(&a).await;
    let mut on_b = support::agents_client(&b).await;
    let mut stream = on_a
        .generate(pb::GenerateRequest {
            on_disconnect: pb::OnDisconnect::Continue.into(),
            ..request("plain", "slow")
        })
        .await
        .expect("starts")
        .into_inner();
    let first = stream.next().await.expect("a chunk").expect("ok");
    drop(stream);
    let observed = support::collect(
        on_b.observe(pb::ObserveRequest {
            run_id: first.run_id.clone(),
            after_sequence: 0,
        })
        .await
        .expect("observe on b")
        .into_inner(),
    )
    .await;
    let sequences: Vec<u64> = observed.iter().map(|c| c.sequence).collect();
    assert_eq!(
        sequences,
        (1..=observed.len() as u64).collect::<Vec<_>>(),
        "each chunk once, in order"
    );
    let result = support::finish(&observed);
    assert_eq!(
        result.finish_reason(),
        pb::FinishReason::Stop,
        "the run went on without its client"
    );
    assert_eq!(result.text, "one two three four five six");

    // Abort from B stops a run executing on A.
    mock.push(MockReply::Slow {
        text: "never ending story".into(),
        delay_per_delta: Duration::from_secs(2),
    });
    let mut stream = on_a
        .generate(request("plain", "slow"))
        .await
        .expect("starts")
        .into_inner();
    let first = stream.next().await.expect("a chunk").expect("ok");
    let aborted = on_b
        .abort(pb::AbortRequest {
            run_id: first.run_id.clone(),
            reason: "operator".into(),
        })
        .await
        .expect("abort")
        .into_inner();
    assert!(aborted.aborted);
    let mut rest = vec![first];
    rest.extend(support::collect(stream).await);
    let kinds = support::kinds(&rest);
    assert!(kinds.contains(&"abort"), "{kinds:?}");
    assert_eq!(
        support::finish(&rest).finish_reason(),
        pb::FinishReason::Aborted
    );
    let again = on_b
        .abort(pb::AbortRequest {
            run_id: first_run(&rest),
            reason: String::new(),
        })
        .await
        .expect("abort again")
        .into_inner();
    assert!(!again.aborted, "an ended run is not aborted twice");
    a.stop().await.expect("stop a");
    b.stop().await.expect("stop b");
}

fn first_run(chunks: &[pb::Chunk]) -> String {
    chunks[0].run_id.clone()
}

#[tokio::test]
async fn idempotency_key_replays_or_conflicts() {
    let mock = MockOpenAi::start().await.expect("mock");
    let (_dir, server) = setup(&mock).await;
    let mut client = support::agents_client(&server).await;
    let keyed = |prompt: &str| pb::GenerateRequest {
        idempotency_key: "key-1".into(),
        ..request("plain", prompt)
    };
    let first = support::generate(&mut client, keyed("hello")).await;
    let replay = support::generate(&mut client, keyed("hello")).await;
    assert_eq!(mock.requests().len(), 1, "the model was called once");
    assert_eq!(first_run(&first), first_run(&replay));
    assert_eq!(support::finish(&first).text, support::finish(&replay).text);
    let conflict = client
        .generate(keyed("other"))
        .await
        .expect_err("different request");
    assert_eq!(conflict.code(), Code::AlreadyExists);
    server.stop().await.expect("stop");
}

#[tokio::test]
async fn checks_before_the_run_fail_the_rpc() {
    let mock = MockOpenAi::start().await.expect("mock");
    let (_dir, server) = setup(&mock).await;
    let mut client = support::agents_client(&server).await;
    let missing = client
        .generate(request("nobody", "hi"))
        .await
        .expect_err("unknown agent");
    assert_eq!(missing.code(), Code::NotFound);

    let one_sided = client
        .generate(pb::GenerateRequest {
            memory: Some(support::memory("thread-only", "", None)),
            ..request("plain", "hi")
        })
        .await
        .expect_err("thread without resource");
    assert_eq!(one_sided.code(), Code::InvalidArgument);
    assert!(one_sided.message().contains(
        "A resourceId and a threadId must be provided when using Memory. Saw threadId \"thread-only\" and resourceId \"\""
    ), "{}", one_sided.message());

    for (bad, field) in [
        (
            pb::GenerateRequest {
                max_steps: Some(0),
                ..request("planner", "hi")
            },
            "max_steps",
        ),
        (
            pb::GenerateRequest {
                active_tools: vec!["nope".into()],
                ..request("planner", "hi")
            },
            "active_tools.0",
        ),
    ] {
        let status = client.generate(bad).await.expect_err("bad options");
        assert_eq!(status.code(), Code::InvalidArgument);
        let violations = status
            .get_details_bad_request()
            .expect("details")
            .field_violations;
        assert_eq!(violations[0].field, field);
    }

    let empty = client
        .generate(request("plain", ""))
        .await
        .expect_err("no input");
    assert_eq!(empty.code(), Code::InvalidArgument);

    // A thread owned by another resource.
    let thread = support::unique("t");
    support::generate(
        &mut client,
        pb::GenerateRequest {
            memory: Some(support::memory(&thread, "alice", None)),
            ..request("plain", "mine")
        },
    )
    .await;
    let run_id = support::unique("denied");
    let denied = client
        .generate(pb::GenerateRequest {
            memory: Some(support::memory(&thread, "mallory", None)),
            run_id: run_id.clone(),
            ..request("plain", "steal")
        })
        .await
        .expect_err("not mallory's thread");
    assert_eq!(denied.code(), Code::PermissionDenied);
    // The refused run left no record: nothing to observe, and its id is free.
    let observed = client
        .observe(pb::ObserveRequest {
            run_id: run_id.clone(),
            after_sequence: 0,
        })
        .await
        .expect_err("no such run");
    assert_eq!(observed.code(), Code::NotFound);
    let chunks = support::generate(
        &mut client,
        pb::GenerateRequest {
            memory: Some(support::memory(&thread, "alice", None)),
            run_id: run_id.clone(),
            ..request("plain", "mine again")
        },
    )
    .await;
    assert_eq!(chunks[0].run_id, run_id);
    server.stop().await.expect("stop");
}

#[tokio::test]
async fn provider_failure_is_an_error_chunk_not_an_rpc_error() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push(MockReply::Error {
        status: 400,
        body: "{\"error\": {\"message\": \"bad model\"}}".into(),
        retry_after: None,
    });
    let (_dir, server) = setup(&mock).await;
    let mut client = support::agents_client(&server).await;
    let chunks = support::generate(&mut client, request("plain", "hi")).await;
    let kinds = support::kinds(&chunks);
    assert_eq!(kinds, ["start", "step-start", "error", "finish"]);
    let result = support::finish(&chunks);
    assert_eq!(result.finish_reason(), pb::FinishReason::Error);
    let error = result.error.expect("error");
    assert_eq!(error.id, "MODEL_PROVIDER_ERROR");
    assert!(error.message.contains("400"), "{}", error.message);
    server.stop().await.expect("stop");
}

#[tokio::test]
async fn new_threads_get_a_generated_title_and_raw_chunks_on_request() {
    let mock = MockOpenAi::start().await.expect("mock");
    let (_dir, server) = setup(&mock).await;
    let mut client = support::agents_client(&server).await;
    let resource = support::unique("r");
    let titled = |thread: &str, event: bool| {
        let mut memory = support::memory(thread, &resource, None);
        if let Some(options) = memory.options.as_mut() {
            options.generate_title = true;
            options.emit_title_event = event;
        }
        pb::GenerateRequest {
            memory: Some(memory),
            include_raw_chunks: true,
            ..request("plain", "How do I bake bread?")
        }
    };
    let title_chunk = |chunks: &[pb::Chunk]| {
        chunks.iter().find_map(|c| match &c.payload {
            Some(Payload::Data(d)) if d.r#type == "data-thread-title" => {
                d.data.as_ref().map(agentd::json::from_proto_value)
            }
            _ => None,
        })
    };
    let threads =
        pb::thread_service_client::ThreadServiceClient::new(support::channel(&server).await);

    // By default the title comes after the run, without a chunk; GetThread reads it.
    let quiet = support::unique("t");
    mock.push(MockReply::Text("Knead, rise, bake.".into()));
    mock.push(MockReply::Text(
        "<think>bread, clearly</think>\n Baking Bread ".into(),
    ));
    let chunks = support::generate(&mut client, titled(&quiet, false)).await;
    assert_eq!(title_chunk(&chunks), None);
    assert_eq!(support::finish(&chunks).text, "Knead, rise, bake.");
    let titled_later = support::eventually(Duration::from_secs(10), || {
        let mut threads = threads.clone();
        let request = pb::GetThreadRequest {
            thread_id: quiet.clone(),
            resource_id: resource.clone(),
        };
        async move {
            threads
                .get_thread(request)
                .await
                .is_ok_and(|t| t.into_inner().title.as_deref() == Some("Baking Bread"))
        }
    })
    .await;
    assert!(titled_later, "the background title lands on the thread");
    // The title model reads the reference's instructions and the run's transcript.
    let title_prompt = sent(&mock, 1);
    assert!(
        contents(&title_prompt)[0].starts_with(
            "\n      - you will generate a short title based on a conversation transcript"
        ),
        "{title_prompt:?}"
    );
    assert_eq!(
        contents(&title_prompt)[1],
        "User: How do I bake bread?\nAssistant: Knead, rise, bake."
    );

    // With the title event, `finish` waits and the title is streamed.
    let loud = support::unique("t");
    mock.push(MockReply::Text("Knead, rise, bake.".into()));
    mock.push(MockReply::Text("Bread Basics".into()));
    let chunks = support::generate(&mut client, titled(&loud, true)).await;
    assert_eq!(
        title_chunk(&chunks),
        Some(json!({"threadId": loud, "title": "Bread Basics"}))
    );
    assert!(
        support::kinds(&chunks).contains(&"raw"),
        "include_raw_chunks streams raw events"
    );
    let calls = mock.requests().len();
    // The thread exists now: no second title.
    mock.push(MockReply::Text("More.".into()));
    let again = support::generate(&mut client, titled(&loud, true)).await;
    assert_eq!(title_chunk(&again), None);
    assert_eq!(mock.requests().len(), calls + 1);
    let plain = support::generate(&mut client, request("plain", "no raw")).await;
    assert!(!support::kinds(&plain).contains(&"raw"));
    server.stop().await.expect("stop");
}

/// Starts a run and lets go of it after its first chunk; returns its id.
async fn start_detached(
    server: &agentd::server::RunningServer,
    request: pb::GenerateRequest,
) -> String {
    let mut client = support::agents_client(server).await;
    let mut stream = client.generate(request).await.expect("starts").into_inner();
    stream.next().await.expect("a chunk").expect("ok").run_id
}

/// Replays a run from its start.
async fn observe(server: &agentd::server::RunningServer, run_id: String) -> Vec<pb::Chunk> {
    let mut client = support::agents_client(server).await;
    let stream = client
        .observe(pb::ObserveRequest {
            run_id,
            after_sequence: 0,
        })
        .await
        .expect("observe")
        .into_inner();
    support::collect(stream).await
}

#[tokio::test]
async fn shutdown_lets_detached_runs_finish_within_grace_and_aborts_the_rest() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let config = || {
        let mut c = support::agent_config(&mock, support::AGENTS_TOML, "embedded", dir.path());
        c.server.shutdown_grace_secs = 2;
        c
    };
    let detached = |text: &str, delay_ms: u64| {
        mock.push(MockReply::Slow {
            text: text.into(),
            delay_per_delta: Duration::from_millis(delay_ms),
        });
        pb::GenerateRequest {
            on_disconnect: pb::OnDisconnect::Continue.into(),
            ..request("plain", "slow")
        }
    };
    // Finishes within the grace period: stop waits for it, and its log is complete.
    let server = support::start(config()).await;
    let run_id = start_detached(&server, detached("a b c", 200)).await;
    server.stop().await.expect("stop");
    let server = support::start(config()).await;
    let replay = observe(&server, run_id).await;
    assert_eq!(
        support::finish(&replay).finish_reason(),
        pb::FinishReason::Stop
    );
    assert_eq!(support::finish(&replay).text, "a b c");

    // Outlives the grace period: aborted, and the abort is recorded.
    let run_id = start_detached(&server, detached("x y z w", 2000)).await;
    server.stop().await.expect("stop");
    let server = support::start(config()).await;
    let replay = observe(&server, run_id).await;
    assert_eq!(
        support::finish(&replay).finish_reason(),
        pb::FinishReason::Aborted
    );
    server.stop().await.expect("stop");
}

on_each_redis!(observe_on_another_replica_gets_every_chunk_once_and_abort_works_anywhere,);
