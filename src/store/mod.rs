//! Persistent state behind one trait: threads, their documents (the task list), messages, runs,
//! run chunk logs, idempotency keys and live notifications. Two implementations pass one test
//! suite: [`redis::RedisStore`] (production) and [`embedded::EmbeddedStore`] (default, on disk).
//!
//! Values are opaque bytes (JSON written by the layers above) so the store holds no domain rules;
//! it only guarantees atomicity: ownership checks, compare-and-set and appends happen in one
//! store-side step (a Lua script on Redis, one write transaction on the embedded store).

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;

pub mod deferred;
pub mod embedded;
pub mod redis;

/// Identifies a thread together with the resource that claims it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ThreadKey {
    /// The thread id (unique across resources: a thread has one owner).
    pub thread_id: String,
    /// The resource (user, tenant…) that owns or claims the thread.
    pub resource_id: String,
}

/// A value with its version; versions start at 1 and grow by one per write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned {
    /// Version of this value (0 is never stored: it means "absent" in a CAS).
    pub version: u64,
    /// The stored bytes.
    pub value: Bytes,
}

/// Outcome of a compare-and-set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cas {
    /// Written; carries the new version.
    Written(u64),
    /// The stored version differed; carries the current value so a retry needs no extra read.
    Conflict(Option<Versioned>),
}

/// Computes a document's new value from its current one for [`Store::update_doc`].
pub type DocEdit = Box<dyn FnMut(Option<&Versioned>) -> StoreResult<Option<Bytes>> + Send>;

/// Messages to append to a thread, as [`Store::append_messages`] takes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageAppend {
    /// The thread, created for `key.resource_id` when absent.
    pub key: ThreadKey,
    /// The thread's metadata (title, metadata as JSON), stored when given.
    pub thread_meta: Option<Bytes>,
    /// The messages, oldest first.
    pub messages: Vec<Bytes>,
}

/// A compare-and-set of a run record, as [`Store::cas_run`] takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunWrite {
    /// The run.
    pub run_id: String,
    /// The stored version it replaces (0 = absent).
    pub expected: u64,
    /// The new record.
    pub value: Bytes,
    /// How long the record lives after this write.
    pub ttl: Duration,
    /// The lease's end while a replica executes the run; `None` takes it off the lease list.
    pub lease_until_ms: Option<i64>,
}

/// What [`Store::end_run`] wrote.
#[derive(Debug)]
pub struct EndWritten {
    /// Position of the first message appended; `None` when none was (the record conflicted
    /// in a store that writes both at once).
    pub first_message: Option<u64>,
    /// The record's compare-and-set. An error only when the messages were appended and the
    /// record's write, a second call in the default implementation, failed.
    pub record: StoreResult<Cas>,
}

/// What a run needs from its thread before the first step, read in one round trip.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadView {
    /// Whether the thread exists.
    pub exists: bool,
    /// The last `last_messages` messages, oldest first.
    pub messages: Vec<Bytes>,
    /// The requested documents, in the order asked.
    pub docs: Vec<Option<Versioned>>,
}

/// Bounds of a run's chunk log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogLimits {
    /// At most this many chunks are kept (the oldest are dropped).
    pub max_chunks: usize,
    /// The log expires this long after its last append.
    pub ttl: Duration,
}

/// What the store knows of a thread besides its messages and documents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadInfo {
    /// The thread id.
    pub thread_id: String,
    /// The owning resource.
    pub resource_id: String,
    /// Creation time, Unix milliseconds.
    pub created_ms: u64,
    /// Time of the last write to the thread (messages, documents, metadata), Unix milliseconds.
    pub updated_ms: u64,
    /// How many messages it holds.
    pub message_count: u64,
    /// The opaque metadata (title, metadata as JSON) written with the thread, if any.
    pub meta: Option<Bytes>,
}

/// The order of a resource's thread listing (newest first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadOrder {
    /// By creation time.
    Created,
    /// By the time of the last write.
    Updated,
}

/// A position in a thread listing: the sort time and thread id of the last thread returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadCursor {
    /// The sort time (creation or update, per the order) of the last thread returned.
    pub time_ms: u64,
    /// Its id (ties of one millisecond are ordered by id, descending).
    pub thread_id: String,
}

/// Which of a thread's messages to read: positions in `from..to`, at most `limit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageQuery {
    /// Lowest position, inclusive.
    pub from: u64,
    /// Highest position, exclusive.
    pub to: u64,
    /// At most this many messages.
    pub limit: usize,
    /// The newest `limit` of the range (returned newest first) instead of the oldest.
    pub newest_first: bool,
}

/// A stored message: its position in the thread (immutable, never reused) and its bytes.
pub type StoredMessage = (u64, Bytes);

/// One chunk of a run's log: its sequence number and encoded bytes.
pub type LogEntry = (u64, Bytes);

/// One message embedding in a resource's vector log.
#[derive(Clone, Debug, PartialEq)]
pub struct VectorEntry {
    /// The thread holding the message.
    pub thread_id: String,
    /// The message's position in its thread.
    pub position: u64,
    /// The embedding as little-endian `f32`s (normalized by the caller).
    pub vector: Bytes,
}

/// A page of a resource's vector log.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VectorBatch {
    /// Bumped by every deletion: a reader holding entries of an older epoch must reload.
    pub epoch: u64,
    /// Entries with a sequence number above the one asked for, oldest first.
    pub entries: Vec<(u64, VectorEntry)>,
    /// The highest sequence number ever assigned in the log (0: none).
    pub last_seq: u64,
}

/// Errors of the store; mapped once to gRPC statuses at the edge.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The thread exists and belongs to another resource; nothing was touched.
    #[error("thread \"{thread_id}\" belongs to another resource")]
    WrongOwner {
        /// The thread that was claimed.
        thread_id: String,
    },
    /// The store cannot be reached or failed; nothing was half-written.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// A stored record could not be decoded.
    #[error("corrupt record: {0}")]
    Corrupt(String),
}

/// Result alias for store operations.
pub type StoreResult<T> = Result<T, StoreError>;

/// The state store. Every method is one round trip on Redis and one transaction on disk.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Checks that the store answers (health).
    async fn ping(&self) -> StoreResult<()>;

    /// Flushes and releases resources at shutdown (the embedded store makes its last commit
    /// durable here).
    async fn close(&self) {}

    /// Reads the thread's last `last_messages` messages and the named documents at once.
    /// A thread owned by another resource is `WrongOwner`; an absent one is `exists: false`.
    async fn load_thread(
        &self,
        key: &ThreadKey,
        last_messages: usize,
        docs: &[&str],
    ) -> StoreResult<ThreadView>;

    /// Reads one document of a thread (ownership checked; absent thread or doc is `None`).
    async fn get_doc(&self, key: &ThreadKey, kind: &str) -> StoreResult<Option<Versioned>>;

    /// Writes a document if its stored version is `expected` (0 = absent), creating the thread
    /// for `key.resource_id` when absent, and notifies watchers of the new value.
    async fn cas_doc(
        &self,
        key: &ThreadKey,
        kind: &str,
        expected: u64,
        value: Bytes,
    ) -> StoreResult<Cas>;

    /// Rewrites a document from its current value in one atomic step: `edit` sees the stored
    /// value (`None` when absent) and returns the new one, or `None` to leave it as is. Returns
    /// the document's version afterwards (0 = absent). Same ownership, thread creation and
    /// notifications as [`Store::cas_doc`]; `edit` may run more than once, and may first run on
    /// a guess of the value: only its last run counts, one whose value was written or that saw
    /// the stored value.
    ///
    /// The default reads, then writes with compare-and-set, retrying on a concurrent change; a
    /// store that can run `edit` inside its own write step overrides it to save the read (the
    /// embedded store), and one that can check a guess in its write does too (Redis).
    async fn update_doc(&self, key: &ThreadKey, kind: &str, mut edit: DocEdit) -> StoreResult<u64> {
        let mut current = self.get_doc(key, kind).await?;
        loop {
            let expected = current.as_ref().map_or(0, |doc| doc.version);
            let Some(value) = edit(current.as_ref())? else {
                return Ok(expected);
            };
            match self.cas_doc(key, kind, expected, value).await? {
                Cas::Written(version) => return Ok(version),
                Cas::Conflict(now) => current = now,
            }
        }
    }

    /// Streams every new value of a document written after the call (any replica).
    async fn watch_doc(
        &self,
        key: &ThreadKey,
        kind: &str,
    ) -> StoreResult<BoxStream<'static, StoreResult<Versioned>>>;

    /// Appends messages to a thread, creating it for `key.resource_id` when absent;
    /// `thread_meta` (title, metadata as JSON) is stored when given. Returns the position of
    /// the first message appended: positions are contiguous per call and never reused, also
    /// after deletions.
    async fn append_messages(
        &self,
        key: &ThreadKey,
        thread_meta: Option<Bytes>,
        messages: Vec<Bytes>,
    ) -> StoreResult<u64>;

    /// A run's last writes in one step where the store can: `messages` appended and the run's
    /// record written by compare-and-set. `Err`: nothing was written. The embedded store and
    /// one Redis node check both first, so a conflicting record appends nothing; the default
    /// (a Redis Cluster, where a thread and a run live in different slots) appends, then
    /// writes the record, in two calls.
    async fn end_run(&self, messages: &MessageAppend, run: RunWrite) -> StoreResult<EndWritten> {
        end_run_in_two_calls(self, messages, run).await
    }

    /// Reads a thread's summary (ownership checked; `None` when absent).
    async fn get_thread(&self, key: &ThreadKey) -> StoreResult<Option<ThreadInfo>>;

    /// Replaces the thread's metadata if it is still `expected` (byte for byte; `None` = none
    /// stored). `Ok(None)`: the thread is absent; `Ok(Some(false))`: it changed meanwhile.
    async fn cas_thread_meta(
        &self,
        key: &ThreadKey,
        expected: Option<Bytes>,
        meta: Bytes,
    ) -> StoreResult<Option<bool>>;

    /// Lists a resource's threads newest first, after `cursor`, at most `limit`.
    async fn list_threads(
        &self,
        resource_id: &str,
        order: ThreadOrder,
        cursor: Option<ThreadCursor>,
        limit: usize,
    ) -> StoreResult<Vec<ThreadInfo>>;

    /// Reads messages of a thread by position (`None` when the thread is absent).
    async fn read_messages(
        &self,
        key: &ThreadKey,
        query: MessageQuery,
    ) -> StoreResult<Option<Vec<StoredMessage>>>;

    /// Deletes the messages at `positions` at once; returns how many existed.
    async fn delete_messages(&self, key: &ThreadKey, positions: Vec<u64>) -> StoreResult<u64>;

    /// Deletes a thread at once: its record, messages, the named documents and its place in
    /// the resource's listing. Returns whether it existed.
    async fn delete_thread(&self, key: &ThreadKey, docs: &[&str]) -> StoreResult<bool>;

    /// Reads a document of a resource (shared by all its threads), e.g. working memory.
    async fn get_resource_doc(
        &self,
        resource_id: &str,
        kind: &str,
    ) -> StoreResult<Option<Versioned>>;

    /// Writes a resource document if its stored version is `expected` (0 = absent).
    async fn cas_resource_doc(
        &self,
        resource_id: &str,
        kind: &str,
        expected: u64,
        value: Bytes,
    ) -> StoreResult<Cas>;

    /// Deletes a run's record and chunk log (a deleted thread's suspended runs).
    async fn delete_run(&self, run_id: &str) -> StoreResult<()>;

    /// Reads a run record.
    async fn get_run(&self, run_id: &str) -> StoreResult<Option<Versioned>>;

    /// Writes a run record if its version is `expected` (0 = absent); it expires after `ttl`.
    /// `lease_until_ms` is set while a replica executes the run: the Unix millisecond by which
    /// it must write the record again (renew), after which [`Store::expired_leases`] lists the
    /// run for a takeover; `None` takes the run off that list.
    async fn cas_run(
        &self,
        run_id: &str,
        expected: u64,
        value: Bytes,
        ttl: Duration,
        lease_until_ms: Option<i64>,
    ) -> StoreResult<Cas>;

    /// Runs whose lease ended before `now_ms`, at most `limit`, the longest expired first:
    /// candidates for a takeover (their record says whether one is still needed). A run whose
    /// record is gone (deleted, expired) is dropped from the list rather than returned.
    async fn expired_leases(&self, now_ms: i64, limit: usize) -> StoreResult<Vec<String>>;

    /// Appends chunks to a run's bounded log and publishes them to followers.
    async fn append_chunks(
        &self,
        run_id: &str,
        chunks: Vec<LogEntry>,
        limits: LogLimits,
    ) -> StoreResult<()>;

    /// Whether `seal_chunks` keeps a sealed form (so a log writer should keep the whole log
    /// to give it); false by default.
    fn seals_logs(&self) -> bool {
        false
    }

    /// Appends a run's last chunks (`last`, published to followers as by `append_chunks`) and
    /// gives the whole log (`whole`, every chunk from the first, `last` included) so a store
    /// can keep a finished log in a compact form. Read as before with `read_chunks`. The
    /// default appends `last` and keeps the log as it is.
    async fn seal_chunks(
        &self,
        run_id: &str,
        last: Vec<LogEntry>,
        whole: Vec<LogEntry>,
        limits: LogLimits,
    ) -> StoreResult<()> {
        drop(whole);
        self.append_chunks(run_id, last, limits).await
    }

    /// Reads the logged chunks with a sequence number above `after_seq`, in order.
    async fn read_chunks(&self, run_id: &str, after_seq: u64) -> StoreResult<Vec<LogEntry>>;

    /// Streams chunks appended after the call; callers subscribe first, then read the log,
    /// and drop duplicates by sequence number.
    async fn follow_chunks(
        &self,
        run_id: &str,
    ) -> StoreResult<BoxStream<'static, StoreResult<LogEntry>>>;

    /// Claims an idempotency key for `ttl`: `None` when claimed now, else the value stored by
    /// the first claimer.
    async fn claim_key(&self, key: &str, value: Bytes, ttl: Duration)
    -> StoreResult<Option<Bytes>>;

    /// Publishes a control message (e.g. abort) for a run to every replica.
    async fn publish_control(&self, run_id: &str, message: Bytes) -> StoreResult<()>;

    /// Streams control messages for a run published after the call.
    async fn subscribe_control(
        &self,
        run_id: &str,
    ) -> StoreResult<BoxStream<'static, StoreResult<Bytes>>>;

    /// Adds or removes `member` in the named index set (e.g. runs awaiting approval per thread).
    async fn index_set(&self, index: &str, member: &str, present: bool) -> StoreResult<()>;

    /// Lists the members of an index set.
    async fn index_members(&self, index: &str) -> StoreResult<Vec<String>>;

    /// Appends `score` (an encoded score record) to each named score list (a run's, a thread's,
    /// an agent's): lists only grow, so a position read once stays that record.
    async fn append_score(&self, lists: &[String], score: Bytes) -> StoreResult<()>;

    /// At most `limit` records of a score list from position `from` (0-based, oldest first).
    async fn read_scores(&self, list: &str, from: u64, limit: usize) -> StoreResult<Vec<Bytes>>;

    /// Appends message embeddings to the resource's vector log in one step, each given the
    /// next sequence number of that log.
    async fn append_vectors(&self, resource_id: &str, entries: Vec<VectorEntry>)
    -> StoreResult<()>;

    /// Reads at most `limit` entries of the resource's vector log with a sequence number above
    /// `after`, with the log's epoch and last sequence number read in the same snapshot.
    async fn read_vectors(
        &self,
        resource_id: &str,
        after: u64,
        limit: usize,
    ) -> StoreResult<VectorBatch>;

    /// Deletes a thread's entries from the resource's vector log (only those at `positions`
    /// when given) and bumps the log's epoch when any existed; returns how many were deleted.
    async fn delete_vectors(
        &self,
        resource_id: &str,
        thread_id: &str,
        positions: Option<&[u64]>,
    ) -> StoreResult<u64>;
}

/// [`Store::end_run`] as two calls: the messages appended, then the record written.
pub async fn end_run_in_two_calls<S: Store + ?Sized>(
    store: &S,
    messages: &MessageAppend,
    run: RunWrite,
) -> StoreResult<EndWritten> {
    let first = store
        .append_messages(
            &messages.key,
            messages.thread_meta.clone(),
            messages.messages.clone(),
        )
        .await?;
    let record = store
        .cas_run(
            &run.run_id,
            run.expected,
            run.value,
            run.ttl,
            run.lease_until_ms,
        )
        .await;
    Ok(EndWritten {
        first_message: Some(first),
        record,
    })
}
