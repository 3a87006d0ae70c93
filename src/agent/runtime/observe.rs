//! Re-attaching to a run from any replica (its log replayed, then followed live), and the
//! client's view of a run it started: when that client goes away with `on_disconnect = ABORT`,
//! the run stops.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::{Stream, StreamExt};

use super::{ChunkStream, LiveRuns, Runtime, WireChunk};
use crate::agent::error::RunError;
use crate::agent::request::OnDisconnect;
use crate::telemetry;

impl Runtime {
    /// Re-attaches to a run: replays its logged chunks after `after`, then follows it live.
    pub async fn observe(&self, run_id: &str, after: u64) -> Result<ChunkStream, RunError> {
        // Subscribe before reading so that nothing appended in between is missed.
        let live = self.deps.store.follow_chunks(run_id).await?;
        let backlog = self.deps.store.read_chunks(run_id, after).await?;
        if backlog.is_empty() && self.deps.store.get_run(run_id).await?.is_none() {
            return Err(RunError::NotFound(format!(
                "run {run_id:?} is unknown or expired"
            )));
        }
        let chunks = backlog
            .into_iter()
            .map(|(sequence, bytes)| WireChunk::from_log(sequence, bytes))
            .collect::<Result<Vec<_>, _>>()?;
        // The log ends where the run ended (or suspended); the last finish closes the stream.
        if chunks.last().is_some_and(|chunk| chunk.finish) {
            return Ok(futures::stream::iter(chunks.into_iter().map(Ok)).boxed());
        }
        let last = chunks.last().map_or(after, |c| c.sequence);
        let replay = futures::stream::iter(chunks.into_iter().map(Ok));
        // Follow live entries, skipping what the backlog had, and end right after `finish`.
        let follow = futures::stream::unfold(
            (live, last, false),
            |(mut live, mut last, done)| async move {
                if done {
                    return None;
                }
                loop {
                    match live.next().await? {
                        Ok((sequence, _)) if sequence <= last => {}
                        Ok((sequence, bytes)) => {
                            last = sequence;
                            let item = WireChunk::from_log(sequence, bytes);
                            let done = item.as_ref().map_or(true, |chunk| chunk.finish);
                            return Some((item, (live, last, done)));
                        }
                        Err(e) => return Some((Err(RunError::from(e)), (live, last, true))),
                    }
                }
            },
        );
        Ok(replay.chain(follow).boxed())
    }
}

/// A client's view of a run: when it goes away with `on_disconnect = ABORT`, the run stops;
/// when the run's execution goes away without `finish` (it panicked), the client is told so.
pub(super) struct ClientStream {
    pub(super) inner: futures::channel::mpsc::Receiver<Result<WireChunk, RunError>>,
    pub(super) _active: telemetry::ActiveStream,
    pub(super) on_disconnect: OnDisconnect,
    pub(super) live: Arc<LiveRuns>,
    pub(super) run_id: String,
    pub(super) finished: bool,
}

impl Stream for ClientStream {
    type Item = Result<WireChunk, RunError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = Pin::new(&mut self.inner).poll_next(cx);
        match &polled {
            Poll::Ready(Some(Ok(chunk))) if chunk.finish => self.finished = true,
            Poll::Ready(None) if !self.finished => {
                // Every execution ends with `finish` (a suspended one, or one handing its
                // client over, too): a stream closed before it is a run whose task unwound.
                self.finished = true;
                return Poll::Ready(Some(Err(RunError::Internal(format!(
                    "run {:?} stopped without finishing on this server (an internal error); \
                     its lease lapses and it is taken over: Observe it to follow it",
                    self.run_id
                )))));
            }
            _ => {}
        }
        polled
    }
}

impl Drop for ClientStream {
    fn drop(&mut self) {
        if self.finished || self.on_disconnect != OnDisconnect::Abort {
            return;
        }
        self.live.stop(&self.run_id, "The client disconnected");
    }
}

#[cfg(test)]
mod tests {
    use futures::SinkExt;
    use futures::channel::mpsc;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::agent::emit::ClientSender;
    use crate::pb;

    fn client_stream(
        on_disconnect: OnDisconnect,
    ) -> (ClientStream, ClientSender, Arc<LiveRuns>, CancellationToken) {
        let (tx, rx) = mpsc::channel(8);
        let live = Arc::new(LiveRuns::default());
        let cancel = CancellationToken::new();
        // Listed for the whole test: the guard is leaked on purpose.
        std::mem::forget(live.register("run-1", cancel.clone()));
        let stream = ClientStream {
            inner: rx,
            _active: telemetry::metrics().stream_opened(),
            on_disconnect,
            live: live.clone(),
            run_id: "run-1".into(),
            finished: false,
        };
        (stream, tx, live, cancel)
    }

    fn chunk(sequence: u64, payload: pb::chunk::Payload) -> WireChunk {
        let chunk = pb::Chunk {
            run_id: "run-1".into(),
            sequence,
            payload: Some(payload),
            ..Default::default()
        };
        WireChunk::from_log(sequence, prost::Message::encode_to_vec(&chunk).into())
            .expect("a chunk this test encoded decodes")
    }

    fn start() -> WireChunk {
        chunk(1, pb::chunk::Payload::Start(pb::StartChunk::default()))
    }

    fn finish() -> WireChunk {
        chunk(2, pb::chunk::Payload::Finish(pb::GenerateResult::default()))
    }

    #[tokio::test]
    async fn a_stream_closed_before_finish_ends_with_an_internal_error() {
        let (mut stream, mut tx, _live, _cancel) = client_stream(OnDisconnect::Continue);
        tx.send(Ok(start())).await.unwrap();
        drop(tx);
        assert!(matches!(stream.next().await, Some(Ok(c)) if c.sequence == 1));
        match stream.next().await {
            Some(Err(RunError::Internal(message))) => {
                assert!(
                    message.contains("\"run-1\" stopped without finishing"),
                    "{message}"
                );
            }
            other => panic!("expected an internal error, got {other:?}"),
        }
        assert!(stream.next().await.is_none());
    }

    #[tokio::test]
    async fn a_stream_closed_after_finish_just_ends() {
        let (mut stream, mut tx, _live, cancel) = client_stream(OnDisconnect::Abort);
        tx.send(Ok(start())).await.unwrap();
        tx.send(Ok(finish())).await.unwrap();
        drop(tx);
        assert!(matches!(stream.next().await, Some(Ok(c)) if !c.finish));
        assert!(matches!(stream.next().await, Some(Ok(c)) if c.finish));
        assert!(stream.next().await.is_none());
        drop(stream);
        assert!(!cancel.is_cancelled(), "a finished run is not aborted");
    }

    #[tokio::test]
    async fn a_client_going_away_before_finish_aborts_the_run_when_asked() {
        let (stream, _tx, live, cancel) = client_stream(OnDisconnect::Abort);
        drop(stream);
        assert!(cancel.is_cancelled());
        assert!(
            live.contains("run-1"),
            "the execution delists itself as it ends"
        );
        let (stream, _tx, _live, cancel) = client_stream(OnDisconnect::Continue);
        drop(stream);
        assert!(!cancel.is_cancelled());
    }
}
