//! A master found through Sentinel and followed across failovers. A connection manager knows
//! nothing of Sentinel: after a failover it would reconnect to the old address, which is gone or
//! answers READONLY as a replica. So a call that fails the way a failover makes calls fail
//! (refused, dropped, timed out, READONLY, MASTERDOWN) asks the Sentinels for the master again,
//! in the background, one question at a time; when the answer is a new address the store swaps
//! in a connection to it. The failed call itself is answered UNAVAILABLE; the calls after the
//! switch go to the new master. Nothing of this runs while calls succeed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{ErrorKind, IntoConnectionInfo, RedisError, ServerErrorKind, TlsMode};
use tracing::{info, warn};

use super::conn::Node;
use super::target::RedisTarget;
use super::{RedisOptions, store_err, with_deadline};
use crate::store::{StoreError, StoreResult};

/// Least time between two questions to the Sentinels while calls keep failing.
const RESOLVE_GAP: Duration = Duration::from_millis(100);

/// The current master of a Sentinel-monitored set.
pub(super) struct Failover {
    inner: Arc<Inner>,
}

struct Inner {
    sentinel: tokio::sync::Mutex<Sentinel>,
    master: String,
    node_info: SentinelNodeConnectionInfo,
    current: RwLock<Arc<Node>>,
    /// Set while a re-resolution runs, so that a burst of failures asks once.
    resolving: AtomicBool,
    options: RedisOptions,
}

impl Failover {
    /// Asks the Sentinels for the master of `target` and connects to it.
    pub(super) async fn connect(target: RedisTarget, options: RedisOptions) -> StoreResult<Self> {
        let invalid = |e: String| StoreError::Unavailable(format!("invalid redis url: {e}"));
        let RedisTarget::Sentinel {
            sentinels,
            master,
            tls,
            ..
        } = &target
        else {
            return Err(invalid("not a redis+sentinel:// URL".into()));
        };
        let sentinel = Sentinel::build(sentinels.clone()).map_err(|e| invalid(e.to_string()))?;
        // The master's database and credentials, read off a URL of the same form.
        let template = target
            .master_url("localhost", 6379)
            .ok_or_else(|| invalid("not a redis+sentinel:// URL".into()))?;
        let settings = template
            .into_connection_info()
            .map_err(|e| invalid(e.to_string()))?
            .redis_settings()
            .clone();
        let mut node_info =
            SentinelNodeConnectionInfo::default().set_redis_connection_info(settings);
        if *tls {
            node_info = node_info.set_tls_mode(TlsMode::Secure);
        }
        let sentinel = tokio::sync::Mutex::new(sentinel);
        let client = with_deadline(options.call_timeout, async {
            sentinel
                .lock()
                .await
                .async_master_for(master, Some(&node_info))
                .await
        })
        .await
        .map_err(store_err)?;
        let node = Node::connect(client, &options).await.map_err(store_err)?;
        Ok(Self {
            inner: Arc::new(Inner {
                sentinel,
                master: master.clone(),
                node_info,
                current: RwLock::new(Arc::new(node)),
                resolving: AtomicBool::new(false),
                options,
            }),
        })
    }

    /// The master of the moment.
    pub(super) fn current(&self) -> Arc<Node> {
        self.inner.current()
    }

    /// Whether writes wait for replicas (then they take the master of the moment along).
    pub(super) fn waits(&self) -> bool {
        self.inner.options.wait_replicas > 0
    }

    /// Looks for a new master in the background when `error` may mean a failover.
    pub(super) fn failed(&self, error: &RedisError) {
        if !may_mean_failover(error) || self.inner.resolving.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.inner.resolving.store(false, Ordering::Release);
            return;
        };
        let inner = self.inner.clone();
        runtime.spawn(async move {
            inner.refresh().await;
            // Spaced, so that calls failing in a tight loop do not flood the Sentinels.
            tokio::time::sleep(RESOLVE_GAP).await;
            inner.resolving.store(false, Ordering::Release);
        });
    }
}

impl Inner {
    fn current(&self) -> Arc<Node> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Asks the Sentinels for the master; connects and swaps when it moved.
    async fn refresh(&self) {
        let lookup = async {
            self.sentinel
                .lock()
                .await
                .async_master_for(&self.master, Some(&self.node_info))
                .await
        };
        let client = match with_deadline(self.options.call_timeout, lookup).await {
            Ok(client) => client,
            Err(e) => {
                warn!(error = %e, master = %self.master, "asking the Sentinels for the master failed");
                return;
            }
        };
        let address = client.get_connection_info().addr().to_string();
        let old = self.current().address();
        if address == old {
            return;
        }
        match Node::connect(client, &self.options).await {
            Ok(node) => {
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(node);
                info!(master = %self.master, from = %old, to = %address, "redis master changed");
            }
            Err(e) => {
                warn!(error = %e, master = %self.master, to = %address, "connecting to the new master failed")
            }
        }
    }
}

/// Whether a failed call may mean the master moved.
fn may_mean_failover(error: &RedisError) -> bool {
    error.is_io_error()
        || error.is_connection_refusal()
        || error.is_connection_dropped()
        || error.is_timeout()
        || matches!(
            error.kind(),
            ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
        )
}
