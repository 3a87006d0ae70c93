//! Assembles the gRPC server: agentd services, health, reflection, limits, graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::server::NamedService;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;
use tower::Layer;
use tracing::{info, warn};

use crate::agent::Agents;
use crate::agent::run::RunDeps;
use crate::agent::runtime::{Runtime, RuntimeLimits};
use crate::api::agents::AgentApi;
use crate::api::approvals::ApprovalApi;
use crate::api::auth::ApiKeys;
use crate::api::bounded::BoundedErrorsLayer;
use crate::api::layer::RpcLayer;
use crate::api::scores::ScoreApi;
use crate::api::tasks::TaskApi;
use crate::api::threads::ThreadApi;
use crate::config::{Config, StoreKind, StoreSync, redact_url};
use crate::pb;
use crate::pb::encoded::agent_service_server::AgentServiceServer;
use crate::pb::encoded::approval_service_server::ApprovalServiceServer;
use crate::pb::score_service_server::ScoreServiceServer;
use crate::pb::task_service_server::TaskServiceServer;
use crate::pb::thread_service_server::ThreadServiceServer;
use crate::store::Store;
use crate::store::deferred::{Connect, Deferred};
use crate::store::embedded::{EmbeddedOptions, EmbeddedStore};
use crate::store::redis::{RedisOptions, RedisStore};
use crate::tasklist::TaskLists;
use crate::tls::ServeIncoming;
use crate::web::{JsonLayer, MetricsEndpoint};

/// Health service name that stays SERVING while the process runs (for liveness probes); the
/// overall "" and the agentd services follow the store (for readiness).
pub const LIVENESS_SERVICE: &str = "liveness";

/// Services whose health follows the store.
const STORE_BACKED: [&str; 6] = [
    "",
    <AgentServiceServer<AgentApi> as NamedService>::NAME,
    <TaskServiceServer<TaskApi> as NamedService>::NAME,
    <ApprovalServiceServer<ApprovalApi> as NamedService>::NAME,
    <ThreadServiceServer<ThreadApi> as NamedService>::NAME,
    <ScoreServiceServer<ScoreApi> as NamedService>::NAME,
];

/// How long aborted runs get to record their end once the grace period is over.
const ABORT_WAIT: Duration = Duration::from_secs(2);

/// How long one health probe of the store may take before it counts as down.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Longest time between probes while the store is down.
const DOWN_PROBE_INTERVAL: Duration = Duration::from_millis(250);

/// Shortest time between probes made because a store call failed.
const SIGNALLED_PROBE_GAP: Duration = Duration::from_millis(50);

/// Opens the store the config names; a Redis store notifies `failures` after each call that
/// failed for want of Redis.
pub async fn open_store(
    config: &Config,
    failures: Option<Arc<Notify>>,
) -> anyhow::Result<Arc<dyn Store>> {
    match config.store.kind()? {
        StoreKind::Embedded(dir) => {
            let options = EmbeddedOptions {
                durable_every: match config.store.sync {
                    StoreSync::Batch => EmbeddedOptions::default().durable_every,
                    StoreSync::Always => Duration::ZERO,
                },
                cache_bytes: config.store.cache_bytes(),
                ..EmbeddedOptions::default()
            };
            let store = EmbeddedStore::open_with(&dir, options)
                .with_context(|| format!("opening the embedded store in {}", dir.display()))?;
            info!(dir = %dir.display(), sync = ?config.store.sync, "using the embedded store");
            Ok(Arc::new(store))
        }
        StoreKind::Redis(url) => {
            let defaults = RedisOptions::default();
            let wait_timeout = Duration::from_millis(config.store.wait_timeout_ms);
            let options = RedisOptions {
                wait_replicas: config.store.wait_replicas,
                wait_timeout,
                // A waited write's call includes its WAIT.
                call_timeout: defaults
                    .call_timeout
                    .max(wait_timeout + Duration::from_secs(1)),
                ..defaults
            };
            let mut store = RedisStore::connect_with(&url, options)
                .await
                .with_context(|| format!("connecting to Redis at {}", redact_url(&url)))?;
            if let Some(failures) = failures {
                store = store.with_failure_signal(failures);
            }
            info!(url = %redact_url(&url), "using Redis");
            Ok(Arc::new(store))
        }
    }
}

/// The configured store, or, when Redis cannot be reached at start, a [`Deferred`] store that
/// keeps trying in the background (the server starts NOT_SERVING instead of exiting, so a pod
/// rescheduled during a Redis outage does not crash-loop). The embedded store's errors are
/// the disk's and stay fatal.
async fn store_or_deferred(
    config: &Config,
    signal: &Arc<Notify>,
    stop: &CancellationToken,
) -> anyhow::Result<Arc<dyn Store>> {
    match open_store(config, Some(signal.clone())).await {
        Ok(store) => Ok(store),
        Err(e) if matches!(config.store.kind(), Ok(StoreKind::Redis(_))) => {
            let what = format!("Redis at {}", redact_url(config.store.url.trim()));
            warn!(error = %format!("{e:#}"), "the store is unreachable: serving NOT_SERVING and retrying");
            let config = Arc::new(config.clone());
            let failures = signal.clone();
            let connect: Connect = Arc::new(move || {
                let (config, failures) = (config.clone(), failures.clone());
                Box::pin(async move { open_store(&config, Some(failures)).await })
            });
            Ok(Arc::new(Deferred::spawn(
                connect,
                what,
                signal.clone(),
                stop.clone(),
            )))
        }
        Err(e) => Err(e),
    }
}

/// A server running in the background.
pub struct RunningServer {
    /// The address it listens on.
    pub addr: SocketAddr,
    /// The address of its Prometheus `/metrics` endpoint, when enabled.
    pub metrics_addr: Option<SocketAddr>,
    shutdown: CancellationToken,
    task: JoinHandle<anyhow::Result<()>>,
}

impl RunningServer {
    /// Starts shutting down and waits for the drain to finish.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        self.wait().await
    }

    /// Waits until the server ends (after its shutdown token is cancelled).
    pub async fn wait(self) -> anyhow::Result<()> {
        self.task.await.context("server task panicked")?
    }

    /// The token that stops the server when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }
}

/// Binds the configured address, opens the store and serves until the returned server is
/// stopped.
pub async fn start(config: Config) -> anyhow::Result<RunningServer> {
    let listener = TcpListener::bind(config.server.listen)
        .await
        .with_context(|| format!("binding {}", config.server.listen))?;
    let addr = listener.local_addr()?;
    let metrics = match config.server.metrics_listen {
        Some(addr) => Some(MetricsEndpoint::bind(addr).await?),
        None => None,
    };
    let metrics_addr = metrics.as_ref().map(|m| m.addr);
    let shutdown = CancellationToken::new();
    let store_signal = Arc::new(Notify::new());
    let store = store_or_deferred(&config, &store_signal, &shutdown).await?;
    let task = tokio::spawn(serve(
        config,
        store,
        store_signal,
        listener,
        metrics,
        shutdown.clone(),
    ));
    Ok(RunningServer {
        addr,
        metrics_addr,
        shutdown,
        task,
    })
}

/// Serves on `listener` (and `/metrics` on `metrics`) until `shutdown` is cancelled, then lets
/// in-flight calls finish within the configured grace period.
async fn serve(
    config: Config,
    store: Arc<dyn Store>,
    store_signal: Arc<Notify>,
    listener: TcpListener,
    metrics: Option<MetricsEndpoint>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    // Scrapes keep working through the drain: they stop with the server, not with the signal.
    let metrics_stop = CancellationToken::new();
    let _stop_metrics_on_error = metrics_stop.clone().drop_guard();
    let metrics = metrics.map(|endpoint| endpoint.spawn(metrics_stop.clone()));
    let limit = config.limits.max_request_bytes;
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_service_status(LIVENESS_SERVICE, ServingStatus::Serving)
        .await;
    let monitor = tokio::spawn(monitor_store(
        store.clone(),
        health.clone(),
        Duration::from_millis(config.server.health_interval_ms),
        store_signal,
        shutdown.clone(),
    ));
    // The drain starts after the pre-drain delay: health is NOT_SERVING from the signal on, while
    // calls are still accepted, so load balancers see it before connections are refused.
    let drain = CancellationToken::new();
    tokio::spawn({
        let (shutdown, drain, pre_drain) =
            (shutdown.clone(), drain.clone(), config.server.pre_drain());
        async move {
            shutdown.cancelled().await;
            if !pre_drain.is_zero() {
                info!(
                    ?pre_drain,
                    "NOT_SERVING; still accepting calls before the drain"
                );
                tokio::time::sleep(pre_drain).await;
            }
            drain.cancel();
        }
    });

    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;

    let keys = ApiKeys::from_config(&config.auth).map_err(anyhow::Error::msg)?;
    keys.watch_jwks();
    let keys_required = keys.enabled();
    if keys_required {
        info!(
            tenants = config.auth.tenants.len(),
            jwt = config.auth.jwt.is_some(),
            "bearer API keys required on agentd.v1 services"
        );
    }
    // Auth and the RPC span of every agentd call; health and reflection stay outside it.
    let rpc = RpcLayer::new(keys);

    let tasks = TaskApi::new(
        TaskLists::new(store.clone()),
        config.limits.clone(),
        drain.clone(),
    );
    // MCP servers connect in the background: one that is down does not hold up the start.
    let mcp = Arc::new(crate::mcp::McpHub::start(&config.mcp_servers)?);
    let agents = Arc::new(Agents::with_mcp(&config, &mcp)?);
    let threads = ThreadApi::new(store.clone(), agents.clone(), config.limits.clone());
    let scores = ScoreApi::new(store.clone(), config.limits.clone());
    let from = config
        .source
        .as_ref()
        .map_or_else(|| "no config file".to_owned(), |p| p.display().to_string());
    match agents.iter().count() {
        0 => info!(
            from = %from,
            "no agents configured: add [[agents]] to a config file (--config, AGENTD_CONFIG or {}; see examples/agentd.toml)",
            crate::config::DEFAULT_CONFIG_FILE
        ),
        n => info!(agents = n, from = %from, "agents loaded"),
    }
    let runtime = Runtime::new(
        RunDeps {
            store: store.clone(),
            lists: TaskLists::new(store.clone()),
            http: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .build()
                .context("building the HTTP client for tools")?,
            step_ceiling: config.limits.max_steps_ceiling,
            vectors: Arc::new(crate::memory::VectorIndex::new(store.clone())),
            scoring: tokio_util::task::TaskTracker::new(),
        },
        agents,
        RuntimeLimits {
            max_concurrent_runs: config.limits.max_concurrent_runs,
            retention: Duration::from_secs(config.limits.run_retention_secs),
            max_log_chunks: config.limits.max_log_chunks,
            approval_ttl: Duration::from_secs(config.limits.approval_ttl_secs),
            hook_deadline: Duration::from_millis(config.limits.hook_deadline_ms),
            lease: Duration::from_millis(config.limits.run_lease_ms),
            takeover_interval: Duration::from_millis(config.limits.takeover_interval_ms),
        },
    );
    let abort_listener = tokio::spawn(runtime.clone().listen_for_aborts(shutdown.clone()));
    let takeovers = tokio::spawn(runtime.clone().listen_for_takeovers(shutdown.clone()));
    let renewals = tokio::spawn(runtime.clone().renew_leases(shutdown.clone()));
    let agents = AgentApi::new(runtime.clone(), config.limits.clone(), drain.clone());
    let approvals = ApprovalApi::new(runtime.clone(), config.limits.clone());

    let addr = listener.local_addr()?;
    info!(%addr, "agentd listening");
    // TCP_NODELAY on every connection; TLS (reloaded from disk) when [server.tls] is set.
    let incoming = crate::tls::incoming(listener, &config)?;
    let drained_signal = drain.clone();
    // Browsers and curl on the same port: CORS answers preflights first, the JSON mapping takes
    // JSON (and plain HTTP/1) requests, gRPC-web is translated; gRPC passes all three untouched.
    let web = &config.web;
    let cors = crate::web::cors_layer(&web.cors_allowed_origins)?;
    let json = web
        .json
        .then(|| JsonLayer::new(limit))
        .transpose()
        .context("building the JSON mapping")?;
    let grpc_web = web.grpc_web.then(tonic_web::GrpcWebLayer::new);
    let playground = config.playground.enabled.then(|| {
        info!("playground at http://{addr}/");
        crate::web::PlaygroundLayer::new(keys_required)
    });
    let server = tonic::transport::Server::builder()
        .accept_http1(web.http1())
        .layer(tower::util::option_layer(cors))
        .layer(tower::util::option_layer(playground))
        .layer(tower::util::option_layer(json))
        .layer(tower::util::option_layer(grpc_web))
        .layer(BoundedErrorsLayer)
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(rpc.layer(TaskServiceServer::new(tasks).max_decoding_message_size(limit)))
        .add_service(rpc.layer(AgentServiceServer::new(agents).max_decoding_message_size(limit)))
        .add_service(
            rpc.layer(ApprovalServiceServer::new(approvals).max_decoding_message_size(limit)),
        )
        .add_service(rpc.layer(ThreadServiceServer::new(threads).max_decoding_message_size(limit)))
        .add_service(rpc.layer(ScoreServiceServer::new(scores).max_decoding_message_size(limit)))
        .serve_incoming_shutdown(incoming, async move {
            drained_signal.cancelled().await;
        });

    let grace = config.server.shutdown_grace();
    // In-flight calls end first; runs that outlive their call (on_disconnect = CONTINUE, log
    // flushes) must end too before the store closes.
    let drained = async {
        let result = server.await;
        runtime.drain().await;
        result
    };
    let outcome = tokio::select! {
        result = drained => result.context("gRPC server failed"),
        () = async { drain.cancelled().await; tokio::time::sleep(grace).await } => {
            warn!(?grace, "grace period over; aborting the runs still in flight");
            runtime.abort_all("The server is shutting down");
            let _ = tokio::time::timeout(ABORT_WAIT, runtime.drain()).await;
            Ok(())
        }
    };
    shutdown.cancel();
    let _ = monitor.await;
    let _ = abort_listener.await;
    let _ = takeovers.await;
    let _ = renewals.await;
    mcp.shutdown().await;
    store.close().await;
    metrics_stop.cancel();
    if let Some(task) = metrics {
        let _ = task.await;
    }
    info!("agentd stopped");
    outcome
}

/// Probes the store every `interval` and flips the store-backed health statuses when it goes
/// down or returns. `signal` cuts the wait short: a store call that failed for want of the store
/// turns health NOT_SERVING at once (then a probe decides), and a deferred store that just
/// connected is probed at once.
async fn monitor_store(
    store: Arc<dyn Store>,
    health: HealthReporter,
    interval: Duration,
    signal: Arc<Notify>,
    shutdown: CancellationToken,
) {
    let mut serving = None;
    loop {
        let up = matches!(
            tokio::time::timeout(PROBE_TIMEOUT, store.ping()).await,
            Ok(Ok(()))
        );
        if serving != Some(up) {
            if up {
                info!("store reachable: SERVING");
            } else {
                crate::telemetry::metrics().store_error("ping");
                warn!("store unreachable: NOT_SERVING");
            }
            set_store_backed(&health, up).await;
            serving = Some(up);
        }
        // While down, probe often: SERVING comes back soon after the store does.
        let wait = if serving == Some(true) {
            interval
        } else {
            interval.min(DOWN_PROBE_INTERVAL)
        };
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(wait) => {}
            () = signal.notified() => {
                if serving == Some(true) {
                    warn!("a store call failed: NOT_SERVING until a probe succeeds");
                    set_store_backed(&health, false).await;
                    serving = Some(false);
                }
                // Failing calls signal in bursts: probe again soon, not once per failure.
                tokio::time::sleep(SIGNALLED_PROBE_GAP.min(interval)).await;
            }
        }
    }
    // Draining: tell load balancers to stop sending new calls.
    set_store_backed(&health, false).await;
}

/// Sets every store-backed service SERVING or NOT_SERVING.
async fn set_store_backed(health: &HealthReporter, up: bool) {
    let status = if up {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    };
    for service in STORE_BACKED {
        health.set_service_status(service, status).await;
    }
}
