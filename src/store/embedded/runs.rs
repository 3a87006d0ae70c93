//! Runs, their chunk logs and idempotency claims on the embedded store: records that expire,
//! the expiry schedule and its sweep.

use bytes::Bytes;
use redb::{ReadTransaction, ReadableTable, WriteTransaction};

use super::writer::Ctx;
use super::{
    CLAIMS, EXPIRING_CLAIM, EXPIRING_LOG, EXPIRING_RUN, EXPIRY, ExpiryKey, LEASE_OF, LEASES,
    LOG_ENTRIES, LOG_HEADS, LogKey, LogRow, RUNS, RunRow, SWEEP_LIMIT,
};
use crate::store::{LogEntry, LogLimits, StoreError, StoreResult, Versioned};

/// A chunk log's bounds: positions `first..next` hold its entries.
#[derive(Clone, Copy)]
pub(super) struct LogHead {
    pub(super) first: u64,
    pub(super) next: u64,
    pub(super) expires_ms: u64,
}

pub(super) fn read_run(
    table: &impl ReadableTable<&'static str, RunRow>,
    run_id: &str,
    now_ms: u64,
) -> StoreResult<Option<Versioned>> {
    let Some(guard) = table.get(run_id)? else {
        return Ok(None);
    };
    let (version, expires_ms, value) = guard.value();
    Ok((expires_ms > now_ms).then(|| Versioned {
        version,
        value: Bytes::copy_from_slice(value),
    }))
}

/// The stored expiry of a record, expired or not (to unschedule it).
pub(super) fn read_expiry<V: redb::Value + 'static>(
    table: &impl ReadableTable<&'static str, V>,
    id: &str,
    expires: impl FnOnce(V::SelfType<'_>) -> u64,
) -> StoreResult<Option<u64>> {
    Ok(table.get(id)?.map(|guard| expires(guard.value())))
}

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

/// Moves a record's entry in the expiry schedule.
pub(super) fn reschedule(
    expiry: &mut redb::Table<ExpiryKey, ()>,
    kind: u8,
    id: &str,
    old: Option<u64>,
    new: Option<u64>,
) -> StoreResult<()> {
    if let Some(old) = old {
        expiry.remove((old, kind, id))?;
    }
    if let Some(new) = new {
        expiry.insert((new, kind, id), ())?;
    }
    Ok(())
}

/// Appends to a run's log, drops what exceeds `max_chunks` and restarts its time-to-live.
pub(super) fn append_log(
    tx: &WriteTransaction,
    ctx: &Ctx,
    run_id: &str,
    chunks: &[LogEntry],
    limits: LogLimits,
) -> StoreResult<()> {
    let mut heads = tx.open_table(LOG_HEADS)?;
    let mut entries = tx.open_table(LOG_ENTRIES)?;
    let stored = read_head(&heads, run_id)?;
    let mut head = match stored {
        // An expired log the sweep has not reached yet: its chunks must not reappear.
        Some(head) if head.expires_ms <= ctx.now_ms => {
            remove_entries(&mut entries, run_id, head.first..head.next)?;
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
    for (seq, bytes) in chunks {
        entries.insert((run_id, head.next), (*seq, bytes.as_ref()))?;
        head.next += 1;
    }
    let max = u64::try_from(limits.max_chunks).unwrap_or(u64::MAX);
    let keep_from = head.next.saturating_sub(max).max(head.first);
    remove_entries(&mut entries, run_id, head.first..keep_from)?;
    head.first = keep_from;
    let mut expiry = tx.open_table(EXPIRY)?;
    let old_expiry = stored.map(|head| head.expires_ms);
    if head.first == head.next {
        heads.remove(run_id)?;
        return reschedule(&mut expiry, EXPIRING_LOG, run_id, old_expiry, None);
    }
    head.expires_ms = ctx.expires_at(limits.ttl);
    heads.insert(run_id, (head.first, head.next, head.expires_ms))?;
    reschedule(
        &mut expiry,
        EXPIRING_LOG,
        run_id,
        old_expiry,
        Some(head.expires_ms),
    )
}

pub(super) fn remove_entries(
    entries: &mut redb::Table<LogKey, LogRow>,
    run_id: &str,
    positions: std::ops::Range<u64>,
) -> StoreResult<()> {
    for position in positions {
        entries.remove((run_id, position))?;
    }
    Ok(())
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
    let table = tx.open_table(LOG_ENTRIES)?;
    let mut chunks = Vec::new();
    for entry in table.range((run_id, head.first)..(run_id, head.next))? {
        let (_, value) = entry?;
        let (seq, bytes) = value.value();
        if after_seq.is_none_or(|after| seq > after) {
            chunks.push((seq, Bytes::copy_from_slice(bytes)));
        }
    }
    Ok(chunks)
}

/// Deletes up to [`SWEEP_LIMIT`] records whose expiry has passed.
pub(super) fn sweep_expired(tx: &WriteTransaction, now_ms: u64) -> StoreResult<usize> {
    let mut expiry = tx.open_table(EXPIRY)?;
    let due = expiry
        .range(..(now_ms.saturating_add(1), 0, ""))?
        .take(SWEEP_LIMIT)
        .map(|entry| {
            let (key, _) = entry?;
            let (at, kind, id) = key.value();
            Ok((at, kind, id.to_string()))
        })
        .collect::<StoreResult<Vec<_>>>()?;
    for (at, kind, id) in &due {
        expiry.remove((*at, *kind, id.as_str()))?;
        purge(tx, *kind, id, now_ms)?;
    }
    Ok(due.len())
}

/// Lists the run in [`LEASES`] until `until` (Unix ms), or takes it off the list (`None`).
pub(super) fn set_lease(
    tx: &WriteTransaction,
    run_id: &str,
    until: Option<u64>,
) -> StoreResult<()> {
    let mut lease_of = tx.open_table(LEASE_OF)?;
    let previous = lease_of.get(run_id)?.map(|v| v.value());
    if previous == until {
        return Ok(());
    }
    let mut leases = tx.open_table(LEASES)?;
    if let Some(previous) = previous {
        leases.remove((previous, run_id))?;
    }
    match until {
        Some(until) => {
            leases.insert((until, run_id), ())?;
            lease_of.insert(run_id, until)?;
        }
        None => {
            lease_of.remove(run_id)?;
        }
    }
    Ok(())
}

/// Deletes one record if it is still expired (a later write may have extended it).
pub(super) fn purge(tx: &WriteTransaction, kind: u8, id: &str, now_ms: u64) -> StoreResult<()> {
    match kind {
        EXPIRING_RUN => {
            let mut runs = tx.open_table(RUNS)?;
            if read_expiry(&runs, id, |(_, expires, _)| expires)?.is_some_and(|at| at <= now_ms) {
                runs.remove(id)?;
                drop(runs);
                set_lease(tx, id, None)?;
            }
        }
        EXPIRING_LOG => {
            let mut heads = tx.open_table(LOG_HEADS)?;
            if let Some(head) = read_head(&heads, id)?.filter(|h| h.expires_ms <= now_ms) {
                let mut entries = tx.open_table(LOG_ENTRIES)?;
                remove_entries(&mut entries, id, head.first..head.next)?;
                heads.remove(id)?;
            }
        }
        EXPIRING_CLAIM => {
            let mut claims = tx.open_table(CLAIMS)?;
            if read_expiry(&claims, id, |(expires, _)| expires)?.is_some_and(|at| at <= now_ms) {
                claims.remove(id)?;
            }
        }
        other => return Err(StoreError::Corrupt(format!("unknown expiry kind {other}"))),
    }
    Ok(())
}

/// Deletes a run's record and chunk log now, with their places in the expiry schedule.
pub(super) fn delete_run(tx: &WriteTransaction, run_id: &str) -> StoreResult<()> {
    let run_expiry = read_expiry(&tx.open_table(RUNS)?, run_id, |(_, expires, _)| expires)?;
    let log_expiry = read_head(&tx.open_table(LOG_HEADS)?, run_id)?.map(|h| h.expires_ms);
    let mut expiry = tx.open_table(EXPIRY)?;
    reschedule(&mut expiry, EXPIRING_RUN, run_id, run_expiry, None)?;
    reschedule(&mut expiry, EXPIRING_LOG, run_id, log_expiry, None)?;
    drop(expiry);
    set_lease(tx, run_id, None)?;
    purge(tx, EXPIRING_RUN, run_id, u64::MAX)?;
    purge(tx, EXPIRING_LOG, run_id, u64::MAX)
}
