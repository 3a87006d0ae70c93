//! Answer relevancy (`answer-relevancy-scorer`): the judge splits the response into
//! statements, rates each one's relevance to the user's message (`yes`, `unsure`, `no`), and
//! the score is the share of relevant ones, an `unsure` counting `uncertainty_weight`.

use serde::Deserialize;

use super::answer_relevancy_prompts as prompts;
use super::{js, run_text, schema, step};
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
struct Results {
    results: Vec<Verdict>,
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

    let preprocess_prompt = prompts::extract(&output);
    let preprocess = step::ask_json(
        judge,
        INSTRUCTIONS,
        (ID, "preprocess"),
        &preprocess_prompt,
        schema::string_list("statements"),
    )
    .await?;
    let Statements { statements } = step::read((ID, "preprocess"), &preprocess)?;

    let analyze_prompt = prompts::score(&js::quote(&input), &statements);
    let analyze = step::ask_json(
        judge,
        INSTRUCTIONS,
        (ID, "analyze"),
        &analyze_prompt,
        schema::string_records("results", &["result", "reason"]),
    )
    .await?;
    let Results { results } = step::read((ID, "analyze"), &analyze)?;

    let score = relevancy(&results, options);
    let reason_prompt = prompts::reason(
        &input,
        &output,
        score,
        step::list_field(&analyze, "results"),
        options.scale,
    );
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

/// `yes` counts 1 and `unsure` the uncertainty weight (trimmed, any case); the share of the
/// verdicts times the scale, rounded to two decimals. No verdicts score 0.
fn relevancy(results: &[Verdict], options: &AnswerRelevancyOptions) -> f64 {
    if results.is_empty() {
        return 0.0;
    }
    let mut relevant = 0.0;
    for verdict in results {
        match js::lower(js::trim(&verdict.result)).as_str() {
            "yes" => relevant += 1.0,
            "unsure" => relevant += options.uncertainty_weight,
            _ => {}
        }
    }
    let share = relevant / results.len() as f64;
    js::round_to_two_decimals(share * options.scale)
}
