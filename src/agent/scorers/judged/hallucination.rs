//! Hallucination (`hallucination-scorer`): the judge extracts the response's claims and
//! marks each one the context contradicts or does not support (`yes`); the score is the
//! share of such claims (higher is worse).

use serde::Deserialize;

use super::context::{ContextStep, GetContext, GetContextParams, StepResults};
use super::hallucination_prompts as prompts;
use super::{js, run_text, schema, step};
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

#[derive(Deserialize)]
struct Claims {
    claims: Vec<String>,
}

#[derive(Deserialize)]
struct Verdicts {
    verdicts: Vec<Verdict>,
}

#[derive(Deserialize)]
struct Verdict {
    verdict: String,
}

/// The context for a step: `get_context`'s, else the `context` option, else none.
fn context_for(options: &HallucinationOptions, params: &GetContextParams<'_>) -> Vec<String> {
    match &options.get_context {
        Some(get_context) => get_context.call(params),
        None => options.context.clone().unwrap_or_default(),
    }
}

/// Scores a run: preprocess (claims), analyze (a verdict per claim), the score, and the
/// judge's reason.
pub async fn score<J: Judge + ?Sized>(
    run: &ScorerRun,
    options: &HallucinationOptions,
    judge: &J,
) -> Result<Scored, String> {
    let output = run_text::assistant_text(&run.output).unwrap_or_default();

    let preprocess_prompt = prompts::extract(&output);
    let preprocess = step::ask_json(
        judge,
        INSTRUCTIONS,
        (ID, "preprocess"),
        &preprocess_prompt,
        schema::string_list("claims"),
    )
    .await?;
    let Claims { claims } = step::read((ID, "preprocess"), &preprocess)?;

    let context = context_for(
        options,
        &GetContextParams {
            run,
            results: StepResults {
                preprocess: Some(&preprocess),
                analyze: None,
                generate_score: None,
            },
            score: None,
            step: ContextStep::Analyze,
        },
    );
    let analyze_prompt = prompts::analyze(&claims, &context);
    let analyze = step::ask_json(
        judge,
        INSTRUCTIONS,
        (ID, "analyze"),
        &analyze_prompt,
        schema::string_records("verdicts", &["statement", "verdict", "reason"]),
    )
    .await?;
    let Verdicts { verdicts } = step::read((ID, "analyze"), &analyze)?;

    let scale = step::scale_or_one(options.scale);
    let score = if verdicts.is_empty() {
        0.0
    } else {
        // Only an exact `yes` counts (the reference neither trims nor lowercases here).
        let contradicted = verdicts.iter().filter(|v| v.verdict == "yes").count();
        js::round_to_two_decimals(contradicted as f64 / verdicts.len() as f64 * scale)
    };

    let context = context_for(
        options,
        &GetContextParams {
            run,
            results: StepResults {
                preprocess: Some(&preprocess),
                analyze: Some(&analyze),
                generate_score: Some(score),
            },
            score: Some(score),
            step: ContextStep::GenerateReason,
        },
    );
    let input = run_text::user_text(&run.input).unwrap_or_default();
    let reason_prompt = prompts::reason(&prompts::ReasonFacts {
        input: &input,
        output: &output,
        context: &context,
        score,
        scale,
        verdicts: step::list_field(&analyze, "verdicts"),
    });
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
