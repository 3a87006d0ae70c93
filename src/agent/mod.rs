//! Agents and their runs: the configured agents, the tool loop, memory, structured output,
//! approvals, and the runtime that starts, observes, aborts and resumes runs on any replica.

pub mod auto_resume;
pub mod completion;
pub mod decision;
pub mod delegation;
pub mod emit;
pub mod error;
pub mod event;
pub mod hooks;
pub mod message;
pub mod processors;
pub mod record;
pub mod request;
pub mod result;
pub mod run;
pub mod runtime;
pub mod scorers;
pub mod state;
pub mod stop;
pub mod structured;
pub mod tools;
pub mod validate;
pub mod wire;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::config::{AgentConfig, Config, ConfigError};
use crate::mcp::{McpBinding, McpHub};
use crate::model::{ModelError, ModelProvider, ModelRequest, ModelStream, OpenAiProvider};
use tools::{HttpTool, ToolSpec};

/// A configured agent, ready to run.
pub struct AgentDef {
    /// Its configuration.
    pub config: AgentConfig,
    /// The provider serving its model.
    pub provider: Arc<dyn ModelProvider>,
    /// The model name as the provider knows it (after `provider/`).
    pub model: String,
    /// Its fixed tools, in order (task tools first, then HTTP tools); see [`AgentDef::tools`].
    pub tools: Vec<ToolSpec>,
    /// The MCP servers whose tools it offers after the fixed ones.
    pub mcp: Vec<McpBinding>,
    /// Its webhooks, in config order (`config.webhooks`).
    pub webhooks: Vec<Arc<hooks::webhook::Webhook>>,
    /// Its working-memory settings (`[agents.memory.working_memory]`), when enabled.
    pub working_memory: Option<crate::memory::working::Settings>,
    /// The embedder of `[agents.memory]`, for semantic recall.
    pub embedder: Option<Arc<dyn crate::model::Embedder>>,
    /// Its processors, compiled once for its runs (`None`: it has none).
    pub processors: Option<Arc<processors::Chain>>,
    /// Its sub-agents' tools (`agent-{key}`), offered after every other tool.
    pub sub_agents: Vec<ToolSpec>,
    /// Its scorers (`[agents.scorers]`), built once.
    pub scorers: Vec<scorers::scorer::RunScorer>,
}

impl AgentDef {
    /// Its tools now: the fixed ones, then its MCP servers' as currently listed. Borrowed
    /// (no work) for an agent without MCP servers; else built from the servers' snapshots.
    pub fn tools(&self) -> Cow<'_, [ToolSpec]> {
        if self.mcp.is_empty() {
            return Cow::Borrowed(&self.tools);
        }
        let defaults = &self.config.default_options;
        Cow::Owned(crate::mcp::with_mcp_tools(&self.tools, &self.mcp, |name| {
            defaults.require_tool_approval || self.config.require_approval.iter().any(|n| n == name)
        }))
    }

    /// Its working-memory settings, when enabled in its config.
    pub fn working_memory(&self) -> Option<crate::memory::working::Settings> {
        self.working_memory.clone()
    }

    /// The working-memory settings of a run of this agent: its own, changed by the request;
    /// `None` without memory.
    pub fn run_working_memory(
        &self,
        request: &request::RunRequest,
    ) -> Option<crate::memory::working::Settings> {
        let memory = request.memory.as_ref()?;
        crate::memory::working::resolve(self.working_memory.as_ref(), &memory.working_memory)
    }

    /// Whether the agent has the task tools (and so the task-list signal).
    pub fn has_task_tools(&self) -> bool {
        self.config.tools.iter().any(|t| t == "tasks")
    }
}

/// A model on a configured provider (`provider/model`).
#[derive(Clone)]
pub struct ModelRef {
    /// The provider serving it.
    pub provider: Arc<dyn ModelProvider>,
    /// The model name as the provider knows it.
    pub model: String,
}

/// The agents a server runs, by id, and the providers they may name.
#[derive(Default)]
pub struct Agents {
    by_id: BTreeMap<String, Arc<AgentDef>>,
    providers: BTreeMap<String, Arc<dyn ModelProvider>>,
}

impl Agents {
    /// Builds every configured agent, without MCP tools (for checking a config). A provider
    /// whose key is missing does not stop the server: its agents fail when run, with the
    /// reason.
    pub fn from_config(config: &Config) -> Result<Self, ConfigError> {
        Self::with_mcp(config, &McpHub::default())
    }

    /// [`Agents::from_config`], each agent offering the tools of the MCP servers it names
    /// (those the hub runs).
    pub fn with_mcp(config: &Config, hub: &McpHub) -> Result<Self, ConfigError> {
        let mut providers: BTreeMap<String, Arc<dyn ModelProvider>> = BTreeMap::new();
        for p in &config.providers {
            let provider: Arc<dyn ModelProvider> = match OpenAiProvider::new(p.clone()) {
                Ok(provider) => Arc::new(provider),
                Err(e) => {
                    warn!(provider = %p.name, error = %e, "provider unusable; its agents will fail when run");
                    Arc::new(Unusable {
                        name: p.name.clone(),
                        error: e,
                    })
                }
            };
            providers.insert(p.name.clone(), provider);
        }
        let mut by_id = BTreeMap::new();
        let http = reqwest::Client::new();
        for a in &config.agents {
            let (provider_name, model) = a.model.split_once('/').ok_or_else(|| {
                ConfigError::Invalid(format!("agent {:?}: model must be provider/model", a.id))
            })?;
            let provider = providers.get(provider_name).cloned().ok_or_else(|| {
                ConfigError::Invalid(format!(
                    "agent {:?}: unknown provider {provider_name:?}",
                    a.id
                ))
            })?;
            let mut tools = Vec::new();
            if a.tools.iter().any(|t| t == "tasks") {
                tools.extend(tools::task_tools());
            }
            for http in &a.http_tools {
                tools.push(HttpTool::from_config(http).map_err(ConfigError::Invalid)?);
            }
            for tool in &mut tools {
                tool.require_approval = a.default_options.require_tool_approval
                    || a.require_approval.contains(&tool.def.name);
            }
            let webhooks = a
                .webhooks
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    hooks::webhook::Webhook::new(w, http.clone())
                        .map(Arc::new)
                        .map_err(|e| {
                            ConfigError::Invalid(format!("agent {:?}: webhooks[{i}]: {e}", a.id))
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let working_memory = match &a.memory.working_memory {
                Some(wm) => wm.settings().map_err(|e| {
                    ConfigError::Invalid(format!("agents.{}.memory.working_memory: {e}", a.id))
                })?,
                None => None,
            };
            let chain = processors::Chain::build(
                &a.input_processors,
                &a.output_processors,
                a.max_processor_retries,
            )
            .map_err(|e| ConfigError::Invalid(format!("agent {:?}: {e}", a.id)))?;
            let mcp = a
                .mcp_servers
                .iter()
                .filter_map(|u| {
                    Some(McpBinding {
                        server: hub.get(u.server())?,
                        filter: u.tools().map(<[String]>::to_vec),
                    })
                })
                .collect();
            by_id.insert(
                a.id.clone(),
                Arc::new(AgentDef {
                    config: a.clone(),
                    provider,
                    model: model.to_owned(),
                    tools,
                    mcp,
                    webhooks,
                    working_memory,
                    embedder: a
                        .memory
                        .embedder
                        .as_deref()
                        .and_then(|spec| crate::memory::build_embedder(config, spec)),
                    processors: (!chain.is_empty()).then(|| Arc::new(chain)),
                    sub_agents: a
                        .sub_agents
                        .iter()
                        .filter_map(|(key, id)| {
                            let sub = config.agents.iter().find(|s| &s.id == id)?;
                            Some(delegation::tool(key, sub))
                        })
                        .collect(),
                    scorers: scorers::scorer::configured(&a.id, &a.scorers)
                        .map_err(ConfigError::Invalid)?,
                }),
            );
        }
        Ok(Self { by_id, providers })
    }

    /// The model `provider/model` names, when its provider is configured.
    pub fn model(&self, spec: &str) -> Option<ModelRef> {
        let (provider, model) = spec.split_once('/')?;
        Some(ModelRef {
            provider: self.providers.get(provider)?.clone(),
            model: model.to_owned(),
        })
    }

    /// The agent with this id.
    pub fn get(&self, id: &str) -> Option<Arc<AgentDef>> {
        self.by_id.get(id).cloned()
    }

    /// All agents, by id.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<AgentDef>> {
        self.by_id.values()
    }
}

/// Stands in for a provider that could not be built, failing each call with the reason.
struct Unusable {
    name: String,
    error: ModelError,
}

#[async_trait]
impl ModelProvider for Unusable {
    fn name(&self) -> &str {
        &self.name
    }

    fn supports_structured_output(&self) -> bool {
        false
    }

    async fn stream(
        &self,
        _request: ModelRequest,
        _cancel: CancellationToken,
    ) -> Result<ModelStream, ModelError> {
        Err(self.error.clone())
    }
}
