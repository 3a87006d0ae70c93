//! An agent's MCP tools: which servers and tools it uses, and the [`ToolSpec`]s a run offers,
//! built from the servers' current snapshots.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;

use super::McpServer;
use crate::agent::tools::{ToolKind, ToolOutput, ToolSpec};
use crate::model::ToolDefinition;

/// One MCP server an agent uses, and the tools it keeps (`None`: all).
#[derive(Clone, Debug)]
pub struct McpBinding {
    /// The server.
    pub server: Arc<McpServer>,
    /// Its tools offered, by the server's names; `None` for all.
    pub filter: Option<Vec<String>>,
}

/// A tool of an MCP server, ready to call.
#[derive(Clone, Debug)]
pub struct McpTool {
    server: Arc<McpServer>,
    tool: Arc<str>,
}

impl McpTool {
    /// Calls it; `exposed` is the name the model used, `key` the call's idempotency key.
    pub async fn call(&self, exposed: &str, args: &Value, key: &str) -> Result<ToolOutput, String> {
        self.server.call(&self.tool, exposed, args, key).await
    }
}

/// `fixed` followed by the bound servers' current tools, in binding order. A tool whose name
/// is already taken (by a fixed tool or an earlier server) is left out: names must be unique.
pub fn with_mcp_tools(
    fixed: &[ToolSpec],
    bindings: &[McpBinding],
    require_approval: impl Fn(&str) -> bool,
) -> Vec<ToolSpec> {
    let mut tools = fixed.to_vec();
    let mut names: HashSet<String> = fixed.iter().map(|t| t.def.name.clone()).collect();
    for binding in bindings {
        let snapshot = binding.server.snapshot();
        for def in snapshot.tools.iter() {
            let kept = binding
                .filter
                .as_ref()
                .is_none_or(|f| f.iter().any(|t| **t == *def.name));
            if !kept || !names.insert(def.exposed.clone()) {
                continue;
            }
            tools.push(ToolSpec {
                def: Arc::new(ToolDefinition::new(
                    def.exposed.clone(),
                    def.description.clone(),
                    def.parameters.clone(),
                )),
                require_approval: require_approval(&def.exposed),
                resume_schema: None,
                kind: ToolKind::Mcp(McpTool {
                    server: binding.server.clone(),
                    tool: def.name.clone(),
                }),
            });
        }
    }
    tools
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::mcp::McpToolDef;
    use crate::mcp::server::Snapshot;

    fn server(name: &str, tools: &[&str]) -> Arc<McpServer> {
        let server = Arc::new(McpServer::new(name, Duration::from_secs(1), false));
        let tools: Vec<McpToolDef> = tools
            .iter()
            .map(|t| McpToolDef {
                name: Arc::from(*t),
                exposed: crate::config::mcp_tool_name(name, t),
                description: format!("does {t}"),
                parameters: json!({"type": "object"}),
            })
            .collect();
        server.publish(Snapshot {
            tools: tools.into(),
            ..Snapshot::default()
        });
        server
    }

    #[test]
    fn tools_follow_the_fixed_ones_filtered_unique_and_with_approval() {
        let fixed = crate::agent::tools::task_tools();
        let bindings = [
            McpBinding {
                server: server("a", &["echo", "add"]),
                filter: None,
            },
            McpBinding {
                server: server("b", &["x", "y"]),
                filter: Some(vec!["y".to_owned()]),
            },
        ];
        let tools = with_mcp_tools(&fixed, &bindings, |n| n == "a_add");
        let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
        assert_eq!(
            names[4..],
            ["a_echo", "a_add", "b_y"],
            "after the four task tools"
        );
        assert!(tools[5].require_approval && !tools[4].require_approval);
        assert_eq!(tools[4].def.description, "does echo");
        // A second binding whose names collide adds nothing.
        let dup = [bindings[0].clone(), bindings[0].clone()];
        assert_eq!(with_mcp_tools(&[], &dup, |_| false).len(), 2);
    }
}
