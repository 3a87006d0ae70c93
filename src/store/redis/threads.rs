//! Threads on Redis: summaries, metadata compare-and-set, the per-resource listing, reading and
//! deleting messages by position, and deleting a whole thread.

use std::sync::LazyLock;

use bytes::Bytes;
use redis::{FromRedisValue, Value};
use tracing::warn;

use super::{
    Invocation, RedisStore, StoreScript, doc_key, listing_key, read_script, script, store_err,
    thread_err, thread_key,
};
use crate::store::{
    MessageQuery, StoreError, StoreResult, StoredMessage, ThreadCursor, ThreadInfo, ThreadKey,
    ThreadOrder,
};

/// KEYS: meta, msgs; ARGV: resource → false, or {created_ms, updated_ms, count, meta|false}.
static GET_THREAD: LazyLock<StoreScript> = LazyLock::new(|| {
    read_script(
        r#"
local ok, owner = may_use(KEYS[1], ARGV[1])
if not ok then return redis.error_reply('WRONGOWNER thread belongs to another resource') end
if not owner then return false end
local f = redis.call('HMGET', KEYS[1], 'created_ms', 'updated_ms', 'meta', 'deleted')
local count = redis.call('LLEN', KEYS[2]) - tonumber(f[4] or '0')
return {f[1] or '0', f[2] or '0', count, f[3]}
"#,
    )
});

/// KEYS: meta, by_created, by_updated; ARGV: resource, thread, has_expected, expected, meta
/// → 0 absent, 1 written, 2 changed meanwhile.
static CAS_META: LazyLock<StoreScript> = LazyLock::new(|| {
    script(
        r#"
local ok, owner = may_use(KEYS[1], ARGV[1])
if not ok then return redis.error_reply('WRONGOWNER thread belongs to another resource') end
if not owner then return reply(0) end
local cur = redis.call('HGET', KEYS[1], 'meta')
if ARGV[3] == '1' then
  if cur ~= ARGV[4] then return reply(2) end
elseif cur then
  return reply(2)
end
redis.call('HSET', KEYS[1], 'meta', ARGV[5])
touch_thread(KEYS[1], ARGV[1], now_ms(), KEYS[2], KEYS[3], ARGV[2])
return reply(1)
"#,
    )
});

/// KEYS: listing; ARGV: limit, has_cursor, time_ms, thread → {thread, …} newest first.
/// Ties of one millisecond are ordered by id, descending (ZREVRANGEBYSCORE's order).
static LIST_PAGE: LazyLock<StoreScript> = LazyLock::new(|| {
    read_script(
        r#"
local limit = tonumber(ARGV[1])
if ARGV[2] == '0' then return redis.call('ZREVRANGE', KEYS[1], 0, limit - 1) end
local at = tonumber(ARGV[3])
local ties = redis.call('ZCOUNT', KEYS[1], ARGV[3], ARGV[3])
local raw = redis.call('ZREVRANGEBYSCORE', KEYS[1], ARGV[3], '-inf', 'WITHSCORES', 'LIMIT', 0, limit + ties)
local out = {}
for i = 1, #raw, 2 do
  if #out == limit then break end
  if tonumber(raw[i + 1]) ~= at or raw[i] < ARGV[4] then out[#out + 1] = raw[i] end
end
return out
"#,
    )
});

/// KEYS: meta, msgs; ARGV: resource, from, to, limit, newest ('1'/'0') → false when absent,
/// else {position, bytes, …} in the order asked.
static READ_MESSAGES: LazyLock<StoreScript> = LazyLock::new(|| {
    read_script(
        r#"
local ok, owner = may_use(KEYS[1], ARGV[1])
if not ok then return redis.error_reply('WRONGOWNER thread belongs to another resource') end
if not owner then return false end
local len = redis.call('LLEN', KEYS[2])
local from, to, limit = tonumber(ARGV[2]), math.min(tonumber(ARGV[3]), len), tonumber(ARGV[4])
local out = {}
if from >= to or limit == 0 then return out end
-- A window of `limit` plus every deleted message always holds `limit` live ones, if any.
local span = limit + tonumber(redis.call('HGET', KEYS[1], 'deleted') or '0')
if ARGV[5] == '1' then
  local lo = math.max(from, to - span)
  local raw = redis.call('LRANGE', KEYS[2], lo, to - 1)
  for i = #raw, 1, -1 do
    if #out >= 2 * limit then break end
    if raw[i] ~= '' then out[#out + 1] = lo + i - 1; out[#out + 1] = raw[i] end
  end
else
  local hi = math.min(to, from + span)
  local raw = redis.call('LRANGE', KEYS[2], from, hi - 1)
  for i = 1, #raw do
    if #out >= 2 * limit then break end
    if raw[i] ~= '' then out[#out + 1] = from + i - 1; out[#out + 1] = raw[i] end
  end
end
return out
"#,
    )
});

/// KEYS: meta, msgs, by_created, by_updated; ARGV: resource, thread, positions… → removed.
static DELETE_MESSAGES: LazyLock<StoreScript> = LazyLock::new(|| {
    script(
        r#"
local ok, owner = may_use(KEYS[1], ARGV[1])
if not ok then return redis.error_reply('WRONGOWNER thread belongs to another resource') end
if not owner then return reply(0) end
local len = redis.call('LLEN', KEYS[2])
local removed = 0
for i = 3, #ARGV do
  local at = tonumber(ARGV[i])
  if at < len then
    local cur = redis.call('LINDEX', KEYS[2], at)
    if cur and cur ~= '' then
      redis.call('LSET', KEYS[2], at, '')
      removed = removed + 1
    end
  end
end
if removed > 0 then
  redis.call('HINCRBY', KEYS[1], 'deleted', removed)
  touch_thread(KEYS[1], ARGV[1], now_ms(), KEYS[3], KEYS[4], ARGV[2])
end
return reply(removed)
"#,
    )
});

/// KEYS: meta, msgs, by_created, by_updated, docs…; ARGV: resource, thread → 0 absent / 1.
static DELETE_THREAD: LazyLock<StoreScript> = LazyLock::new(|| {
    script(
        r#"
local ok, owner = may_use(KEYS[1], ARGV[1])
if not ok then return redis.error_reply('WRONGOWNER thread belongs to another resource') end
if not owner then return reply(0) end
for i = 5, #KEYS do redis.call('DEL', KEYS[i]) end
redis.call('DEL', KEYS[1], KEYS[2])
unlist(KEYS[3], KEYS[4], ARGV[2])
return reply(1)
"#,
    )
});

impl RedisStore {
    /// A script that changes a thread's messages, with its first keys (meta, msgs, the two
    /// listing keys) and arguments (resource, thread) in place; callers add the rest.
    pub(super) fn messages_write(
        &self,
        script: &'static StoreScript,
        key: &ThreadKey,
    ) -> Invocation {
        let mut invocation = self.invoke(script);
        let [by_created, by_updated] = self.listing_keys(key);
        invocation
            .key(thread_key(&key.thread_id, "meta"))
            .key(thread_key(&key.thread_id, "msgs"))
            .key(by_created)
            .key(by_updated)
            .arg(&key.resource_id)
            .arg(&key.thread_id);
        invocation
    }

    /// The listing keys a thread script is given: the resource's listings on one node; on a
    /// cluster, where the script only reports the change, the thread's meta key again (a
    /// script's keys share one slot, and the key positions stay those of one node).
    pub(super) fn listing_keys(&self, key: &ThreadKey) -> [String; 2] {
        if self.backend.is_cluster() {
            let meta = thread_key(&key.thread_id, "meta");
            [meta.clone(), meta]
        } else {
            [
                listing_key(&key.resource_id, ThreadOrder::Created),
                listing_key(&key.resource_id, ThreadOrder::Updated),
            ]
        }
    }

    /// Runs a script that may change the thread's place in its resource's listings; on a
    /// cluster, applies the change it reports.
    pub(super) async fn eval_thread<T: FromRedisValue>(
        &self,
        invocation: &Invocation,
        key: &ThreadKey,
    ) -> StoreResult<T> {
        if !self.backend.is_cluster() {
            return self.eval(invocation).await.map_err(thread_err(key));
        }
        let (result, change, at): (Value, String, u64) =
            self.eval(invocation).await.map_err(thread_err(key))?;
        self.apply_listing(key, &change, at).await;
        redis::from_redis_value_ref(&result)
            .map_err(|e| StoreError::Corrupt(format!("thread {}: {e}", key.thread_id)))
    }

    /// Applies a thread script's listing change on the resource's slot, with the script's own
    /// time, so that listing scores equal the thread's timestamps (the cursors rely on it).
    ///
    /// The thread's write is done and acknowledged whatever happens here: if this call fails,
    /// the listing is one change stale until the thread's next write (a stale entry is skipped
    /// when listed; `GT` keeps a late update from moving a thread back in time).
    async fn apply_listing(&self, key: &ThreadKey, change: &str, at: u64) {
        if !matches!(change, "c" | "u" | "d") {
            return;
        }
        let by_created = listing_key(&key.resource_id, ThreadOrder::Created);
        let by_updated = listing_key(&key.resource_id, ThreadOrder::Updated);
        let mut pipe = redis::pipe();
        match change {
            "c" | "u" => {
                if change == "c" {
                    pipe.zadd(&by_created, &key.thread_id, at).ignore();
                }
                pipe.cmd("ZADD")
                    .arg(&by_updated)
                    .arg("GT")
                    .arg(at)
                    .arg(&key.thread_id)
                    .ignore();
            }
            _ => {
                pipe.zrem(&by_created, &key.thread_id).ignore();
                pipe.zrem(&by_updated, &key.thread_id).ignore();
            }
        }
        if let Err(e) = self.query_pipe::<()>(&pipe).await {
            warn!(error = %e, thread = %key.thread_id, "updating the thread listing failed; it is repaired by the thread's next write");
        }
    }
}

/// A thread's summary, ownership checked.
pub(super) async fn get(store: &RedisStore, key: &ThreadKey) -> StoreResult<Option<ThreadInfo>> {
    let mut invocation = store.invoke(&GET_THREAD);
    invocation
        .key(thread_key(&key.thread_id, "meta"))
        .key(thread_key(&key.thread_id, "msgs"))
        .arg(&key.resource_id);
    type Reply = Option<(u64, u64, u64, Option<Bytes>)>;
    let reply: Reply = store.eval(&invocation).await.map_err(thread_err(key))?;
    Ok(
        reply.map(|(created_ms, updated_ms, count, meta)| ThreadInfo {
            thread_id: key.thread_id.clone(),
            resource_id: key.resource_id.clone(),
            created_ms,
            updated_ms,
            message_count: count,
            meta,
        }),
    )
}

/// Replaces the metadata if it is still `expected`.
pub(super) async fn cas_meta(
    store: &RedisStore,
    key: &ThreadKey,
    expected: Option<Bytes>,
    meta: Bytes,
) -> StoreResult<Option<bool>> {
    let mut invocation = store.invoke(&CAS_META);
    let [by_created, by_updated] = store.listing_keys(key);
    invocation
        .key(thread_key(&key.thread_id, "meta"))
        .key(by_created)
        .key(by_updated)
        .arg(&key.resource_id)
        .arg(&key.thread_id);
    match &expected {
        Some(bytes) => invocation.arg("1").arg(bytes.as_ref()),
        None => invocation.arg("0").arg(""),
    };
    invocation.arg(meta.as_ref());
    let outcome: u8 = store.eval_thread(&invocation, key).await?;
    Ok(match outcome {
        0 => None,
        1 => Some(true),
        _ => Some(false),
    })
}

/// A resource's threads, newest first: the page of ids from the listing, then every thread's
/// summary in one pipeline (threads live in their own slots).
pub(super) async fn list(
    store: &RedisStore,
    resource_id: &str,
    order: ThreadOrder,
    cursor: Option<ThreadCursor>,
    limit: usize,
) -> StoreResult<Vec<ThreadInfo>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let mut invocation = store.invoke(&LIST_PAGE);
    invocation
        .key(listing_key(resource_id, order))
        .arg(limit.min(i64::MAX as usize));
    match &cursor {
        Some(c) => invocation.arg("1").arg(c.time_ms).arg(&c.thread_id),
        None => invocation.arg("0").arg(0).arg(""),
    };
    let ids: Vec<String> = store.eval(&invocation).await.map_err(store_err)?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let replies: Vec<Value> = if store.backend.is_cluster() {
        // A pipeline must stay in one slot on a cluster (redis-rs does not split it by node):
        // one per thread, all at once.
        let pipes: Vec<redis::Pipeline> = ids.iter().map(|id| summaries(&[id])).collect();
        let each = pipes
            .iter()
            .map(|pipe| store.query_pipe::<Vec<Value>>(pipe));
        futures::future::try_join_all(each)
            .await?
            .into_iter()
            .flatten()
            .collect()
    } else {
        store.query_pipe(&summaries(&ids)).await?
    };
    type Fields = (
        Option<String>,
        Option<u64>,
        Option<u64>,
        Option<Bytes>,
        Option<u64>,
    );
    let mut out = Vec::with_capacity(ids.len());
    for (id, pair) in ids.into_iter().zip(replies.chunks(2)) {
        let [fields, len] = pair else {
            return Err(StoreError::Corrupt("short thread listing reply".into()));
        };
        let corrupt = |e: redis::ParsingError| StoreError::Corrupt(format!("thread {id}: {e}"));
        let (owner, created, updated, meta, deleted): Fields =
            redis::from_redis_value_ref(fields).map_err(corrupt)?;
        let len: u64 = redis::from_redis_value_ref(len).map_err(corrupt)?;
        // A thread deleted between the two round trips (or listed by a stale entry) is skipped.
        if owner.as_deref() != Some(resource_id) {
            continue;
        }
        out.push(ThreadInfo {
            thread_id: id,
            resource_id: resource_id.to_owned(),
            created_ms: created.unwrap_or(0),
            updated_ms: updated.unwrap_or(0),
            message_count: len.saturating_sub(deleted.unwrap_or(0)),
            meta,
        });
    }
    Ok(out)
}

/// A pipeline reading the summaries of `ids`: per thread its meta fields, then its length.
fn summaries(ids: &[impl AsRef<str>]) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    for id in ids {
        pipe.cmd("HMGET")
            .arg(thread_key(id.as_ref(), "meta"))
            .arg("owner")
            .arg("created_ms")
            .arg("updated_ms")
            .arg("meta")
            .arg("deleted");
        pipe.cmd("LLEN").arg(thread_key(id.as_ref(), "msgs"));
    }
    pipe
}

/// Messages of a thread by position.
pub(super) async fn read_messages(
    store: &RedisStore,
    key: &ThreadKey,
    query: MessageQuery,
) -> StoreResult<Option<Vec<StoredMessage>>> {
    let mut invocation = store.invoke(&READ_MESSAGES);
    invocation
        .key(thread_key(&key.thread_id, "meta"))
        .key(thread_key(&key.thread_id, "msgs"))
        .arg(&key.resource_id)
        .arg(query.from.min(i64::MAX as u64))
        .arg(query.to.min(i64::MAX as u64))
        .arg(query.limit.min(i64::MAX as usize))
        .arg(if query.newest_first { "1" } else { "0" });
    let reply: Option<Vec<Value>> = store.eval(&invocation).await.map_err(thread_err(key))?;
    let Some(flat) = reply else {
        return Ok(None);
    };
    let mut messages = Vec::with_capacity(flat.len() / 2);
    for pair in flat.chunks(2) {
        let [position, bytes] = pair else {
            return Err(StoreError::Corrupt("odd message reply".into()));
        };
        let corrupt = |e: redis::ParsingError| StoreError::Corrupt(format!("message: {e}"));
        messages.push((
            redis::from_redis_value_ref(position).map_err(corrupt)?,
            redis::from_redis_value_ref(bytes).map_err(corrupt)?,
        ));
    }
    Ok(Some(messages))
}

/// Deletes messages by position.
pub(super) async fn delete_messages(
    store: &RedisStore,
    key: &ThreadKey,
    positions: Vec<u64>,
) -> StoreResult<u64> {
    let mut invocation = store.messages_write(&DELETE_MESSAGES, key);
    for position in positions {
        invocation.arg(position.min(i64::MAX as u64));
    }
    store.eval_thread(&invocation, key).await
}

/// Deletes a thread with its messages, the named documents and its listing entries.
pub(super) async fn delete(
    store: &RedisStore,
    key: &ThreadKey,
    docs: &[&str],
) -> StoreResult<bool> {
    let mut invocation = store.messages_write(&DELETE_THREAD, key);
    for kind in docs {
        invocation.key(doc_key(&key.thread_id, kind));
    }
    let existed: u8 = store.eval_thread(&invocation, key).await?;
    Ok(existed == 1)
}

/// Set once every thread written before the listings existed has been listed.
const LISTED_MARKER: &str = "agentd:schema:threads-listed";

/// Lists the threads of a keyspace written before the per-resource listings existed (once per
/// keyspace; idempotent, so replicas starting together may both run it).
pub(super) async fn backfill_listings(store: &RedisStore) -> StoreResult<()> {
    let mut exists = redis::cmd("EXISTS");
    exists.arg(LISTED_MARKER);
    if store.query::<u8>(&exists).await? == 1 {
        return Ok(());
    }
    let mut cursor = 0u64;
    loop {
        let mut scan = redis::cmd("SCAN");
        scan.arg(cursor)
            .arg("MATCH")
            .arg("agentd:{t:*}:meta")
            .arg("COUNT")
            .arg(1000);
        let (next, keys): (u64, Vec<String>) = store.query(&scan).await?;
        let mut read = redis::pipe();
        for key in &keys {
            read.cmd("HMGET")
                .arg(key)
                .arg("owner")
                .arg("created_ms")
                .arg("updated_ms");
        }
        let rows: Vec<(Option<String>, Option<u64>, Option<u64>)> = store.query_pipe(&read).await?;
        let mut write = redis::pipe();
        for (key, (owner, created, updated)) in keys.iter().zip(rows) {
            let (Some(owner), Some(thread)) = (owner, thread_of_meta_key(key)) else {
                continue;
            };
            let created = created.unwrap_or(0);
            write
                .cmd("ZADD")
                .arg(listing_key(&owner, ThreadOrder::Created))
                .arg(created)
                .arg(&thread)
                .ignore();
            write
                .cmd("ZADD")
                .arg(listing_key(&owner, ThreadOrder::Updated))
                .arg(updated.unwrap_or(created))
                .arg(&thread)
                .ignore();
        }
        store.query_pipe::<()>(&write).await?;
        if next == 0 {
            break;
        }
        cursor = next;
    }
    let mut set = redis::cmd("SET");
    set.arg(LISTED_MARKER).arg(1);
    store.query(&set).await
}

/// The thread id of a `agentd:{t:<id>}:meta` key, unescaped.
fn thread_of_meta_key(key: &str) -> Option<String> {
    let escaped = key.strip_prefix("agentd:{t:")?.strip_suffix("}:meta")?;
    let mut out = String::with_capacity(escaped.len());
    let mut rest = escaped;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 3)?;
        out.push(char::from(u8::from_str_radix(code, 16).ok()?));
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_keys_give_back_their_thread_ids() {
        for id in ["plain", "a:b{c}%d", "ünï"] {
            assert_eq!(
                thread_of_meta_key(&thread_key(id, "meta")).as_deref(),
                Some(id)
            );
        }
        assert_eq!(thread_of_meta_key("agentd:{r:x}:run"), None);
    }
}
