//! A run's chunk log on Redis. While the run goes on it is a list that every append extends
//! (and publishes to followers); when it ends the whole log becomes one zstd-compressed value,
//! a fifth of the list's size, since chunks repeat one another (the `finish` chunk carries
//! every step again):
//!
//! | key                          | type   | content                                         |
//! |------------------------------|--------|-------------------------------------------------|
//! | `agentd:{r:<run>}:log`       | list   | `<seq>:<chunk>` per chunk, while the run goes on |
//! | `agentd:{r:<run>}:log:z`     | string | the sealed log: zstd of the entries, each as its |
//! |                              |        | length (u32 LE) and `<seq>:<chunk>`             |
//!
//! Reading takes both in one round trip: a continued run (after a decision) appends to the
//! list again after a sealed part.

use std::cell::RefCell;
use std::sync::LazyLock;

use zstd::bulk::Compressor;

use super::{
    RedisStore, StoreScript, encode_numbered, run_key, script, split_numbered, store_err, ttl_ms,
};
use crate::store::{LogEntry, LogLimits, StoreError, StoreResult};

/// zstd's level for sealed logs: its fastest regular one. A finished 2-step log of ~10 KB
/// compresses in about 20 µs; level 3 took a quarter longer for the same Redis memory per run.
const LEVEL: i32 = 1;

/// KEYS: log, sealed; ARGV: max chunks, ttl_ms, channel, entries… → appends and publishes.
static APPEND: LazyLock<StoreScript> = LazyLock::new(|| {
    script(
        r#"
for i = 4, #ARGV do
  redis.call('RPUSH', KEYS[1], ARGV[i])
  publish(ARGV[3], ARGV[i])
end
if ARGV[1] == '0' then
  redis.call('DEL', KEYS[1], KEYS[2])
else
  redis.call('LTRIM', KEYS[1], '-' .. ARGV[1], -1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
"#,
    )
});

/// KEYS: log, sealed; ARGV: ttl_ms, channel, sealed value (empty: none), entries… → publishes
/// the entries, stores the sealed value in place of the list.
static SEAL: LazyLock<StoreScript> = LazyLock::new(|| {
    script(
        r#"
for i = 4, #ARGV do
  publish(ARGV[2], ARGV[i])
end
redis.call('DEL', KEYS[1])
if ARGV[3] == '' then
  redis.call('DEL', KEYS[2])
else
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[1])
end
return 1
"#,
    )
});

impl RedisStore {
    /// See [`Store::append_chunks`](crate::store::Store::append_chunks).
    pub(super) async fn log_append(
        &self,
        run_id: &str,
        chunks: Vec<LogEntry>,
        limits: LogLimits,
    ) -> StoreResult<()> {
        let mut script = self.invoke(&APPEND);
        script
            .key(run_key(run_id, "log"))
            .key(run_key(run_id, "log:z"))
            .arg(limits.max_chunks.min(i64::MAX as usize))
            .arg(ttl_ms(limits.ttl))
            .arg(run_key(run_id, "chunks"));
        for (seq, bytes) in &chunks {
            script.arg(encode_numbered(*seq, bytes));
        }
        self.eval(&script).await.map_err(store_err)
    }

    /// See [`Store::seal_chunks`](crate::store::Store::seal_chunks).
    pub(super) async fn log_seal(
        &self,
        run_id: &str,
        last: Vec<LogEntry>,
        whole: Vec<LogEntry>,
        limits: LogLimits,
    ) -> StoreResult<()> {
        let keep = whole.len().saturating_sub(limits.max_chunks);
        let sealed = if limits.max_chunks == 0 {
            Vec::new()
        } else {
            seal(&whole[keep..])?
        };
        let mut script = self.invoke(&SEAL);
        script
            .key(run_key(run_id, "log"))
            .key(run_key(run_id, "log:z"))
            .arg(ttl_ms(limits.ttl))
            .arg(run_key(run_id, "chunks"))
            .arg(sealed);
        for (seq, bytes) in &last {
            script.arg(encode_numbered(*seq, bytes));
        }
        self.eval(&script).await.map_err(store_err)
    }

    /// See [`Store::read_chunks`](crate::store::Store::read_chunks).
    pub(super) async fn log_read(
        &self,
        run_id: &str,
        after_seq: u64,
    ) -> StoreResult<Vec<LogEntry>> {
        let mut pipe = redis::pipe();
        pipe.get(run_key(run_id, "log:z"))
            .lrange(run_key(run_id, "log"), 0, -1);
        let (sealed, listed): (Option<Vec<u8>>, Vec<Vec<u8>>) = self.query_pipe(&pipe).await?;
        let mut chunks = match sealed {
            Some(sealed) => unseal(&sealed)?,
            None => Vec::new(),
        };
        for entry in listed {
            chunks.push(split_numbered(&entry)?);
        }
        chunks.retain(|(seq, _)| *seq > after_seq);
        Ok(chunks)
    }
}

/// The sealed form of log entries.
fn seal(entries: &[LogEntry]) -> StoreResult<Vec<u8>> {
    let mut raw = Vec::new();
    for (seq, bytes) in entries {
        let entry = encode_numbered(*seq, bytes);
        let len = u32::try_from(entry.len())
            .map_err(|_| StoreError::Corrupt("a log entry over 4 GiB".into()))?;
        raw.extend_from_slice(&len.to_le_bytes());
        raw.extend_from_slice(&entry);
    }
    compress(&raw).map_err(|e| StoreError::Corrupt(format!("sealing a log: {e}")))
}

thread_local! {
    /// A zstd context per thread, kept: making one for every log cost a third of sealing it.
    /// It holds what the largest log sealed on its thread needed (a few MiB at most: logs
    /// past 4 MiB are not sealed).
    static COMPRESSOR: RefCell<Option<Compressor<'static>>> = const { RefCell::new(None) };
}

/// `raw` compressed at [`LEVEL`] with this thread's context.
fn compress(raw: &[u8]) -> std::io::Result<Vec<u8>> {
    COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let compressor = match &mut *slot {
            Some(compressor) => compressor,
            None => slot.insert(Compressor::new(LEVEL)?),
        };
        compressor.compress(raw)
    })
}

/// The entries of a sealed log.
fn unseal(sealed: &[u8]) -> StoreResult<Vec<LogEntry>> {
    let corrupt = |what: &str| StoreError::Corrupt(format!("sealed log: {what}"));
    let raw = zstd::stream::decode_all(sealed).map_err(|e| corrupt(&e.to_string()))?;
    let mut entries = Vec::new();
    let mut rest = raw.as_slice();
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_at_checked(4)
            .ok_or_else(|| corrupt("short length"))?;
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let (entry, tail) = tail
            .split_at_checked(len)
            .ok_or_else(|| corrupt("short entry"))?;
        entries.push(split_numbered(entry)?);
        rest = tail;
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    #[test]
    fn a_sealed_log_reads_back_as_it_was_and_is_smaller() {
        let chunk = Bytes::from("a chunk that repeats a chunk that repeats ".repeat(20));
        let entries: Vec<LogEntry> = (1..=20).map(|seq| (seq, chunk.clone())).collect();
        let sealed = seal(&entries).unwrap();
        assert_eq!(unseal(&sealed).unwrap(), entries);
        let raw: usize = entries.iter().map(|(_, b)| b.len()).sum();
        assert!(sealed.len() * 10 < raw, "{} of {raw}", sealed.len());
        assert!(unseal(b"not zstd").is_err());
        assert_eq!(unseal(&seal(&[]).unwrap()).unwrap(), Vec::<LogEntry>::new());
    }

    #[test]
    fn the_reused_context_carries_nothing_from_one_log_to_the_next() {
        let small = vec![(1, Bytes::from("first"))];
        let large: Vec<LogEntry> = (1..=500)
            .map(|seq| (seq, Bytes::from(format!("entry {seq} ").repeat(30))))
            .collect();
        let first = seal(&small).unwrap();
        let sealed_large = seal(&large).unwrap();
        assert_eq!(unseal(&sealed_large).unwrap(), large);
        assert_eq!(seal(&small).unwrap(), first);
        assert_eq!(unseal(&first).unwrap(), small);
    }

    #[test]
    fn a_truncated_sealed_log_is_corrupt_not_a_panic() {
        let entries = vec![(1, Bytes::from("abc")), (2, Bytes::from("def"))];
        let mut raw = Vec::new();
        let entry = encode_numbered(1, b"abc");
        raw.extend_from_slice(&(entry.len() as u32 + 5).to_le_bytes());
        raw.extend_from_slice(&entry);
        let bad = zstd::bulk::compress(&raw, LEVEL).unwrap();
        assert!(matches!(unseal(&bad), Err(StoreError::Corrupt(_))));
        assert_eq!(unseal(&seal(&entries).unwrap()).unwrap(), entries);
    }
}
