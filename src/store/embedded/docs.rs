//! Documents on the embedded store: a thread's (the task list…) and a resource's (working
//! memory), each versioned; writes are compare-and-set or an edit run inside the write
//! transaction.

use bytes::Bytes;
use redb::{ReadableTable, Table};

use super::job::{Ctx, Note};
use super::schema::{DocKey, DocRow, next_version};
use super::tables::Tables;
use super::threads::{owned_thread, save_thread};
use crate::store::{Cas, DocEdit, StoreResult, ThreadKey, Versioned};

/// A decoded document row.
pub(super) struct Doc {
    version: u64,
    created_ms: u64,
    value: Bytes,
}

impl Doc {
    /// The stored value and its version.
    pub(super) fn versioned(self) -> Versioned {
        Versioned {
            version: self.version,
            value: self.value,
        }
    }

    /// [`Doc::versioned`] of a row that stays (the value's bytes are shared, not copied).
    fn to_versioned(&self) -> Versioned {
        Versioned {
            version: self.version,
            value: self.value.clone(),
        }
    }
}

/// The version of a document that may be absent (0 = absent).
fn version_of(doc: Option<&Doc>) -> u64 {
    doc.map_or(0, |doc| doc.version)
}

/// Reads the document `kind` of `id` (a thread or a resource).
pub(super) fn read_doc(
    table: &impl ReadableTable<DocKey, DocRow>,
    id: &str,
    kind: &str,
) -> StoreResult<Option<Doc>> {
    Ok(table.get((id, kind))?.map(|guard| {
        let (version, created_ms, _updated_ms, value) = guard.value();
        Doc {
            version,
            created_ms,
            value: Bytes::copy_from_slice(value),
        }
    }))
}

/// Writes `value` as the version after `current`'s, keeping its creation time.
fn put_doc(
    table: &mut Table<DocKey, DocRow>,
    (id, kind): (&str, &str),
    current: Option<&Doc>,
    now_ms: u64,
    value: &[u8],
) -> StoreResult<u64> {
    let version = next_version(version_of(current))?;
    let created = current.map_or(now_ms, |doc| doc.created_ms);
    table.insert((id, kind), (version, created, now_ms, value))?;
    Ok(version)
}

/// Compare-and-set of a document in `table`; the conflict carries the current value.
pub(super) fn cas_doc(
    table: &mut Table<DocKey, DocRow>,
    (id, kind): (&str, &str),
    now_ms: u64,
    expected: u64,
    value: &[u8],
) -> StoreResult<Cas> {
    let current = read_doc(table, id, kind)?;
    if version_of(current.as_ref()) != expected {
        return Ok(Cas::Conflict(current.map(Doc::versioned)));
    }
    put_doc(table, (id, kind), current.as_ref(), now_ms, value).map(Cas::Written)
}

/// Compare-and-set of a thread's document: ownership checked, thread created or touched,
/// watchers notified on commit.
pub(super) fn cas_thread_doc(
    tx: &Tables<'_>,
    ctx: &mut Ctx,
    key: &ThreadKey,
    kind: &str,
    expected: u64,
    value: &Bytes,
) -> StoreResult<Cas> {
    let written = with_thread_doc(tx, ctx, key, kind, |current| {
        if version_of(current) != expected {
            return Ok(Err(Cas::Conflict(current.map(Doc::to_versioned))));
        }
        Ok(Ok(value.clone()))
    })?;
    Ok(written.map_or_else(|conflict| conflict, Cas::Written))
}

/// Rewrites a thread's document with `edit` (see [`crate::store::Store::update_doc`]); returns
/// its version afterwards.
pub(super) fn update_thread_doc(
    tx: &Tables<'_>,
    ctx: &mut Ctx,
    key: &ThreadKey,
    kind: &str,
    edit: &mut DocEdit,
) -> StoreResult<u64> {
    let written = with_thread_doc(tx, ctx, key, kind, |current| {
        let stored = current.map(Doc::to_versioned);
        Ok(edit(stored.as_ref())?.ok_or(version_of(current)))
    })?;
    Ok(written.unwrap_or_else(|version| version))
}

/// Reads a thread's document, lets `decide` pick the value to write (or an answer without
/// writing), and writes it: the shared steps of every thread document write.
fn with_thread_doc<T>(
    tx: &Tables<'_>,
    ctx: &mut Ctx,
    key: &ThreadKey,
    kind: &str,
    decide: impl FnOnce(Option<&Doc>) -> StoreResult<Result<Bytes, T>>,
) -> StoreResult<Result<u64, T>> {
    let mut threads = tx.threads()?;
    let thread = owned_thread(&*threads, key)?;
    let mut docs = tx.docs()?;
    let current = read_doc(&*docs, &key.thread_id, kind)?;
    let value = match decide(current.as_ref())? {
        Ok(value) => value,
        Err(answer) => return Ok(Err(answer)),
    };
    let id = key.thread_id.as_str();
    let version = put_doc(&mut docs, (id, kind), current.as_ref(), ctx.now_ms, &value)?;
    save_thread(tx, &mut threads, key, thread, ctx.now_ms, None, 0)?;
    let topic = (
        key.thread_id.clone(),
        kind.to_owned(),
        key.resource_id.clone(),
    );
    ctx.notes
        .push(Note::Doc(topic, Versioned { version, value }));
    Ok(Ok(version))
}
