//! Routes each gRPC call to its service by the service name in its path, answering
//! UNIMPLEMENTED for unknown services: what tonic's `router` feature does, without the axum
//! router it is built on, so the server binary compiles no HTTP framework.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Ready;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::Either;
use http::{Request, Response};
use tonic::body::Body;
use tonic::server::NamedService;
use tower::util::{BoxCloneSyncService, Oneshot};
use tower::{Service, ServiceExt};

/// One service, type-erased.
type Route = BoxCloneSyncService<Request<Body>, Response<Body>, Infallible>;

/// gRPC services by name.
#[derive(Clone, Default)]
pub struct Routes {
    services: Arc<HashMap<&'static str, Route>>,
}

impl Routes {
    /// Adds `service` under its [`NamedService::NAME`] (replacing one of the same name).
    pub fn add<S>(mut self, service: S) -> Self
    where
        S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>
            + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        Arc::make_mut(&mut self.services).insert(S::NAME, BoxCloneSyncService::new(service));
        self
    }
}

impl Service<Request<Body>> for Routes {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Either<Oneshot<Route, Request<Body>>, Ready<Result<Response<Body>, Infallible>>>;

    /// Always ready: each call waits for its own service's readiness (`oneshot`).
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let route = service_name(request.uri().path()).and_then(|name| self.services.get(name));
        match route {
            Some(route) => Either::Left(route.clone().oneshot(request)),
            // As tonic's router answers: gRPC status UNIMPLEMENTED, no message.
            None => Either::Right(std::future::ready(Ok(
                tonic::Status::unimplemented("").into_http()
            ))),
        }
    }
}

/// The service of a `/{service}/{method}` path.
fn service_name(path: &str) -> Option<&str> {
    let (service, _method) = path.strip_prefix('/')?.split_once('/')?;
    Some(service)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn call(routes: &Routes, path: &str) -> tonic::Code {
        let request = Request::builder()
            .uri(path)
            .header("content-type", "application/grpc")
            .body(Body::empty())
            .unwrap();
        let Ok(response) = routes.clone().oneshot(request).await;
        tonic::Status::from_header_map(response.headers()).map_or(tonic::Code::Ok, |s| s.code())
    }

    #[tokio::test]
    async fn calls_reach_their_service_and_unknown_ones_are_unimplemented() {
        let (_, health) = tonic_health::server::health_reporter();
        let routes = Routes::default().add(health);
        // Health answers itself (here: its error for a call without a message).
        assert_ne!(
            call(&routes, "/grpc.health.v1.Health/Check").await,
            tonic::Code::Unimplemented
        );
        for path in ["/agentd.v1.Nope/Check", "/", "/grpc.health.v1.Health"] {
            assert_eq!(
                call(&routes, path).await,
                tonic::Code::Unimplemented,
                "{path}"
            );
        }
    }

    #[test]
    fn service_names_come_from_the_path() {
        assert_eq!(
            service_name("/agentd.v1.TaskService/Check"),
            Some("agentd.v1.TaskService")
        );
        assert_eq!(service_name("/agentd.v1.TaskService"), None);
        assert_eq!(service_name("agentd.v1.TaskService/Check"), None);
    }
}
