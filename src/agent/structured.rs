//! Structured output: how the schema reaches the model, and how the final text becomes a
//! validated object (or a warning, a fallback or an error, per the request's strategy).

use serde_json::Value;

use super::error::RunFailure;
use super::request::{ErrorStrategy, StructuredOutput};
use crate::model::{FinishReason, ResponseFormat};

/// The native response format for a schema.
pub fn response_format(output: &StructuredOutput) -> ResponseFormat {
    ResponseFormat::JsonSchema {
        name: "response".to_owned(),
        schema: output.schema.clone(),
        strict: false,
    }
}

/// The system message that asks for the object when the schema goes in the prompt.
pub fn injected_instructions(output: &StructuredOutput) -> String {
    let mut text = format!(
        "Respond only with a JSON value that matches this JSON Schema, with no other text:\n{}",
        output.schema
    );
    if let Some(extra) = &output.instructions {
        text.push_str("\n\n");
        text.push_str(extra);
    }
    text
}

/// Compiles a schema; the error names what is wrong with it.
pub fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::validator_for(schema).map_err(|e| format!("invalid JSON Schema: {e}"))
}

/// The JSON in a model's answer: the whole text, or the body of a ```json fence.
pub fn extract_json(text: &str) -> Option<Value> {
    let trimmed = text.trim();
    if let Ok(value) = serde_json::from_str(trimmed) {
        return Some(value);
    }
    let fenced = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|rest| rest.strip_suffix("```"))?;
    serde_json::from_str(fenced.trim()).ok()
}

/// Longest text parsed for partial objects (beyond it only the final object is produced).
const PARTIAL_LIMIT: usize = 64 * 1024;

/// The object a still-streaming answer describes so far: the JSON prefix with its open strings
/// and containers closed and a dangling key or token dropped. `None` while nothing parses.
pub fn partial_json(text: &str) -> Option<Value> {
    if text.len() > PARTIAL_LIMIT {
        return None;
    }
    let text = text.trim_start();
    let text = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .unwrap_or(text)
        .trim_start();
    if !text.starts_with(['{', '[']) {
        return None;
    }
    let mut closers = Vec::new();
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => closers.push('}'),
            '[' => closers.push(']'),
            '}' | ']' => {
                closers.pop();
            }
            _ => {}
        }
    }
    let mut candidate = text.trim_end_matches('`').to_owned();
    if in_string {
        candidate.push('"');
    }
    let suffix: String = closers.iter().rev().collect();
    // A few trims suffice: each removes one dangling token (a comma, a key, a partial literal).
    for _ in 0..4 {
        if let Ok(value) = serde_json::from_str(&format!("{candidate}{suffix}")) {
            return Some(value);
        }
        candidate = trim_dangling(&candidate)?;
    }
    None
}

/// Drops the last incomplete piece of a JSON prefix.
fn trim_dangling(text: &str) -> Option<String> {
    let text = text.trim_end();
    if let Some(rest) = text.strip_suffix(',') {
        return Some(rest.to_owned());
    }
    if let Some(rest) = text.strip_suffix(':') {
        let key = rest.trim_end().strip_suffix('"')?;
        return Some(key[..key.rfind('"')?].to_owned());
    }
    let cut = text.rfind([',', ':', '{', '['])?;
    Some(text[..=cut].to_owned())
}

/// What structured output yields for a run.
#[derive(Clone, Debug, PartialEq)]
pub enum ObjectOutcome {
    /// A valid object.
    Object(Value),
    /// The fallback value replaced an invalid object.
    Fallback(Value),
    /// Invalid, and the strategy is `warn`: a warning and no object.
    Warning(String),
    /// Invalid, and the strategy is `strict`: the run fails.
    Failure(RunFailure),
}

/// Turns the final text into the run's object.
pub fn resolve(output: &StructuredOutput, text: &str, reason: FinishReason) -> ObjectOutcome {
    let problem = if matches!(reason, FinishReason::Length | FinishReason::ContentFilter) {
        RunFailure::StructuredOutputTruncated(format!(
            "Structured output was cut off (finish reason {reason}); no object could be produced"
        ))
    } else {
        match extract_json(text) {
            None => RunFailure::StructuredOutputInvalid(
                "Structured output is not valid JSON".to_owned(),
            ),
            Some(value) => match compile(&output.schema) {
                Err(e) => RunFailure::StructuredOutputInvalid(e),
                Ok(validator) => {
                    let errors: Vec<String> = validator
                        .iter_errors(&value)
                        .map(|e| {
                            let path = e.instance_path().to_string();
                            let at = if path.is_empty() {
                                "/".to_owned()
                            } else {
                                path
                            };
                            format!("{at}: {e}")
                        })
                        .collect();
                    if errors.is_empty() {
                        return ObjectOutcome::Object(value);
                    }
                    RunFailure::StructuredOutputInvalid(format!(
                        "Structured output does not match the schema: {}",
                        errors.join("; ")
                    ))
                }
            },
        }
    };
    match output.error_strategy {
        ErrorStrategy::Strict => ObjectOutcome::Failure(problem),
        ErrorStrategy::Warn => ObjectOutcome::Warning(problem.to_string()),
        ErrorStrategy::Fallback => {
            ObjectOutcome::Fallback(output.fallback_value.clone().unwrap_or(Value::Null))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn output(strategy: ErrorStrategy) -> StructuredOutput {
        StructuredOutput {
            schema: json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
            error_strategy: strategy,
            fallback_value: Some(json!({"n": 0})),
            instructions: None,
            json_prompt_injection: None,
        }
    }

    #[test]
    fn valid_object_and_fences() {
        let o = output(ErrorStrategy::Strict);
        assert_eq!(
            resolve(&o, "{\"n\": 3}", FinishReason::Stop),
            ObjectOutcome::Object(json!({"n": 3}))
        );
        assert_eq!(
            resolve(&o, "```json\n{\"n\": 4}\n```", FinishReason::Stop),
            ObjectOutcome::Object(json!({"n": 4}))
        );
    }

    #[test]
    fn strategies_on_invalid_object() {
        let bad = "{\"n\": \"x\"}";
        assert!(matches!(
            resolve(&output(ErrorStrategy::Strict), bad, FinishReason::Stop),
            ObjectOutcome::Failure(RunFailure::StructuredOutputInvalid(_))
        ));
        assert!(matches!(
            resolve(&output(ErrorStrategy::Warn), bad, FinishReason::Stop),
            ObjectOutcome::Warning(_)
        ));
        assert_eq!(
            resolve(&output(ErrorStrategy::Fallback), bad, FinishReason::Stop),
            ObjectOutcome::Fallback(json!({"n": 0}))
        );
    }

    #[test]
    fn partial_objects_while_streaming() {
        assert_eq!(partial_json("{\"a\": \"hel"), Some(json!({"a": "hel"})));
        assert_eq!(partial_json("{\"a\": 1, \"b"), Some(json!({"a": 1})));
        assert_eq!(partial_json("{\"a\": 1, \"b\":"), Some(json!({"a": 1})));
        assert_eq!(partial_json("{\"a\": tr"), Some(json!({})));
        assert_eq!(partial_json("[1, 2, "), Some(json!([1, 2])));
        assert_eq!(
            partial_json("```json\n{\"n\": [{\"x\": 1}"),
            Some(json!({"n": [{"x": 1}]}))
        );
        assert_eq!(
            partial_json("{\"q\": \"a \\\" b"),
            Some(json!({"q": "a \" b"}))
        );
        assert_eq!(partial_json("Sure! {"), None);
        assert_eq!(partial_json(""), None);
    }

    #[test]
    fn truncated_output_cannot_produce_an_object() {
        assert!(matches!(
            resolve(
                &output(ErrorStrategy::Strict),
                "{\"n\": 1}",
                FinishReason::Length
            ),
            ObjectOutcome::Failure(RunFailure::StructuredOutputTruncated(_))
        ));
    }
}
