//! The LLM-judged scorers of `@mastra/evals` 1.10.2: each walks the reference's steps
//! (`preprocess`, `analyze`, `generateScore`, `generateReason`), asking a [`Judge`] with the
//! reference's exact instructions, prompts and answer schemas, and computes the score with
//! the reference's formula.
//!
//! The judge owns the structured-output mechanics, as the reference's judge agent does
//! (`tryStreamWithJsonFallback`): it sends the step's schema as `jsonPromptInjection: 'auto'`
//! resolves it (the provider's native response format where supported, else the text
//! `Return your response as JSON matching this schema:…` after the step prompt, what
//! `structured::place` writes for `Placement::Inline`), validates the answer against the
//! schema, and on a missing or invalid answer asks once more with the schema appended to the
//! system message (`Placement::System`); an answer still invalid is an `Err`. The JSON it
//! returns becomes the step's result as it is. `Judge::text` answers `generateReason`.

pub mod answer_relevancy;
mod answer_relevancy_prompts;
pub mod bias;
mod bias_prompts;
pub mod context;
pub mod context_precision;
mod context_precision_prompts;
pub mod context_relevance;
mod context_relevance_prompts;
pub mod faithfulness;
mod faithfulness_prompts;
pub mod hallucination;
mod hallucination_prompts;
mod js;
pub mod prompt_alignment;
mod prompt_alignment_prompts;
mod run_text;
mod schema;
mod step;
pub mod tool_call_accuracy;
mod tool_call_accuracy_prompts;
pub mod toxicity;
mod toxicity_prompts;

#[cfg(test)]
mod tests;

use std::fmt::Display;

use serde::Deserialize;

pub use answer_relevancy::AnswerRelevancyOptions;
pub use bias::BiasOptions;
pub use context::{ContextExtractor, ContextStep, GetContext, GetContextParams, StepResults};
pub use context_precision::ContextPrecisionOptions;
pub use context_relevance::{ContextRelevanceOptions, Penalties};
pub use faithfulness::FaithfulnessOptions;
pub use hallucination::HallucinationOptions;
pub use prompt_alignment::{
    ConversationHistory, EvaluationMode, HistoryLimit, PromptAlignmentOptions,
};
pub use tool_call_accuracy::{AvailableTool, ToolCallAccuracyOptions};
pub use toxicity::ToxicityOptions;

use super::{Judge, Scored, ScorerRun};

/// A judged scorer with its options.
#[derive(Debug, Clone, PartialEq)]
pub enum JudgedScorer {
    /// `answer-relevancy-scorer`.
    AnswerRelevancy(AnswerRelevancyOptions),
    /// `faithfulness-scorer`.
    Faithfulness(FaithfulnessOptions),
    /// `hallucination-scorer`.
    Hallucination(HallucinationOptions),
    /// `toxicity-scorer`.
    Toxicity(ToxicityOptions),
    /// `bias-scorer`.
    Bias(BiasOptions),
    /// `llm-tool-call-accuracy-scorer`.
    ToolCallAccuracy(ToolCallAccuracyOptions),
    /// `context-relevance-scorer`.
    ContextRelevance(ContextRelevanceOptions),
    /// `context-precision-scorer`.
    ContextPrecision(ContextPrecisionOptions),
    /// `prompt-alignment-scorer`.
    PromptAlignment(PromptAlignmentOptions),
}

/// The reference's ids of the judged scorers, as [`JudgedScorer::from_options`] takes them.
pub const IDS: [&str; 9] = [
    answer_relevancy::ID,
    faithfulness::ID,
    hallucination::ID,
    toxicity::ID,
    bias::ID,
    tool_call_accuracy::ID,
    context_relevance::ID,
    context_precision::ID,
    prompt_alignment::ID,
];

impl JudgedScorer {
    /// The scorer named by its reference id, with options read from `options` (a TOML or
    /// JSON table in the options' snake_case field names), checked as the reference's
    /// factory checks them.
    pub fn from_options<'de, D>(id: &str, options: D) -> Result<Self, String>
    where
        D: serde::Deserializer<'de>,
        D::Error: Display,
    {
        fn read<'de, T: Deserialize<'de>, D>(id: &str, options: D) -> Result<T, String>
        where
            D: serde::Deserializer<'de>,
            D::Error: Display,
        {
            T::deserialize(options).map_err(|e| format!("{id}: invalid options: {e}"))
        }
        let scorer = match id {
            answer_relevancy::ID => Self::AnswerRelevancy(read(id, options)?),
            faithfulness::ID => Self::Faithfulness(read(id, options)?),
            hallucination::ID => Self::Hallucination(read(id, options)?),
            toxicity::ID => Self::Toxicity(read(id, options)?),
            bias::ID => Self::Bias(read(id, options)?),
            tool_call_accuracy::ID => Self::ToolCallAccuracy(read(id, options)?),
            context_relevance::ID => Self::ContextRelevance(read(id, options)?),
            context_precision::ID => Self::ContextPrecision(read(id, options)?),
            prompt_alignment::ID => Self::PromptAlignment(read(id, options)?),
            _ => return Err(format!("unknown judged scorer {id:?}")),
        };
        scorer.validate()?;
        Ok(scorer)
    }

    /// The reference's scorer id.
    pub fn id(&self) -> &'static str {
        match self {
            Self::AnswerRelevancy(_) => answer_relevancy::ID,
            Self::Faithfulness(_) => faithfulness::ID,
            Self::Hallucination(_) => hallucination::ID,
            Self::Toxicity(_) => toxicity::ID,
            Self::Bias(_) => bias::ID,
            Self::ToolCallAccuracy(_) => tool_call_accuracy::ID,
            Self::ContextRelevance(_) => context_relevance::ID,
            Self::ContextPrecision(_) => context_precision::ID,
            Self::PromptAlignment(_) => prompt_alignment::ID,
        }
    }

    /// The reference's scorer name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::AnswerRelevancy(_) => answer_relevancy::NAME,
            Self::Faithfulness(_) => faithfulness::NAME,
            Self::Hallucination(_) => hallucination::NAME,
            Self::Toxicity(_) => toxicity::NAME,
            Self::Bias(_) => bias::NAME,
            Self::ToolCallAccuracy(_) => tool_call_accuracy::NAME,
            Self::ContextRelevance(_) => context_relevance::NAME,
            Self::ContextPrecision(_) => context_precision::NAME,
            Self::PromptAlignment(_) => prompt_alignment::NAME,
        }
    }

    /// The reference's scorer description.
    pub fn description(&self) -> &'static str {
        match self {
            Self::AnswerRelevancy(_) => answer_relevancy::DESCRIPTION,
            Self::Faithfulness(_) => faithfulness::DESCRIPTION,
            Self::Hallucination(_) => hallucination::DESCRIPTION,
            Self::Toxicity(_) => toxicity::DESCRIPTION,
            Self::Bias(_) => bias::DESCRIPTION,
            Self::ToolCallAccuracy(_) => tool_call_accuracy::DESCRIPTION,
            Self::ContextRelevance(_) => context_relevance::DESCRIPTION,
            Self::ContextPrecision(_) => context_precision::DESCRIPTION,
            Self::PromptAlignment(_) => prompt_alignment::DESCRIPTION,
        }
    }

    /// The judge's system message, exactly as the reference sends it.
    pub fn instructions(&self) -> &'static str {
        match self {
            Self::AnswerRelevancy(_) => answer_relevancy::INSTRUCTIONS,
            Self::Faithfulness(_) => faithfulness::INSTRUCTIONS,
            Self::Hallucination(_) => hallucination::INSTRUCTIONS,
            Self::Toxicity(_) => toxicity::INSTRUCTIONS,
            Self::Bias(_) => bias::INSTRUCTIONS,
            Self::ToolCallAccuracy(_) => tool_call_accuracy::INSTRUCTIONS,
            Self::ContextRelevance(_) => context_relevance::INSTRUCTIONS,
            Self::ContextPrecision(_) => context_precision::INSTRUCTIONS,
            Self::PromptAlignment(_) => prompt_alignment::INSTRUCTIONS,
        }
    }

    /// Checks the options as the reference's factory does when the scorer is built.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            Self::ContextRelevance(o) => o.validate(),
            Self::ContextPrecision(o) => o.validate(),
            _ => Ok(()),
        }
    }

    /// Scores a finished run, asking `judge`; fails, naming the scorer and the step, where
    /// the reference's run throws.
    pub async fn score<J: Judge + ?Sized>(
        &self,
        run: &ScorerRun,
        judge: &J,
    ) -> Result<Scored, String> {
        match self {
            Self::AnswerRelevancy(o) => answer_relevancy::score(run, o, judge).await,
            Self::Faithfulness(o) => faithfulness::score(run, o, judge).await,
            Self::Hallucination(o) => hallucination::score(run, o, judge).await,
            Self::Toxicity(o) => toxicity::score(run, o, judge).await,
            Self::Bias(o) => bias::score(run, o, judge).await,
            Self::ToolCallAccuracy(o) => tool_call_accuracy::score(run, o, judge).await,
            Self::ContextRelevance(o) => context_relevance::score(run, o, judge).await,
            Self::ContextPrecision(o) => context_precision::score(run, o, judge).await,
            Self::PromptAlignment(o) => prompt_alignment::score(run, o, judge).await,
        }
    }
}
