//! Thread documents on Redis: compare-and-set by script, and [`Store::update_doc`] from this
//! replica's last sight of the document, so an edit of a list it recently read or wrote costs
//! one round trip instead of a read and a write.
//!
//! The guess is only ever a guess: the write goes through only if the stored document is still
//! that version *and* those bytes (a version alone repeats when a deleted thread is created
//! again), and an edit that would not write, run on a guess, is run again on a fresh read
//! before its answer counts. So another replica's writes are never lost or ignored; a stale
//! guess costs the round trip it tried to save.
//!
//! [`Store::update_doc`]: crate::store::Store::update_doc

use std::sync::{Mutex, PoisonError};

use bytes::Bytes;
use lru::LruCache;

use super::codec::{decode_cas, versioned};
use super::keys::{doc_key, thread_key, watch_channel};
use super::scripts::{CAS_DOC, GET_DOC};
use super::{RedisStore, thread_err};
use crate::store::{Cas, DocEdit, StoreResult, ThreadKey, Versioned};

/// Most bytes of documents (and their keys) remembered per replica.
const RECENT_BYTES: usize = 4 << 20;
/// Largest document remembered; bigger ones are read each time.
const RECENT_MAX_DOC: usize = 64 << 10;

/// A document's identity: thread, owning resource, kind.
type DocId = (String, String, String);

fn doc_id(key: &ThreadKey, kind: &str) -> DocId {
    (
        key.thread_id.clone(),
        key.resource_id.clone(),
        kind.to_owned(),
    )
}

/// The documents this replica read or wrote last, least recently used first out.
pub(super) struct RecentDocs {
    inner: Mutex<Recent>,
}

struct Recent {
    docs: LruCache<DocId, Versioned>,
    bytes: usize,
}

fn weight((thread, resource, kind): &DocId, doc: &Versioned) -> usize {
    thread.len() + resource.len() + kind.len() + doc.value.len()
}

impl RecentDocs {
    pub(super) fn new() -> Self {
        Self {
            inner: Mutex::new(Recent {
                docs: LruCache::unbounded(),
                bytes: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recent> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The last version of the document seen here, if any.
    fn get(&self, key: &ThreadKey, kind: &str) -> Option<Versioned> {
        self.lock().docs.get(&doc_id(key, kind)).cloned()
    }

    /// Remembers `doc` as the document's latest version (`None`: absent), evicting the least
    /// recently used beyond the budget.
    pub(super) fn put(&self, key: &ThreadKey, kind: &str, doc: Option<&Versioned>) {
        let id = doc_id(key, kind);
        let mut recent = self.lock();
        if let Some(old) = recent.docs.pop(&id) {
            recent.bytes -= weight(&id, &old);
        }
        let Some(doc) = doc.filter(|doc| doc.value.len() <= RECENT_MAX_DOC) else {
            return;
        };
        recent.bytes += weight(&id, doc);
        recent.docs.put(id, doc.clone());
        while recent.bytes > RECENT_BYTES {
            let Some((id, old)) = recent.docs.pop_lru() else {
                break;
            };
            recent.bytes -= weight(&id, &old);
        }
    }

    /// Forgets the document (its write failed: what it is now is unknown).
    fn forget(&self, key: &ThreadKey, kind: &str) {
        self.put(key, kind, None);
    }

    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

impl RedisStore {
    /// Compare-and-set of a thread document: version `expected` and, with `same`, exactly
    /// those stored bytes.
    pub(super) async fn doc_cas(
        &self,
        key: &ThreadKey,
        kind: &str,
        expected: u64,
        value: &Bytes,
        same: Option<&Bytes>,
    ) -> StoreResult<Cas> {
        let mut script = self.invoke(&CAS_DOC);
        let [by_created, by_updated] = self.listing_keys(key);
        script
            .key(thread_key(&key.thread_id, "meta"))
            .key(doc_key(&key.thread_id, kind))
            .key(by_created)
            .key(by_updated)
            .arg(&key.resource_id)
            .arg(expected)
            .arg(value.as_ref())
            .arg(watch_channel(key, kind))
            .arg(&key.thread_id);
        if let Some(same) = same {
            script.arg(same.as_ref());
        }
        let written = self.eval_thread(&script, key).await.and_then(decode_cas);
        match &written {
            Ok(Cas::Written(version)) => {
                let doc = Versioned {
                    version: *version,
                    value: value.clone(),
                };
                self.recent.put(key, kind, Some(&doc));
            }
            Ok(Cas::Conflict(now)) => self.recent.put(key, kind, now.as_ref()),
            Err(_) => self.recent.forget(key, kind),
        }
        written
    }

    /// See [`Store::update_doc`](crate::store::Store::update_doc) and the module docs.
    pub(super) async fn doc_update(
        &self,
        key: &ThreadKey,
        kind: &str,
        mut edit: DocEdit,
    ) -> StoreResult<u64> {
        // A guess (this replica's last sight, or absent) until a read or a conflict says.
        let mut current = self.recent.get(key, kind);
        let mut fresh = false;
        loop {
            let expected = current.as_ref().map_or(0, |doc| doc.version);
            let Some(value) = edit(current.as_ref())? else {
                if fresh {
                    return Ok(expected);
                }
                current = self.doc_get(key, kind).await?;
                fresh = true;
                continue;
            };
            let same = current.as_ref().map(|doc| &doc.value);
            match self.doc_cas(key, kind, expected, &value, same).await? {
                Cas::Written(version) => return Ok(version),
                Cas::Conflict(now) => {
                    current = now;
                    fresh = true;
                }
            }
        }
    }

    /// Reads a thread document (ownership checked) and remembers it.
    pub(super) async fn doc_get(
        &self,
        key: &ThreadKey,
        kind: &str,
    ) -> StoreResult<Option<Versioned>> {
        let mut script = self.invoke(&GET_DOC);
        script
            .key(thread_key(&key.thread_id, "meta"))
            .key(doc_key(&key.thread_id, kind))
            .arg(&key.resource_id);
        let found: Option<(u64, Bytes)> = self.eval(&script).await.map_err(thread_err(key))?;
        let doc = found.map(versioned);
        self.recent.put(key, kind, doc.as_ref());
        Ok(doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(thread: &str) -> ThreadKey {
        ThreadKey {
            thread_id: thread.into(),
            resource_id: "r".into(),
        }
    }

    fn doc(version: u64, len: usize) -> Versioned {
        Versioned {
            version,
            value: Bytes::from(vec![b'x'; len]),
        }
    }

    #[test]
    fn recent_docs_stay_within_their_budget_and_forget_on_request() {
        let recent = RecentDocs::new();
        recent.put(&key("a"), "tasks", Some(&doc(1, 10)));
        assert_eq!(recent.get(&key("a"), "tasks"), Some(doc(1, 10)));
        assert_eq!(recent.get(&key("a"), "other"), None);
        // A newer version replaces the older one's weight.
        recent.put(&key("a"), "tasks", Some(&doc(2, 20)));
        assert_eq!(recent.bytes(), "a".len() + "r".len() + "tasks".len() + 20);
        // Too big to remember: read each time, and the older version is gone.
        recent.put(&key("a"), "tasks", Some(&doc(3, RECENT_MAX_DOC + 1)));
        assert_eq!(recent.get(&key("a"), "tasks"), None);
        assert_eq!(recent.bytes(), 0);
        // Past the budget the least recently used go first.
        let count = RECENT_BYTES / RECENT_MAX_DOC + 4;
        for i in 0..count {
            recent.put(
                &key(&format!("t{i}")),
                "tasks",
                Some(&doc(1, RECENT_MAX_DOC)),
            );
        }
        assert!(recent.bytes() <= RECENT_BYTES);
        assert_eq!(recent.get(&key("t0"), "tasks"), None);
        let last = key(&format!("t{}", count - 1));
        assert!(recent.get(&last, "tasks").is_some());
        recent.forget(&last, "tasks");
        assert_eq!(recent.get(&last, "tasks"), None);
    }
}
