//! TaskService over real gRPC, on the embedded store and on a private redis-server: the
//! reference conformance cases, validation, ownership, Watch, persistence and concurrency.

mod support;

use std::time::Duration;

use agentd::pb;
use agentd::pb::task_service_client::TaskServiceClient;
use agentd::server::RunningServer;
use futures::StreamExt;
use serde_json::{Value, json};
use support::redis::{Deployment, RedisServer};
use tonic::Code;
use tonic::transport::Channel;
use tonic_types::StatusExt;

/// Runs `$body(&server)` once on a fresh embedded store and once on a fresh Redis.
macro_rules! on_both_stores {
    ($name:ident, $body:path) => {
        mod $name {
            use super::*;

            #[tokio::test]
            async fn embedded() {
                let dir = tempfile::tempdir().expect("temp dir");
                let server = support::start_embedded(dir.path()).await;
                $body(&server).await;
                server.stop().await.expect("clean stop");
            }

            #[tokio::test]
            async fn redis() {
                let redis = RedisServer::start();
                let server = support::start_redis(&redis.url()).await;
                $body(&server).await;
                server.stop().await.expect("clean stop");
            }
        }
    };
}

/// The reference's name for a status (the JSON the model reads).
fn status_str(status: i32) -> &'static str {
    match pb::TaskStatus::try_from(status) {
        Ok(pb::TaskStatus::Pending) => "pending",
        Ok(pb::TaskStatus::InProgress) => "in_progress",
        Ok(pb::TaskStatus::Completed) => "completed",
        _ => panic!("a stored task always has a status, got {status}"),
    }
}

/// The proto status for a reference name; anything else is left unset, as a client would.
fn status_enum(name: &str) -> i32 {
    match name {
        "pending" => pb::TaskStatus::Pending,
        "in_progress" => pb::TaskStatus::InProgress,
        "completed" => pb::TaskStatus::Completed,
        _ => pb::TaskStatus::Unspecified,
    }
    .into()
}

fn task_json(t: &pb::Task) -> Value {
    json!({"id": t.id, "content": t.content, "status": status_str(t.status), "activeForm": t.active_form})
}

fn tasks_json(tasks: &[pb::Task]) -> Value {
    Value::Array(tasks.iter().map(task_json).collect())
}

fn result_json(r: &pb::TaskResult) -> Value {
    assert_eq!(
        r.is_error,
        r.error_code != pb::TaskErrorCode::Unspecified as i32,
        "error_code must be set exactly when is_error: {r:?}"
    );
    json!({"content": r.content, "tasks": tasks_json(&r.tasks), "isError": r.is_error})
}

fn check_json(r: &pb::TaskCheckResult) -> Value {
    let s = r.summary.expect("summary is always set");
    json!({
        "content": r.content, "tasks": tasks_json(&r.tasks), "isError": r.is_error,
        "summary": {"total": s.total, "completed": s.completed, "inProgress": s.in_progress,
            "pending": s.pending, "incomplete": s.incomplete, "hasTasks": s.has_tasks,
            "allCompleted": s.all_completed},
        "incompleteTasks": tasks_json(&r.incomplete_tasks),
    })
}

fn str_field(v: &Value, name: &str) -> String {
    v.get(name)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn opt_field(v: &Value, name: &str) -> Option<String> {
    v.get(name).and_then(Value::as_str).map(str::to_owned)
}

/// One conformance op as a gRPC call; returns the answer in the reference's JSON shape, or
/// the status for a rejected request.
async fn call(
    client: &mut TaskServiceClient<Channel>,
    thread: (&str, &str),
    op: &str,
    input: &Value,
) -> Result<Value, tonic::Status> {
    let (thread_id, resource_id) = (thread.0.to_owned(), thread.1.to_owned());
    match op {
        "write" => {
            let tasks = input["tasks"]
                .as_array()
                .expect("write input has tasks")
                .iter()
                .map(|t| pb::TaskInput {
                    id: opt_field(t, "id"),
                    content: str_field(t, "content"),
                    status: status_enum(&str_field(t, "status")),
                    active_form: str_field(t, "activeForm"),
                })
                .collect();
            let r = client
                .write(pb::WriteRequest {
                    thread_id,
                    resource_id,
                    tasks,
                })
                .await?;
            Ok(result_json(r.get_ref()))
        }
        "update" => {
            let r = client
                .update(pb::UpdateRequest {
                    thread_id,
                    resource_id,
                    id: str_field(input, "id"),
                    content: opt_field(input, "content"),
                    status: opt_field(input, "status").map(|s| status_enum(&s)),
                    active_form: opt_field(input, "activeForm"),
                })
                .await?;
            Ok(result_json(r.get_ref()))
        }
        "complete" => {
            let r = client
                .complete(pb::CompleteRequest {
                    thread_id,
                    resource_id,
                    id: str_field(input, "id"),
                })
                .await?;
            Ok(result_json(r.get_ref()))
        }
        "check" => {
            let r = client
                .check(pb::CheckRequest {
                    thread_id,
                    resource_id,
                })
                .await?;
            Ok(check_json(r.get_ref()))
        }
        other => panic!("unknown op {other}"),
    }
}

/// The field paths a reference validation message names (`- path: message` lines).
fn validation_paths(message: &str) -> Vec<String> {
    let issues = message
        .split("\n\nProvided arguments:")
        .next()
        .unwrap_or("");
    issues
        .lines()
        .filter_map(|line| line.strip_prefix("- "))
        .filter_map(|line| line.split_once(": ").map(|(path, _)| path.to_owned()))
        .collect()
}

async fn conformance(server: &RunningServer) {
    let cases: Vec<Value> =
        serde_json::from_str(include_str!("conformance/tasks.json")).expect("conformance JSON");
    assert!(cases.len() >= 14, "all recorded cases are present");
    let mut client = support::tasks_client(server).await;
    for case in &cases {
        let name = case["name"].as_str().expect("case name");
        let (thread_id, resource_id) = if case["memory"].as_bool() == Some(true) {
            (support::unique(name), support::unique("resource"))
        } else {
            (String::new(), String::new())
        };
        let ops = case["ops"].as_array().expect("ops");
        let results = case["results"].as_array().expect("results");
        assert_eq!(ops.len(), results.len(), "{name}: one result per op");
        for (i, (op, expected)) in ops.iter().zip(results).enumerate() {
            let kind = op["op"].as_str().expect("op name");
            let got = call(&mut client, (&thread_id, &resource_id), kind, &op["input"]).await;
            if expected.get("error").and_then(Value::as_bool) == Some(true) {
                let status = got.expect_err(&format!("{name} op {i}: must be rejected"));
                assert_eq!(status.code(), Code::InvalidArgument, "{name} op {i}");
                let paths = validation_paths(expected["message"].as_str().expect("message"));
                let bad = status
                    .get_details_bad_request()
                    .unwrap_or_else(|| panic!("{name} op {i}: BadRequest details"));
                let fields: Vec<String> = bad
                    .field_violations
                    .iter()
                    .map(|v| v.field.clone())
                    .collect();
                assert_eq!(fields, paths, "{name} op {i}: field violations");
            } else {
                let got = got.unwrap_or_else(|s| panic!("{name} op {i}: {s:?}"));
                assert_eq!(&got, expected, "{name} op {i} ({kind})");
            }
        }
    }
}
on_both_stores!(conformance_cases, conformance);

async fn rejects_bad_input_and_changes_nothing(server: &RunningServer) {
    let mut client = support::tasks_client(server).await;
    let (thread_id, resource_id) = (support::unique("t"), support::unique("r"));
    let good = pb::TaskInput {
        id: None,
        content: "Keep me".into(),
        status: pb::TaskStatus::Pending.into(),
        active_form: "Keeping".into(),
    };
    client
        .write(pb::WriteRequest {
            thread_id: thread_id.clone(),
            resource_id: resource_id.clone(),
            tasks: vec![good.clone()],
        })
        .await
        .expect("valid write");

    let too_many = vec![good.clone(); 201];
    let huge = pb::TaskInput {
        content: "x".repeat(20_000),
        ..good.clone()
    };
    let bad_requests = [(too_many, "tasks"), (vec![huge], "tasks.0.content")];
    for (tasks, field) in bad_requests {
        let status = client
            .write(pb::WriteRequest {
                thread_id: thread_id.clone(),
                resource_id: resource_id.clone(),
                tasks,
            })
            .await
            .expect_err("rejected");
        assert_eq!(status.code(), Code::InvalidArgument);
        let bad = status.get_details_bad_request().expect("details");
        assert_eq!(bad.field_violations[0].field, field);
    }
    let status = client
        .check(pb::CheckRequest {
            thread_id: "x".repeat(300),
            resource_id: resource_id.clone(),
        })
        .await
        .expect_err("long thread id rejected");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().contains("thread_id"),
        "{}",
        status.message()
    );

    let status = client
        .update(pb::UpdateRequest {
            thread_id: thread_id.clone(),
            resource_id: resource_id.clone(),
            id: "task_keep_me".into(),
            status: Some(pb::TaskStatus::Unspecified.into()),
            ..Default::default()
        })
        .await
        .expect_err("bad status rejected");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(
        status
            .get_details_bad_request()
            .expect("details")
            .field_violations[0]
            .field,
        "status"
    );

    let list = client
        .check(pb::CheckRequest {
            thread_id,
            resource_id,
        })
        .await
        .expect("check");
    assert_eq!(list.get_ref().tasks.len(), 1);
    assert_eq!(list.get_ref().tasks[0].status(), pb::TaskStatus::Pending);
}
on_both_stores!(bad_input, rejects_bad_input_and_changes_nothing);

async fn thread_of_another_resource_is_denied(server: &RunningServer) {
    let mut client = support::tasks_client(server).await;
    let thread_id = support::unique("t");
    let task = pb::TaskInput {
        id: Some("mine".into()),
        content: "Mine".into(),
        status: pb::TaskStatus::Pending.into(),
        active_form: "Owning".into(),
    };
    client
        .write(pb::WriteRequest {
            thread_id: thread_id.clone(),
            resource_id: "alice".into(),
            tasks: vec![task.clone()],
        })
        .await
        .expect("alice writes");
    let write = client
        .write(pb::WriteRequest {
            thread_id: thread_id.clone(),
            resource_id: "mallory".into(),
            tasks: vec![],
        })
        .await
        .expect_err("mallory cannot write");
    assert_eq!(write.code(), Code::PermissionDenied);
    let check = client
        .check(pb::CheckRequest {
            thread_id: thread_id.clone(),
            resource_id: "mallory".into(),
        })
        .await
        .expect_err("mallory cannot read");
    assert_eq!(check.code(), Code::PermissionDenied);
    let own = client
        .check(pb::CheckRequest {
            thread_id,
            resource_id: "alice".into(),
        })
        .await
        .expect("alice reads");
    assert_eq!(own.get_ref().tasks.len(), 1, "nothing was touched");
}
on_both_stores!(ownership, thread_of_another_resource_is_denied);

async fn watch_sends_current_list_then_changes(server: &RunningServer) {
    let mut client = support::tasks_client(server).await;
    let (thread_id, resource_id) = (support::unique("t"), support::unique("r"));
    let mut watch = client
        .watch(pb::WatchRequest {
            thread_id: thread_id.clone(),
            resource_id: resource_id.clone(),
        })
        .await
        .expect("watch")
        .into_inner();
    let first = tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .expect("first message in time")
        .expect("stream open")
        .expect("ok");
    assert_eq!(first.version, 0);
    assert!(first.tasks.is_empty());
    for content in ["One", "Two"] {
        client
            .write(pb::WriteRequest {
                thread_id: thread_id.clone(),
                resource_id: resource_id.clone(),
                tasks: vec![pb::TaskInput {
                    id: None,
                    content: content.into(),
                    status: pb::TaskStatus::Pending.into(),
                    active_form: "Doing".into(),
                }],
            })
            .await
            .expect("write");
        let update = tokio::time::timeout(Duration::from_secs(5), watch.next())
            .await
            .expect("update in time")
            .expect("stream open")
            .expect("ok");
        assert_eq!(update.tasks[0].content, content);
    }
    let status = client
        .watch(pb::WatchRequest {
            thread_id: String::new(),
            resource_id,
        })
        .await
        .expect_err("watch needs a thread");
    assert_eq!(status.code(), Code::InvalidArgument);
}
on_both_stores!(watch, watch_sends_current_list_then_changes);

#[tokio::test]
async fn embedded_lists_survive_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (thread_id, resource_id) = (support::unique("t"), support::unique("r"));
    let server = support::start_embedded(dir.path()).await;
    let mut client = support::tasks_client(&server).await;
    let written = client
        .write(pb::WriteRequest {
            thread_id: thread_id.clone(),
            resource_id: resource_id.clone(),
            tasks: vec![pb::TaskInput {
                id: None,
                content: "Survive a restart".into(),
                status: pb::TaskStatus::InProgress.into(),
                active_form: "Surviving".into(),
            }],
        })
        .await
        .expect("write")
        .into_inner();
    drop(client);
    server.stop().await.expect("clean stop");

    let server = support::start_embedded(dir.path()).await;
    let mut client = support::tasks_client(&server).await;
    let after = client
        .check(pb::CheckRequest {
            thread_id,
            resource_id,
        })
        .await
        .expect("check")
        .into_inner();
    assert_eq!(after.tasks, written.tasks);
    server.stop().await.expect("clean stop");
}

async fn concurrent_updates_on_two_replicas_all_survive(redis: Deployment) {
    const N: usize = 64;
    let a = support::start_redis(&redis.url()).await;
    let b = support::start_redis(&redis.url()).await;
    let (thread_id, resource_id) = (support::unique("t"), support::unique("r"));
    let tasks = (0..N)
        .map(|i| pb::TaskInput {
            id: Some(format!("t{i}")),
            content: format!("Task {i}"),
            status: pb::TaskStatus::Pending.into(),
            active_form: format!("Doing {i}"),
        })
        .collect();
    let mut client_a = support::tasks_client(&a).await;
    let client_b = support::tasks_client(&b).await;
    client_a
        .write(pb::WriteRequest {
            thread_id: thread_id.clone(),
            resource_id: resource_id.clone(),
            tasks,
        })
        .await
        .expect("initial write");

    let updates = (0..N).map(|i| {
        let mut client = if i % 2 == 0 {
            client_a.clone()
        } else {
            client_b.clone()
        };
        let request = pb::UpdateRequest {
            thread_id: thread_id.clone(),
            resource_id: resource_id.clone(),
            id: format!("t{i}"),
            content: Some(format!("Changed {i}")),
            ..Default::default()
        };
        tokio::spawn(async move { client.update(request).await })
    });
    for handle in futures::future::join_all(updates).await {
        let response = handle.expect("task").expect("update ok").into_inner();
        assert!(!response.is_error, "{}", response.content);
    }
    let list = client_a
        .check(pb::CheckRequest {
            thread_id,
            resource_id,
        })
        .await
        .expect("check")
        .into_inner();
    assert_eq!(list.tasks.len(), N);
    for (i, task) in list.tasks.iter().enumerate() {
        assert_eq!(task.content, format!("Changed {i}"), "update {i} survived");
    }
    a.stop().await.expect("stop a");
    b.stop().await.expect("stop b");
}

async fn watch_sees_writes_from_another_replica(redis: Deployment) {
    let a = support::start_redis(&redis.url()).await;
    let b = support::start_redis(&redis.url()).await;
    let (thread_id, resource_id) = (support::unique("t"), support::unique("r"));
    let mut watch = support::tasks_client(&a)
        .await
        .watch(pb::WatchRequest {
            thread_id: thread_id.clone(),
            resource_id: resource_id.clone(),
        })
        .await
        .expect("watch on a")
        .into_inner();
    watch.next().await.expect("first").expect("ok");
    support::tasks_client(&b)
        .await
        .write(pb::WriteRequest {
            thread_id,
            resource_id,
            tasks: vec![pb::TaskInput {
                id: None,
                content: "From b".into(),
                status: pb::TaskStatus::Pending.into(),
                active_form: "Writing".into(),
            }],
        })
        .await
        .expect("write on b");
    let update = tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .expect("update in time")
        .expect("open")
        .expect("ok");
    assert_eq!(update.tasks[0].content, "From b");
    a.stop().await.expect("stop a");
    b.stop().await.expect("stop b");
}

on_each_redis!(
    concurrent_updates_on_two_replicas_all_survive,
    watch_sees_writes_from_another_replica,
);
