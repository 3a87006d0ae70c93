//! The hook-answering streams (`AgentService.GenerateWithHooks`,
//! `ApprovalService.ContinueWithHooks`): the client's declared hooks, its answers fed to the
//! run by id, and one outgoing stream of chunks, hook calls and rejected answers.

use std::pin::Pin;
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use tonic::{Code, Status, Streaming};
use tonic_types::StatusExt;

use super::error::Violations;
use crate::agent::hooks::{ClientBinding, ClientHooks};
use crate::agent::runtime;
use crate::config::OnHookFailure;
use crate::pb;
use crate::pb::hooked_run_event::Event;
use crate::telemetry;

/// A hook-answering RPC's response stream.
pub(crate) type HookedStream =
    Pin<Box<dyn Stream<Item = Result<pb::HookedRunEvent, Status>> + Send>>;

/// A client message of a hook-answering RPC, whose `start` is `S`.
pub(crate) enum Inbound<S> {
    /// The run (or decision) and its hooks: only the first message.
    Start(S),
    /// An answer.
    Answer(pb::HookAnswer),
    /// A message with nothing set.
    Empty,
}

impl From<pb::GenerateWithHooksRequest> for Inbound<pb::HookedGenerate> {
    fn from(m: pb::GenerateWithHooksRequest) -> Self {
        use pb::generate_with_hooks_request::Message;
        match m.message {
            Some(Message::Start(s)) => Self::Start(s),
            Some(Message::Answer(a)) => Self::Answer(a),
            None => Self::Empty,
        }
    }
}

impl From<pb::ContinueWithHooksRequest> for Inbound<pb::HookedContinue> {
    fn from(m: pb::ContinueWithHooksRequest) -> Self {
        use pb::continue_with_hooks_request::Message;
        match m.message {
            Some(Message::Start(s)) => Self::Start(s),
            Some(Message::Answer(a)) => Self::Answer(a),
            None => Self::Empty,
        }
    }
}

/// The stream's first message, which must be `start` (else INVALID_ARGUMENT naming it).
pub(crate) async fn start<R, S>(inbound: &mut Streaming<R>) -> Result<S, Status>
where
    R: Into<Inbound<S>>,
{
    first(inbound.message().await?)
}

/// The stream's first message (`None`: the stream ended first), which must be `start`.
pub(crate) fn first<R, S>(message: Option<R>) -> Result<S, Status>
where
    R: Into<Inbound<S>>,
{
    match message.map(Into::into) {
        Some(Inbound::Start(start)) => Ok(start),
        _ => {
            let mut v = Violations::default();
            v.add("start", "the first message must be start");
            Err(v.into_status())
        }
    }
}

/// The metadata keys a trace violation may name: not fields of a message.
const TRACE_HEADERS: [&str; 4] = [
    telemetry::X_TRACE_ID,
    telemetry::X_PARENT_SPAN_ID,
    telemetry::TRACEPARENT,
    telemetry::TRACESTATE,
];

/// A bad request inside `start` names its fields from the stream's message down (e.g.
/// `start.request.agent_id`, not `agent_id`); the call's trace headers stay as they are.
pub(crate) fn nested(status: Status, prefix: &str) -> Status {
    let Some(bad) = status
        .get_details_bad_request()
        .filter(|_| status.code() == Code::InvalidArgument)
    else {
        return status;
    };
    let mut v = Violations::default();
    for violation in bad.field_violations {
        let field = if TRACE_HEADERS.contains(&violation.field.as_str()) {
            violation.field
        } else {
            format!("{prefix}.{}", violation.field)
        };
        v.add(field, violation.description);
    }
    v.into_status()
}

/// The client's hook declaration, checked: known kinds, each once, a positive deadline.
pub(crate) fn binding(options: Option<&pb::HookOptions>) -> Result<ClientBinding, Status> {
    let Some(options) = options else {
        return Ok(ClientBinding::default());
    };
    let mut v = Violations::default();
    let mut kinds = Vec::new();
    for (i, kind) in options.kinds.iter().enumerate() {
        match pb::HookKind::try_from(*kind) {
            Ok(pb::HookKind::Unspecified) | Err(_) => {
                v.add(format!("start.hooks.kinds.{i}"), "unknown hook kind");
            }
            Ok(_) if kinds.contains(kind) => {
                v.add(format!("start.hooks.kinds.{i}"), "named twice");
            }
            Ok(_) => kinds.push(*kind),
        }
    }
    if options.deadline_ms == Some(0) {
        v.add("start.hooks.deadline_ms", "must be > 0");
    }
    let policy = match pb::HookFailurePolicy::try_from(options.on_failure) {
        Ok(pb::HookFailurePolicy::Continue) => OnHookFailure::Continue,
        Ok(_) => OnHookFailure::Fail,
        Err(_) => {
            v.add("start.hooks.on_failure", "unknown policy");
            OnHookFailure::Fail
        }
    };
    v.into_result()?;
    Ok(ClientBinding {
        kinds,
        deadline_ms: options.deadline_ms.map(u64::from),
        policy,
        omit_messages: options.omit_messages,
    })
}

/// The response stream: the run's chunks (first, whenever both are ready, so a hook call
/// follows the chunks emitted before it), its hook calls and the rejected answers; it ends
/// with the run. The client's messages are read by the same task that writes the stream (no
/// hand-off per answer); when they end, the client is gone and its waiting hooks fail at once.
pub(crate) fn hooked<R, S>(
    chunks: runtime::ChunkStream,
    client: Arc<ClientHooks>,
    calls: mpsc::Receiver<pb::HookCall>,
    inbound: Streaming<R>,
) -> HookedStream
where
    R: Into<Inbound<S>> + Send + 'static,
    S: 'static,
{
    // A later `start` is only refused: what it carried does not matter.
    let answers = inbound
        .map(|m| {
            m.map(|m| match m.into() {
                Inbound::Start(_) => Inbound::Start(()),
                Inbound::Answer(a) => Inbound::Answer(a),
                Inbound::Empty => Inbound::Empty,
            })
        })
        .boxed();
    let state = Merge {
        chunks,
        calls,
        answers: Some(answers),
        client,
    };
    futures::stream::unfold(state, |mut m| async move {
        loop {
            let event = tokio::select! {
                biased;
                chunk = m.chunks.next() => match chunk {
                    None => {
                        m.client.close();
                        return None;
                    }
                    Some(chunk) => chunk
                        .and_then(|chunk| chunk.decode())
                        .map(Event::Chunk)
                        .map_err(Status::from),
                },
                Some(call) = m.calls.recv() => Ok(Event::HookCall(call)),
                message = next_answer(&mut m.answers) => match m.take(message) {
                    Some(rejection) => Ok(Event::AnswerRejected(rejection)),
                    None => continue,
                },
            };
            let event = event.map(|e| pb::HookedRunEvent { event: Some(e) });
            return Some((event, m));
        }
    })
    .boxed()
}

/// The client's messages after its first.
type Answers = BoxStream<'static, Result<Inbound<()>, Status>>;

/// What the response stream reads from.
struct Merge {
    chunks: runtime::ChunkStream,
    calls: mpsc::Receiver<pb::HookCall>,
    /// `None` once the client's messages ended.
    answers: Option<Answers>,
    client: Arc<ClientHooks>,
}

impl Merge {
    /// Feeds one client message to the run; `Some` when it was refused (reported back, never
    /// fatal). The end of the client's messages closes its hooks.
    fn take(
        &mut self,
        message: Option<Result<Inbound<()>, Status>>,
    ) -> Option<pb::HookAnswerRejected> {
        let refused = |id: String, reason: &str| {
            Some(pb::HookAnswerRejected {
                id,
                reason: reason.to_owned(),
            })
        };
        match message {
            Some(Ok(Inbound::Answer(answer))) => {
                let id = answer.id.clone();
                self.client
                    .answer(answer)
                    .err()
                    .map(|reason| pb::HookAnswerRejected { id, reason })
            }
            Some(Ok(Inbound::Start(()))) => {
                refused(String::new(), "start may only be the first message")
            }
            Some(Ok(Inbound::Empty)) => {
                refused(String::new(), "the message sets neither start nor answer")
            }
            Some(Err(status)) => {
                // An unreadable message ends the client's side; say why before its hooks fail.
                self.answers = None;
                self.client.close();
                refused(
                    String::new(),
                    &format!(
                        "a message could not be read ({}); no more answers are taken",
                        status.message()
                    ),
                )
            }
            None => {
                self.answers = None;
                self.client.close();
                None
            }
        }
    }
}

/// The next client message; pending forever once they ended.
async fn next_answer(answers: &mut Option<Answers>) -> Option<Result<Inbound<()>, Status>> {
    match answers {
        Some(stream) => stream.next().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(status: &Status) -> Vec<String> {
        let bad = status.get_details_bad_request().unwrap();
        bad.field_violations.into_iter().map(|v| v.field).collect()
    }

    #[test]
    fn nested_prefixes_fields_but_not_trace_headers() {
        let mut v = Violations::default();
        v.add("agent_id", "must not be empty");
        v.add(telemetry::TRACEPARENT, "malformed");
        let status = nested(v.into_status(), "start.request");
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(fields(&status), ["start.request.agent_id", "traceparent"]);
        assert_eq!(
            status.message(),
            "start.request.agent_id: must not be empty; traceparent: malformed"
        );
    }

    #[test]
    fn nested_leaves_other_statuses_alone() {
        let status = nested(Status::not_found("no run"), "start.approve");
        assert_eq!(status.code(), Code::NotFound);
        assert_eq!(status.message(), "no run");
    }
}
