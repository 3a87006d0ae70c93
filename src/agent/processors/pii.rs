//! `pii-detector`, as the reference's PIIDetector on messages (the input, and the final
//! response): a detector model lists the personal data in each message, by category scores and
//! located detections; flagged content stops the run, is logged, dropped, or redacted (the
//! detector's redacted text, else each detected region masked by type, hashed, removed or
//! replaced by a placeholder). Offsets are UTF-16, as the reference's.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::detector::{Ask, OnFailure, add_nullable_string, checked, message_text};
use super::{Tripwire, utf16_len};
use crate::agent::Agents;
use crate::agent::message::{Message, Part};
use crate::agent::request::Injection;
use crate::config::{PiiRedaction, PiiSpec, PiiStrategy};

/// The processor's id.
const ID: &str = "pii-detector";

/// The reference's PII types.
pub const DEFAULT_TYPES: [&str; 13] = [
    "email",
    "phone",
    "credit-card",
    "ssn",
    "api-key",
    "ip-address",
    "name",
    "address",
    "date-of-birth",
    "url",
    "uuid",
    "crypto-wallet",
    "iban",
];

fn types(spec: &PiiSpec) -> Vec<String> {
    if spec.detection_types.is_empty() {
        DEFAULT_TYPES.iter().map(|t| (*t).to_owned()).collect()
    } else {
        spec.detection_types.clone()
    }
}

fn instructions(spec: &PiiSpec) -> String {
    if let Some(custom) = &spec.instructions {
        return custom.clone();
    }
    let list: Vec<String> = types(spec).iter().map(|t| format!("- {t}")).collect();
    format!(
        "You are a PII (Personally Identifiable Information) detection specialist. Your job is to identify and locate sensitive personal information in text content for privacy compliance.

Detect and analyze the following PII types:
{}

IMPORTANT: Only include PII types that are actually detected. If no PII is found, return empty arrays for categories and detections.",
        list.join("\n")
    )
}

fn schema(spec: &PiiSpec) -> Value {
    let redact = spec.strategy == PiiStrategy::Redact;
    let mut detection = json!({
        "type": "object",
        "properties": {
            "type": {"description": "Type of PII detected", "type": "string"},
            "value": {"description": "The actual PII value found", "type": "string"},
            "confidence": {"description": "Confidence of this detection", "type": "number", "minimum": 0, "maximum": 1},
            "start": {"description": "Start position in the text", "type": "number"},
            "end": {"description": "End position in the text", "type": "number"},
        },
        "required": ["type", "value", "confidence", "start", "end"],
        "additionalProperties": false,
    });
    if redact {
        add_nullable_string(
            &mut detection,
            "redacted_value",
            "Redacted version of the value",
        );
    }
    let mut schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "categories": {"anyOf": [
                {
                    "description": "Array of detected PII types with their confidence scores",
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "type": {
                                "description": "The type of PII detected from the list of detection types",
                                "type": "string",
                                "enum": types(spec),
                            },
                            "score": {
                                "description": "Confidence level between 0 and 1 indicating how certain the detection is",
                                "type": "number",
                                "minimum": 0,
                                "maximum": 1,
                            },
                        },
                        "required": ["type", "score"],
                        "additionalProperties": false,
                    },
                },
                {"type": "null"},
            ]},
            "detections": {"anyOf": [
                {"description": "Array of specific PII detections with locations", "type": "array", "items": detection},
                {"type": "null"},
            ]},
        },
        "required": ["categories", "detections"],
        "additionalProperties": false,
    });
    if redact {
        add_nullable_string(
            &mut schema,
            "redacted_content",
            "The content with all PII redacted according to the redaction method",
        );
    }
    schema
}

fn prompt(content: &str) -> String {
    format!(
        "Analyze the following content for PII (Personally Identifiable Information):\nContent: \"{content}\""
    )
}

/// The input (or final-response) stage.
pub async fn messages(
    spec: &PiiSpec,
    agents: &Agents,
    messages: &mut Vec<Message>,
    cancel: &CancellationToken,
) -> Result<(), Tripwire> {
    let threshold = spec.threshold.unwrap_or(0.6);
    let checked = checked(messages, spec.last_message_only);
    let mut kept = Vec::with_capacity(messages.len());
    for (mut message, check) in std::mem::take(messages).into_iter().zip(checked) {
        let text = message_text(&message);
        if !check || text.is_empty() {
            kept.push(message);
            continue;
        }
        let asked = Ask {
            model: &spec.model,
            instructions: &instructions(spec),
            prompt: &prompt(&text),
            schema: schema(spec),
            injection: spec.json_prompt_injection.then_some(Injection::System),
            temperature: Some(0.0),
        };
        let failure = OnFailure {
            strategy: spec.error_strategy,
            warning: "[PIIDetector] Detection agent failed, allowing content:",
            abort_reason: "PII detection failed because the internal model call failed",
            processor_id: ID,
        };
        let answer = asked.answer(agents, cancel, failure).await?;
        let detections: Vec<Value> = answer["detections"].as_array().cloned().unwrap_or_default();
        let scores: Vec<(&str, f64)> = answer["categories"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                (
                    c["type"].as_str().unwrap_or(""),
                    c["score"].as_f64().unwrap_or(0.0),
                )
            })
            .collect();
        let flagged = if detections.is_empty() {
            scores.iter().any(|(_, s)| *s >= threshold)
        } else {
            detections
                .iter()
                .any(|d| d["confidence"].as_f64().unwrap_or(0.0) >= threshold)
        };
        if !flagged {
            kept.push(message);
            continue;
        }
        let names: Vec<&str> = scores
            .iter()
            .filter(|(_, s)| *s >= threshold)
            .map(|(n, _)| *n)
            .collect();
        let mut alert = format!("PII detected. Types: {}", names.join(", "));
        if spec.include_detections && answer["detections"].is_array() {
            alert.push_str(&format!(". Detections: {} items", detections.len()));
        }
        match spec.strategy {
            PiiStrategy::Block => {
                return Err(Tripwire::block(ID, alert));
            }
            PiiStrategy::Warn => {
                warn!("[PIIDetector] {alert}");
                kept.push(message);
            }
            PiiStrategy::Filter => info!("[PIIDetector] Filtered message: {alert}"),
            PiiStrategy::Redact => {
                let redacted = answer["redacted_content"]
                    .as_str()
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned)
                    .or_else(|| (!detections.is_empty()).then(|| redact(spec, &text, &detections)));
                match redacted {
                    Some(text) => {
                        info!("[PIIDetector] Redacted PII: {alert}");
                        message.parts = vec![Part::Text { text }];
                    }
                    // As the reference's input stage: the original is kept.
                    None => warn!("[PIIDetector] No redaction available, filtering: {alert}"),
                }
                kept.push(message);
            }
        }
    }
    *messages = kept;
    Ok(())
}

/// JavaScript's `slice(start, end)` on UTF-16 units.
fn js_slice(units: &[u16], start: f64, end: f64) -> &[u16] {
    let len = units.len() as f64;
    let at = |x: f64| {
        let x = if x.is_nan() { 0.0 } else { x.trunc() };
        (if x < 0.0 {
            (len + x).max(0.0)
        } else {
            x.min(len)
        }) as usize
    };
    let (from, to) = (at(start), at(end));
    if from >= to { &[] } else { &units[from..to] }
}

/// The detections merged into regions (by start, longer first; an overlapping one widens the
/// region and the longest owns it), each region's text redacted by its owner's type.
fn redact(spec: &PiiSpec, text: &str, detections: &[Value]) -> String {
    let pos = |d: &Value, key: &str| d[key].as_f64().unwrap_or(0.0);
    let mut sorted: Vec<&Value> = detections.iter().collect();
    sorted.sort_by(|a, b| {
        pos(a, "start")
            .total_cmp(&pos(b, "start"))
            .then((pos(b, "end") - pos(b, "start")).total_cmp(&(pos(a, "end") - pos(a, "start"))))
    });
    let mut regions: Vec<(f64, f64, &Value)> = Vec::new();
    for d in sorted {
        let (start, end) = (pos(d, "start"), pos(d, "end"));
        match regions.last_mut() {
            Some(current) if start < current.1 => {
                current.1 = current.1.max(end);
                if end - start > pos(current.2, "end") - pos(current.2, "start") {
                    current.2 = d;
                }
            }
            _ => regions.push((start, end, d)),
        }
    }
    let units: Vec<u16> = text.encode_utf16().collect();
    let mut out: Vec<u16> = Vec::with_capacity(units.len());
    let mut cursor = 0.0;
    for (start, end, owner) in regions {
        out.extend_from_slice(js_slice(&units, cursor, start));
        let value = String::from_utf16_lossy(js_slice(&units, start, end));
        let kind = owner["type"].as_str().unwrap_or("");
        out.extend(redact_value(spec, &value, kind).encode_utf16());
        cursor = end;
    }
    out.extend_from_slice(js_slice(&units, cursor, f64::INFINITY));
    String::from_utf16_lossy(&out)
}

/// One value redacted by the configured method.
pub fn redact_value(spec: &PiiSpec, value: &str, kind: &str) -> String {
    match spec.redaction_method {
        PiiRedaction::Mask => mask(value, kind, spec.preserve_format.unwrap_or(true)),
        PiiRedaction::Hash => {
            let digest = Sha256::digest(value.as_bytes());
            format!("[HASH:{}]", hex::encode(&digest[..4]))
        }
        PiiRedaction::Remove => String::new(),
        PiiRedaction::Placeholder => format!("[{}]", kind.to_uppercase()),
    }
}

/// The reference's masks, by type (lengths and positions in UTF-16 units).
fn mask(value: &str, kind: &str, preserve_format: bool) -> String {
    let units: Vec<u16> = value.encode_utf16().collect();
    let len = units.len();
    let stars = |n: usize| "*".repeat(n);
    let fallback = stars(len.min(8));
    if !preserve_format {
        return fallback;
    }
    let text = |u: &[u16]| String::from_utf16_lossy(u);
    // Digits (or hex characters) before the last four become `with`.
    let keep_last_four = |with: char, hit: fn(u16) -> bool| {
        let replaced: Vec<u16> = units
            .iter()
            .enumerate()
            .map(|(i, u)| {
                if hit(*u) && i + 4 < len {
                    with as u16
                } else {
                    *u
                }
            })
            .collect();
        text(&replaced)
    };
    let digit = |u: u16| (u16::from(b'0')..=u16::from(b'9')).contains(&u);
    match kind {
        "email" => {
            let parts: Vec<&str> = value.split('@').collect();
            if parts.len() != 2 {
                return fallback;
            }
            let local: Vec<u16> = parts[0].encode_utf16().collect();
            let masked_local = if local.len() > 2 {
                format!(
                    "{}{}{}",
                    text(&local[..1]),
                    stars(local.len() - 2),
                    text(&local[local.len() - 1..])
                )
            } else {
                "***".to_owned()
            };
            let domain: Vec<&str> = parts[1].split('.').collect();
            let masked_domain = if domain.len() > 1 {
                format!("{}.{}", stars(utf16_len(domain[0])), domain[1..].join("."))
            } else {
                "***".to_owned()
            };
            format!("{masked_local}@{masked_domain}")
        }
        "phone" => keep_last_four('X', digit),
        "credit-card" | "ssn" => keep_last_four('*', digit),
        "uuid" => {
            let hexish =
                |u: u16| char::from_u32(u32::from(u)).is_some_and(|c| c.is_ascii_hexdigit());
            let replaced: Vec<u16> = units
                .iter()
                .map(|u| if hexish(*u) { u16::from(b'*') } else { *u })
                .collect();
            text(&replaced)
        }
        "crypto-wallet" if len > 8 => {
            format!(
                "{}{}{}",
                text(&units[..4]),
                stars(len - 8),
                text(&units[len - 4..])
            )
        }
        "iban" if len > 6 => {
            format!(
                "{}{}{}",
                text(&units[..2]),
                stars(len - 6),
                text(&units[len - 4..])
            )
        }
        "crypto-wallet" | "iban" => stars(len),
        _ if len <= 3 => stars(len),
        _ => format!(
            "{}{}{}",
            text(&units[..1]),
            stars(len - 2),
            text(&units[len - 1..])
        ),
    }
}
