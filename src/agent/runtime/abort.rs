//! Stopping a run from any replica: a run executing here is cancelled directly, one executing
//! elsewhere through the store's control channel every replica listens on, and a suspended run
//! (no executor) is ended in the store and in its log.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::{CONTROL_CHANNEL, Runtime, decode_record};
use crate::agent::delegation::SubRunEnd;
use crate::agent::error::RunError;
use crate::agent::event::Event;
use crate::agent::message::now_ms;
use crate::agent::record::{RunRecord, RunStatus};
use crate::agent::result::{RunEnd, RunResult};
use crate::store::{Cas, Versioned};

impl Runtime {
    /// Stops a run from any replica; false when it had already ended.
    pub async fn abort(self: &Arc<Self>, run_id: &str, reason: &str) -> Result<bool, RunError> {
        let why = if reason.is_empty() {
            "Aborted by request"
        } else {
            reason
        };
        let Some(doc) = self.deps.store.get_run(run_id).await? else {
            return Err(RunError::NotFound(format!(
                "run {run_id:?} is unknown or expired"
            )));
        };
        let record = decode_record(&doc)?;
        match record.status {
            RunStatus::Finished => Ok(false),
            RunStatus::Running => {
                if !self.cancel_local(run_id, why) {
                    let message = json!({"run_id": run_id, "reason": why}).to_string();
                    self.deps
                        .store
                        .publish_control(CONTROL_CHANNEL, Bytes::from(message))
                        .await?;
                    // If its replica is gone, no one hears that: the replica taking it over
                    // reads the reason from the record and ends it instead.
                    self.record_abort(doc, record, why).await?;
                }
                Ok(true)
            }
            RunStatus::Suspended => self.abort_suspended(doc, record, why, true).await,
        }
    }

    /// Writes `why` into a running run's record (compare-and-set, again on a conflict while
    /// it still runs).
    async fn record_abort(
        &self,
        mut doc: Versioned,
        mut record: RunRecord,
        why: &str,
    ) -> Result<(), RunError> {
        loop {
            if record.status != RunStatus::Running || record.abort_reason.is_some() {
                return Ok(());
            }
            record.abort_reason = Some(why.to_owned());
            match self
                .write_record(&record.run_id, doc.version, &record)
                .await?
            {
                Cas::Written(_) => return Ok(()),
                Cas::Conflict(Some(current)) => {
                    record = decode_record(&current)?;
                    doc = current;
                }
                Cas::Conflict(None) => return Ok(()),
            }
        }
    }

    /// Ends a run if it is still suspended (its waiting call was answered elsewhere); false
    /// when it no longer waits.
    pub(super) async fn end_suspended(
        self: &Arc<Self>,
        run_id: &str,
        why: &str,
    ) -> Result<bool, RunError> {
        self.end_suspended_as(run_id, why, true).await
    }

    /// [`Runtime::end_suspended`]; a sub-agent's run tells its waiting supervisor when
    /// `tell_parent`.
    async fn end_suspended_as(
        self: &Arc<Self>,
        run_id: &str,
        why: &str,
        tell_parent: bool,
    ) -> Result<bool, RunError> {
        let Some(doc) = self.deps.store.get_run(run_id).await? else {
            return Ok(false);
        };
        let record = decode_record(&doc)?;
        if record.status != RunStatus::Suspended {
            return Ok(false);
        }
        Box::pin(self.abort_suspended(doc, record, why, tell_parent)).await
    }

    /// A suspended run has no executor to stop: end it in the store and in its log, with the
    /// sub-agents' runs it waits for; a sub-agent's run lets its supervisor continue (the
    /// delegation failed) when `tell_parent`.
    async fn abort_suspended(
        self: &Arc<Self>,
        doc: Versioned,
        mut record: RunRecord,
        why: &str,
        tell_parent: bool,
    ) -> Result<bool, RunError> {
        let first_sequence = record.last_sequence;
        let state = record.state.take();
        record.abort_suspended(now_ms());
        match self
            .write_record(&record.run_id, doc.version, &record)
            .await?
        {
            Cas::Written(_) => {}
            // Decided or aborted meanwhile: whatever happened, it is no longer suspended here.
            Cas::Conflict(_) => return Ok(false),
        }
        self.index_pending_as(&record, state.as_deref(), false)
            .await;
        let result = RunResult::of_stored(&record.run_id, state.as_deref(), RunEnd::Aborted);
        let events = vec![
            Event::Abort(why.to_owned()),
            Event::Finish(Box::new(result)),
        ];
        self.append_to_log(&record.run_id, first_sequence, events)
            .await;
        let waits_for = state
            .as_ref()
            .and_then(|s| s.open_step.as_ref())
            .into_iter()
            .flat_map(|open| &open.pending)
            .filter(|p| p.decision.is_none())
            .filter_map(|p| p.sub_run_id.clone());
        for sub_run in waits_for {
            if let Err(e) = self.end_suspended_as(&sub_run, why, false).await {
                warn!(run_id = %sub_run, error = %e, "could not end a sub-agent's waiting run");
            }
        }
        if tell_parent && let Some(link) = state.as_ref().and_then(|s| s.request.parent.clone()) {
            let end = SubRunEnd::failed(
                &record.run_id,
                format!("the sub-agent's run was aborted: {why}"),
            );
            self.hand_off(&link, end, None).await;
        }
        Ok(true)
    }

    /// Listens for aborts sent by other replicas until `shutdown`; reconnects on errors.
    pub async fn listen_for_aborts(self: Arc<Self>, shutdown: CancellationToken) {
        while !shutdown.is_cancelled() {
            match self.deps.store.subscribe_control(CONTROL_CHANNEL).await {
                Ok(mut messages) => loop {
                    let next = tokio::select! {
                        () = shutdown.cancelled() => return,
                        next = messages.next() => next,
                    };
                    match next {
                        Some(Ok(bytes)) => {
                            let message: Value =
                                serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                            if let Some(run_id) = message["run_id"].as_str() {
                                let why =
                                    message["reason"].as_str().unwrap_or("Aborted by request");
                                self.cancel_local(run_id, why);
                            }
                        }
                        Some(Err(e)) => {
                            warn!(error = %e, "abort channel failed; resubscribing");
                            break;
                        }
                        None => break,
                    }
                },
                Err(e) => warn!(error = %e, "cannot subscribe to the abort channel; retrying"),
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    }

    /// Stops a local run; false when it does not run here.
    pub(super) fn cancel_local(&self, run_id: &str, why: &str) -> bool {
        self.live.stop(run_id, why)
    }
}
