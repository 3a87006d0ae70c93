//! An OTLP collector inside the test: OTLP/gRPC (`TraceService/Export`,
//! `MetricsService/Export`, from the `opentelemetry-proto` stubs) and OTLP/HTTP protobuf
//! (`POST /v1/traces`, `POST /v1/metrics`) on 127.0.0.1, keeping everything it receives.
//!
//! ```ignore
//! let collector = OtlpCollector::start().await;
//! // point the exporter at collector.endpoint_grpc() or collector.endpoint_http()
//! let spans = collector.wait_for_spans(|s| s.len() >= 3, WAIT).await;
//! assert_eq!(str_attr(&spans[0], "gen_ai.system").as_deref(), Some("openai"));
//! ```

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::Metric;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::TcpListenerStream;

/// Everything received, by either protocol.
#[derive(Default)]
struct Received {
    state: Mutex<Inbox>,
    changed: Notify,
}

#[derive(Default)]
struct Inbox {
    traces: Vec<ExportTraceServiceRequest>,
    metrics: Vec<ExportMetricsServiceRequest>,
    grpc_calls: usize,
    http_calls: usize,
}

impl Received {
    fn lock(&self) -> MutexGuard<'_, Inbox> {
        // A panicking test thread must not hide what was received.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add_traces(&self, request: ExportTraceServiceRequest, grpc: bool) {
        let mut state = self.lock();
        state.traces.push(request);
        if grpc {
            state.grpc_calls += 1
        } else {
            state.http_calls += 1
        }
        drop(state);
        self.changed.notify_waiters();
    }

    fn add_metrics(&self, request: ExportMetricsServiceRequest, grpc: bool) {
        let mut state = self.lock();
        state.metrics.push(request);
        if grpc {
            state.grpc_calls += 1
        } else {
            state.http_calls += 1
        }
        drop(state);
        self.changed.notify_waiters();
    }
}

/// A running collector; stops when dropped.
pub struct OtlpCollector {
    grpc_addr: SocketAddr,
    http_addr: SocketAddr,
    received: Arc<Received>,
    tasks: Vec<JoinHandle<()>>,
}

impl OtlpCollector {
    /// Starts both endpoints on free loopback ports.
    pub async fn start() -> Self {
        let grpc = std::net::TcpListener::bind("127.0.0.1:0").expect("bind gRPC port");
        let http = std::net::TcpListener::bind("127.0.0.1:0").expect("bind HTTP port");
        Self::start_on(grpc, http).await
    }

    /// Starts on listeners bound beforehand (e.g. before the runtime, to put their addresses
    /// in the environment while no other thread runs).
    pub async fn start_on(grpc: std::net::TcpListener, http: std::net::TcpListener) -> Self {
        let received = Arc::new(Received::default());
        let grpc_addr = grpc.local_addr().expect("gRPC address");
        let http_addr = http.local_addr().expect("HTTP address");
        let grpc = listener(grpc);
        let http = listener(http);

        let grpc_server = tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(Grpc(received.clone())))
            .add_service(MetricsServiceServer::new(Grpc(received.clone())))
            .serve_with_incoming(TcpListenerStream::new(grpc));
        let http_app = Router::new()
            .route("/v1/traces", post(http_traces))
            .route("/v1/metrics", post(http_metrics))
            .with_state(received.clone());
        let tasks = vec![
            tokio::spawn(async move {
                grpc_server.await.expect("OTLP gRPC server");
            }),
            tokio::spawn(async move {
                axum::serve(http, http_app).await.expect("OTLP HTTP server");
            }),
        ];
        Self {
            grpc_addr,
            http_addr,
            received,
            tasks,
        }
    }

    /// OTLP/gRPC endpoint URL.
    pub fn endpoint_grpc(&self) -> String {
        format!("http://{}", self.grpc_addr)
    }

    /// OTLP/HTTP base URL (the exporter appends `/v1/traces`, `/v1/metrics`).
    pub fn endpoint_http(&self) -> String {
        format!("http://{}", self.http_addr)
    }

    /// Export calls received over gRPC.
    pub fn grpc_calls(&self) -> usize {
        self.received.lock().grpc_calls
    }

    /// Export calls received over HTTP.
    pub fn http_calls(&self) -> usize {
        self.received.lock().http_calls
    }

    /// Every trace export request, as received.
    pub fn trace_requests(&self) -> Vec<ExportTraceServiceRequest> {
        self.received.lock().traces.clone()
    }

    /// Every span received, flattened across requests, resources and scopes.
    pub fn spans(&self) -> Vec<Span> {
        self.received
            .lock()
            .traces
            .iter()
            .flat_map(|r| &r.resource_spans)
            .flat_map(|r| &r.scope_spans)
            .flat_map(|s| s.spans.iter().cloned())
            .collect()
    }

    /// Every metric received, flattened.
    pub fn metrics(&self) -> Vec<Metric> {
        self.received
            .lock()
            .metrics
            .iter()
            .flat_map(|r| &r.resource_metrics)
            .flat_map(|r| &r.scope_metrics)
            .flat_map(|s| s.metrics.iter().cloned())
            .collect()
    }

    /// Names of the metrics received, sorted, without duplicates.
    pub fn metric_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.metrics().into_iter().map(|m| m.name).collect();
        names.sort();
        names.dedup();
        names
    }

    /// Waits until `done(spans)` holds, then returns the spans; panics after `timeout`.
    pub async fn wait_for_spans(
        &self,
        done: impl Fn(&[Span]) -> bool,
        timeout: Duration,
    ) -> Vec<Span> {
        self.wait(
            |c| {
                let spans = c.spans();
                done(&spans).then_some(spans)
            },
            timeout,
        )
        .await
        .unwrap_or_else(|| {
            panic!(
                "timed out waiting for spans; received: {:#?}",
                summary(&self.spans())
            )
        })
    }

    /// Waits until every name in `names` was received; panics after `timeout`.
    pub async fn wait_for_metrics(&self, names: &[&str], timeout: Duration) -> Vec<String> {
        self.wait(
            |c| {
                let got = c.metric_names();
                names
                    .iter()
                    .all(|n| got.iter().any(|g| g == n))
                    .then_some(got)
            },
            timeout,
        )
        .await
        .unwrap_or_else(|| {
            panic!(
                "timed out waiting for metrics {names:?}; received: {:?}",
                self.metric_names()
            )
        })
    }

    async fn wait<T>(&self, check: impl Fn(&Self) -> Option<T>, timeout: Duration) -> Option<T> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            // Registered before checking, so an export landing in between is not missed.
            let changed = self.received.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(found) = check(self) {
                return Some(found);
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return None;
            }
        }
    }
}

impl Drop for OtlpCollector {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn listener(std: std::net::TcpListener) -> tokio::net::TcpListener {
    std.set_nonblocking(true).expect("non-blocking listener");
    tokio::net::TcpListener::from_std(std).expect("tokio listener")
}

/// Name, ids and parent of each span, for failure messages.
fn summary(spans: &[Span]) -> Vec<String> {
    spans
        .iter()
        .map(|s| {
            format!(
                "{} trace={} span={} parent={}",
                s.name,
                hex(&s.trace_id),
                hex(&s.span_id),
                hex(&s.parent_span_id)
            )
        })
        .collect()
}

struct Grpc(Arc<Received>);

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.add_traces(request.into_inner(), true);
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tonic::async_trait]
impl MetricsService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        self.0.add_metrics(request.into_inner(), true);
        Ok(tonic::Response::new(ExportMetricsServiceResponse::default()))
    }
}

async fn http_traces(State(received): State<Arc<Received>>, body: Bytes) -> Response {
    match ExportTraceServiceRequest::decode(body) {
        Ok(request) => {
            received.add_traces(request, false);
            protobuf(ExportTraceServiceResponse::default())
        }
        Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}

async fn http_metrics(State(received): State<Arc<Received>>, body: Bytes) -> Response {
    match ExportMetricsServiceRequest::decode(body) {
        Ok(request) => {
            received.add_metrics(request, false);
            protobuf(ExportMetricsServiceResponse::default())
        }
        Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}

fn protobuf(message: impl Message) -> Response {
    (
        [(header::CONTENT_TYPE, "application/x-protobuf")],
        message.encode_to_vec(),
    )
        .into_response()
}

/// Lowercase hex of an id (empty for an absent id).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An attribute's value.
pub fn attr<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v: &AnyValue| v.value.as_ref())
}

/// A span's string attribute.
pub fn str_attr(span: &Span, key: &str) -> Option<String> {
    match attr(&span.attributes, key)? {
        any_value::Value::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

/// A span's integer attribute.
pub fn int_attr(span: &Span, key: &str) -> Option<i64> {
    match attr(&span.attributes, key)? {
        any_value::Value::IntValue(i) => Some(*i),
        _ => None,
    }
}

/// A span's string-array attribute.
pub fn str_array_attr(span: &Span, key: &str) -> Option<Vec<String>> {
    match attr(&span.attributes, key)? {
        any_value::Value::ArrayValue(array) => Some(
            array
                .values
                .iter()
                .filter_map(|v| match &v.value {
                    Some(any_value::Value::StringValue(s)) => Some(s.clone()),
                    _ => None,
                })
                .collect(),
        ),
        _ => None,
    }
}
