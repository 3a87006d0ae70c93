//! An approval inside a sub-agent, over real gRPC on Redis: the sub-agent's run suspends, and
//! its supervisor with it (on the delegation call); the tree is listed under the supervisor's
//! thread, decided through ApprovalService on another replica, and continues there: the
//! sub-agent first, then the supervisor with the sub-agent's answer. Aborting a waiting
//! supervisor ends its waiting sub-agent too.

mod support;

use agentd::json::from_proto_value;
use agentd::model::{MockOpenAi, MockReply};
use agentd::pb;
use agentd::pb::approval_service_client::ApprovalServiceClient;
use agentd::pb::chunk::Payload;
use agentd::server::RunningServer;
use serde_json::json;
use support::redis::Deployment;
use tonic::Code;

const TEAM: &str = r#"
[[agents]]
id = "boss"
name = "Boss"
instructions = "You coordinate specialists."
model = "mock/test-model"
[agents.sub_agents]
planner = "planner"

[[agents]]
id = "planner"
description = "Plans work."
instructions = "You plan."
model = "mock/test-model"
tools = ["tasks"]
require_approval = ["task_write"]
"#;

/// The supervisor delegates and the sub-agent wants to write its plan (which waits for
/// approval); then each of `texts` answers in turn.
fn script(mock: &MockOpenAi, texts: &[&str]) {
    let call =
        |name: &str, args: serde_json::Value| MockReply::ToolCalls(vec![(name.into(), args)]);
    mock.push(call("agent-planner", json!({"prompt": "Plan the launch"})));
    mock.push(call(
        "task_write",
        json!({"tasks": [{"content": "Launch", "status": "pending", "activeForm": "Launching"}]}),
    ));
    for text in texts {
        mock.push(MockReply::Text((*text).into()));
    }
}

/// The whole log of a run, replayed (followed to its end).
async fn observe(server: &RunningServer, run_id: String) -> Vec<pb::Chunk> {
    support::collect(
        support::agents_client(server)
            .await
            .observe(pb::ObserveRequest {
                run_id,
                after_sequence: 0,
            })
            .await
            .expect("observe")
            .into_inner(),
    )
    .await
}

/// The tool message of model request `i`.
fn tool_message(mock: &MockOpenAi, i: usize) -> serde_json::Value {
    mock.requests()[i]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .expect("tool message")
}

/// Starts a suspended tree on `server`: the supervisor's chunks, its run id, the sub-run's id
/// and the sub-run's waiting call.
async fn suspended_tree(
    server: &RunningServer,
    thread: &str,
    resource: &str,
) -> (Vec<pb::Chunk>, String, String, String) {
    let chunks = support::generate(
        &mut support::agents_client(server).await,
        pb::GenerateRequest {
            agent_id: "boss".into(),
            prompt: "Get it planned".into(),
            memory: Some(support::memory(thread, resource, None)),
            ..Default::default()
        },
    )
    .await;
    let result = support::finish(&chunks);
    assert_eq!(result.finish_reason(), pb::FinishReason::Suspended);
    // The sub-agent's approval request streamed inside the supervisor's stream.
    let approval = chunks
        .iter()
        .find_map(|c| match &c.payload {
            Some(Payload::ToolOutput(o)) => match o.chunk.as_deref() {
                Some(pb::Chunk {
                    run_id,
                    payload: Some(Payload::ToolCallApproval(s)),
                    ..
                }) => Some((run_id.clone(), s.tool_call_id.clone())),
                _ => None,
            },
            _ => None,
        })
        .expect("the sub-agent's approval request");
    // The supervisor waits on its delegation call, for that sub-run.
    let waiting = chunks
        .iter()
        .find_map(|c| match &c.payload {
            Some(Payload::ToolCallSuspended(s)) => Some(s.clone()),
            _ => None,
        })
        .expect("the supervisor's waiting call");
    assert_eq!(
        (waiting.kind(), waiting.sub_run_id.as_str()),
        (pb::SuspensionKind::SubAgent, approval.0.as_str())
    );
    (chunks, result.run_id, approval.0, approval.1)
}

async fn the_tree_resumes_on_another_replica(redis: Deployment) {
    let mock = MockOpenAi::start().await.expect("mock");
    script(&mock, &["Planned.", "The planner planned it."]);
    let dir = tempfile::tempdir().expect("dir");
    let config = || support::agent_config(&mock, TEAM, &redis.url(), dir.path());
    let (thread, resource) = (support::unique("t"), support::unique("r"));
    let a = support::start(config()).await;
    let (_, boss_run, sub_run, call) = suspended_tree(&a, &thread, &resource).await;
    assert_eq!(mock.requests().len(), 2, "nothing ran past the approval");
    a.stop().await.expect("stop a");

    let b = support::start(config()).await;
    let mut approvals = ApprovalServiceClient::new(support::channel(&b).await);
    // The supervisor's thread lists the whole tree: the sub-agent's approval, and the
    // supervisor waiting for it.
    let listed = approvals
        .list_pending(pb::ListPendingRequest {
            thread_id: Some(thread.clone()),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .runs;
    let mut runs: Vec<(String, String)> = listed
        .iter()
        .map(|r| (r.run_id.clone(), r.pending[0].tool_name.clone()))
        .collect();
    runs.sort();
    let mut expected = vec![
        (boss_run.clone(), "agent-planner".to_owned()),
        (sub_run.clone(), "task_write".to_owned()),
    ];
    expected.sort();
    assert_eq!(runs, expected);
    // The supervisor's call is not decided from outside.
    let refused = approvals
        .approve(pb::ApproveRequest {
            run_id: boss_run.clone(),
            tool_call_id: listed
                .iter()
                .find(|r| r.run_id == boss_run)
                .map(|r| r.pending[0].tool_call_id.clone())
                .expect("the supervisor's call"),
            ..Default::default()
        })
        .await
        .expect_err("a delegation waits for its sub-run");
    assert_eq!(refused.code(), Code::FailedPrecondition);
    assert!(
        refused.message().contains(&sub_run),
        "{}",
        refused.message()
    );

    // Approving the sub-agent's call continues the tree on this replica: the sub-agent ends,
    // then the supervisor reads its answer and ends, all on the approver's stream.
    let rest = support::collect(
        approvals
            .approve(pb::ApproveRequest {
                run_id: sub_run.clone(),
                tool_call_id: call,
                ..Default::default()
            })
            .await
            .expect("approve")
            .into_inner(),
    )
    .await;
    let finishes: Vec<(String, pb::FinishReason)> = rest
        .iter()
        .filter_map(|c| match &c.payload {
            Some(Payload::Finish(r)) => Some((c.run_id.clone(), r.finish_reason())),
            _ => None,
        })
        .collect();
    assert_eq!(
        finishes,
        [
            (sub_run.clone(), pb::FinishReason::Stop),
            (boss_run.clone(), pb::FinishReason::Stop)
        ]
    );
    let result = support::finish(&rest);
    assert_eq!(result.text, "The planner planned it.");
    // The supervisor's model read the sub-agent's text as the delegation's output.
    let tool = tool_message(&mock, 3);
    assert_eq!(tool["content"], "Planned.");
    // The delegation's result carries the sub-agent's own tool results.
    let delegated = result
        .steps
        .iter()
        .flat_map(|s| &s.tool_results)
        .find(|r| r.tool_name == "agent-planner")
        .expect("the delegation's result");
    let object = from_proto_value(delegated.result.as_ref().expect("result"));
    assert_eq!(object["text"], "Planned.");
    assert_eq!(object["subAgentToolResults"][0]["toolName"], "task_write");
    assert_eq!(object["subAgentResourceId"], format!("{resource}-planner"));
    // Nothing waits any more.
    let none = approvals
        .list_pending(pb::ListPendingRequest {
            thread_id: Some(thread),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner();
    assert!(none.runs.is_empty());
    b.stop().await.expect("stop b");
}

on_each_redis!(the_tree_resumes_on_another_replica);

#[tokio::test]
async fn aborting_a_waiting_supervisor_ends_its_waiting_sub_agent() {
    let redis = Deployment::node();
    let mock = MockOpenAi::start().await.expect("mock");
    script(&mock, &["Planned.", "The planner planned it."]);
    let dir = tempfile::tempdir().expect("dir");
    let server = support::start(support::agent_config(&mock, TEAM, &redis.url(), dir.path())).await;
    let (thread, resource) = (support::unique("t"), support::unique("r"));
    let (_, boss_run, sub_run, _) = suspended_tree(&server, &thread, &resource).await;
    let mut agents = support::agents_client(&server).await;
    let aborted = agents
        .abort(pb::AbortRequest {
            run_id: boss_run,
            reason: "Never mind".into(),
        })
        .await
        .expect("abort")
        .into_inner();
    assert!(aborted.aborted);
    let sub = observe(&server, sub_run).await;
    assert_eq!(
        support::finish(&sub).finish_reason(),
        pb::FinishReason::Aborted
    );
    assert_eq!(mock.requests().len(), 2, "no model call after the abort");
    server.stop().await.expect("stop");
}

#[tokio::test]
async fn aborting_a_waiting_sub_agent_lets_its_supervisor_go_on_with_the_failure() {
    let redis = Deployment::node();
    let mock = MockOpenAi::start().await.expect("mock");
    script(&mock, &["The planner could not plan."]);
    let dir = tempfile::tempdir().expect("dir");
    let server = support::start(support::agent_config(&mock, TEAM, &redis.url(), dir.path())).await;
    let (thread, resource) = (support::unique("t"), support::unique("r"));
    let (_, boss_run, sub_run, _) = suspended_tree(&server, &thread, &resource).await;
    let mut agents = support::agents_client(&server).await;
    agents
        .abort(pb::AbortRequest {
            run_id: sub_run,
            reason: "Not this one".into(),
        })
        .await
        .expect("abort the sub-run");
    // The supervisor goes on by itself (Observe follows it to its end): its model reads the
    // reference's failure text for the delegation.
    let boss = observe(&server, boss_run).await;
    let result = support::finish(&boss);
    assert_eq!(result.finish_reason(), pb::FinishReason::Stop);
    assert_eq!(result.text, "The planner could not plan.");
    let tool = tool_message(&mock, 2);
    assert_eq!(
        tool["content"],
        "[Agent:Boss] - Failed agent tool execution for planner"
    );
    server.stop().await.expect("stop");
}
