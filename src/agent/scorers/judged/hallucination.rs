//! Hallucination (`hallucination-scorer`): the judge extracts the response's claims and
//! marks each one the context contradicts or does not support (`yes`); the score is the
//! share of such claims (higher is worse).

use serde::Deserialize;
use serde_json::Value;

use super::context::{ContextStep, GetContext, GetContextParams, StepResults};
use super::hallucination_prompts as prompts;
use super::step::{Claims, Verdict, Verdicts};
use super::{run_text, step};
use crate::agent::scorers::{Judge, Scored, ScorerRun};

/// The reference's scorer id.
pub const ID: &str = "hallucination-scorer";
/// The reference's scorer name.
pub const NAME: &str = "Hallucination Scorer";
/// The reference's scorer description.
pub const DESCRIPTION: &str =
    "A scorer that evaluates the hallucination of an LLM output to an input";
/// The judge's system message.
pub const INSTRUCTIONS: &str = prompts::INSTRUCTIONS;

/// Options (TOML `scale`, `context`; `get_context` is set from Rust).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HallucinationOptions {
    /// The score of an answer made only of unsupported claims (default 1; 0 means 1).
    pub scale: f64,
    /// The facts to check claims against (default none: every claim is unsupported).
    pub context: Option<Vec<String>>,
    /// Computes the context per step instead of `context`.
    #[serde(skip)]
    pub get_context: Option<GetContext>,
}

impl Default for HallucinationOptions {
    fn default() -> Self {
        Self {
            scale: 1.0,
            context: None,
            get_context: None,
        }
    }
}

/// The context for `step`: `get_context`'s, else the `context` option, else none.
/// `get_context` is given the results so far: the preprocess result, and from
/// `generateReason` on the analyze result and the score.
fn context_for(
    options: &HallucinationOptions,
    run: &ScorerRun,
    step: ContextStep,
    preprocess: &Value,
    analyzed: Option<(&Value, f64)>,
) -> Vec<String> {
    let Some(get_context) = &options.get_context else {
        return options.context.clone().unwrap_or_default();
    };
    let score = analyzed.map(|(_, score)| score);
    get_context.call(&GetContextParams {
        run,
        results: StepResults {
            preprocess: Some(preprocess),
            analyze: analyzed.map(|(analyze, _)| analyze),
            generate_score: score,
        },
        // The reference passes the score on its own too.
        score,
        step,
    })
}

/// Scores a run: preprocess (claims), analyze (a verdict per claim), the score, and the
/// judge's reason.
pub async fn score<J: Judge + ?Sized>(
    run: &ScorerRun,
    options: &HallucinationOptions,
    judge: &J,
) -> Result<Scored, String> {
    let output = run_text::assistant_text(&run.output).unwrap_or_default();

    let steps = step::Steps::new(judge, ID, INSTRUCTIONS);
    let preprocess_prompt = prompts::extract(&output);
    let (preprocess, Claims { claims }) = steps.extract(preprocess_prompt, "claims").await?;

    let context = context_for(options, run, ContextStep::Analyze, &preprocess.result, None);
    let analyze_prompt = prompts::analyze(&claims, &context);
    let (analyze, Verdicts::<Verdict> { verdicts }) = steps
        .verdicts(
            analyze_prompt,
            "verdicts",
            &["statement", "verdict", "reason"],
        )
        .await?;

    let scale = step::scale_or_one(options.scale);
    // Only an exact `yes` counts (the reference neither trims nor lowercases here).
    let score = step::share(&verdicts, |v| v.verdict == "yes", scale).unwrap_or(0.0);

    let analyzed = Some((&analyze.result, score));
    let reason_step = ContextStep::GenerateReason;
    let context = context_for(options, run, reason_step, &preprocess.result, analyzed);
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
