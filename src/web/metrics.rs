//! The Prometheus scrape endpoint: `GET /metrics` on its own port (`server.metrics_listen`),
//! so it can stay inside the cluster while the gRPC port is exposed.

use std::net::SocketAddr;

use anyhow::Context as _;
use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::telemetry;

/// The `/metrics` endpoint, bound but not yet serving.
#[derive(Debug)]
pub struct MetricsEndpoint {
    /// The address it listens on.
    pub addr: SocketAddr,
    listener: TcpListener,
}

impl MetricsEndpoint {
    /// Binds `addr`. Fails when telemetry was initialized without the Prometheus reader
    /// (nothing would ever be scraped).
    pub async fn bind(addr: SocketAddr) -> anyhow::Result<Self> {
        anyhow::ensure!(
            telemetry::prometheus_enabled(),
            "server.metrics_listen is set but telemetry was initialized without Prometheus"
        );
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding the metrics endpoint {addr}"))?;
        Ok(Self {
            addr: listener.local_addr()?,
            listener,
        })
    }

    /// Serves scrapes until `stop` is cancelled.
    pub fn spawn(self, stop: CancellationToken) -> JoinHandle<()> {
        let app = Router::new().route("/metrics", get(scrape));
        info!(addr = %self.addr, "serving Prometheus metrics at /metrics");
        tokio::spawn(async move {
            let served = axum::serve(self.listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await;
            if let Err(e) = served {
                warn!(error = %e, "metrics endpoint failed");
            }
        })
    }
}

async fn scrape() -> Response {
    match telemetry::prometheus_text() {
        Some(Ok(text)) => (
            [(header::CONTENT_TYPE, telemetry::PROMETHEUS_CONTENT_TYPE)],
            text,
        )
            .into_response(),
        Some(Err(e)) => {
            warn!(error = %format!("{e:#}"), "cannot render metrics");
            (StatusCode::INTERNAL_SERVER_ERROR, "cannot render metrics\n").into_response()
        }
        None => (StatusCode::SERVICE_UNAVAILABLE, "metrics are not enabled\n").into_response(),
    }
}
