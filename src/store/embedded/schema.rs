//! The embedded store's tables: what each row holds, creating them, the version rule.

use redb::{Database, TableDefinition};

use super::tables::Tables;
use super::threads;
use crate::store::{StoreError, StoreResult};

/// thread id → (owner, created_ms, updated_ms, next message position, meta).
pub(super) const THREADS: TableDefinition<&str, ThreadRow> = TableDefinition::new("threads");
pub(super) type ThreadRow = (&'static str, u64, u64, u64, Option<&'static [u8]>);
/// (thread id, kind) → (version, created_ms, updated_ms, value).
pub(super) const DOCS: TableDefinition<DocKey, DocRow> = TableDefinition::new("docs");
pub(super) type DocKey = (&'static str, &'static str);
pub(super) type DocRow = (u64, u64, u64, &'static [u8]);
/// (thread id, position) → message.
pub(super) const MESSAGES: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("messages");
/// run id → (version, expires_ms, value).
pub(super) const RUNS: TableDefinition<&str, RunRow> = TableDefinition::new("runs");
pub(super) type RunRow = (u64, u64, &'static [u8]);
/// run id → (first position, next position, expires_ms) of its chunk log.
pub(super) const LOG_HEADS: TableDefinition<&str, (u64, u64, u64)> =
    TableDefinition::new("log_heads");
/// (run id, position) → (seq, chunk): one chunk per row, as earlier versions wrote logs.
pub(super) const LOG_ENTRIES: TableDefinition<LogKey, (u64, &[u8])> =
    TableDefinition::new("log_entries");
/// (run id, first position) → (entries, the entries encoded): one row per append.
pub(super) const LOG_BATCHES: TableDefinition<LogKey, (u64, &[u8])> =
    TableDefinition::new("log_batches");
pub(super) type LogKey = (&'static str, u64);
/// idempotency key → (expires_ms, value).
pub(super) const CLAIMS: TableDefinition<&str, (u64, &[u8])> = TableDefinition::new("claims");
/// (lease end ms, run id) → (): runs executing somewhere, by when their owner must renew.
pub(super) const LEASES: TableDefinition<(u64, &str), ()> = TableDefinition::new("leases");
/// run id → its entry's lease end in [`LEASES`].
pub(super) const LEASE_OF: TableDefinition<&str, u64> = TableDefinition::new("lease_of");
/// (index, member) → ().
pub(super) const INDEX: TableDefinition<(&str, &str), ()> = TableDefinition::new("index");
/// (expires_ms, record kind, id) → (): what the sweep visits, oldest first.
pub(super) const EXPIRY: TableDefinition<ExpiryKey, ()> = TableDefinition::new("expiry");
pub(super) type ExpiryKey = (u64, u8, &'static str);

/// Record kinds in [`EXPIRY`].
pub(super) const EXPIRING_RUN: u8 = 0;
pub(super) const EXPIRING_LOG: u8 = 1;
pub(super) const EXPIRING_CLAIM: u8 = 2;

/// Creates every table, so that read transactions never meet a missing one.
pub(super) fn create_tables(db: &Database) -> StoreResult<()> {
    let tx = db.begin_write()?;
    // The tables jobs write are the tables there are: one list of them, in `Tables`.
    Tables::new(&tx).create_all()?;
    threads::backfill_list(&tx)?;
    tx.commit()?;
    Ok(())
}

/// The version after `version`: versions never wrap.
pub(super) fn next_version(version: u64) -> StoreResult<u64> {
    version
        .checked_add(1)
        .ok_or_else(|| StoreError::Corrupt("version overflow".into()))
}
