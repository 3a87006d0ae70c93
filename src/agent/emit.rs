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
use prost::encoding::{DecodeContext, decode_key, skip_field};

use super::error::RunError;
use super::event::Event;
use super::wire;
use crate::pb;
use crate::store::{LogLimits, Store, StoreError};
pub use log_writer::LogFlush;
use log_writer::LogSender;

/// Chunks sent to a client stream, encoded. A futures channel: it allocates per queued chunk,
/// where a tokio one reserves a block of 32 slots that every idle stream would pin.
pub type ClientSender = mpsc::Sender<Result<WireChunk, RunError>>;

/// A chunk as it leaves a run: numbered and encoded once, the same bytes for its log and for
/// every stream that sends it.
#[derive(Clone, Debug)]
pub struct WireChunk {
    /// Its sequence number in the run.
    pub sequence: u64,
    /// True for a `finish` chunk (the run's last, or the last before it suspended).
    pub finish: bool,
    /// The encoded `pb::Chunk`.
    pub bytes: Bytes,
}

/// The field number of `finish` in `agentd.v1.Chunk`.
const FINISH_FIELD: u32 = 35;

impl WireChunk {
    /// A chunk read back from the log: only its top-level fields are read, to tell a `finish`.
    pub fn from_log(sequence: u64, bytes: Bytes) -> Result<Self, RunError> {
        let mut buf = bytes.as_ref();
        let mut finish = false;
        while !buf.is_empty() {
            let (tag, wire_type) = decode_key(&mut buf).map_err(corrupt)?;
            finish |= tag == FINISH_FIELD;
            skip_field(wire_type, tag, &mut buf, DecodeContext::default()).map_err(corrupt)?;
        }
        Ok(Self {
            sequence,
            finish,
            bytes,
        })
    }

    /// The chunk itself, for what reads it (a supervisor following its sub-agent, a hooked
    /// stream).
    pub fn decode(&self) -> Result<pb::Chunk, RunError> {
        pb::Chunk::decode(self.bytes.as_ref()).map_err(corrupt)
    }
}

/// A logged chunk that does not decode.
fn corrupt(e: prost::DecodeError) -> RunError {
    RunError::Store(StoreError::Corrupt(format!("run log chunk: {e}")))
}

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
    /// only the encoded chunk while the client's channel is full: every run future that awaits
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
    fn number(&mut self, event: &Event) -> Option<WireChunk> {
        self.sequence += 1;
        let chunk = wire::chunk(&self.run_id, self.sequence, event);
        let bytes = Bytes::from(chunk.encode_to_vec());
        self.log.push(self.sequence, bytes.clone());
        self.client.as_ref().map(|_| WireChunk {
            sequence: self.sequence,
            finish: matches!(chunk.payload, Some(pb::chunk::Payload::Finish(_))),
            bytes,
        })
    }

    /// Marks the run as ended for good (not suspended): its log will not grow again, so the
    /// store may keep it sealed (compacted) once written.
    pub fn complete(&self) {
        self.log.complete();
    }

    /// Detaches the client and hands it over (a sub-agent's stream goes on with its
    /// supervisor's continuation).
    pub fn take_client(&mut self) -> Option<ClientSender> {
        self.client.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(payload: pb::chunk::Payload) -> (pb::Chunk, Bytes) {
        let chunk = pb::Chunk {
            run_id: "run-1".into(),
            sequence: 3,
            payload: Some(payload),
            ..Default::default()
        };
        let bytes = Bytes::from(chunk.encode_to_vec());
        (chunk, bytes)
    }

    #[test]
    fn a_logged_chunk_tells_a_finish_without_being_decoded() {
        let (finish, bytes) = encoded(pb::chunk::Payload::Finish(pb::GenerateResult {
            text: "done".into(),
            ..Default::default()
        }));
        let wire = WireChunk::from_log(3, bytes).expect("reads");
        assert!(wire.finish);
        assert_eq!(wire.sequence, 3);
        assert_eq!(wire.decode().expect("decodes"), finish);

        let (step, bytes) = encoded(pb::chunk::Payload::StepFinish(pb::StepFinishChunk {
            step_index: 1,
            ..Default::default()
        }));
        let wire = WireChunk::from_log(3, bytes).expect("reads");
        assert!(!wire.finish);
        assert_eq!(wire.decode().expect("decodes"), step);
    }

    #[test]
    fn a_truncated_logged_chunk_is_corrupt() {
        let (_, bytes) = encoded(pb::chunk::Payload::Finish(pb::GenerateResult::default()));
        let cut = bytes.slice(..bytes.len() - 1);
        assert!(matches!(
            WireChunk::from_log(3, cut),
            Err(RunError::Store(StoreError::Corrupt(_)))
        ));
    }
}
