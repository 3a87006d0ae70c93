//! MCP tools against real MCP servers nobody here wrote: the npm
//! `@modelcontextprotocol/server-everything` over stdio (`everything.rs`: calls, approvals,
//! tool hooks, a killed child restarted), and a streamable-HTTP server built with the Python
//! `mcp` SDK (`http.rs`, server in `server.py`: env: auth header, list-changed refresh);
//! `tracing.rs` checks the tool span. Both servers are installed by `scripts/setup.sh`; a
//! missing one fails the test, naming the fix.

#[path = "../support/mod.rs"]
mod support;

mod everything;
mod http;
mod tracing;

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentd::model::MockOpenAi;
use agentd::pb;
use agentd::server::RunningServer;
use serde_json::Value;

/// The crate root.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// server-everything's entry point, installed by `scripts/setup.sh`.
fn everything_js() -> PathBuf {
    let js = root()
        .join("tests/mcp/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        js.is_file(),
        "{} is missing: run scripts/setup.sh (npm ci in tests/mcp/node)",
        js.display()
    );
    js
}

/// The project virtualenv's Python with the `mcp` package.
fn venv_python() -> PathBuf {
    let python = root().join(".venv/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run scripts/setup.sh",
        python.display()
    );
    python
}

/// A server on the embedded store in `dir` whose provider is `mock`, with `toml` (MCP servers
/// and agents) appended.
async fn start(mock: &MockOpenAi, toml: &str, dir: &Path) -> RunningServer {
    support::start(support::agent_config(mock, toml, "embedded", dir)).await
}

/// The agent's tools as GetAgent shows them.
async fn agent_tools(server: &RunningServer, agent: &str) -> Vec<pb::ToolInfo> {
    support::agents_client(server)
        .await
        .get_agent(pb::GetAgentRequest {
            agent_id: agent.into(),
        })
        .await
        .expect("get agent")
        .into_inner()
        .tools
}

/// Waits until GetAgent lists a tool named `name` (MCP servers connect in the background).
async fn wait_for_tool(server: &RunningServer, agent: &str, name: &str) -> pb::ToolInfo {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let tools = agent_tools(server, agent).await;
        if let Some(tool) = tools.into_iter().find(|t| t.name == name) {
            return tool;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{agent} never listed {name}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A Generate request for `agent`.
fn ask(agent: &str, prompt: &str) -> pb::GenerateRequest {
    pb::GenerateRequest {
        agent_id: agent.into(),
        prompt: prompt.into(),
        ..Default::default()
    }
}

/// The tool messages the model read in its `request`-th call, as JSON.
fn tool_results(mock: &MockOpenAi, request: usize) -> Vec<Value> {
    mock.requests()[request]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            let text = m["content"].as_str().unwrap_or_default();
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
        })
        .collect()
}
