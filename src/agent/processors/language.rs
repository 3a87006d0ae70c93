//! `language-detector`, as the reference's LanguageDetector: a detector model names each input
//! message's language; another language than the targets is logged (`detect`, `warn`), stops
//! the run (`block`) or is replaced by the detector's translation (`translate`). The reference
//! also writes its finding into the message's metadata; agentd messages carry no metadata, so
//! only the logs, the tripwire and the translation show it.

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::detector::{Ask, OnFailure, add_nullable_string, checked, message_text};
use super::{Tripwire, utf16_len};
use crate::agent::Agents;
use crate::agent::message::{Message, Part};
use crate::config::{LanguageSpec, LanguageStrategy};

/// The processor's id.
const ID: &str = "language-detector";

/// The codes and names the reference knows.
const LANGUAGES: [(&str, &str); 37] = [
    ("en", "English"),
    ("es", "Spanish"),
    ("fr", "French"),
    ("de", "German"),
    ("it", "Italian"),
    ("pt", "Portuguese"),
    ("ru", "Russian"),
    ("ja", "Japanese"),
    ("ko", "Korean"),
    ("zh", "Chinese"),
    ("zh-cn", "Chinese (Simplified)"),
    ("zh-tw", "Chinese (Traditional)"),
    ("ar", "Arabic"),
    ("hi", "Hindi"),
    ("th", "Thai"),
    ("vi", "Vietnamese"),
    ("tr", "Turkish"),
    ("pl", "Polish"),
    ("nl", "Dutch"),
    ("sv", "Swedish"),
    ("da", "Danish"),
    ("no", "Norwegian"),
    ("fi", "Finnish"),
    ("el", "Greek"),
    ("he", "Hebrew"),
    ("cs", "Czech"),
    ("hu", "Hungarian"),
    ("ro", "Romanian"),
    ("bg", "Bulgarian"),
    ("hr", "Croatian"),
    ("sk", "Slovak"),
    ("sl", "Slovenian"),
    ("et", "Estonian"),
    ("lv", "Latvian"),
    ("lt", "Lithuanian"),
    ("uk", "Ukrainian"),
    ("be", "Belarusian"),
];

const DEFAULT_INSTRUCTIONS: &str = "You are a language detection specialist. Identify the language of text content and translate if needed.\n\nIMPORTANT: IF CONTENT IS ALREADY IN TARGET LANGUAGE, RETURN AN EMPTY OBJECT. Do not include any zeros or false values.";

/// The language name of an ISO code (the code itself when unknown).
fn name(iso: &str) -> String {
    let lower = iso.to_lowercase();
    LANGUAGES
        .iter()
        .find(|(code, _)| *code == lower)
        .map_or_else(|| iso.to_owned(), |(_, n)| (*n).to_owned())
}

/// The ISO code of a language given by code or name (`unknown` for a long unknown name).
fn code(language: &str) -> String {
    let lower = language.to_lowercase();
    if LANGUAGES.iter().any(|(c, _)| *c == lower) {
        return lower;
    }
    if let Some((c, _)) = LANGUAGES.iter().find(|(_, n)| n.to_lowercase() == lower) {
        return (*c).to_owned();
    }
    if utf16_len(&lower) <= 3 {
        lower
    } else {
        "unknown".to_owned()
    }
}

fn targets(spec: &LanguageSpec) -> Vec<String> {
    if spec.target_languages.is_empty() {
        vec!["English".to_owned(), "en".to_owned()]
    } else {
        spec.target_languages.clone()
    }
}

fn is_target(targets: &[String], iso: &str) -> bool {
    let lower = iso.to_lowercase();
    let language = name(iso).to_lowercase();
    targets
        .iter()
        .any(|t| code(t) == lower || t.to_lowercase() == language)
}

fn schema(spec: &LanguageSpec) -> Value {
    let mut schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "iso_code": {"anyOf": [{"description": "ISO language code", "type": "string"}, {"type": "null"}]},
            "confidence": {"anyOf": [
                {"description": "Detection confidence", "type": "number", "minimum": 0, "maximum": 1},
                {"type": "null"},
            ]},
        },
        "required": ["iso_code", "confidence"],
        "additionalProperties": false,
    });
    if spec.strategy == LanguageStrategy::Translate {
        add_nullable_string(&mut schema, "translated_text", "Translated text");
    }
    schema
}

fn prompt(spec: &LanguageSpec, targets: &[String], content: &str) -> String {
    let first = targets.first().map_or("", String::as_str);
    let translate = if spec.strategy == LanguageStrategy::Translate {
        format!(". If not in {first}, translate to {first}")
    } else {
        String::new()
    };
    format!(
        "Detect language of: \"{content}\"\n\nTarget: {}{translate}",
        targets.join("/")
    )
}

/// The input stage.
pub async fn messages(
    spec: &LanguageSpec,
    agents: &Agents,
    messages: &mut [Message],
    cancel: &CancellationToken,
) -> Result<(), Tripwire> {
    let targets = targets(spec);
    let threshold = spec.threshold.unwrap_or(0.7);
    let min = spec.min_text_length.unwrap_or(10) as usize;
    let checked = checked(messages, spec.last_message_only);
    for (message, check) in messages.iter_mut().zip(checked) {
        let text = message_text(message);
        if !check || utf16_len(&text) < min {
            continue;
        }
        let instructions = spec.instructions.as_deref().unwrap_or(DEFAULT_INSTRUCTIONS);
        let asked = Ask {
            model: &spec.model,
            instructions,
            prompt: &prompt(spec, &targets, &text),
            schema: schema(spec),
            injection: None,
            temperature: Some(0.0),
        };
        let failure = OnFailure {
            strategy: spec.error_strategy,
            warning: "[LanguageDetector] Detection agent failed, assuming target language:",
            abort_reason: "Language detection failed because the internal model call failed",
            processor_id: ID,
        };
        let answer = asked.answer(agents, cancel, failure).await?;
        // JavaScript truthiness throughout: 0, "" and null are all "not given".
        let iso = answer["iso_code"].as_str().filter(|s| !s.is_empty());
        let translated = answer["translated_text"]
            .as_str()
            .filter(|s| !s.is_empty() && spec.strategy == LanguageStrategy::Translate);
        let mut confidence = answer["confidence"].as_f64().filter(|c| *c != 0.0);
        if translated.is_some() && confidence.is_none() {
            confidence = Some(0.95);
        }
        if confidence.is_some_and(|c| c < threshold) {
            continue;
        }
        let (Some(iso), Some(confidence)) = (iso, confidence) else {
            continue;
        };
        if is_target(&targets, iso) {
            if spec.include_detection_details {
                info!(
                    "[LanguageDetector] Content in target language: {}",
                    name(iso)
                );
            }
            continue;
        }
        let alert = format!(
            "Language detected: {} ({iso}) with confidence {confidence:.2}",
            name(iso)
        );
        match spec.strategy {
            LanguageStrategy::Detect => info!("[LanguageDetector] {alert}"),
            LanguageStrategy::Warn => warn!("[LanguageDetector] Non-target language: {alert}"),
            LanguageStrategy::Block => {
                return Err(Tripwire::block(
                    ID,
                    format!("Non-target language detected: {alert}"),
                ));
            }
            LanguageStrategy::Translate => match translated {
                Some(text) => {
                    info!("[LanguageDetector] Translated from {}: {alert}", name(iso));
                    message.parts = vec![Part::Text {
                        text: text.to_owned(),
                    }];
                }
                None => {
                    warn!("[LanguageDetector] No translation available, keeping original: {alert}")
                }
            },
        }
    }
    Ok(())
}
