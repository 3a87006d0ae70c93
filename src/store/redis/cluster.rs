//! The Redis Cluster command connection, replaced when it wedges. redis-rs's cluster client can
//! stop answering for good: its slot refresh takes the connection map's write lock, and while it
//! waits the client polls no request, so a request that was queued for a read permit and got it
//! is never polled to give it back (seen after a reshard under load: the refresh never ends and
//! every call times out from then on). So a call that timed out sends a PING through the same
//! connection, in the background, one check at a time; when the PING times out too, the client
//! connects afresh and the store swaps the new connection in. The old connection's driver stops
//! when the last call holding it gives up. Nothing of this runs while calls succeed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use redis::RedisError;
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use tracing::warn;

use super::{RedisOptions, store_err, with_deadline};
use crate::store::{StoreError, StoreResult};

/// Least time between two checks while calls keep timing out.
const CHECK_GAP: Duration = Duration::from_secs(1);

/// The cluster connection of the moment.
pub(super) struct Cluster {
    inner: Arc<Inner>,
}

struct Inner {
    client: ClusterClient,
    current: RwLock<ClusterConnection>,
    /// Set while a check runs, so that a burst of timeouts checks once.
    checking: AtomicBool,
    options: RedisOptions,
}

impl Cluster {
    /// Connects to the cluster that `nodes` belong to.
    pub(super) async fn connect(nodes: &[String], options: RedisOptions) -> StoreResult<Self> {
        let client = ClusterClientBuilder::new(nodes.to_vec())
            .connection_timeout(options.connect_timeout)
            .response_timeout(options.response_timeout)
            // By default a request's redirections, slot refreshes and retries must all fit in
            // one response timeout; the store's call timeout bounds them instead.
            .overall_response_timeout(None)
            .retries(3)
            .min_retry_wait(20)
            .max_retry_wait(250)
            .build()
            .map_err(|e| StoreError::Unavailable(format!("invalid redis url: {e}")))?;
        let conn = with_deadline(options.call_timeout, client.get_async_connection())
            .await
            .map_err(store_err)?;
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                current: RwLock::new(conn),
                checking: AtomicBool::new(false),
                options,
            }),
        })
    }

    /// The connection of the moment.
    pub(super) fn current(&self) -> ClusterConnection {
        self.inner.current()
    }

    /// Checks the connection in the background when `error` is a timeout.
    pub(super) fn failed(&self, error: &RedisError) {
        if !error.is_timeout() || self.inner.checking.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.inner.checking.store(false, Ordering::Release);
            return;
        };
        let inner = self.inner.clone();
        runtime.spawn(async move {
            inner.check().await;
            // Spaced, so that calls timing out in a tight loop do not reconnect in one.
            tokio::time::sleep(CHECK_GAP).await;
            inner.checking.store(false, Ordering::Release);
        });
    }
}

impl Inner {
    fn current(&self) -> ClusterConnection {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Pings through the current connection; replaces it when the ping goes unanswered.
    async fn check(&self) {
        let mut conn = self.current();
        let ping = redis::cmd("PING");
        let Err(error) =
            with_deadline(self.options.call_timeout, ping.query_async::<()>(&mut conn)).await
        else {
            return;
        };
        if !error.is_timeout() {
            // An answer, if an error one: the connection's driver is alive.
            return;
        }
        let fresh = with_deadline(
            self.options.call_timeout,
            self.client.get_async_connection(),
        )
        .await;
        match fresh {
            Ok(fresh) => {
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = fresh;
                warn!("the redis cluster connection stopped answering; replaced it");
            }
            Err(e) => {
                warn!(error = %e, "the redis cluster connection stopped answering, and a new one failed")
            }
        }
    }
}
