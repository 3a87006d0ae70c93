//! Faithfulness (`faithfulness-scorer`): the judge extracts the response's claims and checks
//! each against the context (the `context` option, else the results of the response's tool
//! calls); the score is the share of supported (`yes`) claims.

use serde::Deserialize;

use super::faithfulness_prompts as prompts;
use super::step::{Claims, Verdict, Verdicts};
use super::{run_text, step};
use crate::agent::scorers::{Judge, Scored, ScorerRun};

/// The reference's scorer id.
pub const ID: &str = "faithfulness-scorer";
/// The reference's scorer name.
pub const NAME: &str = "Faithfulness Scorer";
/// The reference's scorer description.
pub const DESCRIPTION: &str =
    "A scorer that evaluates the faithfulness of an LLM output to an input";
/// The judge's system message.
pub const INSTRUCTIONS: &str = prompts::INSTRUCTIONS;

/// Options (TOML `scale`, `context`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FaithfulnessOptions {
    /// The score of a fully faithful answer (default 1; 0 means 1, as the reference's
    /// `scale || 1`).
    pub scale: f64,
    /// The facts to check claims against; without it, `JSON.stringify` of each finished tool
    /// call's result in the response.
    pub context: Option<Vec<String>>,
}

impl Default for FaithfulnessOptions {
    fn default() -> Self {
        Self {
            scale: 1.0,
            context: None,
        }
    }
}

/// Scores a run: preprocess (claims), analyze (a verdict per claim), the score, and the
/// judge's reason.
pub async fn score<J: Judge + ?Sized>(
    run: &ScorerRun,
    options: &FaithfulnessOptions,
    judge: &J,
) -> Result<Scored, String> {
    let output = run_text::assistant_text(&run.output).unwrap_or_default();
    let context = match &options.context {
        Some(context) => context.clone(),
        None => run_text::tool_result_context(&run.output),
    };

    let steps = step::Steps::new(judge, ID, INSTRUCTIONS);
    let preprocess_prompt = prompts::extract(&output);
    let (preprocess, Claims { claims }) = steps.extract(preprocess_prompt, "claims").await?;
    let analyze_prompt = prompts::analyze(&claims, &context);
    let (analyze, Verdicts::<Verdict> { verdicts }) = steps
        .verdicts(analyze_prompt, "verdicts", &["verdict", "reason"])
        .await?;

    let scale = step::scale_or_one(options.scale);
    // Only an exact `yes` counts: the reference compares without trimming or casing.
    let score = step::share(&verdicts, |v| v.verdict == "yes", scale).unwrap_or(0.0);

    let input = run_text::user_text(&run.input).unwrap_or_default();
    let reason_prompt = prompts::reason(&prompts::ReasonFacts {
        input: &input,
        output: &output,
        context: &context,
        score,
        scale,
        verdicts: step::list_field(&analyze.result, "verdicts"),
    });
    steps
        .finish(score, Some(preprocess), analyze, reason_prompt)
        .await
}
