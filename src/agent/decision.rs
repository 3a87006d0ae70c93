//! Decisions on suspended tool calls: what a declined call tells the model, the schema a
//! decision is answered with, and how Resume data becomes a decision. Pure.

use serde_json::{Value, json};

use super::error::RunError;
use super::state::{Decision, PendingCall, PendingKind};

/// Text the model reads for a declined call when the decision gives no reason.
pub const DECLINED_TEXT: &str = "Tool call was not approved by the user";

/// A decline with the caller's reason, or the reference's text when there is none.
pub fn decline(reason: Option<&str>) -> Decision {
    Decision::Declined(
        reason
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .unwrap_or(DECLINED_TEXT)
            .to_owned(),
    )
}

/// The JSON Schema of an approval decision, exactly as the reference sends it with
/// `tool-call-approval`.
pub fn approval_resume_schema() -> Value {
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "approved": {
                "description": "Controls if the tool call is approved or not, should be true when approved and false when declined",
                "type": "boolean"
            },
            "reason": {
                "description": "Optional explanation for the decision, surfaced to the model when the tool call is declined",
                "type": "string"
            }
        },
        "required": ["approved"],
        "additionalProperties": false
    })
}

/// The schema a pending call is answered with.
pub fn resume_schema(pending: &PendingCall) -> Value {
    match pending.kind {
        PendingKind::Approval => approval_resume_schema(),
        PendingKind::ClientTool => pending.resume_schema.clone().unwrap_or_else(|| json!({})),
        // Nothing answers it from outside.
        PendingKind::SubAgent => json!({}),
    }
}

/// An approval answered through Resume: `{approved: boolean, reason?: string}`.
pub fn from_resume_data(data: &Value) -> Result<Decision, RunError> {
    match data.get("approved").and_then(Value::as_bool) {
        Some(true) => Ok(Decision::Approved),
        Some(false) => Ok(decline(data.get("reason").and_then(Value::as_str))),
        None => Err(RunError::invalid(
            "data.approved",
            "an approval needs {\"approved\": boolean, \"reason\"?: string}",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declines_default_to_the_reference_text() {
        assert_eq!(decline(None), Decision::Declined(DECLINED_TEXT.into()));
        assert_eq!(
            decline(Some("  ")),
            Decision::Declined(DECLINED_TEXT.into())
        );
        assert_eq!(
            decline(Some("Not on a Friday")),
            Decision::Declined("Not on a Friday".into())
        );
    }

    #[test]
    fn the_approval_schema_is_the_reference_s() {
        assert_eq!(
            approval_resume_schema().to_string(),
            r#"{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"approved":{"description":"Controls if the tool call is approved or not, should be true when approved and false when declined","type":"boolean"},"reason":{"description":"Optional explanation for the decision, surfaced to the model when the tool call is declined","type":"string"}},"required":["approved"],"additionalProperties":false}"#
        );
        let validator = jsonschema::validator_for(&approval_resume_schema()).ok();
        let valid = |v: Value| validator.as_ref().is_some_and(|s| s.is_valid(&v));
        assert!(valid(json!({"approved": false, "reason": "no"})));
        assert!(!valid(json!({"approved": true, "extra": 1})));
    }

    #[test]
    fn resume_data_answers_an_approval() {
        assert_eq!(
            from_resume_data(&json!({"approved": true})).ok(),
            Some(Decision::Approved)
        );
        assert_eq!(
            from_resume_data(&json!({"approved": false, "reason": "no"})).ok(),
            Some(Decision::Declined("no".into()))
        );
        assert!(matches!(
            from_resume_data(&json!({"ok": 1})),
            Err(RunError::Invalid(v)) if v[0].0 == "data.approved"
        ));
    }
}
