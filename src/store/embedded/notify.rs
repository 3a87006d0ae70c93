//! In-process notifications of the embedded store: one broadcast channel per topic, created
//! on demand and dropped with its last subscriber, plus the streams handed to callers.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use tokio::sync::broadcast::{self, error::RecvError};

use super::docs::{Doc, read_doc};
use super::log::read_log;
use super::schema::DOCS;
use super::{DocTopic, Shared, closed, read_with};
use crate::store::{LogEntry, StoreError, StoreResult, Versioned};

/// Broadcast channels per topic, created on demand and dropped with their last subscriber.
pub(super) struct Hub<K, T> {
    capacity: usize,
    senders: Mutex<HashMap<K, broadcast::Sender<T>>>,
}

impl<K: Hash + Eq + Clone, T: Clone> Hub<K, T> {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            senders: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, broadcast::Sender<T>>> {
        // The map stays consistent even if a holder panicked: every update is one call.
        self.senders.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn subscribe(&self, topic: K) -> broadcast::Receiver<T> {
        self.lock()
            .entry(topic)
            .or_insert_with(|| broadcast::channel(self.capacity).0)
            .subscribe()
    }

    /// Sends to the topic's subscribers, if any; never waits for them.
    pub(super) fn publish<Q>(&self, topic: &Q, value: T)
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if let Some(sender) = self.lock().get(topic) {
            let _ = sender.send(value);
        }
    }

    /// How many topics have a channel (for tests).
    #[cfg(test)]
    pub(super) fn topics(&self) -> usize {
        self.lock().len()
    }

    /// Drops the topic's channel if nobody listens any more.
    fn release(&self, topic: &K) {
        let mut senders = self.lock();
        if senders
            .get(topic)
            .is_some_and(|sender| sender.receiver_count() == 0)
        {
            senders.remove(topic);
        }
    }
}

/// A receiver that releases its topic when dropped.
pub(super) struct Subscription<K: Hash + Eq + Clone, T: Clone> {
    rx: Option<broadcast::Receiver<T>>,
    topic: K,
    /// Weak, so that a forgotten stream does not keep the database file open.
    shared: Weak<Shared>,
    hub: fn(&Shared) -> &Hub<K, T>,
}

impl<K: Hash + Eq + Clone, T: Clone> Subscription<K, T> {
    /// Subscribes to `topic` of one of the hubs; active as soon as this returns.
    pub(super) fn new(shared: &Arc<Shared>, hub: fn(&Shared) -> &Hub<K, T>, topic: K) -> Self {
        let rx = hub(shared).subscribe(topic.clone());
        Self {
            rx: Some(rx),
            topic,
            shared: Arc::downgrade(shared),
            hub,
        }
    }

    async fn recv(&mut self) -> Result<T, RecvError> {
        match self.rx.as_mut() {
            Some(rx) => rx.recv().await,
            None => Err(RecvError::Closed),
        }
    }
}

impl<K: Hash + Eq + Clone, T: Clone> Drop for Subscription<K, T> {
    fn drop(&mut self) {
        // The receiver must be gone before the count is checked.
        drop(self.rx.take());
        if let Some(shared) = self.shared.upgrade() {
            (self.hub)(&shared).release(&self.topic);
        }
    }
}

/// New values of a document; after a lag, the current value (older queued ones are skipped).
pub(super) fn watch_stream(
    subscription: Subscription<DocTopic, Versioned>,
) -> BoxStream<'static, StoreResult<Versioned>> {
    stream::unfold((subscription, 0u64), |(mut sub, mut last)| async move {
        loop {
            let item = match sub.recv().await {
                Ok(value) => Ok(value),
                Err(RecvError::Lagged(_)) => current_doc(&sub).await,
                Err(RecvError::Closed) => return None,
            };
            match item {
                Ok(value) if value.version <= last => continue,
                Ok(value) => {
                    last = value.version;
                    return Some((Ok(value), (sub, last)));
                }
                Err(e) => return Some((Err(e), (sub, last))),
            }
        }
    })
    .boxed()
}

/// The stored value of a watched document (version 0 when absent, so it is skipped).
async fn current_doc(sub: &Subscription<DocTopic, Versioned>) -> StoreResult<Versioned> {
    let shared = sub.shared.upgrade().ok_or_else(closed)?;
    let (thread_id, kind, _) = sub.topic.clone();
    read_with(shared, move |tx, _| {
        Ok(read_doc(&tx.open_table(DOCS)?, &thread_id, &kind)?
            .map(Doc::versioned)
            .unwrap_or(Versioned {
                version: 0,
                value: Bytes::new(),
            }))
    })
    .await
}

/// Live chunks of a run; after a lag, the missed ones are re-read from the log.
pub(super) fn follow_stream(
    subscription: Subscription<String, LogEntry>,
) -> BoxStream<'static, StoreResult<LogEntry>> {
    let state = (subscription, None::<u64>, VecDeque::<LogEntry>::new());
    stream::unfold(state, |(mut sub, mut last, mut missed)| async move {
        loop {
            let chunk = match missed.pop_front() {
                Some(chunk) => chunk,
                None => match sub.recv().await {
                    Ok(chunk) => chunk,
                    Err(RecvError::Lagged(_)) => match missed_chunks(&sub, last).await {
                        Ok(chunks) => {
                            missed.extend(chunks);
                            continue;
                        }
                        Err(e) => return Some((Err(e), (sub, last, missed))),
                    },
                    Err(RecvError::Closed) => return None,
                },
            };
            // Chunks already delivered (re-read after a lag, then still queued) are dropped.
            if last.is_some_and(|seq| chunk.0 <= seq) {
                continue;
            }
            last = Some(chunk.0);
            return Some((Ok(chunk), (sub, last, missed)));
        }
    })
    .boxed()
}

/// The logged chunks after the last one delivered (all of them if none was).
async fn missed_chunks(
    sub: &Subscription<String, LogEntry>,
    last: Option<u64>,
) -> StoreResult<Vec<LogEntry>> {
    let shared = sub.shared.upgrade().ok_or_else(closed)?;
    let run_id = sub.topic.clone();
    read_with(shared, move |tx, now| read_log(tx, &run_id, last, now)).await
}

/// Control messages of a run; a lag yields an `Unavailable` item (messages were lost).
pub(super) fn control_stream(
    subscription: Subscription<String, Bytes>,
) -> BoxStream<'static, StoreResult<Bytes>> {
    stream::unfold(subscription, |mut sub| async move {
        let item = match sub.recv().await {
            Ok(message) => Ok(message),
            Err(RecvError::Lagged(lost)) => Err(StoreError::Unavailable(format!(
                "control subscriber lagged: {lost} messages lost"
            ))),
            Err(RecvError::Closed) => return None,
        };
        Some((item, sub))
    })
    .boxed()
}
