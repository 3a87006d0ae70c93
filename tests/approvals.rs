//! ApprovalService over real gRPC: suspension, approve/decline/resume on any replica and
//! across restarts, racing decisions, client tools, expiry, ListPending and Observe.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentd::model::{MockOpenAi, MockReply};
use agentd::pb;
use agentd::pb::approval_service_client::ApprovalServiceClient;
use agentd::pb::chunk::Payload;
use agentd::server::RunningServer;
use serde_json::{Value, json};
use support::redis::Deployment;
use tonic::Code;
use tonic::transport::Channel;

/// An HTTP tool endpoint counting its calls (its side effect).
struct SideEffect {
    url: String,
    calls: Arc<AtomicUsize>,
    _task: tokio::task::JoinHandle<()>,
}

impl SideEffect {
    async fn start() -> Self {
        use axum::Json;
        use axum::routing::post;
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let app = axum::Router::new().route(
            "/act",
            post(move |Json(body): Json<Value>| {
                let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
                async move { Json(json!({"done": body["args"], "calls": n})) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/act", listener.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url,
            calls,
            _task: task,
        }
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

fn agents(tool_url: &str) -> String {
    format!(
        r#"
[[agents]]
id = "guarded"
instructions = "Act carefully."
model = "mock/test-model"
require_approval = ["act"]
[[agents.http_tools]]
name = "act"
description = "Does something irreversible"
url = "{tool_url}"
[[agents.http_tools]]
name = "look"
description = "Harmless"
url = "{tool_url}"
"#
    )
}

/// A server on the embedded store in `dir` with the guarded agent.
async fn start_guarded(
    mock: &MockOpenAi,
    effect: &SideEffect,
    dir: &std::path::Path,
) -> RunningServer {
    support::start(support::agent_config(
        mock,
        &agents(&effect.url),
        "embedded",
        dir,
    ))
    .await
}

fn act(n: i64) -> (String, Value) {
    ("act".into(), json!({"n": n}))
}

fn ask(prompt: &str) -> pb::GenerateRequest {
    pb::GenerateRequest {
        agent_id: "guarded".into(),
        prompt: prompt.into(),
        ..Default::default()
    }
}

async fn approvals(server: &RunningServer) -> ApprovalServiceClient<Channel> {
    ApprovalServiceClient::new(support::channel(server).await)
}

/// Collects a decision's stream.
async fn decided(
    call: Result<tonic::Response<tonic::Streaming<pb::Chunk>>, tonic::Status>,
) -> Vec<pb::Chunk> {
    support::collect(call.expect("decision accepted").into_inner()).await
}

fn pending_calls(chunks: &[pb::Chunk]) -> Vec<pb::ToolSuspension> {
    chunks
        .iter()
        .filter_map(|c| match &c.payload {
            Some(Payload::ToolCallApproval(s) | Payload::ToolCallSuspended(s)) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

fn tool_messages(mock: &MockOpenAi, request: usize) -> Vec<String> {
    mock.requests()[request]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

async fn suspend_on_a_stop_a_approve_on_b(redis: Deployment) {
    let effect = SideEffect::start().await;
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push(MockReply::ToolCalls(vec![act(1)]));
    mock.push(MockReply::Text("Done.".into()));
    let dir = tempfile::tempdir().expect("dir");
    let config = || support::agent_config(&mock, &agents(&effect.url), &redis.url(), dir.path());
    let a = support::start(config()).await;
    let (thread, resource) = (support::unique("t"), support::unique("r"));
    let chunks = support::generate(
        &mut support::agents_client(&a).await,
        pb::GenerateRequest {
            memory: Some(support::memory(&thread, &resource, None)),
            ..ask("do it")
        },
    )
    .await;
    let suspended = support::finish(&chunks);
    assert_eq!(suspended.finish_reason(), pb::FinishReason::Suspended);
    assert!(suspended.text.is_empty() && suspended.steps.is_empty());
    let payload = suspended.suspend_payload.expect("suspend payload");
    assert_eq!(payload.tool_name, "act");
    let schema = agentd::json::from_proto_value(&prost_types::Value {
        kind: Some(prost_types::value::Kind::StructValue(
            payload.resume_schema.clone().expect("schema"),
        )),
    });
    assert_eq!(schema["required"], json!(["approved"]));
    assert_eq!(pending_calls(&chunks).len(), 1);
    assert_eq!(effect.calls(), 0, "nothing ran before approval");
    a.stop().await.expect("stop a");

    let b = support::start(config()).await;
    let mut on_b = approvals(&b).await;
    let listed = on_b
        .list_pending(pb::ListPendingRequest {
            thread_id: Some(thread.clone()),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .runs;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].pending[0].tool_call_id, payload.tool_call_id);
    assert_eq!(
        agentd::json::from_proto_value(listed[0].pending[0].args.as_ref().expect("args")),
        json!({"n": 1})
    );

    let rest = decided(
        on_b.approve(pb::ApproveRequest {
            run_id: suspended.run_id.clone(),
            tool_call_id: payload.tool_call_id.clone(),
            ..Default::default()
        })
        .await,
    )
    .await;
    let result = support::finish(&rest);
    assert_eq!(result.finish_reason(), pb::FinishReason::Stop);
    assert_eq!(result.text, "Done.");
    assert_eq!(effect.calls(), 1, "the tool ran exactly once");
    assert!(
        tool_messages(&mock, 1)[0].contains("\"calls\":1"),
        "the model got its result"
    );
    assert!(
        rest[0].sequence > chunks.last().expect("chunks").sequence,
        "sequences continue"
    );

    let again = on_b
        .approve(pb::ApproveRequest {
            run_id: suspended.run_id.clone(),
            tool_call_id: payload.tool_call_id,
            ..Default::default()
        })
        .await
        .expect_err("already decided");
    assert_eq!(again.code(), Code::FailedPrecondition);
    let none = on_b
        .list_pending(pb::ListPendingRequest {
            resource_id: Some(resource),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner();
    assert!(none.runs.is_empty());

    // Observe replays the whole run, suspension and continuation included.
    let replay = support::collect(
        support::agents_client(&b)
            .await
            .observe(pb::ObserveRequest {
                run_id: suspended.run_id,
                after_sequence: 0,
            })
            .await
            .expect("observe")
            .into_inner(),
    )
    .await;
    assert_eq!(support::finish(&replay).text, "Done.");
    b.stop().await.expect("stop b");
}

#[tokio::test]
async fn approval_survives_an_embedded_restart() {
    let effect = SideEffect::start().await;
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push(MockReply::ToolCalls(vec![act(2)]));
    mock.push(MockReply::Text("After restart.".into()));
    let dir = tempfile::tempdir().expect("dir");
    let config = || support::agent_config(&mock, &agents(&effect.url), "embedded", dir.path());
    let server = support::start(config()).await;
    let suspended = support::finish(
        &support::generate(&mut support::agents_client(&server).await, ask("go")).await,
    );
    server.stop().await.expect("stop");

    let server = support::start(config()).await;
    let call = suspended.suspend_payload.expect("payload").tool_call_id;
    let rest = decided(
        approvals(&server)
            .await
            .approve(pb::ApproveRequest {
                run_id: suspended.run_id,
                tool_call_id: call,
                ..Default::default()
            })
            .await,
    )
    .await;
    assert_eq!(support::finish(&rest).text, "After restart.");
    assert_eq!(effect.calls(), 1);
    server.stop().await.expect("stop");
}

#[tokio::test]
async fn decline_never_runs_the_tool_and_tells_the_model() {
    let effect = SideEffect::start().await;
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = start_guarded(&mock, &effect, dir.path()).await;
    let mut agents_client = support::agents_client(&server).await;
    let mut decide = approvals(&server).await;
    for (reason, expected) in [
        (None, "Tool call was not approved by the user"),
        (Some("Not on a Friday".to_owned()), "Not on a Friday"),
    ] {
        mock.push(MockReply::ToolCalls(vec![act(3)]));
        mock.push(MockReply::Text("Understood.".into()));
        let suspended = support::finish(&support::generate(&mut agents_client, ask("go")).await);
        let call = suspended.suspend_payload.expect("payload").tool_call_id;
        let rest = decided(
            decide
                .decline(pb::DeclineRequest {
                    run_id: suspended.run_id,
                    tool_call_id: call,
                    reason,
                    ..Default::default()
                })
                .await,
        )
        .await;
        let denied = rest.iter().find_map(|c| match &c.payload {
            Some(Payload::ToolOutputDenied(d)) => Some(d.reason.clone()),
            _ => None,
        });
        assert_eq!(denied.as_deref(), Some(expected));
        assert_eq!(support::finish(&rest).text, "Understood.");
        let last = mock.requests().len() - 1;
        assert_eq!(tool_messages(&mock, last), [expected]);
    }
    assert_eq!(effect.calls(), 0, "a declined tool never runs");
    server.stop().await.expect("stop");
}

#[tokio::test]
async fn two_calls_in_one_step_decided_in_either_order_then_a_second_step() {
    let effect = SideEffect::start().await;
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push(MockReply::ToolCalls(vec![
        act(1),
        ("look".into(), json!({})),
        act(2),
    ]));
    mock.push(MockReply::ToolCalls(vec![act(3)]));
    mock.push(MockReply::Text("All done.".into()));
    let dir = tempfile::tempdir().expect("dir");
    let server = start_guarded(&mock, &effect, dir.path()).await;
    let chunks = support::generate(&mut support::agents_client(&server).await, ask("go")).await;
    let suspended = support::finish(&chunks);
    let calls = pending_calls(&chunks);
    assert_eq!(calls.len(), 2, "both approvals are requested at once");
    let mut decide = approvals(&server).await;
    // The second call first: the run still waits for the first.
    let partial = decided(
        decide
            .decline(pb::DeclineRequest {
                run_id: suspended.run_id.clone(),
                tool_call_id: calls[1].tool_call_id.clone(),
                ..Default::default()
            })
            .await,
    )
    .await;
    let still = support::finish(&partial);
    assert_eq!(still.finish_reason(), pb::FinishReason::Suspended);
    assert_eq!(
        still.suspend_payload.expect("next").tool_call_id,
        calls[0].tool_call_id
    );
    assert_eq!(
        effect.calls(),
        0,
        "nothing runs until every call is decided"
    );

    let rest = decided(
        decide
            .approve(pb::ApproveRequest {
                run_id: suspended.run_id.clone(),
                tool_call_id: calls[0].tool_call_id.clone(),
                ..Default::default()
            })
            .await,
    )
    .await;
    // Step 2 needs approval again.
    let second = support::finish(&rest);
    assert_eq!(second.finish_reason(), pb::FinishReason::Suspended);
    assert_eq!(effect.calls(), 2, "approved act and the unguarded look ran");
    let results = tool_messages(&mock, 1);
    assert_eq!(results.len(), 3, "results in call order");
    assert!(results[0].contains("\"n\":1"));
    assert_eq!(results[2], "Tool call was not approved by the user");

    let end = decided(
        decide
            .approve(pb::ApproveRequest {
                run_id: second.run_id.clone(),
                tool_call_id: second.suspend_payload.expect("payload").tool_call_id,
                ..Default::default()
            })
            .await,
    )
    .await;
    let result = support::finish(&end);
    assert_eq!(result.text, "All done.");
    assert_eq!(
        result.steps.len(),
        3,
        "the finished run reports all its steps"
    );
    assert_eq!(effect.calls(), 3);
    server.stop().await.expect("stop");
}

async fn racing_approvals_on_two_replicas_one_wins(redis: Deployment) {
    let effect = SideEffect::start().await;
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push(MockReply::ToolCalls(vec![act(9)]));
    mock.push(MockReply::Text("Once.".into()));
    let dir = tempfile::tempdir().expect("dir");
    let config = || support::agent_config(&mock, &agents(&effect.url), &redis.url(), dir.path());
    let a = support::start(config()).await;
    let b = support::start(config()).await;
    let suspended =
        support::finish(&support::generate(&mut support::agents_client(&a).await, ask("go")).await);
    let call = suspended.suspend_payload.expect("payload").tool_call_id;
    let (channel_a, channel_b) = (support::channel(&a).await, support::channel(&b).await);
    let approve = |channel: Channel| {
        let run_id = suspended.run_id.clone();
        let call = call.clone();
        async move {
            let mut client = ApprovalServiceClient::new(channel);
            match client
                .approve(pb::ApproveRequest {
                    run_id,
                    tool_call_id: call,
                    ..Default::default()
                })
                .await
            {
                Ok(stream) => Ok(support::collect(stream.into_inner()).await),
                Err(status) => Err(status),
            }
        }
    };
    let (first, second) = tokio::join!(approve(channel_a), approve(channel_b));
    let outcomes = [first, second];
    let winners: Vec<&Vec<pb::Chunk>> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
    let losers: Vec<&tonic::Status> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    assert_eq!(winners.len(), 1, "exactly one decision wins");
    assert_eq!(losers[0].code(), Code::FailedPrecondition);
    assert_eq!(support::finish(winners[0]).text, "Once.");
    assert_eq!(effect.calls(), 1);
    a.stop().await.expect("stop a");
    b.stop().await.expect("stop b");
}

#[tokio::test]
async fn client_tool_answered_by_resume() {
    let effect = SideEffect::start().await;
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push(MockReply::ToolCalls(vec![(
        "pick_color".into(),
        json!({"options": ["red", "blue"]}),
    )]));
    mock.push(MockReply::Text("Blue it is.".into()));
    let dir = tempfile::tempdir().expect("dir");
    let server = start_guarded(&mock, &effect, dir.path()).await;
    let chunks = support::generate(
        &mut support::agents_client(&server).await,
        pb::GenerateRequest {
            client_tools: vec![pb::ClientTool {
                resume_schema: None,
                name: "pick_color".into(),
                description: "Asks the user for a color".into(),
                parameters: None,
            }],
            ..ask("choose")
        },
    )
    .await;
    assert!(support::kinds(&chunks).contains(&"tool-call-suspended"));
    let suspended = support::finish(&chunks);
    let payload = suspended.suspend_payload.expect("payload");
    assert_eq!(payload.kind(), pb::SuspensionKind::ClientTool);
    let mut decide = approvals(&server).await;
    let wrong = decide
        .approve(pb::ApproveRequest {
            run_id: suspended.run_id.clone(),
            tool_call_id: payload.tool_call_id.clone(),
            ..Default::default()
        })
        .await
        .expect_err("client tools are resumed, not approved");
    assert_eq!(wrong.code(), Code::FailedPrecondition);
    let rest = decided(
        decide
            .resume(pb::ResumeRequest {
                run_id: suspended.run_id,
                tool_call_id: payload.tool_call_id,
                data: Some(agentd::json::to_proto_value(&json!({"color": "blue"}))),
                ..Default::default()
            })
            .await,
    )
    .await;
    assert_eq!(support::finish(&rest).text, "Blue it is.");
    assert_eq!(tool_messages(&mock, 1), ["{\"color\":\"blue\"}"]);
    server.stop().await.expect("stop");
}

#[tokio::test]
async fn unknown_and_expired_decisions_have_clear_errors() {
    let effect = SideEffect::start().await;
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push(MockReply::ToolCalls(vec![act(4)]));
    let dir = tempfile::tempdir().expect("dir");
    let mut config = support::agent_config(&mock, &agents(&effect.url), "embedded", dir.path());
    config.limits.approval_ttl_secs = 1;
    let server = support::start(config).await;
    let suspended = support::finish(
        &support::generate(&mut support::agents_client(&server).await, ask("go")).await,
    );
    let call = suspended.suspend_payload.expect("payload").tool_call_id;
    let mut decide = approvals(&server).await;
    let unknown_run = decide
        .approve(pb::ApproveRequest {
            run_id: "no-such-run".into(),
            tool_call_id: call.clone(),
            ..Default::default()
        })
        .await
        .expect_err("unknown run");
    assert_eq!(unknown_run.code(), Code::NotFound);
    let unknown_call = decide
        .approve(pb::ApproveRequest {
            run_id: suspended.run_id.clone(),
            tool_call_id: "no-such-call".into(),
            ..Default::default()
        })
        .await
        .expect_err("unknown call");
    assert_eq!(unknown_call.code(), Code::NotFound);
    let missing = decide
        .approve(pb::ApproveRequest::default())
        .await
        .expect_err("ids required");
    assert_eq!(missing.code(), Code::InvalidArgument);

    tokio::time::sleep(Duration::from_millis(1500)).await;
    let expired = decide
        .approve(pb::ApproveRequest {
            run_id: suspended.run_id,
            tool_call_id: call,
            ..Default::default()
        })
        .await
        .expect_err("expired");
    assert_eq!(expired.code(), Code::FailedPrecondition);
    assert!(
        expired.message().contains("expired"),
        "{}",
        expired.message()
    );
    assert_eq!(effect.calls(), 0);
    server.stop().await.expect("stop");
}

#[tokio::test]
async fn auto_resume_answers_a_client_tool_with_the_next_message_but_never_an_approval() {
    let effect = SideEffect::start().await;
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = start_guarded(&mock, &effect, dir.path()).await;
    let mut client = support::agents_client(&server).await;
    let mut approvals = approvals(&server).await;
    let (thread, resource) = (support::unique("t"), support::unique("r"));
    let color_schema = json!({
        "type": "object",
        "properties": {"color": {"type": "string"}},
        "required": ["color"]
    });
    let ask_user = || pb::ClientTool {
        name: "ask_user".into(),
        description: "Asks the user a question".into(),
        parameters: None,
        resume_schema: color_schema.as_object().map(agentd::json::to_proto_struct),
    };
    mock.push(MockReply::ToolCalls(vec![(
        "ask_user".into(),
        json!({"q": "Color?"}),
    )]));
    let chunks = support::generate(
        &mut client,
        pb::GenerateRequest {
            client_tools: vec![ask_user()],
            memory: Some(support::memory(&thread, &resource, None)),
            ..ask("pick a color")
        },
    )
    .await;
    let suspended = support::finish(&chunks);
    assert_eq!(suspended.finish_reason(), pb::FinishReason::Suspended);
    let waiting = pending_calls(&chunks).remove(0);
    assert_eq!(
        waiting
            .resume_schema
            .as_ref()
            .map(agentd::json::from_proto_struct),
        color_schema.as_object().cloned(),
        "the client tool's resume schema travels with the suspension"
    );

    // The next message's run: the model reads the waiting call and answers it by calling the
    // tool again with resumeData, as the reference's auto-resume works.
    mock.push(MockReply::ToolCalls(vec![(
        "ask_user".into(),
        json!({
            "q": "Color?",
            "suspendedToolCallId": waiting.tool_call_id,
            "suspendedToolRunId": suspended.run_id,
            "resumeData": {"color": "green"}
        }),
    )]));
    mock.push(MockReply::Text("Green, then.".into()));
    let resumed = support::finish(
        &support::generate(
            &mut client,
            pb::GenerateRequest {
                client_tools: vec![ask_user()],
                auto_resume_suspended_tools: true,
                memory: Some(support::memory(&thread, &resource, None)),
                ..ask("green")
            },
        )
        .await,
    );
    assert_ne!(resumed.run_id, suspended.run_id, "a new run answers it");
    assert_eq!(resumed.finish_reason(), pb::FinishReason::Stop);
    assert_eq!(resumed.text, "Green, then.");
    let first = &mock.requests()[1];
    let system = first["messages"][0]["content"].as_str().unwrap_or_default();
    let listed = format!(
        "Act carefully.\n\nAnalyse the suspended tools: [{{\"toolCallId\":\"{}\",\"toolName\":\"ask_user\",\"args\":{{\"q\":\"Color?\"}},\"type\":\"suspension\",\"runId\":\"{}\",\"resumeSchema\":",
        waiting.tool_call_id, suspended.run_id
    );
    assert!(system.starts_with(&listed), "{system}");
    let params = &first["tools"][0]["function"]["parameters"];
    assert_eq!(
        params["x-optional"],
        json!(["suspendedToolCallId", "suspendedToolRunId", "resumeData"])
    );
    // The suspended call itself is left out of the history (incomplete tool calls are filtered).
    let history_calls = first["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["tool_calls"].is_array())
        .count();
    assert_eq!(history_calls, 0, "{first}");
    assert_eq!(tool_messages(&mock, 2), ["{\"color\":\"green\"}"]);
    let step = &resumed.steps[0];
    assert_eq!(
        step.tool_calls[0]
            .args
            .as_ref()
            .map(agentd::json::from_proto_value),
        Some(json!({"q": "Color?"})),
        "the resume arguments are stripped"
    );
    // The answering message is saved like any other; the old run no longer waits.
    let stored: Vec<String> = resumed
        .messages
        .iter()
        .filter(|m| m.role() == pb::Role::User)
        .flat_map(|m| m.content.iter())
        .filter_map(|p| match &p.kind {
            Some(pb::part::Kind::Text(t)) => Some(t.text.clone()),
            _ => None,
        })
        .collect();
    assert!(stored.contains(&"green".to_owned()), "{stored:?}");
    let listed = approvals
        .list_pending(pb::ListPendingRequest {
            thread_id: Some(thread.clone()),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner();
    assert!(listed.runs.is_empty(), "{listed:?}");

    // A pending approval is never resumed by a message: a new run starts instead.
    mock.push(MockReply::ToolCalls(vec![act(5)]));
    let waiting = support::finish(
        &support::generate(
            &mut client,
            pb::GenerateRequest {
                memory: Some(support::memory(&thread, &resource, None)),
                ..ask("act")
            },
        )
        .await,
    );
    assert_eq!(waiting.finish_reason(), pb::FinishReason::Suspended);
    mock.push(MockReply::Text("A new run.".into()));
    let fresh = support::finish(
        &support::generate(
            &mut client,
            pb::GenerateRequest {
                auto_resume_suspended_tools: true,
                memory: Some(support::memory(&thread, &resource, None)),
                ..ask("yes do it")
            },
        )
        .await,
    );
    assert_ne!(fresh.run_id, waiting.run_id);
    assert_eq!(effect.calls(), 0, "the approval is still pending");
    server.stop().await.expect("stop");
}

on_each_redis!(
    suspend_on_a_stop_a_approve_on_b,
    racing_approvals_on_two_replicas_one_wins,
);
