//! A delegation: the supervisor's `agent-{key}` call becomes a child run of the sub-agent, as
//! the reference runs it. `on_delegation_start` may reject or change it, `message_filter` picks
//! the forwarded context, the child runs as a run of its own (its record, its log for Observe,
//! aborted with its supervisor, traced under the call's span) while its chunks stream into the
//! supervisor's stream, and `on_delegation_complete` may replace its text, leave feedback for
//! the supervisor's later turns, or stop the supervisor after this step. A child that suspends
//! for decisions suspends the supervisor on the call; the runtime hands the child's end back
//! when it ends (`resume_delegation`).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::Runner;
use crate::agent::delegation::{self, Args, DEFAULT_REJECTION, Outcome, SubAgent, SubRunEnd};
use crate::agent::error::RunError;
use crate::agent::event::Event;
use crate::agent::message::{Message, Part, Role};
use crate::agent::request::{MemoryRequest, OnDisconnect, ParentLink, RunRequest};
use crate::agent::runtime::ChunkStream;
use crate::agent::state::CallRecord;
use crate::agent::tools::ToolOutput;
use crate::agent::wire;
use crate::json::to_proto_struct;
use crate::pb;
use crate::pb::chunk::Payload;
use crate::pb::hook_answer::Answer;
use crate::pb::hook_call::Context;
use crate::store::ThreadKey;

/// Starts sub-agents' runs for a supervisor's run (the runtime, on the supervisor's replica).
#[async_trait::async_trait]
pub trait Delegator: Send + Sync {
    /// Starts a sub-agent's run of `request`, stopped when `cancel` is; its chunks stream
    /// back, ending with its `finish`.
    async fn start_child(
        &self,
        request: RunRequest,
        cancel: CancellationToken,
    ) -> Result<ChunkStream, RunError>;
}

/// A delegation's result: the tool's output, and the text the supervisor's model reads
/// instead of the whole result object; or the sub-run it waits for.
pub(super) struct Delegated {
    /// The tool output (an `Err` is the error text the model reads).
    pub output: Result<ToolOutput, String>,
    /// What the model reads in place of the output, when that differs.
    pub model_output: Option<String>,
    /// The sub-agent's run waits for decisions of its own: the supervisor suspends on it.
    pub waiting_on: Option<String>,
}

impl Delegated {
    fn failed(text: String) -> Self {
        Self {
            output: Err(text),
            model_output: None,
            waiting_on: None,
        }
    }

    /// The tool's `result`, the model reading `model_output` instead when set.
    fn answered(result: Value, model_output: Option<String>) -> Self {
        Self {
            output: Ok(ToolOutput {
                result,
                is_error: false,
            }),
            model_output,
            waiting_on: None,
        }
    }
}

/// What `on_delegation_start` left of the delegation.
struct Plan {
    prompt: String,
    instructions: Option<String>,
    max_steps: Option<u32>,
    context: Vec<Message>,
}

impl Runner {
    /// Runs the delegation of `call` to `sub`, sending the child's chunks to `outputs` as
    /// they come.
    pub(super) async fn delegate(
        &self,
        call: &CallRecord,
        sub: &SubAgent,
        outputs: Option<&mpsc::UnboundedSender<Event>>,
    ) -> Delegated {
        let failed = || delegation::failed_text(&self.agent_name(), &sub.key);
        let args = match Args::parse(&call.args) {
            Ok(args) => args,
            Err(text) => return Delegated::failed(text),
        };
        let (Some(delegator), Some(agent)) = (&self.delegator, self.agents.get(&sub.agent_id))
        else {
            return Delegated::failed(failed());
        };
        let memory = self.state.request.memory.as_ref();
        let (thread_id, resource_id) = match memory {
            Some(m) => delegation::sub_memory_ids(&m.thread_id, &m.resource_id, &sub.key),
            None => (
                uuid::Uuid::new_v4().to_string(),
                format!("{}-{}", slug(&self.agent.config.id), sub.key),
            ),
        };
        let (context, iteration) = self.delegation_context();
        // The model's step cap is bounded by the sub-agent's default; the hook's is not.
        let cap = agent.config.default_options.max_steps;
        let plan = Plan {
            prompt: args.prompt,
            instructions: args.instructions,
            max_steps: args.max_steps.map(|n| cap.map_or(n, |cap| n.min(cap))),
            context,
        };
        let plan = match self.on_delegation_start(call, sub, plan, iteration).await {
            Ok(plan) => plan,
            Err(Rejection::Rejected(reason)) => {
                let outcome = Outcome::rejected(&reason, thread_id, resource_id);
                // As the reference: the sub-agent's thread keeps the prompt and the refusal.
                if memory.is_some_and(|m| !m.read_only) {
                    let key = ThreadKey {
                        thread_id: outcome.thread_id.clone(),
                        resource_id: outcome.resource_id.clone(),
                    };
                    let messages = [
                        (Role::User, plan_prompt(&call.args)),
                        (Role::Assistant, outcome.text.clone()),
                    ];
                    self.append_to_thread(&key, &messages, true).await;
                }
                return Delegated::answered(rejected_result(&outcome), Some(outcome.text.clone()));
            }
            Err(Rejection::Failed(text)) => return Delegated::failed(text),
        };
        let context = self.message_filter(call, sub, &plan, iteration).await;
        let request = RunRequest {
            agent_id: sub.agent_id.clone(),
            input: vec![Message::new(
                Role::User,
                vec![Part::Text {
                    text: plan.prompt.clone(),
                }],
            )],
            context,
            instructions: plan
                .instructions
                .as_ref()
                .map(|extra| format!("{}\n\n{extra}", agent.config.instructions)),
            max_steps: plan.max_steps,
            memory: memory.map(|m| MemoryRequest {
                thread_id: thread_id.clone(),
                resource_id: resource_id.clone(),
                title: None,
                metadata: serde_json::Map::new(),
                last_messages: 0,
                // A supervisor that saves nothing has its sub-agents save nothing either.
                read_only: m.read_only,
                generate_title: false,
                emit_title_event: false,
                filter_incomplete_tool_calls: true,
                working_memory: Default::default(),
                semantic_recall: None,
            }),
            request_context: self.state.request.request_context.clone(),
            tracing: crate::agent::request::TracingRequest {
                record_inputs: self.state.request.tracing.record_inputs,
                record_outputs: self.state.request.tracing.record_outputs,
                ..Default::default()
            },
            // The child's stream is this call: when the supervisor stops reading, it stops.
            on_disconnect: OnDisconnect::Abort,
            tenant: self.state.request.tenant.clone(),
            parent: Some(self.link(call, &thread_id, &resource_id)),
            ..RunRequest::default()
        };
        let started = Instant::now();
        let end = match delegator
            .start_child(request, self.cancel.child_token())
            .await
        {
            Ok(stream) => self.follow_child(stream, call, sub, outputs).await,
            Err(e) => SubRunEnd::failed("", e.to_string()),
        };
        if end.suspended {
            return Delegated {
                output: Err(format!("waiting for sub-agent run {}", end.run_id)),
                model_output: None,
                waiting_on: Some(end.run_id),
            };
        }
        let ids = (thread_id, resource_id);
        self.conclude(
            call,
            sub,
            &plan.prompt,
            end,
            ids,
            started.elapsed(),
            iteration,
        )
        .await
    }

    /// Continues a delegation whose sub-run ended after decisions of its own (`end`, a
    /// [`SubRunEnd`] the runtime recorded on this run's waiting call).
    pub(super) async fn resume_delegation(
        &self,
        call: &CallRecord,
        sub: &SubAgent,
        end: Value,
    ) -> Delegated {
        let end: SubRunEnd = match serde_json::from_value(end) {
            Ok(end) => end,
            Err(_) => {
                return Delegated::failed(delegation::failed_text(&self.agent_name(), &sub.key));
            }
        };
        let prompt = plan_prompt(&call.args);
        let (_, iteration) = self.delegation_context();
        let ids = end.sub_memory.clone();
        self.conclude(call, sub, &prompt, end, ids, Duration::ZERO, iteration)
            .await
    }

    /// The end of a delegation: `on_delegation_complete`, then the tool's result.
    #[allow(clippy::too_many_arguments)]
    async fn conclude(
        &self,
        call: &CallRecord,
        sub: &SubAgent,
        prompt: &str,
        end: SubRunEnd,
        (thread_id, resource_id): (String, String),
        took: Duration,
        iteration: u32,
    ) -> Delegated {
        let mut outcome = Outcome {
            text: end.text.clone(),
            thread_id,
            resource_id,
            tool_results: end.tool_results.clone(),
        };
        let replaced = self
            .on_delegation_complete(call, sub, prompt, &outcome, &end, took, iteration)
            .await;
        let failed = end.error.is_some();
        match replaced {
            Some(text) if failed => return Delegated::failed(text),
            Some(text) => outcome.text = text,
            None if failed => {
                return Delegated::failed(delegation::failed_text(&self.agent_name(), &sub.key));
            }
            None => {}
        }
        let model_output = (!self.agent.config.delegation.include_sub_agent_tool_results)
            .then(|| outcome.text.clone());
        Delegated::answered(outcome.result(), model_output)
    }

    /// The context a delegation of this step forwards (the supervisor's prompt of the step:
    /// everything but the step's own answer), and its `iteration`.
    fn delegation_context(&self) -> (Vec<Message>, u32) {
        let prompt: Vec<&Message> = self.state.prompt_messages().collect();
        let before_answer = prompt.len().saturating_sub(1);
        let context = delegation::context_messages(
            &self.system_messages(),
            prompt[..before_answer].iter().copied(),
        );
        let iteration = delegation::iteration(&context);
        (context, iteration)
    }

    /// The link a sub-run of `call` keeps to this run.
    fn link(&self, call: &CallRecord, thread_id: &str, resource_id: &str) -> ParentLink {
        let own = self.state.request.parent.as_ref();
        let memory = self.state.request.memory.as_ref();
        let (root_thread_id, root_resource_id) = match own {
            Some(p) => (p.root_thread_id.clone(), p.root_resource_id.clone()),
            None => (
                memory.map(|m| m.thread_id.clone()).unwrap_or_default(),
                memory.map(|m| m.resource_id.clone()).unwrap_or_default(),
            ),
        };
        ParentLink {
            run_id: self.run_id.clone(),
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            depth: own.map_or(0, |p| p.depth) + 1,
            sub_thread_id: thread_id.to_owned(),
            sub_resource_id: resource_id.to_owned(),
            root_thread_id,
            root_resource_id,
        }
    }

    /// Streams the child's chunks to the supervisor's stream until its `finish`.
    async fn follow_child(
        &self,
        mut stream: ChunkStream,
        call: &CallRecord,
        sub: &SubAgent,
        outputs: Option<&mpsc::UnboundedSender<Event>>,
    ) -> SubRunEnd {
        let mut end = None;
        let mut run_id = String::new();
        while let Some(item) = stream.next().await {
            let chunk = match item.and_then(|chunk| chunk.decode()) {
                Ok(chunk) => chunk,
                Err(e) => return SubRunEnd::failed(&run_id, e.to_string()),
            };
            run_id.clone_from(&chunk.run_id);
            if let Some(Payload::Finish(result)) = &chunk.payload {
                end = Some(SubRunEnd::from_finish(&chunk.run_id, result));
            }
            // The supervisor's stream may be gone (it is aborting): the child stops with it.
            if let Some(outputs) = outputs {
                let _ = outputs.send(Event::ToolOutput {
                    tool_call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    agent_id: sub.agent_id.clone(),
                    chunk: Box::new(chunk),
                });
            }
        }
        end.unwrap_or_else(|| {
            SubRunEnd::failed(&run_id, "the sub-agent's run ended without a result".into())
        })
    }

    /// `on_delegation_start`: reject, or change the prompt, instructions and step cap.
    async fn on_delegation_start(
        &self,
        call: &CallRecord,
        sub: &SubAgent,
        mut plan: Plan,
        iteration: u32,
    ) -> Result<Plan, Rejection> {
        let kind = pb::HookKind::OnDelegationStart;
        if !self.handles(kind) {
            return Ok(plan);
        }
        let messages = if self.hooks.as_ref().is_some_and(|h| h.wants_messages(kind)) {
            plan.context.iter().map(wire::message).collect()
        } else {
            Vec::new()
        };
        let context = pb::DelegationStartContext {
            primitive_id: sub.agent_id.clone(),
            prompt: plan.prompt.clone(),
            instructions: plan.instructions.clone(),
            max_steps: plan.max_steps,
            iteration,
            tool_call_id: call.id.clone(),
            parent_agent_id: self.agent.config.id.clone(),
            parent_agent_name: self.agent_name(),
            messages,
            request_context: Some(to_proto_struct(&self.state.request.request_context)),
        };
        match self.hook(kind, Context::OnDelegationStart(context)).await {
            Ok(Some(Answer::OnDelegationStart(answer))) => {
                if answer.proceed == Some(false) {
                    return Err(Rejection::Rejected(
                        answer
                            .rejection_reason
                            .unwrap_or_else(|| DEFAULT_REJECTION.to_owned()),
                    ));
                }
                if let Some(prompt) = answer.modified_prompt {
                    plan.prompt = prompt;
                }
                if let Some(instructions) = answer.modified_instructions {
                    plan.instructions = Some(instructions).filter(|s| !s.is_empty());
                }
                if let Some(max_steps) = answer.modified_max_steps {
                    plan.max_steps = Some(max_steps);
                }
                Ok(plan)
            }
            // As the reference's default `hookErrorStrategy: 'warn'`: logged, and the
            // delegation goes on unchanged.
            Ok(Some(Answer::Error(e))) => {
                warn!(run_id = %self.run_id, error = %e.message, "on_delegation_start threw; delegating unchanged");
                Ok(plan)
            }
            Ok(_) => Ok(plan),
            Err(failure) => Err(Rejection::Failed(self.note_fatal(failure))),
        }
    }

    /// `message_filter`: the context messages the sub-agent sees.
    async fn message_filter(
        &self,
        call: &CallRecord,
        sub: &SubAgent,
        plan: &Plan,
        iteration: u32,
    ) -> Vec<Message> {
        let kind = pb::HookKind::MessageFilter;
        if !self.handles(kind) {
            return plan.context.clone();
        }
        let context = pb::MessageFilterContext {
            messages: plan.context.iter().map(wire::message).collect(),
            primitive_id: sub.agent_id.clone(),
            prompt: plan.prompt.clone(),
            iteration,
            tool_call_id: call.id.clone(),
            parent_agent_id: self.agent.config.id.clone(),
            parent_agent_name: self.agent_name(),
        };
        match self.hook(kind, Context::MessageFilter(context)).await {
            Ok(Some(Answer::MessageFilter(answer))) => {
                let read: Result<Vec<Message>, _> = answer
                    .messages
                    .iter()
                    .enumerate()
                    .map(|(i, m)| wire::message_from(m, &format!("messages[{i}]")))
                    .collect();
                match read {
                    Ok(messages) => messages,
                    Err((field, why)) => {
                        warn!(run_id = %self.run_id, %field, %why, "message_filter answered an unusable message; forwarding the context unfiltered");
                        plan.context.clone()
                    }
                }
            }
            Ok(Some(Answer::Error(e))) => {
                warn!(run_id = %self.run_id, error = %e.message, "message_filter threw; forwarding the context unfiltered");
                plan.context.clone()
            }
            Ok(_) => plan.context.clone(),
            Err(failure) => {
                self.note_fatal(failure);
                plan.context.clone()
            }
        }
    }

    /// `on_delegation_complete`: the text replacing the sub-agent's (when the hook gives one);
    /// feedback goes to the supervisor's memory, `bail` stops the supervisor after this step.
    #[allow(clippy::too_many_arguments)]
    async fn on_delegation_complete(
        &self,
        call: &CallRecord,
        sub: &SubAgent,
        prompt: &str,
        outcome: &Outcome,
        end: &SubRunEnd,
        took: Duration,
        iteration: u32,
    ) -> Option<String> {
        let kind = pb::HookKind::OnDelegationComplete;
        if !self.handles(kind) {
            return None;
        }
        let messages = if self.hooks.as_ref().is_some_and(|h| h.wants_messages(kind)) {
            [
                Message::new(
                    Role::User,
                    vec![Part::Text {
                        text: prompt.to_owned(),
                    }],
                ),
                Message::new(
                    Role::Assistant,
                    vec![Part::Text {
                        text: outcome.text.clone(),
                    }],
                ),
            ]
            .iter()
            .map(wire::message)
            .collect()
        } else {
            Vec::new()
        };
        let context = pb::DelegationCompleteContext {
            primitive_id: sub.agent_id.clone(),
            prompt: prompt.to_owned(),
            result_text: outcome.text.clone(),
            finish_reason: end.finish_reason,
            sub_agent_thread_id: outcome.thread_id.clone(),
            sub_agent_resource_id: outcome.resource_id.clone(),
            sub_agent_tool_results: outcome.tool_results.iter().map(wire::result).collect(),
            usage: Some(wire::usage(end.usage)),
            duration_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            success: end.error.is_none(),
            error: end.error.clone(),
            iteration,
            tool_call_id: call.id.clone(),
            parent_agent_id: self.agent.config.id.clone(),
            parent_agent_name: self.agent_name(),
            messages,
        };
        match self
            .hook(kind, Context::OnDelegationComplete(context))
            .await
        {
            Ok(Some(Answer::OnDelegationComplete(answer))) => {
                if answer.bail {
                    self.bail.store(true, Ordering::Relaxed);
                }
                if let Some(feedback) = answer.feedback.filter(|f| !f.is_empty()) {
                    self.save_feedback(feedback).await;
                }
                answer.result_text
            }
            Ok(Some(Answer::Error(e))) => {
                warn!(run_id = %self.run_id, error = %e.message, "on_delegation_complete threw; keeping the sub-agent's result");
                None
            }
            Ok(_) => None,
            Err(failure) => {
                self.note_fatal(failure);
                None
            }
        }
    }

    /// Saves `on_delegation_complete` feedback to the supervisor's thread, where its later
    /// turns read it (not this one, as the reference); without memory it is lost, as there.
    async fn save_feedback(&self, feedback: String) {
        let Some(memory) = self.state.request.memory.as_ref().filter(|m| !m.read_only) else {
            return;
        };
        let key = ThreadKey {
            thread_id: memory.thread_id.clone(),
            resource_id: memory.resource_id.clone(),
        };
        self.append_to_thread(&key, &[(Role::Assistant, feedback)], false)
            .await;
    }

    /// Appends text messages to a thread, creating it (empty title and metadata) when `new`.
    async fn append_to_thread(&self, key: &ThreadKey, messages: &[(Role, String)], new: bool) {
        let encoded: Result<Vec<bytes::Bytes>, _> = messages
            .iter()
            .map(|(role, text)| {
                let message = Message::new(*role, vec![Part::Text { text: text.clone() }]);
                serde_json::to_vec(&message).map(bytes::Bytes::from)
            })
            .collect();
        let Ok(encoded) = encoded else {
            return;
        };
        let meta = new.then(|| {
            let meta = serde_json::json!({
                "title": null,
                "metadata": {},
                "createdAtMs": crate::agent::message::now_ms(),
            });
            bytes::Bytes::from(meta.to_string())
        });
        if let Err(e) = self.deps.store.append_messages(key, meta, encoded).await {
            warn!(run_id = %self.run_id, thread_id = %key.thread_id, error = %e, "could not save a delegation's messages");
        }
    }
}

/// Why `on_delegation_start` stopped a delegation.
enum Rejection {
    /// The hook said no, for this reason.
    Rejected(String),
    /// The hook failed under the FAIL policy: the call fails with this text.
    Failed(String),
}

/// A rejected delegation's result: `{text, subAgentThreadId, subAgentResourceId}` (no tool
/// results, as the reference).
fn rejected_result(outcome: &Outcome) -> Value {
    let mut result = outcome.result();
    if let Value::Object(map) = &mut result {
        map.remove("subAgentToolResults");
    }
    result
}

/// The prompt of a delegation call (empty when it has none).
fn plan_prompt(args: &Value) -> String {
    Args::parse(args).map(|a| a.prompt).unwrap_or_default()
}

/// An agent id as the reference slugs it into a sub-run's resource without memory.
fn slug(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}
