//! Answer relevancy (`answer-relevancy-scorer`): the judge splits the response into
//! statements, rates each one's relevance to the user's message (`yes`, `unsure`, `no`), and
//! the score is the share of relevant ones, an `unsure` counting `uncertainty_weight`.

use serde::Deserialize;

use super::answer_relevancy_prompts as prompts;
use super::step::Results;
use super::{js, run_text, step};
use crate::agent::scorers::{Judge, Scored, ScorerRun};

/// The reference's scorer id.
pub const ID: &str = "answer-relevancy-scorer";
/// The reference's scorer name.
pub const NAME: &str = "Answer Relevancy Scorer";
/// The reference's scorer description.
pub const DESCRIPTION: &str = "A scorer that evaluates the relevancy of an LLM output to an input";
/// The judge's system message.
pub const INSTRUCTIONS: &str = prompts::INSTRUCTIONS;

/// Options (TOML `uncertainty_weight`, `scale`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AnswerRelevancyOptions {
    /// What an `unsure` verdict counts for (default 0.3).
    pub uncertainty_weight: f64,
    /// The score of a fully relevant answer (default 1).
    pub scale: f64,
}

impl Default for AnswerRelevancyOptions {
    fn default() -> Self {
        Self {
            uncertainty_weight: 0.3,
            scale: 1.0,
        }
    }
}

#[derive(Deserialize)]
struct Statements {
    statements: Vec<String>,
}

#[derive(Deserialize)]
struct Verdict {
    result: String,
}

/// Scores a run: preprocess (statements), analyze (a verdict per statement), the score,
/// and the judge's reason.
pub async fn score<J: Judge + ?Sized>(
    run: &ScorerRun,
    options: &AnswerRelevancyOptions,
    judge: &J,
) -> Result<Scored, String> {
    let output = run_text::assistant_text(&run.output).unwrap_or_default();
    let input = run_text::user_text(&run.input).unwrap_or_default();

    let steps = step::Steps::new(judge, ID, INSTRUCTIONS);
    let preprocess_prompt = prompts::extract(&output);
    let (preprocess, Statements { statements }) =
        steps.extract(preprocess_prompt, "statements").await?;
    let analyze_prompt = prompts::score(&js::quote(&input), &statements);
    let (analyze, Results::<Verdict> { results }) = steps
        .verdicts(analyze_prompt, "results", &["result", "reason"])
        .await?;

    let score = relevancy(&results, options);
    let reason_prompt = prompts::reason(
        &input,
        &output,
        score,
        step::list_field(&analyze.result, "results"),
        options.scale,
    );
    steps
        .finish(score, Some(preprocess), analyze, reason_prompt)
        .await
}

/// `yes` counts 1 and `unsure` the uncertainty weight (trimmed, any case); the share of the
/// verdicts times the scale, rounded to two decimals. No verdicts score 0.
fn relevancy(results: &[Verdict], options: &AnswerRelevancyOptions) -> f64 {
    let weight = |verdict: &Verdict| match js::lower(js::trim(&verdict.result)).as_str() {
        "yes" => 1.0,
        "unsure" => options.uncertainty_weight,
        _ => 0.0,
    };
    step::weighted_share(results, weight, options.scale).unwrap_or(0.0)
}
