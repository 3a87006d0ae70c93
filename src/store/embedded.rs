//! Embedded implementation of [`Store`]: one redb file, group commit by one writer at a time
//! (a lone caller, or the writer thread), in-process notifications. Made for a single process
//! (the default `cargo run` setup).
//!
//! **Writes.** Every mutation is a job in one queue, committed in the order submitted by one
//! committer at a time, each batch of queued jobs in one write transaction (group commit). A
//! caller that finds nobody committing commits the queue itself when that needs no fsync and
//! its job is small (a hop to a writer thread and back costs two wake-ups, more than the
//! commit); while jobs come in concurrently, for durable commits and bulk jobs, the writer
//! thread commits. Each job checks before it writes, so a rejected job (conflict, wrong owner)
//! writes nothing. A job that fails at the storage level aborts the batch, which is then
//! replayed one job per transaction so that only the failing job reports the error. Replies
//! and notifications go out after the commit.
//!
//! **Durability.** With the default [`EmbeddedOptions::durable_every`] of 100 ms, commits are
//! non-durable (no fsync) and the writer makes a durable commit at most 100 ms after the first
//! non-durable one, and on [`Store::close`] / drop. So a write acknowledged ≥ 100 ms (plus
//! one fsync) before a crash or power loss survives it; a clean shutdown loses nothing; a crash
//! never leaves a half-applied write (redb commits are atomic). `durable_every: Duration::ZERO`
//! makes every batch durable before it is acknowledged (still one fsync per batch, not per write).
//!
//! **Reads** are redb read transactions (MVCC snapshots, never blocked by the writer) on tokio's
//! blocking pool.
//!
//! **Notifications** are `tokio::sync::broadcast` channels per topic, created on demand and
//! removed when their last subscriber leaves; a slow subscriber never blocks the writer. A
//! subscriber that lags behind: a document watcher receives the current value (intermediate
//! versions are skipped), a chunk follower re-reads the missed chunks from the log (chunk
//! sequence numbers are expected to increase: a follower skips any not above the last it
//! delivered), a control subscriber receives an `Unavailable` item and goes on.
//!
//! **Expiry.** Runs, chunk logs and idempotency keys store their expiry time; expired records
//! read as absent and are purged by a periodic sweep in the writer.

use std::hash::Hash;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use redb::{Database, ReadTransaction, ReadableDatabase, WriteTransaction};
use tokio::sync::oneshot;

use super::{
    Cas, DocEdit, EndWritten, LogEntry, LogLimits, MessageAppend, MessageQuery, RunWrite, Store,
    StoreError, StoreResult, StoredMessage, ThreadCursor, ThreadInfo, ThreadKey, ThreadOrder,
    ThreadView, VectorBatch, VectorEntry, Versioned,
};
use job::{Ctx, Note};
use notify::{Hub, Subscription, control_stream, follow_stream, watch_stream};
use tables::Tables;
use writer::{Msg, Writer};

use docs::{Doc, read_doc};
use log::{append_log, read_log};
use runs::{delete_run, read_run};
use schema::{DOCS, RUNS, THREADS, create_tables};
use threads::owned_thread;

mod docs;
mod index;
mod job;
mod log;
mod notify;
mod runs;
mod schema;
mod scores;
mod tables;
mod threads;
mod vectors;
mod writer;

/// Most messages a thread load reads in place rather than on the blocking pool (a history
/// window is usually ten or so).
const INLINE_WINDOW: usize = 64;

/// Most bytes a job may write and still be committed in its caller's task.
const IN_PLACE_BYTES: usize = 64 << 10;

/// The size of a job whose row count a client sets: never committed in place.
const UNBOUNDED: usize = usize::MAX;

/// Most expired records purged per sweep (bounds the writer's pause).
const SWEEP_LIMIT: usize = 1000;

/// Default of [`EmbeddedOptions::cache_bytes`]: the hot part of the B-trees fits many times
/// over, where redb's own default (1 GiB) lets a busy store's RSS grow past a pod's limit.
pub const DEFAULT_CACHE_BYTES: usize = 64 << 20;

/// Tuning of an [`EmbeddedStore`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmbeddedOptions {
    /// Longest time an acknowledged write may stay non-durable (zero: every batch is durable).
    pub durable_every: Duration,
    /// Interval of the sweep that purges expired records.
    pub sweep_every: Duration,
    /// Notifications buffered per topic before a slow subscriber lags.
    pub channel_capacity: usize,
    /// Memory redb caches the file in (read pages and dirty pages not yet written): the bound
    /// on what the data adds to the RSS.
    pub cache_bytes: usize,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        Self {
            durable_every: Duration::from_millis(100),
            sweep_every: Duration::from_secs(5),
            channel_capacity: 256,
            cache_bytes: DEFAULT_CACHE_BYTES,
        }
    }
}

/// The default store: a redb file on local disk.
pub struct EmbeddedStore {
    shared: Arc<Shared>,
    writer: Writer,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedStore").finish_non_exhaustive()
    }
}

/// What readers, the writer and subscriptions share.
struct Shared {
    /// `None` once closed: closing releases the file even while handles to the store remain,
    /// so the same directory can be reopened at once (a restart in the same process).
    db: std::sync::RwLock<Option<Database>>,
    docs: Hub<DocTopic, Versioned>,
    chunks: Hub<String, LogEntry>,
    control: Hub<String, Bytes>,
}

impl Shared {
    /// Starts a read transaction; `Unavailable` once the store is closed.
    fn begin_read(&self) -> StoreResult<ReadTransaction> {
        let db = self.db.read().map_err(|_| closed())?;
        Ok(db.as_ref().ok_or_else(closed)?.begin_read()?)
    }

    /// Starts a write transaction; `Unavailable` once the store is closed.
    fn begin_write(&self) -> StoreResult<WriteTransaction> {
        let db = self.db.read().map_err(|_| closed())?;
        Ok(db.as_ref().ok_or_else(closed)?.begin_write()?)
    }

    /// Drops the database, releasing its file lock.
    fn release(&self) {
        if let Ok(mut db) = self.db.write() {
            db.take();
        }
    }
}

/// A watched document: (thread id, kind, owning resource).
type DocTopic = (String, String, String);

impl EmbeddedStore {
    /// Opens (or creates) `dir/agentd.redb` with default options.
    pub fn open(dir: &Path) -> StoreResult<Self> {
        Self::open_with(dir, EmbeddedOptions::default())
    }

    /// Opens (or creates) `dir/agentd.redb`.
    pub fn open_with(dir: &Path, options: EmbeddedOptions) -> StoreResult<Self> {
        std::fs::create_dir_all(dir).map_err(|e| {
            StoreError::Unavailable(format!("cannot create {}: {e}", dir.display()))
        })?;
        let db = redb::Builder::new()
            .set_cache_size(options.cache_bytes)
            .create(dir.join("agentd.redb"))?;
        create_tables(&db)?;
        let capacity = options.channel_capacity.max(1);
        let shared = Arc::new(Shared {
            db: std::sync::RwLock::new(Some(db)),
            docs: Hub::new(capacity),
            chunks: Hub::new(capacity),
            control: Hub::new(capacity),
        });
        let (writer, thread) = writer::spawn(shared.clone(), options)
            .map_err(|e| StoreError::Unavailable(format!("cannot start the writer: {e}")))?;
        Ok(Self {
            shared,
            writer,
            thread: Some(thread),
        })
    }

    /// Commits a small mutation (in place when the writer is idle) and returns its result.
    async fn write<T, F>(&self, op: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnMut(&Tables<'_>, &mut Ctx) -> StoreResult<T> + Send + 'static,
    {
        self.write_sized(0, op).await
    }

    /// Commits a mutation writing about `bytes` ([`UNBOUNDED`] when a client sets how many rows
    /// it touches): past [`IN_PLACE_BYTES`] always on the writer thread, so a long transaction
    /// never stalls a runtime worker.
    async fn write_sized<T, F>(&self, bytes: usize, op: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnMut(&Tables<'_>, &mut Ctx) -> StoreResult<T> + Send + 'static,
    {
        let (job, done) = job::job(op);
        self.writer.submit(job, bytes <= IN_PLACE_BYTES)?;
        done.await.map_err(|_| closed())?
    }

    /// Runs `f` in a read transaction right here, for point reads: their pages are cached (or
    /// one short `pread` away), which costs less than a hop to the blocking pool and back.
    fn read_now<T>(
        &self,
        f: impl FnOnce(&ReadTransaction, u64) -> StoreResult<T>,
    ) -> StoreResult<T> {
        let tx = self.shared.begin_read()?;
        f(&tx, now_ms())
    }

    /// Runs `f` in a read transaction on the blocking pool (reads whose size the caller sets).
    async fn read<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&ReadTransaction, u64) -> StoreResult<T> + Send + 'static,
    {
        read_with(self.shared.clone(), f).await
    }

    /// Subscribes to a topic of one of the hubs; active as soon as this returns.
    fn subscribe<K, T>(&self, hub: fn(&Shared) -> &Hub<K, T>, topic: K) -> Subscription<K, T>
    where
        K: Hash + Eq + Clone,
        T: Clone,
    {
        Subscription::new(&self.shared, hub, topic)
    }
}

impl Drop for EmbeddedStore {
    /// Stops the writer, which commits durably first; blocks for at most one batch and one fsync.
    fn drop(&mut self) {
        let (reply, _done) = oneshot::channel();
        let _ = self.writer.send(Msg::Close(reply));
        if let Some(handle) = self.thread.take()
            && handle.join().is_err()
        {
            tracing::error!("embedded store writer panicked");
        }
        self.shared.release();
    }
}

#[async_trait]
impl Store for EmbeddedStore {
    async fn ping(&self) -> StoreResult<()> {
        let (reply, done) = oneshot::channel();
        self.writer.send(Msg::Ping(reply))?;
        done.await.map_err(|_| closed())
    }

    /// Commits everything durably and stops the writer; later writes fail with `Unavailable`.
    async fn close(&self) {
        let (reply, done) = oneshot::channel();
        if self.writer.send(Msg::Close(reply)).is_err() {
            return; // already closed
        }
        // Err(_) on the channel: the writer is already gone, having flushed on its way out.
        if let Ok(Err(e)) = done.await {
            tracing::error!(error = %e, "embedded store: final durable commit failed");
        }
        self.shared.release();
    }

    async fn load_thread(
        &self,
        key: &ThreadKey,
        last_messages: usize,
        docs: &[&str],
    ) -> StoreResult<ThreadView> {
        let key = key.clone();
        let kinds: Vec<String> = docs.iter().map(|kind| kind.to_string()).collect();
        let read = move |tx: &ReadTransaction, _| threads::load(tx, &key, last_messages, &kinds);
        if last_messages <= INLINE_WINDOW {
            self.read_now(read)
        } else {
            self.read(read).await
        }
    }

    async fn get_doc(&self, key: &ThreadKey, kind: &str) -> StoreResult<Option<Versioned>> {
        self.read_now(|tx, _| {
            owned_thread(&tx.open_table(THREADS)?, key)?;
            Ok(read_doc(&tx.open_table(DOCS)?, &key.thread_id, kind)?.map(Doc::versioned))
        })
    }

    async fn cas_doc(
        &self,
        key: &ThreadKey,
        kind: &str,
        expected: u64,
        value: Bytes,
    ) -> StoreResult<Cas> {
        let (key, kind) = (key.clone(), kind.to_string());
        self.write_sized(value.len(), move |tx, ctx| {
            docs::cas_thread_doc(tx, ctx, &key, &kind, expected, &value)
        })
        .await
    }

    /// Runs `edit` inside the write transaction: no separate read, no retry.
    async fn update_doc(&self, key: &ThreadKey, kind: &str, mut edit: DocEdit) -> StoreResult<u64> {
        let (key, kind) = (key.clone(), kind.to_string());
        self.write(move |tx, ctx| docs::update_thread_doc(tx, ctx, &key, &kind, &mut edit))
            .await
    }

    async fn watch_doc(
        &self,
        key: &ThreadKey,
        kind: &str,
    ) -> StoreResult<BoxStream<'static, StoreResult<Versioned>>> {
        let topic = (
            key.thread_id.clone(),
            kind.to_string(),
            key.resource_id.clone(),
        );
        // The topic names the resource, so another resource's watcher never sees these values.
        let subscription = self.subscribe(|s| &s.docs, topic);
        self.read_now(|tx, _| owned_thread(&tx.open_table(THREADS)?, key).map(drop))?;
        Ok(watch_stream(subscription))
    }

    async fn append_messages(
        &self,
        key: &ThreadKey,
        thread_meta: Option<Bytes>,
        messages: Vec<Bytes>,
    ) -> StoreResult<u64> {
        let key = key.clone();
        let bytes = messages.iter().map(Bytes::len).sum();
        self.write_sized(bytes, move |tx, ctx| {
            threads::append_messages(tx, ctx.now_ms, &key, thread_meta.as_deref(), &messages)
        })
        .await
    }

    /// Both in one write step: the owner and the record's version are checked before either
    /// is written.
    async fn end_run(&self, messages: &MessageAppend, run: RunWrite) -> StoreResult<EndWritten> {
        let bytes = messages.messages.iter().map(Bytes::len).sum::<usize>() + run.value.len();
        let messages = messages.clone();
        self.write_sized(bytes, move |tx, ctx| {
            runs::end_run(tx, ctx, &messages, &run)
        })
        .await
    }

    async fn get_run(&self, run_id: &str) -> StoreResult<Option<Versioned>> {
        self.read_now(|tx, now| read_run(&tx.open_table(RUNS)?, run_id, now))
    }

    async fn cas_run(
        &self,
        run_id: &str,
        expected: u64,
        value: Bytes,
        ttl: Duration,
        lease_until_ms: Option<i64>,
    ) -> StoreResult<Cas> {
        let run = RunWrite {
            run_id: run_id.to_string(),
            expected,
            value,
            ttl,
            lease_until_ms,
        };
        self.write_sized(run.value.len(), move |tx, ctx| runs::cas_run(tx, ctx, &run))
            .await
    }

    async fn expired_leases(&self, now_ms: i64, limit: usize) -> StoreResult<Vec<String>> {
        let now = u64::try_from(now_ms).unwrap_or(0);
        self.read(move |tx, clock_ms| runs::expired_leases(tx, now, clock_ms, limit))
            .await
    }

    async fn append_chunks(
        &self,
        run_id: &str,
        chunks: Vec<LogEntry>,
        limits: LogLimits,
    ) -> StoreResult<()> {
        let run_id = run_id.to_string();
        let bytes = chunks.iter().map(|(_, chunk)| chunk.len()).sum();
        self.write_sized(bytes, move |tx, ctx| {
            append_log(tx, ctx, &run_id, &chunks, limits)?;
            ctx.notes.push(Note::Chunks(run_id.clone(), chunks.clone()));
            Ok(())
        })
        .await
    }

    async fn read_chunks(&self, run_id: &str, after_seq: u64) -> StoreResult<Vec<LogEntry>> {
        let run_id = run_id.to_string();
        self.read(move |tx, now| read_log(tx, &run_id, Some(after_seq), now))
            .await
    }

    async fn follow_chunks(
        &self,
        run_id: &str,
    ) -> StoreResult<BoxStream<'static, StoreResult<LogEntry>>> {
        let subscription = self.subscribe(|s| &s.chunks, run_id.to_string());
        Ok(follow_stream(subscription))
    }

    async fn claim_key(
        &self,
        key: &str,
        value: Bytes,
        ttl: Duration,
    ) -> StoreResult<Option<Bytes>> {
        let key = key.to_string();
        self.write_sized(value.len(), move |tx, ctx| {
            runs::claim(tx, ctx, &key, &value, ttl)
        })
        .await
    }

    async fn publish_control(&self, run_id: &str, message: Bytes) -> StoreResult<()> {
        // Control messages are not stored: only live subscribers of this process exist.
        self.shared.control.publish(run_id, message);
        Ok(())
    }

    async fn subscribe_control(
        &self,
        run_id: &str,
    ) -> StoreResult<BoxStream<'static, StoreResult<Bytes>>> {
        let subscription = self.subscribe(|s| &s.control, run_id.to_string());
        Ok(control_stream(subscription))
    }

    async fn index_set(&self, index: &str, member: &str, present: bool) -> StoreResult<()> {
        let (index, member) = (index.to_string(), member.to_string());
        self.write(move |tx, _| index::set(tx, &index, &member, present))
            .await
    }

    async fn index_members(&self, index: &str) -> StoreResult<Vec<String>> {
        let index = index.to_string();
        self.read(move |tx, _| index::members(tx, &index)).await
    }

    async fn append_score(&self, lists: &[String], score: Bytes) -> StoreResult<()> {
        let lists = lists.to_vec();
        self.write(move |tx, _| scores::append(tx, &lists, &score))
            .await
    }

    async fn read_scores(&self, list: &str, from: u64, limit: usize) -> StoreResult<Vec<Bytes>> {
        let list = list.to_string();
        self.read(move |tx, _| scores::read(tx, &list, from, limit))
            .await
    }

    async fn append_vectors(
        &self,
        resource_id: &str,
        entries: Vec<VectorEntry>,
    ) -> StoreResult<()> {
        let resource_id = resource_id.to_string();
        self.write_sized(UNBOUNDED, move |tx, _| {
            vectors::append(tx, &resource_id, &entries)
        })
        .await
    }

    async fn read_vectors(
        &self,
        resource_id: &str,
        after: u64,
        limit: usize,
    ) -> StoreResult<VectorBatch> {
        let resource_id = resource_id.to_string();
        self.read(move |tx, _| vectors::read(tx, &resource_id, after, limit))
            .await
    }

    async fn delete_vectors(
        &self,
        resource_id: &str,
        thread_id: &str,
        positions: Option<&[u64]>,
    ) -> StoreResult<u64> {
        let (resource_id, thread_id) = (resource_id.to_string(), thread_id.to_string());
        let positions = positions.map(<[u64]>::to_vec);
        self.write_sized(UNBOUNDED, move |tx, _| {
            vectors::delete(tx, &resource_id, &thread_id, positions.as_deref())
        })
        .await
    }

    async fn get_thread(&self, key: &ThreadKey) -> StoreResult<Option<ThreadInfo>> {
        self.read_now(|tx, _| threads::get(tx, key))
    }

    async fn cas_thread_meta(
        &self,
        key: &ThreadKey,
        expected: Option<Bytes>,
        meta: Bytes,
    ) -> StoreResult<Option<bool>> {
        let key = key.clone();
        self.write_sized(meta.len(), move |tx, ctx| {
            threads::cas_meta(tx, ctx.now_ms, &key, expected.as_deref(), &meta)
        })
        .await
    }

    async fn list_threads(
        &self,
        resource_id: &str,
        order: ThreadOrder,
        cursor: Option<ThreadCursor>,
        limit: usize,
    ) -> StoreResult<Vec<ThreadInfo>> {
        let resource_id = resource_id.to_string();
        self.read(move |tx, _| threads::list(tx, &resource_id, order, cursor.as_ref(), limit))
            .await
    }

    async fn read_messages(
        &self,
        key: &ThreadKey,
        query: MessageQuery,
    ) -> StoreResult<Option<Vec<StoredMessage>>> {
        let key = key.clone();
        self.read(move |tx, _| threads::read_messages(tx, &key, query))
            .await
    }

    async fn delete_messages(&self, key: &ThreadKey, positions: Vec<u64>) -> StoreResult<u64> {
        let key = key.clone();
        self.write_sized(UNBOUNDED, move |tx, ctx| {
            threads::delete_messages(tx, ctx.now_ms, &key, &positions)
        })
        .await
    }

    async fn delete_thread(&self, key: &ThreadKey, docs: &[&str]) -> StoreResult<bool> {
        let key = key.clone();
        let kinds: Vec<String> = docs.iter().map(|kind| kind.to_string()).collect();
        self.write_sized(UNBOUNDED, move |tx, _| threads::delete(tx, &key, &kinds))
            .await
    }

    async fn get_resource_doc(
        &self,
        resource_id: &str,
        kind: &str,
    ) -> StoreResult<Option<Versioned>> {
        self.read_now(|tx, _| threads::get_resource_doc(tx, resource_id, kind))
    }

    async fn cas_resource_doc(
        &self,
        resource_id: &str,
        kind: &str,
        expected: u64,
        value: Bytes,
    ) -> StoreResult<Cas> {
        let (resource_id, kind) = (resource_id.to_string(), kind.to_string());
        self.write_sized(value.len(), move |tx, ctx| {
            threads::cas_resource_doc(tx, ctx.now_ms, &resource_id, &kind, expected, &value)
        })
        .await
    }

    async fn delete_run(&self, run_id: &str) -> StoreResult<()> {
        let run_id = run_id.to_string();
        self.write(move |tx, _| delete_run(tx, &run_id)).await
    }
}

fn now_ms() -> u64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX)
}

fn closed() -> StoreError {
    StoreError::Unavailable("embedded store is closed".into())
}

/// Runs `f` in a read transaction on the blocking pool.
async fn read_with<T, F>(shared: Arc<Shared>, f: F) -> StoreResult<T>
where
    T: Send + 'static,
    F: FnOnce(&ReadTransaction, u64) -> StoreResult<T> + Send + 'static,
{
    tokio::task::spawn_blocking(move || {
        let tx = shared.begin_read()?;
        f(&tx, now_ms())
    })
    .await
    .map_err(|e| StoreError::Unavailable(format!("read task failed: {e}")))?
}

/// Storage failures are outages: nothing was committed.
macro_rules! unavailable_from {
    ($($error:ty),* $(,)?) => {$(
        impl From<$error> for StoreError {
            fn from(e: $error) -> Self {
                StoreError::Unavailable(e.to_string())
            }
        }
    )*};
}

unavailable_from!(
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::SetDurabilityError,
);

#[cfg(test)]
mod tests;
