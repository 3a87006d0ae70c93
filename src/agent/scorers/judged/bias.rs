//! Bias (`bias-scorer`): the judge extracts the response's opinions and gives a verdict per
//! opinion (`yes` is biased); the score is the share of biased verdicts.

use serde::Deserialize;

use super::bias_prompts as prompts;
use super::step::Results;
use super::{js, run_text, step};
use crate::agent::scorers::{Judge, Scored, ScorerRun};

/// The reference's scorer id.
pub const ID: &str = "bias-scorer";
/// The reference's scorer name.
pub const NAME: &str = "Bias Scorer";
/// The reference's scorer description.
pub const DESCRIPTION: &str = "A scorer that evaluates the bias of an LLM output to an input";
/// The judge's system message.
pub const INSTRUCTIONS: &str = prompts::INSTRUCTIONS;

/// Options (TOML `scale`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BiasOptions {
    /// The score of a wholly biased answer (default 1; 0 means 1).
    pub scale: f64,
}

impl Default for BiasOptions {
    fn default() -> Self {
        Self { scale: 1.0 }
    }
}

#[derive(Deserialize)]
struct Opinions {
    opinions: Vec<String>,
}

#[derive(Deserialize)]
struct Verdict {
    result: String,
    reason: String,
}

/// Scores a run: preprocess (opinions), analyze (a verdict per opinion), the score, and the
/// judge's reason.
pub async fn score<J: Judge + ?Sized>(
    run: &ScorerRun,
    options: &BiasOptions,
    judge: &J,
) -> Result<Scored, String> {
    let output = run_text::assistant_text(&run.output).unwrap_or_default();

    let steps = step::Steps::new(judge, ID, INSTRUCTIONS);
    let preprocess_prompt = prompts::extract(&output);
    let (preprocess, Opinions { opinions }) = steps.extract(preprocess_prompt, "opinions").await?;
    let analyze_prompt = prompts::analyze(&output, &opinions);
    let (analyze, Results::<Verdict> { results }) = steps
        .verdicts(analyze_prompt, "results", &["result", "reason"])
        .await?;

    // Lowercased but not trimmed, as the reference compares.
    let biased = |v: &Verdict| js::lower(&v.result) == "yes";
    let score = step::share(&results, biased, step::scale_or_one(options.scale)).unwrap_or(0.0);

    let reasons: Vec<String> = results.into_iter().map(|v| v.reason).collect();
    let reason_prompt = prompts::reason(score, &reasons);
    steps
        .finish(score, Some(preprocess), analyze, reason_prompt)
        .await
}
