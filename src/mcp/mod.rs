//! MCP tool servers (stdio child processes and streamable HTTP, through `rmcp`): one
//! supervised connection per configured server, its tool list kept current, and its tools
//! offered to agents as ordinary [`ToolSpec`](crate::agent::tools::ToolSpec)s.
//!
//! - `connection.rs`: connecting, listing, refreshing on list-changed, restarting with backoff
//! - `server.rs`: the shared state of one server (the snapshot runs read) and calling a tool
//! - `tools.rs`: the agent's view: names, filters, approval, and results as the model reads them

mod connection;
mod server;
mod tools;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{ConfigError, McpServerConfig, McpTransportKind};
pub use server::{McpServer, McpToolDef};
pub use tools::{McpBinding, McpTool, with_mcp_tools};

/// How long shutdown waits for the connections to close (stdio children get SIGTERM, then
/// SIGKILL, inside it).
const SHUTDOWN_WAIT: Duration = Duration::from_secs(10);

/// Every configured MCP server, each with a background task keeping it connected.
#[derive(Default)]
pub struct McpHub {
    servers: BTreeMap<String, Arc<McpServer>>,
    shutdown: CancellationToken,
    tasks: std::sync::Mutex<Vec<JoinHandle<()>>>,
}

impl McpHub {
    /// Starts one supervised connection per server (in the background: an unreachable server
    /// does not hold up the start). `env:NAME` values are read now; a missing variable is a
    /// configuration error.
    pub fn start(configs: &[McpServerConfig]) -> Result<Self, ConfigError> {
        let hub = Self::default();
        let mut servers = BTreeMap::new();
        let mut plans = Vec::new();
        for config in configs {
            let plan = connection::Plan::from_config(config).map_err(ConfigError::Invalid)?;
            let server = Arc::new(McpServer::new(
                &config.name,
                Duration::from_secs(config.timeout_secs),
                config.transport() == McpTransportKind::Stdio,
            ));
            servers.insert(config.name.clone(), server.clone());
            plans.push((server, plan));
        }
        let tasks = plans
            .into_iter()
            .map(|(server, plan)| {
                tokio::spawn(connection::supervise(server, plan, hub.shutdown.clone()))
            })
            .collect();
        Ok(Self {
            servers,
            tasks: std::sync::Mutex::new(tasks),
            ..hub
        })
    }

    /// Checks what [`McpHub::start`] checks (every `env:` variable set, header values valid)
    /// without starting anything.
    pub fn check(configs: &[McpServerConfig]) -> Result<(), ConfigError> {
        for config in configs {
            connection::Plan::from_config(config).map_err(ConfigError::Invalid)?;
        }
        Ok(())
    }

    /// The server with this name.
    pub fn get(&self, name: &str) -> Option<Arc<McpServer>> {
        self.servers.get(name).cloned()
    }

    /// Closes every connection (stdio children are stopped) and waits for it, bounded.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let tasks = match self.tasks.lock() {
            Ok(mut tasks) => std::mem::take(&mut *tasks),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        };
        if tasks.is_empty() {
            return;
        }
        let all = futures::future::join_all(tasks);
        if tokio::time::timeout(SHUTDOWN_WAIT, all).await.is_err() {
            tracing::warn!("MCP connections did not close within {SHUTDOWN_WAIT:?}");
        }
    }
}
