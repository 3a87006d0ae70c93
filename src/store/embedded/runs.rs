//! Runs and idempotency claims on the embedded store: records that expire, the expiry schedule
//! and its sweep, leases (chunk logs are in `log.rs`).

use std::time::Duration;

use bytes::Bytes;
use redb::{ReadTransaction, ReadableTable};

use super::SWEEP_LIMIT;
use super::job::Ctx;
use super::log::{purge_log, read_head};
use super::schema::{
    EXPIRING_CLAIM, EXPIRING_LOG, EXPIRING_RUN, LEASES, RUNS, RunRow, next_version,
};
use super::tables::Tables;
use super::threads::{append_to_thread, owned_thread};
use crate::store::{Cas, EndWritten, MessageAppend, RunWrite, StoreError, StoreResult, Versioned};

/// Writes a run record if its stored version is `run.expected`, with its expiry and lease.
pub(super) fn cas_run(tx: &Tables<'_>, ctx: &Ctx, run: &RunWrite) -> StoreResult<Cas> {
    let run_id = run.run_id.as_str();
    let mut runs = tx.runs()?;
    let stored_expiry = read_expiry(&*runs, run_id, |(_, expires, _)| expires)?;
    let current = read_run(&*runs, run_id, ctx.now_ms)?;
    if current.as_ref().map_or(0, |run| run.version) != run.expected {
        return Ok(Cas::Conflict(current));
    }
    let version = next_version(run.expected)?;
    let expires = ctx.expires_at(run.ttl);
    runs.insert(run_id, (version, expires, run.value.as_ref()))?;
    reschedule(tx, EXPIRING_RUN, run_id, stored_expiry, Some(expires))?;
    set_lease(
        tx,
        run_id,
        run.lease_until_ms.map(|ms| u64::try_from(ms).unwrap_or(0)),
    )?;
    Ok(Cas::Written(version))
}

/// Ends a run in one step: its record (if its version is `run.expected`) and its messages.
/// The thread's owner is checked first, so a job failing on it has written nothing.
pub(super) fn end_run(
    tx: &Tables<'_>,
    ctx: &Ctx,
    messages: &MessageAppend,
    run: &RunWrite,
) -> StoreResult<EndWritten> {
    let mut rows = tx.threads()?;
    let thread = owned_thread(&*rows, &messages.key)?;
    let record = cas_run(tx, ctx, run)?;
    let first_message = match record {
        Cas::Written(_) => Some(append_to_thread(
            tx,
            &mut rows,
            thread,
            ctx.now_ms,
            &messages.key,
            messages.thread_meta.as_deref(),
            &messages.messages,
        )?),
        Cas::Conflict(_) => None,
    };
    Ok(EndWritten {
        first_message,
        record: Ok(record),
    })
}

/// Reads a live run record: `None` when absent or expired.
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

/// Keeps a record in the expiry schedule, which holds an entry for each record at or before
/// its expiry (not exactly at it): a write that pushes the expiry later, as every rewrite with
/// the same time-to-live does, leaves the entry where it is, and the sweep, finding the record
/// alive there, moves the entry to the record's expiry then ([`sweep_expired`]). A run's
/// writes so touch the schedule once, where each moved the entry. `old` is the expiry the
/// record had (`None`: it is new), `new` the one it gets (`None`: it is deleted).
pub(super) fn reschedule(
    tx: &Tables<'_>,
    kind: u8,
    id: &str,
    old: Option<u64>,
    new: Option<u64>,
) -> StoreResult<()> {
    match (old, new) {
        // An entry at or before `old` is there already.
        (Some(old), Some(new)) if new >= old => {}
        (_, Some(new)) => {
            tx.expiry()?.insert((new, kind, id), ())?;
        }
        // An entry elsewhere (the record was rewritten) is dropped by the sweep, which finds
        // nothing to purge.
        (Some(old), None) => {
            tx.expiry()?.remove((old, kind, id))?;
        }
        (None, None) => {}
    }
    Ok(())
}

/// Visits up to [`SWEEP_LIMIT`] schedule entries that are due: deletes their records if they
/// have expired, and moves the entry of a record whose expiry was pushed later to it.
pub(super) fn sweep_expired(tx: &Tables<'_>, now_ms: u64) -> StoreResult<usize> {
    let mut expiry = tx.expiry()?;
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
        if let Some(later) = purge(tx, *kind, id, now_ms)? {
            expiry.insert((later, *kind, id.as_str()), ())?;
        }
    }
    Ok(due.len())
}

/// Lists the run in [`LEASES`] until `until` (Unix ms), or takes it off the list (`None`).
pub(super) fn set_lease(tx: &Tables<'_>, run_id: &str, until: Option<u64>) -> StoreResult<()> {
    let mut lease_of = tx.lease_of()?;
    let previous = lease_of.get(run_id)?.map(|v| v.value());
    if previous == until {
        return Ok(());
    }
    let mut leases = tx.leases()?;
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

/// Deletes one record if it has expired by `now_ms`; a record a later write extended is kept,
/// and its expiry returned.
pub(super) fn purge(tx: &Tables<'_>, kind: u8, id: &str, now_ms: u64) -> StoreResult<Option<u64>> {
    let alive = |at: u64| at > now_ms;
    match kind {
        EXPIRING_RUN => {
            let mut runs = tx.runs()?;
            match read_expiry(&*runs, id, |(_, expires, _)| expires)? {
                Some(at) if alive(at) => return Ok(Some(at)),
                Some(_) => {
                    runs.remove(id)?;
                    drop(runs);
                    set_lease(tx, id, None)?;
                }
                None => {}
            }
        }
        EXPIRING_LOG => return purge_log(tx, id, now_ms),
        EXPIRING_CLAIM => {
            let mut claims = tx.claims()?;
            match read_expiry(&*claims, id, |(expires, _)| expires)? {
                Some(at) if alive(at) => return Ok(Some(at)),
                Some(_) => {
                    claims.remove(id)?;
                }
                None => {}
            }
        }
        other => return Err(StoreError::Corrupt(format!("unknown expiry kind {other}"))),
    }
    Ok(None)
}

/// Deletes a run's record and chunk log now, with their places in the expiry schedule.
pub(super) fn delete_run(tx: &Tables<'_>, run_id: &str) -> StoreResult<()> {
    let run_expiry = read_expiry(&*tx.runs()?, run_id, |(_, expires, _)| expires)?;
    let log_expiry = read_head(&*tx.log_heads()?, run_id)?.map(|h| h.expires_ms);
    reschedule(tx, EXPIRING_RUN, run_id, run_expiry, None)?;
    reschedule(tx, EXPIRING_LOG, run_id, log_expiry, None)?;
    set_lease(tx, run_id, None)?;
    purge(tx, EXPIRING_RUN, run_id, u64::MAX)?;
    purge(tx, EXPIRING_LOG, run_id, u64::MAX).map(drop)
}

/// Up to `limit` live runs whose lease ended before `until_ms`, earliest first.
pub(super) fn expired_leases(
    tx: &ReadTransaction,
    until_ms: u64,
    now_ms: u64,
    limit: usize,
) -> StoreResult<Vec<String>> {
    let leases = tx.open_table(LEASES)?;
    let runs = tx.open_table(RUNS)?;
    let mut due = Vec::new();
    for entry in leases.range((0, "")..(until_ms, ""))? {
        let (key, _) = entry?;
        let run_id = key.value().1;
        // An expired record's entry is dropped with it by the sweep: skip it until then.
        let live = read_expiry(&runs, run_id, |(_, expires, _)| expires)?
            .is_some_and(|expires| expires > now_ms);
        if live {
            due.push(run_id.to_owned());
        }
        if due.len() >= limit {
            break;
        }
    }
    Ok(due)
}

/// Claims an idempotency key for `ttl`: `None` if this call claimed it, else the value of the
/// live claim that holds it.
pub(super) fn claim(
    tx: &Tables<'_>,
    ctx: &Ctx,
    key: &str,
    value: &[u8],
    ttl: Duration,
) -> StoreResult<Option<Bytes>> {
    let mut claims = tx.claims()?;
    let stored_expiry = match claims.get(key)? {
        Some(guard) => {
            let (expires, first) = guard.value();
            if expires > ctx.now_ms {
                return Ok(Some(Bytes::copy_from_slice(first)));
            }
            Some(expires)
        }
        None => None,
    };
    let expires = ctx.expires_at(ttl);
    claims.insert(key, (expires, value))?;
    reschedule(tx, EXPIRING_CLAIM, key, stored_expiry, Some(expires))?;
    Ok(None)
}
