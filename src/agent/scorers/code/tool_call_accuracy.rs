//! `code-tool-call-accuracy-scorer`: whether the response called the expected tool (only it, in
//! strict mode), or the expected tools in order (exactly those, in strict mode).

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::agent::scorers::{Scored, ScorerRun};

/// The reference's scorer id.
pub const ID: &str = "code-tool-call-accuracy-scorer";
/// The reference's scorer name.
pub const NAME: &str = "Tool Call Accuracy Scorer";

const NO_EXPECTATION: &str = "Either expectedTool or expectedToolOrder must be provided";
const NO_MESSAGES: &str = "Input and output messages cannot be null or empty";

/// The scorer's options: `expected_tool`, `expected_tool_order` or both (the order wins when
/// it is not empty).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallAccuracyOptions {
    /// The tool the response should call.
    #[serde(default)]
    pub expected_tool: Option<String>,
    /// Only that tool, once (with `expected_tool`); exactly these tools in this order (with
    /// `expected_tool_order`).
    #[serde(default)]
    pub strict_mode: bool,
    /// Tools the response should call in this order (others may come between, unless strict).
    #[serde(default)]
    pub expected_tool_order: Option<Vec<String>>,
}

impl ToolCallAccuracyOptions {
    /// The reference factory's check: one of the expectations must be given (an empty tool
    /// name counts as none; an empty order counts as given).
    pub fn validate(&self) -> Result<(), String> {
        if self.expected_tool().is_none() && self.expected_tool_order.is_none() {
            return Err(NO_EXPECTATION.to_owned());
        }
        Ok(())
    }

    /// The reference's description, which names the expectation.
    pub fn description(&self) -> String {
        match &self.expected_tool_order {
            Some(order) => format!(
                "Evaluates whether the LLM called tools in the correct order: [{}]",
                order.join(", ")
            ),
            None => format!(
                "Evaluates whether the LLM selected the correct tool ({}) from the available tools",
                self.expected_tool.as_deref().unwrap_or("undefined")
            ),
        }
    }

    fn expected_tool(&self) -> Option<&str> {
        self.expected_tool.as_deref().filter(|t| !t.is_empty())
    }
}

/// Scores a run.
pub fn score(run: &ScorerRun, options: &ToolCallAccuracyOptions) -> Result<Scored, String> {
    options.validate()?;
    if run.input.input_messages.is_empty() || run.output.is_empty() {
        return Err(NO_MESSAGES.to_owned());
    }
    let calls = run.tool_calls();
    let actual: Vec<&str> = calls.iter().map(|c| c.tool_name.as_str()).collect();
    let strict = options.strict_mode;
    let correct_tool_called = options
        .expected_tool()
        .is_some_and(|expected| called(&actual, expected, strict));
    let correct_order_called = options
        .expected_tool_order
        .as_deref()
        .map(|order| in_order(&actual, order, strict));

    let score = if actual.is_empty() {
        0.0
    } else if let Some(order) = options
        .expected_tool_order
        .as_deref()
        .filter(|o| !o.is_empty())
    {
        f64::from(u8::from(in_order(&actual, order, strict)))
    } else {
        f64::from(u8::from(correct_tool_called))
    };

    // Keys in the reference's order; undefined options are absent there.
    let mut result = Map::new();
    if let Some(expected) = &options.expected_tool {
        result.insert("expectedTool".into(), json!(expected));
    }
    result.insert("actualTools".into(), json!(actual));
    result.insert("strictMode".into(), json!(strict));
    if let Some(order) = &options.expected_tool_order {
        result.insert("expectedToolOrder".into(), json!(order));
    }
    result.insert("hasToolCalls".into(), json!(!actual.is_empty()));
    result.insert("correctToolCalled".into(), json!(correct_tool_called));
    result.insert("toolCallInfos".into(), json!(calls));
    result.insert("correctOrderCalled".into(), json!(correct_order_called));
    Ok(Scored {
        score,
        preprocess_step_result: Some(Value::Object(result)),
        ..Scored::default()
    })
}

/// The expected tool was called (strict: it was the only call).
fn called(actual: &[&str], expected: &str, strict: bool) -> bool {
    if strict {
        actual == [expected]
    } else {
        actual.contains(&expected)
    }
}

/// `checkToolOrder`: strict, the calls are exactly the order; otherwise each expected tool's
/// first call comes after the previous one's.
fn in_order(actual: &[&str], order: &[String], strict: bool) -> bool {
    if strict {
        return actual.len() == order.len() && actual.iter().zip(order).all(|(a, e)| *a == e);
    }
    let mut previous = None;
    for expected in order {
        let Some(index) = actual.iter().position(|a| a == expected) else {
            return false;
        };
        if previous.is_some_and(|p| index <= p) {
            return false;
        }
        previous = Some(index);
    }
    true
}
