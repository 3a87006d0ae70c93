//! What each hook's answer does to the run, as the reference does it: `prepare_step` before a
//! model call, `before_tool_call` / `after_tool_call` around a tool's execution (after any
//! approval, so a declined call never reaches them), `on_iteration_complete` in the loop
//! condition. Every method is a no-op when the run has no handler for its kind.

use serde_json::{Map, Value};

use super::Runner;
use crate::agent::ModelRef;
use crate::agent::error::RunFailure;
use crate::agent::message::{Message, Part, Role};
use crate::agent::state::{CallRecord, StepRecord};
use crate::agent::stop::StopCause;
use crate::agent::tools::ToolOutput;
use crate::agent::wire;
use crate::json::{from_proto_struct, from_proto_value, to_proto_struct, to_proto_value};
use crate::model::ToolChoice;
use crate::pb;
use crate::pb::hook_answer::Answer;
use crate::pb::hook_call::Context;

/// What `prepare_step` changed for one step.
#[derive(Clone, Default)]
pub(in crate::agent) struct StepOverrides {
    /// Tool choice for this step.
    pub tool_choice: Option<ToolChoice>,
    /// Names of the tools offered in this step.
    pub active_tools: Option<Vec<String>>,
    /// System messages for this step, replacing the run's.
    pub system: Option<Vec<String>>,
    /// Model for this step.
    pub model: Option<ModelRef>,
    /// Provider options for this step, replacing the run's.
    pub provider_options: Option<Map<String, Value>>,
}

/// What `on_iteration_complete` decided about the loop.
pub(super) struct IterationVerdict {
    /// Whether the loop goes on.
    pub continued: bool,
    /// Feedback to add to the conversation before the next call.
    pub feedback: Option<String>,
    /// Stop after the next step whatever it asks for (`continue: false` with feedback).
    pub stop_after_next: bool,
}

/// Before a tool runs: go on, or its result without running it.
pub(super) enum BeforeTool {
    /// Run the tool.
    Proceed,
    /// The result, and the tool never runs.
    Skip(ToolOutput),
}

impl Runner {
    pub(super) fn handles(&self, kind: pb::HookKind) -> bool {
        self.hooks.as_ref().is_some_and(|h| h.handles(kind))
    }

    pub(super) async fn hook(
        &self,
        kind: pb::HookKind,
        context: Context,
    ) -> Result<Option<Answer>, RunFailure> {
        match &self.hooks {
            Some(hooks) => hooks.call(kind, context).await,
            None => Ok(None),
        }
    }

    /// Whether the `kind` hook reads the conversation.
    fn wants_messages(&self, kind: pb::HookKind) -> bool {
        self.hooks.as_ref().is_some_and(|h| h.wants_messages(kind))
    }

    /// Every message of the run so far, for a `kind` hook's context (none when its handler
    /// asked to omit them).
    pub(super) fn hook_messages(&self, kind: pb::HookKind) -> Vec<pb::Message> {
        if !self.wants_messages(kind) {
            return Vec::new();
        }
        self.state.conversation().map(wire::message).collect()
    }

    pub(super) fn agent_name(&self) -> String {
        self.agent
            .config
            .name
            .clone()
            .unwrap_or_else(|| self.agent.config.id.clone())
    }

    /// Asks `prepare_step` what step `index` changes; a hook that threw fails the run, as the
    /// reference's throwing `prepareStep` fails `generate()`.
    pub(super) async fn prepare_step(&mut self, index: u32) -> Result<StepOverrides, RunFailure> {
        if !self.handles(pb::HookKind::PrepareStep) {
            return Ok(StepOverrides::default());
        }
        let request = &self.state.request;
        let system = self.system_messages();
        let context = pb::PrepareStepContext {
            step_number: index,
            messages: if self.wants_messages(pb::HookKind::PrepareStep) {
                self.state.prompt_messages().map(wire::message).collect()
            } else {
                Vec::new()
            },
            system_messages: system,
            model: self.agent.config.model.clone(),
            tools: self.offered.iter().map(|t| t.def.name.clone()).collect(),
            tool_choice: request.tool_choice.as_ref().map(wire::tool_choice),
            active_tools: request.active_tools.clone(),
            provider_options: Some(to_proto_struct(&request.provider_options)),
            steps_completed: u32::try_from(self.state.steps.len()).unwrap_or(u32::MAX),
        };
        let answer = self
            .hook(pb::HookKind::PrepareStep, Context::PrepareStep(context))
            .await?;
        let prepared = match answer {
            Some(Answer::PrepareStep(p)) => p,
            Some(Answer::Error(e)) => {
                return Err(RunFailure::Hook(format!(
                    "the prepare_step hook failed: {}",
                    e.message
                )));
            }
            _ => return Ok(StepOverrides::default()),
        };
        let model = match prepared.model.as_deref().filter(|m| !m.is_empty()) {
            None => None,
            Some(spec) => Some(self.agents.model(spec).ok_or_else(|| {
                RunFailure::Hook(format!(
                    "the prepare_step hook chose model {spec:?}, which is not a configured \
                     provider/model"
                ))
            })?),
        };
        if let Some(list) = prepared.messages {
            let mut messages = Vec::with_capacity(list.messages.len());
            for (i, m) in list.messages.iter().enumerate() {
                let message = wire::message_from(m, &format!("prepare_step.messages.{i}"))
                    .map_err(|(field, why)| {
                        RunFailure::Hook(format!("the prepare_step hook's {field} {why}"))
                    })?;
                messages.push(message);
            }
            // Permanent, as the reference's `messages`: later steps read the replacement
            // followed by what the run adds from now on.
            self.state.prompt_override = Some((messages, self.state.response.len()));
        }
        Ok(StepOverrides {
            tool_choice: prepared
                .tool_choice
                .as_ref()
                .and_then(|c| wire::tool_choice_from(c).ok().flatten()),
            active_tools: prepared.active_tools.map(|l| l.values),
            system: prepared.system_messages.map(|l| l.values),
            model,
            provider_options: prepared.provider_options.as_ref().map(from_proto_struct),
        })
    }

    fn tool_context(&self, call: &CallRecord) -> pb::ToolCallContext {
        pb::ToolCallContext {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            input: Some(to_proto_value(&call.args)),
            output: None,
            error: None,
            agent_name: self.agent_name(),
            request_context: Some(to_proto_struct(&self.state.request.request_context)),
        }
    }

    /// `before_tool_call`: skip with an output, or a tool error when the hook threw.
    pub(super) async fn before_tool(&self, call: &CallRecord) -> BeforeTool {
        if !self.handles(pb::HookKind::BeforeToolCall) {
            return BeforeTool::Proceed;
        }
        let context = Context::BeforeToolCall(self.tool_context(call));
        match self.hook(pb::HookKind::BeforeToolCall, context).await {
            Ok(Some(Answer::BeforeToolCall(a))) if a.proceed == Some(false) => {
                BeforeTool::Skip(ToolOutput {
                    result: a.output.as_ref().map_or(Value::Null, from_proto_value),
                    is_error: false,
                })
            }
            Ok(Some(Answer::Error(e))) => BeforeTool::Skip(ToolOutput {
                result: Value::String(e.message),
                is_error: true,
            }),
            Ok(_) => BeforeTool::Proceed,
            Err(failure) => BeforeTool::Skip(self.fatal_output(failure)),
        }
    }

    /// `after_tool_call`: may replace a successful output; a hook that threw turns the call
    /// into a tool error.
    pub(super) async fn after_tool(
        &self,
        call: &CallRecord,
        output: Result<ToolOutput, String>,
    ) -> Result<ToolOutput, String> {
        if !self.handles(pb::HookKind::AfterToolCall) {
            return output;
        }
        let mut context = self.tool_context(call);
        match &output {
            Ok(out) => context.output = Some(to_proto_value(&out.result)),
            Err(error) => context.error = Some(error.clone()),
        }
        match self
            .hook(pb::HookKind::AfterToolCall, Context::AfterToolCall(context))
            .await
        {
            Ok(Some(Answer::AfterToolCall(a))) => match (output, a.output) {
                (Ok(out), Some(replaced)) => Ok(ToolOutput {
                    result: from_proto_value(&replaced),
                    is_error: out.is_error,
                }),
                (output, _) => output,
            },
            Ok(Some(Answer::Error(e))) => Err(e.message),
            Ok(_) => output,
            Err(failure) => Ok(self.fatal_output(failure)),
        }
    }

    /// A tool hook whose FAIL policy ends the run: the call reads as failed, and the run
    /// fails once the step's calls are settled.
    fn fatal_output(&self, failure: RunFailure) -> ToolOutput {
        ToolOutput {
            result: Value::String(self.note_fatal(failure)),
            is_error: true,
        }
    }

    /// Keeps the first failure of a hook called where the run cannot fail at once (tool and
    /// scorer hooks run concurrently); the run fails with it after that phase. Returns its text.
    pub(super) fn note_fatal(&self, failure: RunFailure) -> String {
        let text = failure.to_string();
        if let Ok(mut fatal) = self.hook_fatal.lock() {
            fatal.get_or_insert(failure);
        }
        text
    }

    /// The failure kept by [`Runner::note_fatal`], if any.
    pub(super) fn take_hook_fatal(&self) -> Option<RunFailure> {
        self.hook_fatal.lock().ok().and_then(|mut f| f.take())
    }

    /// `on_iteration_complete`, in the loop condition after the stop conditions; the
    /// reference's return rules, first match wins.
    pub(super) async fn on_iteration(
        &mut self,
        step: &StepRecord,
        wants_more: bool,
        stop: Option<StopCause>,
    ) -> Result<IterationVerdict, RunFailure> {
        let continued = wants_more && stop.is_none();
        let unchanged = IterationVerdict {
            continued,
            feedback: None,
            stop_after_next: false,
        };
        if !self.handles(pb::HookKind::OnIterationComplete) {
            return Ok(unchanged);
        }
        let iteration =
            u32::try_from(self.state.steps.len() + 1 - self.loop_start).unwrap_or(u32::MAX);
        let context = pb::IterationContext {
            iteration,
            max_iterations: self.state.request.max_steps,
            text: step.text.clone(),
            tool_calls: step.tool_calls.iter().map(wire::call).collect(),
            tool_results: step.tool_results.iter().map(wire::result).collect(),
            is_final: !continued,
            finish_reason: wire::finish_reason(step.finish_reason).into(),
            messages: self.hook_messages(pb::HookKind::OnIterationComplete),
            agent_name: self.agent_name(),
        };
        let answer = self
            .hook(
                pb::HookKind::OnIterationComplete,
                Context::OnIterationComplete(context),
            )
            .await?;
        // A hook that threw is ignored, as the reference logs and ignores it.
        let Some(Answer::OnIterationComplete(a)) = answer else {
            return Ok(unchanged);
        };
        let feedback = a.feedback.filter(|f| !f.is_empty());
        Ok(match (feedback, a.continue_run) {
            (Some(text), go_on) if wants_more => IterationVerdict {
                continued,
                feedback: Some(text),
                stop_after_next: go_on == Some(false),
            },
            (_, Some(false)) => IterationVerdict {
                continued: false,
                feedback: None,
                stop_after_next: false,
            },
            (_, Some(true)) if !continued => IterationVerdict {
                continued: self.policy.below_max_steps(self.state.steps.len() + 1),
                feedback: None,
                stop_after_next: false,
            },
            _ => unchanged,
        })
    }
}

/// The assistant message carrying hook or completion feedback.
pub(super) fn feedback_message(text: String) -> Message {
    Message::new(Role::Assistant, vec![Part::Text { text }])
}
