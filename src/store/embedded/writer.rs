//! The embedded store's writer: the durability schedule, the expiry sweep and group commit by
//! whoever is there. A job that needs no fsync is committed by its caller if nobody else is
//! committing (no hop to a thread and back, whose two wake-ups cost more than the commit);
//! jobs that arrive meanwhile queue up, and the committer takes them too, in batches, so
//! concurrent writes share transactions. Durable commits, bulk jobs, the sweep and a queue
//! that keeps coming back go to the writer thread. See the parent module for the guarantees.

use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redb::{Durability, WriteTransaction};
use tokio::sync::oneshot;

use super::job::Job;
use super::runs::sweep_expired;
use super::tables::Tables;
use super::{EmbeddedOptions, SWEEP_LIMIT, Shared, closed, now_ms};
use crate::store::StoreResult;

/// Most jobs applied in one transaction (bounds the latency of the first one).
const MAX_BATCH: usize = 1024;

/// Batches a caller commits for others before it hands the queue to the thread: bounds how
/// long one caller waits on behalf of the rest.
const CALLER_BATCHES: usize = 4;

/// Jobs in one batch that show concurrent callers (one run may have two writes in flight: its
/// chunk log and its next step).
const CROWD: usize = 2;

/// How long one batch with company keeps new jobs on the thread.
const CROWD_MEMORY: Duration = Duration::from_millis(10);

/// How soon the thread looks again when a due flush or sweep finds a caller committing.
const RETRY: Duration = Duration::from_millis(1);

/// What the writer thread receives.
pub(super) enum Msg {
    Ping(oneshot::Sender<()>),
    /// The queue was handed to the thread, or a flush became due: look at the state.
    Wake,
    Close(oneshot::Sender<StoreResult<()>>),
}

/// The handle the store submits jobs through.
pub(super) struct Writer {
    core: Arc<Core>,
    thread: Sender<Msg>,
}

/// Starts the writer thread; it stops on [`Msg::Close`] or when every sender is dropped.
pub(super) fn spawn(
    shared: Arc<Shared>,
    options: EmbeddedOptions,
) -> std::io::Result<(Writer, JoinHandle<()>)> {
    let (thread, inbox) = mpsc::channel();
    let core = Arc::new(Core {
        shared,
        options,
        state: Mutex::new(State::default()),
    });
    let writer = WriterLoop {
        core: core.clone(),
        inbox,
        next_sweep: Instant::now() + options.sweep_every,
    };
    let handle = std::thread::Builder::new()
        .name("agentd-store-writer".into())
        .spawn(move || writer.run())?;
    Ok((Writer { core, thread }, handle))
}

impl Writer {
    /// Queues `job` and, if nobody is committing, commits the queue: here when `in_place`
    /// allows and no fsync is due, otherwise on the thread. The job's receiver gets its result
    /// once committed. Jobs commit in the order they were submitted.
    pub(super) fn submit(&self, job: Box<dyn Job>, in_place: bool) -> StoreResult<()> {
        let mut state = self.core.lock();
        if state.closed {
            return Err(closed());
        }
        state.queue.push_back(Queued { job, in_place });
        if state.committer != Committer::Nobody {
            return Ok(());
        }
        if !in_place || state.crowded() || self.core.durable_due(&state) {
            state.committer = Committer::Thread;
            drop(state);
            return self.send(Msg::Wake);
        }
        state.committer = Committer::Caller;
        drop(state);
        // Should a job panic, the queue must not stay with a committer that is gone.
        let mut handover = Handover(Some(self));
        let wake = self.core.commit_as_caller();
        handover.0 = None;
        if wake {
            self.send(Msg::Wake)?;
        }
        Ok(())
    }

    /// Sends a message to the thread.
    pub(super) fn send(&self, msg: Msg) -> StoreResult<()> {
        self.thread.send(msg).map_err(|_| closed())
    }
}

/// Hands the queue to the thread when dropped armed: a caller's commit unwound.
struct Handover<'a>(Option<&'a Writer>);

impl Drop for Handover<'_> {
    fn drop(&mut self) {
        if let Some(writer) = self.0 {
            writer.core.lock().committer = Committer::Thread;
            let _ = writer.send(Msg::Wake);
        }
    }
}

/// A job waiting in the queue.
struct Queued {
    job: Box<dyn Job>,
    /// Whether a caller may commit it (small enough not to stall a runtime worker).
    in_place: bool,
}

/// Who commits the queue now; only they begin write transactions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Committer {
    #[default]
    Nobody,
    Caller,
    Thread,
}

/// What the thread and committing callers share.
struct Core {
    shared: Arc<Shared>,
    options: EmbeddedOptions,
    state: Mutex<State>,
}

/// Guarded by [`Core::state`]; held only to look and update, never through a transaction.
#[derive(Default)]
struct State {
    queue: VecDeque<Queued>,
    committer: Committer,
    /// When the oldest commit not yet made durable was made.
    dirty_since: Option<Instant>,
    /// Set on [`Msg::Close`]: no job is accepted after it.
    closed: bool,
    /// Until when jobs count as coming in concurrently (a batch had company): the thread
    /// commits them then, as callers committing in turn cost more than the hops they save.
    crowded_until: Option<Instant>,
}

impl State {
    /// Takes up to [`MAX_BATCH`] jobs off the queue, only leading `in_place` ones if asked.
    fn batch(&mut self, in_place_only: bool) -> Vec<Box<dyn Job>> {
        let mut batch = Vec::new();
        while batch.len() < MAX_BATCH
            && let Some(next) = self.queue.front()
            && (next.in_place || !in_place_only)
            && let Some(queued) = self.queue.pop_front()
        {
            batch.push(queued.job);
        }
        if batch.len() > CROWD {
            self.crowded_until = Some(Instant::now() + CROWD_MEMORY);
        }
        batch
    }

    fn crowded(&self) -> bool {
        self.crowded_until
            .is_some_and(|until| Instant::now() < until)
    }

    /// Records a commit in the durability schedule.
    fn committed(&mut self, durable: bool) {
        if durable {
            self.dirty_since = None;
        } else if self.dirty_since.is_none() {
            self.dirty_since = Some(Instant::now());
        }
    }
}

impl Core {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent whatever a panicking job did: it is never held through one.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Commits the queue as the caller that found nobody committing, without fsync, at most
    /// [`CALLER_BATCHES`] batches. Returns whether the thread must look: the queue was handed
    /// to it, or this made the first commit not yet durable (the thread schedules its flush).
    fn commit_as_caller(&self) -> bool {
        let mut state = self.lock();
        let was_clean = state.dirty_since.is_none();
        for _ in 0..CALLER_BATCHES {
            if self.durable_due(&state) {
                break;
            }
            let more;
            (state, more) = self.commit_next(state, true, false);
            if !more {
                break;
            }
        }
        if state.queue.is_empty() {
            state.committer = Committer::Nobody;
            was_clean && state.dirty_since.is_some()
        } else {
            state.committer = Committer::Thread;
            true
        }
    }

    /// Takes the next batch off the queue (only leading `in_place` jobs if asked) and commits
    /// it with the lock released meanwhile; `false` when the queue had none.
    fn commit_next<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        in_place_only: bool,
        durable: bool,
    ) -> (MutexGuard<'a, State>, bool) {
        let batch = state.batch(in_place_only);
        if batch.is_empty() {
            return (state, false);
        }
        drop(state);
        let committed = self.commit_batch(batch, durable);
        let mut state = self.lock();
        if committed {
            state.committed(durable);
        }
        (state, true)
    }

    /// Commits a batch in one transaction, or each job alone if the batch fails; returns
    /// whether anything was committed.
    fn commit_batch(&self, mut batch: Vec<Box<dyn Job>>, durable: bool) -> bool {
        match self.commit_jobs(&mut batch, durable) {
            Ok(()) => {
                for job in batch {
                    job.complete(&self.shared);
                }
                true
            }
            Err(e) if batch.len() == 1 => {
                if let Some(job) = batch.pop() {
                    job.fail(e);
                }
                false
            }
            Err(e) => {
                tracing::warn!(error = %e, jobs = batch.len(), "batch failed; retrying jobs one by one");
                let mut committed = false;
                for job in batch {
                    committed |= self.commit_batch(vec![job], durable);
                }
                committed
            }
        }
    }

    fn commit_jobs(&self, batch: &mut [Box<dyn Job>], durable: bool) -> StoreResult<()> {
        let tx = self.begin(durable)?;
        let now = now_ms();
        {
            // Every table a job opens stays open for the rest of the batch.
            let tables = Tables::new(&tx);
            for job in batch.iter_mut() {
                job.apply(&tables, now)?;
            }
        }
        tx.commit()?;
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

    fn durable_due(&self, state: &State) -> bool {
        self.options.durable_every.is_zero()
            || state
                .dirty_since
                .is_some_and(|since| since.elapsed() >= self.options.durable_every)
    }
}

/// The writer thread's state.
struct WriterLoop {
    core: Arc<Core>,
    inbox: Receiver<Msg>,
    /// When the next sweep is due: right away after a pass that stopped at its limit, so that a
    /// backlog of expired records is worked off pass by pass between batches of writes.
    next_sweep: Instant,
}

impl Drop for WriterLoop {
    /// However the thread ends (a job may panic), callers waiting in the queue learn the store
    /// is gone, and later writes fail rather than queue for nobody.
    fn drop(&mut self) {
        let mut state = self.core.lock();
        state.closed = true;
        state.queue.clear();
    }
}

impl WriterLoop {
    /// Serves until the store closes or is dropped; always ends with a durable commit.
    fn run(mut self) {
        let mut wait = self.idle_wait();
        loop {
            match self.inbox.recv_timeout(wait) {
                Ok(Msg::Ping(reply)) => {
                    let _ = reply.send(());
                }
                Ok(Msg::Wake) | Err(RecvTimeoutError::Timeout) => {}
                Ok(Msg::Close(reply)) => {
                    let _ = reply.send(self.close());
                    return;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
            wait = if self.work() { self.idle_wait() } else { RETRY };
        }
        if let Err(e) = self.close() {
            tracing::error!(error = %e, "embedded store: final durable commit failed");
        }
    }

    /// Commits what was handed over and does what is due; `false` when a caller is committing
    /// and a due flush or sweep has to wait for it.
    fn work(&mut self) -> bool {
        let mut state = self.core.lock();
        let due =
            self.sweep_due() || (state.dirty_since.is_some() && self.core.durable_due(&state));
        match state.committer {
            Committer::Thread => {}
            Committer::Nobody if due => state.committer = Committer::Thread,
            Committer::Nobody => return true,
            Committer::Caller => return !due,
        }
        drop(state);
        self.housekeeping();
        self.drain();
        true
    }

    /// Commits the queue until it is empty, then lets the next caller commit again.
    fn drain(&self) {
        let mut state = self.core.lock();
        loop {
            let durable = self.core.durable_due(&state);
            let more;
            (state, more) = self.core.commit_next(state, false, durable);
            if !more {
                state.committer = Committer::Nobody;
                return;
            }
        }
    }

    /// Takes the writer role from whoever has it, commits the queue and makes it all durable;
    /// no job is accepted after.
    fn close(&mut self) -> StoreResult<()> {
        loop {
            let mut state = self.core.lock();
            state.closed = true;
            if state.committer != Committer::Caller {
                state.committer = Committer::Thread;
                break;
            }
            drop(state);
            std::thread::sleep(RETRY);
        }
        self.drain();
        self.core.lock().committer = Committer::Thread;
        self.flush()
    }

    fn sweep_due(&self) -> bool {
        Instant::now() >= self.next_sweep
    }

    /// How long the inbox may stay silent before a flush or a sweep is due.
    fn idle_wait(&self) -> Duration {
        let options = &self.core.options;
        let sweep = self.next_sweep.saturating_duration_since(Instant::now());
        match self.core.lock().dirty_since {
            Some(since) => sweep.min(options.durable_every.saturating_sub(since.elapsed())),
            None => sweep,
        }
    }

    /// Makes pending commits durable and sweeps expired records, when due; the thread is the
    /// committer.
    fn housekeeping(&mut self) {
        if self.sweep_due() {
            let visited = self.sweep().unwrap_or_else(|e| {
                tracing::warn!(error = %e, "embedded store: expiry sweep failed");
                0
            });
            let rest = if visited >= SWEEP_LIMIT {
                Duration::ZERO
            } else {
                self.core.options.sweep_every
            };
            self.next_sweep = Instant::now() + rest;
        }
        let state = self.core.lock();
        let flush = state.dirty_since.is_some() && self.core.durable_due(&state);
        drop(state);
        if flush && let Err(e) = self.flush() {
            tracing::error!(error = %e, "embedded store: durable commit failed");
        }
    }

    /// One sweep pass; returns how many schedule entries it visited.
    fn sweep(&mut self) -> StoreResult<usize> {
        let tx = self.core.begin(false)?;
        let visited = sweep_expired(&Tables::new(&tx), now_ms())?;
        if visited == 0 {
            tx.abort()?;
            return Ok(0);
        }
        tx.commit()?;
        self.core.lock().committed(false);
        tracing::debug!(visited, "embedded store: expiry schedule swept");
        Ok(visited)
    }

    /// Persists every commit so far (an empty durable commit makes earlier ones durable).
    fn flush(&mut self) -> StoreResult<()> {
        if self.core.lock().dirty_since.is_none() {
            return Ok(());
        }
        self.core.begin(true)?.commit()?;
        self.core.lock().committed(true);
        Ok(())
    }
}
