//! Redis implementation of [`Store`]: one round trip per call (a Lua script wherever a check
//! and a write must be atomic), hash-tagged keys and pub/sub notifications, on one node, a Redis
//! Cluster or a master found through Sentinel (`target.rs` has the URL forms).
//!
//! Key layout (every key of a thread or run shares one `{hash tag}`, so every script touches
//! one slot; on one node the thread scripts also update the resource's listings, on a cluster
//! the store does that in a second call on the resource's slot — see `scripts.rs`):
//!
//! | key                                  | type | content                                |
//! |--------------------------------------|------|----------------------------------------|
//! | `agentd:{t:<thread>}:meta`           | hash | owner, created_ms, updated_ms, meta    |
//! | `agentd:{t:<thread>}:doc:<kind>`     | hash | v, value, created_ms, updated_ms       |
//! | `agentd:{t:<thread>}:msgs`           | list | messages, oldest first                 |
//! | `agentd:{r:<run>}:run`               | hash | v, value, created_ms, updated_ms (TTL) |
//! | `agentd:{r:<run>}:log`               | list | `<seq>:<bytes>` entries (bounded, TTL) |
//! | `agentd:{k:<key>}:idem`              | str  | the first claimer's value (TTL)        |
//! | `agentd:{i:<index>}:set`             | set  | members                                |
//! | `agentd:{u:<resource>}:threads:created` / `:updated` | zset | thread ids by time     |
//! | `agentd:{u:<resource>}:doc:<kind>`   | hash | v, value, created_ms, updated_ms       |
//! | `agentd:{v:<resource>}:…`            |      | vector logs (see `redis/vectors.rs`)   |
//!
//! A deleted message leaves an empty string in `msgs` (positions never move) and is counted in
//! the meta hash's `deleted` field.
//!
//! Channels: `agentd:{t:<thread>}:watch:<kind>:<owner>` carries `<version>:<bytes>` (the owner is
//! part of the name, so a watcher of another resource can never receive the thread's values),
//! `agentd:{r:<run>}:chunks` carries `<seq>:<bytes>`, `agentd:{r:<run>}:control` raw messages.
//! Channels are hash-tagged like keys: on a cluster they are sharded channels (`SPUBLISH` /
//! `SSUBSCRIBE`), served by the node that owns the slot, so fan-out never crosses the cluster.
//! Id parts are escaped (`%`, `{`, `}`, `:`) so that distinct ids never share a key.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use redis::{Cmd, ErrorKind, FromRedisValue, RedisError, RedisResult};

use super::{
    Cas, DocEdit, EndWritten, LogEntry, LogLimits, MessageAppend, MessageQuery, RunWrite, Store,
    StoreError, StoreResult, StoredMessage, ThreadCursor, ThreadInfo, ThreadKey, ThreadOrder,
    ThreadView, VectorBatch, VectorEntry, Versioned, end_run_in_two_calls,
};

mod cluster;
mod codec;
mod conn;
mod docs;
mod failover;
mod hub;
mod keys;
mod log;
mod scripts;
mod target;
mod threads;
mod vectors;

pub use target::RedisTarget;

use codec::{decode_cas, encode_numbered, split_numbered, ttl_ms, versioned};
use conn::{Backend, Conn};
use keys::{
    LEASES_KEY, doc_key, esc, index_key, listing_key, resource_key, run_key, score_key, thread_key,
    watch_channel,
};
use scripts::{
    APPEND_MESSAGES, CAS_PLAIN, CAS_RUN, CAS_RUN_LEASED, CLAIM_KEY, END_RUN, Invocation,
    LOAD_THREAD, StoreScript, read_script, script,
};

/// Error code raised by the scripts when a thread belongs to another resource.
const WRONG_OWNER: &str = "WRONGOWNER";

/// Timeouts of a [`RedisStore`]; the defaults make calls against a dead server fail within ~2 s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedisOptions {
    /// Limit for establishing one TCP connection.
    pub connect_timeout: Duration,
    /// Limit for the reply to one command.
    pub response_timeout: Duration,
    /// Limit for a whole store call, reconnection attempts included.
    pub call_timeout: Duration,
    /// Replicas that must have each write before it is acknowledged (`WAIT`); 0: none.
    pub wait_replicas: u32,
    /// Longest `WAIT` for those replicas; fewer in time fails the call (UNAVAILABLE).
    pub wait_timeout: Duration,
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_millis(500),
            response_timeout: Duration::from_secs(1),
            call_timeout: Duration::from_secs(2),
            wait_replicas: 0,
            wait_timeout: Duration::from_millis(500),
        }
    }
}

/// The production store: Redis through self-healing connections.
#[derive(Clone)]
pub struct RedisStore {
    /// The node, cluster or Sentinel-found master, with its connections.
    backend: Arc<Backend>,
    options: RedisOptions,
    /// Notified after every call that failed for want of Redis (I/O error, timeout, dropped
    /// connection), so health turns NOT_SERVING at the first failure, not at the next probe.
    failures: Option<Arc<tokio::sync::Notify>>,
    /// The thread documents this replica read or wrote last (see `redis/docs.rs`).
    recent: Arc<docs::RecentDocs>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client's connection info may hold a password: print the options only.
        f.debug_struct("RedisStore")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects to `url` (e.g. `redis://127.0.0.1:6379/0`) with default timeouts.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        Self::connect_with(url, RedisOptions::default()).await
    }

    /// Connects to `url` (any form [`RedisTarget`] reads) with the given options; fails if the
    /// server does not answer.
    pub async fn connect_with(url: &str, options: RedisOptions) -> StoreResult<Self> {
        let target = RedisTarget::parse(url)
            .map_err(|e| StoreError::Unavailable(format!("invalid redis url: {e}")))?;
        let backend = Backend::connect(&target, &options).await?;
        let store = Self {
            backend: Arc::new(backend),
            options,
            failures: None,
            recent: Arc::new(docs::RecentDocs::new()),
        };
        // Cluster keyspaces never held threads from before the listings (and SCAN has no single
        // route on a cluster).
        if !store.backend.is_cluster() {
            threads::backfill_listings(&store).await?;
        }
        Ok(store)
    }

    /// This store, notifying `failures` after each call that failed for want of Redis.
    pub fn with_failure_signal(mut self, failures: Arc<tokio::sync::Notify>) -> Self {
        self.failures = Some(failures);
        self
    }

    /// Runs one command or script within the call timeout; a write waits for replicas when the
    /// store is set to.
    async fn call<T, F, Fut>(&self, writes: bool, op: F) -> RedisResult<T>
    where
        F: Fn(Conn) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let attempt = async {
            if writes && let Some(node) = self.backend.waiting_node() {
                return node.run_waited(&op).await;
            }
            match op(self.backend.conn()).await {
                // A refused connection means the command never left this process, so one retry
                // is safe; it lets the first call after a server restart succeed.
                Err(e) if e.is_connection_refusal() => op(self.backend.conn()).await,
                other => other,
            }
        };
        let result = with_deadline(self.options.call_timeout, attempt).await;
        if let Err(e) = &result {
            self.backend.failed(e);
            if let Some(failures) = &self.failures
                && (e.is_io_error() || e.is_timeout() || e.is_connection_dropped())
            {
                failures.notify_one();
            }
        }
        result
    }

    /// An invocation of `script` in the form for this deployment.
    fn invoke(&self, script: &'static StoreScript) -> Invocation {
        script.invoke(self.backend.is_cluster())
    }

    /// Runs a script (by hash, loading it when the server lacks it).
    async fn eval<T: FromRedisValue>(&self, script: &Invocation) -> RedisResult<T> {
        self.call(script.writes, |mut c| async move {
            script.invoke_async(&mut c).await
        })
        .await
    }

    /// Runs a plain command that only reads (or only publishes).
    async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> StoreResult<T> {
        self.call(false, |mut c| async move { cmd.query_async(&mut c).await })
            .await
            .map_err(store_err)
    }

    /// Runs a plain command that writes.
    async fn query_write<T: FromRedisValue>(&self, cmd: &Cmd) -> StoreResult<T> {
        self.call(true, |mut c| async move { cmd.query_async(&mut c).await })
            .await
            .map_err(store_err)
    }

    /// Runs a pipeline in one round trip; an empty one answers `T::default()` without a call
    /// (Redis refuses empty pipelines).
    async fn query_pipe<T: FromRedisValue + Default>(
        &self,
        pipe: &redis::Pipeline,
    ) -> StoreResult<T> {
        if pipe.is_empty() {
            return Ok(T::default());
        }
        self.call(false, |mut c| async move { pipe.query_async(&mut c).await })
            .await
            .map_err(store_err)
    }

    /// Subscribes to `channel` (confirmed by the server): its payloads, then an error when the
    /// subscription is lost.
    async fn subscribe(
        &self,
        channel: &str,
    ) -> StoreResult<BoxStream<'static, StoreResult<Bytes>>> {
        with_deadline(self.options.call_timeout, self.backend.subscribe(channel))
            .await
            .map_err(store_err)
    }

    /// Fails with `WrongOwner` when the thread exists and belongs to another resource.
    async fn check_owner(&self, key: &ThreadKey) -> StoreResult<()> {
        let mut hget = redis::cmd("HGET");
        hget.arg(thread_key(&key.thread_id, "meta")).arg("owner");
        let owner: Option<String> = self.query(&hget).await?;
        match owner {
            Some(owner) if owner != key.resource_id => Err(StoreError::WrongOwner {
                thread_id: key.thread_id.clone(),
            }),
            _ => Ok(()),
        }
    }
}

#[async_trait]
impl Store for RedisStore {
    async fn ping(&self) -> StoreResult<()> {
        self.query(&redis::cmd("PING")).await
    }

    async fn load_thread(
        &self,
        key: &ThreadKey,
        last_messages: usize,
        docs: &[&str],
    ) -> StoreResult<ThreadView> {
        let mut script = self.invoke(&LOAD_THREAD);
        script
            .key(thread_key(&key.thread_id, "meta"))
            .key(thread_key(&key.thread_id, "msgs"));
        for kind in docs {
            script.key(doc_key(&key.thread_id, kind));
        }
        // Clamped so that the script can negate it as a 64-bit integer.
        let last = last_messages.min(i64::MAX as usize);
        script.arg(&key.resource_id).arg(last);
        type Reply = (u8, Vec<Bytes>, Vec<Option<(u64, Bytes)>>);
        let (exists, messages, found): Reply = self.eval(&script).await.map_err(thread_err(key))?;
        Ok(ThreadView {
            exists: exists == 1,
            messages,
            docs: found.into_iter().map(|doc| doc.map(versioned)).collect(),
        })
    }

    async fn get_doc(&self, key: &ThreadKey, kind: &str) -> StoreResult<Option<Versioned>> {
        self.doc_get(key, kind).await
    }

    async fn cas_doc(
        &self,
        key: &ThreadKey,
        kind: &str,
        expected: u64,
        value: Bytes,
    ) -> StoreResult<Cas> {
        self.doc_cas(key, kind, expected, &value, None).await
    }

    async fn update_doc(&self, key: &ThreadKey, kind: &str, edit: DocEdit) -> StoreResult<u64> {
        self.doc_update(key, kind, edit).await
    }

    async fn watch_doc(
        &self,
        key: &ThreadKey,
        kind: &str,
    ) -> StoreResult<BoxStream<'static, StoreResult<Versioned>>> {
        self.check_owner(key).await?;
        let messages = self.subscribe(&watch_channel(key, kind)).await?;
        Ok(payload_stream(messages, |payload| {
            split_numbered(payload).map(|(version, value)| Versioned { version, value })
        }))
    }

    async fn append_messages(
        &self,
        key: &ThreadKey,
        thread_meta: Option<Bytes>,
        messages: Vec<Bytes>,
    ) -> StoreResult<u64> {
        let mut script = self.messages_write(&APPEND_MESSAGES, key);
        match &thread_meta {
            Some(meta) => script.arg("1").arg(meta.as_ref()),
            None => script.arg("0").arg(""),
        };
        for message in &messages {
            script.arg(message.as_ref());
        }
        self.eval_thread(&script, key).await
    }

    /// One script on one node (a thread and a run share no slot on a cluster: two calls there).
    async fn end_run(&self, messages: &MessageAppend, run: RunWrite) -> StoreResult<EndWritten> {
        if self.backend.is_cluster() {
            return end_run_in_two_calls(self, messages, run).await;
        }
        let mut script = self.messages_write(&END_RUN, &messages.key);
        match &messages.thread_meta {
            Some(meta) => script.arg("1").arg(meta.as_ref()),
            None => script.arg("0").arg(""),
        };
        script
            .key(run_key(&run.run_id, "run"))
            .key(LEASES_KEY)
            .arg(run.expected)
            .arg(run.value.as_ref())
            .arg(ttl_ms(run.ttl))
            .arg(
                run.lease_until_ms
                    .map_or_else(String::new, |ms| ms.to_string()),
            )
            .arg(&run.run_id);
        for message in &messages.messages {
            script.arg(message.as_ref());
        }
        let reply: Vec<redis::Value> = self.eval_thread(&script, &messages.key).await?;
        let mut parts = reply.into_iter();
        let corrupt = |e: redis::ParsingError| StoreError::Corrupt(format!("end_run reply: {e}"));
        let cas = parts
            .next()
            .map(Vec::<redis::Value>::from_redis_value)
            .transpose()
            .map_err(corrupt)?
            .ok_or_else(|| StoreError::Corrupt("end_run reply is empty".into()))?;
        let first_message = parts
            .next()
            .map(u64::from_redis_value)
            .transpose()
            .map_err(corrupt)?;
        Ok(EndWritten {
            first_message,
            record: Ok(decode_cas(cas)?),
        })
    }

    async fn get_run(&self, run_id: &str) -> StoreResult<Option<Versioned>> {
        let mut hmget = redis::cmd("HMGET");
        hmget.arg(run_key(run_id, "run")).arg("v").arg("value");
        let (version, value): (Option<u64>, Option<Bytes>) = self.query(&hmget).await?;
        Ok(version
            .zip(value)
            .map(|(version, value)| Versioned { version, value }))
    }

    async fn cas_run(
        &self,
        run_id: &str,
        expected: u64,
        value: Bytes,
        ttl: Duration,
        lease_until_ms: Option<i64>,
    ) -> StoreResult<Cas> {
        let lease = lease_until_ms.map_or_else(String::new, |ms| ms.to_string());
        if !self.backend.is_cluster() {
            let mut script = self.invoke(&CAS_RUN_LEASED);
            script
                .key(run_key(run_id, "run"))
                .key(LEASES_KEY)
                .arg(expected)
                .arg(value.as_ref())
                .arg(ttl_ms(ttl))
                .arg(lease)
                .arg(run_id);
            return decode_cas(self.eval(&script).await.map_err(store_err)?);
        }
        // On a cluster the lease list is in another slot: a second call, after the record.
        let mut script = self.invoke(&CAS_RUN);
        script
            .key(run_key(run_id, "run"))
            .arg(expected)
            .arg(value.as_ref())
            .arg(ttl_ms(ttl));
        let cas = decode_cas(self.eval(&script).await.map_err(store_err)?)?;
        if matches!(cas, Cas::Written(_)) {
            let mut list = match lease_until_ms {
                Some(_) => redis::cmd("ZADD"),
                None => redis::cmd("ZREM"),
            };
            list.arg(LEASES_KEY);
            if let Some(until) = lease_until_ms {
                list.arg(until);
            }
            list.arg(run_id);
            self.query_write::<i64>(&list).await?;
        }
        Ok(cas)
    }

    async fn expired_leases(&self, now_ms: i64, limit: usize) -> StoreResult<Vec<String>> {
        let mut due = redis::cmd("ZRANGEBYSCORE");
        due.arg(LEASES_KEY)
            .arg("-inf")
            .arg(format!("({now_ms}"))
            .arg("LIMIT")
            .arg(0)
            .arg(limit);
        let ids: Vec<String> = self.query(&due).await?;
        let mut live = Vec::with_capacity(ids.len());
        // Records expire on their own: an entry whose record is gone leaves the list here.
        for id in ids {
            let mut exists = redis::cmd("EXISTS");
            exists.arg(run_key(&id, "run"));
            if self.query::<u64>(&exists).await? > 0 {
                live.push(id);
            } else {
                let mut zrem = redis::cmd("ZREM");
                zrem.arg(LEASES_KEY).arg(&id);
                self.query_write::<i64>(&zrem).await?;
            }
        }
        Ok(live)
    }

    async fn append_chunks(
        &self,
        run_id: &str,
        chunks: Vec<LogEntry>,
        limits: LogLimits,
    ) -> StoreResult<()> {
        self.log_append(run_id, chunks, limits).await
    }

    fn seals_logs(&self) -> bool {
        true
    }

    async fn seal_chunks(
        &self,
        run_id: &str,
        last: Vec<LogEntry>,
        whole: Vec<LogEntry>,
        limits: LogLimits,
    ) -> StoreResult<()> {
        self.log_seal(run_id, last, whole, limits).await
    }

    async fn read_chunks(&self, run_id: &str, after_seq: u64) -> StoreResult<Vec<LogEntry>> {
        self.log_read(run_id, after_seq).await
    }

    async fn follow_chunks(
        &self,
        run_id: &str,
    ) -> StoreResult<BoxStream<'static, StoreResult<LogEntry>>> {
        let messages = self.subscribe(&run_key(run_id, "chunks")).await?;
        Ok(payload_stream(messages, split_numbered))
    }

    async fn claim_key(
        &self,
        key: &str,
        value: Bytes,
        ttl: Duration,
    ) -> StoreResult<Option<Bytes>> {
        let mut script = self.invoke(&CLAIM_KEY);
        script
            .key(format!("agentd:{{k:{}}}:idem", esc(key)))
            .arg(value.as_ref())
            .arg(ttl_ms(ttl));
        self.eval(&script).await.map_err(store_err)
    }

    async fn publish_control(&self, run_id: &str, message: Bytes) -> StoreResult<()> {
        let mut publish = redis::cmd(if self.backend.is_cluster() {
            "SPUBLISH"
        } else {
            "PUBLISH"
        });
        publish
            .arg(run_key(run_id, "control"))
            .arg(message.as_ref());
        self.query(&publish).await
    }

    async fn subscribe_control(
        &self,
        run_id: &str,
    ) -> StoreResult<BoxStream<'static, StoreResult<Bytes>>> {
        let messages = self.subscribe(&run_key(run_id, "control")).await?;
        Ok(messages)
    }

    async fn index_set(&self, index: &str, member: &str, present: bool) -> StoreResult<()> {
        let mut update = redis::cmd(if present { "SADD" } else { "SREM" });
        update.arg(index_key(index)).arg(member);
        self.query_write(&update).await
    }

    async fn index_members(&self, index: &str) -> StoreResult<Vec<String>> {
        let mut smembers = redis::cmd("SMEMBERS");
        smembers.arg(index_key(index));
        let mut members: Vec<String> = self.query(&smembers).await?;
        // Sets are unordered; sorting keeps results stable (and equal to the embedded store's).
        members.sort_unstable();
        Ok(members)
    }

    async fn append_score(&self, lists: &[String], score: Bytes) -> StoreResult<()> {
        // One key per list: each may live in its own cluster slot.
        for list in lists {
            let mut push = redis::cmd("RPUSH");
            push.arg(score_key(list)).arg(score.as_ref());
            self.query_write::<()>(&push).await?;
        }
        Ok(())
    }

    async fn read_scores(&self, list: &str, from: u64, limit: usize) -> StoreResult<Vec<Bytes>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let last = from.saturating_add(limit as u64 - 1).min(i64::MAX as u64);
        let mut range = redis::cmd("LRANGE");
        range
            .arg(score_key(list))
            .arg(from.min(i64::MAX as u64))
            .arg(last);
        let records: Vec<Vec<u8>> = self.query(&range).await?;
        Ok(records.into_iter().map(Bytes::from).collect())
    }

    async fn append_vectors(
        &self,
        resource_id: &str,
        entries: Vec<VectorEntry>,
    ) -> StoreResult<()> {
        vectors::append(self, resource_id, &entries).await
    }

    async fn read_vectors(
        &self,
        resource_id: &str,
        after: u64,
        limit: usize,
    ) -> StoreResult<VectorBatch> {
        vectors::read(self, resource_id, after, limit).await
    }

    async fn delete_vectors(
        &self,
        resource_id: &str,
        thread_id: &str,
        positions: Option<&[u64]>,
    ) -> StoreResult<u64> {
        vectors::delete(self, resource_id, thread_id, positions).await
    }

    async fn get_thread(&self, key: &ThreadKey) -> StoreResult<Option<ThreadInfo>> {
        threads::get(self, key).await
    }

    async fn cas_thread_meta(
        &self,
        key: &ThreadKey,
        expected: Option<Bytes>,
        meta: Bytes,
    ) -> StoreResult<Option<bool>> {
        threads::cas_meta(self, key, expected, meta).await
    }

    async fn list_threads(
        &self,
        resource_id: &str,
        order: ThreadOrder,
        cursor: Option<ThreadCursor>,
        limit: usize,
    ) -> StoreResult<Vec<ThreadInfo>> {
        threads::list(self, resource_id, order, cursor, limit).await
    }

    async fn read_messages(
        &self,
        key: &ThreadKey,
        query: MessageQuery,
    ) -> StoreResult<Option<Vec<StoredMessage>>> {
        threads::read_messages(self, key, query).await
    }

    async fn delete_messages(&self, key: &ThreadKey, positions: Vec<u64>) -> StoreResult<u64> {
        threads::delete_messages(self, key, positions).await
    }

    async fn delete_thread(&self, key: &ThreadKey, docs: &[&str]) -> StoreResult<bool> {
        threads::delete(self, key, docs).await
    }

    async fn get_resource_doc(
        &self,
        resource_id: &str,
        kind: &str,
    ) -> StoreResult<Option<Versioned>> {
        let mut hmget = redis::cmd("HMGET");
        hmget
            .arg(resource_key(resource_id, &format!("doc:{}", esc(kind))))
            .arg("v")
            .arg("value");
        let (version, value): (Option<u64>, Option<Bytes>) = self.query(&hmget).await?;
        Ok(version
            .zip(value)
            .map(|(version, value)| Versioned { version, value }))
    }

    async fn cas_resource_doc(
        &self,
        resource_id: &str,
        kind: &str,
        expected: u64,
        value: Bytes,
    ) -> StoreResult<Cas> {
        let mut script = self.invoke(&CAS_PLAIN);
        script
            .key(resource_key(resource_id, &format!("doc:{}", esc(kind))))
            .arg(expected)
            .arg(value.as_ref());
        decode_cas(self.eval(&script).await.map_err(store_err)?)
    }

    async fn delete_run(&self, run_id: &str) -> StoreResult<()> {
        let mut del = redis::cmd("DEL");
        del.arg(run_key(run_id, "run"))
            .arg(run_key(run_id, "log"))
            .arg(run_key(run_id, "log:z"));
        self.query_write::<u64>(&del).await?;
        let mut zrem = redis::cmd("ZREM");
        zrem.arg(LEASES_KEY).arg(run_id);
        self.query_write::<i64>(&zrem).await.map(drop)
    }
}

/// Maps an error of a thread script: the owner check's error becomes `WrongOwner`.
fn thread_err(key: &ThreadKey) -> impl Fn(RedisError) -> StoreError + '_ {
    move |e| {
        if e.code() == Some(WRONG_OWNER) {
            StoreError::WrongOwner {
                thread_id: key.thread_id.clone(),
            }
        } else {
            store_err(e)
        }
    }
}

/// Awaits `fut` for at most `limit`; a late answer is a timeout I/O error.
async fn with_deadline<T>(
    limit: Duration,
    fut: impl Future<Output = RedisResult<T>>,
) -> RedisResult<T> {
    tokio::time::timeout(limit, fut).await.unwrap_or_else(|_| {
        Err(RedisError::from(io::Error::new(
            io::ErrorKind::TimedOut,
            "redis did not answer in time",
        )))
    })
}

/// Maps a client error: undecodable replies are corrupt records, anything else is an outage.
fn store_err(e: RedisError) -> StoreError {
    match e.kind() {
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => StoreError::Corrupt(e.to_string()),
        _ => StoreError::Unavailable(e.to_string()),
    }
}

/// Decodes a subscription's payloads into store items (its closing error passes through).
fn payload_stream<T: Send + 'static>(
    messages: BoxStream<'static, StoreResult<Bytes>>,
    decode: fn(&[u8]) -> StoreResult<T>,
) -> BoxStream<'static, StoreResult<T>> {
    messages
        .map(move |item| item.and_then(|payload| decode(&payload)))
        .boxed()
}
