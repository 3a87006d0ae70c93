//! The tower layer around every agentd service: bearer-key authentication (the caller's
//! [`crate::tenant::Identity`] goes into the request's extensions), then the call's `rpc` span
//! under the trace its metadata names, entered while the service handles the call.
//!
//! Health and reflection are not wrapped, so probes and grpcurl discovery need no key. For a
//! server-streaming call the span covers the call (until the handler returns its stream), not
//! the stream: a run's own spans cover what it streams. Handlers read the span with
//! [`tracing::Span::current`].

use std::convert::Infallible;
use std::task::{Context, Poll};

use futures::future::Either;
use http::{Request, Response};
use tonic::body::Body;
use tonic::server::NamedService;
use tower::{Layer, Service};
use tracing::Instrument;
use tracing::instrument::Instrumented;

use super::auth::ApiKeys;
use super::invalid_trace;
use crate::pb::agent_service_server;
use crate::telemetry;

/// `rpc.method` of a path whose method part is not a plain identifier (OTel's catch-all), so
/// client-chosen text never becomes a span name.
const OTHER_METHOD: &str = "_OTHER";

/// Wraps an agentd service with [`RpcService`].
#[derive(Clone, Debug)]
pub struct RpcLayer {
    keys: ApiKeys,
}

impl RpcLayer {
    /// A layer requiring one of `keys` (none configured: open) on every call.
    pub fn new(keys: ApiKeys) -> Self {
        Self { keys }
    }
}

impl<S> Layer<S> for RpcLayer {
    type Service = RpcService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RpcService {
            inner,
            keys: self.keys.clone(),
        }
    }
}

/// An agentd service behind auth and its RPC span; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct RpcService<S> {
    inner: S,
    keys: ApiKeys,
}

impl<S: NamedService> NamedService for RpcService<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B> Service<Request<B>> for RpcService<S>
where
    S: Service<Request<B>, Response = Response<Body>, Error = Infallible> + NamedService + Clone,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future =
        Either<std::future::Ready<Result<Response<Body>, Infallible>>, Instrumented<S::Future>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let reject =
            |status: tonic::Status| Either::Left(std::future::ready(Ok(status.into_http())));
        // Handlers scope data by the caller's identity (tonic hands extensions through).
        match self.keys.identify(request.headers()) {
            Ok(identity) => {
                request.extensions_mut().insert(identity);
            }
            Err(status) => return reject(status),
        }
        let method = method_name(request.uri().path());
        let parent = match telemetry::parent_context(request.headers(), "", "") {
            Ok(parent) => parent,
            // The request's own tracing_options win over the headers, and only the handler
            // reads them: it reports the header error when they are unset.
            Err(_) if body_names_trace(S::NAME, method) => None,
            Err(e) => return reject(invalid_trace(e)),
        };
        let span = telemetry::rpc_span(S::NAME, method, parent.as_ref());
        // The clone that was not polled ready stays here (tower's rule for `call`).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let future = span.in_scope(|| inner.call(request));
        Either::Right(future.instrument(span))
    }
}

/// Calls whose request message carries trace ids of its own (`GenerateRequest.tracing_options`).
fn body_names_trace(service: &str, method: &str) -> bool {
    service == agent_service_server::SERVICE_NAME && method == "Generate"
}

/// The method of a `/{service}/{method}` path, or [`OTHER_METHOD`] when it is not an
/// identifier (the service answers UNIMPLEMENTED for those anyway).
fn method_name(path: &str) -> &str {
    let method = path.rsplit('/').next().unwrap_or_default();
    let plain = !method.is_empty()
        && method.len() <= 64
        && method
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if plain { method } else { OTHER_METHOD }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    /// Stands in for a generated server: answers OK, reporting the span it ran in.
    #[derive(Clone)]
    struct Echo;

    impl NamedService for Echo {
        const NAME: &'static str = "agentd.v1.TaskService";
    }

    impl Service<Request<Body>> for Echo {
        type Response = Response<Body>;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Response<Body>, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<Body>) -> Self::Future {
            std::future::ready(Ok(Response::new(Body::empty())))
        }
    }

    fn request(path: &str, headers: &[(&'static str, &str)]) -> Request<Body> {
        let mut request = Request::builder().uri(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(Body::empty()).unwrap()
    }

    async fn call(keys: &ApiKeys, request: Request<Body>) -> Response<Body> {
        let service = RpcLayer::new(keys.clone()).layer(Echo);
        let Ok(response) = service.oneshot(request).await;
        response
    }

    fn grpc_status(response: &Response<Body>) -> Option<tonic::Status> {
        tonic::Status::from_header_map(response.headers())
    }

    #[tokio::test]
    async fn keys_are_required_when_configured() {
        let keys = ApiKeys::new(["k"], []).unwrap();
        let path = "/agentd.v1.TaskService/Check";
        let missing = grpc_status(&call(&keys, request(path, &[])).await).unwrap();
        assert_eq!(missing.code(), tonic::Code::Unauthenticated);
        assert_eq!(missing.message(), "missing authorization: Bearer <api key>");
        let wrong = call(&keys, request(path, &[("authorization", "Bearer x")])).await;
        assert_eq!(grpc_status(&wrong).unwrap().message(), "invalid API key");
        let right = call(&keys, request(path, &[("authorization", "Bearer k")])).await;
        assert!(grpc_status(&right).is_none());
        let open = call(&ApiKeys::default(), request(path, &[])).await;
        assert!(grpc_status(&open).is_none());
    }

    #[tokio::test]
    async fn malformed_trace_headers_are_invalid_argument_naming_the_header() {
        let keys = ApiKeys::default();
        let bad = [("x-trace-id", "not-hex")];
        let status =
            grpc_status(&call(&keys, request("/agentd.v1.TaskService/Check", &bad)).await).unwrap();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(
            status.message().contains("x-trace-id"),
            "{}",
            status.message()
        );
        let details = tonic_types::StatusExt::get_error_details(&status);
        let violations = details.bad_request().unwrap();
        assert_eq!(violations.field_violations[0].field, "x-trace-id");
        let traceparent = [("traceparent", "00-zz")];
        let status =
            grpc_status(&call(&keys, request("/agentd.v1.TaskService/Write", &traceparent)).await)
                .unwrap();
        assert!(
            status.message().contains("traceparent"),
            "{}",
            status.message()
        );
    }

    #[test]
    fn generate_reads_its_own_trace_fields_first() {
        assert!(body_names_trace("agentd.v1.AgentService", "Generate"));
        assert!(!body_names_trace("agentd.v1.AgentService", "Observe"));
        assert!(!body_names_trace("agentd.v1.TaskService", "Generate"));
    }

    #[test]
    fn span_methods_are_identifiers() {
        assert_eq!(method_name("/agentd.v1.TaskService/Check"), "Check");
        assert_eq!(method_name("/agentd.v1.TaskService/"), OTHER_METHOD);
        assert_eq!(method_name("/agentd.v1.TaskService/a%20b"), OTHER_METHOD);
        assert_eq!(method_name(&format!("/s/{}", "x".repeat(65))), OTHER_METHOD);
    }
}
