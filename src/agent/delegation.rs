//! Sub-agents as the reference exposes them: each configured sub-agent is the tool
//! `agent-{key}` (its description, the reference's input schema), the context a delegation
//! forwards (the supervisor's prompt without tool traffic), the sub-run's memory ids, and the
//! result object with the text the supervisor's model reads. The delegation itself (hooks,
//! the child run) is in `run/delegation.rs`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::message::{Message, Part, Role};
use super::state::ResultRecord;
use super::tools::{ToolKind, ToolSpec};
use crate::config::{AgentConfig, SUB_AGENT_TOOL_PREFIX};
use crate::json::from_proto_value;
use crate::model::ToolDefinition;
use crate::pb;

/// The reason a rejected delegation gives when its hook names none.
pub const DEFAULT_REJECTION: &str = "Delegation rejected by onDelegationStart hook";

/// A sub-agent a supervisor may call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubAgent {
    /// Its key in the supervisor's `sub_agents` (the tool is `agent-{key}`).
    pub key: String,
    /// The configured agent that runs.
    pub agent_id: String,
}

/// The tool `agent-{key}` of `sub`, as the reference offers it: its description, or
/// `Agent: {key}` when it has none.
pub fn tool(key: &str, sub: &AgentConfig) -> ToolSpec {
    let description = if sub.description.is_empty() {
        format!("Agent: {key}")
    } else {
        sub.description.clone()
    };
    ToolSpec {
        def: Arc::new(ToolDefinition::new(
            format!("{SUB_AGENT_TOOL_PREFIX}{key}"),
            description,
            input_schema(),
        )),
        require_approval: false,
        resume_schema: None,
        kind: ToolKind::SubAgent(Arc::new(SubAgent {
            key: key.to_owned(),
            agent_id: sub.id.clone(),
        })),
    }
}

/// The arguments of a delegation tool, exactly as the reference's model receives them (key
/// order included: `$schema` first, descriptions outside `anyOf` except on the two resume ids).
pub fn input_schema() -> Value {
    let nullable = |description: &str, kind: Value| json!({"description": description, "anyOf": [kind, {"type": "null"}]});
    let string = json!({"type": "string"});
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "prompt": {"description": "The prompt to send to the agent", "type": "string"},
            "threadId": nullable("Thread ID for conversation continuity for memory messages", string.clone()),
            "resourceId": nullable("Resource/user identifier for memory messages", string.clone()),
            "instructions": nullable("Additional instructions to append to the agent instructions. Only provide if you have specific guidance beyond what the agent already knows. Leave empty in most cases.", string),
            "maxSteps": nullable(
                "Maximum number of execution steps for the sub-agent (integer, minimum 3)",
                json!({"type": "integer", "minimum": 3, "maximum": 9_007_199_254_740_991_u64}),
            ),
            "suspendedToolCallId": {"anyOf": [
                {"description": "The toolCallId of the suspended tool to resume", "type": "string"},
                {"type": "null"}
            ]},
            "suspendedToolRunId": {"anyOf": [
                {"description": "The runId of the suspended tool", "type": "string"},
                {"type": "null"}
            ]},
            "resumeData": {
                "description": "The resumeData object created from the resumeSchema of suspended tool",
                "type": ["string", "number", "integer", "boolean", "object", "null"]
            }
        },
        "required": ["prompt"],
        "additionalProperties": false
    })
}

/// What the supervisor's model asked of the sub-agent.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Args {
    /// The prompt.
    pub prompt: String,
    /// Instructions added to the sub-agent's own.
    pub instructions: Option<String>,
    /// The step cap asked for.
    pub max_steps: Option<u32>,
}

impl Args {
    /// Reads a delegation call's arguments; the error is the text the model reads.
    pub fn parse(args: &Value) -> Result<Self, String> {
        let prompt = args
            .get("prompt")
            .and_then(Value::as_str)
            .ok_or_else(|| "Invalid input: \"prompt\" must be a string".to_owned())?;
        let instructions = args
            .get("instructions")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let max_steps = match args.get("maxSteps") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64().filter(|n| *n >= 3) {
                Some(n) => Some(u32::try_from(n).unwrap_or(u32::MAX)),
                None => {
                    return Err(
                        "Invalid input: \"maxSteps\" must be an integer of at least 3".into(),
                    );
                }
            },
        };
        Ok(Self {
            prompt: prompt.to_owned(),
            instructions,
            max_steps,
        })
    }
}

/// The messages a delegation forwards as the sub-run's context: the supervisor's current
/// prompt (its system messages, then the conversation), with tool calls taken out of
/// assistant messages (one left empty is dropped) and tool messages dropped.
pub fn context_messages<'a>(
    system: &[String],
    prompt: impl Iterator<Item = &'a Message>,
) -> Vec<Message> {
    let system = system
        .iter()
        .map(|text| Message::new(Role::System, vec![Part::Text { text: text.clone() }]));
    let conversation = prompt.filter_map(|m| match m.role {
        Role::Tool => None,
        Role::Assistant => {
            let mut kept = m.clone();
            kept.parts
                .retain(|p| !matches!(p, Part::ToolCall { .. } | Part::ToolResult { .. }));
            (!kept.parts.is_empty()).then_some(kept)
        }
        Role::System | Role::User => Some(m.clone()),
    });
    system.chain(conversation).collect()
}

/// The assistant messages of a delegation's context, at least 1 (the hooks' `iteration`).
pub fn iteration(context: &[Message]) -> u32 {
    let n = context.iter().filter(|m| m.role == Role::Assistant).count();
    u32::try_from(n.max(1)).unwrap_or(u32::MAX)
}

/// The sub-run's thread and resource under a supervisor's: `{thread}-{uuid}` and
/// `{resource}-{key}`, as the reference names them.
pub fn sub_memory_ids(thread_id: &str, resource_id: &str, key: &str) -> (String, String) {
    (
        format!("{thread_id}-{}", uuid::Uuid::new_v4()),
        format!("{resource_id}-{key}"),
    )
}

/// What a sub-run produced, for the supervisor.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// The text the supervisor reads (after `on_delegation_complete`).
    pub text: String,
    /// The sub-run's thread (empty without memory).
    pub thread_id: String,
    /// The sub-run's resource (empty without memory).
    pub resource_id: String,
    /// The sub-run's tool results, in order.
    pub tool_results: Vec<ResultRecord>,
}

impl Outcome {
    /// The tool result, in the reference's shape:
    /// `{text, subAgentThreadId, subAgentResourceId, subAgentToolResults}`.
    pub fn result(&self) -> Value {
        let mut out = Map::new();
        out.insert("text".into(), Value::String(self.text.clone()));
        let id = |s: &str| (!s.is_empty()).then(|| Value::String(s.to_owned()));
        if let Some(thread) = id(&self.thread_id) {
            out.insert("subAgentThreadId".into(), thread);
        }
        if let Some(resource) = id(&self.resource_id) {
            out.insert("subAgentResourceId".into(), resource);
        }
        let results = self
            .tool_results
            .iter()
            .map(|r| {
                let mut entry = json!({
                    "toolName": r.name,
                    "toolCallId": r.id,
                    "result": r.result,
                    "args": r.args,
                });
                if r.is_error {
                    entry["isError"] = Value::Bool(true);
                }
                entry
            })
            .collect();
        out.insert("subAgentToolResults".into(), Value::Array(results));
        Value::Object(out)
    }

    /// A rejected delegation's result: the text only, with the sub-run's ids.
    pub fn rejected(reason: &str, thread_id: String, resource_id: String) -> Self {
        Self {
            text: format!("[Delegation Rejected] {reason}"),
            thread_id,
            resource_id,
            tool_results: Vec::new(),
        }
    }
}

/// How a sub-agent's run ended, as its supervisor needs it: read from its `finish` chunk
/// while the supervisor follows it, or handed to a suspended supervisor when the run ends
/// after decisions of its own (then stored in the supervisor's record).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SubRunEnd {
    /// The sub-run.
    pub run_id: String,
    /// Its answer.
    pub text: String,
    /// Its finish reason (`agentd.v1.FinishReason`).
    pub finish_reason: i32,
    /// Why it did not succeed (failed, aborted), when it did not.
    pub error: Option<String>,
    /// It waits for decisions of its own.
    pub suspended: bool,
    /// Its tool results, every step's, in order.
    pub tool_results: Vec<ResultRecord>,
    /// Its tokens.
    pub usage: crate::model::Usage,
    /// The thread and resource the supervisor's result names for it (set when it is handed
    /// to a waiting supervisor).
    #[serde(default)]
    pub sub_memory: (String, String),
}

impl SubRunEnd {
    /// The end a sub-run's `finish` reports.
    pub fn from_finish(run_id: &str, result: &pb::GenerateResult) -> Self {
        let reason = pb::FinishReason::try_from(result.finish_reason);
        let error = match (&result.error, reason) {
            (Some(error), _) => Some(error.message.clone()),
            (None, Ok(pb::FinishReason::Aborted)) => Some("the sub-agent's run was aborted".into()),
            _ => None,
        };
        let usage = result.total_usage.unwrap_or_default();
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        Self {
            run_id: run_id.to_owned(),
            text: result.text.clone(),
            finish_reason: result.finish_reason,
            error,
            suspended: reason == Ok(pb::FinishReason::Suspended),
            tool_results: result
                .steps
                .iter()
                .flat_map(|s| &s.tool_results)
                .map(|r| ResultRecord {
                    id: r.tool_call_id.clone(),
                    name: r.tool_name.clone(),
                    args: r.args.as_ref().map_or(Value::Null, from_proto_value),
                    result: r.result.as_ref().map_or(Value::Null, from_proto_value),
                    is_error: r.is_error,
                    model_output: None,
                })
                .collect(),
            usage: crate::model::Usage {
                input_tokens: count(usage.input_tokens),
                output_tokens: count(usage.output_tokens),
                total_tokens: count(usage.total_tokens),
                ..Default::default()
            },
            sub_memory: Default::default(),
        }
    }

    /// A sub-run that could not run or be followed.
    pub fn failed(run_id: &str, why: String) -> Self {
        Self {
            run_id: run_id.to_owned(),
            finish_reason: pb::FinishReason::Error.into(),
            error: Some(why),
            ..Self::default()
        }
    }
}

/// The tool error the supervisor's model reads when a sub-run fails.
pub fn failed_text(parent_name: &str, key: &str) -> String {
    format!("[Agent:{parent_name}] - Failed agent tool execution for {key}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_read_as_the_schema_says() {
        let args =
            Args::parse(&json!({"prompt": "Why?", "instructions": "Be brief.", "maxSteps": 4}))
                .expect("valid");
        assert_eq!(args.prompt, "Why?");
        assert_eq!(args.instructions.as_deref(), Some("Be brief."));
        assert_eq!(args.max_steps, Some(4));
        assert!(Args::parse(&json!({"instructions": "x"})).is_err());
        assert!(Args::parse(&json!({"prompt": "x", "maxSteps": 2})).is_err());
        let plain = Args::parse(&json!({"prompt": "x", "instructions": null, "maxSteps": null}))
            .expect("nulls are absent");
        assert_eq!(plain.instructions, None);
        assert_eq!(plain.max_steps, None);
    }

    #[test]
    fn the_context_drops_tool_traffic() {
        let call = Part::ToolCall {
            tool_call_id: "c1".into(),
            tool_name: "agent-r".into(),
            args: json!({}),
        };
        let text = |t: &str| Part::Text { text: t.into() };
        let messages = [
            Message::new(Role::User, vec![text("Hi")]),
            Message::new(Role::Assistant, vec![text("Let me ask."), call.clone()]),
            Message::new(Role::Tool, vec![]),
            Message::new(Role::Assistant, vec![call]),
        ];
        let context = context_messages(&["Sys".into()], messages.iter());
        let roles: Vec<Role> = context.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::System, Role::User, Role::Assistant]);
        assert_eq!(context[2].parts, vec![text("Let me ask.")]);
        assert_eq!(iteration(&context), 1);
        assert_eq!(iteration(&context[..2]), 1);
    }

    #[test]
    fn the_result_has_the_reference_shape() {
        let outcome = Outcome {
            text: "Done".into(),
            thread_id: "t-1".into(),
            resource_id: "u-r".into(),
            tool_results: vec![ResultRecord {
                id: "c".into(),
                name: "lookup".into(),
                args: json!({"q": 1}),
                result: json!({"answer": 42}),
                is_error: false,
                model_output: None,
            }],
        };
        assert_eq!(
            outcome.result(),
            json!({"text": "Done", "subAgentThreadId": "t-1", "subAgentResourceId": "u-r",
                "subAgentToolResults": [{"toolName": "lookup", "toolCallId": "c",
                    "result": {"answer": 42}, "args": {"q": 1}}]})
        );
        assert_eq!(
            failed_text("Boss", "researcher"),
            "[Agent:Boss] - Failed agent tool execution for researcher"
        );
    }
}
