//! What ThreadService does to stored threads: listings and message pages with opaque page
//! tokens, title and metadata updates (compare-and-set, so a generated title never overwrites a
//! caller's), and deletion of a thread with everything that hangs on it.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::store::{
    MessageQuery, Store, StoreError, StoreResult, StoredMessage, ThreadCursor, ThreadInfo,
    ThreadKey, ThreadOrder,
};

/// The documents a thread may hold, all deleted with it.
pub const THREAD_DOCS: [&str; 2] = [crate::tasklist::TASKS_DOC, super::working::DOC_KIND];

/// Most compare-and-set attempts of one metadata update before it reports contention.
const MAX_META_ATTEMPTS: usize = 16;

/// The name of the index set of suspended runs of a thread (`scope` "thread") or a resource.
pub fn pending_index(scope: &str, id: &str) -> String {
    format!("pending:{scope}:{id}")
}

/// A thread as ThreadService shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadSummary {
    /// Store-level facts (times, count).
    pub info: ThreadInfo,
    /// The title, when one is set.
    pub title: Option<String>,
    /// The caller's metadata.
    pub metadata: Map<String, Value>,
}

/// A request's page token did not decode (or belongs to another listing).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid page token: pass the next_page_token of the previous page, unchanged")]
pub struct BadPageToken;

/// What can go wrong in a thread operation.
#[derive(Debug, thiserror::Error)]
pub enum ThreadError {
    /// The store failed or refused (ownership).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The thread does not exist.
    #[error("thread \"{0}\" not found")]
    NotFound(String),
    /// The page token is not one this listing issued.
    #[error(transparent)]
    PageToken(#[from] BadPageToken),
    /// Concurrent writers kept changing the metadata.
    #[error("thread \"{0}\" is being changed concurrently; retry")]
    Contended(String),
}

/// Thread operations over the store.
#[derive(Clone)]
pub struct Threads {
    store: Arc<dyn Store>,
}

impl Threads {
    /// Thread operations on `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// A page of a resource's threads, newest first, and the token of the next page.
    pub async fn list(
        &self,
        resource_id: &str,
        order: ThreadOrder,
        page_token: &str,
        page_size: usize,
    ) -> Result<(Vec<ThreadSummary>, String), ThreadError> {
        let cursor = decode_thread_token(page_token, order)?;
        // One more than asked tells whether another page follows.
        let mut threads = self
            .store
            .list_threads(resource_id, order, cursor, page_size + 1)
            .await?;
        let more = threads.len() > page_size;
        threads.truncate(page_size);
        let next = match (more, threads.last()) {
            (true, Some(last)) => encode_thread_token(last, order),
            _ => String::new(),
        };
        Ok((threads.into_iter().map(summary).collect(), next))
    }

    /// One thread.
    pub async fn get(&self, key: &ThreadKey) -> Result<ThreadSummary, ThreadError> {
        self.store
            .get_thread(key)
            .await?
            .map(summary)
            .ok_or_else(|| ThreadError::NotFound(key.thread_id.clone()))
    }

    /// Changes the title and / or metadata (unset: kept; an empty title clears it).
    pub async fn update(
        &self,
        key: &ThreadKey,
        title: Option<String>,
        metadata: Option<Map<String, Value>>,
    ) -> Result<ThreadSummary, ThreadError> {
        let changed = self
            .change_meta(key, |meta| {
                if let Some(title) = &title {
                    let value = (!title.is_empty()).then(|| Value::String(title.clone()));
                    meta.insert("title".into(), value.unwrap_or(Value::Null));
                }
                if let Some(metadata) = &metadata {
                    meta.insert("metadata".into(), Value::Object(metadata.clone()));
                }
                true
            })
            .await?;
        if !changed {
            return Err(ThreadError::NotFound(key.thread_id.clone()));
        }
        self.get(key).await
    }

    /// Sets a generated title unless the thread has one (a caller's title always wins);
    /// returns whether it was set.
    pub async fn set_title_if_absent(&self, key: &ThreadKey, title: &str) -> StoreResult<bool> {
        let outcome = self
            .change_meta(key, |meta| {
                let has_title = meta
                    .get("title")
                    .and_then(Value::as_str)
                    .is_some_and(|t| !t.is_empty());
                if has_title {
                    return false;
                }
                meta.insert("title".into(), Value::String(title.to_owned()));
                true
            })
            .await;
        match outcome {
            Ok(set) => Ok(set),
            Err(ThreadError::Store(e)) => Err(e),
            Err(e) => Err(StoreError::Unavailable(e.to_string())),
        }
    }

    /// Applies `change` to the metadata object by compare-and-set; `Ok(false)` when the thread
    /// is absent or `change` declined.
    async fn change_meta(
        &self,
        key: &ThreadKey,
        change: impl Fn(&mut Map<String, Value>) -> bool,
    ) -> Result<bool, ThreadError> {
        for _ in 0..MAX_META_ATTEMPTS {
            let Some(info) = self.store.get_thread(key).await? else {
                return Ok(false);
            };
            let mut meta = info
                .meta
                .as_deref()
                .and_then(|raw| serde_json::from_slice::<Map<String, Value>>(raw).ok())
                .unwrap_or_else(|| {
                    let mut m = Map::new();
                    m.insert("title".into(), Value::Null);
                    m.insert("metadata".into(), json!({}));
                    m
                });
            if !change(&mut meta) {
                return Ok(false);
            }
            let bytes = Bytes::from(Value::Object(meta).to_string());
            match self.store.cas_thread_meta(key, info.meta, bytes).await? {
                None => return Ok(false),
                Some(true) => return Ok(true),
                Some(false) => continue,
            }
        }
        Err(ThreadError::Contended(key.thread_id.clone()))
    }

    /// Deletes a thread: its suspended runs first, then its recall vectors, then the thread
    /// with its messages and documents in one step. Each step can be repeated, so a failed delete is resumed by
    /// calling it again. Returns (existed, suspended runs deleted).
    pub async fn delete(&self, key: &ThreadKey) -> Result<(bool, u32), ThreadError> {
        // Ownership first: another resource's thread must not lose its runs.
        if self.store.get_thread(key).await?.is_none() {
            return Ok((false, 0));
        }
        let by_thread = pending_index("thread", &key.thread_id);
        let by_resource = pending_index("resource", &key.resource_id);
        let runs = self.store.index_members(&by_thread).await?;
        for run_id in &runs {
            self.store.delete_run(run_id).await?;
            self.store.index_set(&by_resource, run_id, false).await?;
            self.store.index_set(&by_thread, run_id, false).await?;
        }
        self.store
            .delete_vectors(&key.resource_id, &key.thread_id, None)
            .await?;
        let existed = self.store.delete_thread(key, &THREAD_DOCS).await?;
        Ok((existed, u32::try_from(runs.len()).unwrap_or(u32::MAX)))
    }

    /// A page of a thread's messages in the order asked, and the token of the next page.
    pub async fn messages(
        &self,
        key: &ThreadKey,
        page_token: &str,
        page_size: usize,
        newest_first: bool,
    ) -> Result<(Vec<StoredMessage>, String), ThreadError> {
        let (from, to) = match decode_message_token(page_token, newest_first)? {
            None => (0, u64::MAX),
            Some(next) if newest_first => (0, next),
            Some(next) => (next, u64::MAX),
        };
        let query = MessageQuery {
            from,
            to,
            limit: page_size + 1,
            newest_first,
        };
        let mut messages = self
            .store
            .read_messages(key, query)
            .await?
            .ok_or_else(|| ThreadError::NotFound(key.thread_id.clone()))?;
        let more = messages.len() > page_size;
        messages.truncate(page_size);
        let next = match (more, messages.last()) {
            (true, Some((position, _))) if newest_first => encode_message_token(*position, true),
            (true, Some((position, _))) => encode_message_token(position + 1, false),
            _ => String::new(),
        };
        Ok((messages, next))
    }

    /// Deletes the messages with these ids (unknown ids are ignored); returns how many.
    pub async fn delete_messages(
        &self,
        key: &ThreadKey,
        ids: &[String],
    ) -> Result<u64, ThreadError> {
        #[derive(Deserialize)]
        struct IdPeek {
            id: String,
        }
        const SCAN_PAGE: usize = 1000;
        let mut positions = Vec::new();
        let mut from = 0;
        loop {
            let query = MessageQuery {
                from,
                to: u64::MAX,
                limit: SCAN_PAGE,
                newest_first: false,
            };
            let page = self
                .store
                .read_messages(key, query)
                .await?
                .ok_or_else(|| ThreadError::NotFound(key.thread_id.clone()))?;
            for (position, raw) in &page {
                if serde_json::from_slice::<IdPeek>(raw).is_ok_and(|m| ids.contains(&m.id)) {
                    positions.push(*position);
                }
            }
            match page.last() {
                Some((last, _)) if page.len() == SCAN_PAGE => from = last + 1,
                _ => break,
            }
        }
        if positions.is_empty() {
            return Ok(0);
        }
        // Vectors first: a failure in between leaves a message recall no longer finds, never
        // a vector pointing at a deleted message.
        self.store
            .delete_vectors(&key.resource_id, &key.thread_id, Some(&positions))
            .await?;
        Ok(self.store.delete_messages(key, positions).await?)
    }
}

/// A store summary with the title and metadata decoded.
fn summary(info: ThreadInfo) -> ThreadSummary {
    let meta = info
        .meta
        .as_deref()
        .and_then(|raw| serde_json::from_slice::<Value>(raw).ok());
    let title = meta
        .as_ref()
        .and_then(|m| m.get("title"))
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(str::to_owned);
    let metadata = meta
        .as_ref()
        .and_then(|m| m.get("metadata"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    ThreadSummary {
        info,
        title,
        metadata,
    }
}

fn order_tag(order: ThreadOrder) -> &'static str {
    match order {
        ThreadOrder::Created => "c",
        ThreadOrder::Updated => "u",
    }
}

fn encode_thread_token(last: &ThreadInfo, order: ThreadOrder) -> String {
    let time = match order {
        ThreadOrder::Created => last.created_ms,
        ThreadOrder::Updated => last.updated_ms,
    };
    let raw = format!("t{}:{time}:{}", order_tag(order), last.thread_id);
    URL_SAFE_NO_PAD.encode(raw)
}

fn decode_thread_token(
    token: &str,
    order: ThreadOrder,
) -> Result<Option<ThreadCursor>, BadPageToken> {
    if token.is_empty() {
        return Ok(None);
    }
    let raw = URL_SAFE_NO_PAD.decode(token).map_err(|_| BadPageToken)?;
    let raw = String::from_utf8(raw).map_err(|_| BadPageToken)?;
    let rest = raw
        .strip_prefix('t')
        .and_then(|r| r.strip_prefix(order_tag(order)))
        .and_then(|r| r.strip_prefix(':'))
        .ok_or(BadPageToken)?;
    let (time, thread_id) = rest.split_once(':').ok_or(BadPageToken)?;
    Ok(Some(ThreadCursor {
        time_ms: time.parse().map_err(|_| BadPageToken)?,
        thread_id: thread_id.to_owned(),
    }))
}

fn encode_message_token(position: u64, newest_first: bool) -> String {
    let dir = if newest_first { 'n' } else { 'o' };
    URL_SAFE_NO_PAD.encode(format!("m{dir}:{position}"))
}

/// The position a message page continues from (exclusive upper bound newest first, inclusive
/// lower bound oldest first).
fn decode_message_token(token: &str, newest_first: bool) -> Result<Option<u64>, BadPageToken> {
    if token.is_empty() {
        return Ok(None);
    }
    let raw = URL_SAFE_NO_PAD.decode(token).map_err(|_| BadPageToken)?;
    let raw = String::from_utf8(raw).map_err(|_| BadPageToken)?;
    let prefix = if newest_first { "mn:" } else { "mo:" };
    let position = raw.strip_prefix(prefix).ok_or(BadPageToken)?;
    position.parse().map(Some).map_err(|_| BadPageToken)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_tokens_round_trip_and_reject_foreign_ones() {
        let info = ThreadInfo {
            thread_id: "a:b".into(),
            resource_id: "r".into(),
            created_ms: 5,
            updated_ms: 9,
            message_count: 0,
            meta: None,
        };
        let token = encode_thread_token(&info, ThreadOrder::Updated);
        let cursor = decode_thread_token(&token, ThreadOrder::Updated)
            .unwrap()
            .unwrap();
        assert_eq!((cursor.time_ms, cursor.thread_id.as_str()), (9, "a:b"));
        assert_eq!(
            decode_thread_token(&token, ThreadOrder::Created),
            Err(BadPageToken)
        );
        assert_eq!(
            decode_thread_token("!!", ThreadOrder::Created),
            Err(BadPageToken)
        );
        let token = encode_message_token(7, true);
        assert_eq!(decode_message_token(&token, true), Ok(Some(7)));
        assert_eq!(decode_message_token(&token, false), Err(BadPageToken));
        assert_eq!(decode_message_token("", false), Ok(None));
    }

    #[test]
    fn summaries_read_title_and_metadata() {
        let s = summary(ThreadInfo {
            thread_id: "t".into(),
            resource_id: "r".into(),
            created_ms: 1,
            updated_ms: 1,
            message_count: 2,
            meta: Some(Bytes::from_static(
                br#"{"title":"Bread","metadata":{"a":1}}"#,
            )),
        });
        assert_eq!(s.title.as_deref(), Some("Bread"));
        assert_eq!(s.metadata.get("a"), Some(&json!(1)));
    }
}
