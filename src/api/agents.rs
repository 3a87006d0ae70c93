//! `agentd.v1.AgentService`: agent listing from config. The run RPCs answer UNIMPLEMENTED until
//! the agent loop lands.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use tonic::{Request, Response, Status};

use crate::config::AgentConfig;
use crate::json::to_proto_struct;
use crate::pb;
use crate::tasks;

/// The AgentService implementation.
pub struct AgentApi {
    agents: Arc<BTreeMap<String, pb::Agent>>,
}

impl AgentApi {
    /// An AgentService serving the configured agents.
    pub fn new(configs: &[AgentConfig]) -> Self {
        let agents = configs
            .iter()
            .map(|a| (a.id.clone(), describe(a)))
            .collect();
        Self {
            agents: Arc::new(agents),
        }
    }
}

/// The public description of a configured agent.
fn describe(agent: &AgentConfig) -> pb::Agent {
    let mut tools = Vec::new();
    if agent.tools.iter().any(|t| t == "tasks") {
        for (name, description, schema) in tasks::tool_definitions() {
            let input_schema = match schema {
                serde_json::Value::Object(map) => Some(to_proto_struct(&map)),
                _ => None,
            };
            tools.push(pb::ToolInfo {
                name: name.to_owned(),
                description: description.to_owned(),
                input_schema,
                require_approval: agent.default_options.require_tool_approval
                    || agent.require_approval.iter().any(|t| t == name),
            });
        }
    }
    let defaults = &agent.default_options;
    pb::Agent {
        id: agent.id.clone(),
        name: agent.name.clone().unwrap_or_else(|| agent.id.clone()),
        description: agent.description.clone(),
        model: agent.model.clone(),
        instructions: agent.instructions.clone(),
        tools,
        default_options: Some(pb::DefaultOptions {
            max_steps: defaults.max_steps.map(clamp_i32),
            tool_call_concurrency: defaults.tool_call_concurrency.map(clamp_i32),
            model_settings: Some(pb::ModelSettings {
                temperature: defaults.temperature,
                max_output_tokens: defaults.max_output_tokens.map(clamp_i32),
                ..Default::default()
            }),
            require_tool_approval: defaults.require_tool_approval,
        }),
    }
}

fn clamp_i32(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

type ChunkStream = BoxStream<'static, Result<pb::Chunk, Status>>;

#[tonic::async_trait]
impl pb::agent_service_server::AgentService for AgentApi {
    type GenerateStream = ChunkStream;
    type ObserveStream = ChunkStream;

    async fn generate(
        &self,
        _request: Request<pb::GenerateRequest>,
    ) -> Result<Response<Self::GenerateStream>, Status> {
        Err(Status::unimplemented(
            "AgentService.Generate is not available yet",
        ))
    }

    async fn observe(
        &self,
        _request: Request<pb::ObserveRequest>,
    ) -> Result<Response<Self::ObserveStream>, Status> {
        Err(Status::unimplemented(
            "AgentService.Observe is not available yet",
        ))
    }

    async fn abort(
        &self,
        _request: Request<pb::AbortRequest>,
    ) -> Result<Response<pb::AbortResponse>, Status> {
        Err(Status::unimplemented(
            "AgentService.Abort is not available yet",
        ))
    }

    async fn list_agents(
        &self,
        _request: Request<pb::ListAgentsRequest>,
    ) -> Result<Response<pb::ListAgentsResponse>, Status> {
        Ok(Response::new(pb::ListAgentsResponse {
            agents: self.agents.values().cloned().collect(),
        }))
    }

    async fn get_agent(
        &self,
        request: Request<pb::GetAgentRequest>,
    ) -> Result<Response<pb::Agent>, Status> {
        let id = request.into_inner().agent_id;
        if id.is_empty() {
            let mut v = super::error::Violations::default();
            v.add("agent_id", "must not be empty");
            return Err(v.into_status());
        }
        self.agents
            .get(&id)
            .cloned()
            .map(Response::new)
            .ok_or_else(|| Status::not_found(format!("agent {id:?} is not configured")))
    }
}
