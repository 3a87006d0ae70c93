//! The step loop: one model call per step (`run/model_call.rs`), the tools it asks for
//! (`run/tool_calls.rs`), the task-list signal and memory (`run/memory.rs`), stop rules, and
//! how a run ends: completed (structured output, memory, title), suspended for decisions,
//! aborted or failed. A suspended run returns its state; [`Runner::resume`] continues it.

mod memory;
mod model_call;
mod tool_calls;

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, warn};

use super::AgentDef;
use super::emit::Emitter;
use super::error::RunFailure;
use super::event::Event;
use super::result::{RunEnd, RunResult};
use super::state::{OpenStep, RunState, StepRecord};
use super::stop::{StepFacts, StepPolicy, StopCause, step_wants_more};
use super::structured::{self, ObjectOutcome};
use super::tools::{ToolEnv, ToolSpec};
use crate::model::FinishReason;
use crate::store::{Store, ThreadKey};
use crate::tasklist::{TaskList, TaskLists};
use crate::telemetry;

pub use tool_calls::offered_tools;

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
    /// The result (its `finish` is not yet emitted: the caller records the run first).
    pub result: RunResult,
    /// Set when the run is suspended: the state to store.
    pub suspended: Option<RunState>,
}

/// Why a step did not produce a model answer.
enum StepFail {
    Aborted,
    Failed(RunFailure),
}

/// Where a step's tool calls left the run.
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
    /// Continuing after decisions: the reference re-sends only what its per-step processors
    /// add, not what it added once before the first step (the task-list guidance).
    resumed: bool,
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
            thread: request.memory.as_ref().map(|m| ThreadKey {
                thread_id: m.thread_id.clone(),
                resource_id: m.resource_id.clone(),
            }),
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
            resumed: false,
        }
    }

    /// Runs a new run from its first step.
    pub async fn start(mut self, em: &mut Emitter) -> RunOutcome {
        let memory = self.state.request.memory.as_ref();
        em.emit(Event::Start {
            agent_id: self.agent.config.id.clone(),
            thread_id: memory.map(|m| m.thread_id.clone()).unwrap_or_default(),
            resource_id: memory.map(|m| m.resource_id.clone()).unwrap_or_default(),
        })
        .await;
        self.drive(em).await
    }

    /// Continues a suspended run whose pending calls are all decided.
    pub async fn resume(mut self, em: &mut Emitter) -> RunOutcome {
        self.resumed = true;
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
            let step = match self.call_model(index, em).instrument(span.clone()).await {
                Ok(step) => step,
                Err(StepFail::Aborted) => return self.aborted(em).await,
                Err(StepFail::Failed(failure)) => return self.failed(em, failure).await,
            };
            self.state
                .response
                .push(model_call::assistant_message(&step));
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

    /// Closes a step: its results reach the conversation, `step-finish` is emitted, and the
    /// run either goes on (`None`) or completes.
    async fn finish_step(&mut self, em: &mut Emitter, mut step: StepRecord) -> Option<RunOutcome> {
        if !step.tool_results.is_empty() {
            self.state
                .response
                .push(tool_calls::tool_message(&step.tool_results));
        }
        let wants_more = step_wants_more(step.finish_reason, !step.tool_calls.is_empty());
        let steps_after = u32::try_from(self.state.steps.len() + 1).unwrap_or(u32::MAX);
        let total = self
            .state
            .steps
            .iter()
            .map(|s| s.usage)
            .sum::<crate::model::Usage>()
            + step.usage;
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
        telemetry::metrics().tokens(step.usage.input_tokens, step.usage.output_tokens);
        em.emit(Event::StepFinish(step.clone())).await;
        let continued = step.is_continued;
        self.state.steps.push(step);
        if self.state.request.save_per_step
            && let Err(e) = self.save().await
        {
            return Some(self.failed(em, RunFailure::from(&e)).await);
        }
        if continued {
            None
        } else {
            Some(self.complete(em).await)
        }
    }

    /// The run ended normally: structured output, memory, title, result.
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
                ObjectOutcome::Failure(failure) => return self.failed(em, failure).await,
            }
            if let Some(value) = &object {
                em.emit(Event::ObjectResult {
                    object: value.clone(),
                    used_fallback,
                })
                .await;
            }
        }
        if let Err(e) = self.save().await {
            return self.failed_unsaved(em, RunFailure::from(&e)).await;
        }
        if self.state.title_pending {
            self.generate_title(em).await;
        }
        let mut result = self.result(RunEnd::Model(last_reason));
        result.object = object;
        result.used_fallback_value = used_fallback;
        RunOutcome {
            result,
            suspended: None,
        }
    }

    /// Saves what exists so far and hands back the state to store until the decisions come.
    async fn suspend(&mut self, em: &mut Emitter, open: OpenStep) -> RunOutcome {
        self.state.open_step = Some(open);
        if let Err(e) = self.save().await {
            self.state.open_step = None;
            return self.failed_unsaved(em, RunFailure::from(&e)).await;
        }
        RunOutcome {
            result: self.result(RunEnd::Suspended),
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
        em.emit(Event::Abort(reason)).await;
        self.drop_dangling_calls();
        if !self.state.steps.is_empty()
            && let Err(e) = self.save().await
        {
            warn!(run_id = %self.run_id, error = %e, "could not save an aborted run's messages");
        }
        self.result(RunEnd::Aborted).into()
    }

    /// The run failed: an `error` chunk, and what exists is saved (a run that failed with no
    /// output saves nothing, as the reference).
    async fn failed(&mut self, em: &mut Emitter, failure: RunFailure) -> RunOutcome {
        self.drop_dangling_calls();
        if !self.state.steps.is_empty()
            && let Err(e) = self.save().await
        {
            warn!(run_id = %self.run_id, error = %e, "could not save a failed run's messages");
        }
        self.failed_unsaved(em, failure).await
    }

    /// The run failed and nothing more is to be saved (saving is what failed).
    async fn failed_unsaved(&mut self, em: &mut Emitter, failure: RunFailure) -> RunOutcome {
        if let RunFailure::Store(_) = failure {
            telemetry::metrics().store_error("append_messages");
        }
        em.emit(Event::Error(failure.clone())).await;
        let mut result = self.result(RunEnd::Failed);
        result.error = Some(failure);
        result.into()
    }

    fn result(&self, end: RunEnd) -> RunResult {
        RunResult::of(&self.run_id, &self.state, end)
    }
}

impl From<RunResult> for RunOutcome {
    fn from(result: RunResult) -> Self {
        Self {
            result,
            suspended: None,
        }
    }
}
