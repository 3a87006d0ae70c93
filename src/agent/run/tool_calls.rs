//! A step's tool calls: which tools are offered, which calls wait for a decision (approval or
//! a client tool), and running the rest concurrently, in call order, with their chunks.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use futures::StreamExt;
use serde_json::Value;
use tracing::Instrument;

use super::{Runner, ToolPhase};
use crate::agent::AgentDef;
use crate::agent::emit::Emitter;
use crate::agent::event::Event;
use crate::agent::message::{Message, Part, Role};
use crate::agent::request::RunRequest;
use crate::agent::state::{
    CallRecord, Decision, OpenStep, PendingCall, PendingKind, ResultRecord, StepRecord,
};
use crate::agent::tools::{ToolKind, ToolOutput, ToolSpec, unknown_tool_text};
use crate::telemetry;

/// Tool calls of one step running at once when nothing says otherwise and no call can need an
/// approval (the reference's default).
const DEFAULT_TOOL_CONCURRENCY: usize = 10;

type CallFuture<'a> = Pin<Box<dyn Future<Output = (ResultRecord, Option<String>)> + Send + 'a>>;

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

impl Runner {
    /// Runs the step's tool calls, or suspends when some need a decision.
    pub(super) async fn run_tools(&mut self, em: &mut Emitter, step: StepRecord) -> ToolPhase {
        if step.tool_calls.is_empty() {
            return ToolPhase::Done(step);
        }
        let pending: Vec<PendingCall> = step
            .tool_calls
            .iter()
            .filter_map(|call| {
                self.decision_needed(call).map(|kind| PendingCall {
                    call: call.clone(),
                    kind,
                    decision: None,
                })
            })
            .collect();
        let open = OpenStep {
            step,
            done: Vec::new(),
            pending,
        };
        if open.pending.is_empty() {
            return self.settle(em, open).await;
        }
        for p in &open.pending {
            let event = match p.kind {
                PendingKind::Approval => Event::ApprovalRequested(p.clone()),
                PendingKind::ClientTool => Event::Suspended(p.clone()),
            };
            em.emit(event).await;
        }
        ToolPhase::Suspend(open)
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
    /// runs approved and ordinary calls, turns declines and client results into results, and
    /// emits their chunks.
    pub(super) async fn settle(&mut self, em: &mut Emitter, open: OpenStep) -> ToolPhase {
        let OpenStep {
            mut step, pending, ..
        } = open;
        let concurrency = self.concurrency();
        let decisions: HashMap<&str, &PendingCall> =
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

    pub(super) fn record_io(&self) -> telemetry::RecordIo {
        telemetry::RecordIo {
            inputs: self.state.request.tracing.record_inputs,
            outputs: self.state.request.tracing.record_outputs,
        }
    }

    /// Calls of one step running at once: the request's (or the agent's default) value, else
    /// 1 whenever an approval may be needed in the run, else 10, as the reference.
    fn concurrency(&self) -> usize {
        let approvals_possible = self.state.request.require_tool_approval
            || self.offered.iter().any(|t| t.require_approval);
        match self.state.request.tool_call_concurrency {
            Some(n) => usize::try_from(n.max(1)).unwrap_or(1),
            None if approvals_possible => 1,
            None => DEFAULT_TOOL_CONCURRENCY,
        }
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
            })
            .collect(),
    )
}
