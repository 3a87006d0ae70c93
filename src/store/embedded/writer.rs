//! The single writer thread of the embedded store: group commit, the durability schedule and
//! the expiry sweep. See the parent module for the guarantees.

use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redb::{Durability, WriteTransaction};
use tokio::sync::oneshot;

use super::{DocTopic, EmbeddedOptions, Shared, now_ms, sweep_expired};
use crate::store::{LogEntry, StoreError, StoreResult, Versioned};

/// Most jobs applied in one transaction (bounds the latency of the first one).
const MAX_BATCH: usize = 1024;

/// What the writer thread receives.
pub(super) enum Msg {
    Job(Box<dyn Job>),
    Ping(oneshot::Sender<()>),
    Close(oneshot::Sender<StoreResult<()>>),
}

/// What a job sees while it runs: the batch's clock and the notifications to send on commit.
pub(super) struct Ctx {
    pub(super) now_ms: u64,
    pub(super) notes: Vec<Note>,
}

impl Ctx {
    /// The expiry time of a record written now with `ttl` (at least 1 ms).
    pub(super) fn expires_at(&self, ttl: Duration) -> u64 {
        let ttl = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        self.now_ms.saturating_add(ttl)
    }
}

/// A notification, published once its transaction is committed.
pub(super) enum Note {
    Doc(DocTopic, Versioned),
    Chunks(String, Vec<LogEntry>),
}

/// A queued mutation, type-erased for the writer.
pub(super) trait Job: Send {
    /// Runs the mutation in `tx`; an error means `tx` must be aborted.
    fn apply(&mut self, tx: &WriteTransaction, now_ms: u64) -> StoreResult<()>;
    /// Publishes the notifications and replies, once committed.
    fn complete(self: Box<Self>, shared: &Shared);
    /// Replies with an error; nothing of the job was committed.
    fn fail(self: Box<Self>, error: StoreError);
}

/// Wraps a mutation for the writer; the receiver gets its result once committed.
pub(super) fn job<T, F>(op: F) -> (Msg, oneshot::Receiver<StoreResult<T>>)
where
    T: Send + 'static,
    F: FnMut(&WriteTransaction, &mut Ctx) -> StoreResult<T> + Send + 'static,
{
    let (reply, done) = oneshot::channel();
    let pending = Pending {
        op,
        outcome: None,
        notes: Vec::new(),
        reply,
    };
    (Msg::Job(Box::new(pending)), done)
}

/// Starts the writer thread; it stops on [`Msg::Close`] or when every sender is dropped.
pub(super) fn spawn(
    shared: Arc<Shared>,
    options: EmbeddedOptions,
) -> std::io::Result<(Sender<Msg>, JoinHandle<()>)> {
    let (jobs, queue) = mpsc::channel();
    let writer = WriterLoop::new(shared, queue, options);
    let handle = std::thread::Builder::new()
        .name("agentd-store-writer".into())
        .spawn(move || writer.run())?;
    Ok((jobs, handle))
}

/// A mutation and the caller waiting for its result.
struct Pending<T, F> {
    op: F,
    outcome: Option<StoreResult<T>>,
    notes: Vec<Note>,
    reply: oneshot::Sender<StoreResult<T>>,
}

impl<T, F> Job for Pending<T, F>
where
    T: Send,
    F: FnMut(&WriteTransaction, &mut Ctx) -> StoreResult<T> + Send,
{
    fn apply(&mut self, tx: &WriteTransaction, now_ms: u64) -> StoreResult<()> {
        let mut ctx = Ctx {
            now_ms,
            notes: Vec::new(),
        };
        // A job may run twice (batch, then alone): nothing of a former attempt may remain.
        self.notes.clear();
        match (self.op)(tx, &mut ctx) {
            // Ownership is checked before anything is written: the batch can go on.
            Err(e @ StoreError::WrongOwner { .. }) => self.outcome = Some(Err(e)),
            Err(e) => return Err(e),
            Ok(value) => {
                self.outcome = Some(Ok(value));
                self.notes = ctx.notes;
            }
        }
        Ok(())
    }

    fn complete(self: Box<Self>, shared: &Shared) {
        for note in self.notes {
            match note {
                Note::Doc(topic, value) => shared.docs.publish(&topic, value),
                Note::Chunks(run_id, chunks) => {
                    for chunk in chunks {
                        shared.chunks.publish(&run_id, chunk);
                    }
                }
            }
        }
        let outcome = self
            .outcome
            .unwrap_or_else(|| Err(StoreError::Unavailable("write was not applied".into())));
        // The caller may have given up waiting; the write stands either way.
        let _ = self.reply.send(outcome);
    }

    fn fail(self: Box<Self>, error: StoreError) {
        let _ = self.reply.send(Err(error));
    }
}

/// The writer thread's state.
struct WriterLoop {
    shared: Arc<Shared>,
    queue: Receiver<Msg>,
    options: EmbeddedOptions,
    /// When the oldest commit not yet made durable was made.
    dirty_since: Option<Instant>,
    last_sweep: Instant,
}

impl WriterLoop {
    fn new(shared: Arc<Shared>, queue: Receiver<Msg>, options: EmbeddedOptions) -> Self {
        Self {
            shared,
            queue,
            options,
            dirty_since: None,
            last_sweep: Instant::now(),
        }
    }

    /// Serves the queue until the store closes or is dropped; always ends with a durable commit.
    fn run(mut self) {
        loop {
            match self.queue.recv_timeout(self.idle_wait()) {
                Ok(first) => {
                    if let Some(reply) = self.serve(first) {
                        let _ = reply.send(self.flush());
                        return;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            self.housekeeping();
        }
        if let Err(e) = self.flush() {
            tracing::error!(error = %e, "embedded store: final durable commit failed");
        }
    }

    /// Applies `first` and everything queued behind it as one batch; returns a close request.
    fn serve(&mut self, first: Msg) -> Option<oneshot::Sender<StoreResult<()>>> {
        let mut batch = Vec::new();
        let mut close = None;
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Msg::Job(job) => batch.push(job),
                Msg::Ping(reply) => {
                    let _ = reply.send(());
                }
                Msg::Close(reply) => {
                    close = Some(reply);
                    break;
                }
            }
            if batch.len() < MAX_BATCH {
                next = self.queue.try_recv().ok();
            }
        }
        if !batch.is_empty() {
            self.commit_batch(batch);
        }
        close
    }

    /// Commits a batch in one transaction, or each job alone if the batch fails.
    fn commit_batch(&mut self, mut batch: Vec<Box<dyn Job>>) {
        let durable = self.durable_due();
        match self.commit_jobs(&mut batch, durable) {
            Ok(()) => {
                for job in batch {
                    job.complete(&self.shared);
                }
            }
            Err(e) if batch.len() == 1 => {
                if let Some(job) = batch.pop() {
                    job.fail(e);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, jobs = batch.len(), "batch failed; retrying jobs one by one");
                for job in batch {
                    self.commit_batch(vec![job]);
                }
            }
        }
    }

    fn commit_jobs(&mut self, batch: &mut [Box<dyn Job>], durable: bool) -> StoreResult<()> {
        let tx = self.begin(durable)?;
        let now = now_ms();
        for job in batch.iter_mut() {
            job.apply(&tx, now)?;
        }
        tx.commit()?;
        self.committed(durable);
        Ok(())
    }

    /// Starts a write transaction with the requested durability.
    fn begin(&self, durable: bool) -> StoreResult<WriteTransaction> {
        let mut tx = self.shared.begin_write()?;
        let durability = if durable {
            Durability::Immediate
        } else {
            Durability::None
        };
        tx.set_durability(durability)?;
        Ok(tx)
    }

    fn committed(&mut self, durable: bool) {
        if durable {
            self.dirty_since = None;
        } else if self.dirty_since.is_none() {
            self.dirty_since = Some(Instant::now());
        }
    }

    fn durable_due(&self) -> bool {
        self.options.durable_every.is_zero()
            || self
                .dirty_since
                .is_some_and(|since| since.elapsed() >= self.options.durable_every)
    }

    /// How long the queue may stay silent before a flush or a sweep is due.
    fn idle_wait(&self) -> Duration {
        let sweep = self
            .options
            .sweep_every
            .saturating_sub(self.last_sweep.elapsed());
        match self.dirty_since {
            Some(since) => sweep.min(self.options.durable_every.saturating_sub(since.elapsed())),
            None => sweep,
        }
    }

    /// Makes pending commits durable and sweeps expired records, when due.
    fn housekeeping(&mut self) {
        if self.last_sweep.elapsed() >= self.options.sweep_every {
            self.last_sweep = Instant::now();
            if let Err(e) = self.sweep() {
                tracing::warn!(error = %e, "embedded store: expiry sweep failed");
            }
        }
        if self.durable_due()
            && self.dirty_since.is_some()
            && let Err(e) = self.flush()
        {
            tracing::error!(error = %e, "embedded store: durable commit failed");
        }
    }

    fn sweep(&mut self) -> StoreResult<()> {
        let tx = self.begin(false)?;
        let purged = sweep_expired(&tx, now_ms())?;
        if purged == 0 {
            tx.abort()?;
            return Ok(());
        }
        tx.commit()?;
        self.committed(false);
        tracing::debug!(purged, "embedded store: expired records purged");
        Ok(())
    }

    /// Persists every commit so far (an empty durable commit makes earlier ones durable).
    fn flush(&mut self) -> StoreResult<()> {
        if self.dirty_since.is_none() {
            return Ok(());
        }
        self.begin(true)?.commit()?;
        self.committed(true);
        Ok(())
    }
}
