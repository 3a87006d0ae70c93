//! `@modelcontextprotocol/server-everything` (pinned in `tests/mcp/node/package.json`) over
//! stdio: its tools listed and run, approvals, and a killed child restarted.

use std::path::Path;
use std::time::Duration;

use agentd::model::{MockOpenAi, MockReply};
use agentd::pb;
use agentd::pb::approval_service_client::ApprovalServiceClient;
use agentd::pb::chunk::Payload;
use serde_json::json;

use super::{ask, everything_js, start, tool_results, wait_for_tool};
use crate::support;

/// The server, run through `sh` so the test knows its pid (`pidfile`) and can hold back its
/// restarts (while `blockfile` exists the command exits at once, as a broken server would).
fn everything(dir: &Path, require_approval: &str) -> String {
    let pidfile = dir.join("everything.pid");
    let blockfile = dir.join("everything.block");
    format!(
        r#"
[[mcp_servers]]
name = "everything"
command = "sh"
args = ["-c", "if [ -e '{block}' ]; then exit 1; fi; echo $$ > '{pid}'; exec node '{js}' stdio"]
max_backoff_secs = 1
timeout_secs = 20

[[agents]]
id = "mcp"
instructions = "Use the tools."
model = "mock/test-model"
tools = ["tasks"]
mcp_servers = ["everything"]
require_approval = [{require_approval}]

[[agents]]
id = "picky"
model = "mock/test-model"
mcp_servers = [{{ server = "everything", tools = ["echo"] }}]
"#,
        block = blockfile.display(),
        pid = pidfile.display(),
        js = everything_js().display(),
    )
}

#[tokio::test]
async fn its_tools_are_listed_and_called_and_results_reach_the_model() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = start(&mock, &everything(dir.path(), ""), dir.path()).await;

    let echo = wait_for_tool(&server, "mcp", "everything_echo").await;
    assert_eq!(echo.description, "Echoes back the input string");
    let schema = agentd::json::from_proto_value(&prost_types::Value {
        kind: Some(prost_types::value::Kind::StructValue(
            echo.input_schema.clone().expect("schema"),
        )),
    });
    assert_eq!(schema["properties"]["message"]["type"], "string");
    let tools = super::agent_tools(&server, "mcp").await;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names[..4],
        ["task_write", "task_update", "task_complete", "task_check"]
    );
    assert!(names.contains(&"everything_get-sum"), "{names:?}");
    // The filter keeps only `echo`.
    let picky = super::agent_tools(&server, "picky").await;
    assert_eq!(
        picky.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["everything_echo"]
    );

    mock.push(MockReply::ToolCalls(vec![
        ("everything_echo".into(), json!({"message": "hi"})),
        ("everything_get-sum".into(), json!({"a": 2, "b": 3})),
    ]));
    mock.push(MockReply::Text("Done.".into()));
    let chunks = support::generate(
        &mut support::agents_client(&server).await,
        ask("mcp", "echo and add"),
    )
    .await;
    let result = support::finish(&chunks);
    assert_eq!(result.finish_reason(), pb::FinishReason::Stop);
    assert_eq!(result.text, "Done.");
    // The model offered the MCP tools, and read each result as MCP returns it.
    let offered: Vec<String> = mock.requests()[0]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| {
            t["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert!(
        offered.contains(&"everything_echo".to_owned()),
        "{offered:?}"
    );
    assert_eq!(
        tool_results(&mock, 1),
        [
            json!({"content": [{"type": "text", "text": "Echo: hi"}]}),
            json!({"content": [{"type": "text", "text": "The sum of 2 and 3 is 5."}]}),
        ]
    );
    server.stop().await.expect("stop");
}

#[tokio::test]
async fn an_approval_required_mcp_tool_waits_for_approve() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = start(
        &mock,
        &everything(dir.path(), "\"everything_get-sum\""),
        dir.path(),
    )
    .await;
    let sum = wait_for_tool(&server, "mcp", "everything_get-sum").await;
    assert!(sum.require_approval, "GetAgent shows the approval");
    assert!(
        !wait_for_tool(&server, "mcp", "everything_echo")
            .await
            .require_approval
    );

    mock.push(MockReply::ToolCalls(vec![(
        "everything_get-sum".into(),
        json!({"a": 20, "b": 22}),
    )]));
    mock.push(MockReply::Text("It is 42.".into()));
    let chunks = support::generate(
        &mut support::agents_client(&server).await,
        ask("mcp", "add"),
    )
    .await;
    let suspended = support::finish(&chunks);
    assert_eq!(suspended.finish_reason(), pb::FinishReason::Suspended);
    let payload = suspended.suspend_payload.expect("payload");
    assert_eq!(payload.tool_name, "everything_get-sum");
    assert_eq!(mock.requests().len(), 1, "nothing ran before approval");

    let rest = ApprovalServiceClient::new(support::channel(&server).await)
        .approve(pb::ApproveRequest {
            run_id: suspended.run_id.clone(),
            tool_call_id: payload.tool_call_id.clone(),
            ..Default::default()
        })
        .await
        .expect("approve");
    let rest = support::collect(rest.into_inner()).await;
    let result = support::finish(&rest);
    assert_eq!(result.finish_reason(), pb::FinishReason::Stop);
    assert_eq!(result.text, "It is 42.");
    assert_eq!(
        tool_results(&mock, 1),
        [json!({"content": [{"type": "text", "text": "The sum of 20 and 22 is 42."}]})]
    );
    server.stop().await.expect("stop");
}

/// The pid the wrapper wrote for the running server (written before `exec node`).
fn pid(dir: &Path) -> Option<u32> {
    std::fs::read_to_string(dir.join("everything.pid"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// One run calling `everything_echo`; returns the tool's chunk (a result or an error).
async fn echo_once(
    mock: &MockOpenAi,
    server: &agentd::server::RunningServer,
    message: &str,
) -> Payload {
    mock.push(MockReply::ToolCalls(vec![(
        "everything_echo".into(),
        json!({"message": message}),
    )]));
    mock.push(MockReply::Text("ok".into()));
    let chunks = support::generate(
        &mut support::agents_client(server).await,
        ask("mcp", "echo"),
    )
    .await;
    assert_eq!(
        support::finish(&chunks).finish_reason(),
        pb::FinishReason::Stop
    );
    chunks
        .into_iter()
        .filter_map(|c| c.payload)
        .find(|p| matches!(p, Payload::ToolResult(_) | Payload::ToolError(_)))
        .expect("a tool chunk")
}

#[tokio::test]
async fn a_killed_child_fails_calls_clearly_then_is_restarted() {
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = start(&mock, &everything(dir.path(), ""), dir.path()).await;
    wait_for_tool(&server, "mcp", "everything_echo").await;
    let first = pid(dir.path()).expect("the child wrote its pid");
    assert!(matches!(
        echo_once(&mock, &server, "before").await,
        Payload::ToolResult(_)
    ));

    // Restarts fail while the block file exists; then the child dies.
    std::fs::write(dir.path().join("everything.block"), "").expect("block");
    let killed = std::process::Command::new("kill")
        .args(["-9", &first.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());

    // Calls fail with a clear tool error while it is down, and the tool stays listed.
    let mut error = None;
    for _ in 0..100 {
        match echo_once(&mock, &server, "during").await {
            Payload::ToolError(e) => {
                error = Some(e);
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let error = error.expect("calls fail while the server is down");
    let text = error.error;
    assert!(
        text.starts_with(
            "Tool \"everything_echo\" is unavailable: MCP server \"everything\" is not connected ("
        ) && text.ends_with("agentd is reconnecting, try again later"),
        "{text}"
    );
    wait_for_tool(&server, "mcp", "everything_echo").await;

    // Unblocked, it is restarted (a new process) and calls work again.
    std::fs::remove_file(dir.path().join("everything.block")).expect("unblock");
    let restarted = support::eventually(Duration::from_secs(30), || async {
        pid(dir.path()).is_some_and(|p| p != first)
    })
    .await;
    assert!(restarted, "a new child was started");
    let mut worked = false;
    for _ in 0..100 {
        if let Payload::ToolResult(r) = echo_once(&mock, &server, "after").await {
            let result = agentd::json::from_proto_value(r.result.as_ref().expect("result"));
            assert_eq!(result["content"][0]["text"], "Echo: after");
            worked = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(worked, "calls work after the restart");
    server.stop().await.expect("stop");
}

#[tokio::test]
async fn tool_hooks_see_and_can_stop_mcp_calls() {
    use axum::Json;
    use axum::routing::post;
    use serde_json::Value;
    use std::sync::{Arc, Mutex};
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = seen.clone();
    // A before_tool_call webhook: lets echo run, stops get-sum with its own output.
    let app = axum::Router::new().route(
        "/policy",
        post(move |Json(body): Json<Value>| {
            let name = body["beforeToolCall"]["toolName"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            log.lock().expect("log").push(name.clone());
            async move {
                if name == "everything_get-sum" {
                    Json(json!({"id": body["id"], "beforeToolCall": {"proceed": false, "output": "blocked by policy"}}))
                } else {
                    Json(json!({}))
                }
            }
        }),
    );
    let (url, _task) = support::serve_http(app).await;
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let toml = format!(
        "{}\n[[agents]]\nid = \"policed\"\nmodel = \"mock/test-model\"\nmcp_servers = [\"everything\"]\n[[agents.webhooks]]\nurl = \"{url}/policy\"\nkinds = [\"before_tool_call\"]\n",
        everything(dir.path(), "")
    );
    let server = start(&mock, &toml, dir.path()).await;
    wait_for_tool(&server, "policed", "everything_get-sum").await;
    mock.push(MockReply::ToolCalls(vec![
        ("everything_echo".into(), json!({"message": "allowed"})),
        ("everything_get-sum".into(), json!({"a": 1, "b": 1})),
    ]));
    mock.push(MockReply::Text("Done.".into()));
    let chunks = support::generate(
        &mut support::agents_client(&server).await,
        ask("policed", "both"),
    )
    .await;
    assert_eq!(support::finish(&chunks).text, "Done.");
    assert_eq!(
        *seen.lock().expect("seen"),
        ["everything_echo", "everything_get-sum"]
    );
    assert_eq!(
        tool_results(&mock, 1),
        [
            json!({"content": [{"type": "text", "text": "Echo: allowed"}]}),
            json!("blocked by policy"),
        ]
    );
    server.stop().await.expect("stop");
}
