//! Keeping one MCP server connected: start the child (stdio) or open the session (streamable
//! HTTP), list its tools (all pages), re-list them on `notifications/tools/list_changed`, and
//! when the connection ends (the child exited, the session broke) mark the server down and
//! connect again with exponential backoff.

use std::collections::HashSet;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ServiceExt};
use tokio::io::AsyncBufReadExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::server::{McpServer, McpToolDef, Snapshot};
use crate::config::{McpServerConfig, mcp_tool_name, redact_url};

/// The first wait before reconnecting; it doubles per failed attempt up to the configured cap.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// A connection that lasted this long resets the backoff (a server that crashes right after
/// starting keeps backing off instead of restarting in a tight loop).
const STABLE_AFTER: Duration = Duration::from_secs(10);

/// How to reach a server, its `env:` values resolved.
pub(super) struct Plan {
    transport: Transport,
    connect_timeout: Duration,
    max_backoff: Duration,
}

enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<String>,
    },
    Http {
        url: String,
        headers: reqwest::header::HeaderMap,
    },
}

/// `value`, or the variable it names with `env:NAME`.
fn resolve(server: &str, field: &str, key: &str, value: &str) -> Result<String, String> {
    match value.strip_prefix("env:") {
        Some(var) => std::env::var(var).map_err(|_| {
            format!("mcp server {server:?}: {field}.{key} names env var {var}, which is not set")
        }),
        None => Ok(value.to_owned()),
    }
}

impl Plan {
    /// The plan for a validated config; a missing `env:` variable or a bad header is an error.
    pub(super) fn from_config(c: &McpServerConfig) -> Result<Self, String> {
        let transport = match (&c.command, &c.url) {
            (Some(command), _) => Transport::Stdio {
                command: command.clone(),
                args: c.args.clone(),
                env: c
                    .env
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), resolve(&c.name, "env", k, v)?)))
                    .collect::<Result<_, String>>()?,
                cwd: c.cwd.clone(),
            },
            (None, Some(url)) => {
                let mut headers = reqwest::header::HeaderMap::new();
                for (k, v) in &c.headers {
                    let value = resolve(&c.name, "headers", k, v)?;
                    let name = reqwest::header::HeaderName::try_from(k.as_str())
                        .map_err(|_| format!("mcp server {:?}: bad header name {k:?}", c.name))?;
                    let mut value =
                        reqwest::header::HeaderValue::try_from(value).map_err(|_| {
                            format!("mcp server {:?}: header {k} has an invalid value", c.name)
                        })?;
                    value.set_sensitive(true);
                    headers.insert(name, value);
                }
                Transport::Http {
                    url: url.clone(),
                    headers,
                }
            }
            (None, None) => return Err(format!("mcp server {:?}: no command or url", c.name)),
        };
        Ok(Self {
            transport,
            connect_timeout: Duration::from_secs(c.connect_timeout_secs),
            max_backoff: Duration::from_secs(c.max_backoff_secs),
        })
    }
}

/// Wakes the supervisor when the server says its tool list changed.
struct Handler {
    tools_changed: Arc<Notify>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("agentd", env!("CARGO_PKG_VERSION")),
        )
    }
}

type Client = RunningService<RoleClient, Handler>;

/// Keeps `server` connected until `shutdown`.
pub(super) async fn supervise(server: Arc<McpServer>, plan: Plan, shutdown: CancellationToken) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let tools_changed = Arc::new(Notify::new());
        let attempt = async {
            let client = connect(&server, &plan, tools_changed.clone()).await?;
            let tools = list_tools(&server, &client).await?;
            Ok::<_, String>((client, tools))
        };
        let attempt = tokio::select! {
            () = shutdown.cancelled() => return,
            attempt = tokio::time::timeout(plan.connect_timeout, attempt) => attempt,
        };
        match attempt {
            Ok(Ok((client, tools))) => {
                let since = Instant::now();
                info!(
                    server = server.name(),
                    tools = tools.len(),
                    "MCP server connected"
                );
                server.publish(Snapshot {
                    tools: tools.into(),
                    peer: Some(client.peer().clone()),
                    down: None,
                });
                let reason = serve(&server, client, &tools_changed, &shutdown).await;
                let Some(reason) = reason else { return };
                warn!(server = server.name(), reason = %reason, "MCP server disconnected; reconnecting");
                server.set_down(reason);
                if since.elapsed() >= STABLE_AFTER {
                    backoff = FIRST_BACKOFF;
                }
            }
            Ok(Err(reason)) => {
                warn!(server = server.name(), reason = %reason, retry_in = ?backoff, "MCP server unavailable");
                server.set_down(reason);
            }
            Err(_) => {
                let reason = format!("connecting took over {}s", plan.connect_timeout.as_secs());
                warn!(server = server.name(), reason = %reason, retry_in = ?backoff, "MCP server unavailable");
                server.set_down(reason);
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(plan.max_backoff.max(FIRST_BACKOFF));
    }
}

/// Runs a connected client until it ends (`Some(why)`) or shutdown closes it (`None`),
/// re-listing the tools whenever they change.
async fn serve(
    server: &McpServer,
    client: Client,
    tools_changed: &Notify,
    shutdown: &CancellationToken,
) -> Option<String> {
    let peer = client.peer().clone();
    let cancel = client.cancellation_token();
    let mut ended = std::pin::pin!(client.waiting());
    loop {
        tokio::select! {
            _ = &mut ended => return Some("the connection closed".to_owned()),
            () = shutdown.cancelled() => {
                cancel.cancel();
                let _ = ended.await;
                info!(server = server.name(), "MCP server connection closed");
                return None;
            }
            () = tools_changed.notified() => {
                match peer.list_all_tools().await {
                    Ok(listed) => {
                        let tools = adapt(server.name(), listed);
                        info!(server = server.name(), tools = tools.len(), "MCP tool list changed");
                        server.publish(Snapshot {
                            tools: tools.into(),
                            peer: Some(peer.clone()),
                            down: None,
                        });
                    }
                    Err(e) => warn!(server = server.name(), error = %e, "re-listing MCP tools failed; keeping the last list"),
                }
            }
        }
    }
}

async fn connect(
    server: &McpServer,
    plan: &Plan,
    tools_changed: Arc<Notify>,
) -> Result<Client, String> {
    let handler = Handler { tools_changed };
    match &plan.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args)
                .envs(env.iter().map(|(k, v)| (k, v)))
                .kill_on_drop(true);
            if let Some(cwd) = cwd {
                cmd.current_dir(cwd);
            }
            let (child, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("could not start {command:?}: {e}"))?;
            info!(
                server = server.name(),
                pid = child.id(),
                "MCP server process started"
            );
            if let Some(stderr) = stderr {
                let name = server.name().to_owned();
                // The server's own log lines, so a failing server says why.
                tokio::spawn(async move {
                    let mut lines = tokio::io::BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        info!(server = %name, "mcp stderr: {line}");
                    }
                });
            }
            handler
                .serve(child)
                .await
                .map_err(|e| format!("handshake failed: {e}"))
        }
        Transport::Http { url, headers } => {
            let http = reqwest::Client::builder()
                .default_headers(headers.clone())
                .connect_timeout(plan.connect_timeout)
                .build()
                .map_err(|e| format!("HTTP client: {e}"))?;
            let transport = StreamableHttpClientTransport::with_client(
                http,
                StreamableHttpClientTransportConfig::with_uri(url.as_str()),
            );
            handler
                .serve(transport)
                .await
                .map_err(|e| format!("connecting to {} failed: {e}", redact_url(url)))
        }
    }
}

async fn list_tools(server: &McpServer, client: &Client) -> Result<Vec<McpToolDef>, String> {
    let listed = client
        .list_all_tools()
        .await
        .map_err(|e| format!("listing tools failed: {e}"))?;
    Ok(adapt(server.name(), listed))
}

/// The listed tools with the names the model sees; a second tool whose name maps to a name
/// already taken is left out (with a warning), as names must be unique.
fn adapt(server: &str, listed: Vec<rmcp::model::Tool>) -> Vec<McpToolDef> {
    let mut seen = HashSet::new();
    listed
        .into_iter()
        .filter_map(|tool| {
            let exposed = mcp_tool_name(server, &tool.name);
            if !seen.insert(exposed.clone()) {
                warn!(server, tool = %tool.name, exposed = %exposed, "MCP tool name collides with another tool's; left out");
                return None;
            }
            Some(McpToolDef {
                name: Arc::from(tool.name.as_ref()),
                exposed,
                description: tool.description.map(|d| d.into_owned()).unwrap_or_default(),
                parameters: serde_json::Value::Object((*tool.input_schema).clone()),
            })
        })
        .collect()
}
