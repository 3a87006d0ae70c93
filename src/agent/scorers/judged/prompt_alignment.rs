//! Prompt alignment judged by a model (`prompt-alignment-scorer`): the judge scores the
//! response's intent alignment, requirements fulfilment, completeness and appropriateness
//! against the user's prompt, the system prompt or both; the score is their weighted sum.

use serde::Deserialize;
use serde_json::Value;

use super::prompt_alignment_prompts as prompts;
use super::{js, run_text, schema, step};
use crate::agent::scorers::{Judge, Scored, ScorerRun};

/// The reference's scorer id.
pub const ID: &str = "prompt-alignment-scorer";
/// The reference's scorer name.
pub const NAME: &str = "Prompt Alignment (LLM)";
/// The reference's scorer description.
pub const DESCRIPTION: &str = "Evaluates how well the agent response aligns with the intent and requirements of the user prompt";
/// The judge's system message.
pub const INSTRUCTIONS: &str = prompts::INSTRUCTIONS;

/// How many remembered messages the history shows by default.
const DEFAULT_HISTORY_MESSAGES: u32 = 10;

/// Options (TOML `scale`, `evaluation_mode`, `include_conversation_history`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PromptAlignmentOptions {
    /// The score of a perfectly aligned response (default 1; 0 means 1).
    pub scale: f64,
    /// Whose prompt the response is judged against (default `both`).
    pub evaluation_mode: EvaluationMode,
    /// Shows the judge the remembered conversation: `true` (the last 10 messages) or
    /// `{ max_messages = n }`; off by default.
    pub include_conversation_history: Option<ConversationHistory>,
}

impl Default for PromptAlignmentOptions {
    fn default() -> Self {
        Self {
            scale: 1.0,
            evaluation_mode: EvaluationMode::Both,
            include_conversation_history: None,
        }
    }
}

/// Whose prompt the response is judged against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EvaluationMode {
    /// The user's message.
    User,
    /// The system prompt.
    System,
    /// Both (the user's weighted 70 %, the system's 30 %).
    Both,
}

/// `include_conversation_history`: a switch or the number of messages.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum ConversationHistory {
    /// `true` shows the last 10 remembered messages; `false` none.
    Enabled(bool),
    /// `{ max_messages = n }` shows the last `n` (default 10; 0 none).
    Limited(HistoryLimit),
}

/// The history's length.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryLimit {
    /// How many of the most recent remembered messages to show.
    pub max_messages: Option<u32>,
}

impl PromptAlignmentOptions {
    /// How many remembered messages the judge sees, when the history is included.
    fn history_messages(&self) -> Option<u32> {
        match &self.include_conversation_history {
            None | Some(ConversationHistory::Enabled(false)) => None,
            Some(ConversationHistory::Enabled(true)) => Some(DEFAULT_HISTORY_MESSAGES),
            Some(ConversationHistory::Limited(limit)) => {
                Some(limit.max_messages.unwrap_or(DEFAULT_HISTORY_MESSAGES))
            }
        }
    }
}

/// The analyze step's answer.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Analysis {
    pub intent_alignment: IntentAlignment,
    pub requirements_fulfillment: RequirementsFulfillment,
    pub completeness: Completeness,
    pub response_appropriateness: ResponseAppropriateness,
    pub overall_assessment: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct IntentAlignment {
    pub score: f64,
    pub primary_intent: String,
    pub is_addressed: bool,
    pub reasoning: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RequirementsFulfillment {
    pub requirements: Vec<Requirement>,
    pub overall_score: f64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Requirement {
    pub requirement: String,
    pub is_fulfilled: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Completeness {
    pub score: f64,
    pub missing_elements: Vec<String>,
    pub reasoning: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ResponseAppropriateness {
    pub score: f64,
    pub format_alignment: bool,
    pub tone_alignment: bool,
    pub reasoning: String,
}

/// The analyze step's answer schema (the reference's 0..1 `refine`s are not part of it).
fn analyze_schema() -> Value {
    use schema::{array, boolean, number, object, string};
    let requirement = object(
        vec![
            ("requirement", string()),
            ("isFulfilled", boolean()),
            ("reasoning", string()),
        ],
        &["requirement", "isFulfilled", "reasoning"],
    );
    let fields = vec![
        (
            "intentAlignment",
            object(
                vec![
                    ("score", number()),
                    ("primaryIntent", string()),
                    ("isAddressed", boolean()),
                    ("reasoning", string()),
                ],
                &["score", "primaryIntent", "isAddressed", "reasoning"],
            ),
        ),
        (
            "requirementsFulfillment",
            object(
                vec![
                    ("requirements", array(requirement)),
                    ("overallScore", number()),
                ],
                &["requirements", "overallScore"],
            ),
        ),
        (
            "completeness",
            object(
                vec![
                    ("score", number()),
                    ("missingElements", array(string())),
                    ("reasoning", string()),
                ],
                &["score", "missingElements", "reasoning"],
            ),
        ),
        (
            "responseAppropriateness",
            object(
                vec![
                    ("score", number()),
                    ("formatAlignment", boolean()),
                    ("toneAlignment", boolean()),
                    ("reasoning", string()),
                ],
                &["score", "formatAlignment", "toneAlignment", "reasoning"],
            ),
        ),
        ("overallAssessment", string()),
    ];
    let names: Vec<&str> = fields.iter().map(|(name, _)| *name).collect();
    schema::root(object(fields, &names))
}

/// Scores a run: analyze, the score, and the judge's reason.
pub async fn score<J: Judge + ?Sized>(
    run: &ScorerRun,
    options: &PromptAlignmentOptions,
    judge: &J,
) -> Result<Scored, String> {
    let mode = options.evaluation_mode;
    let user_prompt = run_text::user_text(&run.input).unwrap_or_default();
    let system_prompt = run_text::system_prompt(&run.input);
    let agent_response = run_text::assistant_text(&run.output).unwrap_or_default();

    let missing = match mode {
        EvaluationMode::User if user_prompt.is_empty() => {
            Some("User prompt is required for user prompt alignment scoring")
        }
        EvaluationMode::System if system_prompt.is_empty() => {
            Some("System prompt is required for system prompt alignment scoring")
        }
        EvaluationMode::Both if user_prompt.is_empty() && system_prompt.is_empty() => {
            Some("A user or system prompt is required for combined alignment scoring")
        }
        _ if agent_response.is_empty() => {
            Some("Agent response is required for prompt alignment scoring")
        }
        _ => None,
    };
    if let Some(missing) = missing {
        return Err(step::failure(ID, "analyze", missing));
    }

    let history = options
        .history_messages()
        .and_then(|max| run_text::conversation_history(&run.input, max));
    let analyze_prompt = prompts::analyze(
        mode,
        &user_prompt,
        &system_prompt,
        &agent_response,
        history.as_deref(),
    );
    let steps = step::Steps::new(judge, ID, INSTRUCTIONS);
    let (analyze, analysis) = steps
        .ask::<Analysis>("analyze", analyze_prompt, analyze_schema())
        .await?;

    let scale = step::scale_or_one(options.scale);
    let score = js::round_to_two_decimals(weighted(&analysis, mode) * scale);

    let reason_prompt = prompts::reason(&prompts::ReasonFacts {
        mode,
        user_prompt: &user_prompt,
        system_prompt: &system_prompt,
        history: history.as_deref(),
        score,
        scale,
        analysis: &analysis,
    });
    steps.finish(score, None, analyze, reason_prompt).await
}

/// The dimensions' weighted sum: user 40/30/20/10 %, system 35/35/15/15 %; `both` weighs
/// the user sum 70 % and the same sum again 30 % (the reference has no separate system
/// analysis yet).
fn weighted(a: &Analysis, mode: EvaluationMode) -> f64 {
    let sum = |w: [f64; 4]| {
        a.intent_alignment.score * w[0]
            + a.requirements_fulfillment.overall_score * w[1]
            + a.completeness.score * w[2]
            + a.response_appropriateness.score * w[3]
    };
    match mode {
        EvaluationMode::User => sum([0.4, 0.3, 0.2, 0.1]),
        EvaluationMode::System => sum([0.35, 0.35, 0.15, 0.15]),
        EvaluationMode::Both => {
            let user = sum([0.4, 0.3, 0.2, 0.1]);
            user * 0.7 + user * 0.3
        }
    }
}
