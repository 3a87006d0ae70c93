//! Named sets of members on the embedded store (the runs awaiting a decision on a thread or a
//! resource, say).

use redb::ReadTransaction;

use super::schema::INDEX;
use super::tables::Tables;
use crate::store::StoreResult;

/// Adds `member` to `index`, or removes it (`present: false`).
pub(super) fn set(tx: &Tables<'_>, index: &str, member: &str, present: bool) -> StoreResult<()> {
    let mut table = tx.index()?;
    if present {
        table.insert((index, member), ())?;
    } else {
        table.remove((index, member))?;
    }
    Ok(())
}

/// The members of `index`, in order.
pub(super) fn members(tx: &ReadTransaction, index: &str) -> StoreResult<Vec<String>> {
    let table = tx.open_table(INDEX)?;
    let mut members = Vec::new();
    for entry in table.range((index, "")..)? {
        let (key, _) = entry?;
        let (set, member) = key.value();
        if set != index {
            break;
        }
        members.push(member.to_string());
    }
    Ok(members)
}
