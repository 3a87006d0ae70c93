//! The step loop: one model call per step (`run/model_call.rs`), the tools it asks for
//! (`run/tool_calls.rs`), the task-list signal and memory (`run/memory.rs`), stop rules, and
//! how a run ends: completed (structured output, memory, title), suspended for decisions,
//! aborted or failed. A suspended run returns its state; [`Runner::resume`] continues it.
//! Delegations to sub-agents are in `run/delegation.rs`, the separate structuring call in
//! `run/structuring.rs`, the end recorded with the last messages in `run/end.rs`.

mod completion;
mod delegation;
mod end;
mod hooks;
mod memory;
mod model_call;
mod processors;
mod recall;
mod scoring;
mod structuring;
mod tool_calls;

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, warn};

use super::completion::CompletionCheck;
use super::emit::Emitter;
use super::error::RunFailure;
use super::event::Event;
use super::hooks::RunHooks;
use super::processors::{Chain, OutputStream, Tripwire};
use super::result::{RunEnd, RunResult};
use super::state::{OpenStep, RunState, StepRecord};
use super::stop::{StepFacts, StepPolicy, StopCause, step_wants_more};
use super::structured::{self, ObjectOutcome};
use super::tools::{ToolEnv, ToolSpec};
use super::{AgentDef, Agents, ModelRef};
use crate::model::FinishReason;
use crate::store::{MessageAppend, Store, StoreError, ThreadKey};
use crate::tasklist::{TaskList, TaskLists};
use crate::telemetry;

pub use delegation::Delegator;
pub(super) use hooks::StepOverrides;
use processors::{Halt, StepVerdict};
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
    /// The vector index of semantic recall (shared by all runs of this replica).
    pub vectors: Arc<crate::memory::VectorIndex>,
    /// Scoring that outlives its run (fire-and-forget), awaited when the replica drains.
    pub scoring: tokio_util::task::TaskTracker,
}

/// How a run (or a continuation) ended.
pub struct RunOutcome {
    /// The result (its `finish` is not yet emitted: the caller records the run first).
    pub result: RunResult,
    /// Set when the run is suspended: the state to store.
    pub suspended: Option<RunState>,
    /// Earlier runs whose waiting call this run answered (auto-resume): they end now.
    pub answered_runs: Vec<String>,
    /// The run's end is recorded already (with its last messages, through its checkpoint):
    /// only `finish` is left to emit.
    pub ended: bool,
}

/// Why a step did not produce a model answer.
enum StepFail {
    Aborted,
    Failed(RunFailure),
    /// An output processor aborted the stream, or an input token limiter the prompt.
    Tripped(Tripwire),
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
    /// The separate structuring model of `structured_output.model`.
    structurer: Option<ModelRef>,
    /// The configured agents and providers (models named by hooks and judges).
    agents: Arc<Agents>,
    /// The run's hook handlers, when it has any.
    hooks: Option<Arc<RunHooks>>,
    /// A tool or scorer hook failed under the FAIL policy: the run fails after the phase.
    hook_fatal: std::sync::Mutex<Option<RunFailure>>,
    /// Steps done when this loop (re)started: hook iterations count from it.
    loop_start: usize,
    /// What `prepare_step` changed for the step being called.
    overrides: StepOverrides,
    /// `on_iteration_complete` said stop after the next step.
    stop_after_next: bool,
    /// The last completion check.
    completion: Option<CompletionCheck>,
    /// Where the run's durable points go (before each step's tool calls run).
    checkpoint: Option<Arc<dyn Checkpoint>>,
    /// The run's processors (`None`: it has none).
    processors: Option<Arc<Chain>>,
    /// Why the run's processors cannot be built: the run fails before its next step.
    broken_processors: Option<String>,
    /// The output processors' view of the stream, when some watch it.
    stream_guard: Option<OutputStream>,
    /// Starts sub-agents' runs (`None`: delegation calls fail).
    delegator: Option<Arc<dyn Delegator>>,
    /// `on_delegation_complete` bailed: the run ends after the current step.
    bail: std::sync::atomic::AtomicBool,
    /// The run's trace id (hex; empty when not traced): what its scorers sample by.
    trace_id: String,
    /// The run's end is recorded (see [`RunOutcome::ended`]).
    ended: bool,
}

/// Keeps a run's durable points, so that another replica can continue it, and records its end.
#[async_trait::async_trait]
pub trait Checkpoint: Send + Sync {
    /// Stores `state` (a step whose tool calls are about to run is its `open_step`) and the
    /// sequence of the run's last chunk so far; returns once it is stored (or failed).
    async fn save(&self, state: &RunState, sequence: u64);

    /// Records the run's end (`suspended`: the state kept until decisions come), its log
    /// ending at `last_sequence` (its `finish`), with `messages` appended to their thread in
    /// the same store call. `Err`: the store failed and nothing was written.
    async fn end(
        &self,
        messages: Option<MessageAppend>,
        end: RunEnd,
        suspended: Option<&RunState>,
        last_sequence: u64,
    ) -> Result<(), StoreError>;
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
            store: deps.store.clone(),
        };
        let loop_start = state.steps.len();
        let config = &agent.config;
        let built = Chain::for_run(
            agent.processors.as_ref(),
            (
                &config.input_processors,
                &config.output_processors,
                config.max_processor_retries,
            ),
            &request.processors,
        );
        let (processors, broken_processors) = match built {
            Ok(chain) => (chain, None),
            Err(why) => (None, Some(why)),
        };
        let stream_guard = processors
            .as_ref()
            .filter(|c| c.watches_stream())
            .map(Chain::stream);
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
            structurer: None,
            agents: Arc::default(),
            hooks: None,
            hook_fatal: std::sync::Mutex::new(None),
            loop_start,
            overrides: StepOverrides::default(),
            stop_after_next: false,
            completion: None,
            checkpoint: None,
            processors,
            broken_processors,
            stream_guard,
            delegator: None,
            bail: std::sync::atomic::AtomicBool::new(false),
            trace_id: String::new(),
            ended: false,
        }
    }

    /// The run's trace id (hex), which its scorers sample by.
    pub fn with_trace_id(mut self, trace_id: String) -> Self {
        self.trace_id = trace_id;
        self
    }

    /// Starts sub-agents' runs through `delegator`.
    pub fn with_delegator(mut self, delegator: Arc<dyn Delegator>) -> Self {
        self.delegator = Some(delegator);
        self
    }

    /// Resolves models named by hooks and judges among these agents' providers.
    pub fn with_agents(mut self, agents: Arc<Agents>) -> Self {
        self.agents = agents;
        self
    }

    /// Calls these hooks while the run runs.
    pub fn with_hooks(mut self, hooks: Option<Arc<RunHooks>>) -> Self {
        self.hooks = hooks;
        self
    }

    /// Saves a checkpoint through `checkpoint` before each step's tool calls run.
    pub fn with_checkpoint(mut self, checkpoint: Arc<dyn Checkpoint>) -> Self {
        self.checkpoint = Some(checkpoint);
        self
    }

    /// Uses `model` to structure the final answer (`structured_output.model`).
    pub fn with_structurer(mut self, model: Option<ModelRef>) -> Self {
        self.structurer = model;
        self
    }

    /// Runs a new run from its first step.
    #[expect(clippy::manual_async_fn, reason = "an async fn holds the runner twice")]
    pub fn start(mut self, em: &mut Emitter) -> impl Future<Output = RunOutcome> + Send + '_ {
        // An async block, not an async fn, which would hold the runner twice (its argument
        // and its local) in a future the run's task keeps for the run's whole life.
        async move {
            let memory = self.state.request.memory.as_ref();
            em.emit(Event::Start {
                agent_id: self.agent.config.id.clone(),
                thread_id: memory.map(|m| m.thread_id.clone()).unwrap_or_default(),
                resource_id: memory.map(|m| m.resource_id.clone()).unwrap_or_default(),
                parent: self
                    .state
                    .request
                    .parent
                    .as_ref()
                    .map(|p| (p.run_id.clone(), p.tool_call_id.clone())),
            })
            .await;
            if let Err(failure) = Box::pin(self.recall()).await {
                return Box::pin(self.failed(em, failure)).await;
            }
            if let Some(why) = self.broken_processors.take() {
                return Box::pin(self.failed(em, RunFailure::Processors(why))).await;
            }
            // Processors are off the path of a run without them: no future is even boxed.
            if self.processors.is_some() {
                match Box::pin(self.process_input()).await {
                    Ok(()) => {}
                    Err(Halt::Tripped(trip)) => {
                        return Box::pin(self.tripped(em, trip, false)).await;
                    }
                    Err(Halt::Failed(failure)) => {
                        return Box::pin(self.failed_noting(em, failure)).await;
                    }
                }
            }
            self.drive(em).await
        }
    }

    /// Continues a suspended run whose pending calls are all decided.
    pub fn resume(mut self, em: &mut Emitter) -> impl Future<Output = RunOutcome> + Send + '_ {
        self.state.resumed = true;
        self.continue_open(em)
    }

    /// Continues a run from its open step (its calls run), or from its next step: a decided
    /// run, or a taken-over one at its checkpoint.
    #[expect(clippy::manual_async_fn, reason = "as start")]
    pub fn continue_open(
        mut self,
        em: &mut Emitter,
    ) -> impl Future<Output = RunOutcome> + Send + '_ {
        // As `start`, and all but the loop boxed, as in `drive`.
        async move {
            if let Some(why) = self.broken_processors.take() {
                return Box::pin(self.failed(em, RunFailure::Processors(why))).await;
            }
            let Some(open) = self.state.open_step.take() else {
                return self.drive(em).await;
            };
            let phase = Box::pin(self.settle(em, open)).await;
            if let Some(failed) = Box::pin(self.after_tool_hooks(em)).await {
                return failed;
            }
            match phase {
                ToolPhase::Done(step) => match Box::pin(self.finish_step(em, step)).await {
                    Some(outcome) => outcome,
                    None => self.drive(em).await,
                },
                ToolPhase::Suspend(open) => Box::pin(self.suspend(em, open)).await,
                ToolPhase::Aborted => Box::pin(self.aborted(em)).await,
            }
        }
    }

    async fn drive(&mut self, em: &mut Emitter) -> RunOutcome {
        // Everything but the model call is boxed: a run waiting on its model (most of a run's
        // life, and all of an idle stream's) then holds only what that call needs.
        loop {
            Box::pin(self.signal(em)).await;
            let index = u32::try_from(self.state.steps.len()).unwrap_or(u32::MAX);
            let span = telemetry::step_span(index);
            let started = std::time::Instant::now();
            match Box::pin(self.prepare_step(index).instrument(span.clone())).await {
                Ok(overrides) => self.overrides = overrides,
                Err(failure) => return Box::pin(self.failed_noting(em, failure)).await,
            }
            let called = self.call_model(index, em).instrument(span.clone()).await;
            self.overrides = StepOverrides::default();
            let step = match called {
                Ok(step) => step,
                Err(StepFail::Aborted) => return Box::pin(self.aborted(em)).await,
                Err(StepFail::Failed(failure)) => return Box::pin(self.failed(em, failure)).await,
                Err(StepFail::Tripped(trip)) => {
                    return Box::pin(self.tripped(em, trip, false)).await;
                }
            };
            let verdict = if self.processors.is_some() {
                Box::pin(self.process_output_step(&step)).await
            } else {
                Ok(StepVerdict::Accept)
            };
            let step = match verdict {
                Ok(StepVerdict::Accept) => step,
                // A retry is another step: the step cap bounds retries too.
                Ok(StepVerdict::Retry(trip))
                    if self.state.steps.len() + 1 < self.policy.cap() as usize =>
                {
                    Box::pin(self.retry_step(em, step, trip)).await;
                    continue;
                }
                Ok(StepVerdict::Retry(trip)) => {
                    return Box::pin(self.rejected_step(em, step, trip)).await;
                }
                Ok(StepVerdict::Abort(trip)) => {
                    return Box::pin(self.rejected_step(em, step, trip)).await;
                }
                Err(failure) => return Box::pin(self.failed_noting(em, failure)).await,
            };
            self.state
                .response
                .push(model_call::assistant_message(&step));
            let phase = Box::pin(self.run_tools(em, step).instrument(span)).await;
            telemetry::metrics().step(started.elapsed());
            if let Some(failed) = Box::pin(self.after_tool_hooks(em)).await {
                return failed;
            }
            match phase {
                ToolPhase::Done(step) => {
                    if let Some(outcome) = Box::pin(self.finish_step(em, step)).await {
                        return outcome;
                    }
                }
                ToolPhase::Suspend(open) => return Box::pin(self.suspend(em, open)).await,
                ToolPhase::Aborted => return Box::pin(self.aborted(em)).await,
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
        let mut wants_more = step_wants_more(step.finish_reason, !step.tool_calls.is_empty());
        if !wants_more {
            match self.check_completion(&step).await {
                Ok(Some(check)) => {
                    if !check.passed {
                        self.add_completion_feedback(&check);
                        wants_more = true;
                    }
                    em.emit(Event::CompletionCheck(check.clone())).await;
                    self.completion = Some(check);
                }
                Ok(None) => {}
                Err(failure) => return Some(self.failed_noting(em, failure).await),
            }
        }
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
        // `continue: false` with feedback last step: this step ends the run unless the hook
        // now says continue.
        // A bailing delegation ends the run after this step, as the reference's `bail()`.
        let bailed = self.bail.swap(false, std::sync::atomic::Ordering::Relaxed);
        let stop = stop
            .or(std::mem::take(&mut self.stop_after_next).then_some(StopCause::Condition))
            .or(bailed.then_some(StopCause::Condition));
        let verdict = match self.on_iteration(&step, wants_more, stop).await {
            Ok(verdict) => verdict,
            Err(failure) => return Some(self.failed_noting(em, failure).await),
        };
        step.is_continued = verdict.continued;
        self.stop_after_next = verdict.stop_after_next;
        if let Some(feedback) = verdict.feedback {
            self.state.response.push(hooks::feedback_message(feedback));
        }
        if stop == Some(StopCause::Ceiling) && !step.is_continued {
            self.state.warnings.push(format!(
                "The run stopped at the server's ceiling of {} steps",
                self.policy.cap()
            ));
        }
        self.emit_hook_notes(em).await;
        telemetry::metrics().tokens(step.usage.input_tokens, step.usage.output_tokens);
        em.emit(Event::StepFinish(step.clone())).await;
        let continued = step.is_continued;
        self.state.steps.push(step);
        if self.state.request.save_per_step
            && let Err(e) = self.save().await
        {
            return Some(self.failed(em, e).await);
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
            let outcome = match self.structurer.clone() {
                Some(model) => self.structure(em, &output, model).await,
                None => {
                    let text = self
                        .state
                        .steps
                        .last()
                        .map(|s| s.text.clone())
                        .unwrap_or_default();
                    structured::resolve(&output, &text, last_reason)
                }
            };
            match outcome {
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
        match self.process_output_result().await {
            Ok(()) => {}
            Err(Halt::Tripped(trip)) => return self.tripped(em, trip, false).await,
            Err(Halt::Failed(failure)) => return self.failed_noting(em, failure).await,
        }
        if let Err(e) = self.save_and_end(em, RunEnd::Model(last_reason)).await {
            return self.failed_unsaved(em, e).await;
        }
        if self.state.title_pending {
            self.generate_title(em).await;
        }
        let mut result = self.result(RunEnd::Model(last_reason));
        result.completion = self.completion.take();
        result.object = object;
        result.used_fallback_value = used_fallback;
        self.score_run(&mut result).await;
        self.outcome(result, None)
    }

    /// Saves what exists so far and hands back the state to store until the decisions come.
    async fn suspend(&mut self, em: &mut Emitter, open: OpenStep) -> RunOutcome {
        self.state.open_step = Some(open);
        if let Err(e) = self.save_and_end(em, RunEnd::Suspended).await {
            self.state.open_step = None;
            return self.failed_unsaved(em, e).await;
        }
        self.outcome(self.result(RunEnd::Suspended), Some(self.state.clone()))
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
        self.outcome(self.result(RunEnd::Aborted), None)
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
        self.outcome(result, None)
    }

    /// `hook_error` chunks for the hook failures since the last call.
    async fn emit_hook_notes(&mut self, em: &mut Emitter) {
        let Some(hooks) = &self.hooks else {
            return;
        };
        for note in hooks.take_notes() {
            em.emit(Event::HookError(note)).await;
        }
    }

    /// After a step's tool calls: their hooks' failures reported, and the run failed when a
    /// FAIL policy applied to one of them.
    async fn after_tool_hooks(&mut self, em: &mut Emitter) -> Option<RunOutcome> {
        self.emit_hook_notes(em).await;
        let failure = self.take_hook_fatal()?;
        Some(self.failed(em, failure).await)
    }

    /// Fails the run after reporting the hook failures that led to it.
    async fn failed_noting(&mut self, em: &mut Emitter, failure: RunFailure) -> RunOutcome {
        self.emit_hook_notes(em).await;
        self.failed(em, failure).await
    }

    fn result(&self, end: RunEnd) -> RunResult {
        RunResult::of(&self.run_id, &self.state, end)
    }

    fn outcome(&self, result: RunResult, suspended: Option<RunState>) -> RunOutcome {
        RunOutcome {
            result,
            suspended,
            answered_runs: self.state.answered_runs.clone(),
            ended: self.ended,
        }
    }
}
