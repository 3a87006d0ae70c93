//! Context relevance judged by a model (`context-relevance-scorer`): the judge rates each
//! context piece's relevance (`high`, `medium`, `low`, `none`) and whether the response used
//! it, and names missing context; the score is the mean relevance weight less penalties for
//! unused highly relevant pieces and missing context.

use serde::Deserialize;
use serde_json::{Value, json};

use super::context::{ContextExtractor, ContextSource};
use super::context_relevance_prompts as prompts;
use super::{js, run_text, schema, step};
use crate::agent::scorers::{Judge, Scored, ScorerRun};

/// The reference's scorer id.
pub const ID: &str = "context-relevance-scorer";
/// The reference's scorer name.
pub const NAME: &str = "Context Relevance (LLM)";
/// The reference's scorer description.
pub const DESCRIPTION: &str =
    "Evaluates how relevant and useful the provided context was for generating the agent response";
/// The judge's system message.
pub const INSTRUCTIONS: &str = prompts::INSTRUCTIONS;

/// Options (TOML `context`, `scale`, `penalties`; `context_extractor` is set from Rust). One
/// of `context` and `context_extractor` is required.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContextRelevanceOptions {
    /// The score of perfectly relevant, fully used context (default 1; 0 means 1).
    pub scale: f64,
    /// The context pieces the response was generated with.
    pub context: Option<Vec<String>>,
    /// Computes the context from the run instead of `context`.
    #[serde(skip)]
    pub context_extractor: Option<ContextExtractor>,
    /// The penalty rates (defaults 0.1, 0.15 and 0.5).
    pub penalties: Option<Penalties>,
}

impl Default for ContextRelevanceOptions {
    fn default() -> Self {
        Self {
            scale: 1.0,
            context: None,
            context_extractor: None,
            penalties: None,
        }
    }
}

/// Penalty rates (TOML `unused_high_relevance_context`, `missing_context_per_item`,
/// `max_missing_context_penalty`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Penalties {
    /// Per highly relevant piece the response did not use (default 0.1).
    pub unused_high_relevance_context: Option<f64>,
    /// Per missing piece of context the judge names (default 0.15).
    pub missing_context_per_item: Option<f64>,
    /// The most missing context can cost (default 0.5).
    pub max_missing_context_penalty: Option<f64>,
}

impl ContextRelevanceOptions {
    /// The reference factory's checks.
    pub fn validate(&self) -> Result<(), String> {
        self.source().check(ID, "Context Relevance")
    }

    /// Where the run's context comes from: the extractor, else the `context` option.
    fn source(&self) -> ContextSource<'_> {
        ContextSource::new(&self.context, &self.context_extractor)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Analysis {
    evaluations: Vec<Evaluation>,
    #[serde(default)]
    missing_context: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Evaluation {
    #[serde(rename = "context_index")]
    context_index: f64,
    context_piece: String,
    relevance_level: Relevance,
    was_used: bool,
    reasoning: String,
}

#[derive(Clone, Copy, PartialEq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Relevance {
    High,
    Medium,
    Low,
    None,
}

impl Relevance {
    fn weight(self) -> f64 {
        match self {
            Self::High => 1.0,
            Self::Medium => 0.7,
            Self::Low => 0.3,
            Self::None => 0.0,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::High => "high",
            Self::Medium => "medium",
            Self::Low => "low",
            Self::None => "none",
        }
    }
}

/// The analyze step's answer schema.
fn analyze_schema() -> Value {
    let evaluation = schema::object(
        vec![
            ("context_index", schema::number()),
            ("contextPiece", schema::string()),
            (
                "relevanceLevel",
                schema::string_enum(&["high", "medium", "low", "none"]),
            ),
            ("wasUsed", schema::boolean()),
            ("reasoning", schema::string()),
        ],
        &[
            "context_index",
            "contextPiece",
            "relevanceLevel",
            "wasUsed",
            "reasoning",
        ],
    );
    // zod's `.optional().default([])` puts the default first and keeps the field optional.
    let missing = json!({ "default": [], "type": "array", "items": schema::string() });
    schema::root(schema::object(
        vec![
            ("evaluations", schema::array(evaluation)),
            ("missingContext", missing),
            ("overallAssessment", schema::string()),
        ],
        &["evaluations", "overallAssessment"],
    ))
}

/// Scores a run: analyze, the score, and the judge's reason.
pub async fn score<J: Judge + ?Sized>(
    run: &ScorerRun,
    options: &ContextRelevanceOptions,
    judge: &J,
) -> Result<Scored, String> {
    options.validate()?;
    let user_query = run_text::user_text(&run.input).unwrap_or_default();
    let agent_response = run_text::assistant_text(&run.output).unwrap_or_default();

    // The reference asks for the context afresh in each step; so does this.
    let context = options.source().context_of(run);
    let provided = if context.is_empty() {
        vec!["[No context was provided for evaluation]".to_owned()]
    } else {
        context
    };
    let steps = step::Steps::new(judge, ID, INSTRUCTIONS);
    let (analyze, analysis) = steps
        .ask::<Analysis>(
            "analyze",
            prompts::analyze(&user_query, &agent_response, &provided),
            analyze_schema(),
        )
        .await?;

    let scale = step::scale_or_one(options.scale);
    let score = relevance_score(
        &analysis,
        options,
        options.source().context_of(run).is_empty(),
        scale,
    );

    let reason_prompt = if options.source().context_of(run).is_empty() {
        prompts::no_context_reason(score)
    } else {
        let lines: Vec<prompts::EvaluationLine<'_>> = analysis
            .evaluations
            .iter()
            .map(|e| prompts::EvaluationLine {
                index: e.context_index,
                level: e.relevance_level.name(),
                used: e.was_used,
                piece: &e.context_piece,
                reasoning: &e.reasoning,
            })
            .collect();
        prompts::reason(&user_query, score, &lines, &analysis.missing_context, scale)
    };
    steps.finish(score, None, analyze, reason_prompt).await
}

/// `max(0, mean weight - unused penalty - missing penalty) × scale`, rounded; no context
/// scores the scale (unrounded), no evaluations 1, or 0 when context was missing.
fn relevance_score(
    analysis: &Analysis,
    options: &ContextRelevanceOptions,
    no_context: bool,
    scale: f64,
) -> f64 {
    if no_context {
        return scale;
    }
    let evaluations = &analysis.evaluations;
    if evaluations.is_empty() {
        return if analysis.missing_context.is_empty() {
            1.0
        } else {
            0.0
        };
    }
    let total: f64 = evaluations
        .iter()
        .fold(0.0, |sum, e| sum + e.relevance_level.weight());
    let max_possible = evaluations.len() as f64 * Relevance::High.weight();
    let relevance = if max_possible > 0.0 {
        total / max_possible
    } else {
        0.0
    };
    let unused_high = evaluations
        .iter()
        .filter(|e| e.relevance_level == Relevance::High && !e.was_used)
        .count();
    let penalties = options.penalties.clone().unwrap_or_default();
    let unused_rate = penalties.unused_high_relevance_context.unwrap_or(0.1);
    let missing_rate = penalties.missing_context_per_item.unwrap_or(0.15);
    let missing_cap = penalties.max_missing_context_penalty.unwrap_or(0.5);
    let usage_penalty = unused_high as f64 * unused_rate;
    let missing_penalty = js::min(
        analysis.missing_context.len() as f64 * missing_rate,
        missing_cap,
    );
    let final_score = js::max(0.0, relevance - usage_penalty - missing_penalty);
    js::round_to_two_decimals(final_score * scale)
}
