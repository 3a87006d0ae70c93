//! The stored record of a run and every change of its status: started, ended or suspended,
//! a decision recorded, continued by a replica, aborted while suspended. Pure: the runtime
//! reads a record, calls one of these methods and compare-and-sets the result.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::decision;
use super::error::RunError;
use super::request::RunRequest;
use super::result::RunEnd;
use super::state::{Decision, PendingKind, RunState};
use crate::model::FinishReason;

/// Lifecycle of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Executing on `owner`.
    Running,
    /// Waiting for decisions on tool calls.
    Suspended,
    /// Ended.
    Finished,
}

/// The stored record of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run.
    pub run_id: String,
    /// Its agent.
    pub agent_id: String,
    /// Lifecycle state.
    pub status: RunStatus,
    /// Thread, if the run has memory.
    #[serde(default)]
    pub thread_id: String,
    /// Resource, if the run has memory.
    #[serde(default)]
    pub resource_id: String,
    /// Fingerprint of the request, when it came with an idempotency key.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fingerprint: String,
    /// Replica executing the run.
    pub owner: String,
    /// Unix milliseconds of creation.
    pub created_at_ms: i64,
    /// Unix milliseconds of the last change.
    pub updated_at_ms: i64,
    /// Sequence of the last chunk written for the run.
    pub last_sequence: u64,
    /// The last step's finish reason once finished or suspended.
    #[serde(default)]
    pub finish_reason: Option<FinishReason>,
    /// When suspended: the state to continue from.
    /// (Boxed, as `request`: a running run's record stays small in memory.)
    #[serde(default)]
    pub state: Option<Box<RunState>>,
    /// When suspended: undecided calls expire at this Unix millisecond.
    #[serde(default)]
    pub expires_at_ms: Option<i64>,
    /// The trace of the run's first span, for links from continuations.
    #[serde(default)]
    pub trace: Option<(String, String)>,
    /// While running: the Unix millisecond by which its owner must renew the record, after
    /// which another replica takes the run over (`None` until the first renewal of a
    /// continuation: the store's lease list then holds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until_ms: Option<i64>,
    /// While running from its start: the request (the run's state shares it), so a takeover
    /// before the first checkpoint can run it again (a checkpoint is `state`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Arc<RunRequest>>,
    /// An Abort that reached the record while it was running: a replica taking it over ends
    /// it instead of continuing it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_reason: Option<String>,
    /// The tenant that started the run (empty: an unscoped caller); only it (and unscoped
    /// callers) may observe, abort or decide the run.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
}

/// What recording a decision left to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Decided {
    /// Every call is decided: the run continues (status is `Running` under the decider).
    Continue,
    /// Others still wait.
    Waiting,
}

impl RunRecord {
    /// The record of a run starting now on `owner`, which holds its lease for `lease_ms`.
    pub fn start(
        run_id: &str,
        request: &Arc<RunRequest>,
        fingerprint: String,
        (owner, lease_ms): (&str, i64),
        trace: (String, String),
        now_ms: i64,
    ) -> Self {
        let memory = request.memory.as_ref();
        Self {
            run_id: run_id.to_owned(),
            agent_id: request.agent_id.clone(),
            status: RunStatus::Running,
            thread_id: memory.map(|m| m.thread_id.clone()).unwrap_or_default(),
            resource_id: memory.map(|m| m.resource_id.clone()).unwrap_or_default(),
            fingerprint,
            owner: owner.to_owned(),
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
            last_sequence: 0,
            finish_reason: None,
            state: None,
            expires_at_ms: None,
            trace: Some(trace),
            tenant: request.tenant.clone(),
            lease_until_ms: Some(now_ms.saturating_add(lease_ms)),
            request: Some(Arc::clone(request)),
            abort_reason: None,
        }
    }

    /// The run ended (`suspended` is `None`) or suspended with that state; its log ends at
    /// `last_sequence`. Undecided calls expire `approval_ttl_ms` from now.
    pub fn end(
        &mut self,
        end: RunEnd,
        suspended: Option<RunState>,
        last_sequence: u64,
        now_ms: i64,
        approval_ttl_ms: i64,
    ) {
        self.last_sequence = last_sequence;
        self.updated_at_ms = now_ms;
        self.lease_until_ms = None;
        self.request = None;
        self.abort_reason = None;
        self.finish_reason = match end {
            RunEnd::Model(reason) => Some(reason),
            RunEnd::Suspended | RunEnd::Aborted | RunEnd::Failed | RunEnd::Tripwire => None,
        };
        match suspended {
            Some(state) => {
                self.status = RunStatus::Suspended;
                self.expires_at_ms = Some(now_ms.saturating_add(approval_ttl_ms));
                self.state = Some(Box::new(state));
            }
            None => {
                self.status = RunStatus::Finished;
                self.state = None;
                self.expires_at_ms = None;
            }
        }
    }

    /// Records `decision` on the call `call_id`. When it was the last undecided call the run
    /// becomes `Running` on `decider`; else one chunk (the `finish` that says what still waits)
    /// is reserved in the log.
    pub fn decide(
        &mut self,
        call_id: &str,
        decision: Decision,
        decider: &str,
        now_ms: i64,
    ) -> Result<Decided, RunError> {
        let run_id = self.run_id.clone();
        let not_waiting = || {
            RunError::FailedPrecondition(format!(
                "tool call {call_id:?} of run {run_id:?} is not awaiting a decision (already decided, or the run is not suspended)"
            ))
        };
        if self.status != RunStatus::Suspended {
            return Err(not_waiting());
        }
        if let Some(expires) = self.expires_at_ms
            && now_ms > expires
        {
            return Err(RunError::FailedPrecondition(format!(
                "the decision on run {run_id:?} expired at {}",
                expires.div_euclid(1000)
            )));
        }
        let open = self
            .state
            .as_mut()
            .and_then(|s| s.open_step.as_mut())
            .ok_or_else(not_waiting)?;
        let pending = open
            .pending
            .iter_mut()
            .find(|p| p.call.id == call_id)
            .ok_or_else(|| {
                RunError::NotFound(format!(
                    "run {run_id:?} has no tool call {call_id:?} awaiting a decision"
                ))
            })?;
        if pending.decision.is_some() {
            return Err(not_waiting());
        }
        pending.decision = Some(match (pending.kind, decision) {
            (PendingKind::ClientTool, Decision::Approved | Decision::Declined(_)) => {
                return Err(RunError::FailedPrecondition(format!(
                    "tool call {call_id:?} is a client tool: answer it with Resume"
                )));
            }
            (PendingKind::Approval, Decision::Resumed(data)) => decision::from_resume_data(&data)?,
            (PendingKind::SubAgent, decision @ Decision::Delegated(_)) => decision,
            (PendingKind::SubAgent, _) => {
                let sub = pending.sub_run_id.clone().unwrap_or_default();
                return Err(RunError::FailedPrecondition(format!(
                    "tool call {call_id:?} waits for sub-agent run {sub:?}: decide that run's calls"
                )));
            }
            (_, Decision::Delegated(_)) => return Err(not_waiting()),
            (_, decision) => decision,
        });
        self.updated_at_ms = now_ms;
        if open.pending.iter().all(|p| p.decision.is_some()) {
            self.status = RunStatus::Running;
            self.owner = decider.to_owned();
            self.expires_at_ms = None;
            Ok(Decided::Continue)
        } else {
            self.last_sequence += 1;
            Ok(Decided::Waiting)
        }
    }

    /// Ends a suspended run that is aborted: two chunks (`abort`, `finish`) are reserved in
    /// its log after `last_sequence`.
    pub fn abort_suspended(&mut self, now_ms: i64) {
        self.status = RunStatus::Finished;
        self.state = None;
        self.expires_at_ms = None;
        self.last_sequence += 2;
        self.updated_at_ms = now_ms;
    }

    /// Whether the run waits for a decision that has not expired at `now_ms`.
    pub fn awaits_decision(&self, now_ms: i64) -> bool {
        self.status == RunStatus::Suspended
            && self.expires_at_ms.is_none_or(|e| e >= now_ms)
            && self.state.as_ref().is_some_and(|s| s.open_step.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::state::{CallRecord, OpenStep, PendingCall, StepRecord};
    use serde_json::json;

    fn pending(id: &str, kind: PendingKind) -> PendingCall {
        PendingCall {
            call: CallRecord {
                id: id.into(),
                name: "deploy".into(),
                args: json!({}),
                args_error: None,
            },
            kind,
            decision: None,
            resume_schema: None,
            sub_run_id: None,
        }
    }

    fn suspended(calls: Vec<PendingCall>) -> RunRecord {
        let request = Arc::new(RunRequest {
            agent_id: "a".into(),
            ..RunRequest::default()
        });
        let mut record = RunRecord::start(
            "run",
            &request,
            "fp".into(),
            ("r1", 10_000),
            Default::default(),
            0,
        );
        let mut state = RunState::new(request, Vec::new(), false);
        state.open_step = Some(OpenStep {
            step: StepRecord {
                tool_calls: calls.iter().map(|p| p.call.clone()).collect(),
                finish_reason: FinishReason::ToolCalls,
                ..StepRecord::empty(0)
            },
            done: Vec::new(),
            pending: calls,
            announced: Vec::new(),
        });
        record.end(RunEnd::Suspended, Some(state), 7, 10, 1000);
        record
    }

    #[test]
    fn start_end_and_suspend() {
        let record = suspended(vec![pending("c1", PendingKind::Approval)]);
        assert_eq!(record.status, RunStatus::Suspended);
        assert_eq!(record.expires_at_ms, Some(1010));
        assert_eq!(record.last_sequence, 7);
        assert!(record.awaits_decision(1010));
        assert!(!record.awaits_decision(1011), "expired");
        let mut done = record.clone();
        done.end(RunEnd::Model(FinishReason::Stop), None, 9, 20, 1000);
        assert_eq!(done.status, RunStatus::Finished);
        assert_eq!(done.finish_reason, Some(FinishReason::Stop));
        assert!(done.state.is_none() && done.expires_at_ms.is_none());
    }

    #[test]
    fn the_last_decision_continues_the_run_on_the_decider() {
        let mut record = suspended(vec![
            pending("c1", PendingKind::Approval),
            pending("c2", PendingKind::Approval),
        ]);
        let first = record.decide("c2", Decision::Approved, "r2", 11).ok();
        assert_eq!(first, Some(Decided::Waiting));
        assert_eq!(record.status, RunStatus::Suspended);
        assert_eq!(record.last_sequence, 8, "the waiting finish is reserved");
        let again = record.decide("c2", Decision::Approved, "r2", 11);
        assert!(matches!(again, Err(RunError::FailedPrecondition(_))));
        let last = record.decide("c1", decision::decline(None), "r2", 12).ok();
        assert_eq!(last, Some(Decided::Continue));
        assert_eq!(
            (record.status, record.owner.as_str()),
            (RunStatus::Running, "r2")
        );
        assert!(matches!(
            record.decide("c1", Decision::Approved, "r3", 13),
            Err(RunError::FailedPrecondition(_))
        ));
    }

    #[test]
    fn wrong_decisions_are_refused_and_change_nothing() {
        let mut record = suspended(vec![
            pending("a", PendingKind::Approval),
            pending("c", PendingKind::ClientTool),
        ]);
        let before = record.clone();
        assert!(matches!(
            record.decide("zz", Decision::Approved, "r", 11),
            Err(RunError::NotFound(_))
        ));
        assert!(matches!(
            record.decide("c", Decision::Approved, "r", 11),
            Err(RunError::FailedPrecondition(_))
        ));
        assert!(matches!(
            record.decide("a", Decision::Resumed(json!({"x": 1})), "r", 11),
            Err(RunError::Invalid(_))
        ));
        assert!(matches!(
            record.decide("a", Decision::Approved, "r", 5000),
            Err(RunError::FailedPrecondition(m)) if m.contains("expired")
        ));
        assert_eq!(record.state, before.state);
        assert_eq!(record.status, before.status);
    }

    #[test]
    fn resume_data_answers_an_approval_and_abort_ends_it() {
        let mut record = suspended(vec![pending("a", PendingKind::Approval)]);
        let decided = record.decide("a", Decision::Resumed(json!({"approved": true})), "r", 11);
        assert_eq!(decided.ok(), Some(Decided::Continue));
        let mut other = suspended(vec![pending("a", PendingKind::Approval)]);
        other.abort_suspended(12);
        assert_eq!(other.status, RunStatus::Finished);
        assert_eq!(other.last_sequence, 9);
        assert!(!other.awaits_decision(12));
    }

    #[test]
    fn a_running_record_stays_small_in_memory() {
        // Every running run holds its record (and its lease renewer a copy) for its whole
        // life: the state and request are boxed so that 10,000 idle streams do not pin
        // 4.5 KB each.
        assert!(std::mem::size_of::<RunRecord>() <= 512);
    }
}
