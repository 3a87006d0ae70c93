//! One MCP server's shared state: the last tool list and the live connection, swapped as a
//! whole so a run reads a consistent snapshot with one lock-free-ish read, and tool calls.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use rmcp::ServiceError;
use rmcp::model::{CallToolRequestParams, CallToolResult, RequestMetaObject};

/// The `_meta` key of a tool call's idempotency key.
const IDEMPOTENCY_META: &str = "io.agentd/idempotencyKey";
use rmcp::service::{Peer, RoleClient};
use serde_json::Value;

use crate::agent::tools::ToolOutput;

/// A tool as its server lists it, with the name the model sees.
#[derive(Clone, Debug)]
pub struct McpToolDef {
    /// The server's name for it (what `tools/call` sends).
    pub name: Arc<str>,
    /// `{server}_{tool}`, made a valid function name.
    pub exposed: String,
    /// Its description.
    pub description: String,
    /// Its input JSON Schema.
    pub parameters: Value,
}

/// What is known about a server now.
#[derive(Clone, Default)]
pub struct Snapshot {
    /// Its tools as last listed (kept while it is down, so calls fail with a clear error
    /// instead of the model being told the tool does not exist).
    pub tools: Arc<[McpToolDef]>,
    /// The live connection, if any.
    pub peer: Option<Peer<RoleClient>>,
    /// Why it is not connected (when `peer` is `None`).
    pub down: Option<String>,
}

/// One configured MCP server.
pub struct McpServer {
    name: String,
    call_timeout: Duration,
    /// A child process: failing to write to it means it is gone.
    stdio: bool,
    state: RwLock<Arc<Snapshot>>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.name)
            .finish()
    }
}

impl McpServer {
    /// A server not connected yet.
    pub fn new(name: &str, call_timeout: Duration, stdio: bool) -> Self {
        Self {
            name: name.to_owned(),
            call_timeout,
            stdio,
            state: RwLock::new(Arc::new(Snapshot {
                down: Some("not connected yet".to_owned()),
                ..Snapshot::default()
            })),
        }
    }

    /// Its configured name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The current state (cheap: one read lock and a reference count).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        match self.state.read() {
            Ok(state) => state.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Replaces the state.
    pub(super) fn publish(&self, snapshot: Snapshot) {
        let snapshot = Arc::new(snapshot);
        match self.state.write() {
            Ok(mut state) => *state = snapshot,
            Err(poisoned) => *poisoned.into_inner() = snapshot,
        }
    }

    /// Marks it down for `reason`, keeping the last tool list.
    pub(super) fn set_down(&self, reason: String) {
        let tools = self.snapshot().tools.clone();
        self.publish(Snapshot {
            tools,
            peer: None,
            down: Some(reason),
        });
    }

    /// Calls `tool` (the server's name for it) as `exposed`; transport failures, timeouts and
    /// an outage are `Err` with the text the model reads, never a hang.
    pub async fn call(
        &self,
        tool: &str,
        exposed: &str,
        args: &Value,
        idempotency_key: &str,
    ) -> Result<ToolOutput, String> {
        let snapshot = self.snapshot();
        let Some(peer) = &snapshot.peer else {
            let why = snapshot.down.as_deref().unwrap_or("not connected");
            return Err(self.unavailable(exposed, why));
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        match args {
            Value::Object(map) => params = params.with_arguments(map.clone()),
            Value::Null => {}
            _ => return Err(format!("Tool \"{exposed}\" takes an object of arguments")),
        }
        // Repeated under the same key when a taken-over run calls it again (see the README).
        let mut meta = RequestMetaObject::new();
        meta.0
            .0
            .insert(IDEMPOTENCY_META.into(), idempotency_key.into());
        params.meta = Some(meta);
        match tokio::time::timeout(self.call_timeout, peer.call_tool(params)).await {
            Err(_) => Err(format!(
                "Tool \"{exposed}\" timed out after {}s (MCP server \"{}\")",
                self.call_timeout.as_secs(),
                self.name
            )),
            // The connection ended (or the child died) before the supervisor noticed: the
            // same outage.
            Ok(Err(ServiceError::TransportClosed)) => {
                Err(self.unavailable(exposed, "the connection closed"))
            }
            Ok(Err(ServiceError::TransportSend(_))) if self.stdio => {
                Err(self.unavailable(exposed, "the process exited"))
            }
            Ok(Err(e)) => Err(format!(
                "Tool \"{exposed}\" failed: MCP server \"{}\": {e}",
                self.name
            )),
            Ok(Ok(result)) => Ok(to_output(result)),
        }
    }
}

impl McpServer {
    /// The tool error of a call during an outage.
    fn unavailable(&self, exposed: &str, why: &str) -> String {
        format!(
            "Tool \"{exposed}\" is unavailable: MCP server \"{}\" is not connected ({why}); \
             agentd is reconnecting, try again later",
            self.name
        )
    }
}

/// A call's result as the reference's MCP tools return it: the structured content when the
/// server sent one, else the whole result (`{content: [...], isError}`) as MCP writes it;
/// `isError` marks it as an error the model should correct.
fn to_output(result: CallToolResult) -> ToolOutput {
    let is_error = result.is_error.unwrap_or(false);
    let result = match result.structured_content {
        Some(structured) => structured,
        None => {
            let mut wire = serde_json::to_value(&result).unwrap_or(Value::Null);
            if let Value::Object(map) = &mut wire {
                // A protocol field (2026-07-28), not part of what the tool returned.
                map.remove("resultType");
            }
            wire
        }
    };
    ToolOutput { result, is_error }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(value: Value) -> CallToolResult {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn results_read_as_the_reference_returns_them() {
        let text = to_output(parse(
            json!({"content": [{"type": "text", "text": "Echo: hi"}]}),
        ));
        assert_eq!(
            text,
            ToolOutput {
                result: json!({"content": [{"type": "text", "text": "Echo: hi"}]}),
                is_error: false
            }
        );
        let structured = to_output(parse(json!({
            "content": [{"type": "text", "text": "{\"t\":1}"}],
            "structuredContent": {"t": 1}
        })));
        assert_eq!(structured.result, json!({"t": 1}));
        let failed = to_output(parse(json!({
            "content": [{"type": "text", "text": "bad input"}],
            "isError": true
        })));
        assert!(failed.is_error);
        assert_eq!(failed.result["isError"], json!(true));
        let image = to_output(parse(json!({
            "content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]
        })));
        assert_eq!(image.result["content"][0]["mimeType"], json!("image/png"));
    }

    #[tokio::test]
    async fn a_call_while_down_is_a_clear_error() {
        let server = McpServer::new("fs", Duration::from_secs(1), true);
        server.set_down("the process exited".to_owned());
        let err = server
            .call("read", "fs_read", &json!({}), "run:call")
            .await
            .unwrap_err();
        assert_eq!(
            err,
            "Tool \"fs_read\" is unavailable: MCP server \"fs\" is not connected (the process \
             exited); agentd is reconnecting, try again later"
        );
    }
}
