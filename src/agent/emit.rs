//! Where a run's events go: numbered, turned into wire chunks (`wire.rs`), sent to the attached
//! client (if any) and appended to the run's bounded log in the store (batched by a writer
//! task), from which Observe replays.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use prost::Message as _;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::warn;

use super::error::RunError;
use super::event::Event;
use super::wire;
use crate::pb;
use crate::store::{LogLimits, Store};

/// Chunks sent to a client stream. Boxed: a chunk is as large as its largest payload (the
/// whole result), and the channel's buffer blocks hold 32 slots each, so an idle stream would
/// otherwise pin tens of KiB.
pub type ClientSender = mpsc::Sender<Result<Box<pb::Chunk>, RunError>>;

/// Numbers chunks and delivers them to the client and to the log.
pub struct Emitter {
    run_id: String,
    sequence: u64,
    client: Option<ClientSender>,
    /// Set once the client's stream is gone.
    client_gone: Arc<AtomicBool>,
    log: mpsc::UnboundedSender<LogMessage>,
}

/// What the log writer receives.
enum LogMessage {
    /// A numbered, encoded chunk.
    Chunk(u64, Bytes),
    /// The run has ended for good (not suspended): the log is complete once the writer ends.
    Complete,
}

impl Emitter {
    /// An emitter continuing after `sequence` (0 for a new run), writing its log through a
    /// writer task that ends, flushed, when the emitter is dropped.
    pub fn new(
        store: Arc<dyn Store>,
        run_id: String,
        sequence: u64,
        client: Option<ClientSender>,
        limits: LogLimits,
    ) -> (Self, LogFlush) {
        let (log, rx) = mpsc::unbounded_channel();
        // Only an emitter that starts the log sees all of it, and so can seal it; a store that
        // keeps no sealed form costs no copy.
        let whole = (sequence == 0 && store.seals_logs()).then(Vec::new);
        let writer = tokio::spawn(write_log(store, run_id.clone(), rx, limits, whole));
        let emitter = Self {
            run_id,
            sequence,
            client,
            client_gone: Arc::new(AtomicBool::new(false)),
            log,
        };
        (emitter, LogFlush(writer))
    }

    /// The run this emitter numbers chunks for.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The sequence number of the last chunk emitted.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// True once a client was attached and its stream went away.
    pub fn client_gone(&self) -> bool {
        self.client_gone.load(Ordering::Relaxed)
    }

    /// Emits the next event of the run.
    ///
    /// The chunk is built and logged before the returned future is first polled, which holds
    /// only the boxed chunk while the client's channel is full: every run future that awaits
    /// an emit (an idle stream's memory) reserves that much, not the event and chunk inline.
    pub fn emit(&mut self, event: Event) -> impl Future<Output = ()> + Send + '_ {
        let chunk = self.number(&event);
        drop(event);
        async move {
            if let (Some(client), Some(chunk)) = (&self.client, chunk)
                && client.send(Ok(chunk)).await.is_err()
            {
                self.client = None;
                self.client_gone.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Numbers `event`, appends its chunk to the log and returns it for the client, if one
    /// is attached.
    fn number(&mut self, event: &Event) -> Option<Box<pb::Chunk>> {
        self.sequence += 1;
        let chunk = wire::chunk(&self.run_id, self.sequence, event);
        // A closed log writer only means the log stops growing; the run goes on.
        let _ = self.log.send(LogMessage::Chunk(
            self.sequence,
            Bytes::from(chunk.encode_to_vec()),
        ));
        self.client.as_ref().map(|_| Box::new(chunk))
    }

    /// Marks the run as ended for good (not suspended): its log will not grow again, so the
    /// store may keep it sealed (compacted) once written.
    pub fn complete(&self) {
        let _ = self.log.send(LogMessage::Complete);
    }

    /// Detaches the client (the run goes on for the log only).
    pub fn detach(&mut self) {
        self.client = None;
    }

    /// Detaches the client and hands it over (a sub-agent's stream goes on with its
    /// supervisor's continuation).
    pub fn take_client(&mut self) -> Option<ClientSender> {
        self.client.take()
    }
}

/// Completes when every chunk emitted before the emitter was dropped is in the store.
pub struct LogFlush(JoinHandle<()>);

impl LogFlush {
    /// Waits for the log writer to finish.
    pub async fn wait(self) {
        let _ = self.0.await;
    }
}

/// How long the log writer waits for more chunks before it writes what it has. A model
/// streaming fast (or an instant one) then costs a store call per few milliseconds, not per
/// chunk; a follower on another replica sees chunks at most this much later. The run's last
/// chunks are written at once: dropping the emitter closes the channel.
const LOG_LINGER: Duration = Duration::from_millis(5);

/// Most chunks in one store call.
const LOG_BATCH: usize = 256;

/// Most bytes of chunks the writer keeps to seal a log; a longer log stays as it is.
const SEAL_MAX_BYTES: usize = 4 << 20;

/// Appends chunks in batches: whatever arrives within [`LOG_LINGER`] of the first unwritten
/// one. With `whole` (the emitter started the log) it keeps every chunk and, when the run says
/// it is complete, writes the last batch as a seal of the whole log.
async fn write_log(
    store: Arc<dyn Store>,
    run_id: String,
    mut rx: mpsc::UnboundedReceiver<LogMessage>,
    limits: LogLimits,
    mut whole: Option<Vec<(u64, Bytes)>>,
) {
    let mut messages = Vec::new();
    let mut kept = 0usize;
    let mut complete = false;
    loop {
        let mut open = rx.recv_many(&mut messages, LOG_BATCH).await > 0;
        if !open {
            break;
        }
        let deadline = Instant::now() + LOG_LINGER;
        while open && messages.len() < LOG_BATCH {
            match tokio::time::timeout_at(deadline, rx.recv_many(&mut messages, LOG_BATCH)).await {
                // More came in time; wait for the rest.
                Ok(n) if n > 0 => {}
                // Closed: the run ended; write now.
                Ok(_) => open = false,
                // The linger is over: write now.
                Err(_) => break,
            }
        }
        let mut batch = Vec::with_capacity(messages.len());
        for message in messages.drain(..) {
            match message {
                LogMessage::Chunk(seq, bytes) => batch.push((seq, bytes)),
                LogMessage::Complete => complete = true,
            }
        }
        if let Some(all) = &mut whole {
            kept += batch.iter().map(|(_, b)| b.len()).sum::<usize>();
            if kept > SEAL_MAX_BYTES {
                whole = None;
            } else {
                all.extend(batch.iter().cloned());
            }
        }
        let written = match (&mut whole, complete && !open) {
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
        if !open {
            break;
        }
    }
}
