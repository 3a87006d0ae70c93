//! A run's result (the reference's `generate()` return value) and how it is aggregated from the
//! run's steps. Pure: the rules of what `text`, `tool_calls`, `tool_results` and
//! `reasoning_text` hold live here and nowhere else.

use serde_json::Value;

use super::completion::CompletionCheck;
use super::error::RunFailure;
use super::event::{GeneratedFile, Source};
use super::message::Message;
use super::processors::Tripwire;
use super::state::{CallRecord, PendingCall, ResponseRecord, ResultRecord, RunState, StepRecord};
use crate::model::{FinishReason, Usage};

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunEnd {
    /// Its last step ended for this reason.
    Model(FinishReason),
    /// It waits for decisions on tool calls.
    Suspended,
    /// It was aborted.
    Aborted,
    /// It failed.
    Failed,
    /// A processor stopped it.
    Tripwire,
}

/// The whole result of a run, as the `finish` chunk carries it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunResult {
    /// The run.
    pub run_id: String,
    /// How it ended.
    pub end: RunEnd,
    /// The text of every step, joined.
    pub text: String,
    /// The reasoning of every step, joined.
    pub reasoning_text: String,
    /// The structured object, when asked for and produced.
    pub object: Option<Value>,
    /// `object` is the fallback value.
    pub used_fallback_value: bool,
    /// Every step's tool calls (for a suspended run: the calls that wait).
    pub tool_calls: Vec<CallRecord>,
    /// Every step's successful tool results.
    pub tool_results: Vec<ResultRecord>,
    /// The finished steps.
    pub steps: Vec<StepRecord>,
    /// Tokens of the whole run.
    pub usage: Usage,
    /// The last step's response metadata.
    pub response: Option<ResponseRecord>,
    /// The run's warnings and the last step's.
    pub warnings: Vec<String>,
    /// The last step's provider metadata.
    pub provider_metadata: Option<Value>,
    /// Citations of every step.
    pub sources: Vec<Source>,
    /// Files of every step.
    pub files: Vec<GeneratedFile>,
    /// For a suspended run: the first call that waits.
    pub suspend_payload: Option<PendingCall>,
    /// Remembered history, input and response messages.
    pub messages: Vec<Message>,
    /// Remembered history alone.
    pub remembered_messages: Vec<Message>,
    /// Why the run failed.
    pub error: Option<RunFailure>,
    /// Trace id of the run (hex; empty when not traced).
    pub trace_id: String,
    /// Span id of the run span.
    pub span_id: String,
    /// The run's last completion check.
    pub completion: Option<CompletionCheck>,
    /// The processor abort that ended the run.
    pub tripwire: Option<Tripwire>,
    /// With `return_scorer_data`: what the scorers read and the scores they gave.
    pub scoring: Option<crate::agent::scorers::Scoring>,
}

impl RunResult {
    /// The result of a run in `state` that ended with `end`.
    pub fn of(run_id: &str, state: &RunState, end: RunEnd) -> Self {
        let steps = &state.steps;
        let last = steps.last();
        // As the reference: the last step's warnings (each step's are on the step), plus the
        // run's own (the step ceiling, a title that could not be made).
        let mut warnings = state.warnings.clone();
        warnings.extend(last.iter().flat_map(|s| s.warnings.iter().cloned()));
        let mut result = Self {
            run_id: run_id.to_owned(),
            end,
            text: join(steps.iter().map(|s| s.text.as_str())),
            reasoning_text: join(steps.iter().map(|s| s.reasoning.as_str())),
            object: None,
            used_fallback_value: false,
            tool_calls: steps.iter().flat_map(|s| s.tool_calls.clone()).collect(),
            tool_results: steps
                .iter()
                .flat_map(|s| s.tool_results.iter().filter(|r| r.is_output()).cloned())
                .collect(),
            steps: steps.clone(),
            usage: steps.iter().map(|s| s.usage).sum(),
            response: last.map(|s| s.response.clone()),
            warnings,
            provider_metadata: last.and_then(|s| s.provider_metadata.clone()),
            sources: steps.iter().flat_map(|s| s.sources.clone()).collect(),
            files: steps.iter().flat_map(|s| s.files.clone()).collect(),
            suspend_payload: None,
            messages: state.conversation().cloned().collect(),
            remembered_messages: state.history.clone(),
            error: None,
            trace_id: String::new(),
            span_id: String::new(),
            completion: None,
            tripwire: None,
            scoring: None,
        };
        if let Some(text) = &state.result_text {
            text.clone_into(&mut result.text);
        }
        if end == RunEnd::Suspended
            && let Some(open) = &state.open_step
        {
            // As the reference: a suspended run reports the calls that wait, not a text.
            result.text.clear();
            result.reasoning_text.clear();
            result.steps.clear();
            result.tool_calls = open
                .pending
                .iter()
                .filter(|p| p.decision.is_none())
                .map(|p| p.call.clone())
                .collect();
            result.suspend_payload = open.pending.iter().find(|p| p.decision.is_none()).cloned();
        }
        result
    }

    /// The result of a stored run, whose state may be gone (a finished record keeps none).
    pub fn of_stored(run_id: &str, state: Option<&RunState>, end: RunEnd) -> Self {
        match state {
            Some(state) => Self::of(run_id, state, end),
            None => Self::of(
                run_id,
                &RunState::new(
                    crate::agent::request::RunRequest::default(),
                    Vec::new(),
                    false,
                ),
                end,
            ),
        }
    }
}

/// Step texts joined as the reference joins them.
fn join<'a>(texts: impl Iterator<Item = &'a str>) -> String {
    texts.collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::request::RunRequest;
    use crate::agent::state::{OpenStep, PendingKind};
    use serde_json::json;

    fn call(id: &str) -> CallRecord {
        CallRecord {
            id: id.into(),
            name: "t".into(),
            args: json!({}),
            args_error: None,
        }
    }

    fn step(index: u32, text: &str, results: Vec<ResultRecord>) -> StepRecord {
        StepRecord {
            text: text.into(),
            reasoning: format!("r{index}"),
            tool_calls: results.iter().map(|r| call(&r.id)).collect(),
            tool_results: results,
            finish_reason: FinishReason::ToolCalls,
            usage: Usage {
                input_tokens: 1,
                output_tokens: 2,
                total_tokens: 3,
                ..Usage::default()
            },
            is_continued: true,
            ..StepRecord::empty(index)
        }
    }

    fn outcome(id: &str, result: Value, is_error: bool) -> ResultRecord {
        ResultRecord {
            id: id.into(),
            name: "t".into(),
            args: json!({}),
            result,
            is_error,
            model_output: None,
        }
    }

    fn state(steps: Vec<StepRecord>) -> RunState {
        let request = RunRequest {
            agent_id: "a".into(),
            ..RunRequest::default()
        };
        let mut state = RunState::new(request, Vec::new(), false);
        state.steps = steps;
        state
    }

    #[test]
    fn every_step_counts_and_failed_calls_are_left_out() {
        let s = state(vec![
            step(0, "A", vec![outcome("1", json!({"ok": 1}), false)]),
            step(
                1,
                "B",
                vec![
                    outcome("2", json!("Tool \"x\" not found."), true),
                    outcome("3", json!({"isError": true}), true),
                ],
            ),
            step(2, "C", vec![]),
        ]);
        let r = RunResult::of("run", &s, RunEnd::Model(FinishReason::Stop));
        assert_eq!(r.text, "ABC");
        assert_eq!(r.reasoning_text, "r0r1r2");
        let calls: Vec<&str> = r.tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(calls, ["1", "2", "3"]);
        let results: Vec<&str> = r.tool_results.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            results,
            ["1", "3"],
            "a task tool's error result is an output"
        );
        assert_eq!(r.usage.total_tokens, 9);
    }

    #[test]
    fn a_suspended_run_lists_the_calls_that_wait() {
        let mut s = state(vec![step(0, "A", vec![])]);
        let pending = |id: &str, decided: bool| PendingCall {
            call: call(id),
            kind: PendingKind::Approval,
            decision: decided.then_some(crate::agent::state::Decision::Approved),
            resume_schema: None,
            sub_run_id: None,
        };
        s.open_step = Some(OpenStep {
            step: step(1, "B", vec![]),
            done: Vec::new(),
            pending: vec![pending("x", true), pending("y", false)],
            announced: Vec::new(),
        });
        let r = RunResult::of("run", &s, RunEnd::Suspended);
        assert!(r.text.is_empty() && r.steps.is_empty());
        let calls: Vec<&str> = r.tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(calls, ["y"]);
        assert_eq!(r.suspend_payload.map(|p| p.call.id), Some("y".into()));
    }
}
