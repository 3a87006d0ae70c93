//! `agentd.v1.ApprovalService`: answers UNIMPLEMENTED until suspension and resumption land.

use futures::stream::BoxStream;
use tonic::{Request, Response, Status};

use crate::pb;

/// The ApprovalService implementation.
#[derive(Default)]
pub struct ApprovalApi;

type ChunkStream = BoxStream<'static, Result<pb::Chunk, Status>>;

fn not_yet(method: &str) -> Status {
    Status::unimplemented(format!("ApprovalService.{method} is not available yet"))
}

#[tonic::async_trait]
impl pb::approval_service_server::ApprovalService for ApprovalApi {
    type ApproveStream = ChunkStream;
    type DeclineStream = ChunkStream;
    type ResumeStream = ChunkStream;

    async fn list_pending(
        &self,
        _request: Request<pb::ListPendingRequest>,
    ) -> Result<Response<pb::ListPendingResponse>, Status> {
        Err(not_yet("ListPending"))
    }

    async fn approve(
        &self,
        _request: Request<pb::ApproveRequest>,
    ) -> Result<Response<Self::ApproveStream>, Status> {
        Err(not_yet("Approve"))
    }

    async fn decline(
        &self,
        _request: Request<pb::DeclineRequest>,
    ) -> Result<Response<Self::DeclineStream>, Status> {
        Err(not_yet("Decline"))
    }

    async fn resume(
        &self,
        _request: Request<pb::ResumeRequest>,
    ) -> Result<Response<Self::ResumeStream>, Status> {
        Err(not_yet("Resume"))
    }
}
