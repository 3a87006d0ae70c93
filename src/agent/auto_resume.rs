//! Auto-resume (`auto_resume_suspended_tools`), as the reference does it: a new run on a thread
//! whose earlier run waits for a client tool tells the model about the waiting calls (a suffix
//! of the first system message) and lets every tool take three extra arguments; the model
//! answers the waiting call by calling its tool again with `resumeData` built from the user's
//! message against the tool's resume schema. Approvals are never answered this way. Pure.

use serde_json::{Map, Value, json};

use super::state::{CallRecord, SuspendedTool};

/// The argument naming the waiting call the model answers.
pub const CALL_ID_ARG: &str = "suspendedToolCallId";
/// The argument naming the waiting call's run.
pub const RUN_ID_ARG: &str = "suspendedToolRunId";
/// The argument carrying the answer.
pub const DATA_ARG: &str = "resumeData";

/// The suffix of the first system message listing the waiting calls (the reference's
/// `buildAutoResumeSystemMessageSuffix`, byte for byte, whitespace included; without the two
/// leading newlines that join it to the message).
pub fn system_suffix(tools: &[SuspendedTool]) -> String {
    let listed: Vec<Value> = tools
        .iter()
        .map(|t| {
            json!({
                "toolCallId": t.call.id,
                "toolName": t.call.name,
                "args": t.call.args,
                "type": "suspension",
                "runId": t.run_id,
                "resumeSchema": t.resume_schema.to_string(),
            })
        })
        .collect();
    let listed = Value::Array(listed).to_string();
    format!(
        "Analyse the suspended tools: {listed}, using the messages available to you and the resumeSchema of each suspended tool, find the tool whose resumeData you can construct properly.
                      resumeData can not be an empty object nor null/undefined.
                      When you find that and call that tool, add the resumeData to the tool call arguments/input.
                      Also, add the toolCallId of the suspended tool as suspendedToolCallId to the tool call arguments/input. This identifies the exact framework-persisted suspension to resume.
                      You may also add the runId as suspendedToolRunId for compatibility, but it does not select the suspension and must match the runId associated with suspendedToolCallId.
                      If the suspendedTool.type is 'approval', resumeData will be an object that contains 'approved' which can either be true or false depending on the user's message. If you can't construct resumeData from the message for approval type, set approved to true and add resumeData: {{ approved: true }} to the tool call arguments/input.

                      IMPORTANT: If you're able to construct resumeData and get suspendedToolCallId, get the previous arguments/input of the tool call from args in the suspended tool, and spread it in the new arguments/input created, do not add duplicate data.
                      "
    )
}

/// A tool's parameters with the three resume arguments, as the reference offers them to an
/// OpenAI-compatible model (nullable, listed as required and as `x-optional`).
pub fn with_resume_args(parameters: &Value) -> Value {
    let mut schema = match parameters {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    let properties = schema
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(properties) = properties {
        properties.insert(
            CALL_ID_ARG.into(),
            json!({"description": "The toolCallId of the suspended tool to resume", "anyOf": [{"type": "string"}, {"type": "null"}]}),
        );
        properties.insert(
            RUN_ID_ARG.into(),
            json!({"description": "The runId of the suspended tool", "anyOf": [{"type": "string"}, {"type": "null"}]}),
        );
        properties.insert(
            DATA_ARG.into(),
            json!({"anyOf": [{"description": "The resumeData object created from the resumeSchema of suspended tool"}, {"type": "null"}]}),
        );
    }
    let required = schema
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(required) = required {
        for name in [CALL_ID_ARG, RUN_ID_ARG, DATA_ARG] {
            if !required.iter().any(|r| r == name) {
                required.push(Value::String(name.into()));
            }
        }
    }
    schema.insert(
        "x-optional".into(),
        json!([CALL_ID_ARG, RUN_ID_ARG, DATA_ARG]),
    );
    Value::Object(schema)
}

/// A call's arguments without the resume arguments, and the waiting call it answers with its
/// data, when it names one of `tools` and carries data.
pub fn take_answer<'a>(
    call: &CallRecord,
    tools: &'a [SuspendedTool],
) -> (Value, Option<(&'a SuspendedTool, Value)>) {
    let Value::Object(mut args) = call.args.clone() else {
        return (call.args.clone(), None);
    };
    let call_id = args.remove(CALL_ID_ARG);
    args.remove(RUN_ID_ARG);
    let data = args.remove(DATA_ARG).filter(|d| !d.is_null());
    let answered = match (call_id.as_ref().and_then(Value::as_str), data) {
        (Some(id), Some(data)) => tools
            .iter()
            .find(|t| t.call.id == id && t.call.name == call.name)
            .map(|t| (t, data)),
        _ => None,
    };
    (Value::Object(args), answered)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting() -> SuspendedTool {
        SuspendedTool {
            run_id: "run-1".into(),
            call: CallRecord {
                id: "c1".into(),
                name: "confirm".into(),
                args: json!({"item": "order-1"}),
                args_error: None,
            },
            resume_schema: json!({"type": "object"}),
        }
    }

    #[test]
    fn the_suffix_lists_the_waiting_calls() {
        let text = system_suffix(&[waiting()]);
        assert!(text.starts_with(
            "Analyse the suspended tools: [{\"toolCallId\":\"c1\",\"toolName\":\"confirm\",\"args\":{\"item\":\"order-1\"},\"type\":\"suspension\",\"runId\":\"run-1\",\"resumeSchema\":\"{\\\"type\\\":\\\"object\\\"}\"}], using the messages"
        ));
        // Everything after the list, as recorded from the reference.
        let recorded = ", using the messages available to you and the resumeSchema of each suspended tool, find the tool whose resumeData you can construct properly.\n                      resumeData can not be an empty object nor null/undefined.\n                      When you find that and call that tool, add the resumeData to the tool call arguments/input.\n                      Also, add the toolCallId of the suspended tool as suspendedToolCallId to the tool call arguments/input. This identifies the exact framework-persisted suspension to resume.\n                      You may also add the runId as suspendedToolRunId for compatibility, but it does not select the suspension and must match the runId associated with suspendedToolCallId.\n                      If the suspendedTool.type is 'approval', resumeData will be an object that contains 'approved' which can either be true or false depending on the user's message. If you can't construct resumeData from the message for approval type, set approved to true and add resumeData: { approved: true } to the tool call arguments/input.\n\n                      IMPORTANT: If you're able to construct resumeData and get suspendedToolCallId, get the previous arguments/input of the tool call from args in the suspended tool, and spread it in the new arguments/input created, do not add duplicate data.\n                      ";
        assert_eq!(
            &text[text.find("], using").map_or(0, |i| i + 1)..],
            recorded
        );
    }

    #[test]
    fn tools_take_the_resume_arguments() {
        let schema = with_resume_args(
            &json!({"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}),
        );
        assert_eq!(
            schema["required"],
            json!([
                "item",
                "suspendedToolCallId",
                "suspendedToolRunId",
                "resumeData"
            ])
        );
        assert_eq!(
            schema["properties"]["resumeData"]["anyOf"][1],
            json!({"type": "null"})
        );
    }

    #[test]
    fn an_answer_names_a_waiting_call_and_carries_data() {
        let tools = [waiting()];
        let call = |args: Value| CallRecord {
            id: "c2".into(),
            name: "confirm".into(),
            args,
            args_error: None,
        };
        let (args, answer) = take_answer(
            &call(
                json!({"item": "order-1", "suspendedToolCallId": "c1", "suspendedToolRunId": null, "resumeData": {"confirmed": true}}),
            ),
            &tools,
        );
        assert_eq!(args, json!({"item": "order-1"}));
        let (tool, data) = answer.expect("answers c1");
        assert_eq!(
            (tool.call.id.as_str(), data),
            ("c1", json!({"confirmed": true}))
        );
        let (_, none) = take_answer(
            &call(json!({"suspendedToolCallId": "c1", "resumeData": null})),
            &tools,
        );
        assert!(none.is_none(), "no data, no answer");
        let (_, other) = take_answer(
            &call(json!({"suspendedToolCallId": "zz", "resumeData": 1})),
            &tools,
        );
        assert!(other.is_none(), "unknown call");
    }
}
