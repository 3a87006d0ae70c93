//! A run's log writer: the chunks its emitter numbers wait in a shared queue and a task appends
//! them to the store in batches.
//!
//! A queue behind a lock, not a channel: a tokio channel reserves a block of 32 slots per run,
//! which every idle stream would pin, and wakes its receiver on every send, where this queue
//! wakes the writer once per batch (its first chunk, a full batch, the run's end).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::warn;

use crate::store::{LogLimits, Store};

/// How long the log writer waits for more chunks before it writes what it has. A model
/// streaming fast (or an instant one) then costs a store call per few milliseconds, not per
/// chunk; a follower on another replica sees chunks at most this much later. The run's last
/// chunks are written at once: dropping the emitter closes the queue.
const LOG_LINGER: Duration = Duration::from_millis(5);

/// Most chunks in one store call.
const LOG_BATCH: usize = 256;

/// Most bytes of chunks the writer keeps to seal a log; a longer log stays as it is.
const SEAL_MAX_BYTES: usize = 4 << 20;

/// The emitter's end of a run's log: chunks go in, and dropping it tells the writer that
/// nothing more comes.
pub(super) struct LogSender(Arc<LogQueue>);

/// Completes when every chunk emitted before the emitter was dropped is in the store.
pub struct LogFlush(JoinHandle<()>);

impl LogFlush {
    /// Waits for the log writer to finish.
    pub async fn wait(self) {
        let _ = self.0.await;
    }
}

#[derive(Default)]
struct LogQueue {
    pending: Mutex<Pending>,
    /// Wakes the writer: a notification while it is busy is kept for its next wait.
    wake: Notify,
}

#[derive(Default)]
struct Pending {
    /// Numbered, encoded chunks not yet taken by the writer.
    chunks: Vec<(u64, Bytes)>,
    /// The run has ended for good (not suspended): the log is complete once written.
    complete: bool,
    /// The sender is gone: nothing more comes.
    closed: bool,
}

impl LogQueue {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        // The lock guards plain data no holder can leave half-changed: a poisoned one is fine.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until `ready` holds for what is pending, or until `deadline` passes.
    async fn wait_for(&self, ready: impl Fn(&Pending) -> bool, deadline: Option<Instant>) {
        loop {
            // Made before the check: a notification in between is kept for it.
            let woken = self.wake.notified();
            if ready(&self.lock()) {
                return;
            }
            match deadline {
                None => woken.await,
                Some(at) => {
                    if tokio::time::timeout_at(at, woken).await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// A log writer for `run_id`, started now; `whole` keeps every chunk to seal the log (see
/// [`write_log`]).
pub(super) fn start(
    store: Arc<dyn Store>,
    run_id: String,
    limits: LogLimits,
    whole: Option<Vec<(u64, Bytes)>>,
) -> (LogSender, LogFlush) {
    let queue = Arc::new(LogQueue::default());
    let writer = tokio::spawn(write_log(store, run_id, queue.clone(), limits, whole));
    (LogSender(queue), LogFlush(writer))
}

impl LogSender {
    /// Queues the chunk numbered `sequence`.
    pub(super) fn push(&self, sequence: u64, chunk: Bytes) {
        // A writer that is gone (it panicked) only means the log stops growing; the run goes
        // on, and the chunks are not kept.
        if Arc::strong_count(&self.0) == 1 {
            return;
        }
        let mut pending = self.0.lock();
        pending.chunks.push((sequence, chunk));
        let len = pending.chunks.len();
        drop(pending);
        // The first chunk starts the writer's linger; a full batch ends it early.
        if len == 1 || len == LOG_BATCH {
            self.0.wake.notify_one();
        }
    }

    /// Marks the log complete: the run will not emit again.
    pub(super) fn complete(&self) {
        self.0.lock().complete = true;
    }
}

impl Drop for LogSender {
    fn drop(&mut self) {
        self.0.lock().closed = true;
        self.0.wake.notify_one();
    }
}

/// Appends chunks in batches: whatever arrives within [`LOG_LINGER`] of the first unwritten
/// one. With `whole` (the emitter started the log) it keeps every chunk and, when the run says
/// it is complete, writes the last batch as a seal of the whole log.
async fn write_log(
    store: Arc<dyn Store>,
    run_id: String,
    queue: Arc<LogQueue>,
    limits: LogLimits,
    mut whole: Option<Vec<(u64, Bytes)>>,
) {
    let mut kept = 0usize;
    loop {
        // Wait for a first chunk, or the end; then linger for more, unless the run ended or
        // the batch is full.
        queue
            .wait_for(|p| !p.chunks.is_empty() || p.closed, None)
            .await;
        let linger = Some(Instant::now() + LOG_LINGER);
        queue
            .wait_for(|p| p.closed || p.chunks.len() >= LOG_BATCH, linger)
            .await;
        let (batch, last, complete) = {
            let mut pending = queue.lock();
            let batch: Vec<_> = if pending.chunks.len() > LOG_BATCH {
                pending.chunks.drain(..LOG_BATCH).collect()
            } else {
                std::mem::take(&mut pending.chunks)
            };
            (
                batch,
                pending.closed && pending.chunks.is_empty(),
                pending.complete,
            )
        };
        if let Some(all) = &mut whole {
            kept += batch.iter().map(|(_, b)| b.len()).sum::<usize>();
            if kept > SEAL_MAX_BYTES {
                whole = None;
            } else {
                all.extend(batch.iter().cloned());
            }
        }
        let written = match (&mut whole, complete && last) {
            (Some(all), true) => {
                store
                    .seal_chunks(&run_id, batch, std::mem::take(all), limits)
                    .await
            }
            _ if batch.is_empty() => Ok(()),
            _ => store.append_chunks(&run_id, batch, limits).await,
        };
        if let Err(e) = written {
            crate::telemetry::metrics().store_error("append_chunks");
            warn!(run_id, error = %e, "could not append to the run log; Observe will miss chunks");
        }
        if last {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::embedded::EmbeddedStore;

    const LIMITS: LogLimits = LogLimits {
        max_chunks: 10_000,
        ttl: Duration::from_secs(60),
    };

    fn chunk(sequence: u64) -> Bytes {
        Bytes::from(format!("chunk {sequence}"))
    }

    #[tokio::test]
    async fn every_chunk_lands_in_order_when_the_sender_goes() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
        let (log, flush) = start(store.clone(), "run".into(), LIMITS, None);
        // More than two batches' worth, pushed at once.
        let count = (LOG_BATCH * 2 + 10) as u64;
        for sequence in 1..=count {
            log.push(sequence, chunk(sequence));
        }
        drop(log);
        flush.wait().await;
        let written = store.read_chunks("run", 0).await.unwrap();
        let expected: Vec<_> = (1..=count).map(|s| (s, chunk(s))).collect();
        assert_eq!(written, expected);
    }

    #[tokio::test]
    async fn a_batch_is_written_while_the_run_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
        let (log, flush) = start(store.clone(), "run".into(), LIMITS, None);
        log.push(1, chunk(1));
        log.push(2, chunk(2));
        // The linger ends with the sender still there: Observe sees the chunks meanwhile.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let written = store.read_chunks("run", 0).await.unwrap();
            if written.len() == 2 {
                break;
            }
            assert!(Instant::now() < deadline, "written so far: {written:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        log.push(3, chunk(3));
        drop(log);
        flush.wait().await;
        let written = store.read_chunks("run", 0).await.unwrap();
        assert_eq!(written.last(), Some(&(3, chunk(3))));
    }

    #[tokio::test]
    async fn a_sender_dropped_with_nothing_queued_ends_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
        let (log, flush) = start(store.clone(), "run".into(), LIMITS, None);
        log.complete();
        drop(log);
        tokio::time::timeout(Duration::from_secs(10), flush.wait())
            .await
            .expect("the writer ends");
        assert!(store.read_chunks("run", 0).await.unwrap().is_empty());
    }
}
