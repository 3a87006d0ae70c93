//! The connections behind the Redis store. Every form of deployment answers one
//! `ConnectionLike` ([`Conn`]), so scripts, commands and pipelines run unchanged on one node, a
//! cluster (which follows MOVED/ASK and refreshes its slot map by itself; [`Cluster`] replaces
//! it when it wedges) or a master found through Sentinel ([`Failover`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::cluster_async::ClusterConnection;
use redis::{Client, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult, Value};

use super::cluster::Cluster;
use super::failover::Failover;
use super::hub::Hub;
use super::target::RedisTarget;
use super::{RedisOptions, with_deadline};
use crate::store::{StoreError, StoreResult};

/// Connections reserved for writes that wait for replicas: `WAIT` blocks its connection, so a
/// waited write must not share the multiplexed one every other call uses.
const WAIT_CONNECTIONS: usize = 16;

/// One connection of any form, cheap to clone.
#[derive(Clone)]
pub(super) enum Conn {
    /// The shared, self-healing connection to one server.
    Node(ConnectionManager),
    /// A cluster connection (one per node inside, routed by slot).
    Cluster(ClusterConnection),
    /// A plain connection held by one waited write at a time.
    Plain(MultiplexedConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Node(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
            Self::Plain(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Node(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Plain(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Node(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
            Self::Plain(c) => c.get_db(),
        }
    }
}

/// One server: its command connection, the client that opens pub/sub connections, and the
/// connections of waited writes.
pub(super) struct Node {
    client: Client,
    conn: ConnectionManager,
    waiters: Option<Waiters>,
}

impl Node {
    /// Connects to the server of `client`.
    pub(super) async fn connect(client: Client, options: &RedisOptions) -> RedisResult<Self> {
        // Few, short retries: a call waits for the reconnection, and must fail within
        // `call_timeout`; the next call starts a new attempt anyway.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(Some(options.response_timeout))
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(250));
        let conn = with_deadline(
            options.call_timeout,
            ConnectionManager::new_with_config(client.clone(), config),
        )
        .await?;
        let waiters = (options.wait_replicas > 0).then(|| Waiters::new(client.clone(), options));
        Ok(Self {
            client,
            conn,
            waiters,
        })
    }

    /// Runs a write through the waited-write connections, or on the shared connection when
    /// writes do not wait.
    pub(super) async fn run_waited<T, F, Fut>(&self, op: F) -> RedisResult<T>
    where
        F: FnOnce(Conn) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        match &self.waiters {
            Some(waiters) => waiters.run(op).await,
            None => op(Conn::Node(self.conn.clone())).await,
        }
    }

    /// The address this node was reached at (`host:port`), to notice a new master.
    pub(super) fn address(&self) -> String {
        self.client.get_connection_info().addr().to_string()
    }

    /// A dedicated pub/sub connection subscribed to `channel` (confirmed by the server); its
    /// payloads, then an error when the connection ends.
    async fn subscribe(
        &self,
        channel: &str,
    ) -> RedisResult<BoxStream<'static, StoreResult<Bytes>>> {
        let mut pubsub = self.client.get_async_pubsub().await?;
        pubsub.subscribe(channel).await?;
        Ok(pubsub
            .into_on_message()
            .map(|msg| Ok(Bytes::copy_from_slice(msg.get_payload_bytes())))
            .chain(stream::once(async {
                Err(StoreError::Unavailable(
                    "redis subscription connection closed".into(),
                ))
            }))
            .boxed())
    }
}

/// The deployment the store talks to.
pub(super) enum Backend {
    /// One server.
    Node(Arc<Node>),
    /// A Redis Cluster: commands, and sharded pub/sub through one shared RESP3 connection.
    Cluster {
        /// Routes each command by its keys' slot (replaced when it wedges).
        conn: Cluster,
        /// Fans sharded messages out to the store's subscribers.
        hub: Arc<Hub>,
    },
    /// The current master of a Sentinel-monitored set.
    Sentinel(Failover),
}

impl Backend {
    /// Connects to `target`; fails when it does not answer within the call timeout.
    pub(super) async fn connect(target: &RedisTarget, options: &RedisOptions) -> StoreResult<Self> {
        let invalid = |e: RedisError| StoreError::Unavailable(format!("invalid redis url: {e}"));
        match target {
            RedisTarget::Node(url) => {
                let client = Client::open(url.as_str()).map_err(invalid)?;
                let node = Node::connect(client, options)
                    .await
                    .map_err(super::store_err)?;
                Ok(Self::Node(Arc::new(node)))
            }
            RedisTarget::Cluster(nodes) => {
                let conn = Cluster::connect(nodes, *options).await?;
                let hub = Hub::connect(nodes, options).await?;
                Ok(Self::Cluster { conn, hub })
            }
            RedisTarget::Sentinel { .. } => Ok(Self::Sentinel(
                Failover::connect(target.clone(), *options).await?,
            )),
        }
    }

    /// A connection for one call.
    pub(super) fn conn(&self) -> Conn {
        match self {
            Self::Node(node) => Conn::Node(node.conn.clone()),
            Self::Cluster { conn, .. } => Conn::Cluster(conn.current()),
            Self::Sentinel(failover) => Conn::Node(failover.current().conn.clone()),
        }
    }

    /// Whether keys of several slots must never meet in one script.
    pub(super) fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster { .. })
    }

    /// Reports a failed call, so that Sentinel can look for a new master and a wedged cluster
    /// connection gets replaced.
    pub(super) fn failed(&self, error: &RedisError) {
        match self {
            Self::Node(_) => {}
            Self::Cluster { conn, .. } => conn.failed(error),
            Self::Sentinel(failover) => failover.failed(error),
        }
    }

    /// The payloads published to `channel` from now on, then an error when the subscription is
    /// lost (a follower may have missed messages and must catch up from the store).
    pub(super) async fn subscribe(
        &self,
        channel: &str,
    ) -> RedisResult<BoxStream<'static, StoreResult<Bytes>>> {
        match self {
            Self::Node(node) => node.subscribe(channel).await,
            Self::Cluster { hub, .. } => hub.subscribe(channel).await,
            Self::Sentinel(failover) => failover.current().subscribe(channel).await,
        }
    }

    /// The node whose writes wait for replicas, when they do (a Sentinel's master is the one
    /// of the moment, kept by the write until it is done).
    pub(super) fn waiting_node(&self) -> Option<Arc<Node>> {
        match self {
            Self::Node(node) => node.waiters.is_some().then(|| node.clone()),
            Self::Sentinel(failover) if failover.waits() => Some(failover.current()),
            Self::Sentinel(_) | Self::Cluster { .. } => None,
        }
    }
}

/// The connections of waited writes: each is held by one write and its `WAIT` at a time, and
/// opened again after any error (never reconnected silently between the write and its `WAIT`,
/// which would then wait for nothing).
pub(super) struct Waiters {
    client: Client,
    slots: Vec<tokio::sync::Mutex<Option<MultiplexedConnection>>>,
    next: AtomicUsize,
    /// Timeouts, and the replicas and `WAIT` time every write needs.
    options: RedisOptions,
}

impl Waiters {
    fn new(client: Client, options: &RedisOptions) -> Self {
        Self {
            client,
            slots: (0..WAIT_CONNECTIONS)
                .map(|_| tokio::sync::Mutex::new(None))
                .collect(),
            next: AtomicUsize::new(0),
            options: *options,
        }
    }

    /// Runs `op` on a connection of its own, then waits until `replicas` replicas have its
    /// writes; fewer within the timeout is an error (the write may be lost in a failover).
    pub(super) async fn run<T, F, Fut>(&self, op: F) -> RedisResult<T>
    where
        F: FnOnce(Conn) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let mut slot = match (0..self.slots.len())
            .find_map(|i| self.slots[(start + i) % self.slots.len()].try_lock().ok())
        {
            Some(slot) => slot,
            None => self.slots[start % self.slots.len()].lock().await,
        };
        let conn = match slot.take() {
            Some(conn) => conn,
            None => {
                let config = redis::AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(self.options.connect_timeout))
                    .set_response_timeout(Some(self.options.response_timeout));
                self.client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?
            }
        };
        let value = op(Conn::Plain(conn.clone())).await?;
        let (replicas, timeout) = (self.options.wait_replicas, self.options.wait_timeout);
        let mut wait = redis::cmd("WAIT");
        wait.arg(replicas)
            .arg(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX));
        let acked: u32 = wait.query_async(&mut conn.clone()).await?;
        *slot = Some(conn);
        if acked < replicas {
            // A client-side verdict, not an I/O failure: it must not send Sentinel looking for
            // a new master.
            return Err(RedisError::from((
                ErrorKind::Client,
                "write not confirmed by enough replicas",
                format!(
                    "{acked} of {replicas} replicas acknowledged it within {} ms; it may be lost in a failover",
                    timeout.as_millis()
                ),
            )));
        }
        Ok(value)
    }
}
