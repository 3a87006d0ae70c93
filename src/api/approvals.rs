//! `agentd.v1.ApprovalService`: decisions on suspended tool calls, handed to the runtime.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::agents::on_disconnect;
use super::error::Violations;
use super::{ChunkStream, check_id, chunk_stream, run_parent};
use crate::agent::decision;
use crate::agent::request::OnDisconnect;
use crate::agent::runtime::Runtime;
use crate::agent::state::Decision;
use crate::config::Limits;
use crate::json::from_proto_value;
use crate::pb;

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

    /// Records a decision; the continuation runs under the call's span (see [`run_parent`]).
    async fn decide(
        &self,
        run_id: &str,
        call_id: &str,
        decision: Decision,
        mode: OnDisconnect,
        parent: Option<opentelemetry::Context>,
    ) -> Result<Response<ChunkStream>, Status> {
        let stream = self
            .runtime
            .decide(run_id, call_id, decision, mode, parent)
            .await?;
        Ok(Response::new(chunk_stream(stream)))
    }

    /// Both ids are required and bounded.
    fn check_call(&self, run_id: &str, tool_call_id: &str) -> Result<(), Status> {
        let mut v = Violations::default();
        for (field, value) in [("run_id", run_id), ("tool_call_id", tool_call_id)] {
            if value.is_empty() {
                v.add(field, "must not be empty");
            }
            check_id(&mut v, field, value, &self.limits);
        }
        v.into_result()
    }
}

/// An optional filter field; empty counts as absent.
fn nonempty(field: &Option<String>) -> Option<&str> {
    field.as_deref().filter(|s| !s.is_empty())
}

#[tonic::async_trait]
impl pb::approval_service_server::ApprovalService for ApprovalApi {
    type ApproveStream = ChunkStream;
    type DeclineStream = ChunkStream;
    type ResumeStream = ChunkStream;

    async fn list_pending(
        &self,
        request: Request<pb::ListPendingRequest>,
    ) -> Result<Response<pb::ListPendingResponse>, Status> {
        let req = request.into_inner();
        let mut v = Violations::default();
        for (field, value) in [
            ("thread_id", &req.thread_id),
            ("resource_id", &req.resource_id),
            ("run_id", &req.run_id),
        ] {
            if let Some(value) = value {
                check_id(&mut v, field, value, &self.limits);
            }
        }
        v.into_result()?;
        let runs = self
            .runtime
            .pending(
                nonempty(&req.thread_id),
                nonempty(&req.resource_id),
                nonempty(&req.run_id),
            )
            .await?;
        Ok(Response::new(pb::ListPendingResponse { runs }))
    }

    async fn approve(
        &self,
        request: Request<pb::ApproveRequest>,
    ) -> Result<Response<Self::ApproveStream>, Status> {
        let parent = run_parent(request.metadata().as_ref(), "", "")?;
        let req = request.into_inner();
        self.check_call(&req.run_id, &req.tool_call_id)?;
        let mode = on_disconnect(req.on_disconnect());
        self.decide(
            &req.run_id,
            &req.tool_call_id,
            Decision::Approved,
            mode,
            parent,
        )
        .await
    }

    async fn decline(
        &self,
        request: Request<pb::DeclineRequest>,
    ) -> Result<Response<Self::DeclineStream>, Status> {
        let parent = run_parent(request.metadata().as_ref(), "", "")?;
        let req = request.into_inner();
        self.check_call(&req.run_id, &req.tool_call_id)?;
        let mut v = Violations::default();
        if let Some(reason) = &req.reason {
            super::check_text(&mut v, "reason", reason, &self.limits);
        }
        v.into_result()?;
        let mode = on_disconnect(req.on_disconnect());
        self.decide(
            &req.run_id,
            &req.tool_call_id,
            decision::decline(req.reason.as_deref()),
            mode,
            parent,
        )
        .await
    }

    async fn resume(
        &self,
        request: Request<pb::ResumeRequest>,
    ) -> Result<Response<Self::ResumeStream>, Status> {
        let parent = run_parent(request.metadata().as_ref(), "", "")?;
        let req = request.into_inner();
        self.check_call(&req.run_id, &req.tool_call_id)?;
        let mode = on_disconnect(req.on_disconnect());
        let data = req
            .data
            .as_ref()
            .map_or(serde_json::Value::Null, from_proto_value);
        self.decide(
            &req.run_id,
            &req.tool_call_id,
            Decision::Resumed(data),
            mode,
            parent,
        )
        .await
    }
}
