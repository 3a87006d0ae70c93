//! When a run's loop goes on and when it stops: the reference's continuation rule, step caps
//! and declarative stop conditions. Pure.

use super::request::StopCondition;
use crate::model::FinishReason;

/// Steps a run takes when it sets neither `max_steps` nor `stop_when`.
pub const DEFAULT_MAX_STEPS: u32 = 5;

/// Whether a step's outcome asks for another model call: it has tool calls to answer and did
/// not end in error / length / content-filter, or it ended for none of stop, error, length,
/// content-filter.
pub fn step_wants_more(reason: FinishReason, has_tool_calls: bool) -> bool {
    use FinishReason::{ContentFilter, Error, Length, Stop};
    let cut_off = matches!(reason, Error | Length | ContentFilter);
    (has_tool_calls && !cut_off) || !matches!(reason, Stop | Error | Length | ContentFilter)
}

/// What is known after a step, for the stop conditions.
#[derive(Clone, Copy, Debug)]
pub struct StepFacts<'a> {
    /// Steps run so far.
    pub steps: u32,
    /// The last step's finish reason.
    pub reason: FinishReason,
    /// Tools the last step called.
    pub tool_names: &'a [String],
    /// Total tokens of the run so far.
    pub total_tokens: u64,
}

/// Why a run stopped although its last step wanted more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopCause {
    /// `max_steps` (or the default cap) was reached.
    StepCap,
    /// A `stop_when` condition held.
    Condition,
    /// The server's hard ceiling was reached.
    Ceiling,
}

/// A run's step policy.
#[derive(Clone, Debug)]
pub struct StepPolicy {
    cap: u32,
    cap_is_ceiling: bool,
    /// The run's own max_steps (bounded by the ceiling), if it set one.
    max_steps: Option<u32>,
    ceiling: u32,
    conditions: Vec<StopCondition>,
}

impl StepPolicy {
    /// `max_steps` and `stop_when` composed as the reference does, bounded by `ceiling`.
    pub fn new(max_steps: Option<u32>, stop_when: &[StopCondition], ceiling: u32) -> Self {
        let (cap, cap_is_ceiling) = match (max_steps, stop_when.is_empty()) {
            (Some(n), _) if n <= ceiling => (n, false),
            (Some(_), _) => (ceiling, true),
            (None, true) => (DEFAULT_MAX_STEPS.min(ceiling), DEFAULT_MAX_STEPS > ceiling),
            (None, false) => (ceiling, true),
        };
        Self {
            cap,
            cap_is_ceiling,
            max_steps: max_steps.map(|n| n.min(ceiling)),
            ceiling,
            conditions: stop_when.to_vec(),
        }
    }

    /// After a step that would continue: `Some` when the run must stop anyway.
    pub fn stop_after(&self, facts: &StepFacts<'_>) -> Option<StopCause> {
        if self.conditions.iter().any(|c| holds(c, facts)) {
            return Some(StopCause::Condition);
        }
        if facts.steps >= self.cap {
            return Some(if self.cap_is_ceiling {
                StopCause::Ceiling
            } else {
                StopCause::StepCap
            });
        }
        None
    }

    /// Whether a hook may force another step after `steps` steps: below the run's max_steps,
    /// or below the server's ceiling when the run set none (the default cap does not apply,
    /// as the reference's forced continuation bypasses it).
    pub fn below_max_steps(&self, steps: usize) -> bool {
        let steps = u32::try_from(steps).unwrap_or(u32::MAX);
        steps < self.max_steps.unwrap_or(self.ceiling)
    }

    /// The most steps this run may take.
    pub fn cap(&self) -> u32 {
        self.cap
    }
}

fn holds(condition: &StopCondition, facts: &StepFacts<'_>) -> bool {
    match condition {
        StopCondition::StepCountIs(n) => facts.steps >= *n,
        StopCondition::HasToolCall(name) => facts.tool_names.iter().any(|t| t == name),
        StopCondition::FinishReasonIs(reason) => facts.reason == *reason,
        StopCondition::TotalTokensAtLeast(n) => facts.total_tokens >= *n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(steps: u32, tools: &[String]) -> StepFacts<'_> {
        StepFacts {
            steps,
            reason: FinishReason::ToolCalls,
            tool_names: tools,
            total_tokens: 100,
        }
    }

    #[test]
    fn continuation_rule() {
        assert!(step_wants_more(FinishReason::ToolCalls, true));
        assert!(step_wants_more(FinishReason::Stop, true));
        assert!(!step_wants_more(FinishReason::Stop, false));
        assert!(!step_wants_more(FinishReason::Length, true));
        assert!(step_wants_more(FinishReason::Other, false));
    }

    #[test]
    fn default_cap_is_five() {
        let policy = StepPolicy::new(None, &[], 100);
        assert_eq!(policy.stop_after(&facts(4, &[])), None);
        assert_eq!(policy.stop_after(&facts(5, &[])), Some(StopCause::StepCap));
    }

    #[test]
    fn max_steps_or_condition_whichever_first() {
        let tools = ["lookup".to_owned()];
        let cond = [StopCondition::HasToolCall("lookup".into())];
        let policy = StepPolicy::new(Some(2), &cond, 100);
        assert_eq!(
            policy.stop_after(&facts(1, &tools)),
            Some(StopCause::Condition)
        );
        assert_eq!(policy.stop_after(&facts(1, &[])), None);
        assert_eq!(policy.stop_after(&facts(2, &[])), Some(StopCause::StepCap));
    }

    #[test]
    fn stop_when_alone_is_bounded_by_the_ceiling() {
        let cond = [StopCondition::TotalTokensAtLeast(1_000_000)];
        let policy = StepPolicy::new(None, &cond, 7);
        assert_eq!(policy.stop_after(&facts(6, &[])), None);
        assert_eq!(policy.stop_after(&facts(7, &[])), Some(StopCause::Ceiling));
        let clamped = StepPolicy::new(Some(50), &[], 7);
        assert_eq!(clamped.cap(), 7);
    }
}
