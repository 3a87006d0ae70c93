//! The score lists of the embedded store: per list (a run's, a thread's, an agent's scores),
//! records under positions 0, 1, 2… in the order they were appended.

use bytes::Bytes;
use redb::{ReadTransaction, ReadableTable, TableDefinition};

use super::tables::Tables;
use crate::store::{StoreError, StoreResult};

/// (list, position) → encoded score record.
pub(super) const SCORES: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("scores");

/// Appends `score` at the next position of each list.
pub(super) fn append(tx: &Tables<'_>, lists: &[String], score: &[u8]) -> StoreResult<()> {
    let mut table = tx.scores()?;
    for list in lists {
        let next = match table
            .range((list.as_str(), 0)..=(list.as_str(), u64::MAX))?
            .next_back()
        {
            Some(last) => last?
                .0
                .value()
                .1
                .checked_add(1)
                .ok_or_else(|| StoreError::Corrupt("score position overflow".into()))?,
            None => 0,
        };
        table.insert((list.as_str(), next), score)?;
    }
    Ok(())
}

/// At most `limit` records of `list` from position `from`.
pub(super) fn read(
    tx: &ReadTransaction,
    list: &str,
    from: u64,
    limit: usize,
) -> StoreResult<Vec<Bytes>> {
    let table = tx.open_table(SCORES)?;
    table
        .range((list, from)..=(list, u64::MAX))?
        .take(limit)
        .map(|row| Ok(Bytes::copy_from_slice(row?.1.value())))
        .collect()
}
