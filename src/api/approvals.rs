//! `agentd.v1.ApprovalService`: decisions on suspended tool calls, handed to the runtime.

use std::sync::Arc;

use tonic::{Request, Response, Status, Streaming};

use super::agents::on_disconnect;
use super::error::Violations;
use super::scope::{check_resource, identity};
use super::{ChunkStream, check_id, chunk_stream, hooks, run_parent};
use crate::agent::decision;
use crate::agent::hooks::{ClientBinding, ClientHooks};
use crate::agent::request::OnDisconnect;
use crate::agent::runtime::Runtime;
use crate::agent::state::Decision;
use crate::config::Limits;
use crate::json::from_proto_value;
use crate::pb;
use crate::tenant::Identity;

/// The ApprovalService implementation.
pub struct ApprovalApi {
    runtime: Arc<Runtime>,
    limits: Limits,
}

impl ApprovalApi {
    /// An ApprovalService deciding runs of `runtime`.
    pub fn new(runtime: Arc<Runtime>, limits: Limits) -> Self {
        Self { runtime, limits }
    }

    /// Records a decision; the continuation runs under the call's span (see [`run_parent`])
    /// and calls `hooks` when the caller answers some. Another tenant's run is NOT_FOUND.
    async fn decide(
        &self,
        caller: &Identity,
        call: DecisionCall,
        parent: Option<opentelemetry::Context>,
        hooks: Option<Arc<ClientHooks>>,
    ) -> Result<crate::agent::runtime::ChunkStream, Status> {
        self.runtime.authorize_run(caller, &call.run_id).await?;
        Ok(self
            .runtime
            .decide(
                &call.run_id,
                &call.call_id,
                call.decision,
                call.mode,
                parent,
                hooks,
            )
            .await?)
    }

    /// A unary-started decision's response.
    async fn decided(
        &self,
        caller: &Identity,
        call: DecisionCall,
        parent: Option<opentelemetry::Context>,
    ) -> Result<Response<ChunkStream>, Status> {
        let stream = self.decide(caller, call, parent, None).await?;
        Ok(Response::new(chunk_stream(stream)))
    }
}

/// An Approve, checked.
pub(crate) fn approval(req: &pb::ApproveRequest, limits: &Limits) -> Result<DecisionCall, Status> {
    check_call(&req.run_id, &req.tool_call_id, limits)?;
    Ok(DecisionCall::of(
        &req.run_id,
        &req.tool_call_id,
        Decision::Approved,
        req.on_disconnect(),
    ))
}

/// A Decline, checked.
pub(crate) fn declining(req: &pb::DeclineRequest, limits: &Limits) -> Result<DecisionCall, Status> {
    check_call(&req.run_id, &req.tool_call_id, limits)?;
    let mut v = Violations::default();
    if let Some(reason) = &req.reason {
        super::check_text(&mut v, "reason", reason, limits);
    }
    v.into_result()?;
    Ok(DecisionCall::of(
        &req.run_id,
        &req.tool_call_id,
        decision::decline(req.reason.as_deref()),
        req.on_disconnect(),
    ))
}

/// A Resume, checked.
pub(crate) fn resumption(req: &pb::ResumeRequest, limits: &Limits) -> Result<DecisionCall, Status> {
    check_call(&req.run_id, &req.tool_call_id, limits)?;
    let data = req
        .data
        .as_ref()
        .map_or(serde_json::Value::Null, from_proto_value);
    Ok(DecisionCall::of(
        &req.run_id,
        &req.tool_call_id,
        Decision::Resumed(data),
        req.on_disconnect(),
    ))
}

/// Both ids are required and bounded.
fn check_call(run_id: &str, tool_call_id: &str, limits: &Limits) -> Result<(), Status> {
    let mut v = Violations::default();
    for (field, value) in [("run_id", run_id), ("tool_call_id", tool_call_id)] {
        if value.is_empty() {
            v.add(field, "must not be empty");
        }
        check_id(&mut v, field, value, limits);
    }
    v.into_result()
}

/// A ListPendingRequest's filters, checked.
pub(crate) fn list_pending_request(
    req: &pb::ListPendingRequest,
    limits: &Limits,
) -> Result<(), Status> {
    let mut v = Violations::default();
    for (field, value) in [
        ("thread_id", &req.thread_id),
        ("resource_id", &req.resource_id),
        ("run_id", &req.run_id),
    ] {
        if let Some(value) = value {
            check_id(&mut v, field, value, limits);
        }
    }
    v.into_result()
}

/// The first message of a ContinueWithHooks, checked: the decision, where it sits in the
/// message (`start.approve`, … : the prefix of its violations) and the client's hooks.
pub(crate) fn hooked_continue(
    start: &pb::HookedContinue,
    limits: &Limits,
) -> Result<(DecisionCall, &'static str, ClientBinding), Status> {
    use pb::hooked_continue::Decision as D;
    let in_start = |prefix: &'static str| move |s| hooks::nested(s, prefix);
    let (call, prefix) = match &start.decision {
        Some(D::Approve(r)) => (approval(r, limits).map_err(in_start(APPROVE))?, APPROVE),
        Some(D::Decline(r)) => (declining(r, limits).map_err(in_start(DECLINE))?, DECLINE),
        Some(D::Resume(r)) => (resumption(r, limits).map_err(in_start(RESUME))?, RESUME),
        None => {
            let mut v = Violations::default();
            v.add("start.decision", "give approve, decline or resume");
            return Err(v.into_status());
        }
    };
    Ok((call, prefix, hooks::binding(start.hooks.as_ref())?))
}

/// Where a ContinueWithHooks carries each kind of decision.
const APPROVE: &str = "start.approve";
const DECLINE: &str = "start.decline";
const RESUME: &str = "start.resume";

/// A checked decision on one call.
pub(crate) struct DecisionCall {
    run_id: String,
    call_id: String,
    decision: Decision,
    mode: OnDisconnect,
}

impl DecisionCall {
    fn of(run_id: &str, call_id: &str, decision: Decision, mode: pb::OnDisconnect) -> Self {
        Self {
            run_id: run_id.to_owned(),
            call_id: call_id.to_owned(),
            decision,
            mode: on_disconnect(mode),
        }
    }
}

/// An optional filter field; empty counts as absent.
fn nonempty(field: &Option<String>) -> Option<&str> {
    field.as_deref().filter(|s| !s.is_empty())
}

#[tonic::async_trait]
impl pb::encoded::approval_service_server::ApprovalService for ApprovalApi {
    type ApproveStream = ChunkStream;
    type DeclineStream = ChunkStream;
    type ResumeStream = ChunkStream;
    type ContinueWithHooksStream = hooks::HookedStream;

    async fn list_pending(
        &self,
        request: Request<pb::ListPendingRequest>,
    ) -> Result<Response<pb::ListPendingResponse>, Status> {
        let caller = identity(request.extensions());
        let req = request.into_inner();
        list_pending_request(&req, &self.limits)?;
        if let Some(resource) = nonempty(&req.resource_id) {
            check_resource(&caller, "resource_id", resource)?;
        }
        let runs = self
            .runtime
            .pending(
                nonempty(&req.thread_id),
                nonempty(&req.resource_id),
                nonempty(&req.run_id),
                &caller,
            )
            .await?;
        Ok(Response::new(pb::ListPendingResponse { runs }))
    }

    async fn approve(
        &self,
        request: Request<pb::ApproveRequest>,
    ) -> Result<Response<Self::ApproveStream>, Status> {
        let parent = run_parent(request.metadata().as_ref(), "", "")?;
        let caller = identity(request.extensions());
        let call = approval(&request.into_inner(), &self.limits)?;
        self.decided(&caller, call, parent).await
    }

    async fn decline(
        &self,
        request: Request<pb::DeclineRequest>,
    ) -> Result<Response<Self::DeclineStream>, Status> {
        let parent = run_parent(request.metadata().as_ref(), "", "")?;
        let caller = identity(request.extensions());
        let call = declining(&request.into_inner(), &self.limits)?;
        self.decided(&caller, call, parent).await
    }

    async fn resume(
        &self,
        request: Request<pb::ResumeRequest>,
    ) -> Result<Response<Self::ResumeStream>, Status> {
        let parent = run_parent(request.metadata().as_ref(), "", "")?;
        let caller = identity(request.extensions());
        let call = resumption(&request.into_inner(), &self.limits)?;
        self.decided(&caller, call, parent).await
    }

    async fn continue_with_hooks(
        &self,
        request: Request<Streaming<pb::ContinueWithHooksRequest>>,
    ) -> Result<Response<Self::ContinueWithHooksStream>, Status> {
        let parent = run_parent(request.metadata().as_ref(), "", "")?;
        let caller = identity(request.extensions());
        let mut inbound = request.into_inner();
        let start: pb::HookedContinue = hooks::start(&mut inbound).await?;
        let (call, prefix, binding) = hooked_continue(&start, &self.limits)?;
        let (client, calls) = ClientHooks::new(binding);
        let stream = self
            .decide(&caller, call, parent, Some(client.clone()))
            .await
            .map_err(|s| hooks::nested(s, prefix))?;
        Ok(Response::new(hooks::hooked(stream, client, calls, inbound)))
    }
}
