//! `moderation`, as the reference's ModerationProcessor: a detector model scores each message
//! (the input, the final response, or streamed deltas) against moderation categories.

use serde_json::{Value, json};

use super::detector::Scored;
use crate::config::DetectorSpec;

/// The reference's categories (OpenAI's moderation categories).
pub const DEFAULT_CATEGORIES: [&str; 11] = [
    "hate",
    "hate/threatening",
    "harassment",
    "harassment/threatening",
    "self-harm",
    "self-harm/intent",
    "self-harm/instructions",
    "sexual",
    "sexual/minors",
    "violence",
    "violence/graphic",
];

/// Its names and strings.
pub const SCORED: Scored = Scored {
    id: "moderation",
    tag: "[ModerationProcessor]",
    list: "category_scores",
    item: "category",
    flagged: "Content flagged for moderation. Categories: ",
    warning: "[ModerationProcessor] Agent moderation failed, allowing content:",
    failure: "Moderation failed because the internal model call failed",
    threshold: 0.5,
};

/// The categories scored.
pub fn categories(spec: &DetectorSpec) -> Vec<String> {
    if spec.categories.is_empty() {
        DEFAULT_CATEGORIES.iter().map(|c| (*c).to_owned()).collect()
    } else {
        spec.categories.clone()
    }
}

/// The detector's system message.
pub fn instructions(spec: &DetectorSpec) -> String {
    if let Some(custom) = &spec.instructions {
        return custom.clone();
    }
    let list: Vec<String> = categories(spec).iter().map(|c| format!("- {c}")).collect();
    format!(
        "You are a content moderation specialist. Your job is to evaluate text content for potential policy violations.

Evaluate the provided content against these categories:
{}

IMPORTANT: Only include categories that are actually flagged. If no moderation issues are detected, return an empty array for category_scores.

Guidelines:
- Be thorough but not overly strict
- Consider context and intent
- Educational, historical, or creative content may be acceptable even if it touches sensitive topics
- Focus on content that could cause real harm
- Provide a brief reason if any category is flagged",
        list.join("\n")
    )
}

/// The detector's user message for `content` (a streamed window says how many deltas it has).
pub fn prompt(content: &str, stream_window: Option<u32>) -> String {
    let stream = stream_window.map_or(String::new(), |n| {
        format!(
            "this is a stream, so keep in mind you only have the context of the last {n} chunks. Make your best judgement on the content."
        )
    });
    format!(
        "Please evaluate the following content for moderation, {stream}:\n\nContent: \"{content}\""
    )
}

/// The answer's JSON Schema.
pub fn schema(spec: &DetectorSpec) -> Value {
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "category_scores": {
                "anyOf": [
                    {
                        "description": "Array of flagged categories with their confidence scores",
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "category": {
                                    "description": "The moderation category being evaluated",
                                    "type": "string",
                                    "enum": categories(spec),
                                },
                                "score": {
                                    "description": "Confidence score between 0 and 1 indicating how strongly the content matches this category",
                                    "type": "number",
                                    "minimum": 0,
                                    "maximum": 1,
                                },
                            },
                            "required": ["category", "score"],
                            "additionalProperties": false,
                        },
                    },
                    {"type": "null"},
                ],
            },
            "reason": {
                "anyOf": [
                    {"description": "Brief explanation of why content was flagged", "type": "string"},
                    {"type": "null"},
                ],
            },
        },
        "required": ["category_scores", "reason"],
        "additionalProperties": false,
    })
}
