//! Structured output: where the schema reaches the model (native response format, the system
//! prompt, the latest user message, or a separate structuring model), with the reference's
//! exact texts, and how the final text becomes a validated object (or a warning, a fallback or
//! an error, per the request's strategy).

use serde_json::Value;

use super::error::RunFailure;
use super::message;
use super::request::{ErrorStrategy, Injection, StructuredOutput};
use super::state::StepRecord;
use crate::model::{ChatMessage, ContentPart, FinishReason, ResponseFormat};

/// Where the schema goes for a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// The provider's `response_format`.
    Native,
    /// Appended to the first system message.
    System,
    /// A text part of the latest user message.
    Inline,
    /// The loop runs freely; a separate model structures the answer afterwards.
    Structurer,
}

/// The placement a request asks for, given whether the provider has native support.
pub fn placement(output: &StructuredOutput, native_supported: bool) -> Placement {
    if output.model.is_some() {
        return Placement::Structurer;
    }
    match output.injection {
        Some(Injection::Native) => Placement::Native,
        Some(Injection::System) => Placement::System,
        Some(Injection::Inline) => Placement::Inline,
        Some(Injection::Auto) if native_supported => Placement::Native,
        Some(Injection::Auto) => Placement::Inline,
        None if native_supported => Placement::Native,
        None => Placement::System,
    }
}

/// The native response format for a schema (strict, as the reference asks OpenAI for; the
/// provider option `openai.strictJsonSchema: false` turns it off).
pub fn response_format(output: &StructuredOutput) -> ResponseFormat {
    ResponseFormat::JsonSchema {
        name: "response".to_owned(),
        schema: output.schema.clone(),
        strict: true,
    }
}

/// Puts the schema (or the caller's instructions) where `placement` says, with the
/// reference's texts. The structuring model's own call is built by [`structuring_request`].
pub fn place(output: &StructuredOutput, placement: Placement, messages: &mut Vec<ChatMessage>) {
    let schema = output.schema.to_string();
    match placement {
        // The reference ignores instructions in native mode; agentd honours them where the
        // SYSTEM placement would put them.
        Placement::Native => {
            if let Some(instructions) = &output.instructions {
                message::append_to_first_system(messages, instructions);
            }
        }
        Placement::System => {
            let text = output.instructions.clone().unwrap_or_else(|| {
                format!(
                    "JSON schema:\n{schema}\nYou MUST answer with a JSON object that matches the JSON schema above."
                )
            });
            message::append_to_first_system(messages, &text);
        }
        Placement::Inline => {
            let text = output.instructions.clone().unwrap_or_else(|| {
                format!(
                    "Return your response as JSON matching this schema:\n\n{schema}\n\nReturn only valid JSON. Do not include markdown or explanatory text."
                )
            });
            match messages.iter_mut().rev().find_map(|m| match m {
                ChatMessage::User { content } => Some(content),
                _ => None,
            }) {
                Some(content) => content.push(ContentPart::Text(text)),
                None => messages.push(ChatMessage::user(text)),
            }
        }
        Placement::Structurer => message::append_to_first_system(
            messages,
            &format!(
                "Your response will be processed by another agent to extract structured data. Please ensure your response contains comprehensive information for all the following fields that will be extracted:\n\n{schema}\n\n\nYou don't need to format your response as JSON unless the user asks you to. Just ensure your natural language response includes relevant information for each field in the schema above."
            ),
        ),
    }
}

/// The structuring model's system and user messages (the reference's
/// `structured-output-structurer` agent), from the run's steps.
pub fn structuring_request(output: &StructuredOutput, steps: &[StepRecord]) -> Vec<ChatMessage> {
    let system = output.instructions.clone().unwrap_or_else(|| {
        let pretty = serde_json::to_string_pretty(&output.schema).unwrap_or_default();
        format!(
            "You are a data structuring specialist. Your job is to convert unstructured text into a specific JSON format.\n\nTASK: Convert the provided unstructured text into valid JSON that matches the following schema:\n{pretty}\n\nREQUIREMENTS:\n- Return ONLY valid JSON, no additional text or explanation\n- Extract relevant information from the input text\n- If information is missing, use reasonable defaults or null values\n- Maintain data types as specified in the schema\n- Be consistent and accurate in your conversions\n\nThe input text may be in any format (sentences, bullet points, paragraphs, etc.). Extract the relevant data and structure it according to the schema."
        )
    });
    let reasoning: String = steps.iter().map(|s| s.reasoning.as_str()).collect();
    let text: String = steps.iter().map(|s| s.text.as_str()).collect();
    let calls: Vec<String> = steps
        .iter()
        .flat_map(|s| &s.tool_calls)
        .map(|c| format!("## {}\n### Input: {}\n### Output: ", c.name, c.args))
        .collect();
    let results: Vec<String> = steps
        .iter()
        .flat_map(|s| &s.tool_results)
        .filter(|r| r.is_output())
        .map(|r| {
            let pretty = serde_json::to_string_pretty(&r.result).unwrap_or_default();
            format!("{}: {pretty}", r.name)
        })
        .collect();
    let mut sections = Vec::new();
    if !reasoning.is_empty() {
        sections.push(format!("# Assistant Reasoning\n{reasoning}"));
    }
    if !calls.is_empty() {
        sections.push(format!("# Tool Calls\n{}", calls.join("\n")));
    }
    if !results.is_empty() {
        sections.push(format!("# Tool Results\n{}", results.join("\n")));
    }
    if !text.is_empty() {
        sections.push(format!("# Assistant Response\n{text}"));
    }
    let user = format!(
        "Extract and structure the key information from the following text according to the specified schema. Keep the original meaning and details. Rely on the provided text and conversation history.\n\n{}",
        sections.join("\n\n")
    );
    vec![ChatMessage::system(system), ChatMessage::user(user)]
}

/// Compiles a schema; the error names what is wrong with it.
pub fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::validator_for(schema).map_err(|e| format!("invalid JSON Schema: {e}"))
}

/// The JSON in a model's answer: the whole text, the body of a ```json fence, or (as the
/// reference) the last balanced `{…}` object in text that does not start as JSON.
pub fn extract_json(text: &str) -> Option<Value> {
    let trimmed = text.trim();
    if let Ok(value) = serde_json::from_str(trimmed) {
        return Some(value);
    }
    let fenced = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|rest| rest.strip_suffix("```"));
    if let Some(body) = fenced {
        return serde_json::from_str(body.trim()).ok();
    }
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return None;
    }
    serde_json::from_str(last_balanced_object(trimmed)?).ok()
}

/// The last top-level `{…}` of `text`, braces inside strings not counted.
fn last_balanced_object(text: &str) -> Option<&str> {
    let (mut depth, mut start, mut last) = (0usize, None, None);
    let (mut in_string, mut escaped) = (false, false);
    for (i, c) in text.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '"' => in_string = !in_string,
            _ if in_string => {}
            '{' => {
                if depth == 0 {
                    start = Some(i);
                }
                depth += 1;
            }
            '}' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    last = start.map(|s| &text[s..=i]);
                }
            }
            _ => {}
        }
    }
    last
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
    on_failure(output, problem)
}

/// What a failure to produce the object yields under the request's strategy.
pub fn on_failure(output: &StructuredOutput, problem: RunFailure) -> ObjectOutcome {
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
            injection: None,
            model: None,
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
        // As the reference: the last balanced object of text around it ("}" in strings kept).
        assert_eq!(
            extract_json("Here: {\"n\": 1} then {\"s\": \"a}b\", \"n\": 5}."),
            Some(json!({"s": "a}b", "n": 5}))
        );
        assert_eq!(extract_json("{\"n\": 1} trailing"), None);
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

    fn text(m: &ChatMessage) -> String {
        match m {
            ChatMessage::System { content } => content.clone(),
            ChatMessage::User { content } => content
                .iter()
                .map(|p| match p {
                    ContentPart::Text(t) => t.clone(),
                    _ => String::new(),
                })
                .collect::<Vec<_>>()
                .join("|"),
            _ => String::new(),
        }
    }

    #[test]
    fn placements_use_the_reference_texts() {
        let mut o = output(ErrorStrategy::Strict);
        o.schema = json!({"type": "object"});
        let base = || {
            vec![
                ChatMessage::system("You are test."),
                ChatMessage::user("hi"),
            ]
        };
        let mut m = base();
        place(&o, Placement::System, &mut m);
        assert_eq!(
            text(&m[0]),
            "You are test.\n\nJSON schema:\n{\"type\":\"object\"}\nYou MUST answer with a JSON object that matches the JSON schema above."
        );
        let mut m = base();
        place(&o, Placement::Inline, &mut m);
        assert_eq!(
            text(&m[1]),
            "hi|Return your response as JSON matching this schema:\n\n{\"type\":\"object\"}\n\nReturn only valid JSON. Do not include markdown or explanatory text."
        );
        o.instructions = Some("INSTR".into());
        let mut m = base();
        place(&o, Placement::System, &mut m);
        assert_eq!(text(&m[0]), "You are test.\n\nINSTR");
        let mut m = vec![ChatMessage::user("hi")];
        place(&o, Placement::Native, &mut m);
        assert_eq!(text(&m[0]), "INSTR", "a system message is created");
        assert_eq!(placement(&o, true), Placement::Native);
        assert_eq!(placement(&o, false), Placement::System);
        o.injection = Some(Injection::Auto);
        assert_eq!(placement(&o, false), Placement::Inline);
        o.model = Some("p/m".into());
        assert_eq!(placement(&o, true), Placement::Structurer);
    }

    #[test]
    fn the_structuring_prompt_has_the_reference_sections() {
        use crate::agent::state::{CallRecord, ResultRecord};
        let o = output(ErrorStrategy::Strict);
        let step = |text: &str, calls, results| StepRecord {
            text: text.into(),
            tool_calls: calls,
            tool_results: results,
            finish_reason: FinishReason::Stop,
            ..StepRecord::empty(0)
        };
        let call = CallRecord {
            id: "c".into(),
            name: "echo".into(),
            args: json!({"text": "weather?"}),
            args_error: None,
        };
        let result = ResultRecord {
            id: "c".into(),
            name: "echo".into(),
            args: json!({}),
            result: json!({"echoed": "weather?"}),
            is_error: false,
            model_output: None,
        };
        let steps = [
            step("", vec![call], vec![result]),
            step("It is 21 degrees in Paris.", vec![], vec![]),
        ];
        let m = structuring_request(&o, &steps);
        assert!(text(&m[0]).starts_with("You are a data structuring specialist."));
        assert_eq!(
            text(&m[1]),
            "Extract and structure the key information from the following text according to the specified schema. Keep the original meaning and details. Rely on the provided text and conversation history.\n\n# Tool Calls\n## echo\n### Input: {\"text\":\"weather?\"}\n### Output: \n\n# Tool Results\necho: {\n  \"echoed\": \"weather?\"\n}\n\n# Assistant Response\nIt is 21 degrees in Paris."
        );
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
