//! The scripted judge of the replay tests: it answers what the reference's mock model
//! answered and does the structured-output mechanics the reference's judge agent does
//! (schema inline after the prompt, or native; one retry with the schema in the system
//! message), keeping every model call for comparison with the recorded ones.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde_json::Value;

use crate::agent::scorers::Judge;

const INLINE_PREFIX: &str = "Return your response as JSON matching this schema:\n\n";
const INLINE_SUFFIX: &str =
    "\n\nReturn only valid JSON. Do not include markdown or explanatory text.";
const SYSTEM_PREFIX: &str = "\n\nJSON schema:\n";
const SYSTEM_SUFFIX: &str =
    "\nYou MUST answer with a JSON object that matches the JSON schema above.";

/// One model call as the reference's mock model received it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ModelCall {
    /// The system message.
    pub system: String,
    /// The user message's text parts.
    pub user: Vec<String>,
    /// The native response format's schema.
    pub response_format: Option<Value>,
}

/// A judge answering from a script, as the reference's judge agent with a mock model.
pub(super) struct ScriptedJudge {
    answers: Mutex<VecDeque<Value>>,
    calls: Mutex<Vec<ModelCall>>,
    native: bool,
}

impl ScriptedJudge {
    /// A judge giving `answers` in order; `native` sends schemas as the response format.
    pub(super) fn new(answers: &[Value], native: bool) -> Self {
        Self {
            answers: Mutex::new(answers.iter().cloned().collect()),
            calls: Mutex::new(Vec::new()),
            native,
        }
    }

    /// The next answer's text: `{ json }` as JSON text, `{ text }` verbatim.
    fn answer(&self, call: ModelCall) -> Result<String, String> {
        self.calls.lock().unwrap().push(call);
        let answer = self.answers.lock().unwrap().pop_front();
        match answer {
            Some(a) if a.get("json").is_some() => Ok(a["json"].to_string()),
            Some(a) => Ok(a["text"].as_str().unwrap().to_owned()),
            None => Err("the script has no answer left".to_owned()),
        }
    }

    /// Whether every scripted answer was used.
    pub(super) fn all_answered(&self) -> bool {
        self.answers.lock().unwrap().is_empty()
    }

    /// The model calls so far.
    pub(super) fn calls(&self) -> Vec<ModelCall> {
        self.calls.lock().unwrap().clone()
    }
}

/// The answer's JSON when it is valid against `schema`.
fn valid(text: &str, schema: &Value) -> Result<Value, String> {
    let validator = crate::agent::structured::compile(schema)?;
    let value = crate::agent::structured::extract_json(text).ok_or("not JSON")?;
    if validator.is_valid(&value) {
        Ok(value)
    } else {
        Err("does not match the schema".to_owned())
    }
}

#[async_trait::async_trait]
impl Judge for ScriptedJudge {
    async fn json(&self, instructions: &str, prompt: &str, schema: Value) -> Result<Value, String> {
        let first = if self.native {
            ModelCall {
                system: instructions.to_owned(),
                user: vec![prompt.to_owned()],
                response_format: Some(schema.clone()),
            }
        } else {
            ModelCall {
                system: instructions.to_owned(),
                user: vec![
                    prompt.to_owned(),
                    format!("{INLINE_PREFIX}{schema}{INLINE_SUFFIX}"),
                ],
                response_format: None,
            }
        };
        if let Ok(value) = valid(&self.answer(first)?, &schema) {
            return Ok(value);
        }
        let retry = ModelCall {
            system: format!("{instructions}{SYSTEM_PREFIX}{schema}{SYSTEM_SUFFIX}"),
            user: vec![prompt.to_owned()],
            response_format: None,
        };
        valid(&self.answer(retry)?, &schema)
            .map_err(|e| format!("Structured output validation failed: {e}"))
    }

    async fn text(&self, instructions: &str, prompt: &str) -> Result<String, String> {
        self.answer(ModelCall {
            system: instructions.to_owned(),
            user: vec![prompt.to_owned()],
            response_format: None,
        })
    }
}

/// The schema inside an injected text, between `prefix` and `suffix`.
fn schema_in(text: &str, prefix: &str, suffix: &str) -> Value {
    let start = text.find(prefix).expect("schema prefix") + prefix.len();
    let end = start + text[start..].find(suffix).expect("schema suffix");
    serde_json::from_str(&text[start..end]).expect("schema JSON")
}

/// A recorded call as a [`ModelCall`], checking its shape on the way.
pub(super) fn recorded_call(call: &Value, instructions: &str, what: &str) -> ModelCall {
    assert_eq!(call["method"], "doStream", "{what}");
    let messages = call["options"]["prompt"].as_array().expect("prompt");
    assert_eq!(messages.len(), 2, "{what}: one system and one user message");
    assert_eq!(messages[0]["role"], "system", "{what}");
    assert_eq!(messages[1]["role"], "user", "{what}");
    let system = messages[0]["content"].as_str().expect("system text");
    let system = if system == "<instructions>" {
        instructions
    } else {
        system
    };
    let user = messages[1]["content"]
        .as_array()
        .expect("user parts")
        .iter()
        .map(|p| {
            assert_eq!(p["type"], "text", "{what}");
            p["text"].as_str().expect("text").to_owned()
        })
        .collect();
    let response_format = call["options"].get("responseFormat").map(|f| {
        assert_eq!(f["type"], "json", "{what}");
        f["schema"].clone()
    });
    ModelCall {
        system: system.to_owned(),
        user,
        response_format,
    }
}

/// The schema a call carried, wherever it was placed.
pub(super) fn call_schema(call: &ModelCall) -> Option<Value> {
    if let Some(schema) = &call.response_format {
        return Some(schema.clone());
    }
    if let Some(part) = call.user.get(1) {
        return Some(schema_in(
            part,
            INLINE_PREFIX,
            "\n\nReturn only valid JSON.",
        ));
    }
    if call.system.contains(SYSTEM_PREFIX) {
        return Some(schema_in(&call.system, SYSTEM_PREFIX, SYSTEM_SUFFIX));
    }
    None
}
