//! The tools an agent can call: the built-in task tools (sharing TaskService's code), HTTP
//! tools from config, MCP servers' tools, and client tools declared in a request (executed by
//! the caller).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::config::HttpToolConfig;
use crate::memory::{working, working_store};
use crate::model::ToolDefinition;
use crate::store::{Cas, Store, ThreadKey};
use crate::tasklist::{TaskList, TaskLists};
use crate::tasks;

/// What a tool is.
#[derive(Clone, Debug)]
pub enum ToolKind {
    /// One of the four task tools.
    Task(TaskOp),
    /// An HTTP endpoint.
    Http(Arc<HttpTool>),
    /// A tool of an MCP server.
    Mcp(crate::mcp::McpTool),
    /// `updateWorkingMemory`, with the run's settings.
    WorkingMemory(Arc<working::Settings>),
    /// Executed by the caller: the run suspends until ApprovalService.Resume.
    Client,
    /// A sub-agent: the call is a child run (see `run/delegation.rs`).
    SubAgent(Arc<crate::agent::delegation::SubAgent>),
}

/// The four task operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskOp {
    /// task_write
    Write,
    /// task_update
    Update,
    /// task_complete
    Complete,
    /// task_check
    Check,
}

/// A tool offered to the model.
#[derive(Clone, Debug)]
pub struct ToolSpec {
    /// Name, description and argument schema, as the model sees them (shared by every run of
    /// the agent, with their wire form serialized once).
    pub def: Arc<ToolDefinition>,
    /// Calls wait for approval (agent config).
    pub require_approval: bool,
    /// For a client tool: the JSON Schema of the result its caller answers with.
    pub resume_schema: Option<Value>,
    /// How it runs.
    pub kind: ToolKind,
}

/// The four task tools, in the reference's order.
pub fn task_tools() -> Vec<ToolSpec> {
    tasks::tool_definitions()
        .into_iter()
        .map(|(name, description, parameters)| ToolSpec {
            def: Arc::new(ToolDefinition::new(
                name.to_owned(),
                description.to_owned(),
                parameters,
            )),
            require_approval: false,
            resume_schema: None,
            kind: ToolKind::Task(match name {
                "task_write" => TaskOp::Write,
                "task_update" => TaskOp::Update,
                "task_complete" => TaskOp::Complete,
                _ => TaskOp::Check,
            }),
        })
        .collect()
}

/// An HTTP tool, ready to call.
#[derive(Debug)]
pub struct HttpTool {
    url: String,
    timeout: Duration,
    headers: Vec<(String, String)>,
}

impl HttpTool {
    /// Builds a tool from config; `env:NAME` header values are read now.
    pub fn from_config(config: &HttpToolConfig) -> Result<ToolSpec, String> {
        let mut headers = Vec::new();
        for (name, value) in &config.headers {
            let value = match value.strip_prefix("env:") {
                Some(var) => std::env::var(var).map_err(|_| {
                    format!(
                        "http tool {:?}: header {name} names env var {var}, which is not set",
                        config.name
                    )
                })?,
                None => value.clone(),
            };
            headers.push((name.clone(), value));
        }
        Ok(ToolSpec {
            def: Arc::new(ToolDefinition::new(
                config.name.clone(),
                config.description.clone(),
                config.parameters.clone(),
            )),
            require_approval: false,
            resume_schema: None,
            kind: ToolKind::Http(Arc::new(HttpTool {
                url: config.url.clone(),
                timeout: Duration::from_secs(config.timeout_secs),
                headers,
            })),
        })
    }
}

/// What a tool call produced (a failed call is an `Err` with the text the model sees).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutput {
    /// The result object.
    pub result: Value,
    /// The result reports an error the model should correct (e.g. task not found).
    pub is_error: bool,
}

/// Everything a tool call may use.
#[derive(Clone)]
pub struct ToolEnv {
    /// The run's thread, when it has memory.
    pub thread: Option<ThreadKey>,
    /// Task lists in the store.
    pub lists: TaskLists,
    /// The run's latest copy of its task list (saves a read per task tool call).
    pub tasks: Arc<Mutex<TaskList>>,
    /// HTTP client for HTTP tools.
    pub http: reqwest::Client,
    /// The run.
    pub run_id: String,
    /// The request's context, sent to HTTP tools.
    pub request_context: Value,
    /// The store (working memory).
    pub store: Arc<dyn Store>,
}

impl ToolSpec {
    /// The name the model calls.
    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// Runs the tool; cancelling `cancel` stops it at once.
    pub async fn execute(
        &self,
        env: &ToolEnv,
        call_id: &str,
        args: &Value,
        cancel: &CancellationToken,
    ) -> Result<ToolOutput, String> {
        let work = async {
            match &self.kind {
                ToolKind::Task(op) => run_task_tool(*op, env, args).await,
                ToolKind::Http(tool) => tool.call(env, self.name(), call_id, args).await,
                ToolKind::Mcp(tool) => {
                    let key = idempotency_key(&env.run_id, call_id);
                    tool.call(self.name(), args, &key).await
                }
                ToolKind::WorkingMemory(settings) => {
                    update_working_memory(settings, env, args).await
                }
                ToolKind::Client => Err(format!(
                    "Tool \"{}\" is executed by the client and cannot run on the server",
                    self.name()
                )),
                // The runner delegates before it would get here.
                ToolKind::SubAgent(_) => Err(format!(
                    "Tool \"{}\" delegates to a sub-agent and runs in the agent loop",
                    self.name()
                )),
            }
        };
        tokio::select! {
            () = cancel.cancelled() => Err("Tool call aborted".to_owned()),
            result = work => result,
        }
    }
}

/// The `updateWorkingMemory` tool as the model sees it, for a run with these settings.
pub fn working_memory_tool(settings: working::Settings) -> ToolSpec {
    let (description, parameters) = settings.tool();
    ToolSpec {
        def: Arc::new(ToolDefinition::new(
            working::TOOL_NAME.to_owned(),
            description.to_owned(),
            parameters,
        )),
        require_approval: false,
        resume_schema: None,
        kind: ToolKind::WorkingMemory(Arc::new(settings)),
    }
}

/// Most compare-and-set attempts of one working-memory update under concurrent writers.
const WORKING_MEMORY_ATTEMPTS: usize = 16;

/// One `updateWorkingMemory` call: read, apply the reference's rules, compare-and-set (so two
/// runs of one resource never lose an update), retry on conflict.
async fn update_working_memory(
    settings: &working::Settings,
    env: &ToolEnv,
    args: &Value,
) -> Result<ToolOutput, String> {
    let Some(key) = &env.thread else {
        return Err("Memory instance is required for working memory updates".to_owned());
    };
    let unavailable = |e: crate::store::StoreError| format!("Working memory unavailable: {e}");
    for _ in 0..WORKING_MEMORY_ATTEMPTS {
        let current = working_store::read(env.store.as_ref(), key, settings.scope)
            .await
            .map_err(unavailable)?;
        let text = current
            .as_ref()
            .map(|doc| String::from_utf8_lossy(&doc.value).into_owned());
        let update = settings.apply(text.as_deref(), args)?;
        let Some(value) = update.store else {
            return Ok(ToolOutput {
                result: update.result,
                is_error: false,
            });
        };
        let expected = current.map_or(0, |doc| doc.version);
        let value = bytes::Bytes::from(value);
        let outcome = working_store::cas(env.store.as_ref(), key, settings.scope, expected, value)
            .await
            .map_err(unavailable)?;
        if let Cas::Written(_) = outcome {
            return Ok(ToolOutput {
                result: update.result,
                is_error: false,
            });
        }
    }
    Err("Working memory is being updated concurrently; try again".to_owned())
}

/// A validated task mutation, applied to the stored list.
type TaskOperation = Box<dyn Fn(&[tasks::Task]) -> tasks::Outcome + Send + Sync>;

/// A task tool call: validation, then the memory check, then the shared rules, exactly as
/// TaskService does.
async fn run_task_tool(op: TaskOp, env: &ToolEnv, args: &Value) -> Result<ToolOutput, String> {
    let invalid = |e: tasks::ValidationError| ToolOutput {
        result: e.to_tool_result_json(),
        is_error: true,
    };
    let operation: TaskOperation = match op {
        TaskOp::Write => match tasks::validate_write(args) {
            Ok(input) => Box::new(move |prev| tasks::write(prev, &input)),
            Err(e) => return Ok(invalid(e)),
        },
        TaskOp::Update => match tasks::validate_update(args) {
            Ok(input) => Box::new(move |prev| tasks::update(prev, &input)),
            Err(e) => return Ok(invalid(e)),
        },
        TaskOp::Complete => match tasks::validate_complete(args) {
            Ok(input) => Box::new(move |prev| tasks::complete(prev, &input)),
            Err(e) => return Ok(invalid(e)),
        },
        TaskOp::Check => {
            if let Err(e) = tasks::validate_check(args) {
                return Ok(invalid(e));
            }
            let outcome = match &env.thread {
                None => tasks::memory_required_check(),
                Some(_) => tasks::check(&env.tasks.lock().await.tasks),
            };
            return Ok(ToolOutput {
                is_error: outcome.is_error,
                result: outcome.to_tool_result_json(),
            });
        }
    };
    let Some(key) = &env.thread else {
        let outcome = tasks::memory_required();
        return Ok(ToolOutput {
            is_error: true,
            result: outcome.to_tool_result_json(),
        });
    };
    // The lock keeps this run's own task tools in order; other writers are handled by CAS.
    let mut cached = env.tasks.lock().await;
    let (outcome, list) = env
        .lists
        .apply_from(key, cached.clone(), operation)
        .await
        .map_err(|e| format!("Task list unavailable: {e}"))?;
    *cached = list;
    Ok(ToolOutput {
        is_error: outcome.is_error,
        result: outcome.to_tool_result_json(),
    })
}

impl HttpTool {
    async fn call(
        &self,
        env: &ToolEnv,
        name: &str,
        call_id: &str,
        args: &Value,
    ) -> Result<ToolOutput, String> {
        let body = json!({
            "toolCallId": call_id,
            "toolName": name,
            "args": args,
            "runId": env.run_id,
            "threadId": env.thread.as_ref().map(|k| k.thread_id.clone()),
            "resourceId": env.thread.as_ref().map(|k| k.resource_id.clone()),
            "requestContext": env.request_context,
        });
        // A run taken over by another replica may call a tool again under the same call id:
        // the key lets the endpoint answer the repeat without doing it twice.
        let mut request = env
            .http
            .post(&self.url)
            .timeout(self.timeout)
            .header("idempotency-key", idempotency_key(&env.run_id, call_id))
            .json(&body);
        for (header, value) in &self.headers {
            request = request.header(header, value);
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("Tool \"{name}\" failed: {}", without_url(&e)))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| format!("Tool \"{name}\" failed: {}", without_url(&e)))?;
        if !status.is_success() {
            let snippet: String = text.chars().take(2000).collect();
            return Err(format!(
                "Tool \"{name}\" failed with HTTP {}: {snippet}",
                status.as_u16()
            ));
        }
        let result = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok(ToolOutput {
            result,
            is_error: false,
        })
    }
}

/// reqwest errors name the URL, which may carry credentials in its query: keep the reason only.
fn without_url(err: &reqwest::Error) -> String {
    let kind = if err.is_timeout() {
        "timed out"
    } else if err.is_connect() {
        "could not connect"
    } else if err.is_decode() {
        "unreadable response"
    } else {
        "request error"
    };
    kind.to_owned()
}

/// The text the model gets for a tool it does not have.
pub fn unknown_tool_text(name: &str, available: &[&str]) -> String {
    format!(
        "Tool \"{name}\" not found. Available tools: {}. Call tools by their exact name only — never add prefixes, namespaces, or colons.",
        available.join(", ")
    )
}

/// The idempotency key of one tool call: the same when a taken-over run calls it again.
pub fn idempotency_key(run_id: &str, call_id: &str) -> String {
    format!("{run_id}:{call_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_tool_text_matches_the_reference() {
        assert_eq!(
            unknown_tool_text("search", &["task_write", "task_check"]),
            "Tool \"search\" not found. Available tools: task_write, task_check. Call tools by their exact name only — never add prefixes, namespaces, or colons."
        );
    }

    #[test]
    fn task_tools_are_the_four_in_order() {
        let names: Vec<String> = task_tools()
            .into_iter()
            .map(|t| t.def.name.clone())
            .collect();
        assert_eq!(
            names,
            ["task_write", "task_update", "task_complete", "task_check"]
        );
    }
}
