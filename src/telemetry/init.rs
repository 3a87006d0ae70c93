//! Installs the global `tracing` subscriber and, when configured, OTLP exporters.

use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{InstrumentationScope, KeyValue, global};
use opentelemetry_otlp::tonic_types::transport::ClientTlsConfig;
use opentelemetry_otlp::{
    MetricExporter, Protocol, SpanExporter, WithExportConfig, WithTonicConfig,
};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::resource::TelemetryResourceDetector;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use super::OTEL_LAYER;
use super::ids::AgentdIdGenerator;
use crate::config::{LogConfig, LogFormat};

const SERVICE_NAME: &str = "agentd";
const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
const TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
const METRICS_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
const PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";

/// OTLP transport.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// OTLP/gRPC (`grpc`, usually port 4317).
    #[default]
    Grpc,
    /// OTLP/HTTP with protobuf bodies (`http/protobuf`, usually port 4318).
    HttpProtobuf,
}

/// Where and how to export spans and metrics.
#[derive(Clone, Debug)]
pub struct OtelSettings {
    /// Collector base URL, like `OTEL_EXPORTER_OTLP_ENDPOINT` (for HTTP, `/v1/traces` and
    /// `/v1/metrics` are appended). `None`: each exporter reads the standard variables itself,
    /// so per-signal endpoints, headers, timeout and compression work as the spec says.
    pub endpoint: Option<String>,
    /// Transport.
    pub protocol: OtlpProtocol,
    /// Export spans.
    pub traces: bool,
    /// Export metrics.
    pub metrics: bool,
    /// `service.name`; `None`: from `resource_attributes`, else `agentd`.
    pub service_name: Option<String>,
    /// Extra resource attributes (they may override `service.version`).
    pub resource_attributes: Vec<(String, String)>,
    /// Sampler; `None`: `OTEL_TRACES_SAMPLER` / `_ARG`, default `parentbased_always_on`.
    pub sampler: Option<Sampler>,
    /// Metric export interval; `None`: `OTEL_METRIC_EXPORT_INTERVAL`, default 60 s.
    pub metric_interval: Option<Duration>,
}

impl OtelSettings {
    /// Both signals to `endpoint` over `protocol`, everything else default.
    pub fn new(endpoint: impl Into<String>, protocol: OtlpProtocol) -> Self {
        Self {
            endpoint: Some(endpoint.into()),
            protocol,
            traces: true,
            metrics: true,
            service_name: None,
            resource_attributes: Vec::new(),
            sampler: None,
            metric_interval: None,
        }
    }

    /// From the process environment; `None` (export off) unless an OTLP endpoint is set.
    pub fn from_env() -> anyhow::Result<Option<Self>> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// From `lookup` (an environment stand-in). Traces are exported when
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` or `…_TRACES_ENDPOINT` is set, metrics when it or
    /// `…_METRICS_ENDPOINT` is; `OTEL_SDK_DISABLED=true` and `OTEL_{TRACES,METRICS}_EXPORTER=none`
    /// turn them off. `OTEL_EXPORTER_OTLP_PROTOCOL` is `grpc` (default) or `http/protobuf`;
    /// anything else is an error. The endpoint itself is left to the exporters (see
    /// [`OtelSettings::endpoint`]).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> anyhow::Result<Option<Self>> {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let is = |name: &str, value: &str| get(name).is_some_and(|v| v.eq_ignore_ascii_case(value));
        if is("OTEL_SDK_DISABLED", "true") {
            return Ok(None);
        }
        let any = get(ENDPOINT).is_some();
        let traces = (any || get(TRACES_ENDPOINT).is_some()) && !is("OTEL_TRACES_EXPORTER", "none");
        let metrics =
            (any || get(METRICS_ENDPOINT).is_some()) && !is("OTEL_METRICS_EXPORTER", "none");
        if !traces && !metrics {
            return Ok(None);
        }
        let protocol = match get(PROTOCOL).as_deref() {
            None | Some("grpc") => OtlpProtocol::Grpc,
            Some("http/protobuf") => OtlpProtocol::HttpProtobuf,
            Some(other) => {
                anyhow::bail!("{PROTOCOL}={other:?} is not supported: use grpc or http/protobuf")
            }
        };
        Ok(Some(Self {
            endpoint: None,
            protocol,
            traces,
            metrics,
            service_name: get("OTEL_SERVICE_NAME"),
            resource_attributes: get("OTEL_RESOURCE_ATTRIBUTES")
                .map(|v| parse_resource_attributes(&v))
                .unwrap_or_default(),
            sampler: None,
            metric_interval: None,
        }))
    }
}

/// Owns the exporting providers; flushes and shuts them down on [`shutdown`](Self::shutdown)
/// or drop.
#[must_use = "dropping the guard shuts exporting down"]
#[derive(Debug, Default)]
pub struct TelemetryGuard {
    tracer_provider: Option<SdkTracerProvider>,
    meter_provider: Option<SdkMeterProvider>,
}

impl TelemetryGuard {
    /// Whether spans or metrics are exported.
    pub fn is_exporting(&self) -> bool {
        self.tracer_provider.is_some() || self.meter_provider.is_some()
    }

    /// Exports everything recorded so far; blocks until the collector answered or timed out.
    pub fn force_flush(&self) -> anyhow::Result<()> {
        blocking(|| {
            if let Some(provider) = &self.tracer_provider {
                provider.force_flush().context("flushing spans")?;
            }
            if let Some(provider) = &self.meter_provider {
                provider.force_flush().context("flushing metrics")?;
            }
            Ok(())
        })
    }

    /// Flushes and shuts the exporters down.
    pub fn shutdown(mut self) -> anyhow::Result<()> {
        self.close()
    }

    fn close(&mut self) -> anyhow::Result<()> {
        let tracer_provider = self.tracer_provider.take();
        let meter_provider = self.meter_provider.take();
        if tracer_provider.is_none() && meter_provider.is_none() {
            return Ok(());
        }
        blocking(|| {
            // Both are attempted even if the first fails.
            let traces = tracer_provider.map_or(Ok(()), |p| {
                p.shutdown().context("shutting down span export")
            });
            let metrics = meter_provider.map_or(Ok(()), |p| {
                p.shutdown().context("shutting down metric export")
            });
            traces.and(metrics)
        })
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            eprintln!("agentd: telemetry shutdown: {e:#}");
        }
    }
}

/// [`init_with`] the OTLP settings of the environment ([`OtelSettings::from_env`]).
pub fn init(log: &LogConfig, prometheus: bool) -> anyhow::Result<TelemetryGuard> {
    init_with(log, OtelSettings::from_env()?, prometheus)
}

/// Installs the global subscriber: logs to stdout (text or JSON, filtered by `log.filter`),
/// plus, with `otel`, OTLP export of spans and metrics, and with `prometheus` the metrics'
/// Prometheus exposition ([`super::prometheus_text`]). Call once, inside a multi-thread Tokio
/// runtime (the gRPC exporter runs its connection there), before any metric is recorded.
/// Spans reach OTLP at INFO and above whatever the log filter says.
pub fn init_with(
    log: &LogConfig,
    otel: Option<OtelSettings>,
    prometheus: bool,
) -> anyhow::Result<TelemetryGuard> {
    let filter = EnvFilter::try_new(&log.filter)
        .map_err(|e| anyhow::anyhow!("invalid log filter {:?}: {e}", log.filter))?;
    // The log filter is per layer so that a quiet log (e.g. `warn`) does not disable spans.
    let fmt_layer = match log.format {
        // Colours only on a terminal: piped into files or `kubectl logs` they are noise.
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .with_filter(filter)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_filter(filter)
            .boxed(),
    };
    global::set_text_map_propagator(TraceContextPropagator::new());

    let guard = providers(otel.as_ref(), prometheus)?;
    let otel_layer = guard.tracer_provider.as_ref().map(|provider| {
        let scope = InstrumentationScope::builder(SERVICE_NAME)
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer_with_scope(scope))
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false)
            .with_filter(otel_filter())
    });
    let has_otel_layer = otel_layer.is_some();
    // Before the subscriber exists, so the SDK's "provider set" notices stay out of the log.
    if let Some(provider) = &guard.tracer_provider {
        global::set_tracer_provider(provider.clone());
    }
    if let Some(provider) = &guard.meter_provider {
        global::set_meter_provider(provider.clone());
    }
    tracing_subscriber::registry()
        .with(fmt_layer)
        .with(otel_layer)
        .try_init()
        .map_err(|e| anyhow::anyhow!("cannot install the logger: {e}"))?;

    OTEL_LAYER.store(has_otel_layer, Ordering::Relaxed);
    // Bind the instruments now that the meter provider is in place.
    super::metrics();
    if let Some(settings) = &otel {
        tracing::info!(
            protocol = ?settings.protocol,
            traces = settings.traces,
            metrics = settings.metrics,
            "exporting telemetry over OTLP"
        );
    }
    Ok(guard)
}

/// What the OTel layer sees: INFO and above, except the crates that carry the export itself
/// (their events would only add noise, or loop back into the exporter) and rmcp, whose spans
/// last as long as an MCP connection and belong to no run (an MCP call's span is agentd's
/// `execute_tool`).
fn otel_filter() -> Targets {
    Targets::new().with_default(LevelFilter::INFO).with_targets(
        [
            "h2",
            "hyper",
            "hyper_util",
            "tonic",
            "tower",
            "reqwest",
            "opentelemetry",
            "opentelemetry_sdk",
            "opentelemetry_otlp",
            "rmcp",
        ]
        .map(|target| (target, LevelFilter::OFF)),
    )
}

/// The tracer provider (OTLP traces) and the meter provider (OTLP metrics and/or Prometheus)
/// the settings ask for; none when nothing is exported.
fn providers(otel: Option<&OtelSettings>, prometheus: bool) -> anyhow::Result<TelemetryGuard> {
    // The gRPC channel spawns its connection task at build time; outside a runtime that panics.
    if otel.is_some_and(|s| s.protocol == OtlpProtocol::Grpc)
        && tokio::runtime::Handle::try_current().is_err()
    {
        anyhow::bail!("OTLP/gRPC export needs a Tokio runtime: call telemetry::init inside one");
    }
    let resource = resource(otel);
    let tracer_provider = if let Some(settings) = otel.filter(|s| s.traces) {
        let mut builder = SdkTracerProvider::builder()
            .with_batch_exporter(span_exporter(settings)?)
            .with_resource(resource.clone())
            .with_id_generator(AgentdIdGenerator::default());
        if let Some(sampler) = settings.sampler.clone() {
            builder = builder.with_sampler(sampler);
        }
        Some(builder.build())
    } else {
        None
    };
    let otlp_metrics = otel.filter(|s| s.metrics);
    let meter_provider = if otlp_metrics.is_some() || prometheus {
        let mut builder = SdkMeterProvider::builder().with_resource(resource);
        if let Some(settings) = otlp_metrics {
            let exporter = metric_exporter(settings)?;
            builder = match settings.metric_interval {
                Some(interval) => builder.with_reader(
                    PeriodicReader::builder(exporter)
                        .with_interval(interval)
                        .build(),
                ),
                None => builder.with_periodic_exporter(exporter),
            };
        }
        if prometheus {
            builder = builder.with_reader(super::prometheus::reader()?);
        }
        Some(builder.build())
    } else {
        None
    };
    Ok(TelemetryGuard {
        tracer_provider,
        meter_provider,
    })
}

fn span_exporter(settings: &OtelSettings) -> anyhow::Result<SpanExporter> {
    let endpoint = settings.endpoint.as_deref();
    let exporter = match settings.protocol {
        OtlpProtocol::Grpc => {
            let builder = SpanExporter::builder().with_tonic().with_tls_config(tls());
            match endpoint {
                Some(endpoint) => builder.with_endpoint(endpoint).build(),
                None => builder.build(),
            }
        }
        OtlpProtocol::HttpProtobuf => {
            let builder = SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary);
            match endpoint {
                Some(endpoint) => builder
                    .with_endpoint(signal_url(endpoint, "v1/traces"))
                    .build(),
                None => builder.build(),
            }
        }
    };
    exporter.context("configuring the OTLP span exporter")
}

fn metric_exporter(settings: &OtelSettings) -> anyhow::Result<MetricExporter> {
    let endpoint = settings.endpoint.as_deref();
    let exporter = match settings.protocol {
        OtlpProtocol::Grpc => {
            let builder = MetricExporter::builder()
                .with_tonic()
                .with_tls_config(tls());
            match endpoint {
                Some(endpoint) => builder.with_endpoint(endpoint).build(),
                None => builder.build(),
            }
        }
        OtlpProtocol::HttpProtobuf => {
            let builder = MetricExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary);
            match endpoint {
                Some(endpoint) => builder
                    .with_endpoint(signal_url(endpoint, "v1/metrics"))
                    .build(),
                None => builder.build(),
            }
        }
    };
    exporter.context("configuring the OTLP metric exporter")
}

/// TLS for `https://` gRPC endpoints (plain `http://` ones ignore it), trusting the system's
/// CA certificates; the exporter's own default trusts none.
fn tls() -> ClientTlsConfig {
    ClientTlsConfig::new().with_native_roots()
}

/// `base` + `/` + `path`, as the spec builds per-signal URLs from the generic endpoint.
fn signal_url(base: &str, path: &str) -> String {
    format!("{}/{path}", base.trim_end_matches('/'))
}

/// `service.name` = `agentd` and `service.version`, then the SDK's `telemetry.sdk.*`, then
/// the configured attributes, then the configured service name: later ones win.
/// agentd's resource, plus the OTLP settings' service name and attributes when exporting.
fn resource(settings: Option<&OtelSettings>) -> Resource {
    let builder = Resource::builder_empty()
        .with_service_name(SERVICE_NAME)
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .with_detector(Box::new(TelemetryResourceDetector))
        .with_attributes(
            settings
                .into_iter()
                .flat_map(|s| &s.resource_attributes)
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
        );
    match settings.and_then(|s| s.service_name.as_ref()) {
        Some(name) => builder.with_service_name(name.clone()),
        None => builder,
    }
    .build()
}

/// `k1=v1,k2=v2` (values may be percent-encoded, as the spec allows); malformed entries are
/// skipped.
fn parse_resource_attributes(value: &str) -> Vec<(String, String)> {
    value
        .split(',')
        .filter_map(|entry| {
            let (key, value) = entry.split_once('=')?;
            let key = key.trim();
            (!key.is_empty()).then(|| (key.to_owned(), percent_decode(value.trim())))
        })
        .collect()
}

/// Decodes `%XX` escapes; malformed escapes stay as they are, invalid UTF-8 becomes U+FFFD.
fn percent_decode(value: &str) -> String {
    percent_encoding::percent_decode_str(value)
        .decode_utf8_lossy()
        .into_owned()
}

/// Runs a blocking provider call without starving the runtime the gRPC exporter needs.
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(vars: &[(&str, &str)]) -> anyhow::Result<Option<OtelSettings>> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        OtelSettings::from_lookup(|name| vars.get(name).cloned())
    }

    #[test]
    fn no_endpoint_means_no_export() {
        assert!(settings(&[]).unwrap().is_none());
        assert!(settings(&[(ENDPOINT, " ")]).unwrap().is_none());
        assert!(
            settings(&[("OTEL_SERVICE_NAME", "x"), (PROTOCOL, "grpc")])
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn generic_endpoint_turns_both_signals_on_with_grpc_by_default() {
        let s = settings(&[(ENDPOINT, "http://collector:4317")])
            .unwrap()
            .unwrap();
        assert!(s.traces && s.metrics);
        assert_eq!(s.protocol, OtlpProtocol::Grpc);
        // Left to the exporter, which also honours the per-signal variables.
        assert_eq!(s.endpoint, None);
    }

    #[test]
    fn per_signal_endpoints_turn_on_their_signal_only() {
        let s = settings(&[(TRACES_ENDPOINT, "http://c:4318/v1/traces")])
            .unwrap()
            .unwrap();
        assert!(s.traces && !s.metrics);
        let s = settings(&[(METRICS_ENDPOINT, "http://c:4318/v1/metrics")])
            .unwrap()
            .unwrap();
        assert!(!s.traces && s.metrics);
    }

    #[test]
    fn exporters_can_be_turned_off() {
        assert!(
            settings(&[(ENDPOINT, "http://c"), ("OTEL_SDK_DISABLED", "TRUE")])
                .unwrap()
                .is_none()
        );
        let s = settings(&[(ENDPOINT, "http://c"), ("OTEL_METRICS_EXPORTER", "none")])
            .unwrap()
            .unwrap();
        assert!(s.traces && !s.metrics);
        let both_off = [
            (ENDPOINT, "http://c"),
            ("OTEL_METRICS_EXPORTER", "none"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ];
        assert!(settings(&both_off).unwrap().is_none());
    }

    #[test]
    fn protocol_is_read_and_checked() {
        let s = settings(&[(ENDPOINT, "http://c"), (PROTOCOL, "http/protobuf")])
            .unwrap()
            .unwrap();
        assert_eq!(s.protocol, OtlpProtocol::HttpProtobuf);
        let err = settings(&[(ENDPOINT, "http://c"), (PROTOCOL, "http/json")]).unwrap_err();
        assert!(err.to_string().contains(PROTOCOL));
    }

    #[test]
    fn resource_comes_from_service_name_and_attributes() {
        let s = settings(&[
            (ENDPOINT, "http://c"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment=prod, team=a%2Cb,broken,=x",
            ),
        ])
        .unwrap()
        .unwrap();
        let r = resource(Some(&s));
        let get = |k: &'static str| r.get(&opentelemetry::Key::new(k)).map(|v| v.to_string());
        assert_eq!(get("service.name").as_deref(), Some("agentd"));
        assert_eq!(
            get("service.version").as_deref(),
            Some(env!("CARGO_PKG_VERSION"))
        );
        assert_eq!(get("deployment.environment").as_deref(), Some("prod"));
        assert_eq!(get("team").as_deref(), Some("a,b"));
        assert_eq!(get("telemetry.sdk.language").as_deref(), Some("rust"));

        let s = settings(&[
            (ENDPOINT, "http://c"),
            ("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attrs"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            resource(Some(&s))
                .get(&opentelemetry::Key::new("service.name"))
                .map(|v| v.to_string())
                .as_deref(),
            Some("from-attrs")
        );
        let s = settings(&[
            (ENDPOINT, "http://c"),
            ("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attrs"),
            ("OTEL_SERVICE_NAME", "from-name"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            resource(Some(&s))
                .get(&opentelemetry::Key::new("service.name"))
                .map(|v| v.to_string())
                .as_deref(),
            Some("from-name")
        );
    }

    #[tokio::test]
    async fn https_grpc_endpoints_are_accepted() {
        // The channel connects lazily: building proves TLS is configured, without network.
        let settings = OtelSettings::new("https://collector.example:4317", OtlpProtocol::Grpc);
        assert!(span_exporter(&settings).is_ok());
        assert!(metric_exporter(&settings).is_ok());
    }

    #[test]
    fn grpc_export_outside_a_runtime_is_an_error_not_a_panic() {
        let settings = OtelSettings::new("http://127.0.0.1:1", OtlpProtocol::Grpc);
        let err = providers(Some(&settings), false).unwrap_err();
        assert!(err.to_string().contains("Tokio runtime"));
    }

    #[test]
    fn signal_urls_join_cleanly() {
        assert_eq!(
            signal_url("http://c:4318", "v1/traces"),
            "http://c:4318/v1/traces"
        );
        assert_eq!(
            signal_url("http://c:4318/", "v1/traces"),
            "http://c:4318/v1/traces"
        );
    }

    #[test]
    fn percent_decoding_keeps_malformed_escapes() {
        assert_eq!(percent_decode("a%20b%zz%"), "a b%zz%");
        assert_eq!(percent_decode("caf%C3%A9%2C%3D"), "café,=");
    }
}
