//! The proto's canonical JSON mapping of hook calls and answers, read off the same
//! descriptors the server's reflection serves, so webhooks see exactly what
//! `json_format.MessageToJson` (or any protobuf JSON library) produces for `agentd.v1.HookCall`.

use prost::Message as _;
use prost_reflect::{DeserializeOptions, DynamicMessage};

use crate::pb;

fn descriptor(name: &str) -> Result<prost_reflect::MessageDescriptor, String> {
    pb::descriptor_pool()?
        .get_message_by_name(name)
        .ok_or_else(|| format!("{name} is not in the descriptor set"))
}

/// A hook call as JSON (lowerCamelCase names, default values left out).
pub fn call_to_json(call: &pb::HookCall) -> Result<Vec<u8>, String> {
    let message = DynamicMessage::decode(
        descriptor("agentd.v1.HookCall")?,
        call.encode_to_vec().as_slice(),
    )
    .map_err(|e| e.to_string())?;
    serde_json::to_vec(&message).map_err(|e| e.to_string())
}

/// A hook answer from JSON (proto or lowerCamelCase names; unknown fields ignored, as a
/// webhook may add its own).
pub fn answer_from_json(body: &[u8]) -> Result<pb::HookAnswer, String> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let options = DeserializeOptions::new().deny_unknown_fields(false);
    let message = DynamicMessage::deserialize_with_options(
        descriptor("agentd.v1.HookAnswer")?,
        &mut de,
        &options,
    )
    .map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    pb::HookAnswer::decode(message.encode_to_vec().as_slice()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::hook_answer::Answer;

    #[test]
    fn calls_use_the_canonical_json_names() {
        let call = pb::HookCall {
            id: "r-h1".into(),
            kind: pb::HookKind::BeforeToolCall as i32,
            run_id: "r".into(),
            context: Some(pb::hook_call::Context::BeforeToolCall(
                pb::ToolCallContext {
                    tool_call_id: "c1".into(),
                    tool_name: "echo".into(),
                    ..Default::default()
                },
            )),
            ..Default::default()
        };
        let json: serde_json::Value =
            serde_json::from_slice(&call_to_json(&call).unwrap()).unwrap();
        assert_eq!(json["kind"], "HOOK_KIND_BEFORE_TOOL_CALL");
        assert_eq!(json["runId"], "r");
        assert_eq!(json["beforeToolCall"]["toolCallId"], "c1");
    }

    #[test]
    fn answers_parse_from_either_name_style() {
        let body =
            br#"{"beforeToolCall": {"proceed": false, "output": {"skipped": true}}, "extra": 1}"#;
        let answer = answer_from_json(body).unwrap();
        let Some(Answer::BeforeToolCall(a)) = answer.answer else {
            panic!("{answer:?}");
        };
        assert_eq!(a.proceed, Some(false));
        let snake =
            answer_from_json(br#"{"on_iteration_complete": {"continue_run": false}}"#).unwrap();
        assert!(matches!(snake.answer, Some(Answer::OnIterationComplete(_))));
        assert!(answer_from_json(b"not json").is_err());
    }
}
