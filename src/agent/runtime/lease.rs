//! Leases and takeover. The replica executing a run holds a lease in the run's record, renewed
//! every third of its length; before a step's tool calls run, the record takes a checkpoint
//! (the state with that step open). When a lease ends unrenewed (the replica was killed or cut
//! off), any replica takes the run over: from its last checkpoint (the calls of that step run
//! again, under the same tool call ids), from its request when it had none yet (the step whose
//! model stream was cut is run again), or, when it cannot be continued, by ending it with an
//! `error` finish of category `REPLICA`. An Abort recorded meanwhile ends it instead. The
//! taken-over run's chunks continue its log's sequence numbers.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, warn};

use super::{Entry, Launch, Runtime, continuation_links, decode_record, millis, run_span};
use crate::agent::error::{RunError, RunFailure};
use crate::agent::event::Event;
use crate::agent::message::now_ms;
use crate::agent::record::{RunRecord, RunStatus};
use crate::agent::result::{RunEnd, RunResult};
use crate::agent::run::Checkpoint;
use crate::agent::state::RunState;
use crate::store::{Cas, MessageAppend, StoreError};
use crate::telemetry;

/// Most runs one look takes over.
const TAKEOVER_BATCH: usize = 32;

/// First wait before writing a run's end again when the store failed; doubled up to
/// [`MAX_END_RETRY`].
const FIRST_END_RETRY: Duration = Duration::from_millis(100);
/// Longest wait between attempts to write a run's end.
const MAX_END_RETRY: Duration = Duration::from_secs(2);

/// The record of a run this replica executes, and its store version: renewals, checkpoints
/// and the end write take turns through it.
pub(super) struct RecordHandle(tokio::sync::Mutex<(RunRecord, u64)>);

/// The outcome of writing this replica's own record.
pub(super) enum Own {
    /// Written.
    Written,
    /// The run's end is written already: a renewal that comes after it has nothing to do.
    Ended,
    /// Another replica owns the run now (it took it over), or the record is gone.
    Lost,
    /// The store failed; nothing was written.
    Failed(StoreError),
}

impl RecordHandle {
    /// A handle on `record`, stored at `version`.
    pub(super) fn new(record: RunRecord, version: u64) -> Arc<Self> {
        Arc::new(Self(tokio::sync::Mutex::new((record, version))))
    }

    /// The record as last written.
    pub(super) async fn record(&self) -> RunRecord {
        self.0.lock().await.0.clone()
    }
}

impl Runtime {
    /// Writes this replica's record of a run after `change`. A conflict with a write that kept
    /// this replica the owner (an Abort recording its reason) is absorbed: the change is made
    /// again on the newer record.
    pub(super) async fn write_own(
        &self,
        handle: &RecordHandle,
        change: impl Fn(&mut RunRecord),
    ) -> Own {
        self.write_own_saving(handle, change, &mut None).await
    }

    /// [`Runtime::write_own`] with `messages` appended to their thread in the same store call
    /// ([`crate::store::Store::end_run`]); `messages` is emptied once they are appended.
    async fn write_own_saving(
        &self,
        handle: &RecordHandle,
        change: impl Fn(&mut RunRecord),
        messages: &mut Option<MessageAppend>,
    ) -> Own {
        let mut guard = handle.0.lock().await;
        loop {
            let (record, version) = &mut *guard;
            // This replica writes its record only while it runs the run.
            if record.status != RunStatus::Running {
                return Own::Ended;
            }
            let mut next = record.clone();
            change(&mut next);
            let written = self.put_record(*version, &next, messages).await;
            match written {
                Ok(Cas::Written(v)) => {
                    *record = next;
                    *version = v;
                    return Own::Written;
                }
                Ok(Cas::Conflict(Some(current))) => match decode_record(&current) {
                    Ok(stored)
                        if stored.owner == self.replica && stored.status == RunStatus::Running =>
                    {
                        *record = RunRecord {
                            // The checkpoint and request stay this replica's own.
                            state: record.state.take(),
                            request: record.request.take(),
                            ..stored
                        };
                        *version = current.version;
                    }
                    _ => return Own::Lost,
                },
                Ok(Cas::Conflict(None)) => return Own::Lost,
                Err(e) => return Own::Failed(e),
            }
        }
    }

    /// Writes `next` over `version`, with `messages` in the same store call while some are
    /// left to append.
    async fn put_record(
        &self,
        version: u64,
        next: &RunRecord,
        messages: &mut Option<MessageAppend>,
    ) -> Result<Cas, StoreError> {
        let Some(append) = messages.as_ref() else {
            return self.write_record(&next.run_id, version, next).await;
        };
        let write = self.run_write(version, next)?;
        let ended = self.deps.store.end_run(append, write).await?;
        if ended.first_message.is_some() {
            *messages = None;
        }
        ended.record
    }

    /// Writes a run's end, retrying while the store fails (a run must not stay "running"
    /// because its last write met an outage); stops when another replica owns the run.
    pub(super) async fn write_end(&self, handle: &RecordHandle, change: impl Fn(&mut RunRecord)) {
        // Without messages there is nothing that can fail without a retry.
        let _ = self.write_end_saving(handle, change, None).await;
    }

    /// [`Runtime::write_end`] with the run's last messages appended in the same store call.
    /// `Err`: the store failed before they were appended, and nothing was written (the run
    /// fails, as when saving them alone fails). Once they are appended, the record's write is
    /// retried as [`Runtime::write_end`]'s. When another replica owns the run, neither is
    /// written: that replica continues it and saves its messages, and a deleted thread stays
    /// deleted.
    pub(super) async fn write_end_saving(
        &self,
        handle: &RecordHandle,
        change: impl Fn(&mut RunRecord),
        messages: Option<MessageAppend>,
    ) -> Result<(), StoreError> {
        let mut messages = messages;
        let mut wait = FIRST_END_RETRY;
        loop {
            match self.write_own_saving(handle, &change, &mut messages).await {
                Own::Written | Own::Ended => return Ok(()),
                Own::Lost => {
                    warn!("the run's record belongs to another replica now; its end is theirs");
                    return Ok(());
                }
                Own::Failed(e) if messages.is_some() => return Err(e),
                Own::Failed(e) => {
                    telemetry::metrics().store_error("run_record");
                    warn!(error = %e, retry_in = ?wait, "could not record the run's end; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(MAX_END_RETRY);
                }
            }
        }
    }

    /// Looks for runs whose lease ended every `takeover_interval` until `shutdown`, and takes
    /// them over.
    pub async fn listen_for_takeovers(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(self.limits.takeover_interval) => {}
            }
            let due = match self
                .deps
                .store
                .expired_leases(now_ms(), TAKEOVER_BATCH)
                .await
            {
                Ok(due) => due,
                Err(e) => {
                    warn!(error = %e, "could not look for runs to take over");
                    continue;
                }
            };
            for run_id in due {
                if shutdown.is_cancelled() {
                    return;
                }
                if let Err(e) = self.take_over(&run_id).await {
                    warn!(run_id, error = %e, "taking over a run failed");
                }
            }
        }
    }

    /// Takes over `run_id` if it still runs under a lease that ended: claims it (one replica
    /// wins), then continues or ends it.
    async fn take_over(self: &Arc<Self>, run_id: &str) -> Result<(), RunError> {
        let Some(doc) = self.deps.store.get_run(run_id).await? else {
            return Ok(());
        };
        let mut record = decode_record(&doc)?;
        let now = now_ms();
        let expired = record.lease_until_ms.is_none_or(|until| until <= now);
        if record.status != RunStatus::Running || !expired || self.is_live(run_id) {
            return Ok(());
        }
        // A full replica leaves the run to another one.
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            return Ok(());
        };
        let lost = std::mem::replace(&mut record.owner, self.replica.clone());
        record.lease_until_ms = Some(now.saturating_add(millis(self.limits.lease)));
        record.updated_at_ms = now;
        let version = match self.write_record(run_id, doc.version, &record).await? {
            Cas::Written(v) => v,
            Cas::Conflict(_) => return Ok(()),
        };
        // The lost replica may have logged chunks after its last checkpoint: continue after
        // them, so every sequence number stays used once.
        let logged = self
            .deps
            .store
            .read_chunks(run_id, record.last_sequence)
            .await?;
        record.last_sequence = logged.last().map_or(record.last_sequence, |e| e.0);
        info!(run_id, lost_owner = %lost, after = record.last_sequence, "taking over a run whose lease ended");
        if let Some(why) = record.abort_reason.clone() {
            self.end_taken_over(record, version, RunEnd::Aborted, Event::Abort(why))
                .await;
            return Ok(());
        }
        match self.takeover_launch(record.clone(), version, permit).await {
            Ok(launch) => {
                self.spawn_detached(launch);
                Ok(())
            }
            Err(why) => {
                let failure = RunFailure::OwnerLost(why);
                self.end_taken_over(record, version, RunEnd::Failed, Event::Error(failure))
                    .await;
                Ok(())
            }
        }
    }

    /// What a taken-over run continues from: its checkpoint, else its request; the reason it
    /// cannot be continued otherwise.
    async fn takeover_launch(
        self: &Arc<Self>,
        mut record: RunRecord,
        version: u64,
        permit: OwnedSemaphorePermit,
    ) -> Result<Launch, String> {
        let Some(agent) = self.agents.get(&record.agent_id) else {
            return Err(format!(
                "its agent {:?} is not configured on this server",
                record.agent_id
            ));
        };
        let (state, tasks, entry) = if let Some(state) = record.state.clone() {
            let (_, tasks) = self
                .continuation_inputs(&record)
                .await
                .map_err(|e| e.to_string())?;
            (*state, tasks, Entry::Checkpoint)
        } else if let Some(request) = record.request.clone() {
            let (state, tasks) = self
                .fresh_state(&agent, request)
                .await
                .map_err(|e| e.to_string())?;
            (state, tasks, Entry::Start)
        } else {
            return Err("nothing durable to continue from".into());
        };
        let links = continuation_links(&record);
        let span = run_span(&agent, &state.request, &record.run_id, None, &links);
        let trace = telemetry::run_trace_ids(&span, None);
        record.trace.get_or_insert_with(|| trace.clone());
        Ok(Launch {
            agent,
            state,
            tasks,
            record,
            version,
            permit,
            span,
            trace,
            entry,
            hooks: None,
        })
    }

    /// Ends a taken-over run without executing it: the event saying why, then `finish`.
    async fn end_taken_over(&self, record: RunRecord, version: u64, end: RunEnd, why: Event) {
        let run_id = record.run_id.clone();
        let after = record.last_sequence;
        let mut result = RunResult::of_stored(&run_id, record.state.as_deref(), end);
        if let Event::Error(failure) = &why {
            result.error = Some(failure.clone());
        }
        let handle = RecordHandle::new(record, version);
        self.write_end(&handle, |r| {
            r.end(end, None, after + 2, now_ms(), 0);
        })
        .await;
        self.append_to_log(&run_id, after, vec![why, Event::Finish(Box::new(result))])
            .await;
    }

    /// Executes a launch with no client attached (a taken-over run: its clients follow it with
    /// Observe).
    fn spawn_detached(self: &Arc<Self>, launch: Launch) {
        let cancel = CancellationToken::new();
        let registered = self.live.register(&launch.record.run_id, cancel.clone());
        let span = launch.span.clone();
        tokio::spawn(
            self.clone()
                .execute(Box::new(launch), None, cancel, registered)
                .instrument(span),
        );
    }

    /// Whether the run executes on this replica.
    fn is_live(&self, run_id: &str) -> bool {
        self.live.contains(run_id)
    }
}

/// Writes a run's checkpoint into its record before a step's tool calls run.
pub(super) struct RecordCheckpoint {
    pub(super) runtime: Arc<Runtime>,
    pub(super) handle: Arc<RecordHandle>,
}

#[async_trait]
impl Checkpoint for RecordCheckpoint {
    async fn save(&self, state: &RunState, sequence: u64) {
        let lease = millis(self.runtime.limits.lease);
        let now = now_ms();
        let written = self
            .runtime
            .write_own(&self.handle, |r| {
                r.state = Some(Box::new(state.clone()));
                r.last_sequence = sequence;
                r.lease_until_ms = Some(now.saturating_add(lease));
                r.updated_at_ms = now;
            })
            .await;
        match written {
            Own::Written | Own::Ended => {}
            // The renewal finds out and stops the run; a takeover continues from an earlier
            // point.
            Own::Lost => warn!("the run was taken over before its checkpoint"),
            Own::Failed(e) => {
                warn!(error = %e, "could not write the run's checkpoint; a takeover would start from the one before")
            }
        }
    }

    async fn end(
        &self,
        messages: Option<MessageAppend>,
        end: RunEnd,
        suspended: Option<&RunState>,
        last_sequence: u64,
    ) -> Result<(), StoreError> {
        let approval_ttl = millis(self.runtime.limits.approval_ttl);
        let record_end = |r: &mut RunRecord| {
            r.end(
                end,
                suspended.cloned(),
                last_sequence,
                now_ms(),
                approval_ttl,
            );
        };
        self.runtime
            .write_end_saving(&self.handle, record_end, messages)
            .await
    }
}
