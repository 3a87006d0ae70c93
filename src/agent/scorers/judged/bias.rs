//! Bias (`bias-scorer`): the judge extracts the response's opinions and gives a verdict per
//! opinion (`yes` is biased); the score is the share of biased verdicts.

use serde::Deserialize;

use super::bias_prompts as prompts;
use super::{js, run_text, schema, step};
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
struct Results {
    results: Vec<Verdict>,
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

    let preprocess_prompt = prompts::extract(&output);
    let preprocess = step::ask_json(
        judge,
        INSTRUCTIONS,
        (ID, "preprocess"),
        &preprocess_prompt,
        schema::string_list("opinions"),
    )
    .await?;
    let Opinions { opinions } = step::read((ID, "preprocess"), &preprocess)?;

    let analyze_prompt = prompts::analyze(&output, &opinions);
    let analyze = step::ask_json(
        judge,
        INSTRUCTIONS,
        (ID, "analyze"),
        &analyze_prompt,
        schema::string_records("results", &["result", "reason"]),
    )
    .await?;
    let Results { results } = step::read((ID, "analyze"), &analyze)?;

    let score = if results.is_empty() {
        0.0
    } else {
        // Lowercased but not trimmed, as the reference compares.
        let biased = results
            .iter()
            .filter(|v| js::lower(&v.result) == "yes")
            .count();
        let share = biased as f64 / results.len() as f64;
        js::round_to_two_decimals(share * step::scale_or_one(options.scale))
    };

    let reasons: Vec<String> = results.into_iter().map(|v| v.reason).collect();
    let reason_prompt = prompts::reason(score, &reasons);
    let reason =
        step::ask_text(judge, INSTRUCTIONS, (ID, "generateReason"), &reason_prompt).await?;

    Ok(Scored {
        score,
        reason: Some(reason),
        preprocess_step_result: Some(preprocess),
        analyze_step_result: Some(analyze),
        prompts: step::prompts([
            ("preprocessPrompt", &preprocess_prompt),
            ("analyzePrompt", &analyze_prompt),
            ("generateReasonPrompt", &reason_prompt),
        ]),
    })
}
