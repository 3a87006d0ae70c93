//! A streamable-HTTP MCP server built with the Python `mcp` SDK (`server.py`): the auth header
//! comes from an `env:` value and is checked by the server, tools added at runtime arrive
//! through `notifications/tools/list_changed`, and an unreachable server does not stop agentd.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};

use agentd::model::{MockOpenAi, MockReply};
use agentd::pb;
use serde_json::json;

use super::{agent_tools, ask, root, start, tool_results, venv_python, wait_for_tool};
use crate::support;

/// The variable agentd reads the header value from (`env:` in the config).
const AUTH_VAR: &str = "AGENTD_TEST_MCP_PY_AUTH";

/// The Python server on a free port; killed on drop.
struct PyServer {
    child: Child,
    url: String,
}

impl PyServer {
    fn start(token: &str) -> Self {
        let mut child = Command::new(venv_python())
            .arg(root().join("tests/mcp/server.py"))
            .env("MCP_TEST_TOKEN", token)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start tests/mcp/server.py");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the port");
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .unwrap_or_else(|| panic!("server.py did not print its port: {line:?}"));
        Self {
            url: format!("http://127.0.0.1:{port}/mcp"),
            child,
        }
    }
}

impl Drop for PyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config(url: &str) -> String {
    format!(
        r#"
[[mcp_servers]]
name = "py"
url = "{url}"
headers = {{ Authorization = "env:{AUTH_VAR}" }}
timeout_secs = 20

[[agents]]
id = "web"
model = "mock/test-model"
mcp_servers = ["py"]
"#
    )
}

#[tokio::test]
async fn auth_from_env_runtime_tools_and_error_results() {
    let py = PyServer::start("s3cret");
    // SAFETY: set once, before this test's server reads it; no other test of this binary reads
    // or writes this variable.
    unsafe { std::env::set_var(AUTH_VAR, "Bearer s3cret") };
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = start(&mock, &config(&py.url), dir.path()).await;
    let whoami = wait_for_tool(&server, "web", "py_whoami").await;
    assert_eq!(
        whoami.description,
        "Says who answered and that the auth header was right."
    );
    assert!(
        agent_tools(&server, "web")
            .await
            .iter()
            .all(|t| t.name != "py_late"),
        "not there before it is added"
    );

    // The call reaches the server past its auth check; a runtime tool is added.
    mock.push(MockReply::ToolCalls(vec![
        ("py_whoami".into(), json!({})),
        ("py_add_tool".into(), json!({"name": "late"})),
        ("py_fail".into(), json!({})),
    ]));
    mock.push(MockReply::Text("Done.".into()));
    let chunks =
        support::generate(&mut support::agents_client(&server).await, ask("web", "go")).await;
    assert_eq!(
        support::finish(&chunks).finish_reason(),
        pb::FinishReason::Stop
    );
    let results = tool_results(&mock, 1);
    // Structured content is what the model reads when the server sends it (as the reference).
    assert_eq!(results[0], json!({"result": "py-test server, authorized"}));
    assert_eq!(results[1], json!({"result": "added late"}));
    assert_eq!(results[2]["isError"], true, "{}", results[2]);
    assert!(
        results[2]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("this tool always fails")),
        "{}",
        results[2]
    );

    // The list-changed notification refreshed the tools: GetAgent and the next run have it.
    let late = wait_for_tool(&server, "web", "py_late").await;
    assert_eq!(late.description, "Added at runtime: late");
    mock.push(MockReply::ToolCalls(vec![("py_late".into(), json!({}))]));
    mock.push(MockReply::Text("Late done.".into()));
    let chunks = support::generate(
        &mut support::agents_client(&server).await,
        ask("web", "late"),
    )
    .await;
    assert_eq!(support::finish(&chunks).text, "Late done.");
    assert_eq!(tool_results(&mock, 3), [json!({"result": "I am late"})]);
    server.stop().await.expect("stop");
}

#[tokio::test]
async fn an_unreachable_server_does_not_stop_agentd() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let text = config(&url).replace(&format!("env:{AUTH_VAR}"), "Bearer unused");
    let mock = MockOpenAi::start().await.expect("mock");
    let dir = tempfile::tempdir().expect("dir");
    let server = start(&mock, &text, dir.path()).await;
    // The server answers; the agent simply has no MCP tools yet.
    assert!(agent_tools(&server, "web").await.is_empty());
    mock.push(MockReply::Text("Fine.".into()));
    let chunks =
        support::generate(&mut support::agents_client(&server).await, ask("web", "hi")).await;
    assert_eq!(support::finish(&chunks).text, "Fine.");
    server.stop().await.expect("stop");
}
