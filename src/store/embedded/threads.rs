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

use super::docs::{Doc, read_doc};
use super::schema::{DOCS, DocKey, DocRow, MESSAGES, THREADS, ThreadRow};
use super::tables::Tables;
use crate::store::{
    Cas, MessageQuery, StoreError, StoreResult, StoredMessage, ThreadCursor, ThreadInfo, ThreadKey,
    ThreadOrder, ThreadView, Versioned,
};

/// (resource, order, time_ms, thread id) → (): a resource's threads by creation (order 0) and
/// by last update (order 1).
pub(super) const THREAD_LIST: TableDefinition<ThreadListKey, ()> =
    TableDefinition::new("thread_list");
pub(super) type ThreadListKey = (&'static str, u8, u64, &'static str);
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

/// The thread of `key` as a run loads it: its last `last_messages` messages and the documents
/// of `kinds` (in that order).
pub(super) fn load(
    tx: &ReadTransaction,
    key: &ThreadKey,
    last_messages: usize,
    kinds: &[String],
) -> StoreResult<ThreadView> {
    let Some(thread) = owned_thread(&tx.open_table(THREADS)?, key)? else {
        return Ok(ThreadView {
            exists: false,
            messages: Vec::new(),
            docs: vec![None; kinds.len()],
        });
    };
    let messages = self::last_messages(
        &tx.open_table(MESSAGES)?,
        &key.thread_id,
        thread.next,
        last_messages,
    )?;
    let table = tx.open_table(DOCS)?;
    let docs = kinds
        .iter()
        .map(|kind| Ok(read_doc(&table, &key.thread_id, kind)?.map(Doc::versioned)))
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(ThreadView {
        exists: true,
        messages,
        docs,
    })
}

/// Appends `messages` to the thread of `key` (created when absent); returns the position of
/// the first. Ownership is checked before anything is written.
pub(super) fn append_messages(
    tx: &Tables<'_>,
    now_ms: u64,
    key: &ThreadKey,
    meta: Option<&[u8]>,
    messages: &[Bytes],
) -> StoreResult<u64> {
    let mut threads = tx.threads()?;
    let thread = owned_thread(&*threads, key)?;
    append_to_thread(tx, &mut threads, thread, now_ms, key, meta, messages)
}

/// [`append_messages`] to `thread`, the row of `key` as [`owned_thread`] read it from
/// `threads` (`None`: the thread is created).
pub(super) fn append_to_thread(
    tx: &Tables<'_>,
    threads: &mut redb::Table<&'static str, ThreadRow>,
    thread: Option<Thread>,
    now_ms: u64,
    key: &ThreadKey,
    meta: Option<&[u8]>,
    messages: &[Bytes],
) -> StoreResult<u64> {
    let first = thread.as_ref().map_or(0, |thread| thread.next);
    let mut table = tx.messages()?;
    for (position, message) in (first..).zip(messages) {
        table.insert((key.thread_id.as_str(), position), message.as_ref())?;
    }
    let added = u64::try_from(messages.len()).unwrap_or(u64::MAX);
    save_thread(tx, threads, key, thread, now_ms, meta, added)?;
    Ok(first)
}

/// Writes the thread row (creating it for `key.resource_id` or updating the existing one) and
/// moves it in its resource's listing.
pub(super) fn save_thread(
    tx: &Tables<'_>,
    table: &mut redb::Table<&'static str, ThreadRow>,
    key: &ThreadKey,
    existing: Option<Thread>,
    now_ms: u64,
    meta: Option<&[u8]>,
    added_messages: u64,
) -> StoreResult<()> {
    let (thread, listed_at) = match existing {
        Some(thread) => {
            let listed_at = thread.updated_ms;
            (thread, Some(listed_at))
        }
        None => {
            let thread = Thread {
                owner: key.resource_id.clone(),
                created_ms: now_ms,
                updated_ms: now_ms,
                next: 0,
                meta: None,
            };
            (thread, None)
        }
    };
    let updated = now_ms.max(thread.created_ms);
    // Several writes to one thread often share a millisecond: its listing entry stays put, and
    // so does its row when nothing else changes.
    if listed_at == Some(updated) && meta.is_none() && added_messages == 0 {
        return Ok(());
    }
    if listed_at != Some(updated) {
        // One opening of the listing for all its changes (a new thread has two entries).
        let mut list = tx.thread_list()?;
        let (owner, id) = (thread.owner.as_str(), key.thread_id.as_str());
        match listed_at {
            None => list.insert((owner, BY_CREATED, now_ms, id), ()).map(drop)?,
            Some(at) => list.remove((owner, BY_UPDATED, at, id)).map(drop)?,
        }
        list.insert((owner, BY_UPDATED, updated, id), ())?;
    }
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
    tx: &Tables<'_>,
    now_ms: u64,
    key: &ThreadKey,
    expected: Option<&[u8]>,
    meta: &[u8],
) -> StoreResult<Option<bool>> {
    let mut threads = tx.threads()?;
    let Some(thread) = owned_thread(&*threads, key)? else {
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
    tx: &Tables<'_>,
    now_ms: u64,
    key: &ThreadKey,
    positions: &[u64],
) -> StoreResult<u64> {
    let mut threads = tx.threads()?;
    let Some(thread) = owned_thread(&*threads, key)? else {
        return Ok(0);
    };
    let mut messages = tx.messages()?;
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
        let mut deleted = tx.thread_deleted()?;
        let before = deleted
            .get(key.thread_id.as_str())?
            .map_or(0, |g| g.value());
        deleted.insert(key.thread_id.as_str(), before + removed)?;
        save_thread(tx, &mut threads, key, Some(thread), now_ms, None, 0)?;
    }
    Ok(removed)
}

/// Deletes a thread with its messages, the named documents and its listing entries.
pub(super) fn delete(tx: &Tables<'_>, key: &ThreadKey, docs: &[String]) -> StoreResult<bool> {
    let mut threads = tx.threads()?;
    let Some(thread) = owned_thread(&*threads, key)? else {
        return Ok(false);
    };
    let id = key.thread_id.as_str();
    let mut messages = tx.messages()?;
    let positions: Vec<u64> = messages
        .range((id, 0)..(id, thread.next))?
        .map(|entry| Ok(entry?.0.value().1))
        .collect::<StoreResult<_>>()?;
    for position in positions {
        messages.remove((id, position))?;
    }
    let mut table = tx.docs()?;
    for kind in docs {
        table.remove((id, kind.as_str()))?;
    }
    let mut list = tx.thread_list()?;
    let owner = thread.owner.as_str();
    list.remove((owner, BY_CREATED, thread.created_ms, id))?;
    list.remove((owner, BY_UPDATED, thread.updated_ms, id))?;
    tx.thread_deleted()?.remove(id)?;
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
    tx: &Tables<'_>,
    now_ms: u64,
    resource_id: &str,
    kind: &str,
    expected: u64,
    value: &[u8],
) -> StoreResult<Cas> {
    let mut docs = tx.resource_docs()?;
    super::docs::cas_doc(&mut docs, (resource_id, kind), now_ms, expected, value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use crate::store::embedded::EmbeddedStore;
    use crate::store::embedded::schema::INDEX;

    /// Every key of every thread table, as text, to look for a deleted thread's traces.
    fn thread_table_keys(store: &EmbeddedStore) -> Vec<String> {
        let tx = store.shared.begin_read().unwrap();
        let mut keys = Vec::new();
        for entry in tx.open_table(THREADS).unwrap().iter().unwrap() {
            keys.push(entry.unwrap().0.value().to_owned());
        }
        for entry in tx.open_table(DOCS).unwrap().iter().unwrap() {
            keys.push(format!("{:?}", entry.unwrap().0.value()));
        }
        for entry in tx.open_table(MESSAGES).unwrap().iter().unwrap() {
            keys.push(format!("{:?}", entry.unwrap().0.value()));
        }
        for entry in tx.open_table(THREAD_LIST).unwrap().iter().unwrap() {
            keys.push(format!("{:?}", entry.unwrap().0.value()));
        }
        for entry in tx.open_table(THREAD_DELETED).unwrap().iter().unwrap() {
            keys.push(entry.unwrap().0.value().to_owned());
        }
        for entry in tx.open_table(INDEX).unwrap().iter().unwrap() {
            keys.push(format!("{:?}", entry.unwrap().0.value()));
        }
        keys
    }

    #[tokio::test]
    async fn a_deleted_thread_leaves_no_row_in_any_table() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let key = ThreadKey {
            thread_id: "doomed".into(),
            resource_id: "r".into(),
        };
        let keep = ThreadKey {
            thread_id: "kept".into(),
            resource_id: "r".into(),
        };
        for k in [&key, &keep] {
            let messages = vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")];
            store
                .append_messages(k, Some(Bytes::from_static(b"{}")), messages)
                .await
                .unwrap();
            store
                .cas_doc(k, "tasks", 0, Bytes::from_static(b"[]"))
                .await
                .unwrap();
        }
        store.delete_messages(&key, vec![0]).await.unwrap();
        assert!(
            thread_table_keys(&store)
                .iter()
                .any(|k| k.contains("doomed"))
        );
        assert!(store.delete_thread(&key, &["tasks"]).await.unwrap());
        let keys = thread_table_keys(&store);
        assert!(keys.iter().all(|k| !k.contains("doomed")), "{keys:?}");
        assert!(keys.iter().any(|k| k.contains("kept")));
    }

    #[tokio::test]
    async fn threads_written_before_the_listing_existed_are_listed_at_open() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = EmbeddedStore::open(dir.path()).unwrap();
            let key = ThreadKey {
                thread_id: "old".into(),
                resource_id: "r".into(),
            };
            store
                .append_messages(&key, None, vec![Bytes::from_static(b"m")])
                .await
                .unwrap();
            // As a store of the previous version left it: threads, no listing.
            let tx = store.shared.begin_write().unwrap();
            {
                let mut list = tx.open_table(THREAD_LIST).unwrap();
                list.retain(|_, _| false).unwrap();
            }
            tx.commit().unwrap();
            store.close().await;
        }
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let listed = store
            .list_threads("r", ThreadOrder::Created, None, 10)
            .await
            .unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].thread_id, "old");
        assert_eq!(listed[0].message_count, 1);
    }
}
