//! MCP tool servers: the top-level `[[mcp_servers]]` (stdio or streamable HTTP), an agent's
//! `mcp_servers` (which servers, optionally which of their tools), and their checks.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Deserialize;

use super::{AgentConfig, ConfigError, invalid};

/// One MCP server: a command speaking MCP on stdio, or a streamable-HTTP endpoint.
///
/// The model sees its tools as `{name}_{tool}` (the reference's MCPClient naming), so `name`
/// is limited to letters, digits, `_` and `-`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// Name agents use, and the prefix of its tools' names.
    pub name: String,
    /// stdio: the program to run (looked up on `PATH`).
    #[serde(default)]
    pub command: Option<String>,
    /// stdio: its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// stdio: extra environment variables; a value `env:NAME` is read from agentd's own.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// stdio: working directory (default: agentd's).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Streamable HTTP: the endpoint URL (http or https).
    #[serde(default)]
    pub url: Option<String>,
    /// Streamable HTTP: extra request headers; a value `env:NAME` is read from that variable.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Seconds one tool call may take before it fails with a tool error.
    #[serde(default = "default_call_timeout")]
    pub timeout_secs: u64,
    /// Seconds connecting (start, handshake, first tool list) may take before a retry.
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout_secs: u64,
    /// Longest wait between reconnection attempts, in seconds (the backoff doubles up to it).
    #[serde(default = "default_max_backoff")]
    pub max_backoff_secs: u64,
}

fn default_call_timeout() -> u64 {
    60
}

fn default_connect_timeout() -> u64 {
    30
}

fn default_max_backoff() -> u64 {
    30
}

/// How a server is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum McpTransportKind {
    /// A child process on stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
}

impl McpServerConfig {
    /// The transport its fields select (checked by validation: exactly one is set).
    pub fn transport(&self) -> McpTransportKind {
        if self.command.is_some() {
            McpTransportKind::Stdio
        } else {
            McpTransportKind::Http
        }
    }
}

/// An agent's use of one MCP server: `"name"` (all its tools) or
/// `{ server = "name", tools = ["a", "b"] }` (only these, by the server's own tool names).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum McpUse {
    /// Every tool of the server.
    All(String),
    /// Some tools of the server.
    Some {
        /// The server's name.
        server: String,
        /// The tools offered, as the server names them.
        tools: Vec<String>,
    },
}

impl McpUse {
    /// The server used.
    pub fn server(&self) -> &str {
        match self {
            Self::All(server) | Self::Some { server, .. } => server,
        }
    }

    /// The tools kept, `None` for all.
    pub fn tools(&self) -> Option<&[String]> {
        match self {
            Self::All(_) => None,
            Self::Some { tools, .. } => Some(tools),
        }
    }
}

/// The name the model sees for tool `tool` of server `server`: `{server}_{tool}`, with every
/// character outside `[A-Za-z0-9_-]` replaced by `_` and cut to 64 characters, so it is a
/// valid function name for OpenAI-compatible APIs.
pub fn mcp_tool_name(server: &str, tool: &str) -> String {
    format!("{server}_{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

/// Checks the servers: names valid and unique, exactly one transport with its own fields,
/// URLs and timeouts.
pub(super) fn validate_servers(servers: &[McpServerConfig]) -> Result<(), ConfigError> {
    let mut names = HashSet::new();
    for (i, s) in servers.iter().enumerate() {
        let key = format!("mcp_servers[{i}]");
        let valid_name = !s.name.is_empty()
            && s.name.len() <= 32
            && s.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_name {
            return Err(invalid(&format!(
                "{key}.name {:?} must be 1 to 32 letters, digits, '_' or '-' (it prefixes tool names)",
                s.name
            )));
        }
        if !names.insert(s.name.as_str()) {
            return Err(invalid(&format!(
                "{key}.name {:?} is used by another MCP server",
                s.name
            )));
        }
        let key = format!("mcp server {:?}", s.name);
        match (&s.command, &s.url) {
            (Some(_), Some(_)) | (None, None) => {
                return Err(invalid(&format!(
                    "{key}: set exactly one of command (stdio) or url (streamable HTTP)"
                )));
            }
            (Some(command), None) => {
                if command.trim().is_empty() {
                    return Err(invalid(&format!("{key}.command must not be empty")));
                }
                if !s.headers.is_empty() {
                    return Err(invalid(&format!(
                        "{key}.headers are for url servers; a stdio server takes env"
                    )));
                }
            }
            (None, Some(url)) => {
                let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
                if !scheme_ok || url.parse::<http::Uri>().is_err() {
                    return Err(invalid(&format!(
                        "{key}.url {:?} must be an http:// or https:// URL",
                        super::redact_url(url)
                    )));
                }
                if !s.args.is_empty() || !s.env.is_empty() || s.cwd.is_some() {
                    return Err(invalid(&format!(
                        "{key}: args, env and cwd are for command servers"
                    )));
                }
                if let Some(h) = s
                    .headers
                    .keys()
                    .find(|h| h.parse::<http::HeaderName>().is_err())
                {
                    return Err(invalid(&format!(
                        "{key}.headers: {h:?} is not a valid header name"
                    )));
                }
            }
        }
        for (field, value) in [
            ("timeout_secs", s.timeout_secs),
            ("connect_timeout_secs", s.connect_timeout_secs),
            ("max_backoff_secs", s.max_backoff_secs),
        ] {
            if value == 0 {
                return Err(invalid(&format!("{key}.{field} must be > 0")));
            }
        }
    }
    Ok(())
}

/// Checks an agent's `mcp_servers`: known servers, each once, non-empty tool filters. Returns
/// the server names it uses, for the `require_approval` check.
pub(super) fn validate_agent_use<'a>(
    agent: &'a AgentConfig,
    servers: &[McpServerConfig],
) -> Result<HashMap<&'a str, Option<&'a [String]>>, ConfigError> {
    let mut used = HashMap::new();
    for (i, u) in agent.mcp_servers.iter().enumerate() {
        let key = format!("agent {:?}: mcp_servers[{i}]", agent.id);
        if !servers.iter().any(|s| s.name == u.server()) {
            let known: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
            return Err(invalid(&format!(
                "{key}: unknown MCP server {:?} (configured: {})",
                u.server(),
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            )));
        }
        if used.insert(u.server(), u.tools()).is_some() {
            return Err(invalid(&format!(
                "{key}: MCP server {:?} is listed twice",
                u.server()
            )));
        }
        if u.tools()
            .is_some_and(|t| t.is_empty() || t.iter().any(String::is_empty))
        {
            return Err(invalid(&format!(
                "{key}.tools must name at least one tool, each non-empty"
            )));
        }
    }
    Ok(used)
}

/// Whether `name` (from `require_approval`) can be a tool of the MCP servers an agent uses:
/// `{server}_{tool}` for a used server, and in its tool filter when it has one.
pub(super) fn may_be_mcp_tool(name: &str, used: &HashMap<&str, Option<&[String]>>) -> bool {
    used.iter().any(|(server, filter)| match filter {
        Some(tools) => tools.iter().any(|t| mcp_tool_name(server, t) == name),
        None => name
            .strip_prefix(server)
            .and_then(|rest| rest.strip_prefix('_'))
            .is_some_and(|tool| !tool.is_empty()),
    })
}

#[cfg(test)]
#[path = "mcp_tests.rs"]
mod tests;
