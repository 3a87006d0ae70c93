//! The vector logs of the embedded store: per resource, message embeddings under increasing
//! sequence numbers, an epoch bumped by deletions, and an index by thread and position so that
//! a thread's (or some messages') vectors can be deleted without scanning the log.

use bytes::Bytes;
use redb::{ReadTransaction, ReadableTable, TableDefinition};

use super::tables::Tables;
use crate::store::{StoreError, StoreResult, VectorBatch, VectorEntry};

/// resource id → (epoch, last sequence number).
pub(super) const VECTOR_HEADS: TableDefinition<&str, (u64, u64)> =
    TableDefinition::new("vector_heads");
/// (resource id, sequence number) → (thread id, position, vector bytes).
pub(super) const VECTORS: TableDefinition<(&str, u64), VectorRow> = TableDefinition::new("vectors");
pub(super) type VectorRow = (&'static str, u64, &'static [u8]);
/// (resource id, thread id, position) → sequence number.
pub(super) const VECTOR_THREADS: TableDefinition<VectorThreadKey, u64> =
    TableDefinition::new("vector_threads");
pub(super) type VectorThreadKey = (&'static str, &'static str, u64);

/// Appends `entries`; an entry for a message that already has one replaces it (and bumps the
/// epoch, since readers may hold the old one).
pub(super) fn append(
    tx: &Tables<'_>,
    resource_id: &str,
    entries: &[VectorEntry],
) -> StoreResult<()> {
    let mut heads = tx.vector_heads()?;
    let (mut epoch, mut seq) = read_head(&*heads, resource_id)?;
    let mut vectors = tx.vectors()?;
    let mut threads = tx.vector_threads()?;
    for entry in entries {
        seq = seq
            .checked_add(1)
            .ok_or_else(|| StoreError::Corrupt("vector sequence overflow".into()))?;
        let at = (resource_id, entry.thread_id.as_str(), entry.position);
        if let Some(old) = threads.insert(at, seq)? {
            vectors.remove((resource_id, old.value()))?;
            epoch += 1;
        }
        let row = (
            entry.thread_id.as_str(),
            entry.position,
            entry.vector.as_ref(),
        );
        vectors.insert((resource_id, seq), row)?;
    }
    heads.insert(resource_id, (epoch, seq))?;
    Ok(())
}

/// At most `limit` entries above `after`, with the head of the same snapshot.
pub(super) fn read(
    tx: &ReadTransaction,
    resource_id: &str,
    after: u64,
    limit: usize,
) -> StoreResult<VectorBatch> {
    let (epoch, last_seq) = read_head(&tx.open_table(VECTOR_HEADS)?, resource_id)?;
    let table = tx.open_table(VECTORS)?;
    let from = after.saturating_add(1);
    let mut entries = Vec::new();
    for row in table.range((resource_id, from)..=(resource_id, u64::MAX))? {
        if entries.len() >= limit {
            break;
        }
        let (key, value) = row?;
        let (thread_id, position, vector) = value.value();
        let entry = VectorEntry {
            thread_id: thread_id.to_owned(),
            position,
            vector: Bytes::copy_from_slice(vector),
        };
        entries.push((key.value().1, entry));
    }
    Ok(VectorBatch {
        epoch,
        entries,
        last_seq,
    })
}

/// Deletes a thread's entries (those at `positions` only, when given); bumps the epoch when any
/// existed.
pub(super) fn delete(
    tx: &Tables<'_>,
    resource_id: &str,
    thread_id: &str,
    positions: Option<&[u64]>,
) -> StoreResult<u64> {
    let mut threads = tx.vector_threads()?;
    let found: Vec<(u64, u64)> = match positions {
        Some(positions) => {
            let mut found = Vec::new();
            for &position in positions {
                if let Some(seq) = threads.get((resource_id, thread_id, position))? {
                    found.push((position, seq.value()));
                }
            }
            found
        }
        None => threads
            .range((resource_id, thread_id, 0)..=(resource_id, thread_id, u64::MAX))?
            .map(|row| {
                let (key, seq) = row?;
                Ok((key.value().2, seq.value()))
            })
            .collect::<StoreResult<_>>()?,
    };
    if found.is_empty() {
        return Ok(0);
    }
    let mut vectors = tx.vectors()?;
    for &(position, seq) in &found {
        threads.remove((resource_id, thread_id, position))?;
        vectors.remove((resource_id, seq))?;
    }
    let mut heads = tx.vector_heads()?;
    let (epoch, seq) = read_head(&*heads, resource_id)?;
    heads.insert(resource_id, (epoch + 1, seq))?;
    Ok(u64::try_from(found.len()).unwrap_or(u64::MAX))
}

fn read_head(
    table: &impl ReadableTable<&'static str, (u64, u64)>,
    resource_id: &str,
) -> StoreResult<(u64, u64)> {
    Ok(table
        .get(resource_id)?
        .map_or((0, 0), |guard| guard.value()))
}
