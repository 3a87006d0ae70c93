//! The rule-based scorers of `@mastra/evals` 1.10.2 (`scorers/code`), computed locally: each
//! file ports one scorer, step results and all; `CodeScorer` names one with its options, as a
//! configuration writes it.

pub mod completeness;
pub mod content_similarity;
pub mod keyword_coverage;
pub mod textual_difference;
pub mod tone;
pub mod tool_call_accuracy;

#[cfg(test)]
mod tests;

use serde::Deserialize;
use serde_json::Value;

use super::{Scored, ScorerRun};
// JavaScript's `\s` and `trim` (not Rust's whitespace: U+FEFF in, U+0085 out).
use crate::agent::processors::{is_js_space, js_trim};

pub use completeness::CompletenessOptions;
pub use content_similarity::ContentSimilarityOptions;
pub use keyword_coverage::KeywordCoverageOptions;
pub use textual_difference::TextualDifferenceOptions;
pub use tone::ToneOptions;
pub use tool_call_accuracy::ToolCallAccuracyOptions;

/// A rule-based scorer and its options, tagged by `type` (`type = "tone"`, then the options'
/// fields beside it).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CodeScorer {
    /// `createCompletenessScorer()`.
    Completeness(CompletenessOptions),
    /// `createContentSimilarityScorer(options)`.
    ContentSimilarity(ContentSimilarityOptions),
    /// `createKeywordCoverageScorer()`.
    KeywordCoverage(KeywordCoverageOptions),
    /// `createTextualDifferenceScorer()`.
    TextualDifference(TextualDifferenceOptions),
    /// `createToneScorer(config)`.
    Tone(ToneOptions),
    /// `createToolCallAccuracyScorerCode(options)`.
    ToolCallAccuracy(ToolCallAccuracyOptions),
}

impl CodeScorer {
    /// The reference's scorer id.
    pub fn id(&self) -> &'static str {
        match self {
            Self::Completeness(_) => completeness::ID,
            Self::ContentSimilarity(_) => content_similarity::ID,
            Self::KeywordCoverage(_) => keyword_coverage::ID,
            Self::TextualDifference(_) => textual_difference::ID,
            Self::Tone(_) => tone::ID,
            Self::ToolCallAccuracy(_) => tool_call_accuracy::ID,
        }
    }

    /// The reference's scorer name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Completeness(_) => completeness::NAME,
            Self::ContentSimilarity(_) => content_similarity::NAME,
            Self::KeywordCoverage(_) => keyword_coverage::NAME,
            Self::TextualDifference(_) => textual_difference::NAME,
            Self::Tone(_) => tone::NAME,
            Self::ToolCallAccuracy(_) => tool_call_accuracy::NAME,
        }
    }

    /// The reference's scorer description (tool-call accuracy's names its expectation).
    pub fn description(&self) -> String {
        match self {
            Self::Completeness(_) => completeness::DESCRIPTION.to_owned(),
            Self::ContentSimilarity(_) => content_similarity::DESCRIPTION.to_owned(),
            Self::KeywordCoverage(_) => keyword_coverage::DESCRIPTION.to_owned(),
            Self::TextualDifference(_) => textual_difference::DESCRIPTION.to_owned(),
            Self::Tone(_) => tone::DESCRIPTION.to_owned(),
            Self::ToolCallAccuracy(options) => options.description(),
        }
    }

    /// Whether the reference's factory accepts these options (its construction-time error).
    pub fn validate(&self) -> Result<(), String> {
        match self {
            Self::ToolCallAccuracy(options) => options.validate(),
            _ => Ok(()),
        }
    }

    /// Scores a run; `Err` carries the message of the error the reference throws.
    pub fn score(&self, run: &ScorerRun) -> Result<Scored, String> {
        match self {
            Self::Completeness(options) => completeness::score(run, options),
            Self::ContentSimilarity(options) => content_similarity::score(run, options),
            Self::KeywordCoverage(options) => keyword_coverage::score(run, options),
            Self::TextualDifference(options) => textual_difference::score(run, options),
            Self::Tone(options) => tone::score(run, options),
            Self::ToolCallAccuracy(options) => tool_call_accuracy::score(run, options),
        }
    }
}

/// A number as JavaScript's `JSON.stringify` writes it: integral values without a fraction
/// (`1`, not `1.0`), so step results read like the reference's.
fn num(x: f64) -> Value {
    // 2^53: past it an f64 no longer holds every integer, and JS writes those as floats too.
    if x.fract() == 0.0 && x.abs() < 9_007_199_254_740_992.0 {
        // The guard keeps the cast exact; -0 becomes 0 as JSON.stringify writes it.
        Value::from(x as i64)
    } else {
        Value::from(x)
    }
}
