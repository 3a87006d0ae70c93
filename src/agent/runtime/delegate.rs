//! Sub-agents' runs, started on the supervisor's replica: a run of its own (record, log,
//! lease, live entry for Abort), its span a child of the delegation call's, stopped with its
//! supervisor.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{ChunkStream, Entry, Launch, Runtime, run_span};
use crate::agent::error::RunError;
use crate::agent::message::{new_id, now_ms};
use crate::agent::record::RunRecord;
use crate::agent::request::RunRequest;
use crate::agent::run::Delegator;
use crate::store::Cas;
use crate::telemetry;

/// The runtime as a supervisor's run sees it.
pub(super) struct ChildRuns {
    /// The runtime the supervisor runs on.
    pub runtime: Arc<Runtime>,
}

#[async_trait::async_trait]
impl Delegator for ChildRuns {
    async fn start_child(
        &self,
        request: RunRequest,
        cancel: CancellationToken,
    ) -> Result<ChunkStream, RunError> {
        self.runtime.start_child(request, cancel).await
    }
}

impl Runtime {
    /// Starts a sub-agent's run of `request` here; it streams to the returned stream.
    async fn start_child(
        self: &Arc<Self>,
        mut request: RunRequest,
        cancel: CancellationToken,
    ) -> Result<ChunkStream, RunError> {
        let agent = self.agents.get(&request.agent_id).ok_or_else(|| {
            RunError::NotFound(format!("agent {:?} is not configured", request.agent_id))
        })?;
        request.apply_defaults(&agent.config.default_options);
        if request.is_task_complete.is_none() {
            request
                .is_task_complete
                .clone_from(&agent.config.is_task_complete);
        }
        let permit = self.permits.clone().try_acquire_owned().map_err(|_| {
            RunError::Exhausted("too many runs in progress on this server; retry later".into())
        })?;
        let run_id = new_id();
        // Under the delegation call's span (the current one).
        let parent = Some(telemetry::otel_context(&tracing::Span::current()));
        let span = run_span(&agent, &request, &run_id, parent.as_ref(), &[]);
        let trace = telemetry::run_trace_ids(&span, parent.as_ref());
        let record = RunRecord::start(
            &run_id,
            &request,
            String::new(),
            (&self.replica, super::millis(self.limits.lease)),
            trace.clone(),
            now_ms(),
        );
        let (state, tasks) = self.fresh_state(&agent, request).await?;
        let version = match self.write_record(&run_id, 0, &record).await? {
            Cas::Written(v) => v,
            Cas::Conflict(_) => {
                return Err(RunError::AlreadyExists(format!(
                    "run_id {run_id:?} is already used"
                )));
            }
        };
        Ok(self.spawn_with(
            Launch {
                agent,
                state,
                tasks,
                record,
                version,
                permit,
                span,
                trace,
                entry: Entry::Start,
                hooks: None,
            },
            cancel,
        ))
    }
}
