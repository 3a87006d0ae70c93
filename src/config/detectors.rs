//! The detector processors' options (the ones that ask a model: `moderation`,
//! `prompt-injection-detector`, `language-detector`, `system-prompt-scrubber`) and their checks.

use serde::{Deserialize, Serialize};

/// What a failed detector model call does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DetectorErrorStrategy {
    /// Log it and let the content through.
    #[default]
    Warn,
    /// Stop the run with a tripwire.
    Strict,
}

/// What a detector does with flagged content.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DetectorStrategy {
    /// The run ends with a tripwire.
    #[default]
    Block,
    /// The content passes; the finding is logged.
    Warn,
    /// The flagged message (or streamed delta) is dropped.
    Filter,
    /// The message is replaced by the detector's neutralized rewrite (prompt injection only).
    Rewrite,
}

/// Options of the detectors that ask a model (`moderation`, `prompt-injection-detector`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetectorSpec {
    /// The detector model, `provider/model` of a configured provider.
    pub model: String,
    /// Replaces the detector's default instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Scores at or above it flag content (moderation 0.5, prompt injection 0.7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// What flagged content does.
    #[serde(default)]
    pub strategy: DetectorStrategy,
    /// Scores are added to the abort reason.
    #[serde(default)]
    pub include_scores: bool,
    /// Only the last message is checked.
    #[serde(default)]
    pub last_message_only: bool,
    /// What a failed detector call does.
    #[serde(default)]
    pub error_strategy: DetectorErrorStrategy,
    /// The schema goes into the detector's prompt instead of the provider's `response_format`.
    #[serde(default)]
    pub json_prompt_injection: bool,
    /// Moderation: the categories scored (default: the reference's eleven).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
    /// Prompt injection: the attack types scored (default: the reference's six).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub detection_types: Vec<String>,
    /// Moderation of a stream: earlier deltas judged with the current one (0: it alone).
    #[serde(default)]
    pub chunk_window: u32,
}

/// What the language detector does with another language than its targets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LanguageStrategy {
    /// The message passes; the finding is logged.
    #[default]
    Detect,
    /// The detector's translation replaces the message.
    Translate,
    /// The run ends with a tripwire.
    Block,
    /// The message passes; a warning is logged.
    Warn,
}

/// Options of `language-detector`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LanguageSpec {
    /// The detector model, `provider/model` of a configured provider.
    pub model: String,
    /// Replaces the detector's default instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Detections less confident than this are ignored (default 0.7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// Accepted languages, as names or ISO codes (default `["English", "en"]`); the first is
    /// what `translate` translates to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target_languages: Vec<String>,
    /// What another language does.
    #[serde(default)]
    pub strategy: LanguageStrategy,
    /// Shorter texts (in UTF-16 code units) are not checked (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_text_length: Option<u32>,
    /// Also log the messages found in a target language.
    #[serde(default)]
    pub include_detection_details: bool,
    /// Only the last message is checked.
    #[serde(default)]
    pub last_message_only: bool,
    /// What a failed detector call does.
    #[serde(default)]
    pub error_strategy: DetectorErrorStrategy,
}

/// What the system-prompt scrubber does with a leak.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScrubStrategy {
    /// The run ends with a tripwire.
    Block,
    /// The content passes; the finding is logged.
    Warn,
    /// The message (or streamed delta) is dropped.
    Filter,
    /// The leaked spans are replaced.
    #[default]
    Redact,
}

/// How the scrubber replaces a leaked span.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScrubRedaction {
    /// One `*` per character.
    #[default]
    Mask,
    /// The detector's redacted value, else `placeholder_text`.
    Placeholder,
    /// Nothing.
    Remove,
}

/// Options of `system-prompt-scrubber`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScrubberSpec {
    /// The detector model, `provider/model` of a configured provider.
    pub model: String,
    /// Replaces the detector's default instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// What a leak does.
    #[serde(default)]
    pub strategy: ScrubStrategy,
    /// How a leaked span is replaced.
    #[serde(default)]
    pub redaction_method: ScrubRedaction,
    /// The placeholder (default `[SYSTEM_PROMPT]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder_text: Option<String>,
    /// More patterns named in the default instructions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub custom_patterns: Vec<String>,
    /// `warn` also logs how many detections there were.
    #[serde(default)]
    pub include_detections: bool,
    /// Only the last message is checked.
    #[serde(default)]
    pub last_message_only: bool,
    /// What a failed detector call does.
    #[serde(default)]
    pub error_strategy: DetectorErrorStrategy,
    /// The schema goes into the detector's prompt instead of the provider's `response_format`.
    #[serde(default)]
    pub json_prompt_injection: bool,
}

/// What the PII detector does with flagged content.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PiiStrategy {
    /// The run ends with a tripwire naming the types.
    Block,
    /// The content passes; the finding is logged.
    Warn,
    /// The message is dropped.
    Filter,
    /// The personal data is replaced.
    #[default]
    Redact,
}

/// How the PII detector replaces a detected value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PiiRedaction {
    /// Masked by type (with `preserve_format`: `j******e@*******.com`, `XXX-XXX-4567`).
    #[default]
    Mask,
    /// `[HASH:<first 8 hex digits of its SHA-256>]`.
    Hash,
    /// Nothing.
    Remove,
    /// `[TYPE]`.
    Placeholder,
}

/// Options of `pii-detector`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PiiSpec {
    /// The detector model, `provider/model` of a configured provider.
    pub model: String,
    /// Replaces the detector's default instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Detections (or, without any, category scores) at or above it flag content (0.6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// What flagged content does.
    #[serde(default)]
    pub strategy: PiiStrategy,
    /// How a value is redacted.
    #[serde(default)]
    pub redaction_method: PiiRedaction,
    /// Masks keep the value's shape (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserve_format: Option<bool>,
    /// The PII types looked for (default: the reference's thirteen).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub detection_types: Vec<String>,
    /// The abort reason counts the detections.
    #[serde(default)]
    pub include_detections: bool,
    /// Only the last message is checked.
    #[serde(default)]
    pub last_message_only: bool,
    /// What a failed detector call does.
    #[serde(default)]
    pub error_strategy: DetectorErrorStrategy,
    /// The schema goes into the detector's prompt instead of the provider's `response_format`.
    #[serde(default)]
    pub json_prompt_injection: bool,
}

/// Checks a detector's model (`provider/model`) and threshold (0 to 1) below `at`.
pub(super) fn check_model(
    at: &str,
    model: &str,
    threshold: Option<f64>,
) -> Result<(), (String, String)> {
    if model
        .split_once('/')
        .is_none_or(|(p, m)| p.is_empty() || m.is_empty())
    {
        return Err((format!("{at}.model"), "must be provider/model".into()));
    }
    if threshold.is_some_and(|t| !(0.0..=1.0).contains(&t)) {
        return Err((format!("{at}.threshold"), "must be between 0 and 1".into()));
    }
    Ok(())
}

/// Checks that no type in the list `name` below `at` is empty.
fn check_types(at: &str, name: &str, types: &[String]) -> Result<(), (String, String)> {
    if types.iter().any(|t| t.trim().is_empty()) {
        return Err((format!("{at}.{name}"), "must not name an empty type".into()));
    }
    Ok(())
}

pub(super) fn check_detector(
    at: &str,
    d: &DetectorSpec,
    injection: bool,
) -> Result<(), (String, String)> {
    check_model(at, &d.model, d.threshold)?;
    let (own, own_name, other, other_name) = if injection {
        (
            &d.detection_types,
            "detection_types",
            &d.categories,
            "categories",
        )
    } else {
        (
            &d.categories,
            "categories",
            &d.detection_types,
            "detection_types",
        )
    };
    if !other.is_empty() {
        return Err((
            format!("{at}.{other_name}"),
            "does not apply to this processor".into(),
        ));
    }
    check_types(at, own_name, own)?;
    if injection && d.chunk_window != 0 {
        return Err((
            format!("{at}.chunk_window"),
            "applies to moderation only".into(),
        ));
    }
    if !injection && d.strategy == DetectorStrategy::Rewrite {
        return Err((
            format!("{at}.strategy"),
            "rewrite applies to the prompt injection detector only".into(),
        ));
    }
    Ok(())
}

/// Checks a PII detector's options below `at`.
pub(super) fn check_pii(at: &str, p: &PiiSpec) -> Result<(), (String, String)> {
    check_model(at, &p.model, p.threshold)?;
    check_types(at, "detection_types", &p.detection_types)
}
