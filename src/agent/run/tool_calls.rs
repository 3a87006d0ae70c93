//! A step's tool calls: which tools are offered, which calls wait for a decision (approval or
//! a client tool), and running the rest concurrently, in call order, with their chunks (a
//! delegation's sub-agent chunks as they come); a delegation whose sub-agent waits for
//! decisions makes the step wait for it.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::Instrument;

use super::hooks::BeforeTool;
use super::{Runner, ToolPhase};
use crate::agent::AgentDef;
use crate::agent::auto_resume;
use crate::agent::emit::Emitter;
use crate::agent::event::Event;
use crate::agent::message::{Message, Part, Role};
use crate::agent::request::RunRequest;
use crate::agent::state::{
    CallRecord, Decision, OpenStep, PendingCall, PendingKind, ResultRecord, StepRecord,
};
use crate::agent::structured;
use crate::agent::tools::{ToolKind, ToolOutput, ToolSpec, unknown_tool_text};
use crate::model::ToolDefinition;
use crate::telemetry;

/// Tool calls of one step running at once when nothing says otherwise and no call can need an
/// approval (the reference's default).
const DEFAULT_TOOL_CONCURRENCY: usize = 10;

type CallFuture<'a> = Pin<Box<dyn Future<Output = Resolved> + Send + 'a>>;

/// What settling one call gave.
// One per call, moved straight into the step: boxing the common variant would only add an
// allocation.
#[allow(clippy::large_enum_variant)]
enum Resolved {
    /// Its result; `Some(reason)` when it was declined.
    Result(ResultRecord, Option<String>),
    /// A delegation whose sub-agent's run waits for decisions: the step suspends on it.
    Waiting(PendingCall),
}

/// The tools offered to the model: the agent's and the request's client tools, filtered by
/// `active_tools`.
pub fn offered_tools(agent: &AgentDef, request: &RunRequest) -> Vec<ToolSpec> {
    let client = request.client_tools.iter().map(|t| ToolSpec {
        def: Arc::new(ToolDefinition::new(
            t.name.clone(),
            t.description.clone(),
            t.parameters.clone(),
        )),
        require_approval: false,
        resume_schema: t.resume_schema.clone(),
        kind: ToolKind::Client,
    });
    // The working-memory tool follows the agent's own, as the reference adds memory's tools.
    let working = request
        .memory
        .as_ref()
        .filter(|m| !m.read_only)
        .and_then(|_| agent.run_working_memory(request))
        .map(crate::agent::tools::working_memory_tool);
    agent
        .tools()
        .iter()
        .cloned()
        .chain(working)
        .chain(client)
        .chain(agent.sub_agents.iter().cloned())
        .filter(|t| request.active_tools.is_empty() || request.active_tools.contains(&t.def.name))
        .collect()
}

impl Runner {
    /// Runs the step's tool calls, or suspends when some need a decision.
    pub(super) async fn run_tools(&mut self, em: &mut Emitter, mut step: StepRecord) -> ToolPhase {
        if step.tool_calls.is_empty() {
            return ToolPhase::Done(step);
        }
        let done = self.take_answers(&mut step);
        let pending: Vec<PendingCall> = step
            .tool_calls
            .iter()
            .filter_map(|call| {
                self.decision_needed(call, &done).map(|kind| PendingCall {
                    call: call.clone(),
                    kind,
                    decision: None,
                    sub_run_id: None,
                    resume_schema: self
                        .offered
                        .iter()
                        .find(|t| t.def.name == call.name)
                        .and_then(|t| t.resume_schema.clone()),
                })
            })
            .collect();
        let open = OpenStep {
            step,
            done,
            pending,
            announced: Vec::new(),
        };
        if open.pending.is_empty() {
            // Durable before any call has effects outside agentd: a takeover runs this step's
            // calls again under the same ids rather than asking the model for new ones. Steps
            // of task tools only (the store's own, replaced whole by a re-run) skip it, unless
            // messages are saved per step (a re-run from an earlier point would save twice).
            if let Some(checkpoint) = &self.checkpoint
                && (self.state.request.save_per_step || self.has_outside_effects(&open.step))
            {
                let mut state = self.state.clone();
                state.open_step = Some(open.clone());
                checkpoint.save(&state, em.sequence()).await;
            }
            return self.settle(em, open).await;
        }
        for p in &open.pending {
            let event = match p.kind {
                PendingKind::Approval => Event::ApprovalRequested(p.clone()),
                PendingKind::ClientTool | PendingKind::SubAgent => Event::Suspended(p.clone()),
            };
            em.emit(event).await;
        }
        ToolPhase::Suspend(open)
    }

    /// Whether a call of `step` reaches outside agentd's store (HTTP, MCP, an unknown tool:
    /// anything but the task tools and working memory).
    fn has_outside_effects(&self, step: &StepRecord) -> bool {
        step.tool_calls.iter().any(|call| {
            !self.offered.iter().any(|t| {
                t.def.name == call.name
                    && matches!(t.kind, ToolKind::Task(_) | ToolKind::WorkingMemory(_))
            })
        })
    }

    /// With auto-resume: strips the resume arguments from the step's calls and turns each call
    /// that answers a waiting call of an earlier run into its result (the answer, when it
    /// matches the resume schema; else an error the model reads).
    fn take_answers(&mut self, step: &mut StepRecord) -> Vec<ResultRecord> {
        if self.state.suspended_tools.is_empty() {
            return Vec::new();
        }
        let mut done = Vec::new();
        for call in &mut step.tool_calls {
            let (args, answer) = auto_resume::take_answer(call, &self.state.suspended_tools);
            call.args = args;
            let Some((waiting, data)) = answer else {
                continue;
            };
            let invalid = structured::compile(&waiting.resume_schema)
                .ok()
                .and_then(|v| v.validate(&data).err().map(|e| e.to_string()));
            let (result, is_error) = match invalid {
                None => {
                    self.state.answered_runs.push(waiting.run_id.clone());
                    (data, false)
                }
                Some(why) => (
                    Value::String(format!(
                        "resumeData for tool \"{}\" does not match its resumeSchema: {why}",
                        call.name
                    )),
                    true,
                ),
            };
            done.push(ResultRecord::of(call, result, is_error));
        }
        // The suffix stays for the rest of the run, as the reference keeps it for the turn.
        done
    }

    /// What a call must wait for, if anything.
    fn decision_needed(&self, call: &CallRecord, done: &[ResultRecord]) -> Option<PendingKind> {
        if call.args_error.is_some() || done.iter().any(|r| r.id == call.id) {
            return None;
        }
        let spec = self.offered.iter().find(|t| t.def.name == call.name)?;
        if matches!(spec.kind, ToolKind::Client) {
            Some(PendingKind::ClientTool)
        } else if self.state.request.require_tool_approval || spec.require_approval {
            Some(PendingKind::Approval)
        } else {
            None
        }
    }

    /// Produces every result of an open step whose decisions are all made, in call order:
    /// runs approved and ordinary calls, turns declines and client results into results, and
    /// emits their chunks.
    pub(super) async fn settle(&mut self, em: &mut Emitter, open: OpenStep) -> ToolPhase {
        let OpenStep {
            mut step,
            pending,
            done,
            announced,
        } = open;
        let concurrency = self.concurrency();
        let decisions: HashMap<&str, &PendingCall> =
            pending.iter().map(|p| (p.call.id.as_str(), p)).collect();
        let calls = step.tool_calls.clone();
        // Sub-agents' chunks, streamed while their delegation calls run (only a supervisor
        // pays for the channel).
        let (outputs, mut streamed) = if self.agent.sub_agents.is_empty() {
            (None, None)
        } else {
            let (tx, rx) = mpsc::unbounded_channel();
            (Some(tx), Some(rx))
        };
        // Boxed so the stream's type does not carry the closure's lifetimes (keeps it Send).
        let jobs: Vec<CallFuture<'_>> = calls
            .iter()
            .map(|call| {
                if let Some(known) = done.iter().find(|r| r.id == call.id) {
                    let known = known.clone();
                    return Box::pin(async move { Resolved::Result(known, None) })
                        as CallFuture<'_>;
                }
                let decision = decisions
                    .get(call.id.as_str())
                    .and_then(|p| p.decision.clone());
                Box::pin(self.resolve_call(call, decision, outputs.clone())) as CallFuture<'_>
            })
            .collect();
        drop(outputs);
        let mut waiting: Vec<PendingCall> = Vec::new();
        let mut results = futures::stream::iter(jobs).buffered(concurrency);
        loop {
            let sub_agent_chunk = async {
                match &mut streamed {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            };
            let next = tokio::select! {
                biased;
                () = self.cancel.cancelled() => None,
                Some(output) = sub_agent_chunk => {
                    em.emit(output).await;
                    continue;
                }
                next = results.next() => next,
            };
            let Some(resolved) = next else {
                break;
            };
            // A finished delegation's last chunks come before its result.
            while let Some(output) = streamed.as_mut().and_then(|rx| rx.try_recv().ok()) {
                em.emit(output).await;
            }
            let (record, denied) = match resolved {
                Resolved::Result(record, denied) => (record, denied),
                Resolved::Waiting(pending) => {
                    waiting.push(pending);
                    continue;
                }
            };
            if announced.contains(&record.id) {
                step.tool_results.push(record);
                continue;
            }
            let event = match denied {
                Some(reason) => Event::ToolDenied {
                    record: record.clone(),
                    reason,
                },
                None if !record.is_output() => Event::ToolError(record.clone()),
                None => Event::ToolResult(record.clone()),
            };
            em.emit(event).await;
            step.tool_results.push(record);
        }
        drop(results);
        if self.cancel.is_cancelled() {
            return ToolPhase::Aborted;
        }
        if !waiting.is_empty() {
            // Sub-agents wait for decisions: the step waits for them, keeping what the other
            // calls gave (streamed already).
            for p in &waiting {
                em.emit(Event::Suspended(p.clone())).await;
            }
            let done = std::mem::take(&mut step.tool_results);
            let announced = done.iter().map(|r| r.id.clone()).collect();
            return ToolPhase::Suspend(OpenStep {
                step,
                done,
                pending: waiting,
                announced,
            });
        }
        ToolPhase::Done(step)
    }

    /// One call's result (with the reason when it was declined), or the sub-run it waits for.
    async fn resolve_call(
        &self,
        call: &CallRecord,
        decision: Option<Decision>,
        outputs: Option<mpsc::UnboundedSender<Event>>,
    ) -> Resolved {
        let record = |result: Value, is_error: bool| ResultRecord::of(call, result, is_error);
        let spec = self.offered.iter().find(|t| t.def.name == call.name);
        match decision {
            Some(Decision::Declined(reason)) => {
                return Resolved::Result(record(Value::String(reason.clone()), true), Some(reason));
            }
            Some(Decision::Resumed(data)) => return Resolved::Result(record(data, false), None),
            Some(Decision::Delegated(end)) => {
                let Some(ToolKind::SubAgent(sub)) = spec.map(|s| &s.kind) else {
                    let text = format!("Tool \"{}\" is no longer a sub-agent", call.name);
                    return Resolved::Result(record(Value::String(text), true), None);
                };
                let delegated = self.resume_delegation(call, sub, end).await;
                return delegated_result(call, delegated);
            }
            Some(Decision::Approved) | None => {}
        }
        if let Some(error) = &call.args_error {
            return Resolved::Result(record(Value::String(error.clone()), true), None);
        }
        let Some(spec) = spec else {
            let names: Vec<&str> = self.offered.iter().map(|t| t.name()).collect();
            return Resolved::Result(
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
        let mut model_output = None;
        let output = match self.before_tool(call).instrument(span.clone()).await {
            BeforeTool::Skip(output) => Ok(output),
            BeforeTool::Proceed => {
                let output = match &spec.kind {
                    ToolKind::SubAgent(sub) => {
                        let delegated = self
                            .delegate(call, sub, outputs.as_ref())
                            .instrument(span.clone())
                            .await;
                        if let Some(sub_run) = delegated.waiting_on {
                            return Resolved::Waiting(PendingCall::on_sub_run(call, sub_run));
                        }
                        model_output = delegated.model_output;
                        delegated.output
                    }
                    _ => {
                        spec.execute(&self.env, &call.id, &call.args, &self.cancel)
                            .instrument(span.clone())
                            .await
                    }
                };
                let before = model_output.is_some().then(|| output.clone());
                let after = self.after_tool(call, output).instrument(span.clone()).await;
                // A hook that replaced a sub-agent's result replaced what the model reads too.
                if before.is_some_and(|b| b != after) {
                    model_output = None;
                }
                after
            }
        };
        // Client-defined names would make metric labels unbounded.
        let label = match spec.kind {
            ToolKind::Http(_)
            | ToolKind::Task(_)
            | ToolKind::Mcp(_)
            | ToolKind::WorkingMemory(_)
            | ToolKind::SubAgent(_) => call.name.as_str(),
            ToolKind::Client => "client",
        };
        telemetry::metrics().tool_call(label, started.elapsed(), output.is_err());
        match &output {
            Ok(out) => self.record_io().output(
                &span,
                telemetry::GEN_AI_TOOL_CALL_RESULT,
                &out.result.to_string(),
            ),
            Err(error) => telemetry::record_error(&span, error),
        }
        Resolved::Result(output_record(call, output, model_output), None)
    }

    pub(super) fn record_io(&self) -> telemetry::RecordIo {
        telemetry::RecordIo {
            inputs: self.state.request.tracing.record_inputs,
            outputs: self.state.request.tracing.record_outputs,
        }
    }

    /// Calls of one step running at once, as the reference: 1 whenever a call of the run
    /// may wait for a decision (approval required by the request or any offered tool, or a
    /// client tool offered), even if that tool is not called in this step; else the request's
    /// (or the agent's default) value, else 10.
    fn concurrency(&self) -> usize {
        let decisions_possible = self.state.request.require_tool_approval
            || self
                .offered
                .iter()
                .any(|t| t.require_approval || matches!(t.kind, ToolKind::Client));
        if decisions_possible {
            return 1;
        }
        self.state
            .request
            .tool_call_concurrency
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| *n > 0)
            .unwrap_or(DEFAULT_TOOL_CONCURRENCY)
    }
}

/// A continued delegation's result.
fn delegated_result(call: &CallRecord, delegated: super::delegation::Delegated) -> Resolved {
    match delegated.waiting_on {
        Some(sub_run) => Resolved::Waiting(PendingCall::on_sub_run(call, sub_run)),
        None => Resolved::Result(
            output_record(call, delegated.output, delegated.model_output),
            None,
        ),
    }
}

/// The result of `call` from its tool's output (an `Err` is the error text the model reads),
/// with what the model reads instead when that differs.
fn output_record(
    call: &CallRecord,
    output: Result<ToolOutput, String>,
    model_output: Option<String>,
) -> ResultRecord {
    match output {
        Ok(ToolOutput { result, is_error }) => ResultRecord {
            model_output,
            ..ResultRecord::of(call, result, is_error)
        },
        Err(error) => ResultRecord::of(call, Value::String(error), true),
    }
}

/// The tool message carrying a step's results.
pub(super) fn tool_message(results: &[ResultRecord]) -> Message {
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
                model_output: r.model_output.clone(),
            })
            .collect(),
    )
}
