//! The Prometheus text exposition of agentd's metrics: the same instruments as OTLP, read by a
//! second metric reader when `/metrics` is enabled (`server.metrics_listen`).

use std::sync::OnceLock;

use anyhow::Context as _;
use opentelemetry_prometheus::PrometheusExporter;
use prometheus::{Encoder, Registry, TextEncoder};

/// The registry the reader fills; set once, by [`reader`].
static REGISTRY: OnceLock<Registry> = OnceLock::new();

/// A metric reader exporting into the process's Prometheus registry.
pub(super) fn reader() -> anyhow::Result<PrometheusExporter> {
    let registry = REGISTRY.get_or_init(Registry::new).clone();
    opentelemetry_prometheus::exporter()
        .with_registry(registry)
        // One series per instrument: the scope label would be the same everywhere.
        .scope_info_enabled(false)
        .build()
        .context("building the Prometheus exporter")
}

/// Whether a Prometheus reader is installed (telemetry was initialized with it).
pub fn prometheus_enabled() -> bool {
    REGISTRY.get().is_some()
}

/// The current metrics in the Prometheus text format (version 0.0.4); `None` when no
/// Prometheus reader is installed.
pub fn prometheus_text() -> Option<anyhow::Result<String>> {
    let registry = REGISTRY.get()?;
    let mut text = Vec::new();
    let encoded = TextEncoder::new()
        .encode(&registry.gather(), &mut text)
        .context("encoding metrics");
    Some(encoded.and_then(|()| String::from_utf8(text).context("metrics text is not UTF-8")))
}

/// The content type of [`prometheus_text`].
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
