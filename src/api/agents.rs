//! `agentd.v1.AgentService`: converts requests to domain runs and hands them to the runtime.

use std::sync::Arc;

use serde_json::Value;
use tonic::{Request, Response, Status, Streaming};

use super::error::Violations;
pub use super::run_request::{on_disconnect, run_request};
use super::scope::{check_resource, identity};
use super::{ChunkStream, check_id, check_text, chunk_stream, hooks, to_i32};
use crate::agent::AgentDef;
use crate::agent::hooks::{ClientBinding, ClientHooks};
use crate::agent::request::RunRequest;
use crate::agent::runtime::{Runtime, TraceIds};
use crate::config::Limits;
use crate::json::to_proto_struct;
use crate::pb;
use crate::telemetry;
use crate::tenant::Identity;
use tokio_util::sync::CancellationToken;

/// The AgentService implementation.
pub struct AgentApi {
    runtime: Arc<Runtime>,
    limits: Limits,
    /// Ends open Observe streams (UNAVAILABLE) when the server drains.
    drain: CancellationToken,
}

impl AgentApi {
    /// An AgentService running agents on `runtime`; `drain` ends open Observe streams.
    pub fn new(runtime: Arc<Runtime>, limits: Limits, drain: CancellationToken) -> Self {
        Self {
            runtime,
            limits,
            drain,
        }
    }
}

impl AgentApi {
    /// Converts and starts a run of `caller` (its memory in the caller's scope) under the
    /// caller's trace (request fields, else metadata).
    async fn start_run(
        &self,
        metadata: &tonic::metadata::MetadataMap,
        caller: &Identity,
        req: pb::GenerateRequest,
    ) -> Result<(crate::agent::runtime::ChunkStream, TraceIds), Status> {
        let (mut run, parent) = checked_run(metadata.as_ref(), req, &self.limits)?;
        scope_run(caller, &mut run)?;
        Ok(self.runtime.generate(run, parent, None).await?)
    }
}

/// A GenerateRequest, checked and converted, with the parent of the run it starts (its trace
/// fields, else `metadata`'s trace).
pub(crate) fn checked_run(
    metadata: &http::HeaderMap,
    req: pb::GenerateRequest,
    limits: &Limits,
) -> Result<(RunRequest, Option<opentelemetry::Context>), Status> {
    let tracing = req.tracing_options.clone().unwrap_or_default();
    let parent = super::run_parent(metadata, &tracing.trace_id, &tracing.parent_span_id)?;
    Ok((run_request(req, limits)?, parent))
}

/// Where a GenerateWithHooks carries its GenerateRequest (its violations' prefix).
const HOOKED_REQUEST: &str = "start.request";

/// The first message of a GenerateWithHooks, checked: the client's hooks, the run it starts
/// and that run's parent (as [`checked_run`]).
pub(crate) fn hooked_generate(
    metadata: &http::HeaderMap,
    start: pb::HookedGenerate,
    limits: &Limits,
) -> Result<(RunRequest, Option<opentelemetry::Context>, ClientBinding), Status> {
    let Some(req) = start.request else {
        let mut v = Violations::default();
        v.add(HOOKED_REQUEST, "is required");
        return Err(v.into_status());
    };
    let binding = hooks::binding(start.hooks.as_ref())?;
    let (run, parent) =
        checked_run(metadata, req, limits).map_err(|s| hooks::nested(s, HOOKED_REQUEST))?;
    Ok((run, parent, binding))
}

/// An AbortRequest, checked.
pub(crate) fn abort_request(req: &pb::AbortRequest, limits: &Limits) -> Result<(), Status> {
    required_run_id(&req.run_id, limits)?;
    let mut v = Violations::default();
    check_text(&mut v, "reason", &req.reason, limits);
    v.into_result()
}

/// A GetAgentRequest's id, checked.
pub(crate) fn agent_id_request(req: &pb::GetAgentRequest) -> Result<(), Status> {
    if req.agent_id.is_empty() {
        let mut v = Violations::default();
        v.add("agent_id", "must not be empty");
        return Err(v.into_status());
    }
    Ok(())
}

/// A run's response, its metadata naming the run's trace and span.
fn traced<T>(body: T, (trace_id, span_id): &TraceIds) -> Response<T> {
    let mut response = Response::new(body);
    telemetry::insert_trace_ids(response.metadata_mut(), trace_id, span_id);
    response
}

/// The public description of an agent.
fn describe(agent: &AgentDef) -> pb::Agent {
    let config = &agent.config;
    // Its sub-agents are tools its model sees too.
    let tools = agent
        .tools()
        .iter()
        .chain(&agent.sub_agents)
        .map(|t| pb::ToolInfo {
            name: t.def.name.clone(),
            description: t.def.description.clone(),
            input_schema: match &t.def.parameters {
                Value::Object(map) => Some(to_proto_struct(map)),
                _ => None,
            },
            require_approval: t.require_approval,
        })
        .collect();
    let defaults = &config.default_options;
    pb::Agent {
        id: config.id.clone(),
        name: config.name.clone().unwrap_or_else(|| config.id.clone()),
        description: config.description.clone(),
        model: config.model.clone(),
        instructions: config.instructions.clone(),
        tools,
        default_options: Some(pb::DefaultOptions {
            max_steps: defaults.max_steps.map(to_i32),
            tool_call_concurrency: defaults.tool_call_concurrency.map(to_i32),
            model_settings: Some(pb::ModelSettings {
                temperature: defaults.temperature,
                max_output_tokens: defaults.max_output_tokens.map(to_i32),
                ..Default::default()
            }),
            require_tool_approval: defaults.require_tool_approval,
        }),
    }
}

/// A required run id, checked.
pub(crate) fn required_run_id(run_id: &str, limits: &Limits) -> Result<(), Status> {
    let mut v = Violations::default();
    if run_id.is_empty() {
        v.add("run_id", "must not be empty");
    }
    check_id(&mut v, "run_id", run_id, limits);
    v.into_result()
}

/// Holds a run to its caller: its memory must be in the caller's scope, and the run belongs to
/// the caller's tenant (Observe, Abort and decisions of other tenants do not find it).
fn scope_run(caller: &Identity, run: &mut RunRequest) -> Result<(), Status> {
    if let Some(memory) = &run.memory {
        check_resource(caller, "memory.resource", &memory.resource_id)?;
    }
    caller.run_owner().clone_into(&mut run.tenant);
    Ok(())
}

#[tonic::async_trait]
impl pb::encoded::agent_service_server::AgentService for AgentApi {
    type GenerateStream = ChunkStream;
    type ObserveStream = ChunkStream;
    type GenerateWithHooksStream = hooks::HookedStream;

    async fn generate_with_hooks(
        &self,
        request: Request<Streaming<pb::GenerateWithHooksRequest>>,
    ) -> Result<Response<Self::GenerateWithHooksStream>, Status> {
        let (metadata, extensions, mut inbound) = request.into_parts();
        let caller = identity(&extensions);
        let start: pb::HookedGenerate = hooks::start(&mut inbound).await?;
        let (mut run, parent, binding) = hooked_generate(metadata.as_ref(), start, &self.limits)?;
        scope_run(&caller, &mut run)?;
        let (client, calls) = ClientHooks::new(binding);
        let (stream, trace) = self
            .runtime
            .generate(run, parent, Some(client.clone()))
            .await
            .map_err(|e| hooks::nested(e.into(), HOOKED_REQUEST))?;
        let body = hooks::hooked(stream, client, calls, inbound);
        Ok(traced(body, &trace))
    }

    async fn generate(
        &self,
        request: Request<pb::GenerateRequest>,
    ) -> Result<Response<Self::GenerateStream>, Status> {
        let (metadata, extensions, req) = request.into_parts();
        let caller = identity(&extensions);
        let (stream, trace) = self.start_run(&metadata, &caller, req).await?;
        Ok(traced(chunk_stream(stream), &trace))
    }

    async fn observe(
        &self,
        request: Request<pb::ObserveRequest>,
    ) -> Result<Response<Self::ObserveStream>, Status> {
        let caller = identity(request.extensions());
        let req = request.into_inner();
        required_run_id(&req.run_id, &self.limits)?;
        self.runtime.authorize_run(&caller, &req.run_id).await?;
        let stream = self
            .runtime
            .observe(&req.run_id, req.after_sequence)
            .await?;
        Ok(Response::new(super::until_drain(
            chunk_stream(stream),
            self.drain.clone(),
        )))
    }

    async fn abort(
        &self,
        request: Request<pb::AbortRequest>,
    ) -> Result<Response<pb::AbortResponse>, Status> {
        let caller = identity(request.extensions());
        let req = request.into_inner();
        abort_request(&req, &self.limits)?;
        self.runtime.authorize_run(&caller, &req.run_id).await?;
        let aborted = self.runtime.abort(&req.run_id, &req.reason).await?;
        Ok(Response::new(pb::AbortResponse { aborted }))
    }

    async fn list_agents(
        &self,
        _request: Request<pb::ListAgentsRequest>,
    ) -> Result<Response<pb::ListAgentsResponse>, Status> {
        Ok(Response::new(pb::ListAgentsResponse {
            agents: self.runtime.agents().iter().map(|a| describe(a)).collect(),
        }))
    }

    async fn get_agent(
        &self,
        request: Request<pb::GetAgentRequest>,
    ) -> Result<Response<pb::Agent>, Status> {
        let req = request.into_inner();
        agent_id_request(&req)?;
        let id = req.agent_id;
        self.runtime
            .agents()
            .get(&id)
            .map(|a| Response::new(describe(&a)))
            .ok_or_else(|| Status::not_found(format!("agent {id:?} is not configured")))
    }
}
