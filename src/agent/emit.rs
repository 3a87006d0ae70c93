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
    log: mpsc::UnboundedSender<(u64, Bytes)>,
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
        let writer = tokio::spawn(write_log(store, run_id.clone(), rx, limits));
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
    pub async fn emit(&mut self, event: Event) {
        self.sequence += 1;
        let chunk = wire::chunk(&self.run_id, self.sequence, &event);
        // A closed log writer only means the log stops growing; the run goes on.
        let _ = self
            .log
            .send((self.sequence, Bytes::from(chunk.encode_to_vec())));
        if let Some(client) = &self.client
            && client.send(Ok(Box::new(chunk))).await.is_err()
        {
            self.client = None;
            self.client_gone.store(true, Ordering::Relaxed);
        }
    }

    /// Detaches the client (the run goes on for the log only).
    pub fn detach(&mut self) {
        self.client = None;
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

/// Appends chunks in batches: whatever arrives within [`LOG_LINGER`] of the first unwritten one.
async fn write_log(
    store: Arc<dyn Store>,
    run_id: String,
    mut rx: mpsc::UnboundedReceiver<(u64, Bytes)>,
    limits: LogLimits,
) {
    let mut batch = Vec::new();
    while rx.recv_many(&mut batch, LOG_BATCH).await > 0 {
        let deadline = Instant::now() + LOG_LINGER;
        while batch.len() < LOG_BATCH {
            match tokio::time::timeout_at(deadline, rx.recv_many(&mut batch, LOG_BATCH)).await {
                // More came in time; wait for the rest.
                Ok(n) if n > 0 => {}
                // Closed (the run ended) or the linger is over: write now.
                _ => break,
            }
        }
        if let Err(e) = store
            .append_chunks(&run_id, std::mem::take(&mut batch), limits)
            .await
        {
            crate::telemetry::metrics().store_error("append_chunks");
            warn!(run_id, error = %e, "could not append to the run log; Observe will miss chunks");
        }
    }
}
