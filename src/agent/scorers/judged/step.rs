//! The reference's scorer pipeline as the judged scorers need it: a prompt step asks the
//! judge with the scorer's instructions and reads a structured (or, for `generateReason`,
//! free-text) answer; a failing step fails the run with the step named.

use std::collections::BTreeMap;
use std::fmt::Display;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::agent::scorers::Judge;

/// A scorer's failure at `step`, as the message names it.
pub(super) fn failure(scorer: &str, step: &str, cause: impl Display) -> String {
    format!("{scorer}: the {step} step failed: {cause}")
}

/// A prompt step with a structured answer: the judge's JSON (which the judge validates
/// against `schema`, retrying once with the schema in the system message as the reference's
/// structured output does).
pub(super) async fn ask_json<J: Judge + ?Sized>(
    judge: &J,
    instructions: &str,
    (scorer, step): (&str, &str),
    prompt: &str,
    schema: Value,
) -> Result<Value, String> {
    judge
        .json(instructions, prompt, schema)
        .await
        .map_err(|e| failure(scorer, step, e))
}

/// A prompt step with a free-text answer (`generateReason`).
pub(super) async fn ask_text<J: Judge + ?Sized>(
    judge: &J,
    instructions: &str,
    (scorer, step): (&str, &str),
    prompt: &str,
) -> Result<String, String> {
    judge
        .text(instructions, prompt)
        .await
        .map_err(|e| failure(scorer, step, e))
}

/// The fields a step reads of the judge's answer; an answer without them fails the step
/// (the reference's schema validation would have refused it).
pub(super) fn read<T: DeserializeOwned>(
    (scorer, step): (&str, &str),
    answer: &Value,
) -> Result<T, String> {
    serde_json::from_value(answer.clone()).map_err(|e| {
        failure(
            scorer,
            step,
            format!("the judge's answer does not match the schema: {e}"),
        )
    })
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

/// The result's prompts by the reference's keys.
pub(super) fn prompts<const N: usize>(entries: [(&str, &String); N]) -> BTreeMap<String, String> {
    entries
        .into_iter()
        .map(|(key, prompt)| (key.to_owned(), prompt.clone()))
        .collect()
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
