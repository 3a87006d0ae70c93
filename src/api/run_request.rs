//! GenerateRequest → RunRequest: every option of the reference's `generate()` converted and
//! checked, each problem naming its field.

use serde_json::Value;
use tonic::Status;

use super::error::Violations;
use super::{check_id, check_text};
use crate::agent::message::{Message, Part, Role};
use crate::agent::request::{
    ClientTool, ErrorStrategy, Injection, MemoryRequest, OnDisconnect, RunRequest, StopCondition,
    StructuredOutput, TracingRequest,
};
use crate::agent::wire;
use crate::config::Limits;
use crate::json::{from_proto_struct, from_proto_value};
use crate::memory::working;
use crate::model::{ModelSettings, ToolChoice};
use crate::pb;

/// Remembered messages sent to the model when a request does not say.
const DEFAULT_LAST_MESSAGES: usize = 10;

/// Converts and checks a GenerateRequest; every problem names its field.
pub fn run_request(req: pb::GenerateRequest, limits: &Limits) -> Result<RunRequest, Status> {
    let mut v = Violations::default();
    if req.agent_id.is_empty() {
        v.add("agent_id", "must not be empty");
    }
    check_id(&mut v, "agent_id", &req.agent_id, limits);
    check_id(&mut v, "run_id", &req.run_id, limits);
    check_id(&mut v, "idempotency_key", &req.idempotency_key, limits);
    if req.messages.len() + req.context.len() > limits.max_messages {
        v.add(
            "messages",
            format!(
                "messages and context may hold at most {} messages",
                limits.max_messages
            ),
        );
    }
    let mut input = messages(&mut v, "messages", &req.messages);
    if !req.prompt.is_empty() {
        input.push(Message::new(
            Role::User,
            vec![Part::Text {
                text: req.prompt.clone(),
            }],
        ));
    }
    if input.is_empty() {
        v.add("messages", "give at least one message, or a prompt");
    }
    let context = messages(&mut v, "context", &req.context);
    let max_steps = req.max_steps.and_then(|n| positive(&mut v, "max_steps", n));
    let stop_when = stop_conditions(&mut v, &req.stop_when);
    let tool_choice = req
        .tool_choice
        .as_ref()
        .and_then(|c| tool_choice(&mut v, c));
    let tool_call_concurrency = req
        .tool_call_concurrency
        .and_then(|n| positive(&mut v, "tool_call_concurrency", n));
    let structured_output = req
        .structured_output
        .as_ref()
        .and_then(|o| structured_output(&mut v, o));
    let memory = req.memory.as_ref().and_then(|m| memory(&mut v, m, limits));
    let settings = req
        .model_settings
        .as_ref()
        .map(|s| model_settings(&mut v, s))
        .unwrap_or_default();
    let client_tools = client_tools(&mut v, &req.client_tools);
    for (i, system) in req.system.iter().enumerate() {
        check_text(&mut v, &format!("system.{i}"), system, limits);
    }
    let is_task_complete = req
        .is_task_complete
        .as_ref()
        .and_then(|c| super::completion::completion(&mut v, c, limits));
    let tracing = req
        .tracing_options
        .as_ref()
        .map(|t| TracingRequest {
            trace_id: t.trace_id.clone(),
            parent_span_id: t.parent_span_id.clone(),
            metadata: t
                .metadata
                .as_ref()
                .map(from_proto_struct)
                .unwrap_or_default(),
            tags: t.tags.clone(),
            request_context_keys: t.request_context_keys.clone(),
            record_inputs: t.record_inputs,
            record_outputs: t.record_outputs,
        })
        .unwrap_or_default();
    let on_disconnect = on_disconnect(req.on_disconnect());
    let processors = req
        .processors
        .as_ref()
        .map(|p| super::processors::processors(&mut v, p, limits))
        .unwrap_or_default();
    let scorers = req
        .scorers
        .as_ref()
        .map(|s| super::scores::requested(&mut v, s, limits));
    v.into_result()?;
    Ok(RunRequest {
        agent_id: req.agent_id,
        run_id: (!req.run_id.is_empty()).then_some(req.run_id),
        input,
        max_steps,
        stop_when,
        active_tools: req.active_tools,
        tool_choice,
        require_tool_approval: req.require_tool_approval,
        auto_resume_suspended_tools: req.auto_resume_suspended_tools,
        tool_call_concurrency,
        context,
        structured_output,
        instructions: req.instructions,
        system: req.system,
        memory,
        settings,
        client_tools,
        provider_options: req
            .provider_options
            .as_ref()
            .map(from_proto_struct)
            .unwrap_or_default(),
        extra_body: req
            .extra_body
            .as_ref()
            .map(from_proto_struct)
            .unwrap_or_default(),
        request_context: req
            .request_context
            .as_ref()
            .map(from_proto_struct)
            .unwrap_or_default(),
        tracing,
        include_raw: req.include_raw_chunks,
        save_per_step: req.save_per_step,
        idempotency_key: (!req.idempotency_key.is_empty()).then_some(req.idempotency_key),
        on_disconnect,
        is_task_complete,
        // The caller's, set by the handler: the request does not say who it is.
        tenant: String::new(),
        processors,
        parent: None,
        scorers,
        return_scorer_data: req.return_scorer_data,
    })
}

/// The domain disconnect behaviour.
pub fn on_disconnect(value: pb::OnDisconnect) -> OnDisconnect {
    match value {
        pb::OnDisconnect::Continue => OnDisconnect::Continue,
        pb::OnDisconnect::Abort | pb::OnDisconnect::Unspecified => OnDisconnect::Abort,
    }
}

fn messages(v: &mut Violations, field: &str, list: &[pb::Message]) -> Vec<Message> {
    list.iter()
        .enumerate()
        .filter_map(
            |(i, m)| match wire::message_from(m, &format!("{field}.{i}")) {
                Ok(m) => Some(m),
                Err((path, why)) => {
                    v.add(path, why);
                    None
                }
            },
        )
        .collect()
}

fn positive(v: &mut Violations, field: &str, n: i32) -> Option<u32> {
    match u32::try_from(n) {
        Ok(n) if n >= 1 => Some(n),
        _ => {
            v.add(field, "must be at least 1");
            None
        }
    }
}

fn stop_conditions(v: &mut Violations, list: &[pb::StopCondition]) -> Vec<StopCondition> {
    use pb::stop_condition::Condition;
    let mut out = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let field = format!("stop_when.{i}");
        match &c.condition {
            None => v.add(field, "must set one condition"),
            Some(Condition::StepCountIs(n)) => {
                if let Some(n) = positive(v, &format!("{field}.step_count_is"), *n) {
                    out.push(StopCondition::StepCountIs(n));
                }
            }
            Some(Condition::HasToolCall(name)) if name.is_empty() => {
                v.add(format!("{field}.has_tool_call"), "must name a tool");
            }
            Some(Condition::HasToolCall(name)) => {
                out.push(StopCondition::HasToolCall(name.clone()))
            }
            Some(Condition::FinishReasonIs(r)) => {
                let reason = pb::FinishReason::try_from(*r)
                    .ok()
                    .and_then(wire::finish_reason_from);
                match reason {
                    Some(reason) => out.push(StopCondition::FinishReasonIs(reason)),
                    None => v.add(
                        format!("{field}.finish_reason_is"),
                        "must be a step finish reason (stop, length, content filter, tool calls, error, other)",
                    ),
                }
            }
            Some(Condition::TotalTokensAtLeast(n)) => match u64::try_from(*n) {
                Ok(n) if n > 0 => out.push(StopCondition::TotalTokensAtLeast(n)),
                _ => v.add(
                    format!("{field}.total_tokens_at_least"),
                    "must be at least 1",
                ),
            },
        }
    }
    out
}

fn tool_choice(v: &mut Violations, choice: &pb::ToolChoice) -> Option<ToolChoice> {
    wire::tool_choice_from(choice).unwrap_or_else(|(field, problem)| {
        v.add(format!("tool_choice.{field}"), problem);
        None
    })
}

fn structured_output(v: &mut Violations, o: &pb::StructuredOutput) -> Option<StructuredOutput> {
    let Some(schema) = &o.schema else {
        v.add("structured_output.schema", "is required");
        return None;
    };
    let error_strategy = match o.error_strategy() {
        pb::ErrorStrategy::Unspecified | pb::ErrorStrategy::Strict => ErrorStrategy::Strict,
        pb::ErrorStrategy::Warn => ErrorStrategy::Warn,
        pb::ErrorStrategy::Fallback => ErrorStrategy::Fallback,
    };
    let fallback_value = o.fallback_value.as_ref().map(from_proto_value);
    if error_strategy == ErrorStrategy::Fallback && fallback_value.is_none() {
        v.add(
            "structured_output.fallback_value",
            "is required with ERROR_STRATEGY_FALLBACK",
        );
    }
    let injection = match (o.injection(), o.json_prompt_injection) {
        (pb::JsonPromptInjection::Unspecified, None) => None,
        (pb::JsonPromptInjection::Unspecified, Some(true)) => Some(Injection::System),
        (pb::JsonPromptInjection::Unspecified, Some(false)) => Some(Injection::Native),
        (mode, None) => Some(match mode {
            pb::JsonPromptInjection::Native => Injection::Native,
            pb::JsonPromptInjection::System => Injection::System,
            pb::JsonPromptInjection::Inline => Injection::Inline,
            _ => Injection::Auto,
        }),
        (_, Some(_)) => {
            v.add(
                "structured_output.injection",
                "set either injection or json_prompt_injection, not both",
            );
            None
        }
    };
    if let Some(model) = &o.model
        && model
            .split_once('/')
            .is_none_or(|(p, m)| p.is_empty() || m.is_empty())
    {
        v.add(
            "structured_output.model",
            format!("must be provider/model, got {model:?}"),
        );
    }
    Some(StructuredOutput {
        schema: Value::Object(from_proto_struct(schema)),
        error_strategy,
        fallback_value,
        instructions: o.instructions.clone().filter(|i| !i.trim().is_empty()),
        injection,
        model: o.model.clone(),
    })
}

fn memory(v: &mut Violations, m: &pb::MemoryOptions, limits: &Limits) -> Option<MemoryRequest> {
    let thread = m.thread.clone().unwrap_or_default();
    match (thread.id.is_empty(), m.resource.is_empty()) {
        (true, true) => return None,
        (false, false) => {}
        _ => {
            v.add(
                "memory",
                format!(
                    "A resourceId and a threadId must be provided when using Memory. Saw threadId \"{}\" and resourceId \"{}\"",
                    thread.id, m.resource
                ),
            );
            return None;
        }
    }
    check_id(v, "memory.thread.id", &thread.id, limits);
    check_id(v, "memory.resource", &m.resource, limits);
    let options = m.options.clone().unwrap_or_default();
    let last_messages = match options.last_messages {
        None => DEFAULT_LAST_MESSAGES,
        Some(n) => match usize::try_from(n) {
            Ok(n) => n,
            Err(_) => {
                v.add("memory.options.last_messages", "must not be negative");
                0
            }
        },
    };
    Some(MemoryRequest {
        thread_id: thread.id,
        resource_id: m.resource.clone(),
        title: thread.title,
        metadata: thread
            .metadata
            .as_ref()
            .map(from_proto_struct)
            .unwrap_or_default(),
        last_messages,
        read_only: options.read_only,
        generate_title: options.generate_title,
        emit_title_event: options.emit_title_event,
        filter_incomplete_tool_calls: options.filter_incomplete_tool_calls.unwrap_or(true),
        working_memory: options
            .working_memory
            .as_ref()
            .map(|w| working_overrides(v, w))
            .unwrap_or_default(),
        semantic_recall: options
            .semantic_recall
            .as_ref()
            .map(|r| super::recall::recall_override(v, r)),
    })
}

/// A request's working-memory options, checked.
fn working_overrides(v: &mut Violations, w: &pb::WorkingMemoryOptions) -> working::Overrides {
    const FIELD: &str = "memory.options.working_memory";
    let scope = match pb::WorkingMemoryScope::try_from(w.scope) {
        Ok(pb::WorkingMemoryScope::Unspecified) => None,
        Ok(pb::WorkingMemoryScope::Resource) => Some(working::Scope::Resource),
        Ok(pb::WorkingMemoryScope::Thread) => Some(working::Scope::Thread),
        Err(_) => {
            v.add(
                format!("{FIELD}.scope"),
                format!("unknown WorkingMemoryScope {}", w.scope),
            );
            None
        }
    };
    let format = match (&w.template, &w.schema) {
        (Some(_), Some(_)) => {
            v.add(FIELD, "set template or schema, not both");
            None
        }
        (Some(template), None) => Some(working::Format::Markdown {
            template: template.clone(),
        }),
        (None, Some(schema)) => {
            let schema = Value::Object(from_proto_struct(schema));
            match crate::config::working_memory_schema(&schema) {
                Ok(schema) => Some(working::Format::Schema { schema }),
                Err(e) => {
                    v.add(format!("{FIELD}.schema"), e);
                    None
                }
            }
        }
        (None, None) => None,
    };
    working::Overrides {
        enabled: w.enabled,
        scope,
        format,
    }
}

fn model_settings(v: &mut Violations, s: &pb::ModelSettings) -> ModelSettings {
    let mut count = |field: &str, n: Option<i32>| -> Option<u32> {
        n.and_then(|n| match u32::try_from(n) {
            Ok(n) => Some(n),
            Err(_) => {
                v.add(format!("model_settings.{field}"), "must not be negative");
                None
            }
        })
    };
    ModelSettings {
        temperature: s.temperature,
        max_output_tokens: count("max_output_tokens", s.max_output_tokens),
        top_p: s.top_p,
        top_k: count("top_k", s.top_k),
        presence_penalty: s.presence_penalty,
        frequency_penalty: s.frequency_penalty,
        stop_sequences: s.stop_sequences.clone(),
        seed: s.seed,
        max_retries: count("max_retries", s.max_retries),
    }
}

fn client_tools(v: &mut Violations, tools: &[pb::ClientTool]) -> Vec<ClientTool> {
    let mut seen = std::collections::HashSet::new();
    tools
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            if t.name.is_empty() || !seen.insert(t.name.as_str()) {
                v.add(
                    format!("client_tools.{i}.name"),
                    "must be non-empty and unique",
                );
                return None;
            }
            let parameters = t.parameters.as_ref().map_or_else(
                || serde_json::json!({"type": "object", "properties": {}}),
                |p| Value::Object(from_proto_struct(p)),
            );
            let resume_schema = t
                .resume_schema
                .as_ref()
                .map(|p| Value::Object(from_proto_struct(p)));
            if let Some(schema) = &resume_schema
                && let Err(e) = crate::agent::structured::compile(schema)
            {
                v.add(format!("client_tools.{i}.resume_schema"), e);
            }
            Some(ClientTool {
                name: t.name.clone(),
                description: t.description.clone(),
                parameters,
                resume_schema,
            })
        })
        .collect()
}
