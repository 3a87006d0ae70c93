//! `agentd.v1.ApprovalService`: decisions on suspended tool calls, handed to the runtime.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use tracing::Instrument;

use super::agents::on_disconnect;
use super::error::Violations;
use super::{ChunkStream, check_id, chunk_stream, rpc_span};
use crate::agent::decision;
use crate::agent::request::OnDisconnect;
use crate::agent::runtime::Runtime;
use crate::agent::state::Decision;
use crate::config::Limits;
use crate::json::from_proto_value;
use crate::pb;
use crate::telemetry;

/// The service name on spans.
const SERVICE: &str = "agentd.v1.ApprovalService";

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

    /// Records a decision within the call's span; the continuation joins that trace.
    async fn decide(
        &self,
        run_id: &str,
        call_id: &str,
        decision: Decision,
        mode: OnDisconnect,
        span: tracing::Span,
    ) -> Result<Response<ChunkStream>, Status> {
        let parent = Some(telemetry::otel_context(&span));
        let stream = self
            .runtime
            .decide(run_id, call_id, decision, mode, parent)
            .instrument(span)
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
        let span = rpc_span(&request, SERVICE, "ListPending")?;
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
            .instrument(span)
            .await?;
        Ok(Response::new(pb::ListPendingResponse { runs }))
    }

    async fn approve(
        &self,
        request: Request<pb::ApproveRequest>,
    ) -> Result<Response<Self::ApproveStream>, Status> {
        let span = rpc_span(&request, SERVICE, "Approve")?;
        let req = request.into_inner();
        self.check_call(&req.run_id, &req.tool_call_id)?;
        let mode = on_disconnect(req.on_disconnect());
        self.decide(
            &req.run_id,
            &req.tool_call_id,
            Decision::Approved,
            mode,
            span,
        )
        .await
    }

    async fn decline(
        &self,
        request: Request<pb::DeclineRequest>,
    ) -> Result<Response<Self::DeclineStream>, Status> {
        let span = rpc_span(&request, SERVICE, "Decline")?;
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
            span,
        )
        .await
    }

    async fn resume(
        &self,
        request: Request<pb::ResumeRequest>,
    ) -> Result<Response<Self::ResumeStream>, Status> {
        let span = rpc_span(&request, SERVICE, "Resume")?;
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
            span,
        )
        .await
    }
}
