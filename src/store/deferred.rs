//! A store that was not reachable when the server started: the server serves anyway (health
//! NOT_SERVING, store calls `UNAVAILABLE`) while a background task retries with backoff; once
//! connected, every call goes to the real store. Only used when the first connection fails, so
//! a store that is up at start costs nothing here.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{
    Cas, DocEdit, EndWritten, LogEntry, LogLimits, MessageAppend, MessageQuery, RunWrite, Store,
    StoreError, StoreResult, StoredMessage, ThreadCursor, ThreadInfo, ThreadKey, ThreadOrder,
    ThreadView, VectorBatch, VectorEntry, Versioned,
};

/// First retry delay; doubled after each failure up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
/// Longest wait between attempts, so the server is SERVING soon after the store comes up.
const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// Connects a store (one attempt).
pub type Connect =
    Arc<dyn Fn() -> BoxFuture<'static, anyhow::Result<Arc<dyn Store>>> + Send + Sync>;

/// A store connected in the background; see the [module docs](self).
pub struct Deferred {
    inner: Arc<OnceLock<Arc<dyn Store>>>,
    what: String,
}

impl Deferred {
    /// Starts retrying `connect` until it succeeds or `stop` is cancelled; `connected` is
    /// notified when it succeeds (the health monitor probes at once). `what` names the store in
    /// errors ("Redis at redis://…").
    pub fn spawn(
        connect: Connect,
        what: String,
        connected: Arc<Notify>,
        stop: CancellationToken,
    ) -> Self {
        let inner = Arc::new(OnceLock::new());
        let slot = inner.clone();
        let name = what.clone();
        tokio::spawn(async move {
            let mut backoff = FIRST_BACKOFF;
            let mut attempts = 0u64;
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(backoff) => {}
                }
                attempts += 1;
                match connect().await {
                    Ok(store) => {
                        let _ = slot.set(store);
                        info!(store = %name, attempts, "store connected");
                        connected.notify_one();
                        return;
                    }
                    // Log the first failures and then every 30th (about every 15 s).
                    Err(e) if attempts < 4 || attempts.is_multiple_of(30) => {
                        warn!(store = %name, attempts, error = %format!("{e:#}"), "store still unreachable; retrying");
                    }
                    Err(_) => {}
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        });
        Self { inner, what }
    }

    /// The connected store, or `UNAVAILABLE` naming it.
    fn store(&self) -> StoreResult<&Arc<dyn Store>> {
        self.inner
            .get()
            .ok_or_else(|| StoreError::Unavailable(format!("{} is not reachable yet", self.what)))
    }
}

#[async_trait]
impl Store for Deferred {
    async fn ping(&self) -> StoreResult<()> {
        self.store()?.ping().await
    }

    async fn close(&self) {
        if let Ok(store) = self.store() {
            store.close().await;
        }
    }

    async fn load_thread(
        &self,
        key: &ThreadKey,
        last_messages: usize,
        docs: &[&str],
    ) -> StoreResult<ThreadView> {
        self.store()?.load_thread(key, last_messages, docs).await
    }

    async fn get_doc(&self, key: &ThreadKey, kind: &str) -> StoreResult<Option<Versioned>> {
        self.store()?.get_doc(key, kind).await
    }

    async fn cas_doc(
        &self,
        key: &ThreadKey,
        kind: &str,
        expected: u64,
        value: Bytes,
    ) -> StoreResult<Cas> {
        self.store()?.cas_doc(key, kind, expected, value).await
    }

    async fn update_doc(&self, key: &ThreadKey, kind: &str, edit: DocEdit) -> StoreResult<u64> {
        self.store()?.update_doc(key, kind, edit).await
    }

    async fn watch_doc(
        &self,
        key: &ThreadKey,
        kind: &str,
    ) -> StoreResult<BoxStream<'static, StoreResult<Versioned>>> {
        self.store()?.watch_doc(key, kind).await
    }

    async fn append_messages(
        &self,
        key: &ThreadKey,
        thread_meta: Option<Bytes>,
        messages: Vec<Bytes>,
    ) -> StoreResult<u64> {
        self.store()?
            .append_messages(key, thread_meta, messages)
            .await
    }

    async fn end_run(&self, messages: &MessageAppend, run: RunWrite) -> StoreResult<EndWritten> {
        self.store()?.end_run(messages, run).await
    }

    async fn get_thread(&self, key: &ThreadKey) -> StoreResult<Option<ThreadInfo>> {
        self.store()?.get_thread(key).await
    }

    async fn cas_thread_meta(
        &self,
        key: &ThreadKey,
        expected: Option<Bytes>,
        meta: Bytes,
    ) -> StoreResult<Option<bool>> {
        self.store()?.cas_thread_meta(key, expected, meta).await
    }

    async fn list_threads(
        &self,
        resource_id: &str,
        order: ThreadOrder,
        cursor: Option<ThreadCursor>,
        limit: usize,
    ) -> StoreResult<Vec<ThreadInfo>> {
        self.store()?
            .list_threads(resource_id, order, cursor, limit)
            .await
    }

    async fn read_messages(
        &self,
        key: &ThreadKey,
        query: MessageQuery,
    ) -> StoreResult<Option<Vec<StoredMessage>>> {
        self.store()?.read_messages(key, query).await
    }

    async fn delete_messages(&self, key: &ThreadKey, positions: Vec<u64>) -> StoreResult<u64> {
        self.store()?.delete_messages(key, positions).await
    }

    async fn delete_thread(&self, key: &ThreadKey, docs: &[&str]) -> StoreResult<bool> {
        self.store()?.delete_thread(key, docs).await
    }

    async fn get_resource_doc(
        &self,
        resource_id: &str,
        kind: &str,
    ) -> StoreResult<Option<Versioned>> {
        self.store()?.get_resource_doc(resource_id, kind).await
    }

    async fn cas_resource_doc(
        &self,
        resource_id: &str,
        kind: &str,
        expected: u64,
        value: Bytes,
    ) -> StoreResult<Cas> {
        self.store()?
            .cas_resource_doc(resource_id, kind, expected, value)
            .await
    }

    async fn delete_run(&self, run_id: &str) -> StoreResult<()> {
        self.store()?.delete_run(run_id).await
    }

    async fn get_run(&self, run_id: &str) -> StoreResult<Option<Versioned>> {
        self.store()?.get_run(run_id).await
    }

    async fn cas_run(
        &self,
        run_id: &str,
        expected: u64,
        value: Bytes,
        ttl: Duration,
        lease_until_ms: Option<i64>,
    ) -> StoreResult<Cas> {
        self.store()?
            .cas_run(run_id, expected, value, ttl, lease_until_ms)
            .await
    }

    async fn expired_leases(&self, now_ms: i64, limit: usize) -> StoreResult<Vec<String>> {
        self.store()?.expired_leases(now_ms, limit).await
    }

    async fn append_chunks(
        &self,
        run_id: &str,
        chunks: Vec<LogEntry>,
        limits: LogLimits,
    ) -> StoreResult<()> {
        self.store()?.append_chunks(run_id, chunks, limits).await
    }

    fn seals_logs(&self) -> bool {
        self.store().is_ok_and(|s| s.seals_logs())
    }

    async fn seal_chunks(
        &self,
        run_id: &str,
        last: Vec<LogEntry>,
        whole: Vec<LogEntry>,
        limits: LogLimits,
    ) -> StoreResult<()> {
        self.store()?.seal_chunks(run_id, last, whole, limits).await
    }

    async fn read_chunks(&self, run_id: &str, after_seq: u64) -> StoreResult<Vec<LogEntry>> {
        self.store()?.read_chunks(run_id, after_seq).await
    }

    async fn follow_chunks(
        &self,
        run_id: &str,
    ) -> StoreResult<BoxStream<'static, StoreResult<LogEntry>>> {
        self.store()?.follow_chunks(run_id).await
    }

    async fn claim_key(
        &self,
        key: &str,
        value: Bytes,
        ttl: Duration,
    ) -> StoreResult<Option<Bytes>> {
        self.store()?.claim_key(key, value, ttl).await
    }

    async fn publish_control(&self, run_id: &str, message: Bytes) -> StoreResult<()> {
        self.store()?.publish_control(run_id, message).await
    }

    async fn subscribe_control(
        &self,
        run_id: &str,
    ) -> StoreResult<BoxStream<'static, StoreResult<Bytes>>> {
        self.store()?.subscribe_control(run_id).await
    }

    async fn index_set(&self, index: &str, member: &str, present: bool) -> StoreResult<()> {
        self.store()?.index_set(index, member, present).await
    }

    async fn index_members(&self, index: &str) -> StoreResult<Vec<String>> {
        self.store()?.index_members(index).await
    }

    async fn append_score(&self, lists: &[String], score: Bytes) -> StoreResult<()> {
        self.store()?.append_score(lists, score).await
    }

    async fn read_scores(&self, list: &str, from: u64, limit: usize) -> StoreResult<Vec<Bytes>> {
        self.store()?.read_scores(list, from, limit).await
    }

    async fn append_vectors(
        &self,
        resource_id: &str,
        entries: Vec<VectorEntry>,
    ) -> StoreResult<()> {
        self.store()?.append_vectors(resource_id, entries).await
    }

    async fn read_vectors(
        &self,
        resource_id: &str,
        after: u64,
        limit: usize,
    ) -> StoreResult<VectorBatch> {
        self.store()?.read_vectors(resource_id, after, limit).await
    }

    async fn delete_vectors(
        &self,
        resource_id: &str,
        thread_id: &str,
        positions: Option<&[u64]>,
    ) -> StoreResult<u64> {
        self.store()?
            .delete_vectors(resource_id, thread_id, positions)
            .await
    }
}
