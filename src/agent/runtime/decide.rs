//! Decisions on suspended runs, from any replica: Approve / Decline / Resume recorded by
//! compare-and-set on the run record (exactly one of racing deciders wins), the continuation
//! started on the replica that made the last decision, the pending index behind ListPending,
//! and the waiting client tools a new run may answer (auto-resume).

use std::sync::Arc;

use tracing::warn;

use super::{ChunkStream, Entry, Launch, Runtime, continuation_links, decode_record, run_span};
use crate::agent::AgentDef;
use crate::agent::decision;
use crate::agent::error::RunError;
use crate::agent::event::Event;
use crate::agent::hooks::ClientHooks;
use crate::agent::message::now_ms;
use crate::agent::record::{Decided, RunRecord};
use crate::agent::request::{OnDisconnect, RunRequest};
use crate::agent::result::{RunEnd, RunResult};
use crate::agent::state::{Decision, PendingKind, SuspendedTool};
use crate::agent::wire;
use crate::memory::threads::pending_index;
use crate::pb;
use crate::store::{Cas, ThreadKey};
use crate::tasklist::TaskList;
use crate::telemetry;
use crate::tenant::Identity;

impl Runtime {
    /// With `auto_resume_suspended_tools`: the thread's client-tool calls still waiting in
    /// earlier runs (never approvals), which the new run's model may answer.
    pub(super) async fn waiting_client_tools(
        &self,
        request: &RunRequest,
    ) -> Result<Vec<SuspendedTool>, RunError> {
        let Some(memory) = request
            .memory
            .as_ref()
            .filter(|_| request.auto_resume_suspended_tools)
        else {
            return Ok(Vec::new());
        };
        let mut waiting = Vec::new();
        for record in self
            .suspended_records(Some(&memory.thread_id), Some(&memory.resource_id), None)
            .await?
        {
            let Some(open) = record.state.as_ref().and_then(|s| s.open_step.as_ref()) else {
                continue;
            };
            waiting.extend(
                open.pending
                    .iter()
                    .filter(|p| p.kind == PendingKind::ClientTool && p.decision.is_none())
                    .map(|p| SuspendedTool {
                        run_id: record.run_id.clone(),
                        call: p.call.clone(),
                        resume_schema: decision::resume_schema(p),
                    }),
            );
        }
        Ok(waiting)
    }

    /// Records a decision on a suspended call. When it was the last one, the run continues here
    /// and the stream carries the rest of it; otherwise the stream reports what still waits.
    pub async fn decide(
        self: &Arc<Self>,
        run_id: &str,
        call_id: &str,
        decision: Decision,
        on_disconnect: OnDisconnect,
        parent: Option<opentelemetry::Context>,
        hooks: Option<Arc<ClientHooks>>,
    ) -> Result<ChunkStream, RunError> {
        loop {
            let Some(doc) = self.deps.store.get_run(run_id).await? else {
                return Err(RunError::NotFound(format!(
                    "run {run_id:?} is unknown or expired"
                )));
            };
            let mut record = decode_record(&doc)?;
            let first_sequence = record.last_sequence;
            let decided = record.decide(call_id, decision.clone(), &self.replica, now_ms())?;
            if let Some(state) = record.state.as_mut() {
                Arc::make_mut(&mut state.request).on_disconnect = on_disconnect;
            }
            // Everything the continuation needs is read before the decision is written, so a
            // failure here leaves the run suspended rather than stuck "running".
            let resumed = match decided {
                Decided::Continue => {
                    let permit = self.permit()?;
                    Some((permit, self.continuation_inputs(&record).await?))
                }
                Decided::Waiting => None,
            };
            let version = match self.write_record(run_id, doc.version, &record).await? {
                Cas::Written(v) => v,
                Cas::Conflict(_) => continue,
            };
            let Some((permit, (agent, tasks))) = resumed else {
                return self.report_waiting(&record, first_sequence).await;
            };
            self.index_pending(&record, false).await;
            // The record keeps the state: it is the continuation's checkpoint until its next.
            let Some(state) = record.state.clone() else {
                return Err(RunError::FailedPrecondition(format!(
                    "run {run_id:?} has no state to continue from"
                )));
            };
            // The continuation joins the decider's trace and links to the original run.
            let links = continuation_links(&record);
            let span = run_span(&agent, &state.request, run_id, parent.as_ref(), &links);
            let trace = telemetry::run_trace_ids(&span, parent.as_ref());
            return Ok(self.spawn(Launch {
                agent,
                state: *state,
                tasks,
                record,
                version,
                permit,
                span,
                trace,
                entry: Entry::Resume,
                hooks,
            }));
        }
    }

    /// Others still wait: tells this caller (and the log) what the run waits for now, in the
    /// one chunk the decision reserved after `first_sequence`.
    async fn report_waiting(
        &self,
        record: &RunRecord,
        first_sequence: u64,
    ) -> Result<ChunkStream, RunError> {
        let run_id = record.run_id.as_str();
        let result = RunResult::of_stored(run_id, record.state.as_deref(), RunEnd::Suspended);
        self.append_to_log(
            run_id,
            first_sequence,
            vec![Event::Finish(Box::new(result))],
        )
        .await;
        self.observe(run_id, first_sequence).await
    }

    /// The agent and current task list a suspended run continues with.
    pub(super) async fn continuation_inputs(
        &self,
        record: &RunRecord,
    ) -> Result<(Arc<AgentDef>, TaskList), RunError> {
        let agent = self.agents.get(&record.agent_id).ok_or_else(|| {
            RunError::FailedPrecondition(format!(
                "agent {:?} of run {:?} is no longer configured",
                record.agent_id, record.run_id
            ))
        })?;
        let memory = record
            .state
            .as_ref()
            .and_then(|s| s.request.memory.as_ref());
        let tasks = match memory {
            Some(m) => {
                self.deps
                    .lists
                    .load(&ThreadKey {
                        thread_id: m.thread_id.clone(),
                        resource_id: m.resource_id.clone(),
                    })
                    .await?
            }
            None => TaskList::default(),
        };
        Ok((agent, tasks))
    }

    /// Lists suspended runs matching the filter that `caller` may reach (a tenant: the runs
    /// it started), oldest first.
    pub async fn pending(
        &self,
        thread_id: Option<&str>,
        resource_id: Option<&str>,
        run_id: Option<&str>,
        caller: &Identity,
    ) -> Result<Vec<pb::PendingRun>, RunError> {
        let records = self
            .suspended_records(thread_id, resource_id, run_id)
            .await?;
        Ok(records
            .iter()
            .filter(|r| caller.reaches_run(&r.tenant))
            .filter_map(wire::pending_run)
            .collect())
    }

    /// The records of the suspended runs matching the filter whose decisions have not
    /// expired, oldest first.
    async fn suspended_records(
        &self,
        thread_id: Option<&str>,
        resource_id: Option<&str>,
        run_id: Option<&str>,
    ) -> Result<Vec<RunRecord>, RunError> {
        let candidates: Vec<String> = match (run_id, thread_id, resource_id) {
            (Some(run), _, _) => vec![run.to_owned()],
            (None, Some(thread), _) => {
                self.deps
                    .store
                    .index_members(&pending_index("thread", thread))
                    .await?
            }
            (None, None, Some(resource)) => {
                self.deps
                    .store
                    .index_members(&pending_index("resource", resource))
                    .await?
            }
            (None, None, None) => {
                return Err(RunError::invalid(
                    "thread_id",
                    "one of thread_id, resource_id or run_id is required",
                ));
            }
        };
        let now = now_ms();
        let mut runs = Vec::new();
        for candidate in candidates {
            let Some(doc) = self.deps.store.get_run(&candidate).await? else {
                continue;
            };
            let record = decode_record(&doc)?;
            let (threads, resources) = listed_under(&record, record.state.as_deref());
            let matches = record.awaits_decision(now)
                && thread_id.is_none_or(|t| threads.contains(&t))
                && resource_id.is_none_or(|r| resources.contains(&r));
            if matches {
                runs.push(record);
            }
        }
        runs.sort_by_key(|r| r.updated_at_ms);
        Ok(runs)
    }

    /// Adds a suspended run to (or removes it from) its thread's and resource's pending index
    /// (a sub-agent's run also to its top supervisor's, where its tree's decisions are listed).
    pub(super) async fn index_pending(&self, record: &RunRecord, present: bool) {
        self.index_pending_as(record, record.state.as_deref(), present)
            .await;
    }

    /// [`Runtime::index_pending`] for a record whose state was `state`.
    pub(super) async fn index_pending_as(
        &self,
        record: &RunRecord,
        state: Option<&crate::agent::state::RunState>,
        present: bool,
    ) {
        let (thread, resource) = listed_under(record, state);
        let mut indexes = Vec::new();
        for thread in thread.into_iter().filter(|t| !t.is_empty()) {
            indexes.push(pending_index("thread", thread));
        }
        for resource in resource.into_iter().filter(|r| !r.is_empty()) {
            indexes.push(pending_index("resource", resource));
        }
        for index in indexes {
            if let Err(e) = self
                .deps
                .store
                .index_set(&index, &record.run_id, present)
                .await
            {
                warn!(run_id = %record.run_id, error = %e, "could not update the pending index");
            }
        }
    }
}

/// The threads and resources whose pending lists show a run: its own, and for a sub-agent's
/// run its top supervisor's.
fn listed_under<'a>(
    record: &'a RunRecord,
    state: Option<&'a crate::agent::state::RunState>,
) -> (Vec<&'a str>, Vec<&'a str>) {
    let mut threads = vec![record.thread_id.as_str()];
    let mut resources = vec![record.resource_id.as_str()];
    if let Some(link) = state.and_then(|s| s.request.parent.as_ref()) {
        threads.push(&link.root_thread_id);
        resources.push(&link.root_resource_id);
    }
    (threads, resources)
}
