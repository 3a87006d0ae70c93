//! Code generated from `proto/agentd/v1` by build.rs (into OUT_DIR, never committed).

#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("agentd.v1");

/// Encoded file descriptor set of the agentd protos, served by reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("agentd_descriptor");

/// The agentd protos, the google.rpc error model and grpc.health.v1 as a reflection pool (the
/// proto JSON mapping of webhooks and of the HTTP gateway); decoded once.
pub fn descriptor_pool() -> Result<&'static prost_reflect::DescriptorPool, String> {
    static POOL: std::sync::LazyLock<Result<prost_reflect::DescriptorPool, String>> =
        std::sync::LazyLock::new(|| {
            let mut pool = prost_reflect::DescriptorPool::decode(FILE_DESCRIPTOR_SET)
                .map_err(|e| e.to_string())?;
            pool.decode_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
                .map_err(|e| e.to_string())?;
            Ok(pool)
        });
    POOL.as_ref().map_err(Clone::clone)
}

impl TaskStatus {
    /// The task-list rules' status this stands for; `None` for UNSPECIFIED.
    pub fn to_task_status(self) -> Option<crate::tasks::TaskStatus> {
        match self {
            Self::Pending => Some(crate::tasks::TaskStatus::Pending),
            Self::InProgress => Some(crate::tasks::TaskStatus::InProgress),
            Self::Completed => Some(crate::tasks::TaskStatus::Completed),
            Self::Unspecified => None,
        }
    }
}

impl From<crate::tasks::TaskStatus> for TaskStatus {
    fn from(status: crate::tasks::TaskStatus) -> Self {
        match status {
            crate::tasks::TaskStatus::Pending => Self::Pending,
            crate::tasks::TaskStatus::InProgress => Self::InProgress,
            crate::tasks::TaskStatus::Completed => Self::Completed,
        }
    }
}

/// The servers of the chunk-streaming services (AgentService, ApprovalService) as `build.rs`
/// generates them a second time: their streams send [`crate::api::encoded::EncodedChunk`]s.
pub mod encoded {
    tonic::include_proto!("encoded/agentd.v1");
}
