//! The JSON mapping on the gRPC port: a tower layer in front of the gRPC services that takes
//! `POST /{package.Service}/{Method}` requests with a JSON body (and any plain HTTP/1 request),
//! and lets gRPC and gRPC-web through untouched. `GET /openapi.json` describes the mapping.

use std::sync::Arc;
use std::task::{Context, Poll};

use axum::http::{HeaderValue, Method, StatusCode, header};
use bytes::Bytes;
use futures::future::{BoxFuture, Either};
use http::{Request, Response, Version};
use http_body_util::Full;
use prost_reflect::{DescriptorPool, MethodDescriptor};
use tonic::body::Body;
use tower::{BoxError, Layer, Service};

use super::call::handle;
use super::openapi;
use super::status::error_response_as;

/// The services the JSON mapping serves (reflection is for gRPC tools only).
pub const JSON_SERVICES: [&str; 6] = [
    "agentd.v1.AgentService",
    "agentd.v1.TaskService",
    "agentd.v1.ApprovalService",
    "agentd.v1.ThreadService",
    "agentd.v1.ScoreService",
    "grpc.health.v1.Health",
];

/// Path of the OpenAPI document.
pub const OPENAPI_PATH: &str = "/openapi.json";

/// Adds the JSON mapping in front of a gRPC service stack.
#[derive(Clone, Debug)]
pub struct JsonLayer {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    pool: &'static DescriptorPool,
    limit: usize,
    openapi: Bytes,
}

impl JsonLayer {
    /// A layer reading request bodies up to `limit` bytes.
    pub fn new(limit: usize) -> anyhow::Result<Self> {
        let pool = crate::pb::descriptor_pool().map_err(anyhow::Error::msg)?;
        let document = openapi::document(pool, &JSON_SERVICES)?;
        Ok(Self {
            shared: Arc::new(Shared {
                pool,
                limit,
                openapi: Bytes::from(serde_json::to_vec_pretty(&document)?),
            }),
        })
    }
}

impl<S> Layer<S> for JsonLayer {
    type Service = JsonGateway<S>;

    fn layer(&self, inner: S) -> Self::Service {
        JsonGateway {
            inner,
            shared: self.shared.clone(),
        }
    }
}

/// The gRPC services behind the JSON mapping; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct JsonGateway<S> {
    inner: S,
    shared: Arc<Shared>,
}

/// Where a request goes.
enum Route {
    /// gRPC or gRPC-web: the inner stack, untouched.
    Grpc,
    /// The OpenAPI document.
    OpenApi,
    /// A JSON call of this method.
    Json(MethodDescriptor),
    /// Plain HTTP to a path that is no method.
    Unknown,
}

impl<S> JsonGateway<S> {
    fn route<B>(&self, request: &Request<B>) -> Route {
        let content_type = request
            .headers()
            .get(header::CONTENT_TYPE)
            .map(HeaderValue::as_bytes)
            .unwrap_or_default();
        if content_type.starts_with(b"application/grpc") {
            return Route::Grpc;
        }
        let path = request.uri().path();
        if path == OPENAPI_PATH && request.method() == Method::GET {
            return Route::OpenApi;
        }
        // Over HTTP/2 only JSON bodies are the gateway's (gRPC clients always say grpc); over
        // HTTP/1 everything is, so a curl without the right content-type gets a clear error.
        let json = content_type.starts_with(b"application/json")
            || content_type.starts_with(b"application/x-ndjson");
        if request.version() == Version::HTTP_2 && !json {
            return Route::Grpc;
        }
        match self.method(path) {
            Some(method) => Route::Json(method),
            None => Route::Unknown,
        }
    }

    fn method(&self, path: &str) -> Option<MethodDescriptor> {
        let (service, method) = path.strip_prefix('/')?.split_once('/')?;
        if !JSON_SERVICES.contains(&service) {
            return None;
        }
        self.shared
            .pool
            .get_service_by_name(service)?
            .methods()
            .find(|m| m.name() == method)
    }
}

impl<S> Service<Request<Body>> for JsonGateway<S>
where
    S: Service<Request<Body>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError> + Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Either<S::Future, BoxFuture<'static, Result<Response<Body>, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let shared = self.shared.clone();
        match self.route(&request) {
            Route::Grpc => Either::Left(self.inner.call(request)),
            Route::OpenApi => {
                let mut response = Response::new(Body::new(Full::new(shared.openapi.clone())));
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                Either::Right(Box::pin(async move { Ok(response) }))
            }
            Route::Unknown => {
                let message = format!(
                    "no such method: {}; the JSON mapping serves POST /{{service}}/{{method}} (see {OPENAPI_PATH})",
                    request.uri().path()
                );
                let status = tonic::Status::unimplemented(message);
                let response = error_response_as(shared.pool, StatusCode::NOT_FOUND, &status);
                Either::Right(Box::pin(async move { Ok(response) }))
            }
            Route::Json(method) => {
                // The clone that was not polled ready stays here (tower's rule for `call`).
                let clone = self.inner.clone();
                let inner = std::mem::replace(&mut self.inner, clone);
                Either::Right(Box::pin(async move {
                    Ok(handle(shared.pool, shared.limit, method, inner, request).await)
                }))
            }
        }
    }
}
