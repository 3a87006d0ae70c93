//! Conversions between the agent's domain types and the wire types of `agentd.v1`: every chunk
//! a run emits is built here from its [`Event`] (chunks are also what the run log stores and
//! Observe replays, so this lives beside the agent rather than in `api`).

use prost_types::Timestamp;
use serde_json::Value;

use super::decision;
use super::error::RunFailure;
use super::event::{Event, Producer};
use super::processors::Tripwire;
use super::record::RunRecord;
use super::result::{RunEnd, RunResult};
use super::state::{
    CallRecord, PendingCall, PendingKind, ResponseRecord, ResultRecord, StepRecord,
};
use crate::json::{to_proto_struct, to_proto_value};
use crate::model::{FinishReason, Usage};
use crate::pb;
use crate::pb::chunk::Payload;

mod hooks;
mod messages;

pub use hooks::{completion_check, hook_error};
pub use messages::{message, message_from, tool_choice, tool_choice_from};

/// The wire chunk of a run's `sequence`-th event.
pub fn chunk(run_id: &str, sequence: u64, event: &Event) -> pb::Chunk {
    let from = match event.producer() {
        Producer::Agent => pb::ChunkFrom::Agent,
        Producer::System => pb::ChunkFrom::System,
        Producer::User => pb::ChunkFrom::User,
    };
    let metadata = match event {
        Event::StructuringObject(_) => {
            let mut map = serde_json::Map::new();
            map.insert("from".into(), Value::String("structured-output".into()));
            Some(to_proto_struct(&map))
        }
        _ => None,
    };
    pb::Chunk {
        run_id: run_id.to_owned(),
        sequence,
        from: from.into(),
        metadata,
        payload: Some(payload(event)),
    }
}

fn payload(event: &Event) -> Payload {
    let value = |v: &Value| Some(to_proto_value(v));
    match event {
        Event::Start {
            agent_id,
            thread_id,
            resource_id,
            parent,
        } => {
            let (parent_run_id, parent_tool_call_id) = parent.clone().unwrap_or_default();
            Payload::Start(pb::StartChunk {
                agent_id: agent_id.clone(),
                thread_id: thread_id.clone(),
                resource_id: resource_id.clone(),
                parent_run_id,
                parent_tool_call_id,
            })
        }
        Event::StepStart { index, message_id } => Payload::StepStart(pb::StepStartChunk {
            step_index: *index,
            message_id: message_id.clone(),
            warnings: Vec::new(),
        }),
        Event::TextStart(id) => Payload::TextStart(pb::TextStartChunk { id: id.clone() }),
        Event::TextDelta { id, text } => Payload::TextDelta(pb::TextDeltaChunk {
            id: id.clone(),
            text: text.clone(),
        }),
        Event::TextEnd(id) => Payload::TextEnd(pb::TextEndChunk { id: id.clone() }),
        Event::ReasoningStart(id) => {
            Payload::ReasoningStart(pb::ReasoningStartChunk { id: id.clone() })
        }
        Event::ReasoningDelta { id, text } => Payload::ReasoningDelta(pb::ReasoningDeltaChunk {
            id: id.clone(),
            text: text.clone(),
        }),
        Event::ReasoningEnd(id) => Payload::ReasoningEnd(pb::ReasoningEndChunk { id: id.clone() }),
        Event::Source(s) => Payload::Source(source(s)),
        Event::File(f) => Payload::File(file(f)),
        Event::ToolCallDelta {
            call_id,
            tool_name,
            delta,
        } => Payload::ToolCallDelta(pb::ToolCallDeltaChunk {
            tool_call_id: call_id.clone(),
            tool_name: tool_name.clone(),
            args_text_delta: delta.clone(),
        }),
        Event::ToolCall(c) => Payload::ToolCall(call(c)),
        Event::ApprovalRequested(p) => Payload::ToolCallApproval(suspension(p)),
        Event::Suspended(p) => Payload::ToolCallSuspended(suspension(p)),
        Event::ToolResult(r) => Payload::ToolResult(result(r)),
        Event::ToolError(r) => Payload::ToolError(pb::ToolErrorChunk {
            tool_call_id: r.id.clone(),
            tool_name: r.name.clone(),
            args: value(&r.args),
            error: super::message::tool_content(&r.result),
        }),
        Event::ToolDenied { record, reason } => {
            Payload::ToolOutputDenied(pb::ToolOutputDeniedChunk {
                tool_call_id: record.id.clone(),
                tool_name: record.name.clone(),
                args: value(&record.args),
                reason: reason.clone(),
            })
        }
        Event::StepFinish(s) => Payload::StepFinish(pb::StepFinishChunk {
            step_index: s.index,
            reason: finish_reason(s.finish_reason).into(),
            is_continued: s.is_continued,
            usage: Some(usage(s.usage)),
            warnings: s.warnings.clone(),
            response: Some(response(&s.response)),
            step: Some(step(s)),
        }),
        Event::Data { kind, data } => Payload::Data(pb::DataChunk {
            r#type: (*kind).to_owned(),
            data: value(data),
        }),
        Event::Object(o) | Event::StructuringObject(o) => {
            Payload::Object(pb::ObjectChunk { object: value(o) })
        }
        Event::ObjectResult {
            object,
            used_fallback,
        } => Payload::ObjectResult(pb::ObjectResultChunk {
            object: value(object),
            used_fallback_value: *used_fallback,
        }),
        Event::Raw(raw) => Payload::Raw(pb::RawChunk { raw: value(raw) }),
        Event::Abort(reason) => Payload::Abort(pb::AbortChunk {
            reason: reason.clone(),
        }),
        Event::Error(failure) => Payload::Error(pb::ErrorChunk {
            error: Some(run_error(failure)),
        }),
        Event::Finish(r) => Payload::Finish(generate_result(r)),
        Event::CompletionCheck(c) => Payload::IsTaskComplete(completion_check(c)),
        Event::HookError(n) => Payload::HookError(hook_error(n)),
        Event::Tripwire(t) => Payload::Tripwire(tripwire(t)),
        Event::ToolOutput {
            tool_call_id,
            tool_name,
            agent_id,
            chunk,
        } => Payload::ToolOutput(Box::new(pb::ToolOutputChunk {
            tool_call_id: tool_call_id.clone(),
            tool_name: tool_name.clone(),
            agent_id: agent_id.clone(),
            chunk: Some(chunk.clone()),
        })),
    }
}

/// The wire form of a run failure.
pub fn run_error(failure: &RunFailure) -> pb::RunError {
    pb::RunError {
        id: failure.id().to_owned(),
        message: failure.to_string(),
        category: failure.category().as_str().to_owned(),
    }
}

/// The wire finish reason of a run.
pub fn run_finish_reason(end: RunEnd) -> pb::FinishReason {
    match end {
        RunEnd::Model(reason) => finish_reason(reason),
        RunEnd::Suspended => pb::FinishReason::Suspended,
        RunEnd::Aborted => pb::FinishReason::Aborted,
        RunEnd::Failed => pb::FinishReason::Error,
        RunEnd::Tripwire => pb::FinishReason::Tripwire,
    }
}

/// The wire result of a run.
pub fn generate_result(r: &RunResult) -> pb::GenerateResult {
    let total = usage(r.usage);
    pb::GenerateResult {
        text: r.text.clone(),
        object: r.object.as_ref().map(to_proto_value),
        tool_calls: r.tool_calls.iter().map(call).collect(),
        tool_results: r.tool_results.iter().map(result).collect(),
        usage: Some(total),
        total_usage: Some(total),
        steps: r.steps.iter().map(step).collect(),
        finish_reason: run_finish_reason(r.end).into(),
        response: r.response.as_ref().map(response),
        warnings: r.warnings.clone(),
        provider_metadata: r.provider_metadata.as_ref().and_then(struct_of),
        reasoning_text: r.reasoning_text.clone(),
        suspend_payload: r.suspend_payload.as_ref().map(suspension),
        run_id: r.run_id.clone(),
        trace_id: r.trace_id.clone(),
        span_id: r.span_id.clone(),
        messages: r.messages.iter().map(message).collect(),
        remembered_messages: r.remembered_messages.iter().map(message).collect(),
        error: r.error.as_ref().map(run_error),
        tripwire: r.tripwire.as_ref().map(tripwire),
        used_fallback_value: r.used_fallback_value,
        sources: r.sources.iter().map(source).collect(),
        files: r.files.iter().map(file).collect(),
        completion_check: r.completion.as_ref().map(completion_check),
        scoring_data: r
            .scoring
            .as_ref()
            .and_then(|s| serde_json::to_value(&s.data).ok())
            .as_ref()
            .and_then(struct_of),
        scores: r
            .scoring
            .as_ref()
            .map(|s| s.scores.iter().map(score).collect())
            .unwrap_or_default(),
    }
}

/// The wire form of a stored score.
pub fn score(r: &super::scorers::ScoreRecord) -> pb::Score {
    pb::Score {
        id: r.id.clone(),
        scorer_key: r.scorer_key.clone(),
        scorer_id: r.scorer_id.clone(),
        scorer_name: r.scorer_name.clone(),
        run_id: r.run_id.clone(),
        agent_id: r.agent_id.clone(),
        thread_id: r.thread_id.clone(),
        resource_id: r.resource_id.clone(),
        score: r.score,
        reason: r.reason.clone(),
        preprocess_step_result: r.preprocess_step_result.as_ref().map(to_proto_value),
        analyze_step_result: r.analyze_step_result.as_ref().map(to_proto_value),
        prompts: r.prompts.clone().into_iter().collect(),
        source: "LIVE".into(),
        created_at: Some(timestamp(r.created_at_ms)),
    }
}

/// The wire form of a suspended run's undecided calls (`None` when it has none).
pub fn pending_run(record: &RunRecord) -> Option<pb::PendingRun> {
    let open = record.state.as_ref()?.open_step.as_ref()?;
    Some(pb::PendingRun {
        run_id: record.run_id.clone(),
        agent_id: record.agent_id.clone(),
        thread_id: record.thread_id.clone(),
        resource_id: record.resource_id.clone(),
        suspended_at: Some(timestamp(record.updated_at_ms)),
        expires_at: record.expires_at_ms.map(timestamp),
        pending: open
            .pending
            .iter()
            .filter(|p| p.decision.is_none())
            .map(suspension)
            .collect(),
    })
}

/// The wire form of a pending call.
pub fn suspension(p: &PendingCall) -> pb::ToolSuspension {
    let kind = match p.kind {
        PendingKind::Approval => pb::SuspensionKind::Approval,
        PendingKind::ClientTool => pb::SuspensionKind::ClientTool,
        PendingKind::SubAgent => pb::SuspensionKind::SubAgent,
    };
    pb::ToolSuspension {
        tool_call_id: p.call.id.clone(),
        tool_name: p.call.name.clone(),
        args: Some(to_proto_value(&p.call.args)),
        resume_schema: struct_of(&decision::resume_schema(p)),
        kind: kind.into(),
        sub_run_id: p.sub_run_id.clone().unwrap_or_default(),
    }
}

fn struct_of(value: &Value) -> Option<prost_types::Struct> {
    match value {
        Value::Object(map) => Some(to_proto_struct(map)),
        _ => None,
    }
}

fn source(s: &super::event::Source) -> pb::SourceChunk {
    pb::SourceChunk {
        id: s.id.clone(),
        source_type: s.source_type.clone(),
        url: s.url.clone(),
        title: s.title.clone(),
    }
}

fn file(f: &super::event::GeneratedFile) -> pb::FileChunk {
    pb::FileChunk {
        data: f.data.clone(),
        mime_type: f.mime_type.clone(),
    }
}

/// A wire finish reason.
pub fn finish_reason(reason: FinishReason) -> pb::FinishReason {
    match reason {
        FinishReason::Stop => pb::FinishReason::Stop,
        FinishReason::Length => pb::FinishReason::Length,
        FinishReason::ContentFilter => pb::FinishReason::ContentFilter,
        FinishReason::ToolCalls => pb::FinishReason::ToolCalls,
        FinishReason::Error => pb::FinishReason::Error,
        FinishReason::Other => pb::FinishReason::Other,
    }
}

/// A domain finish reason from the wire (`None` for the run-level ones such as SUSPENDED).
pub fn finish_reason_from(reason: pb::FinishReason) -> Option<FinishReason> {
    Some(match reason {
        pb::FinishReason::Stop => FinishReason::Stop,
        pb::FinishReason::Length => FinishReason::Length,
        pb::FinishReason::ContentFilter => FinishReason::ContentFilter,
        pb::FinishReason::ToolCalls => FinishReason::ToolCalls,
        pb::FinishReason::Error => FinishReason::Error,
        pb::FinishReason::Other => FinishReason::Other,
        _ => return None,
    })
}

/// A run finish reason's name for metrics, as the reference spells it.
pub fn run_finish_name(reason: pb::FinishReason) -> &'static str {
    match reason {
        pb::FinishReason::Unspecified => "unknown",
        pb::FinishReason::Stop => "stop",
        pb::FinishReason::Length => "length",
        pb::FinishReason::ContentFilter => "content-filter",
        pb::FinishReason::ToolCalls => "tool-calls",
        pb::FinishReason::Error => "error",
        pb::FinishReason::Other => "other",
        pb::FinishReason::Suspended => "suspended",
        pb::FinishReason::Tripwire => "tripwire",
        pb::FinishReason::Aborted => "aborted",
        pb::FinishReason::Retry => "retry",
    }
}

/// Wire usage.
pub fn usage(u: Usage) -> pb::Usage {
    let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    pb::Usage {
        input_tokens: n(u.input_tokens),
        output_tokens: n(u.output_tokens),
        total_tokens: n(u.total_tokens),
        reasoning_tokens: n(u.reasoning_tokens),
        cached_input_tokens: n(u.cached_input_tokens),
    }
}

/// A wire timestamp from Unix milliseconds.
pub fn timestamp(ms: i64) -> Timestamp {
    Timestamp {
        seconds: ms.div_euclid(1000),
        nanos: i32::try_from(ms.rem_euclid(1000) * 1_000_000).unwrap_or(0),
    }
}

/// Wire response metadata.
pub fn response(r: &ResponseRecord) -> pb::ResponseMetadata {
    pb::ResponseMetadata {
        id: r.id.clone(),
        model_id: r.model.clone(),
        timestamp: (r.timestamp_ms != 0).then(|| timestamp(r.timestamp_ms)),
        headers: r.headers.clone().into_iter().collect(),
    }
}

/// A wire tool call.
pub fn call(c: &CallRecord) -> pb::ToolCall {
    pb::ToolCall {
        tool_call_id: c.id.clone(),
        tool_name: c.name.clone(),
        args: Some(to_proto_value(&c.args)),
        provider_executed: false,
    }
}

/// A wire tool result.
pub fn result(r: &ResultRecord) -> pb::ToolResult {
    pb::ToolResult {
        tool_call_id: r.id.clone(),
        tool_name: r.name.clone(),
        args: Some(to_proto_value(&r.args)),
        result: Some(to_proto_value(&r.result)),
        is_error: r.is_error,
        model_output: r.model_output.clone(),
    }
}

/// A wire step.
pub fn step(s: &StepRecord) -> pb::StepResult {
    pb::StepResult {
        step_index: s.index,
        text: s.text.clone(),
        reasoning_text: s.reasoning.clone(),
        tool_calls: s.tool_calls.iter().map(call).collect(),
        tool_results: s.tool_results.iter().map(result).collect(),
        finish_reason: step_finish_reason(s).into(),
        usage: Some(usage(s.usage)),
        response: Some(response(&s.response)),
        warnings: s.warnings.clone(),
        is_continued: s.is_continued,
        tripwire: s.tripwire.as_ref().map(tripwire),
    }
}

/// A step's finish reason: RETRY for a step an output processor had redone, TRIPWIRE for the
/// one it rejected last, else the model's.
pub fn step_finish_reason(s: &StepRecord) -> pb::FinishReason {
    match &s.tripwire {
        Some(_) if s.is_continued => pb::FinishReason::Retry,
        Some(_) => pb::FinishReason::Tripwire,
        None => finish_reason(s.finish_reason),
    }
}

/// The wire form of a processor's abort.
pub fn tripwire(t: &Tripwire) -> pb::TripwireChunk {
    pb::TripwireChunk {
        reason: t.reason.clone(),
        retry: t.retry,
        metadata: t.metadata.as_deref().map(to_proto_struct),
        processor_id: t.processor_id.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_split_milliseconds() {
        let t = timestamp(1_700_000_000_123);
        assert_eq!((t.seconds, t.nanos), (1_700_000_000, 123_000_000));
    }
}
