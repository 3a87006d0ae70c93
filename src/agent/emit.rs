//! Where a run's events go: numbered, turned into wire chunks (`wire.rs`), sent to the attached
//! client (if any) and appended to the run's bounded log in the store (batched by a writer
//! task), from which Observe replays.

mod log_writer;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use futures::SinkExt;
use futures::channel::mpsc;
use prost::Message as _;

use super::error::RunError;
use super::event::Event;
use super::wire;
use crate::pb;
use crate::store::{LogLimits, Store};
pub use log_writer::LogFlush;
use log_writer::LogSender;

/// Chunks sent to a client stream. Boxed: a chunk is as large as its largest payload (the
/// whole result). A futures channel: it allocates per queued chunk, where a tokio one reserves
/// a block of 32 slots that every idle stream would pin.
pub type ClientSender = mpsc::Sender<Result<Box<pb::Chunk>, RunError>>;

/// Numbers chunks and delivers them to the client and to the log.
pub struct Emitter {
    run_id: String,
    sequence: u64,
    client: Option<ClientSender>,
    /// Set once the client's stream is gone.
    client_gone: Arc<AtomicBool>,
    log: LogSender,
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
        // Only an emitter that starts the log sees all of it, and so can seal it; a store that
        // keeps no sealed form costs no copy.
        let whole = (sequence == 0 && store.seals_logs()).then(Vec::new);
        let (log, flush) = log_writer::start(store, run_id.clone(), limits, whole);
        let emitter = Self {
            run_id,
            sequence,
            client,
            client_gone: Arc::new(AtomicBool::new(false)),
            log,
        };
        (emitter, flush)
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
            if let (Some(client), Some(chunk)) = (self.client.as_mut(), chunk)
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
        self.log
            .push(self.sequence, Bytes::from(chunk.encode_to_vec()));
        self.client.as_ref().map(|_| Box::new(chunk))
    }

    /// Marks the run as ended for good (not suspended): its log will not grow again, so the
    /// store may keep it sealed (compacted) once written.
    pub fn complete(&self) {
        self.log.complete();
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
