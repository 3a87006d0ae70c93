//! Scorers: evaluations of a finished run, as the reference's `@mastra/evals` 1.10.2. What a
//! scorer reads (`data.rs`, built from a run by `convert.rs`), the rule-based scorers computed
//! locally (`code/`), the ones a judge model answers (`judged/`), both behind `builtin.rs`;
//! a run's scorers resolved from config and request (`scorer.rs`), sampling (`sampling.rs`)
//! and the stored score (`record.rs`).

pub mod builtin;
pub mod code;
pub mod convert;
pub mod data;
pub mod judged;
pub mod record;
pub mod sampling;
pub mod scorer;

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

pub use data::{DbMessage, ScorerInput, ScorerRun, ToolCallInfo};
pub use record::ScoreRecord;

/// With `return_scorer_data`: what a run's scorers read, and the scores they gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Scoring {
    /// The reference's `scoringData`.
    pub data: ScorerRun,
    /// The scores, in scorer order (a scorer that failed gave none).
    pub scores: Vec<ScoreRecord>,
}

/// What one scorer concluded about a run: the reference's `run()` result without the echoed
/// run (score, reason, each step's result and the prompts a judge was sent).
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Scored {
    /// The score (each scorer's own range; most are 0..=1, judged ones up to their `scale`).
    pub score: f64,
    /// Why, when the scorer gives a reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The `preprocess` step's result, when the scorer has that step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preprocess_step_result: Option<Value>,
    /// The `analyze` step's result, when the scorer has that step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analyze_step_result: Option<Value>,
    /// The prompts sent to the judge, by the reference's key (`preprocessPrompt`,
    /// `analyzePrompt`, `generateReasonPrompt`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub prompts: BTreeMap<String, String>,
}

/// A judge model: the scorer's instructions as the system message and a step's prompt as the
/// user's; the answer either JSON matching a schema or free text.
#[async_trait::async_trait]
pub trait Judge: Send + Sync {
    /// The answer as JSON matching `schema` (the reference's structured output).
    async fn json(&self, instructions: &str, prompt: &str, schema: Value) -> Result<Value, String>;
    /// The answer as text (the reference's `generateReason` steps).
    async fn text(&self, instructions: &str, prompt: &str) -> Result<String, String>;
}
