//! Sub-agents' runs, started on the supervisor's replica: a run of its own (record, log,
//! lease, live entry for Abort), its span a child of the delegation call's, stopped with its
//! supervisor. A sub-run that suspends for decisions suspends its supervisor on the
//! delegation call; when the sub-run ends after them (on any replica), its end is handed to
//! the supervisor, which continues there.

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::{ChunkStream, Entry, Launch, Runtime, decode_record, run_span};
use crate::agent::delegation::SubRunEnd;
use crate::agent::emit::ClientSender;
use crate::agent::error::RunError;
use crate::agent::message::{new_id, now_ms};
use crate::agent::record::{RunRecord, RunStatus};
use crate::agent::request::{OnDisconnect, ParentLink, RunRequest};
use crate::agent::run::Delegator;
use crate::agent::state::Decision;
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
        request.apply_defaults(&agent.config);
        let permit = self.permit()?;
        let run_id = new_id();
        // Made inside the delegation call's span, its child (in the caller's trace).
        let span = run_span(&agent, &request, &run_id, None, &[]);
        let trace = telemetry::run_trace_ids(&span, None);
        // One copy of the request: the record (until the first checkpoint) and the state share it.
        let request = Arc::new(request);
        let record = RunRecord::start(
            &run_id,
            &request,
            String::new(),
            (&self.replica, super::millis(self.limits.lease)),
            trace.clone(),
            now_ms(),
        );
        let (state, tasks, written) = self.start_record(&agent, request, &record).await?;
        let version = match written {
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

impl Runtime {
    /// Hands a sub-agent run's `end` to its supervisor, which waits on the call `link` names:
    /// the supervisor continues here, streaming to `client` (the sub-run's caller) when there
    /// is one, else for its log only.
    pub(super) async fn hand_off(
        self: &Arc<Self>,
        link: &ParentLink,
        mut end: SubRunEnd,
        client: Option<ClientSender>,
    ) {
        end.sub_memory = (link.sub_thread_id.clone(), link.sub_resource_id.clone());
        let Ok(value) = serde_json::to_value(&end) else {
            return;
        };
        self.until_suspended(&link.run_id).await;
        let continued = Box::pin(self.decide(
            &link.run_id,
            &link.tool_call_id,
            Decision::Delegated(value),
            OnDisconnect::Continue,
            None,
            None,
        ))
        .await;
        let mut stream = match continued {
            Ok(stream) => stream,
            Err(e) => {
                // Its supervisor no longer waits (aborted, or already continued).
                info!(run_id = %link.run_id, sub_run_id = %end.run_id, error = %e, "a sub-agent's run ended; its supervisor does not wait for it");
                return;
            }
        };
        let Some(mut client) = client else {
            return;
        };
        while let Some(item) = stream.next().await {
            if client.send(item).await.is_err() {
                return;
            }
        }
    }
}

/// How long a sub-run's end waits for its supervisor to finish suspending (a decision can
/// reach the sub-run before the supervisor's record says it waits).
const SUPERVISOR_SETTLES: Duration = Duration::from_secs(60);

impl Runtime {
    /// Waits (bounded) while the run `run_id` is still running.
    async fn until_suspended(&self, run_id: &str) {
        let deadline = tokio::time::Instant::now() + SUPERVISOR_SETTLES;
        while tokio::time::Instant::now() < deadline {
            let running = match self.deps.store.get_run(run_id).await {
                Ok(Some(doc)) => decode_record(&doc).is_ok_and(|r| r.status == RunStatus::Running),
                _ => false,
            };
            if !running {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}
