//! Completion checks (the reference's `isTaskComplete`): how scorer verdicts combine, the
//! feedback the model reads when the work is not complete, and the JSON Schema scorer (the
//! task-list scorer is `task_check`'s own summary).
//! Pure; the loop runs the scorers (`run/completion.rs`).

use serde_json::Value;

use crate::config::{CompletionConfig, Strategy};

/// Feedback heading, exactly as the reference writes it.
const HEADING: &str = "#### Completion Check Results";
/// Last line when the loop goes on.
const NOT_COMPLETE: &str =
    "🔄 The task is not yet complete. Please continue working based on the feedback above.";
/// Last line when `max_steps` is reached.
const MAX_ITERATIONS: &str = "⚠️ Max iterations reached.";
/// Reason of a scorer that missed the shared deadline.
pub const TIMED_OUT_REASON: &str = "Scorer did not finish before the completion timeout";

/// One scorer's verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// The scorer.
    pub scorer_id: String,
    /// Its name.
    pub scorer_name: String,
    /// Its score.
    pub score: f64,
    /// `score == 1`.
    pub passed: bool,
    /// Why.
    pub reason: Option<String>,
    /// How long it took.
    pub duration_ms: u64,
    /// It failed (threw, or missed the deadline).
    pub errored: bool,
    /// It missed the deadline.
    pub timed_out: bool,
}

impl Verdict {
    /// A scorer's number (the reference: a non-number scores 0).
    pub fn scored(id: &str, name: &str, score: f64, reason: Option<String>, ms: u64) -> Self {
        let score = if score.is_finite() { score } else { 0.0 };
        Self {
            scorer_id: id.to_owned(),
            scorer_name: name.to_owned(),
            score,
            passed: score == 1.0,
            reason,
            duration_ms: ms,
            errored: false,
            timed_out: false,
        }
    }

    /// A scorer that threw: `"Scorer threw an error: {message}"`.
    pub fn threw(id: &str, name: &str, message: &str, ms: u64) -> Self {
        Self {
            errored: true,
            ..Self::scored(
                id,
                name,
                0.0,
                Some(format!("Scorer threw an error: {message}")),
                ms,
            )
        }
    }

    /// A scorer that missed the shared deadline.
    pub fn timed_out(id: &str, name: &str, ms: u64) -> Self {
        Self {
            errored: true,
            timed_out: true,
            ..Self::scored(id, name, 0.0, Some(TIMED_OUT_REASON.to_owned()), ms)
        }
    }
}

/// The outcome of one completion check.
#[derive(Clone, Debug, PartialEq)]
pub struct CompletionCheck {
    /// The loop's iteration, 1-based.
    pub iteration: u32,
    /// The work is complete.
    pub passed: bool,
    /// Each scorer's verdict, in scorer order.
    pub results: Vec<Verdict>,
    /// How long the check took.
    pub duration_ms: u64,
    /// The deadline passed.
    pub timed_out: bool,
    /// The first passing scorer's reason, else the first result's.
    pub reason: Option<String>,
    /// `max_steps` was reached.
    pub max_iteration_reached: bool,
    /// As configured.
    pub suppress_feedback: bool,
}

impl CompletionCheck {
    /// Combines the verdicts as `config.strategy` says: all must pass (and all ran), or one.
    pub fn combine(
        config: &CompletionConfig,
        results: Vec<Verdict>,
        iteration: u32,
        max_steps: Option<u32>,
        duration_ms: u64,
    ) -> Self {
        let passed = match config.strategy {
            Strategy::All => {
                results.len() == config.scorers.len() && results.iter().all(|r| r.passed)
            }
            Strategy::Any => results.iter().any(|r| r.passed),
        };
        let reason = results
            .iter()
            .find(|r| r.passed)
            .or(results.first())
            .and_then(|r| r.reason.clone());
        Self {
            iteration,
            passed,
            timed_out: results.iter().any(|r| r.timed_out),
            results,
            duration_ms,
            reason,
            max_iteration_reached: max_steps.is_some_and(|m| iteration >= m),
            suppress_feedback: config.suppress_feedback,
        }
    }

    /// The assistant message the model reads when the work is not complete, byte for byte
    /// the reference's.
    pub fn feedback(&self) -> String {
        let mut lines = vec![
            HEADING.to_owned(),
            String::new(),
            "Overall: ❌ NOT COMPLETE".to_owned(),
            format!("Duration: {}ms", self.duration_ms),
        ];
        if self.timed_out {
            lines.push("⚠️ Scoring timed out".to_owned());
        }
        lines.push(String::new());
        for r in &self.results {
            lines.push(format!("**{}** ({})", r.scorer_name, r.scorer_id));
            lines.push(format!(
                "Score: {} {}",
                js_number(r.score),
                if r.passed { "✅" } else { "❌" }
            ));
            if let Some(reason) = &r.reason {
                lines.push(format!("Reason: {reason}"));
            }
            lines.push(String::new());
        }
        lines.push(
            if self.max_iteration_reached {
                MAX_ITERATIONS
            } else {
                NOT_COMPLETE
            }
            .to_owned(),
        );
        lines.join("\n")
    }
}

/// A number as JavaScript prints it (`1`, `0.5`).
fn js_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// The JSON Schema scorer: 1 when the answer (optionally in a ```json fence) is JSON matching
/// `schema`.
pub fn json_schema_verdict(schema: &Value, output: &str) -> (f64, String) {
    let text = strip_fence(output);
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return (0.0, format!("The answer is not JSON: {e}")),
    };
    let validator = match super::structured::compile(schema) {
        Ok(v) => v,
        Err(e) => return (0.0, format!("The schema is invalid: {e}")),
    };
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| {
            let path = e.instance_path().to_string();
            if path.is_empty() {
                e.to_string()
            } else {
                format!("{path}: {e}")
            }
        })
        .collect();
    if errors.is_empty() {
        (1.0, "The answer matches the schema".to_owned())
    } else {
        (
            0.0,
            format!(
                "The answer does not match the schema: {}",
                errors.join("; ")
            ),
        )
    }
}

fn strip_fence(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

/// The text of the run's first input message's first part (`"Unknown task"` without one).
pub fn original_task(first_text: Option<&str>) -> String {
    first_text.unwrap_or("Unknown task").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ScorerKind, ScorerSpec};

    fn config(strategy: Strategy, n: usize) -> CompletionConfig {
        CompletionConfig {
            scorers: (0..n)
                .map(|i| ScorerSpec {
                    id: format!("s{i}"),
                    name: None,
                    kind: ScorerKind::Hook,
                })
                .collect(),
            strategy,
            parallel: true,
            timeout_ms: 1000,
            suppress_feedback: false,
        }
    }

    #[test]
    fn feedback_is_the_references_text() {
        let v = Verdict::scored("has-done", "Has Done", 0.0, Some("no DONE yet".into()), 3);
        let check = CompletionCheck::combine(&config(Strategy::All, 1), vec![v], 1, None, 9);
        assert_eq!(
            check.feedback(),
            "#### Completion Check Results\n\nOverall: ❌ NOT COMPLETE\nDuration: 9ms\n\n**Has Done** (has-done)\nScore: 0 ❌\nReason: no DONE yet\n\n🔄 The task is not yet complete. Please continue working based on the feedback above."
        );
        let late = Verdict::timed_out("a", "a", 5);
        let check = CompletionCheck::combine(&config(Strategy::All, 1), vec![late], 2, Some(2), 5);
        assert!(check.max_iteration_reached && check.timed_out);
        assert!(
            check
                .feedback()
                .contains("Duration: 5ms\n⚠️ Scoring timed out\n\n**a** (a)")
        );
        assert!(check.feedback().ends_with("Reason: Scorer did not finish before the completion timeout\n\n⚠️ Max iterations reached."));
    }

    #[test]
    fn strategies_combine_as_the_reference() {
        let pass = Verdict::scored("a", "a", 1.0, Some("ok".into()), 1);
        let fail = Verdict::scored("b", "b", 0.5, Some("half".into()), 1);
        let all = CompletionCheck::combine(
            &config(Strategy::All, 2),
            vec![pass.clone(), fail.clone()],
            1,
            None,
            1,
        );
        assert!(!all.passed);
        assert_eq!(all.reason.as_deref(), Some("ok"));
        let any = CompletionCheck::combine(
            &config(Strategy::Any, 2),
            vec![fail.clone(), pass.clone()],
            1,
            None,
            1,
        );
        assert!(any.passed);
        // Sequential `all` stopped early: not every scorer ran, so not complete.
        let partial = CompletionCheck::combine(&config(Strategy::All, 2), vec![pass], 1, None, 1);
        assert!(!partial.passed);
        assert!(
            CompletionCheck::combine(&config(Strategy::Any, 1), vec![fail], 1, None, 1).reason
                == Some("half".into())
        );
        assert_eq!(js_number(0.5), "0.5");
        assert_eq!(
            Verdict::threw("x", "x", "judge down", 1).reason.as_deref(),
            Some("Scorer threw an error: judge down")
        );
    }

    #[test]
    fn rule_scorers() {
        let schema = serde_json::json!({"type": "object", "required": ["a"]});
        assert_eq!(
            json_schema_verdict(&schema, "```json\n{\"a\": 1}\n```").0,
            1.0
        );
        let (score, reason) = json_schema_verdict(&schema, "{}");
        assert_eq!(score, 0.0);
        assert!(reason.contains("does not match"), "{reason}");
        assert!(
            json_schema_verdict(&schema, "hello")
                .1
                .starts_with("The answer is not JSON")
        );
        assert_eq!(original_task(None), "Unknown task");
    }
}
