//! The vector logs on Redis, one per resource; every key shares the resource's `{v:…}` hash tag
//! so each script stays in one cluster slot:
//!
//! | key                                  | type | content                                  |
//! |--------------------------------------|------|------------------------------------------|
//! | `agentd:{v:<resource>}:head`         | hash | epoch, seq (the last sequence number)    |
//! | `agentd:{v:<resource>}:log`          | zset | score seq, member `<seq>:<entry>`        |
//! | `agentd:{v:<resource>}:t:<thread>`   | hash | position → seq (to delete by thread)     |
//!
//! An entry is the thread id's length (u32 LE), the thread id, the position (u64 LE) and the
//! vector bytes. The head stays when a resource's last vector is deleted: its epoch must keep
//! growing, or a replica's cache of the old log could take a new log for the same one.

use std::sync::LazyLock;

use bytes::Bytes;

use super::{RedisStore, StoreScript, esc, read_script, script, split_numbered, store_err};
use crate::store::{StoreError, StoreResult, VectorBatch, VectorEntry};

/// KEYS: head, log, thread indexes…; ARGV: (thread key index, position, entry) triples.
static APPEND: LazyLock<StoreScript> = LazyLock::new(|| {
    script(
        r#"
local seq = tonumber(redis.call('HGET', KEYS[1], 'seq') or '0')
local replaced = false
for i = 1, #ARGV, 3 do
  seq = seq + 1
  local index = KEYS[tonumber(ARGV[i])]
  local old = redis.call('HGET', index, ARGV[i + 1])
  if old then
    redis.call('ZREMRANGEBYSCORE', KEYS[2], old, old)
    replaced = true
  end
  redis.call('HSET', index, ARGV[i + 1], seq)
  redis.call('ZADD', KEYS[2], seq, string.format('%d', seq) .. ':' .. ARGV[i + 2])
end
redis.call('HSET', KEYS[1], 'seq', string.format('%d', seq))
if replaced then redis.call('HINCRBY', KEYS[1], 'epoch', 1) end
return 1
"#,
    )
});

/// KEYS: head, log; ARGV: after, limit → {epoch, seq, members}.
static READ: LazyLock<StoreScript> = LazyLock::new(|| {
    read_script(
        r#"
local head = redis.call('HMGET', KEYS[1], 'epoch', 'seq')
local members = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[1], '+inf', 'LIMIT', 0, ARGV[2])
return {head[1] or '0', head[2] or '0', members}
"#,
    )
});

/// KEYS: head, log, thread index; ARGV: positions (none: the whole thread) → deleted count.
static DELETE: LazyLock<StoreScript> = LazyLock::new(|| {
    script(
        r#"
local seqs = {}
if #ARGV == 0 then
  seqs = redis.call('HVALS', KEYS[3])
  redis.call('DEL', KEYS[3])
else
  for i = 1, #ARGV do
    local seq = redis.call('HGET', KEYS[3], ARGV[i])
    if seq then
      seqs[#seqs + 1] = seq
      redis.call('HDEL', KEYS[3], ARGV[i])
    end
  end
end
for _, seq in ipairs(seqs) do redis.call('ZREMRANGEBYSCORE', KEYS[2], seq, seq) end
if #seqs > 0 then redis.call('HINCRBY', KEYS[1], 'epoch', 1) end
return #seqs
"#,
    )
});

/// Appends entries in one script.
pub(super) async fn append(
    store: &RedisStore,
    resource_id: &str,
    entries: &[VectorEntry],
) -> StoreResult<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let mut invocation = store.invoke(&APPEND);
    invocation
        .key(key(resource_id, "head"))
        .key(key(resource_id, "log"));
    let mut threads: Vec<&str> = Vec::new();
    for entry in entries {
        let index = match threads.iter().position(|t| *t == entry.thread_id) {
            Some(i) => i,
            None => {
                invocation.key(thread_index(resource_id, &entry.thread_id));
                threads.push(&entry.thread_id);
                threads.len() - 1
            }
        };
        // KEYS is 1-based and the thread indexes follow head and log.
        invocation
            .arg(index + 3)
            .arg(entry.position)
            .arg(encode(entry));
    }
    store.eval(&invocation).await.map_err(store_err)
}

/// Reads a page of the log with its head.
pub(super) async fn read(
    store: &RedisStore,
    resource_id: &str,
    after: u64,
    limit: usize,
) -> StoreResult<VectorBatch> {
    let mut invocation = store.invoke(&READ);
    invocation
        .key(key(resource_id, "head"))
        .key(key(resource_id, "log"))
        .arg(after)
        .arg(limit.clamp(1, i64::MAX as usize));
    let (epoch, last_seq, members): (u64, u64, Vec<Vec<u8>>) =
        store.eval(&invocation).await.map_err(store_err)?;
    let entries = members
        .iter()
        .map(|member| {
            let (seq, raw) = split_numbered(member)?;
            Ok((seq, decode(&raw)?))
        })
        .collect::<StoreResult<_>>()?;
    Ok(VectorBatch {
        epoch,
        entries,
        last_seq,
    })
}

/// Deletes a thread's entries (or those at `positions`).
pub(super) async fn delete(
    store: &RedisStore,
    resource_id: &str,
    thread_id: &str,
    positions: Option<&[u64]>,
) -> StoreResult<u64> {
    if positions.is_some_and(<[u64]>::is_empty) {
        return Ok(0);
    }
    let mut invocation = store.invoke(&DELETE);
    invocation
        .key(key(resource_id, "head"))
        .key(key(resource_id, "log"))
        .key(thread_index(resource_id, thread_id));
    for position in positions.unwrap_or_default() {
        invocation.arg(*position);
    }
    store.eval(&invocation).await.map_err(store_err)
}

fn key(resource_id: &str, suffix: &str) -> String {
    format!("agentd:{{v:{}}}:{suffix}", esc(resource_id))
}

fn thread_index(resource_id: &str, thread_id: &str) -> String {
    key(resource_id, &format!("t:{}", esc(thread_id)))
}

fn encode(entry: &VectorEntry) -> Vec<u8> {
    let thread = entry.thread_id.as_bytes();
    let mut out = Vec::with_capacity(12 + thread.len() + entry.vector.len());
    // Thread ids are bounded by the request limits, far below u32::MAX.
    out.extend_from_slice(
        &u32::try_from(thread.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    out.extend_from_slice(thread);
    out.extend_from_slice(&entry.position.to_le_bytes());
    out.extend_from_slice(&entry.vector);
    out
}

fn decode(raw: &Bytes) -> StoreResult<VectorEntry> {
    let corrupt = || StoreError::Corrupt("malformed vector entry".into());
    let len_bytes = raw.get(..4).ok_or_else(corrupt)?;
    let len = u32::from_le_bytes(len_bytes.try_into().map_err(|_| corrupt())?) as usize;
    let thread = raw.get(4..4 + len).ok_or_else(corrupt)?;
    let position = raw.get(4 + len..12 + len).ok_or_else(corrupt)?;
    Ok(VectorEntry {
        thread_id: String::from_utf8(thread.to_vec()).map_err(|_| corrupt())?,
        position: u64::from_le_bytes(position.try_into().map_err(|_| corrupt())?),
        vector: raw.slice(12 + len..),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_keys_share_the_resource_tag() {
        let entry = VectorEntry {
            thread_id: "t:1".into(),
            position: 7,
            vector: Bytes::from_static(&[1, 2, 3, 4]),
        };
        assert_eq!(decode(&Bytes::from(encode(&entry))).unwrap(), entry);
        assert!(decode(&Bytes::from_static(&[9, 0, 0, 0, b'x'])).is_err());
        assert_eq!(thread_index("r{1}", "t:1"), "agentd:{v:r%7B1%7D}:t:t%3A1");
    }
}
