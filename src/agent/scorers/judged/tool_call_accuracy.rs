//! Tool-call accuracy judged by a model (`llm-tool-call-accuracy-scorer`): the run's tool
//! calls are listed, the judge rates each one's fit to the user's request and names tools
//! that should have been called; the score is the share of appropriate calls (with no calls,
//! 1 unless a tool was missing).

use serde::Deserialize;
use serde_json::json;

use super::tool_call_accuracy_prompts as prompts;
use super::{run_text, schema, step};
use crate::agent::scorers::{Judge, Scored, ScorerRun};

/// The reference's scorer id.
pub const ID: &str = "llm-tool-call-accuracy-scorer";
/// The reference's scorer name.
pub const NAME: &str = "Tool Call Accuracy (LLM)";
/// The reference's scorer description.
pub const DESCRIPTION: &str =
    "Evaluates whether an agent selected appropriate tools for the given task using LLM analysis";
/// The judge's system message.
pub const INSTRUCTIONS: &str = prompts::INSTRUCTIONS;

/// Options (TOML `available_tools = [{ id = "…", description = "…" }]`, required).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallAccuracyOptions {
    /// The tools the agent could call, as the judge is told of them.
    pub available_tools: Vec<AvailableTool>,
}

/// A tool the agent could call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AvailableTool {
    /// Its id (the name the model calls it by).
    pub id: String,
    /// What it does.
    pub description: String,
}

#[derive(Deserialize)]
struct Analysis {
    evaluations: Vec<Evaluation>,
    #[serde(rename = "missingTools", default)]
    missing_tools: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct Evaluation {
    #[serde(rename = "wasAppropriate")]
    was_appropriate: bool,
}

/// The analyze step's answer schema.
fn analyze_schema() -> serde_json::Value {
    let evaluation = schema::object(
        vec![
            ("toolCalled", schema::string()),
            ("wasAppropriate", schema::boolean()),
            ("reasoning", schema::string()),
        ],
        &["toolCalled", "wasAppropriate", "reasoning"],
    );
    schema::root(schema::object(
        vec![
            ("evaluations", schema::array(evaluation)),
            ("missingTools", schema::array(schema::string())),
        ],
        &["evaluations"],
    ))
}

/// Scores a run: preprocess (the tool calls, no judge), analyze, the score, and the judge's
/// reason.
pub async fn score<J: Judge + ?Sized>(
    run: &ScorerRun,
    options: &ToolCallAccuracyOptions,
    judge: &J,
) -> Result<Scored, String> {
    if run.input.input_messages.is_empty() || run.output.is_empty() {
        return Err(step::failure(
            ID,
            "preprocess",
            "Input and output messages cannot be null or empty",
        ));
    }
    let (actual_tools, tool_call_infos) = run_text::tool_calls(&run.output);
    // The preprocess step lists the tool calls without asking the judge.
    let preprocess = step::StepResult {
        prompt: None,
        result: json!({
            "actualTools": actual_tools,
            "hasToolCalls": !actual_tools.is_empty(),
            "toolCallInfos": tool_call_infos,
        }),
    };

    let user_input = run_text::user_text(&run.input).unwrap_or_default();
    let agent_response = run_text::assistant_text(&run.output).unwrap_or_default();
    let definitions: Vec<String> = options
        .available_tools
        .iter()
        .map(|tool| format!("{}: {}", tool.id, tool.description))
        .collect();
    let analyze_prompt = prompts::analyze(
        &user_input,
        &agent_response,
        &actual_tools,
        &definitions.join("\n"),
    );
    let steps = step::Steps::new(judge, ID, INSTRUCTIONS);
    let (analyze, analysis) = steps
        .ask::<Analysis>("analyze", analyze_prompt, analyze_schema())
        .await?;

    // With no calls judged, the score is 1 unless the judge names a tool that was missed.
    let missed = analysis
        .missing_tools
        .as_ref()
        .is_some_and(|m| !m.is_empty());
    let none_judged = if missed { 0.0 } else { 1.0 };
    // The share as it is: this scorer has no scale.
    let appropriate = |e: &Evaluation| e.was_appropriate;
    let score = step::share(&analysis.evaluations, appropriate, 1.0).unwrap_or(none_judged);

    let reason_prompt = prompts::reason(
        &user_input,
        score,
        step::list_field(&analyze.result, "evaluations"),
        step::list_field(&analyze.result, "missingTools"),
    );
    steps
        .finish(score, Some(preprocess), analyze, reason_prompt)
        .await
}
