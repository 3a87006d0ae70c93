//! What the embedded store's writer commits: a mutation with the caller waiting for its result,
//! type-erased so jobs of any result type share a batch.

use std::time::Duration;

use tokio::sync::oneshot;

use super::tables::Tables;
use super::{DocTopic, Shared};
use crate::store::{LogEntry, StoreError, StoreResult, Versioned};

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
    fn apply(&mut self, tx: &Tables<'_>, now_ms: u64) -> StoreResult<()>;
    /// Publishes the notifications and replies, once committed.
    fn complete(self: Box<Self>, shared: &Shared);
    /// Replies with an error; nothing of the job was committed.
    fn fail(self: Box<Self>, error: StoreError);
}

/// Wraps a mutation for the writer; the receiver gets its result once committed.
pub(super) fn job<T, F>(op: F) -> (Box<dyn Job>, oneshot::Receiver<StoreResult<T>>)
where
    T: Send + 'static,
    F: FnMut(&Tables<'_>, &mut Ctx) -> StoreResult<T> + Send + 'static,
{
    let (reply, done) = oneshot::channel();
    let pending = Pending {
        op,
        outcome: None,
        notes: Vec::new(),
        reply,
    };
    (Box::new(pending), done)
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
    F: FnMut(&Tables<'_>, &mut Ctx) -> StoreResult<T> + Send,
{
    fn apply(&mut self, tx: &Tables<'_>, now_ms: u64) -> StoreResult<()> {
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
