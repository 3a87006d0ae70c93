//! Sharded pub/sub on a Redis Cluster: one shared RESP3 cluster connection per store carries
//! every `SSUBSCRIBE`, and a dispatcher fans its pushes out to the store's subscribers. A channel
//! is subscribed at the server while it has a subscriber here: `SSUBSCRIBE` on the first,
//! `SUNSUBSCRIBE` after the last, one such change at a time, so the two never race.
//!
//! The cluster connection resubscribes by itself after a reconnection or a slot migration, but
//! messages published meanwhile are gone. So a subscription the server ends (the `sunsubscribe` a
//! node sends when the channel's slot moves away) or a dropped node connection ends the affected
//! streams with an error, exactly as a dropped pub/sub connection does on one node: followers
//! then catch up from the store.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::stream::{BoxStream, Stream, StreamExt};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{ProtocolVersion, PushInfo, PushKind, RedisResult, Value};
use tokio::sync::mpsc;

use super::{RedisOptions, store_err, with_deadline};
use crate::store::{StoreError, StoreResult};

/// Subscribers and subscription state, by channel.
type Channels = HashMap<Vec<u8>, Channel>;

/// A channel's subscribers here.
#[derive(Default)]
struct Channel {
    subscribers: Vec<(u64, mpsc::UnboundedSender<StoreResult<Bytes>>)>,
    /// Whether the server has the subscription (set after `SSUBSCRIBE` succeeded).
    subscribed: bool,
    /// Our own `SUNSUBSCRIBE`s whose confirmation has not come back: those confirmations are
    /// not the server ending the subscription.
    own_unsubscribes: u32,
}

#[derive(Default)]
struct State {
    channels: Channels,
    next_id: u64,
}

/// The shared sharded pub/sub connection of a store.
pub(super) struct Hub {
    conn: ClusterConnection,
    state: Arc<Mutex<State>>,
    /// Serializes subscription changes at the server.
    changes: tokio::sync::Mutex<()>,
    options: RedisOptions,
}

impl Hub {
    /// Opens the pub/sub connection to the cluster of `nodes` and starts its dispatcher.
    pub(super) async fn connect(
        nodes: &[String],
        options: &RedisOptions,
    ) -> StoreResult<Arc<Self>> {
        let (push_tx, push_rx) = mpsc::unbounded_channel();
        let client = ClusterClientBuilder::new(nodes.to_vec())
            .use_protocol(ProtocolVersion::RESP3)
            .push_sender(push_tx)
            .connection_timeout(options.connect_timeout)
            .response_timeout(options.response_timeout)
            .overall_response_timeout(None)
            .build()
            .map_err(|e| StoreError::Unavailable(format!("invalid redis url: {e}")))?;
        let conn = with_deadline(options.call_timeout, client.get_async_connection())
            .await
            .map_err(store_err)?;
        let state = Arc::new(Mutex::new(State::default()));
        tokio::spawn(dispatch(push_rx, Arc::downgrade(&state)));
        Ok(Arc::new(Self {
            conn,
            state,
            changes: tokio::sync::Mutex::new(()),
            options: *options,
        }))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Subscribes to `channel`; the subscription is confirmed by the server when this returns.
    pub(super) async fn subscribe(
        self: &Arc<Self>,
        channel: &str,
    ) -> RedisResult<BoxStream<'static, StoreResult<Bytes>>> {
        let key = channel.as_bytes().to_vec();
        let (tx, rx) = mpsc::unbounded_channel();
        let _change = self.changes.lock().await;
        let (id, needs_subscribe) = {
            let mut state = self.state();
            state.next_id += 1;
            let id = state.next_id;
            let entry = state.channels.entry(key.clone()).or_default();
            entry.subscribers.push((id, tx));
            (id, !entry.subscribed)
        };
        let guard = Unsubscribe {
            hub: Arc::downgrade(self),
            channel: key.clone(),
            id,
        };
        if needs_subscribe {
            let mut conn = self.conn.clone();
            with_deadline(self.options.call_timeout, conn.ssubscribe(channel)).await?;
            if let Some(entry) = self.state().channels.get_mut(&key) {
                entry.subscribed = true;
            }
        }
        Ok(Subscription {
            rx,
            done: false,
            _guard: guard,
        }
        .boxed())
    }

    /// Removes subscriber `id`; the last one out ends the server's subscription.
    async fn unsubscribe(&self, channel: Vec<u8>, id: u64) {
        let _change = self.changes.lock().await;
        let last = {
            let mut state = self.state();
            let Some(entry) = state.channels.get_mut(&channel) else {
                return;
            };
            entry.subscribers.retain(|(other, _)| *other != id);
            let last = entry.subscribers.is_empty() && entry.subscribed;
            if last {
                entry.subscribed = false;
                entry.own_unsubscribes += 1;
            }
            forget_if_idle(&mut state.channels, &channel);
            last
        };
        if !last {
            return;
        }
        let mut conn = self.conn.clone();
        let sent = with_deadline(self.options.call_timeout, conn.sunsubscribe(&channel)).await;
        if sent.is_err() {
            // No confirmation will come; a later subscription starts afresh.
            let mut state = self.state();
            if let Some(entry) = state.channels.get_mut(&channel) {
                entry.own_unsubscribes = entry.own_unsubscribes.saturating_sub(1);
                forget_if_idle(&mut state.channels, &channel);
            }
        }
    }
}

/// Drops a channel's entry once nothing refers to it.
fn forget_if_idle(channels: &mut Channels, channel: &[u8]) {
    if channels.get(channel).is_some_and(|entry| {
        entry.subscribers.is_empty() && !entry.subscribed && entry.own_unsubscribes == 0
    }) {
        channels.remove(channel);
    }
}

/// Delivers the connection's pushes until the connection (or the hub) is gone.
async fn dispatch(mut pushes: mpsc::UnboundedReceiver<PushInfo>, state: Weak<Mutex<State>>) {
    while let Some(push) = pushes.recv().await {
        let Some(state) = state.upgrade() else {
            return;
        };
        let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
        match push.kind {
            PushKind::SMessage => {
                let (Some(channel), Some(payload)) =
                    (bytes_of(&push.data, 0), bytes_of(&push.data, 1))
                else {
                    continue;
                };
                if let Some(entry) = state.channels.get(channel) {
                    let payload = Bytes::copy_from_slice(payload);
                    for (_, tx) in &entry.subscribers {
                        let _ = tx.send(Ok(payload.clone()));
                    }
                }
            }
            PushKind::SUnsubscribe => {
                let Some(channel) = bytes_of(&push.data, 0) else {
                    continue;
                };
                let channel = channel.to_vec();
                let Some(entry) = state.channels.get_mut(&channel) else {
                    continue;
                };
                if entry.own_unsubscribes > 0 {
                    entry.own_unsubscribes -= 1;
                    forget_if_idle(&mut state.channels, &channel);
                } else {
                    lost(entry, "the channel's slot moved to another node");
                }
            }
            PushKind::Disconnection => {
                for entry in state.channels.values_mut() {
                    lost(entry, "a cluster node connection dropped");
                }
            }
            _ => {}
        }
    }
}

/// Tells a channel's subscribers they may have missed messages. The server's subscription
/// counts as gone: the next subscriber subscribes afresh, on whichever node serves the slot now.
fn lost(entry: &mut Channel, why: &str) {
    entry.subscribed = false;
    for (_, tx) in &entry.subscribers {
        let _ = tx.send(Err(StoreError::Unavailable(format!(
            "redis subscription lost: {why}"
        ))));
    }
}

/// The bytes of a push's `at`-th element.
fn bytes_of(data: &[Value], at: usize) -> Option<&[u8]> {
    match data.get(at)? {
        Value::BulkString(bytes) => Some(bytes),
        Value::SimpleString(text) => Some(text.as_bytes()),
        _ => None,
    }
}

/// One subscriber's stream: payloads until the first error, which ends it (as does the hub
/// going away, reported as an error).
struct Subscription {
    rx: mpsc::UnboundedReceiver<StoreResult<Bytes>>,
    done: bool,
    _guard: Unsubscribe,
}

impl Stream for Subscription {
    type Item = StoreResult<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        let item = match self.rx.poll_recv(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Some(item)) => item,
            Poll::Ready(None) => Err(StoreError::Unavailable(
                "redis subscription connection closed".into(),
            )),
        };
        self.done = item.is_err();
        Poll::Ready(Some(item))
    }
}

/// Leaves the channel when a subscriber's stream is dropped.
struct Unsubscribe {
    hub: Weak<Hub>,
    channel: Vec<u8>,
    id: u64,
}

impl Drop for Unsubscribe {
    fn drop(&mut self) {
        let (Some(hub), Ok(runtime)) = (self.hub.upgrade(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let channel = std::mem::take(&mut self.channel);
        let id = self.id;
        runtime.spawn(async move { hub.unsubscribe(channel, id).await });
    }
}
