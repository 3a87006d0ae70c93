//! The reference's scorer pipeline as the judged scorers need it: a prompt step asks the
//! judge with the scorer's instructions and reads a structured (or, for `generateReason`,
//! free-text) answer; a failing step fails the run with the step named. The score formulas
//! several scorers share are here too.

use std::collections::BTreeMap;
use std::fmt::Display;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{js, schema};
use crate::agent::scorers::{Judge, Scored};

/// A scorer's failure at `step`, as the message names it.
pub(super) fn failure(scorer: &str, step: &str, cause: impl Display) -> String {
    format!("{scorer}: the {step} step failed: {cause}")
}

/// One scorer's steps: each asks `judge` with the scorer's instructions as the system
/// message, and a failure names the scorer and the step.
pub(super) struct Steps<'a, J: ?Sized> {
    judge: &'a J,
    scorer: &'static str,
    instructions: &'static str,
}

/// A step's result as the run reports it, with the prompt that asked for it (none for a
/// step the reference computes without the judge).
pub(super) struct StepResult {
    /// The prompt the judge was asked.
    pub prompt: Option<String>,
    /// The result (for a prompt step, the judge's answer as it is).
    pub result: Value,
}

impl<'a, J: Judge + ?Sized> Steps<'a, J> {
    /// The steps of scorer `scorer`, asking `judge` with `instructions`.
    pub fn new(judge: &'a J, scorer: &'static str, instructions: &'static str) -> Self {
        Self {
            judge,
            scorer,
            instructions,
        }
    }

    /// A prompt step with a structured answer: the judge's JSON as the step's result (the
    /// judge validates it against `schema`, retrying once with the schema in the system
    /// message as the reference's structured output does), and the fields `T` the scorer
    /// reads of it. An answer without those fields fails the step (the reference's schema
    /// validation would have refused it).
    pub async fn ask<T: DeserializeOwned>(
        &self,
        step: &str,
        prompt: String,
        schema: Value,
    ) -> Result<(StepResult, T), String> {
        let answer = self
            .judge
            .json(self.instructions, &prompt, schema)
            .await
            .map_err(|e| failure(self.scorer, step, e))?;
        let fields = serde_json::from_value(answer.clone()).map_err(|e| {
            failure(
                self.scorer,
                step,
                format!("the judge's answer does not match the schema: {e}"),
            )
        })?;
        let result = StepResult {
            prompt: Some(prompt),
            result: answer,
        };
        Ok((result, fields))
    }

    /// The extraction step (`preprocess`): the judge lists the response's statements,
    /// claims or opinions as `{ <list>: string[] }`.
    pub async fn extract<T: DeserializeOwned>(
        &self,
        prompt: String,
        list: &str,
    ) -> Result<(StepResult, T), String> {
        self.ask("preprocess", prompt, schema::string_list(list))
            .await
    }

    /// The verdict step (`analyze`): the judge answers `{ <list>: [{ <fields>: string }] }`,
    /// a verdict per item.
    pub async fn verdicts<T: DeserializeOwned>(
        &self,
        prompt: String,
        list: &str,
        fields: &[&str],
    ) -> Result<(StepResult, T), String> {
        self.ask("analyze", prompt, schema::string_records(list, fields))
            .await
    }

    /// The last step, `generateReason` (a free-text answer to `reason_prompt`), and the
    /// run's result: the score, the reason, the step results and the prompts by the
    /// reference's keys.
    pub async fn finish(
        &self,
        score: f64,
        preprocess: Option<StepResult>,
        analyze: StepResult,
        reason_prompt: String,
    ) -> Result<Scored, String> {
        let reason = self
            .judge
            .text(self.instructions, &reason_prompt)
            .await
            .map_err(|e| failure(self.scorer, "generateReason", e))?;
        let (preprocess_prompt, preprocess_result) = match preprocess {
            Some(step) => (step.prompt, Some(step.result)),
            None => (None, None),
        };
        let prompts: BTreeMap<String, String> = [
            ("preprocessPrompt", preprocess_prompt),
            ("analyzePrompt", analyze.prompt),
            ("generateReasonPrompt", Some(reason_prompt)),
        ]
        .into_iter()
        .filter_map(|(key, prompt)| Some((key.to_owned(), prompt?)))
        .collect();
        Ok(Scored {
            score,
            reason: Some(reason),
            preprocess_step_result: preprocess_result,
            analyze_step_result: Some(analyze.result),
            prompts,
        })
    }
}

// The answers several scorers read alike; serde reads only the fields a scorer uses.

/// `{ verdicts: [...] }`: the verdicts of faithfulness, hallucination, toxicity and context
/// precision.
#[derive(Deserialize)]
pub(super) struct Verdicts<V> {
    pub verdicts: Vec<V>,
}

/// `{ results: [...] }`: the verdicts of answer relevancy and bias.
#[derive(Deserialize)]
pub(super) struct Results<V> {
    pub results: Vec<V>,
}

/// A verdict read for its `verdict` alone.
#[derive(Deserialize)]
pub(super) struct Verdict {
    pub verdict: String,
}

/// `{ claims: string[] }`: what faithfulness and hallucination extract.
#[derive(Deserialize)]
pub(super) struct Claims {
    pub claims: Vec<String>,
}

/// The share of `verdicts` that count (`counts`), times `scale`, rounded to two decimals;
/// `None` without verdicts, which each scorer scores its own way.
pub(super) fn share<T>(verdicts: &[T], counts: impl Fn(&T) -> bool, scale: f64) -> Option<f64> {
    weighted_share(verdicts, |v| if counts(v) { 1.0 } else { 0.0 }, scale)
}

/// [`share`] where a verdict counts its `weight` (answer relevancy's `unsure` counts less
/// than a whole one).
pub(super) fn weighted_share<T>(
    verdicts: &[T],
    weight: impl Fn(&T) -> f64,
    scale: f64,
) -> Option<f64> {
    if verdicts.is_empty() {
        return None;
    }
    // Summed in order from 0, as the reference's loops add.
    let total = verdicts.iter().fold(0.0, |sum, v| sum + weight(v));
    Some(js::round_to_two_decimals(
        total / verdicts.len() as f64 * scale,
    ))
}

/// An empty list, for a field an answer lacks.
static EMPTY_LIST: Value = Value::Array(Vec::new());

/// `answer[key] || []`: a list field of a step's answer as the reference passes it on.
pub(super) fn list_field<'a>(answer: &'a Value, key: &str) -> &'a Value {
    answer.get(key).unwrap_or(&EMPTY_LIST)
}

/// `options.scale || 1`: an unset (zero or NaN) scale is 1.
pub(super) fn scale_or_one(scale: f64) -> f64 {
    if scale == 0.0 || scale.is_nan() {
        1.0
    } else {
        scale
    }
}

/// Fills a prompt template: each `${name}` is replaced by its value in one pass, so a value
/// that itself contains `${…}` is left as it is. The templates are the reference's template
/// literals verbatim with each expression named.
pub(super) fn render(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let name = &after[..end];
        match values.iter().find(|(n, _)| *n == name) {
            Some((_, value)) => out.push_str(value),
            None => {
                debug_assert!(false, "template value {name} missing");
                out.push_str(&rest[start..start + 3 + end]);
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_fills_each_name_once() {
        assert_eq!(
            render("a ${x} b ${y} ${x}", &[("x", "${y}"), ("y", "2")]),
            "a ${y} b 2 ${y}"
        );
        assert_eq!(render("{{ literal }}", &[]), "{{ literal }}");
    }
}
