//! Re-attaching to a run from any replica (its log replayed, then followed live), and the
//! client's view of a run it started: when that client goes away with `on_disconnect = ABORT`,
//! the run stops.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::{Stream, StreamExt};

use super::{ChunkStream, Runtime, WireChunk};
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

/// A client's view of a run: when it goes away with `on_disconnect = ABORT`, the run stops.
pub(super) struct ClientStream {
    pub(super) inner: futures::channel::mpsc::Receiver<Result<WireChunk, RunError>>,
    pub(super) _active: telemetry::ActiveStream,
    pub(super) on_disconnect: OnDisconnect,
    pub(super) runtime: Arc<Runtime>,
    pub(super) run_id: String,
    pub(super) finished: bool,
}

impl Stream for ClientStream {
    type Item = Result<WireChunk, RunError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = Pin::new(&mut self.inner).poll_next(cx);
        match &polled {
            Poll::Ready(Some(Ok(chunk))) if chunk.finish => self.finished = true,
            Poll::Ready(None) => self.finished = true,
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
        self.runtime
            .cancel_local(&self.run_id, "The client disconnected");
    }
}
