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

/// The JSON Schema of an approval decision, as the reference sends it with
/// `tool-call-approval`.
pub fn approval_resume_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "reason": {"type": "string"}
        },
        "required": ["approved"]
    })
}

/// The schema a pending call is answered with.
pub fn resume_schema(pending: &PendingCall) -> Value {
    match pending.kind {
        PendingKind::Approval => approval_resume_schema(),
        PendingKind::ClientTool => json!({}),
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
