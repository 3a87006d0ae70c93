//! The JSON mapping with curl: unary calls, server streams (NDJSON, SSE), a bidi stream, the
//! errors a client can cause, API keys and trace context, exactly as for gRPC.

use agentd::config::Config;
use agentd::model::{MockOpenAi, MockReply};
use agentd::server::RunningServer;
use serde_json::{Value, json};

use crate::curl::{Reply, run};
use crate::duplex::Duplex;
use crate::support;

async fn server(tweak: impl FnOnce(&mut Config)) -> (RunningServer, MockOpenAi, tempfile::TempDir) {
    let mock = MockOpenAi::start().await.expect("mock model");
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = support::agent_config(&mock, support::AGENTS_TOML, "embedded", dir.path());
    tweak(&mut config);
    (support::start(config).await, mock, dir)
}

fn url(server: &RunningServer, method: &str) -> String {
    format!("http://{}/{method}", server.addr)
}

/// `curl -H 'content-type: application/json' -d BODY URL` plus `extra` arguments.
async fn post(server: &RunningServer, method: &str, body: &Value, extra: &[&str]) -> Reply {
    let mut args = vec![
        "-H".to_owned(),
        "content-type: application/json".to_owned(),
        "-d".to_owned(),
        body.to_string(),
    ];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    args.push(url(server, method));
    run(args).await
}

fn as_u64(v: &Value) -> u64 {
    match v {
        Value::String(s) => s
            .parse()
            .expect("64-bit integers are strings in proto3 JSON"),
        other => other.as_u64().expect("a number"),
    }
}

#[tokio::test]
async fn unary_calls_answer_json_and_bad_requests_name_the_field() {
    let (server, _mock, _dir) = server(|c| c.limits.max_request_bytes = 4096).await;
    let thread = json!({"threadId": "t1", "resourceId": "alice"});
    let write = json!({"threadId": "t1", "resourceId": "alice", "tasks": [
        {"content": "Fix bug", "status": "TASK_STATUS_IN_PROGRESS", "activeForm": "Fixing the bug"}]});
    let reply = post(&server, "agentd.v1.TaskService/Write", &write, &[]).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let written = reply.json();
    assert_eq!(written["tasks"][0]["id"], "task_fix_bug");
    assert_eq!(written["tasks"][0]["status"], "TASK_STATUS_IN_PROGRESS");
    assert!(
        written["content"]
            .as_str()
            .unwrap()
            .contains("task_fix_bug: Fix bug (in_progress)")
    );

    let check = post(&server, "agentd.v1.TaskService/Check", &thread, &[])
        .await
        .json();
    assert_eq!(check["summary"]["inProgress"], 1);

    // An unknown field: 400, the path named, the BadRequest detail decoded by type.
    let bad =
        json!({"threadId": "t1", "resourceId": "alice", "tasks": [{"content": "x", "statuss": 1}]});
    let reply = post(&server, "agentd.v1.TaskService/Write", &bad, &[]).await;
    assert_eq!(reply.status, 400);
    let error = reply.json();
    assert_eq!(error["code"], 3);
    let violation = &error["details"][0];
    assert_eq!(
        violation["@type"],
        "type.googleapis.com/google.rpc.BadRequest"
    );
    assert_eq!(violation["fieldViolations"][0]["field"], "tasks.0.statuss");
    // The service's own validation, in the same shape.
    let empty = json!({"threadId": "t1", "resourceId": "alice", "tasks": [
        {"content": "", "status": "TASK_STATUS_PENDING", "activeForm": "y"}]});
    let reply = post(&server, "agentd.v1.TaskService/Write", &empty, &[]).await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.json()["details"][0]["fieldViolations"][0]["field"],
        "tasks.0.content"
    );
    // Nothing of the bad calls was written.
    let check = post(&server, "agentd.v1.TaskService/Check", &thread, &[])
        .await
        .json();
    assert_eq!(check["tasks"].as_array().unwrap().len(), 1);

    // curl's default form content-type, a GET, an unknown method, a body over the limit.
    let form = run(vec![
        "-d".into(),
        thread.to_string(),
        url(&server, "agentd.v1.TaskService/Check"),
    ])
    .await;
    assert_eq!(form.status, 415);
    assert!(
        form.json()["message"]
            .as_str()
            .unwrap()
            .contains("application/json")
    );
    let get = run(vec![url(&server, "agentd.v1.TaskService/Check")]).await;
    assert_eq!(get.status, 405);
    assert_eq!(get.header("allow"), Some("POST"));
    let unknown = post(&server, "agentd.v1.TaskService/Nope", &thread, &[]).await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json()["code"], 12);
    let huge = json!({"threadId": "t1", "resourceId": "alice", "tasks": [
        {"content": "x".repeat(5000), "status": "TASK_STATUS_PENDING", "activeForm": "y"}]});
    let reply = post(&server, "agentd.v1.TaskService/Write", &huge, &[]).await;
    assert_eq!(reply.status, 413);
    assert!(
        reply.json()["message"]
            .as_str()
            .unwrap()
            .contains("limits.max_request_bytes")
    );

    // Health answers over JSON too (a curl-able readiness check).
    let health = post(&server, "grpc.health.v1.Health/Check", &json!({}), &[])
        .await
        .json();
    assert_eq!(health["status"], "SERVING");
    // The OpenAPI document is served beside the calls.
    let doc = run(vec![format!("http://{}/openapi.json", server.addr)])
        .await
        .json();
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["paths"]["/agentd.v1.TaskService/Write"]["post"].is_object());
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn generate_streams_ndjson_and_sse_in_the_callers_trace() {
    let (server, mock, _dir) = server(|_| {}).await;
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let traceparent = format!("traceparent: 00-{trace_id}-00f067aa0ba902b7-01");
    let request = json!({
        "agentId": "planner",
        "prompt": "Plan it",
        "memory": {"thread": {"id": support::unique("t")}, "resource": "alice"},
    });
    mock.push(MockReply::ToolCalls(vec![(
        "task_write".into(),
        json!({"tasks": [{"content": "Plan", "status": "in_progress", "activeForm": "Planning"}]}),
    )]));
    mock.push(MockReply::Text("Planned.".into()));
    let reply = post(
        &server,
        "agentd.v1.AgentService/Generate",
        &request,
        &["-H", &traceparent],
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.header("content-type"), Some("application/x-ndjson"));
    assert_eq!(reply.header("x-trace-id"), Some(trace_id));
    let chunks: Vec<Value> = reply
        .lines()
        .into_iter()
        .map(|l| l["result"].clone())
        .collect();
    let sequences: Vec<u64> = chunks.iter().map(|c| as_u64(&c["sequence"])).collect();
    assert_eq!(sequences, (1..=chunks.len() as u64).collect::<Vec<_>>());
    assert!(
        chunks
            .iter()
            .any(|c| c["toolCall"]["toolName"] == "task_write"),
        "{chunks:?}"
    );
    let finish = &chunks.last().unwrap()["finish"];
    assert_eq!(finish["finishReason"], "FINISH_REASON_STOP");
    assert_eq!(finish["text"], "Planned.");
    assert_eq!(finish["traceId"], trace_id);

    // Observe over the same mapping re-attaches to the finished run and replays it.
    let run_id = finish["runId"].as_str().unwrap().to_owned();
    let observed = post(
        &server,
        "agentd.v1.AgentService/Observe",
        &json!({"runId": run_id}),
        &[],
    )
    .await;
    assert_eq!(observed.lines().len(), chunks.len());
    // A run that does not exist fails before any chunk: a plain JSON error.
    let missing = post(
        &server,
        "agentd.v1.AgentService/Observe",
        &json!({"runId": "nope"}),
        &[],
    )
    .await;
    assert_eq!(missing.status, 404, "{}", missing.body);
    assert_eq!(missing.json()["code"], 5);

    // Server-Sent Events when the client asks for them.
    mock.push(MockReply::Text("Again.".into()));
    let sse = post(
        &server,
        "agentd.v1.AgentService/Generate",
        &json!({"agentId": "plain", "prompt": "Hi"}),
        &["-H", "accept: text/event-stream"],
    )
    .await;
    assert_eq!(sse.header("content-type"), Some("text/event-stream"));
    let events: Vec<Value> = sse
        .body
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).expect("event data is JSON"))
        .collect();
    assert!(events.len() >= 4, "{}", sse.body);
    assert_eq!(events.last().unwrap()["finish"]["text"], "Again.");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn api_keys_guard_json_calls_like_grpc_ones() {
    let (server, _mock, _dir) = server(|c| c.auth.api_keys = vec!["s3cret".into()]).await;
    let body = json!({});
    let denied = post(&server, "agentd.v1.AgentService/ListAgents", &body, &[]).await;
    assert_eq!(denied.status, 401);
    assert_eq!(denied.json()["code"], 16);
    let wrong = post(
        &server,
        "agentd.v1.AgentService/ListAgents",
        &body,
        &["-H", "authorization: Bearer nope"],
    )
    .await;
    assert_eq!(wrong.status, 401);
    let allowed = post(
        &server,
        "agentd.v1.AgentService/ListAgents",
        &body,
        &["-H", "authorization: Bearer s3cret"],
    )
    .await;
    assert_eq!(allowed.status, 200, "{}", allowed.body);
    let listed = allowed.json();
    let ids: Vec<&str> = listed["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["id"].as_str())
        .collect();
    assert_eq!(ids, ["plain", "planner"]);
    // Health stays open, as over gRPC (probes carry no key).
    let health = post(&server, "grpc.health.v1.Health/Check", &body, &[]).await;
    assert_eq!(health.status, 200);
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_hooked_run_is_driven_over_one_ndjson_exchange() {
    let (server, mock, _dir) = server(|_| {}).await;
    mock.push(MockReply::ToolCalls(vec![("task_check".into(), json!({}))]));
    mock.push(MockReply::Text("Checked.".into()));
    let path = "/agentd.v1.AgentService/GenerateWithHooks";
    let mut call = Duplex::start(server.addr, path).await;
    call.send(&json!({"start": {
        "request": {"agentId": "planner", "prompt": "Check",
                    "memory": {"thread": {"id": "hooked"}, "resource": "alice"}},
        "hooks": {"kinds": ["HOOK_KIND_BEFORE_TOOL_CALL"]},
    }}))
    .await;
    let mut chunks = Vec::new();
    while let Some(line) = call.next().await {
        let event = &line["result"];
        if let Some(hook) = event.get("hookCall") {
            assert_eq!(hook["kind"], "HOOK_KIND_BEFORE_TOOL_CALL");
            assert_eq!(hook["beforeToolCall"]["toolName"], "task_check");
            // Answered on the same exchange while the response is still streaming.
            call.send(&json!({"answer": {"id": hook["id"], "beforeToolCall": {
                "proceed": false, "output": {"skipped": "by the HTTP client"}}}}))
                .await;
        } else if let Some(chunk) = event.get("chunk") {
            chunks.push(chunk.clone());
            if chunk.get("finish").is_some() {
                call.close_input().await;
            }
        } else {
            panic!("unexpected line {line}");
        }
    }
    assert_eq!(call.status, Some(200));
    let result = chunks
        .iter()
        .find_map(|c| c.get("toolResult"))
        .expect("a tool result");
    assert_eq!(result["result"]["skipped"], "by the HTTP client");
    assert_eq!(chunks.last().unwrap()["finish"]["text"], "Checked.");

    // A line that is not a request ends the exchange with an error naming the line.
    let mut call = Duplex::start(server.addr, path).await;
    call.send_raw("\n{\"start\": {\"request\": {\"agentId\": 7}}}\n")
        .await;
    call.close_input().await;
    let error = call.next().await.expect("an answer");
    assert_eq!(call.status, Some(400));
    assert_eq!(error["code"], 3, "{error}");
    let field = error["details"][0]["fieldViolations"][0]["field"]
        .as_str()
        .unwrap();
    assert_eq!(field, "line 2: start.request.agentId");
    server.stop().await.expect("clean stop");
}
