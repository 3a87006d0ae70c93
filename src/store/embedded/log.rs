//! Run chunk logs on the embedded store. A log is a head (`LOG_HEADS`: positions `first..next`
//! and its expiry) and its entries, stored one row per append (`LOG_BATCHES`: the append's first
//! position → its entry count and the entries back to back), so an append costs one insert
//! however many chunks it carries. Rows of one chunk each (`LOG_ENTRIES`) are what earlier
//! versions wrote: they are still read and removed, never written.

use std::ops::Range;

use bytes::Bytes;
use redb::{ReadTransaction, ReadableTable};

use super::job::Ctx;
use super::runs::reschedule;
use super::schema::{EXPIRING_LOG, LOG_BATCHES, LOG_ENTRIES, LOG_HEADS};
use super::tables::Tables;
use crate::store::{LogEntry, LogLimits, StoreError, StoreResult};

/// A chunk log's bounds: positions `first..next` hold its entries.
#[derive(Clone, Copy)]
pub(super) struct LogHead {
    pub(super) first: u64,
    pub(super) next: u64,
    pub(super) expires_ms: u64,
}

/// Bytes before each entry's chunk in a batch row: its sequence number and its length.
const ENTRY_HEADER: usize = 8 + 4;

pub(super) fn read_head(
    table: &impl ReadableTable<&'static str, (u64, u64, u64)>,
    run_id: &str,
) -> StoreResult<Option<LogHead>> {
    Ok(table.get(run_id)?.map(|guard| {
        let (first, next, expires_ms) = guard.value();
        LogHead {
            first,
            next,
            expires_ms,
        }
    }))
}

/// Appends to a run's log, drops what exceeds `max_chunks` and restarts its time-to-live.
pub(super) fn append_log(
    tx: &Tables<'_>,
    ctx: &Ctx,
    run_id: &str,
    chunks: &[LogEntry],
    limits: LogLimits,
) -> StoreResult<()> {
    let mut heads = tx.log_heads()?;
    let stored = read_head(&*heads, run_id)?;
    let mut head = match stored {
        // An expired log the sweep has not reached yet: its chunks must not reappear.
        Some(head) if head.expires_ms <= ctx.now_ms => {
            remove_positions(tx, run_id, head.first..head.next)?;
            LogHead {
                first: head.next,
                ..head
            }
        }
        Some(head) => head,
        None => LogHead {
            first: 0,
            next: 0,
            expires_ms: 0,
        },
    };
    if !chunks.is_empty() {
        let count = chunks.len() as u64;
        tx.log_batches()?
            .insert((run_id, head.next), (count, encode(chunks).as_slice()))?;
        head.next += count;
    }
    let max = u64::try_from(limits.max_chunks).unwrap_or(u64::MAX);
    let keep_from = head.next.saturating_sub(max).max(head.first);
    remove_positions(tx, run_id, head.first..keep_from)?;
    head.first = keep_from;
    let old_expiry = stored.map(|head| head.expires_ms);
    if head.first == head.next {
        heads.remove(run_id)?;
        return reschedule(tx, EXPIRING_LOG, run_id, old_expiry, None);
    }
    head.expires_ms = ctx.expires_at(limits.ttl);
    heads.insert(run_id, (head.first, head.next, head.expires_ms))?;
    reschedule(tx, EXPIRING_LOG, run_id, old_expiry, Some(head.expires_ms))
}

/// Removes the entries at `positions` (the front of the log: no row starts before it). A batch
/// that runs past the end keeps its tail, re-keyed at the end.
pub(super) fn remove_positions(
    tx: &Tables<'_>,
    run_id: &str,
    positions: Range<u64>,
) -> StoreResult<()> {
    if positions.is_empty() {
        return Ok(());
    }
    let range = (run_id, positions.start)..(run_id, positions.end);
    tx.log_entries()?.retain_in(range.clone(), |_, _| false)?;
    let mut batches = tx.log_batches()?;
    let mut tail = None;
    if let Some(last) = batches.range(range.clone())?.next_back() {
        let (key, value) = last?;
        let first = key.value().1;
        let (count, data) = value.value();
        if first + count > positions.end {
            let entries = decode(data)?;
            let skip = usize::try_from(positions.end - first).unwrap_or(usize::MAX);
            tail = Some(entries.into_iter().skip(skip).collect::<Vec<_>>());
        }
    }
    batches.retain_in(range, |_, _| false)?;
    if let Some(tail) = tail {
        let count = tail.len() as u64;
        batches.insert((run_id, positions.end), (count, encode(&tail).as_slice()))?;
    }
    Ok(())
}

/// Removes a run's log (head and entries) if it has expired by `now_ms`; a log a later append
/// extended is kept, and its expiry returned.
pub(super) fn purge_log(tx: &Tables<'_>, run_id: &str, now_ms: u64) -> StoreResult<Option<u64>> {
    let mut heads = tx.log_heads()?;
    match read_head(&*heads, run_id)? {
        Some(head) if head.expires_ms > now_ms => Ok(Some(head.expires_ms)),
        Some(head) => {
            remove_positions(tx, run_id, head.first..head.next)?;
            heads.remove(run_id)?;
            Ok(None)
        }
        None => Ok(None),
    }
}

/// The live log entries of a run with a sequence number above `after_seq` (all if `None`).
pub(super) fn read_log(
    tx: &ReadTransaction,
    run_id: &str,
    after_seq: Option<u64>,
    now_ms: u64,
) -> StoreResult<Vec<LogEntry>> {
    let Some(head) = read_head(&tx.open_table(LOG_HEADS)?, run_id)? else {
        return Ok(Vec::new());
    };
    if head.expires_ms <= now_ms {
        return Ok(Vec::new());
    }
    let range = (run_id, head.first)..(run_id, head.next);
    let wanted = |seq: &u64| after_seq.is_none_or(|after| *seq > after);
    let mut chunks = Vec::new();
    // Rows of an earlier version hold lower positions than any batch written after them.
    for row in tx.open_table(LOG_ENTRIES)?.range(range.clone())? {
        let (_, value) = row?;
        let (seq, bytes) = value.value();
        if wanted(&seq) {
            chunks.push((seq, Bytes::copy_from_slice(bytes)));
        }
    }
    for row in tx.open_table(LOG_BATCHES)?.range(range)? {
        let (_, value) = row?;
        chunks.extend(
            decode(value.value().1)?
                .into_iter()
                .filter(|(seq, _)| wanted(seq)),
        );
    }
    Ok(chunks)
}

/// Entries back to back: sequence number (u64, little-endian), length (u32), the chunk.
fn encode(chunks: &[LogEntry]) -> Vec<u8> {
    let size = chunks.iter().map(|(_, b)| ENTRY_HEADER + b.len()).sum();
    let mut out = Vec::with_capacity(size);
    for (seq, bytes) in chunks {
        out.extend_from_slice(&seq.to_le_bytes());
        // A chunk is far below 4 GiB (the gRPC message limit bounds it).
        out.extend_from_slice(&u32::try_from(bytes.len()).unwrap_or(u32::MAX).to_le_bytes());
        out.extend_from_slice(bytes);
    }
    out
}

fn decode(mut data: &[u8]) -> StoreResult<Vec<LogEntry>> {
    let corrupt = || StoreError::Corrupt("run log batch: truncated entry".into());
    let mut entries = Vec::new();
    while !data.is_empty() {
        let (header, rest) = data.split_at_checked(ENTRY_HEADER).ok_or_else(corrupt)?;
        let (seq, len) = header.split_at(8);
        let seq = u64::from_le_bytes(seq.try_into().map_err(|_| corrupt())?);
        let len = u32::from_le_bytes(len.try_into().map_err(|_| corrupt())?);
        let (chunk, rest) = rest
            .split_at_checked(usize::try_from(len).map_err(|_| corrupt())?)
            .ok_or_else(corrupt)?;
        entries.push((seq, Bytes::copy_from_slice(chunk)));
        data = rest;
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_round_trip_and_refuse_truncation() {
        let entries = vec![
            (3, Bytes::from_static(b"abc")),
            (4, Bytes::new()),
            (9, Bytes::from_static(b"z")),
        ];
        let encoded = encode(&entries);
        assert_eq!(decode(&encoded).unwrap(), entries);
        // A cut inside an entry is refused; one between entries reads the entries before it.
        for cut in 1..encoded.len() {
            match decode(&encoded[..cut]) {
                Ok(prefix) => assert!(prefix.len() < entries.len() && entries.starts_with(&prefix)),
                Err(e) => assert!(e.to_string().contains("truncated"), "cut at {cut}: {e}"),
            }
        }
        assert!(decode(&encoded[..5]).is_err());
    }
}
