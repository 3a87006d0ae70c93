//! Context precision (`context-precision-scorer`): the judge says which context pieces help
//! produce the response (`yes`); the score is their mean average precision, so relevant
//! pieces early in the list count more.

use std::cmp::Ordering;

use serde::Deserialize;
use serde_json::Value;

use super::context::{ContextExtractor, ContextSource};
use super::context_precision_prompts as prompts;
use super::step::Verdicts;
use super::{js, run_text, schema, step};
use crate::agent::scorers::{Judge, Scored, ScorerRun};

/// The reference's scorer id.
pub const ID: &str = "context-precision-scorer";
/// The reference's scorer name.
pub const NAME: &str = "Context Precision Scorer";
/// The reference's scorer description.
pub const DESCRIPTION: &str = "A scorer that evaluates the relevance and precision of retrieved context nodes for generating expected outputs";
/// The judge's system message.
pub const INSTRUCTIONS: &str = prompts::INSTRUCTIONS;

/// Options (TOML `context`, `scale`; `context_extractor` is set from Rust). One of
/// `context` and `context_extractor` is required.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContextPrecisionOptions {
    /// The score of a perfectly ordered, wholly relevant context (default 1; 0 means 1).
    pub scale: f64,
    /// The retrieved context pieces, in retrieval order.
    pub context: Option<Vec<String>>,
    /// Computes the context from the run instead of `context`.
    #[serde(skip)]
    pub context_extractor: Option<ContextExtractor>,
}

impl Default for ContextPrecisionOptions {
    fn default() -> Self {
        Self {
            scale: 1.0,
            context: None,
            context_extractor: None,
        }
    }
}

impl ContextPrecisionOptions {
    /// The reference factory's checks.
    pub fn validate(&self) -> Result<(), String> {
        self.source().check(ID, "Context Precision")
    }

    /// Where the run's context comes from: the extractor, else the `context` option.
    fn source(&self) -> ContextSource<'_> {
        ContextSource::new(&self.context, &self.context_extractor)
    }
}

#[derive(Deserialize)]
struct Verdict {
    context_index: f64,
    verdict: String,
}

/// The analyze step's answer schema.
fn analyze_schema() -> Value {
    let verdict = schema::object(
        vec![
            ("context_index", schema::number()),
            ("verdict", schema::string()),
            ("reason", schema::string()),
        ],
        &["context_index", "verdict", "reason"],
    );
    schema::root(schema::object(
        vec![("verdicts", schema::array(verdict))],
        &["verdicts"],
    ))
}

/// Scores a run: analyze, the score, and the judge's reason.
pub async fn score<J: Judge + ?Sized>(
    run: &ScorerRun,
    options: &ContextPrecisionOptions,
    judge: &J,
) -> Result<Scored, String> {
    options.validate()?;
    let input = run_text::user_text(&run.input).unwrap_or_default();
    let output = run_text::assistant_text(&run.output).unwrap_or_default();

    let context = options.source().context_of(run);
    if context.is_empty() {
        return Err(step::failure(
            ID,
            "analyze",
            "No context available for evaluation",
        ));
    }
    let steps = step::Steps::new(judge, ID, INSTRUCTIONS);
    let (mut analyze, Verdicts::<Verdict> { mut verdicts }) = steps
        .ask(
            "analyze",
            prompts::analyze(&input, &output, &context),
            analyze_schema(),
        )
        .await?;

    // The reference sorts the verdicts in place, so its analyze result, and the verdicts
    // the reason prompt shows, come out in context order (a stable sort).
    verdicts.sort_by(|a, b| by_index(a.context_index, b.context_index));
    if let Some(Value::Array(items)) = analyze.result.get_mut("verdicts") {
        items.sort_by(|a, b| by_index(index_of(a), index_of(b)));
    }
    let scale = step::scale_or_one(options.scale);
    let score = mean_average_precision(&verdicts, scale);

    let context = options.source().context_of(run);
    let reason_prompt = prompts::reason(&prompts::ReasonFacts {
        input: &input,
        output: &output,
        context: &context,
        score,
        scale,
        verdicts: step::list_field(&analyze.result, "verdicts"),
    });
    steps.finish(score, None, analyze, reason_prompt).await
}

/// The reference's comparator `a - b`: equal (in place) unless one is smaller.
fn by_index(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b).unwrap_or(Ordering::Equal)
}

/// A verdict's `context_index` (validated a number).
fn index_of(verdict: &Value) -> f64 {
    verdict
        .get("context_index")
        .and_then(Value::as_f64)
        .unwrap_or(f64::NAN)
}

/// The mean of the precision at each relevant position, times the scale, rounded; 0 without
/// relevant verdicts.
fn mean_average_precision(sorted: &[Verdict], scale: f64) -> f64 {
    let mut sum_precision = 0.0;
    let mut relevant = 0usize;
    for (i, verdict) in sorted.iter().enumerate() {
        // Lowercased, then trimmed, as the reference compares.
        if js::trim(&js::lower(&verdict.verdict)) == "yes" {
            relevant += 1;
            sum_precision += relevant as f64 / (i + 1) as f64;
        }
    }
    if relevant == 0 {
        return 0.0;
    }
    js::round_to_two_decimals(sum_precision / relevant as f64 * scale)
}
