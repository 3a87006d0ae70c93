//! The hook-answering streams (`AgentService.GenerateWithHooks`,
//! `ApprovalService.ContinueWithHooks`): the client's declared hooks, its answers fed to the
//! run by id, and one outgoing stream of chunks, hook calls and rejected answers.

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use tonic::Status;

use super::error::Violations;
use crate::agent::hooks::{ClientBinding, ClientHooks};
use crate::agent::runtime;
use crate::config::OnHookFailure;
use crate::pb;
use crate::pb::hooked_run_event::Event;

/// A hook-answering RPC's response stream.
pub(crate) type HookedStream =
    Pin<Box<dyn Stream<Item = Result<pb::HookedRunEvent, Status>> + Send>>;

/// Rejections buffered towards one client.
const REJECTION_BUFFER: usize = 16;

/// What a client sent after its first message.
pub(crate) enum Inbound {
    /// An answer.
    Answer(pb::HookAnswer),
    /// A second `start`.
    Start,
    /// A message with nothing set.
    Empty,
}

/// The status for a stream whose first message is not `start`.
pub(crate) fn start_missing() -> Status {
    let mut v = Violations::default();
    v.add("start", "the first message must be start");
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
    })
}

/// The response stream: the run's chunks (first, whenever both are ready, so a hook call
/// follows the chunks emitted before it), its hook calls and the rejected answers; it ends
/// with the run. The client's messages are read meanwhile; when they end, the client is gone
/// and its waiting hooks fail at once.
pub(crate) fn hooked<S>(
    chunks: runtime::ChunkStream,
    client: Arc<ClientHooks>,
    calls: mpsc::Receiver<pb::HookCall>,
    answers: S,
) -> HookedStream
where
    S: Stream<Item = Result<Inbound, Status>> + Send + Unpin + 'static,
{
    let (rejections, rejected) = mpsc::channel(REJECTION_BUFFER);
    tokio::spawn(read_answers(answers, client.clone(), rejections));
    let state = (chunks, calls, rejected, client);
    futures::stream::unfold(
        state,
        |(mut chunks, mut calls, mut rejected, client)| async move {
            let event = tokio::select! {
                biased;
                chunk = chunks.next() => match chunk {
                    None => {
                        client.close();
                        return None;
                    }
                    Some(chunk) => chunk.map(Event::Chunk).map_err(Status::from),
                },
                Some(call) = calls.recv() => Ok(Event::HookCall(call)),
                Some(rejection) = rejected.recv() => Ok(Event::AnswerRejected(rejection)),
            };
            let event = event.map(|e| pb::HookedRunEvent { event: Some(e) });
            Some((event, (chunks, calls, rejected, client)))
        },
    )
    .boxed()
}

/// Feeds the client's answers to the run; a refused answer is reported back, never fatal.
async fn read_answers<S>(
    mut answers: S,
    client: Arc<ClientHooks>,
    rejections: mpsc::Sender<pb::HookAnswerRejected>,
) where
    S: Stream<Item = Result<Inbound, Status>> + Send + Unpin,
{
    while let Some(Ok(message)) = answers.next().await {
        let (id, refused) = match message {
            Inbound::Answer(answer) => {
                let id = answer.id.clone();
                (id, client.answer(answer).err())
            }
            Inbound::Start => (
                String::new(),
                Some("start may only be the first message".to_owned()),
            ),
            Inbound::Empty => (
                String::new(),
                Some("the message sets neither start nor answer".to_owned()),
            ),
        };
        if let Some(reason) = refused
            && rejections
                .send(pb::HookAnswerRejected { id, reason })
                .await
                .is_err()
        {
            break;
        }
    }
    client.close();
}
