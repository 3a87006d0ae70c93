//! What processors do to a run, at the reference's stages: the input once before the first
//! model call, each step's answer before its tools run (abort, or retry with feedback), and the
//! response before it is saved. The built-in processors are pure (`agent/processors/`); hook
//! processors are called here through the run's PROCESS_* hooks. Every method returns at once
//! when the run has no processor.

use std::collections::HashSet;
use std::sync::Arc;

use super::{RunOutcome, Runner};
use crate::agent::emit::Emitter;
use crate::agent::error::RunFailure;
use crate::agent::event::Event;
use crate::agent::message::Message;
use crate::agent::processors::{Processor, Stage, Tripwire};
use crate::agent::result::RunEnd;
use crate::agent::state::StepRecord;
use crate::agent::wire;
use crate::json::from_proto_struct;
use crate::pb;
use crate::pb::hook_answer::Answer;
use crate::pb::hook_call::Context;

/// Why a processor stage stopped the run.
pub(super) enum Halt {
    /// A processor aborted.
    Tripped(Tripwire),
    /// A hook processor failed (its policy ends the run).
    Failed(RunFailure),
}

impl From<RunFailure> for Halt {
    fn from(failure: RunFailure) -> Self {
        Self::Failed(failure)
    }
}

/// What became of a step the output processors saw.
pub(super) enum StepVerdict {
    /// Accepted: its tools run.
    Accept,
    /// Rejected, and the model is asked again.
    Retry(Tripwire),
    /// Rejected: the run ends.
    Abort(Tripwire),
}

/// The reference's retry feedback, added as a system message to every later call.
pub(super) fn retry_feedback(reason: &str) -> String {
    format!(
        "[Processor Feedback] Your previous response was not accepted: {reason}. Please try again with the feedback in mind."
    )
}

impl Runner {
    /// The input processors, in order, on the remembered history, context and input; a
    /// message a processor drops leaves this run's prompt, a new one joins the input.
    pub(super) async fn process_input(&mut self) -> Result<(), Halt> {
        let Some(chain) = self.processors.clone() else {
            return Ok(());
        };
        if chain.input.is_empty() {
            return Ok(());
        }
        let request = &self.state.request;
        let mut messages: Vec<Message> = self
            .state
            .history
            .iter()
            .chain(&request.context)
            .chain(&request.input)
            .cloned()
            .collect();
        for processor in &chain.input {
            if let Some(id) = processor.hook_id() {
                self.input_hook(id, &mut messages).await?;
            } else if let Some(detector) = processor.detector() {
                detector
                    .messages(Stage::Input, &self.agents, &mut messages, &self.cancel)
                    .await
                    .map_err(Halt::Tripped)?;
            } else {
                processor.input(&mut messages).map_err(Halt::Tripped)?;
            }
        }
        self.place_input(messages);
        Ok(())
    }

    /// Puts processed messages back where they came from, by id.
    fn place_input(&mut self, messages: Vec<Message>) {
        let ids =
            |list: &[Message]| -> HashSet<String> { list.iter().map(|m| m.id.clone()).collect() };
        let history = ids(&self.state.history);
        let context = ids(&self.state.request.context);
        let (mut h, mut c, mut i) = (Vec::new(), Vec::new(), Vec::new());
        for m in messages {
            if history.contains(&m.id) {
                h.push(m);
            } else if context.contains(&m.id) {
                c.push(m);
            } else {
                i.push(m);
            }
        }
        self.state.history = h;
        let request = Arc::make_mut(&mut self.state.request);
        request.context = c;
        request.input = i;
    }

    async fn input_hook(&self, id: &str, messages: &mut Vec<Message>) -> Result<(), Halt> {
        let context = pb::ProcessInputContext {
            processor_id: id.to_owned(),
            messages: messages.iter().map(wire::message).collect(),
            system_messages: self.system_messages(),
        };
        let answer = self
            .processor_hook(
                pb::HookKind::ProcessInput,
                id,
                Context::ProcessInput(context),
            )
            .await?;
        rewrite_or_stop(id, "process_input", answer, messages)
    }

    /// The output processors on a step's answer, before its tools run.
    pub(super) async fn process_output_step(
        &mut self,
        step: &StepRecord,
    ) -> Result<StepVerdict, RunFailure> {
        let Some(chain) = self.processors.clone() else {
            return Ok(StepVerdict::Accept);
        };
        for id in chain.output.iter().filter_map(Processor::hook_id) {
            if !self.handles_processor(pb::HookKind::ProcessOutputStep) {
                break;
            }
            let context = pb::ProcessOutputStepContext {
                processor_id: id.to_owned(),
                step_number: step.index,
                finish_reason: wire::finish_reason(step.finish_reason).into(),
                text: step.text.clone(),
                tool_calls: step.tool_calls.iter().map(wire::call).collect(),
                retry_count: self.state.processor_retries,
                messages: self.hook_messages(pb::HookKind::ProcessOutputStep),
            };
            let answer = self
                .processor_hook(
                    pb::HookKind::ProcessOutputStep,
                    id,
                    Context::ProcessOutputStep(context),
                )
                .await
                .map_err(|halt| match halt {
                    Halt::Failed(failure) => failure,
                    Halt::Tripped(t) => RunFailure::Hook(t.reason),
                })?;
            if answer.messages.is_some() {
                return Err(RunFailure::Hook(format!(
                    "the process_output_step hook of processor {id:?} answered messages, which \
                     that stage does not take (abort, or no change)"
                )));
            }
            if let Some(abort) = answer.abort {
                let trip = tripwire(id, abort);
                let may_retry = chain
                    .max_retries
                    .is_some_and(|max| self.state.processor_retries < max);
                return Ok(if trip.retry && may_retry {
                    StepVerdict::Retry(trip)
                } else {
                    StepVerdict::Abort(trip)
                });
            }
        }
        self.state.processor_retries = 0;
        Ok(StepVerdict::Accept)
    }

    /// The output processors on the response, before it is saved; a change rewrites the run's
    /// text from the response's assistant messages.
    pub(super) async fn process_output_result(&mut self) -> Result<(), Halt> {
        let Some(chain) = self.processors.clone() else {
            return Ok(());
        };
        if chain.output.is_empty() {
            return Ok(());
        }
        let mut response = self.state.response.clone();
        for processor in &chain.output {
            if let Some(id) = processor.hook_id() {
                self.result_hook(id, &mut response).await?;
            } else if let Some(detector) = processor.detector() {
                detector
                    .messages(Stage::Result, &self.agents, &mut response, &self.cancel)
                    .await
                    .map_err(Halt::Tripped)?;
            } else {
                processor.result(&mut response).map_err(Halt::Tripped)?;
            }
        }
        if response != self.state.response {
            self.state.result_text = Some(
                response
                    .iter()
                    .filter(|m| m.role == crate::agent::message::Role::Assistant)
                    .map(Message::text)
                    .collect(),
            );
            self.state.response = response;
        }
        Ok(())
    }

    async fn result_hook(&self, id: &str, response: &mut Vec<Message>) -> Result<(), Halt> {
        if !self.handles_processor(pb::HookKind::ProcessOutputResult) {
            return Ok(());
        }
        let text: String = self.state.steps.iter().map(|s| s.text.as_str()).collect();
        let context = pb::ProcessOutputResultContext {
            processor_id: id.to_owned(),
            text,
            finish_reason: self
                .state
                .steps
                .last()
                .map_or(pb::FinishReason::Stop, |s| {
                    wire::finish_reason(s.finish_reason)
                })
                .into(),
            messages: response.iter().map(wire::message).collect(),
            steps: u32::try_from(self.state.steps.len()).unwrap_or(u32::MAX),
        };
        let answer = self
            .processor_hook(
                pb::HookKind::ProcessOutputResult,
                id,
                Context::ProcessOutputResult(context),
            )
            .await?;
        rewrite_or_stop(id, "process_output_result", answer, response)
    }

    /// An output processor asked for another answer: the step stays in `steps` as a retry
    /// (no text; its calls are listed but never run), the model is not shown the answer, and
    /// every later call reads the feedback.
    pub(super) async fn retry_step(
        &mut self,
        em: &mut Emitter,
        mut step: StepRecord,
        trip: Tripwire,
    ) {
        let feedback = retry_feedback(&trip.reason);
        if !self.state.processor_feedback.contains(&feedback) {
            self.state.processor_feedback.push(feedback);
        }
        self.state.processor_retries += 1;
        // As the reference: the step lists its calls, but its text is gone.
        step.text.clear();
        step.reasoning.clear();
        step.tripwire = Some(trip);
        step.is_continued = true;
        self.emit_hook_notes(em).await;
        em.emit(Event::StepFinish(step.clone())).await;
        self.state.steps.push(step);
    }

    /// An output processor rejected the step for good: as the reference, the answer stays (in
    /// the text and in memory) but its tools never run, and the run ends with the tripwire.
    pub(super) async fn rejected_step(
        &mut self,
        em: &mut Emitter,
        mut step: StepRecord,
        trip: Tripwire,
    ) -> RunOutcome {
        step.tripwire = Some(trip.clone());
        step.is_continued = false;
        // Its calls never run, so the saved answer carries none (no call without a result).
        let answer = StepRecord {
            tool_calls: Vec::new(),
            ..step.clone()
        };
        self.state
            .response
            .push(super::model_call::assistant_message(&answer));
        self.emit_hook_notes(em).await;
        em.emit(Event::StepFinish(step.clone())).await;
        self.state.steps.push(step);
        self.tripped(em, trip, true).await
    }

    /// A processor stopped the run: a `tripwire` chunk, and a result with finish reason
    /// TRIPWIRE. Unless `keep` (a rejected step), the run's text is empty and nothing of it
    /// is saved, as the reference drops a run its guardrails stopped before the end.
    pub(super) async fn tripped(
        &mut self,
        em: &mut Emitter,
        trip: Tripwire,
        keep: bool,
    ) -> RunOutcome {
        self.emit_hook_notes(em).await;
        em.emit(Event::Tripwire(trip.clone())).await;
        if keep && let Err(e) = self.save().await {
            return self.failed_unsaved(em, e).await;
        }
        let mut result = self.result(RunEnd::Tripwire);
        if !keep {
            result.text.clear();
        }
        result.tripwire = Some(trip);
        self.outcome(result, None)
    }

    fn handles_processor(&self, kind: pb::HookKind) -> bool {
        self.hooks.as_ref().is_some_and(|h| h.handles(kind))
    }

    /// One hook processor's call; no answer (or a fault under CONTINUE) is no change, a
    /// failure answer fails the run as a throwing processor fails the reference's.
    async fn processor_hook(
        &self,
        kind: pb::HookKind,
        id: &str,
        context: Context,
    ) -> Result<pb::ProcessorAnswer, Halt> {
        let Some(hooks) = &self.hooks else {
            return Ok(pb::ProcessorAnswer::default());
        };
        match hooks.call(kind, context).await? {
            Some(Answer::Processor(answer)) => Ok(answer),
            Some(Answer::Error(e)) => Err(Halt::Failed(RunFailure::Hook(format!(
                "the {} hook of processor {id:?} failed: {}",
                crate::agent::hooks::kind_name(kind),
                e.message
            )))),
            _ => Ok(pb::ProcessorAnswer::default()),
        }
    }
}

/// What a rewriting hook processor's answer does: an abort stops the run, messages replace
/// `messages`.
fn rewrite_or_stop(
    id: &str,
    stage: &str,
    answer: pb::ProcessorAnswer,
    messages: &mut Vec<Message>,
) -> Result<(), Halt> {
    if let Some(abort) = answer.abort {
        return Err(Halt::Tripped(tripwire(id, abort)));
    }
    if let Some(list) = answer.messages {
        *messages = parsed(id, stage, &list, messages)?;
    }
    Ok(())
}

/// A hook processor's abort as a tripwire.
fn tripwire(id: &str, abort: pb::ProcessorAbort) -> Tripwire {
    Tripwire {
        reason: abort.reason,
        retry: abort.retry,
        metadata: abort
            .metadata
            .as_ref()
            .map(|m| Box::new(from_proto_struct(m))),
        processor_id: id.to_owned(),
    }
}

/// A hook processor's messages, each checked as a request's are; one that keeps the id of
/// an earlier message keeps its creation time and task-list signal too.
fn parsed(
    id: &str,
    stage: &str,
    list: &pb::MessageList,
    before: &[Message],
) -> Result<Vec<Message>, Halt> {
    list.messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let mut message = wire::message_from(m, &format!("{stage}.messages.{i}")).map_err(
                |(field, why)| {
                    Halt::Failed(RunFailure::Hook(format!(
                        "the {stage} hook of processor {id:?} answered an invalid {field}: {why}"
                    )))
                },
            )?;
            if let Some(old) = before.iter().find(|o| o.id == message.id) {
                message.created_at_ms = old.created_at_ms;
                message.signal.clone_from(&old.signal);
            }
            Ok(message)
        })
        .collect()
}
