//! Redis implementation of [`Store`]: one round trip per call (a Lua script wherever a check
//! and a write must be atomic), hash-tagged keys and pub/sub notifications.
//!
//! Key layout (every key of a thread or run shares one `{hash tag}`; the thread scripts also
//! update the resource's listings, in another slot, which is why Redis Cluster is not supported
//! yet — see `keys::listing_key`):
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
//! Id parts are escaped (`%`, `{`, `}`, `:`) so that distinct ids never share a key.

use std::future::Future;
use std::io;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use redis::aio::{ConnectionManager, ConnectionManagerConfig, PubSubStream};
use redis::{Cmd, ErrorKind, FromRedisValue, RedisError, RedisResult, ScriptInvocation};

use super::{
    Cas, LogEntry, LogLimits, MessageQuery, Store, StoreError, StoreResult, StoredMessage,
    ThreadCursor, ThreadInfo, ThreadKey, ThreadOrder, ThreadView, VectorBatch, VectorEntry,
    Versioned,
};

mod codec;
mod keys;
mod log;
mod scripts;
mod threads;
mod vectors;

use codec::{decode_cas, encode_numbered, split_numbered, ttl_ms, versioned};
use keys::{
    doc_key, esc, index_key, listing_key, resource_key, run_key, thread_key, watch_channel,
};
use scripts::{
    APPEND_MESSAGES, CAS_DOC, CAS_PLAIN, CAS_RUN, CLAIM_KEY, GET_DOC, LOAD_THREAD, script,
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
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_millis(500),
            response_timeout: Duration::from_secs(1),
            call_timeout: Duration::from_secs(2),
        }
    }
}

/// The production store: Redis through a self-healing connection manager.
#[derive(Clone)]
pub struct RedisStore {
    /// Opens the dedicated pub/sub connections.
    client: redis::Client,
    /// Multiplexed command connection; reconnects by itself after failures.
    conn: ConnectionManager,
    options: RedisOptions,
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

    /// Connects to `url` with the given timeouts; fails if the server does not answer.
    pub async fn connect_with(url: &str, options: RedisOptions) -> StoreResult<Self> {
        let client = redis::Client::open(url)
            .map_err(|e| StoreError::Unavailable(format!("invalid redis url: {e}")))?;
        // Few, short retries: a call waits for the reconnection, and must fail within
        // `call_timeout`; the next call starts a new attempt anyway.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(Some(options.response_timeout))
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(250));
        let conn = with_deadline(
            options.call_timeout,
            ConnectionManager::new_with_config(client.clone(), config),
        )
        .await
        .map_err(store_err)?;
        let store = Self {
            client,
            conn,
            options,
        };
        threads::backfill_listings(&store).await?;
        Ok(store)
    }

    /// Runs one command or script on the shared connection within the call timeout.
    async fn call<T, F, Fut>(&self, op: F) -> RedisResult<T>
    where
        F: Fn(ConnectionManager) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let attempt = async {
            match op(self.conn.clone()).await {
                // A refused connection means the command never left this process, so one retry
                // is safe; it lets the first call after a server restart succeed.
                Err(e) if e.is_connection_refusal() => op(self.conn.clone()).await,
                other => other,
            }
        };
        with_deadline(self.options.call_timeout, attempt).await
    }

    /// Runs a script (by hash, loading it when the server lacks it).
    async fn eval<T: FromRedisValue>(&self, script: &ScriptInvocation<'_>) -> RedisResult<T> {
        self.call(|mut c| async move { script.invoke_async(&mut c).await })
            .await
    }

    /// Runs a plain command.
    async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> StoreResult<T> {
        self.call(|mut c| async move { cmd.query_async(&mut c).await })
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
        self.call(|mut c| async move { pipe.query_async(&mut c).await })
            .await
            .map_err(store_err)
    }

    /// Opens a dedicated pub/sub connection subscribed to `channel` (confirmed by the server).
    async fn subscribe(&self, channel: &str) -> StoreResult<PubSubStream> {
        let open = async {
            let mut pubsub = self.client.get_async_pubsub().await?;
            pubsub.subscribe(channel).await?;
            Ok(pubsub.into_on_message())
        };
        with_deadline(self.options.call_timeout, open)
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
        let mut script = LOAD_THREAD.prepare_invoke();
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
        let mut script = GET_DOC.prepare_invoke();
        script
            .key(thread_key(&key.thread_id, "meta"))
            .key(doc_key(&key.thread_id, kind))
            .arg(&key.resource_id);
        let found: Option<(u64, Bytes)> = self.eval(&script).await.map_err(thread_err(key))?;
        Ok(found.map(versioned))
    }

    async fn cas_doc(
        &self,
        key: &ThreadKey,
        kind: &str,
        expected: u64,
        value: Bytes,
    ) -> StoreResult<Cas> {
        let mut script = CAS_DOC.prepare_invoke();
        script
            .key(thread_key(&key.thread_id, "meta"))
            .key(doc_key(&key.thread_id, kind))
            .key(listing_key(&key.resource_id, ThreadOrder::Created))
            .key(listing_key(&key.resource_id, ThreadOrder::Updated))
            .arg(&key.resource_id)
            .arg(expected)
            .arg(value.as_ref())
            .arg(watch_channel(key, kind))
            .arg(&key.thread_id);
        decode_cas(self.eval(&script).await.map_err(thread_err(key))?)
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
        let mut script = threads::messages_write(&APPEND_MESSAGES, key);
        match &thread_meta {
            Some(meta) => script.arg("1").arg(meta.as_ref()),
            None => script.arg("0").arg(""),
        };
        for message in &messages {
            script.arg(message.as_ref());
        }
        self.eval(&script).await.map_err(thread_err(key))
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
    ) -> StoreResult<Cas> {
        let mut script = CAS_RUN.prepare_invoke();
        script
            .key(run_key(run_id, "run"))
            .arg(expected)
            .arg(value.as_ref())
            .arg(ttl_ms(ttl));
        decode_cas(self.eval(&script).await.map_err(store_err)?)
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
        let mut script = CLAIM_KEY.prepare_invoke();
        script
            .key(format!("agentd:{{k:{}}}:idem", esc(key)))
            .arg(value.as_ref())
            .arg(ttl_ms(ttl));
        self.eval(&script).await.map_err(store_err)
    }

    async fn publish_control(&self, run_id: &str, message: Bytes) -> StoreResult<()> {
        let mut publish = redis::cmd("PUBLISH");
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
        Ok(payload_stream(messages, |payload| {
            Ok(Bytes::copy_from_slice(payload))
        }))
    }

    async fn index_set(&self, index: &str, member: &str, present: bool) -> StoreResult<()> {
        let mut update = redis::cmd(if present { "SADD" } else { "SREM" });
        update.arg(index_key(index)).arg(member);
        self.query(&update).await
    }

    async fn index_members(&self, index: &str) -> StoreResult<Vec<String>> {
        let mut smembers = redis::cmd("SMEMBERS");
        smembers.arg(index_key(index));
        let mut members: Vec<String> = self.query(&smembers).await?;
        // Sets are unordered; sorting keeps results stable (and equal to the embedded store's).
        members.sort_unstable();
        Ok(members)
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
        let mut script = CAS_PLAIN.prepare_invoke();
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
        self.query::<u64>(&del).await.map(drop)
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

/// Turns pub/sub messages into store items; the end of the connection is reported as an error
/// so that a follower knows it may have missed messages.
fn payload_stream<T: Send + 'static>(
    messages: PubSubStream,
    decode: fn(&[u8]) -> StoreResult<T>,
) -> BoxStream<'static, StoreResult<T>> {
    messages
        .map(move |msg| decode(msg.get_payload_bytes()))
        .chain(stream::once(async {
            Err(StoreError::Unavailable(
                "redis subscription connection closed".into(),
            ))
        }))
        .boxed()
}
