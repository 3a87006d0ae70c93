//! Completion checks and hook failures on the wire.

use crate::agent::completion::CompletionCheck;
use crate::agent::hooks::HookNote;
use crate::config::OnHookFailure;
use crate::pb;

/// The `is_task_complete` chunk (and the result's `completion_check`).
pub fn completion_check(c: &CompletionCheck) -> pb::IsTaskCompleteChunk {
    pb::IsTaskCompleteChunk {
        iteration: c.iteration,
        passed: c.passed,
        results: c
            .results
            .iter()
            .map(|r| pb::ScorerResult {
                scorer_id: r.scorer_id.clone(),
                scorer_name: r.scorer_name.clone(),
                score: r.score,
                passed: r.passed,
                reason: r.reason.clone().unwrap_or_default(),
                duration_ms: r.duration_ms,
                errored: r.errored,
                timed_out: r.timed_out,
            })
            .collect(),
        duration_ms: c.duration_ms,
        timed_out: c.timed_out,
        reason: c.reason.clone().unwrap_or_default(),
        max_iteration_reached: c.max_iteration_reached,
        suppress_feedback: c.suppress_feedback,
    }
}

/// The `hook_error` chunk.
pub fn hook_error(n: &HookNote) -> pb::HookErrorChunk {
    pb::HookErrorChunk {
        hook_call_id: n.call_id.clone(),
        kind: n.kind.into(),
        message: n.message.clone(),
        policy: match n.policy {
            OnHookFailure::Fail => pb::HookFailurePolicy::Fail,
            OnHookFailure::Continue => pb::HookFailurePolicy::Continue,
        }
        .into(),
    }
}
