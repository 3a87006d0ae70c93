//! Threads on the embedded store: the thread row and its ownership check, the per-resource
//! listing index, reading and deleting messages by position, deleting a whole thread, and
//! resource documents.
//!
//! Positions are immutable: the thread row's `next` is the position the next message gets, so a
//! deletion leaves a gap and is counted in [`THREAD_DELETED`] (the message count is
//! `next - deleted`).

use bytes::Bytes;
use redb::{
    ReadTransaction, ReadableTable, ReadableTableMetadata, TableDefinition, WriteTransaction,
};

use super::{DOCS, Doc, DocKey, DocRow, MESSAGES, THREADS, ThreadRow};
use crate::store::{
    Cas, MessageQuery, StoreError, StoreResult, StoredMessage, ThreadCursor, ThreadInfo, ThreadKey,
    ThreadOrder, Versioned,
};

/// (resource, order, time_ms, thread id) → (): a resource's threads by creation (order 0) and
/// by last update (order 1).
pub(super) const THREAD_LIST: TableDefinition<(&str, u8, u64, &str), ()> =
    TableDefinition::new("thread_list");
/// thread id → how many of its messages were deleted.
pub(super) const THREAD_DELETED: TableDefinition<&str, u64> =
    TableDefinition::new("thread_deleted");
/// (resource id, kind) → (version, created_ms, updated_ms, value).
pub(super) const RESOURCE_DOCS: TableDefinition<DocKey, DocRow> =
    TableDefinition::new("resource_docs");

const BY_CREATED: u8 = 0;
const BY_UPDATED: u8 = 1;

/// A decoded thread row.
pub(super) struct Thread {
    pub(super) owner: String,
    pub(super) created_ms: u64,
    pub(super) updated_ms: u64,
    /// The position the next message gets.
    pub(super) next: u64,
    pub(super) meta: Option<Vec<u8>>,
}

/// Reads the thread of `key`: `WrongOwner` if another resource owns it, `None` if absent.
pub(super) fn owned_thread(
    table: &impl ReadableTable<&'static str, ThreadRow>,
    key: &ThreadKey,
) -> StoreResult<Option<Thread>> {
    let thread = table.get(key.thread_id.as_str())?.map(|guard| {
        let (owner, created_ms, updated_ms, next, meta) = guard.value();
        Thread {
            owner: owner.to_string(),
            created_ms,
            updated_ms,
            next,
            meta: meta.map(<[u8]>::to_vec),
        }
    });
    match thread {
        Some(thread) if thread.owner != key.resource_id => Err(StoreError::WrongOwner {
            thread_id: key.thread_id.clone(),
        }),
        thread => Ok(thread),
    }
}

/// Writes the thread row (creating it for `key.resource_id` or updating the existing one) and
/// moves it in its resource's listing.
pub(super) fn save_thread(
    tx: &WriteTransaction,
    table: &mut redb::Table<&'static str, ThreadRow>,
    key: &ThreadKey,
    existing: Option<Thread>,
    now_ms: u64,
    meta: Option<&[u8]>,
    added_messages: u64,
) -> StoreResult<()> {
    let mut list = tx.open_table(THREAD_LIST)?;
    let thread = match existing {
        Some(thread) => {
            let owner = thread.owner.as_str();
            list.remove((owner, BY_UPDATED, thread.updated_ms, key.thread_id.as_str()))?;
            thread
        }
        None => {
            let owner = key.resource_id.as_str();
            list.insert((owner, BY_CREATED, now_ms, key.thread_id.as_str()), ())?;
            Thread {
                owner: key.resource_id.clone(),
                created_ms: now_ms,
                updated_ms: now_ms,
                next: 0,
                meta: None,
            }
        }
    };
    let updated = now_ms.max(thread.created_ms);
    list.insert(
        (
            thread.owner.as_str(),
            BY_UPDATED,
            updated,
            key.thread_id.as_str(),
        ),
        (),
    )?;
    let meta = meta.or(thread.meta.as_deref());
    let next = thread.next.saturating_add(added_messages);
    let row = (
        thread.owner.as_str(),
        thread.created_ms,
        updated,
        next,
        meta,
    );
    table.insert(key.thread_id.as_str(), row)?;
    Ok(())
}

/// The summary of an existing thread row.
fn info(
    tx_deleted: &impl ReadableTable<&'static str, u64>,
    thread_id: &str,
    thread: Thread,
) -> StoreResult<ThreadInfo> {
    let deleted = tx_deleted.get(thread_id)?.map_or(0, |guard| guard.value());
    Ok(ThreadInfo {
        thread_id: thread_id.to_owned(),
        resource_id: thread.owner,
        created_ms: thread.created_ms,
        updated_ms: thread.updated_ms,
        message_count: thread.next.saturating_sub(deleted),
        meta: thread.meta.map(Bytes::from),
    })
}

/// A thread's summary, ownership checked.
pub(super) fn get(tx: &ReadTransaction, key: &ThreadKey) -> StoreResult<Option<ThreadInfo>> {
    let Some(thread) = owned_thread(&tx.open_table(THREADS)?, key)? else {
        return Ok(None);
    };
    info(&tx.open_table(THREAD_DELETED)?, &key.thread_id, thread).map(Some)
}

/// Replaces the metadata if it is still `expected`.
pub(super) fn cas_meta(
    tx: &WriteTransaction,
    now_ms: u64,
    key: &ThreadKey,
    expected: Option<&[u8]>,
    meta: &[u8],
) -> StoreResult<Option<bool>> {
    let mut threads = tx.open_table(THREADS)?;
    let Some(thread) = owned_thread(&threads, key)? else {
        return Ok(None);
    };
    if thread.meta.as_deref() != expected {
        return Ok(Some(false));
    }
    save_thread(tx, &mut threads, key, Some(thread), now_ms, Some(meta), 0)?;
    Ok(Some(true))
}

/// A resource's threads, newest first, after `cursor`.
pub(super) fn list(
    tx: &ReadTransaction,
    resource_id: &str,
    order: ThreadOrder,
    cursor: Option<&ThreadCursor>,
    limit: usize,
) -> StoreResult<Vec<ThreadInfo>> {
    let order = match order {
        ThreadOrder::Created => BY_CREATED,
        ThreadOrder::Updated => BY_UPDATED,
    };
    let list = tx.open_table(THREAD_LIST)?;
    let threads = tx.open_table(THREADS)?;
    let deleted = tx.open_table(THREAD_DELETED)?;
    let start = (resource_id, order, 0, "");
    let range = match cursor {
        Some(c) => list.range(start..(resource_id, order, c.time_ms, c.thread_id.as_str()))?,
        None => list.range(start..(resource_id, order + 1, 0, ""))?,
    };
    let mut out = Vec::with_capacity(limit.min(256));
    for entry in range.rev() {
        if out.len() >= limit {
            break;
        }
        let (entry, _) = entry?;
        let (_, _, _, thread_id) = entry.value();
        let key = ThreadKey {
            thread_id: thread_id.to_owned(),
            resource_id: resource_id.to_owned(),
        };
        // The index and the rows change in one transaction; a missing row is skipped anyway.
        if let Ok(Some(thread)) = owned_thread(&threads, &key) {
            out.push(info(&deleted, thread_id, thread)?);
        }
    }
    Ok(out)
}

/// Messages of a thread by position.
pub(super) fn read_messages(
    tx: &ReadTransaction,
    key: &ThreadKey,
    query: MessageQuery,
) -> StoreResult<Option<Vec<StoredMessage>>> {
    if owned_thread(&tx.open_table(THREADS)?, key)?.is_none() {
        return Ok(None);
    }
    let table = tx.open_table(MESSAGES)?;
    let id = key.thread_id.as_str();
    if query.from >= query.to {
        return Ok(Some(Vec::new()));
    }
    let range = table.range((id, query.from)..(id, query.to))?;
    type Entry<'a> = (
        redb::AccessGuard<'a, (&'static str, u64)>,
        redb::AccessGuard<'a, &'static [u8]>,
    );
    let decode = |entry: Result<Entry<'_>, redb::StorageError>| -> StoreResult<StoredMessage> {
        let (k, v) = entry?;
        Ok((k.value().1, Bytes::copy_from_slice(v.value())))
    };
    let messages: StoreResult<Vec<StoredMessage>> = if query.newest_first {
        range.rev().take(query.limit).map(decode).collect()
    } else {
        range.take(query.limit).map(decode).collect()
    };
    messages.map(Some)
}

/// The last `n` messages of a thread, oldest first.
pub(super) fn last_messages(
    table: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
    thread_id: &str,
    next: u64,
    n: usize,
) -> StoreResult<Vec<Bytes>> {
    let mut messages = table
        .range((thread_id, 0)..(thread_id, next))?
        .rev()
        .take(n)
        .map(|entry| Ok(Bytes::copy_from_slice(entry?.1.value())))
        .collect::<StoreResult<Vec<_>>>()?;
    messages.reverse();
    Ok(messages)
}

/// Deletes messages by position; counts the ones that existed.
pub(super) fn delete_messages(
    tx: &WriteTransaction,
    now_ms: u64,
    key: &ThreadKey,
    positions: &[u64],
) -> StoreResult<u64> {
    let mut threads = tx.open_table(THREADS)?;
    let Some(thread) = owned_thread(&threads, key)? else {
        return Ok(0);
    };
    let mut messages = tx.open_table(MESSAGES)?;
    let mut removed = 0u64;
    for &position in positions {
        if messages
            .remove((key.thread_id.as_str(), position))?
            .is_some()
        {
            removed += 1;
        }
    }
    if removed > 0 {
        let mut deleted = tx.open_table(THREAD_DELETED)?;
        let before = deleted
            .get(key.thread_id.as_str())?
            .map_or(0, |g| g.value());
        deleted.insert(key.thread_id.as_str(), before + removed)?;
        save_thread(tx, &mut threads, key, Some(thread), now_ms, None, 0)?;
    }
    Ok(removed)
}

/// Deletes a thread with its messages, the named documents and its listing entries.
pub(super) fn delete(tx: &WriteTransaction, key: &ThreadKey, docs: &[String]) -> StoreResult<bool> {
    let mut threads = tx.open_table(THREADS)?;
    let Some(thread) = owned_thread(&threads, key)? else {
        return Ok(false);
    };
    let id = key.thread_id.as_str();
    let mut messages = tx.open_table(MESSAGES)?;
    let positions: Vec<u64> = messages
        .range((id, 0)..(id, thread.next))?
        .map(|entry| Ok(entry?.0.value().1))
        .collect::<StoreResult<_>>()?;
    for position in positions {
        messages.remove((id, position))?;
    }
    let mut table = tx.open_table(DOCS)?;
    for kind in docs {
        table.remove((id, kind.as_str()))?;
    }
    let mut list = tx.open_table(THREAD_LIST)?;
    let owner = thread.owner.as_str();
    list.remove((owner, BY_CREATED, thread.created_ms, id))?;
    list.remove((owner, BY_UPDATED, thread.updated_ms, id))?;
    tx.open_table(THREAD_DELETED)?.remove(id)?;
    threads.remove(id)?;
    Ok(true)
}

/// Lists every existing thread of a store written before the listing index existed.
pub(super) fn backfill_list(tx: &WriteTransaction) -> StoreResult<()> {
    let mut list = tx.open_table(THREAD_LIST)?;
    if !list.is_empty()? {
        return Ok(());
    }
    let threads = tx.open_table(THREADS)?;
    for entry in threads.iter()? {
        let (id, row) = entry?;
        let (owner, created_ms, updated_ms, _, _) = row.value();
        list.insert((owner, BY_CREATED, created_ms, id.value()), ())?;
        list.insert((owner, BY_UPDATED, updated_ms, id.value()), ())?;
    }
    Ok(())
}

/// A resource document.
pub(super) fn get_resource_doc(
    tx: &ReadTransaction,
    resource_id: &str,
    kind: &str,
) -> StoreResult<Option<Versioned>> {
    Ok(super::read_doc(&tx.open_table(RESOURCE_DOCS)?, resource_id, kind)?.map(Doc::versioned))
}

/// Compare-and-set of a resource document.
pub(super) fn cas_resource_doc(
    tx: &WriteTransaction,
    now_ms: u64,
    resource_id: &str,
    kind: &str,
    expected: u64,
    value: &[u8],
) -> StoreResult<Cas> {
    let mut docs = tx.open_table(RESOURCE_DOCS)?;
    let current = super::read_doc(&docs, resource_id, kind)?;
    if current.as_ref().map_or(0, |doc| doc.version) != expected {
        return Ok(Cas::Conflict(current.map(Doc::versioned)));
    }
    let version = super::next_version(expected)?;
    let created = current.map_or(now_ms, |doc| doc.created_ms);
    docs.insert((resource_id, kind), (version, created, now_ms, value))?;
    Ok(Cas::Written(version))
}
