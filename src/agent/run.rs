//! The agent loop: one model call per step, the tools it asks for, the task-list signal
//! between steps, stop conditions, structured output and memory, emitting chunks in the
//! reference's order. A run that needs decisions on tool calls returns its state instead of
//! finishing; [`Runner::resume`] continues it once they are made.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, warn};

use super::AgentDef;
use super::emit::Emitter;
use super::message::{self, Message, Part, Role, SignalMeta, new_id, now_ms};
use super::request::RunRequest;
use super::state::{
    CallRecord, Decision, OpenStep, PendingCall, PendingKind, ResponseRecord, ResultRecord,
    RunState, StepRecord,
};
use super::stop::{StepFacts, StepPolicy, StopCause, step_wants_more};
use super::structured::{self, ObjectOutcome};
use super::tools::{ToolEnv, ToolKind, ToolOutput, ToolSpec, unknown_tool_text};
use super::wire;
use crate::json::{to_proto_struct, to_proto_value};
use crate::model::{
    ChatMessage, FinishReason, ModelError, ModelEvent, ModelRequest, ToolDefinition, Usage,
};
use crate::pb;
use crate::pb::chunk::Payload;
use crate::store::{Store, StoreError, ThreadKey};
use crate::tasklist::{TaskList, TaskLists};
use crate::tasks::signal::{SignalKind, TASK_LIST_GUIDANCE, next_signal};
use crate::telemetry;

/// Text the model reads for a declined call when the decision gives no reason.
pub const DECLINED_TEXT: &str = "Tool call was not approved by the user";

/// What the model is asked when a thread needs a title.
const TITLE_INSTRUCTIONS: &str = "Write a short title (at most 8 words) for a conversation that starts with the user's message below. Answer with the title only, without quotes.";

/// Tool calls of one step running at once when nothing says otherwise.
const DEFAULT_TOOL_CONCURRENCY: usize = 10;

/// What a run needs from the server.
#[derive(Clone)]
pub struct RunDeps {
    /// The store (memory, task lists).
    pub store: Arc<dyn Store>,
    /// Task lists.
    pub lists: TaskLists,
    /// HTTP client for HTTP tools.
    pub http: reqwest::Client,
    /// Hard step ceiling.
    pub step_ceiling: u32,
}

/// How a run (or a continuation) ended.
pub struct RunOutcome {
    /// The finish chunk's result (not yet emitted: the caller records the run first).
    pub result: pb::GenerateResult,
    /// Set when the run is suspended: the state to store.
    pub suspended: Option<RunState>,
}

type CallFuture<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = (ResultRecord, Option<String>)> + Send + 'a>,
>;

enum StepFail {
    Aborted,
    Model(ModelError),
}

enum ToolPhase {
    Done(StepRecord),
    Suspend(OpenStep),
    Aborted,
}

/// Executes one run.
pub struct Runner {
    run_id: String,
    agent: Arc<AgentDef>,
    state: RunState,
    deps: RunDeps,
    env: ToolEnv,
    policy: StepPolicy,
    offered: Vec<ToolSpec>,
    cancel: CancellationToken,
    abort_reason: Arc<std::sync::Mutex<Option<String>>>,
}

impl Runner {
    /// A runner for `state` (a new run, or a suspended one being continued).
    pub fn new(
        run_id: String,
        agent: Arc<AgentDef>,
        state: RunState,
        tasks: TaskList,
        deps: RunDeps,
        cancel: CancellationToken,
        abort_reason: Arc<std::sync::Mutex<Option<String>>>,
    ) -> Self {
        let request = &state.request;
        let offered = offered_tools(&agent, request);
        let policy = StepPolicy::new(request.max_steps, &request.stop_when, deps.step_ceiling);
        let env = ToolEnv {
            thread: thread_key(request),
            lists: deps.lists.clone(),
            tasks: Arc::new(Mutex::new(tasks)),
            http: deps.http.clone(),
            run_id: run_id.clone(),
            request_context: Value::Object(request.request_context.clone()),
        };
        Self {
            run_id,
            agent,
            state,
            deps,
            env,
            policy,
            offered,
            cancel,
            abort_reason,
        }
    }

    /// Runs a new run from its first step.
    pub async fn start(mut self, em: &mut Emitter) -> RunOutcome {
        let memory = self.state.request.memory.as_ref();
        em.emit(Payload::Start(pb::StartChunk {
            agent_id: self.agent.config.id.clone(),
            thread_id: memory.map(|m| m.thread_id.clone()).unwrap_or_default(),
            resource_id: memory.map(|m| m.resource_id.clone()).unwrap_or_default(),
        }))
        .await;
        self.drive(em).await
    }

    /// Continues a suspended run whose pending calls are all decided.
    pub async fn resume(mut self, em: &mut Emitter) -> RunOutcome {
        let Some(open) = self.state.open_step.take() else {
            return self.drive(em).await;
        };
        match self.settle(em, open).await {
            ToolPhase::Done(step) => match self.finish_step(em, step).await {
                Some(outcome) => outcome,
                None => self.drive(em).await,
            },
            ToolPhase::Suspend(open) => self.suspend(em, open).await,
            ToolPhase::Aborted => self.aborted(em).await,
        }
    }

    async fn drive(&mut self, em: &mut Emitter) -> RunOutcome {
        loop {
            self.signal(em).await;
            let index = u32::try_from(self.state.steps.len()).unwrap_or(u32::MAX);
            let span = telemetry::step_span(index);
            let started = std::time::Instant::now();
            let draft = self.call_model(index, em).instrument(span.clone()).await;
            let step = match draft {
                Ok(step) => step,
                Err(StepFail::Aborted) => return self.aborted(em).await,
                Err(StepFail::Model(e)) => {
                    return self
                        .failed(em, "MODEL_PROVIDER_ERROR", "MODEL", &e.to_string())
                        .await;
                }
            };
            self.state.response.push(assistant_message(&step));
            let phase = self.run_tools(em, step).instrument(span).await;
            telemetry::metrics().step(started.elapsed());
            match phase {
                ToolPhase::Done(step) => {
                    if let Some(outcome) = self.finish_step(em, step).await {
                        return outcome;
                    }
                }
                ToolPhase::Suspend(open) => return self.suspend(em, open).await,
                ToolPhase::Aborted => return self.aborted(em).await,
            }
        }
    }

    /// Adds the task-list snapshot or delta the model has not seen yet, before a model call.
    async fn signal(&mut self, em: &mut Emitter) {
        if !self.signals_enabled() {
            return;
        }
        let current = self.env.tasks.lock().await.tasks.clone();
        let shown =
            message::shown_state(self.state.history.iter().chain(self.state.response.iter()));
        let Some(signal) = next_signal(&shown, &current) else {
            return;
        };
        let after = shown.after(&signal);
        let mut msg = Message::new(
            Role::User,
            vec![Part::Text {
                text: signal.text.clone(),
            }],
        );
        msg.signal = Some(SignalMeta {
            kind: signal.kind.into(),
            tasks: after.tasks.unwrap_or_default(),
        });
        self.state.response.push(msg);
        let kind = match signal.kind {
            SignalKind::Snapshot => "snapshot",
            SignalKind::Delta => "delta",
        };
        let data = json!({"kind": kind, "text": signal.text, "tasks": signal.tasks});
        em.emit_from(
            pb::ChunkFrom::System,
            Payload::Data(pb::DataChunk {
                r#type: "data-signal".into(),
                data: Some(to_proto_value(&data)),
            }),
        )
        .await;
    }

    fn signals_enabled(&self) -> bool {
        self.state.request.memory.is_some()
            && self
                .offered
                .iter()
                .any(|t| matches!(t.kind, ToolKind::Task(_)))
    }

    fn model_request(&self) -> ModelRequest {
        let request = &self.state.request;
        let mut messages = Vec::new();
        let instructions = request
            .instructions
            .as_deref()
            .unwrap_or(&self.agent.config.instructions);
        if !instructions.is_empty() {
            messages.push(ChatMessage::system(instructions));
        }
        if self
            .offered
            .iter()
            .any(|t| matches!(t.kind, ToolKind::Task(_)))
        {
            messages.push(ChatMessage::system(TASK_LIST_GUIDANCE));
        }
        for extra in &request.system {
            messages.push(ChatMessage::system(extra.clone()));
        }
        let native = self.native_structured_output();
        if let Some(output) = &request.structured_output
            && !native
        {
            messages.push(ChatMessage::system(structured::injected_instructions(
                output,
            )));
        }
        for m in self
            .state
            .history
            .iter()
            .chain(&request.context)
            .chain(&request.input)
            .chain(&self.state.response)
        {
            m.push_chat(&mut messages);
        }
        let mut settings = request.settings.clone();
        let defaults = &self.agent.config.default_options;
        settings.temperature = settings.temperature.or(defaults.temperature);
        settings.max_output_tokens = settings.max_output_tokens.or(defaults.max_output_tokens);
        ModelRequest {
            model: self.agent.model.clone(),
            messages,
            tools: self
                .offered
                .iter()
                .map(|t| ToolDefinition {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    parameters: t.parameters.clone(),
                })
                .collect(),
            tool_choice: request.tool_choice.clone(),
            settings,
            response_format: request
                .structured_output
                .as_ref()
                .filter(|_| native)
                .map(structured::response_format),
            provider_options: request.provider_options.clone(),
            include_raw: request.include_raw,
        }
    }

    fn native_structured_output(&self) -> bool {
        match &self.state.request.structured_output {
            None => false,
            Some(o) => match o.json_prompt_injection {
                Some(inject) => !inject,
                None => self.agent.provider.supports_structured_output(),
            },
        }
    }

    /// One model call, streamed to the client as it happens.
    async fn call_model(&mut self, index: u32, em: &mut Emitter) -> Result<StepRecord, StepFail> {
        em.emit(Payload::StepStart(pb::StepStartChunk {
            step_index: index,
            message_id: new_id(),
            warnings: Vec::new(),
        }))
        .await;
        let request = self.model_request();
        let span = telemetry::model_span(self.agent.provider.name(), &self.agent.model);
        if self.state.request.tracing.record_inputs {
            let conversation: Vec<&Message> = self
                .state
                .history
                .iter()
                .chain(&self.state.request.context)
                .chain(&self.state.request.input)
                .chain(&self.state.response)
                .collect();
            let text = serde_json::to_string(&conversation).unwrap_or_default();
            telemetry::record_io(&span, telemetry::GEN_AI_INPUT_MESSAGES, &text);
        }
        let started = std::time::Instant::now();
        let mut blocks = Blocks::default();
        let result = self
            .stream_model(request, index, em, &mut blocks)
            .instrument(span.clone())
            .await;
        blocks.close(em).await;
        telemetry::metrics().model_call(&self.agent.model, started.elapsed(), result.is_err());
        match &result {
            Ok(step) => {
                telemetry::record_model_response(
                    &span,
                    &telemetry::ModelResponse {
                        id: &step.response.id,
                        model: &step.response.model,
                        input_tokens: Some(step.usage.input_tokens),
                        output_tokens: Some(step.usage.output_tokens),
                        finish_reasons: &[step.finish_reason.as_str()],
                    },
                );
                self.record_io()
                    .output(&span, telemetry::GEN_AI_OUTPUT_MESSAGES, &step.text);
            }
            Err(StepFail::Model(e)) => telemetry::record_error(&span, &e.to_string()),
            Err(StepFail::Aborted) => telemetry::record_error(&span, "aborted"),
        }
        result
    }

    async fn stream_model(
        &mut self,
        request: ModelRequest,
        index: u32,
        em: &mut Emitter,
        blocks: &mut Blocks,
    ) -> Result<StepRecord, StepFail> {
        let provider = self.agent.provider.clone();
        let call_cancel = self.cancel.child_token();
        // Dropping the stream (or cancelling) drops the provider connection at once.
        let _stop_on_exit = call_cancel.clone().drop_guard();
        let mut stream = tokio::select! {
            biased;
            () = self.cancel.cancelled() => return Err(StepFail::Aborted),
            started = provider.stream(request, call_cancel) => started.map_err(StepFail::Model)?,
        };
        let mut step = StepRecord {
            index,
            text: String::new(),
            reasoning: String::new(),
            tool_calls: Vec::new(),
            tool_results: Vec::new(),
            finish_reason: FinishReason::Other,
            usage: Usage::default(),
            response: ResponseRecord::default(),
            warnings: Vec::new(),
            is_continued: false,
        };
        let mut names: std::collections::HashMap<u32, String> = std::collections::HashMap::new();
        let mut finished = false;
        let mut last_object: Option<Value> = None;
        loop {
            let event = tokio::select! {
                biased;
                () = self.cancel.cancelled() => return Err(StepFail::Aborted),
                event = stream.next() => event,
            };
            let event = match event {
                None => break,
                Some(Err(ModelError::Cancelled)) => return Err(StepFail::Aborted),
                Some(Err(e)) => return Err(StepFail::Model(e)),
                Some(Ok(event)) => event,
            };
            match event {
                ModelEvent::ResponseMetadata {
                    id,
                    model,
                    created,
                    headers,
                } => {
                    step.response = ResponseRecord {
                        id: id.unwrap_or_default(),
                        model: model.unwrap_or_else(|| self.agent.model.clone()),
                        timestamp_ms: created.map_or_else(now_ms, |s| s.saturating_mul(1000)),
                        headers,
                    };
                }
                ModelEvent::TextDelta(text) => {
                    let id = blocks.text(em).await;
                    step.text.push_str(&text);
                    em.emit(Payload::TextDelta(pb::TextDeltaChunk { id, text }))
                        .await;
                    if self.state.request.structured_output.is_some()
                        && let Some(object) = structured::partial_json(&step.text)
                        && last_object.as_ref() != Some(&object)
                    {
                        em.emit(Payload::Object(pb::ObjectChunk {
                            object: Some(to_proto_value(&object)),
                        }))
                        .await;
                        last_object = Some(object);
                    }
                }
                ModelEvent::ReasoningDelta(text) => {
                    let id = blocks.reasoning(em).await;
                    step.reasoning.push_str(&text);
                    em.emit(Payload::ReasoningDelta(pb::ReasoningDeltaChunk {
                        id,
                        text,
                    }))
                    .await;
                }
                ModelEvent::ToolCallStart { index, name, .. } => {
                    names.insert(index, name);
                }
                ModelEvent::ToolCallDelta {
                    index,
                    id,
                    args_delta,
                } => {
                    em.emit(Payload::ToolCallDelta(pb::ToolCallDeltaChunk {
                        tool_call_id: id,
                        tool_name: names.get(&index).cloned().unwrap_or_default(),
                        args_text_delta: args_delta,
                    }))
                    .await;
                }
                ModelEvent::ToolCallEnd {
                    id,
                    name,
                    arguments,
                    ..
                } => {
                    blocks.close(em).await;
                    let call = parse_call(id, name, &arguments);
                    em.emit(Payload::ToolCall(wire::call(&call))).await;
                    step.tool_calls.push(call);
                }
                ModelEvent::Finish { reason, usage } => {
                    step.finish_reason = reason;
                    step.usage = usage;
                    finished = true;
                }
                ModelEvent::Raw(raw) => {
                    em.emit(Payload::Raw(pb::RawChunk {
                        raw: Some(to_proto_value(&raw)),
                    }))
                    .await;
                }
            }
        }
        if !finished {
            return Err(StepFail::Model(ModelError::Protocol(
                "the stream ended before the model finished".into(),
            )));
        }
        if step.response.model.is_empty() {
            step.response.model.clone_from(&self.agent.model);
        }
        Ok(step)
    }

    /// Runs the step's tool calls, or suspends when some need a decision.
    async fn run_tools(&mut self, em: &mut Emitter, step: StepRecord) -> ToolPhase {
        if step.tool_calls.is_empty() {
            return ToolPhase::Done(step);
        }
        let mut pending = Vec::new();
        for call in &step.tool_calls {
            if let Some(kind) = self.decision_needed(call) {
                pending.push(PendingCall {
                    call: call.clone(),
                    kind,
                    decision: None,
                });
            }
        }
        if pending.is_empty() {
            let open = OpenStep {
                step,
                done: Vec::new(),
                pending,
            };
            return self.settle(em, open).await;
        }
        for p in &pending {
            let suspension = suspension(p);
            let payload = match p.kind {
                PendingKind::Approval => Payload::ToolCallApproval(suspension),
                PendingKind::ClientTool => Payload::ToolCallSuspended(suspension),
            };
            em.emit(payload).await;
        }
        ToolPhase::Suspend(OpenStep {
            step,
            done: Vec::new(),
            pending,
        })
    }

    /// What a call must wait for, if anything.
    fn decision_needed(&self, call: &CallRecord) -> Option<PendingKind> {
        if call.args_error.is_some() {
            return None;
        }
        let spec = self.offered.iter().find(|t| t.name == call.name)?;
        if matches!(spec.kind, ToolKind::Client) {
            Some(PendingKind::ClientTool)
        } else if self.state.request.require_tool_approval || spec.require_approval {
            Some(PendingKind::Approval)
        } else {
            None
        }
    }

    /// Produces every result of an open step whose decisions are all made, in call order:
    /// runs approved and ordinary calls (concurrently when nothing needed a decision), turns
    /// declines and client results into results, and emits their chunks.
    async fn settle(&mut self, em: &mut Emitter, open: OpenStep) -> ToolPhase {
        let OpenStep {
            mut step, pending, ..
        } = open;
        let concurrency = if pending.is_empty() {
            self.concurrency()
        } else {
            1
        };
        let decisions: std::collections::HashMap<&str, &PendingCall> =
            pending.iter().map(|p| (p.call.id.as_str(), p)).collect();
        let calls = step.tool_calls.clone();
        // Boxed so the stream's type does not carry the closure's lifetimes (keeps it Send).
        let jobs: Vec<CallFuture<'_>> = calls
            .iter()
            .map(|call| {
                let decision = decisions
                    .get(call.id.as_str())
                    .and_then(|p| p.decision.clone());
                Box::pin(self.resolve_call(call, decision)) as CallFuture<'_>
            })
            .collect();
        let mut results = futures::stream::iter(jobs).buffered(concurrency);
        while let Some((record, denied)) = tokio::select! {
            biased;
            () = self.cancel.cancelled() => None,
            next = results.next() => next,
        } {
            let payload = if let Some(reason) = denied {
                Payload::ToolOutputDenied(pb::ToolOutputDeniedChunk {
                    tool_call_id: record.id.clone(),
                    tool_name: record.name.clone(),
                    args: Some(to_proto_value(&record.args)),
                    reason,
                })
            } else if record.is_error && record.result.is_string() {
                Payload::ToolError(pb::ToolErrorChunk {
                    tool_call_id: record.id.clone(),
                    tool_name: record.name.clone(),
                    args: Some(to_proto_value(&record.args)),
                    error: message::tool_content(&record.result),
                })
            } else {
                Payload::ToolResult(wire::result(&record))
            };
            em.emit(payload).await;
            step.tool_results.push(record);
        }
        drop(results);
        if self.cancel.is_cancelled() {
            return ToolPhase::Aborted;
        }
        ToolPhase::Done(step)
    }

    /// One call's result: `(record, Some(reason))` when it was declined.
    async fn resolve_call(
        &self,
        call: &CallRecord,
        decision: Option<Decision>,
    ) -> (ResultRecord, Option<String>) {
        let record = |result: Value, is_error: bool| ResultRecord {
            id: call.id.clone(),
            name: call.name.clone(),
            args: call.args.clone(),
            result,
            is_error,
        };
        match decision {
            Some(Decision::Declined(reason)) => {
                return (record(Value::String(reason.clone()), true), Some(reason));
            }
            Some(Decision::Resumed(data)) => return (record(data, false), None),
            Some(Decision::Approved) | None => {}
        }
        if let Some(error) = &call.args_error {
            return (record(Value::String(error.clone()), true), None);
        }
        let Some(spec) = self.offered.iter().find(|t| t.name == call.name) else {
            let names: Vec<&str> = self.offered.iter().map(|t| t.name.as_str()).collect();
            return (
                record(Value::String(unknown_tool_text(&call.name, &names)), true),
                None,
            );
        };
        let span = telemetry::tool_span(&call.name, &call.id);
        self.record_io().input(
            &span,
            telemetry::GEN_AI_TOOL_CALL_ARGUMENTS,
            &call.args.to_string(),
        );
        let started = std::time::Instant::now();
        let output = spec
            .execute(&self.env, &call.id, &call.args, &self.cancel)
            .instrument(span.clone())
            .await;
        // Client-defined names would make metric labels unbounded.
        let label = match spec.kind {
            ToolKind::Http(_) | ToolKind::Task(_) => call.name.as_str(),
            ToolKind::Client => "client",
        };
        telemetry::metrics().tool_call(label, started.elapsed(), output.is_err());
        match output {
            Ok(ToolOutput { result, is_error }) => {
                self.record_io().output(
                    &span,
                    telemetry::GEN_AI_TOOL_CALL_RESULT,
                    &result.to_string(),
                );
                (record(result, is_error), None)
            }
            Err(error) => {
                telemetry::record_error(&span, &error);
                (record(Value::String(error), true), None)
            }
        }
    }

    fn record_io(&self) -> telemetry::RecordIo {
        telemetry::RecordIo {
            inputs: self.state.request.tracing.record_inputs,
            outputs: self.state.request.tracing.record_outputs,
        }
    }

    fn concurrency(&self) -> usize {
        let configured = self.state.request.tool_call_concurrency.or(self
            .agent
            .config
            .default_options
            .tool_call_concurrency);
        configured.map_or(DEFAULT_TOOL_CONCURRENCY, |n| {
            usize::try_from(n.max(1)).unwrap_or(1)
        })
    }

    /// Closes a step: its results reach the conversation, `step-finish` is emitted, and the
    /// run either goes on (`None`) or completes.
    async fn finish_step(&mut self, em: &mut Emitter, mut step: StepRecord) -> Option<RunOutcome> {
        if !step.tool_results.is_empty() {
            self.state.response.push(tool_message(&step.tool_results));
        }
        let wants_more = step_wants_more(step.finish_reason, !step.tool_calls.is_empty());
        let steps_after = u32::try_from(self.state.steps.len() + 1).unwrap_or(u32::MAX);
        let total = self.total_usage() + step.usage;
        let tool_names: Vec<String> = step.tool_calls.iter().map(|c| c.name.clone()).collect();
        let stop = wants_more
            .then(|| {
                self.policy.stop_after(&StepFacts {
                    steps: steps_after,
                    reason: step.finish_reason,
                    tool_names: &tool_names,
                    total_tokens: total.total_tokens,
                })
            })
            .flatten();
        step.is_continued = wants_more && stop.is_none();
        if stop == Some(StopCause::Ceiling) {
            self.state.warnings.push(format!(
                "The run stopped at the server's ceiling of {} steps",
                self.policy.cap()
            ));
        }
        em.emit(Payload::StepFinish(pb::StepFinishChunk {
            step_index: step.index,
            reason: wire::finish_reason(step.finish_reason).into(),
            is_continued: step.is_continued,
            usage: Some(wire::usage(step.usage)),
            warnings: step.warnings.clone(),
            response: Some(wire::response(&step.response)),
        }))
        .await;
        telemetry::metrics().tokens(step.usage.input_tokens, step.usage.output_tokens);
        let continued = step.is_continued;
        self.state.steps.push(step);
        if self.state.request.save_per_step
            && let Err(e) = self.save().await
        {
            return Some(self.store_failed(em, &e).await);
        }
        if continued {
            None
        } else {
            Some(self.complete(em).await)
        }
    }

    /// The run ended normally: structured output, memory, result.
    async fn complete(&mut self, em: &mut Emitter) -> RunOutcome {
        let last_reason = self
            .state
            .steps
            .last()
            .map_or(FinishReason::Stop, |s| s.finish_reason);
        let mut object = None;
        let mut used_fallback = false;
        if let Some(output) = self.state.request.structured_output.clone() {
            let text = self
                .state
                .steps
                .last()
                .map(|s| s.text.clone())
                .unwrap_or_default();
            match structured::resolve(&output, &text, last_reason) {
                ObjectOutcome::Object(value) => object = Some(value),
                ObjectOutcome::Fallback(value) => {
                    object = Some(value);
                    used_fallback = true;
                }
                ObjectOutcome::Warning(message) => {
                    warn!(run_id = %self.run_id, %message, "structured output invalid");
                    self.state.warnings.push(message);
                }
                ObjectOutcome::Failure(id, message) => {
                    return self.failed(em, id, "SYSTEM", &message).await;
                }
            }
            if let Some(value) = &object {
                em.emit(Payload::ObjectResult(pb::ObjectResultChunk {
                    object: Some(to_proto_value(value)),
                    used_fallback_value: used_fallback,
                }))
                .await;
            }
        }
        if let Err(e) = self.save().await {
            return self.store_failed(em, &e).await;
        }
        if self.state.title_pending {
            self.generate_title(em).await;
        }
        let mut result = self.result(wire::finish_reason(last_reason));
        result.object = object.as_ref().map(to_proto_value);
        result.used_fallback_value = used_fallback;
        RunOutcome {
            result,
            suspended: None,
        }
    }

    async fn suspend(&mut self, em: &mut Emitter, open: OpenStep) -> RunOutcome {
        let first = open.pending.first().map(suspension);
        self.state.open_step = Some(open);
        if let Err(e) = self.save().await {
            self.state.open_step = None;
            return self.store_failed(em, &e).await;
        }
        let mut result = self.result(pb::FinishReason::Suspended);
        result.text.clear();
        result.steps.clear();
        result.suspend_payload = first;
        RunOutcome {
            result,
            suspended: Some(self.state.clone()),
        }
    }

    async fn aborted(&mut self, em: &mut Emitter) -> RunOutcome {
        let reason = self
            .abort_reason
            .lock()
            .ok()
            .and_then(|r| r.clone())
            .unwrap_or_else(|| "The run was aborted".to_owned());
        em.emit(Payload::Abort(pb::AbortChunk {
            reason: reason.clone(),
        }))
        .await;
        self.drop_dangling_calls();
        if !self.state.steps.is_empty()
            && let Err(e) = self.save().await
        {
            warn!(run_id = %self.run_id, error = %e, "could not save an aborted run's messages");
        }
        self.result(pb::FinishReason::Aborted).into_outcome()
    }

    async fn failed(
        &mut self,
        em: &mut Emitter,
        id: &str,
        category: &str,
        message: &str,
    ) -> RunOutcome {
        let error = pb::RunError {
            id: id.to_owned(),
            message: message.to_owned(),
            category: category.to_owned(),
        };
        em.emit(Payload::Error(pb::ErrorChunk {
            error: Some(error.clone()),
        }))
        .await;
        self.drop_dangling_calls();
        // A run that failed with no output saves nothing (the reference does the same).
        if !self.state.steps.is_empty()
            && let Err(e) = self.save().await
        {
            warn!(run_id = %self.run_id, error = %e, "could not save a failed run's messages");
        }
        let mut result = self.result(pb::FinishReason::Error);
        result.error = Some(error);
        result.into_outcome()
    }

    async fn store_failed(&mut self, em: &mut Emitter, e: &StoreError) -> RunOutcome {
        telemetry::metrics().store_error("append_messages");
        let message = format!("Saving the run's messages failed: {e}");
        let error = pb::RunError {
            id: "STORE_UNAVAILABLE".to_owned(),
            message,
            category: "STORE".to_owned(),
        };
        em.emit(Payload::Error(pb::ErrorChunk {
            error: Some(error.clone()),
        }))
        .await;
        let mut result = self.result(pb::FinishReason::Error);
        result.error = Some(error);
        result.into_outcome()
    }

    /// Titles a thread this run created from its first message (one extra model call), stores
    /// the title with the thread and emits it as a `data-title` chunk. A failure is a warning.
    async fn generate_title(&mut self, em: &mut Emitter) {
        self.state.title_pending = false;
        let Some(memory) = self.state.request.memory.clone() else {
            return;
        };
        let first = self
            .state
            .request
            .input
            .iter()
            .find(|m| m.role == Role::User)
            .map(Message::text)
            .unwrap_or_default();
        let request = ModelRequest {
            model: self.agent.model.clone(),
            messages: vec![
                ChatMessage::system(TITLE_INSTRUCTIONS),
                ChatMessage::user(first),
            ],
            ..ModelRequest::default()
        };
        let title = match self.collect_text(request).await {
            Ok(text) => text.trim().trim_matches('"').trim().to_owned(),
            Err(e) => {
                self.state
                    .warnings
                    .push(format!("The thread title could not be generated: {e}"));
                return;
            }
        };
        if title.is_empty() {
            return;
        }
        let meta = json!({
            "title": title,
            "metadata": memory.metadata,
            "createdAtMs": now_ms(),
        });
        let key = ThreadKey {
            thread_id: memory.thread_id.clone(),
            resource_id: memory.resource_id.clone(),
        };
        if let Err(e) = self
            .deps
            .store
            .append_messages(&key, Some(bytes::Bytes::from(meta.to_string())), Vec::new())
            .await
        {
            self.state
                .warnings
                .push(format!("The thread title could not be saved: {e}"));
            return;
        }
        em.emit(Payload::Data(pb::DataChunk {
            r#type: "data-title".into(),
            data: Some(to_proto_value(&json!({ "title": title }))),
        }))
        .await;
    }

    /// The text of one model call, without streaming it to the client.
    async fn collect_text(&self, request: ModelRequest) -> Result<String, ModelError> {
        let mut stream = self
            .agent
            .provider
            .stream(request, self.cancel.child_token())
            .await?;
        let mut text = String::new();
        while let Some(event) = stream.next().await {
            if let ModelEvent::TextDelta(delta) = event? {
                text.push_str(&delta);
            }
        }
        Ok(text)
    }

    /// An assistant message of an unfinished step would leave tool calls without results.
    fn drop_dangling_calls(&mut self) {
        let answered = self
            .state
            .response
            .last()
            .is_some_and(|m| m.role != Role::Assistant || !has_calls(m));
        if !answered {
            self.state.response.pop();
        }
    }

    /// Saves the messages not saved yet (input first), unless the run has no memory or is
    /// read-only.
    async fn save(&mut self) -> Result<(), StoreError> {
        let request = &self.state.request;
        let Some(memory) = &request.memory else {
            return Ok(());
        };
        if memory.read_only {
            return Ok(());
        }
        let all: Vec<&Message> = request.input.iter().chain(&self.state.response).collect();
        if self.state.saved >= all.len() {
            return Ok(());
        }
        let mut encoded = Vec::with_capacity(all.len() - self.state.saved);
        for m in &all[self.state.saved..] {
            let bytes =
                serde_json::to_vec(m).map_err(|e| StoreError::Corrupt(format!("message: {e}")))?;
            encoded.push(bytes::Bytes::from(bytes));
        }
        let meta = (!self.state.thread_existed).then(|| {
            let meta = json!({
                "title": memory.title,
                "metadata": memory.metadata,
                "createdAtMs": now_ms(),
            });
            bytes::Bytes::from(meta.to_string())
        });
        let key = ThreadKey {
            thread_id: memory.thread_id.clone(),
            resource_id: memory.resource_id.clone(),
        };
        let count = all.len();
        self.deps.store.append_messages(&key, meta, encoded).await?;
        self.state.saved = count;
        self.state.thread_existed = true;
        Ok(())
    }

    fn total_usage(&self) -> Usage {
        self.state.steps.iter().map(|s| s.usage).sum()
    }

    fn result(&self, reason: pb::FinishReason) -> pb::GenerateResult {
        let last = self.state.steps.last();
        let total = wire::usage(self.total_usage());
        let request = &self.state.request;
        pb::GenerateResult {
            text: last.map(|s| s.text.clone()).unwrap_or_default(),
            object: None,
            tool_calls: last
                .map(|s| s.tool_calls.iter().map(wire::call).collect())
                .unwrap_or_default(),
            tool_results: last
                .map(|s| s.tool_results.iter().map(wire::result).collect())
                .unwrap_or_default(),
            usage: Some(total),
            total_usage: Some(total),
            steps: self.state.steps.iter().map(wire::step).collect(),
            finish_reason: reason.into(),
            response: last.map(|s| wire::response(&s.response)),
            warnings: self.state.warnings.clone(),
            provider_metadata: None,
            reasoning_text: last.map(|s| s.reasoning.clone()).unwrap_or_default(),
            suspend_payload: None,
            run_id: self.run_id.clone(),
            trace_id: String::new(),
            span_id: String::new(),
            messages: request
                .input
                .iter()
                .chain(&self.state.response)
                .map(wire::message)
                .collect(),
            remembered_messages: self.state.history.iter().map(wire::message).collect(),
            error: None,
            tripwire: None,
            used_fallback_value: false,
        }
    }
}

impl pb::GenerateResult {
    fn into_outcome(self) -> RunOutcome {
        RunOutcome {
            result: self,
            suspended: None,
        }
    }
}

/// Open text and reasoning blocks of a step: started on their first delta, ended before a tool
/// call or at the end of the step.
#[derive(Default)]
struct Blocks {
    text: Option<String>,
    reasoning: Option<String>,
}

impl Blocks {
    async fn text(&mut self, em: &mut Emitter) -> String {
        if let Some(id) = &self.text {
            return id.clone();
        }
        let id = new_id();
        em.emit(Payload::TextStart(pb::TextStartChunk { id: id.clone() }))
            .await;
        self.text = Some(id.clone());
        id
    }

    async fn reasoning(&mut self, em: &mut Emitter) -> String {
        if let Some(id) = &self.reasoning {
            return id.clone();
        }
        let id = new_id();
        em.emit(Payload::ReasoningStart(pb::ReasoningStartChunk {
            id: id.clone(),
        }))
        .await;
        self.reasoning = Some(id.clone());
        id
    }

    async fn close(&mut self, em: &mut Emitter) {
        if let Some(id) = self.reasoning.take() {
            em.emit(Payload::ReasoningEnd(pb::ReasoningEndChunk { id }))
                .await;
        }
        if let Some(id) = self.text.take() {
            em.emit(Payload::TextEnd(pb::TextEndChunk { id })).await;
        }
    }
}

/// The tools offered to the model: the agent's and the request's client tools, filtered by
/// `active_tools`.
pub fn offered_tools(agent: &AgentDef, request: &RunRequest) -> Vec<ToolSpec> {
    let client = request.client_tools.iter().map(|t| ToolSpec {
        name: t.name.clone(),
        description: t.description.clone(),
        parameters: t.parameters.clone(),
        require_approval: false,
        kind: ToolKind::Client,
    });
    agent
        .tools
        .iter()
        .cloned()
        .chain(client)
        .filter(|t| request.active_tools.is_empty() || request.active_tools.contains(&t.name))
        .collect()
}

fn thread_key(request: &RunRequest) -> Option<ThreadKey> {
    request.memory.as_ref().map(|m| ThreadKey {
        thread_id: m.thread_id.clone(),
        resource_id: m.resource_id.clone(),
    })
}

/// Parses a call's arguments; invalid JSON becomes an error the model sees instead of a run.
fn parse_call(id: String, name: String, arguments: &str) -> CallRecord {
    match serde_json::from_str::<Value>(arguments) {
        Ok(args) => CallRecord {
            id,
            name,
            args,
            args_error: None,
        },
        Err(e) => CallRecord {
            args_error: Some(format!(
                "Tool \"{name}\" was called with arguments that are not valid JSON ({e}). Call it again with a JSON object."
            )),
            id,
            name,
            args: Value::String(arguments.to_owned()),
        },
    }
}

fn assistant_message(step: &StepRecord) -> Message {
    let mut parts = Vec::new();
    if !step.reasoning.is_empty() {
        parts.push(Part::Reasoning {
            text: step.reasoning.clone(),
        });
    }
    if !step.text.is_empty() {
        parts.push(Part::Text {
            text: step.text.clone(),
        });
    }
    for call in &step.tool_calls {
        parts.push(Part::ToolCall {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            args: call.args.clone(),
        });
    }
    if parts.is_empty() {
        parts.push(Part::Text {
            text: String::new(),
        });
    }
    Message::new(Role::Assistant, parts)
}

fn tool_message(results: &[ResultRecord]) -> Message {
    Message::new(
        Role::Tool,
        results
            .iter()
            .map(|r| Part::ToolResult {
                tool_call_id: r.id.clone(),
                tool_name: r.name.clone(),
                args: r.args.clone(),
                result: r.result.clone(),
                is_error: r.is_error,
            })
            .collect(),
    )
}

fn has_calls(m: &Message) -> bool {
    m.parts.iter().any(|p| matches!(p, Part::ToolCall { .. }))
}

/// The JSON Schema of an approval decision.
pub fn approval_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "reason": {"type": "string"}
        },
        "required": ["approved"]
    })
}

/// The wire form of a pending call.
pub fn suspension(p: &PendingCall) -> pb::ToolSuspension {
    let (schema, kind) = match p.kind {
        PendingKind::Approval => (approval_schema(), pb::SuspensionKind::Approval),
        PendingKind::ClientTool => (json!({}), pb::SuspensionKind::ClientTool),
    };
    let schema = match schema {
        Value::Object(map) => Some(to_proto_struct(&map)),
        _ => None,
    };
    pb::ToolSuspension {
        tool_call_id: p.call.id.clone(),
        tool_name: p.call.name.clone(),
        args: Some(to_proto_value(&p.call.args)),
        resume_schema: schema,
        kind: kind.into(),
    }
}
