//! One model call: the request the model is sent (system messages, conversation, tools,
//! settings, response format, provider options), streaming its answer to the client, and
//! turning it into the step's record.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use serde_json::Value;
use tracing::Instrument;

use super::{Runner, StepFail, StepOverrides};
use crate::agent::auto_resume;
use crate::agent::emit::Emitter;
use crate::agent::error::RunFailure;
use crate::agent::event::{Event, GeneratedFile, Source};
use crate::agent::message::{self, Message, Part, Role, new_id, now_ms};
use crate::agent::processors::{StreamCtx, StreamOut, Tripwire};
use crate::agent::state::{CallRecord, ResponseRecord, StepRecord};
use crate::agent::structured::{self, Placement};
use crate::agent::tools::ToolKind;
use crate::model::{ChatMessage, ModelError, ModelEvent, ModelRequest, ToolChoice, ToolDefinition};
use crate::tasks::signal::TASK_LIST_GUIDANCE;
use crate::telemetry;

impl Runner {
    /// What the model is sent for the next step; an input token limiter may trim it, or stop
    /// the run when nothing fits.
    pub(super) fn model_request(
        &self,
        overrides: &StepOverrides,
    ) -> Result<ModelRequest, Tripwire> {
        let request = &self.state.request;
        let system = match &overrides.system {
            Some(system) => system.clone(),
            None => self.system_messages(),
        };
        let dot: Message;
        let trimmed = match &self.processors {
            Some(chain) if chain.trims_prompt() => {
                // The limiter trims the prompt as the provider gets it, the "." below included.
                dot = opening_dot();
                let mut prompt: Vec<&Message> = self.state.prompt_messages().collect();
                if prompt.first().is_some_and(|m| m.role == Role::Assistant) {
                    prompt.insert(0, &dot);
                }
                Some(chain.trim_prompt(&system, prompt)?)
            }
            _ => None,
        };
        let mut messages: Vec<ChatMessage> = system.into_iter().map(ChatMessage::system).collect();
        let first_turn = messages.len();
        match trimmed {
            Some(prompt) => {
                for m in prompt {
                    m.push_chat(&mut messages);
                }
            }
            None => {
                for m in self.state.prompt_messages() {
                    m.push_chat(&mut messages);
                }
                // As the reference: a conversation must not open with the model's turn (a
                // history window can start there), so a user message "." goes first.
                if matches!(
                    messages.get(first_turn),
                    Some(ChatMessage::Assistant { .. })
                ) {
                    messages.insert(first_turn, ChatMessage::user("."));
                }
            }
        }
        let resuming_tools = !self.state.suspended_tools.is_empty();
        if resuming_tools {
            message::append_to_first_system(
                &mut messages,
                &auto_resume::system_suffix(&self.state.suspended_tools),
            );
        }
        let placement = self.placement();
        if let (Some(output), Some(placement)) = (&request.structured_output, placement) {
            structured::place(output, placement, &mut messages);
        }
        let tool_choice = overrides
            .tool_choice
            .clone()
            .or_else(|| request.tool_choice.clone());
        // As the reference: tool choice `none` sends no tools at all (and so no tool choice).
        let (tools, tool_choice) = if tool_choice == Some(ToolChoice::None) {
            (Vec::new(), None)
        } else {
            let tools = self
                .offered
                .iter()
                .filter(|t| {
                    overrides
                        .active_tools
                        .as_ref()
                        .is_none_or(|names| names.iter().any(|n| n == t.name()))
                })
                .map(|t| {
                    if resuming_tools {
                        Arc::new(ToolDefinition::new(
                            t.def.name.clone(),
                            t.def.description.clone(),
                            auto_resume::with_resume_args(&t.def.parameters),
                        ))
                    } else {
                        t.def.clone()
                    }
                })
                .collect();
            (tools, tool_choice)
        };
        Ok(ModelRequest {
            model: overrides
                .model
                .as_ref()
                .map_or_else(|| self.agent.model.clone(), |m| m.model.clone()),
            messages,
            tools,
            tool_choice,
            settings: request.settings.clone(),
            response_format: request
                .structured_output
                .as_ref()
                .filter(|_| placement == Some(Placement::Native))
                .map(structured::response_format),
            provider_options: overrides
                .provider_options
                .clone()
                .unwrap_or_else(|| request.provider_options.clone()),
            extra_body: request.extra_body.clone(),
            include_raw: request.include_raw,
        })
    }

    /// The run's system messages, in order: instructions, the task-list guidance (not again
    /// in a continuation), the request's extra system messages, then the memory ones (tagged
    /// `memory` in the reference, which puts tagged messages after the others) in the order of
    /// its memory processors: working memory, then semantic recall's message of other threads'
    /// hits; last, the output processors' retry feedback (tagged too, and added later).
    pub(super) fn system_messages(&self) -> Vec<String> {
        let request = &self.state.request;
        let instructions = request
            .instructions
            .as_deref()
            .unwrap_or(&self.agent.config.instructions);
        let guidance = !self.state.resumed
            && self
                .offered
                .iter()
                .any(|t| matches!(t.kind, ToolKind::Task(_)));
        (!instructions.is_empty())
            .then(|| instructions.to_owned())
            .into_iter()
            .chain(guidance.then(|| TASK_LIST_GUIDANCE.to_owned()))
            .chain(request.system.iter().cloned())
            .chain(self.state.working_memory.as_ref().map(|w| w.prompt.clone()))
            .chain(self.state.recalled_system.clone())
            .chain(self.state.processor_feedback.iter().cloned())
            .collect()
    }

    /// The provider and model of the step being called (`prepare_step` may change them).
    fn step_model(&self) -> (std::sync::Arc<dyn crate::model::ModelProvider>, String) {
        match &self.overrides.model {
            Some(m) => (m.provider.clone(), m.model.clone()),
            None => (self.agent.provider.clone(), self.agent.model.clone()),
        }
    }

    /// Where the structured output's schema goes, when the run asks for an object.
    pub(super) fn placement(&self) -> Option<Placement> {
        self.state
            .request
            .structured_output
            .as_ref()
            .map(|o| structured::placement(o, self.agent.provider.supports_structured_output()))
    }

    /// One model call, streamed to the client as it happens.
    pub(super) async fn call_model(
        &mut self,
        index: u32,
        em: &mut Emitter,
    ) -> Result<StepRecord, StepFail> {
        em.emit(Event::StepStart {
            index,
            message_id: new_id(),
        })
        .await;
        let request = self
            .model_request(&self.overrides)
            .map_err(StepFail::Tripped)?;
        let (provider, model) = self.step_model();
        let span = telemetry::model_span(provider.name(), &model);
        if self.state.request.tracing.record_inputs {
            let conversation: Vec<&Message> = self.state.prompt_messages().collect();
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
        telemetry::metrics().model_call(&model, started.elapsed(), result.is_err());
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
            Err(StepFail::Failed(e)) => telemetry::record_error(&span, &e.to_string()),
            Err(StepFail::Aborted) => telemetry::record_error(&span, "aborted"),
            Err(StepFail::Tripped(trip)) => telemetry::record_error(&span, &trip.reason),
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
        let (provider, _) = self.step_model();
        let call_cancel = self.cancel.child_token();
        // Dropping the stream (or cancelling) drops the provider connection at once.
        let _stop_on_exit = call_cancel.clone().drop_guard();
        let model_failed = |e: ModelError| StepFail::Failed(RunFailure::Model(e));
        let mut stream = tokio::select! {
            biased;
            () = self.cancel.cancelled() => return Err(StepFail::Aborted),
            started = provider.stream(request, call_cancel) => started.map_err(model_failed)?,
        };
        let mut step = StepRecord::empty(index);
        let mut names: HashMap<u32, String> = HashMap::new();
        let mut finished = false;
        let mut last_object: Option<Value> = None;
        // Partial objects come from the model's answer, unless another model structures it.
        let streams_object = self.placement().is_some_and(|p| p != Placement::Structurer);
        loop {
            let event = tokio::select! {
                biased;
                () = self.cancel.cancelled() => return Err(StepFail::Aborted),
                event = stream.next() => event,
            };
            let event = match event {
                None => break,
                Some(Err(ModelError::Cancelled)) => return Err(StepFail::Aborted),
                Some(Err(e)) => return Err(model_failed(e)),
                Some(Ok(event)) => event,
            };
            // Text an output processor holds back goes out before anything else the model sends
            // (boxed: only runs with output processors pay for it).
            if self.stream_guard.is_some()
                && !matches!(
                    event,
                    ModelEvent::TextDelta(_)
                        | ModelEvent::ResponseMetadata { .. }
                        | ModelEvent::Finish { .. }
                        | ModelEvent::Warning(_)
                        | ModelEvent::Raw(_)
                )
            {
                Box::pin(self.flush_guard(em, blocks, &mut step)).await?;
            }
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
                    match &mut self.stream_guard {
                        None => push_text(em, blocks, &mut step, text).await,
                        Some(guard) => {
                            let ctx = StreamCtx {
                                agents: &self.agents,
                                cancel: &self.cancel,
                            };
                            // Boxed, as `flush_guard`.
                            let out = Box::pin(guard.delta(text, &ctx))
                                .await
                                .map_err(StepFail::Tripped)?;
                            Box::pin(emit_guarded(em, blocks, &mut step, out)).await;
                        }
                    }
                    if streams_object
                        && let Some(object) = structured::partial_json(&step.text)
                        && last_object.as_ref() != Some(&object)
                    {
                        em.emit(Event::Object(object.clone())).await;
                        last_object = Some(object);
                    }
                }
                ModelEvent::ReasoningDelta(text) => {
                    let id = blocks.reasoning(em).await;
                    step.reasoning.push_str(&text);
                    em.emit(Event::ReasoningDelta { id, text }).await;
                }
                ModelEvent::ToolCallStart { index, name, .. } => {
                    names.insert(index, name);
                }
                ModelEvent::ToolCallDelta {
                    index,
                    id,
                    args_delta,
                } => {
                    em.emit(Event::ToolCallDelta {
                        call_id: id,
                        tool_name: names.get(&index).cloned().unwrap_or_default(),
                        delta: args_delta,
                    })
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
                    em.emit(Event::ToolCall(call.clone())).await;
                    step.tool_calls.push(call);
                }
                ModelEvent::Finish {
                    reason,
                    usage,
                    provider_metadata,
                } => {
                    step.finish_reason = reason;
                    step.usage = usage;
                    step.provider_metadata = provider_metadata;
                    finished = true;
                }
                ModelEvent::Warning(warning) => step.warnings.push(warning),
                ModelEvent::Source {
                    id,
                    source_type,
                    url,
                    title,
                } => {
                    let source = Source {
                        id,
                        source_type,
                        url,
                        title,
                    };
                    em.emit(Event::Source(source.clone())).await;
                    step.sources.push(source);
                }
                ModelEvent::File { data, mime_type } => {
                    let file = GeneratedFile { data, mime_type };
                    em.emit(Event::File(file.clone())).await;
                    step.files.push(file);
                }
                ModelEvent::Raw(raw) => em.emit(Event::Raw(raw)).await,
            }
        }
        if !finished {
            return Err(model_failed(ModelError::Protocol(
                "the stream ended before the model finished".into(),
            )));
        }
        if self.stream_guard.is_some() {
            Box::pin(self.flush_guard(em, blocks, &mut step)).await?;
        }
        if step.response.model.is_empty() {
            step.response.model.clone_from(&self.agent.model);
        }
        Ok(step)
    }
}

impl Runner {
    /// Emits the text the output processors held back (a redacting filter's tail).
    async fn flush_guard(
        &mut self,
        em: &mut Emitter,
        blocks: &mut Blocks,
        step: &mut StepRecord,
    ) -> Result<(), StepFail> {
        let Some(guard) = &mut self.stream_guard else {
            return Ok(());
        };
        let ctx = StreamCtx {
            agents: &self.agents,
            cancel: &self.cancel,
        };
        let out = guard.flush(&ctx).await.map_err(StepFail::Tripped)?;
        emit_guarded(em, blocks, step, out).await;
        Ok(())
    }
}

/// The user message "." that opens a conversation starting with the model's turn.
fn opening_dot() -> Message {
    Message::new(
        Role::User,
        vec![Part::Text {
            text: ".".to_owned(),
        }],
    )
}

/// A piece of the answer's text: into the step, and out to the client.
async fn push_text(em: &mut Emitter, blocks: &mut Blocks, step: &mut StepRecord, text: String) {
    let id = blocks.text(em).await;
    step.text.push_str(&text);
    em.emit(Event::TextDelta { id, text }).await;
}

/// What the output processors let out of the stream: their data chunks, then the text.
async fn emit_guarded(
    em: &mut Emitter,
    blocks: &mut Blocks,
    step: &mut StepRecord,
    out: StreamOut,
) {
    for (kind, data) in out.data {
        em.emit(Event::Data { kind, data }).await;
    }
    for text in out.texts {
        push_text(em, blocks, step, text).await;
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
        em.emit(Event::TextStart(id.clone())).await;
        self.text = Some(id.clone());
        id
    }

    async fn reasoning(&mut self, em: &mut Emitter) -> String {
        if let Some(id) = &self.reasoning {
            return id.clone();
        }
        let id = new_id();
        em.emit(Event::ReasoningStart(id.clone())).await;
        self.reasoning = Some(id.clone());
        id
    }

    async fn close(&mut self, em: &mut Emitter) {
        if let Some(id) = self.reasoning.take() {
            em.emit(Event::ReasoningEnd(id)).await;
        }
        if let Some(id) = self.text.take() {
            em.emit(Event::TextEnd(id)).await;
        }
    }
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

/// The assistant message a step adds to the conversation.
pub(super) fn assistant_message(step: &StepRecord) -> Message {
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
