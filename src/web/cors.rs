//! CORS for browser clients (gRPC-web and the JSON mapping): the configured origins may call,
//! send the headers agentd reads, and read the headers it answers with.

use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, Method};
use tower_http::cors::{AllowOrigin, CorsLayer};

/// Request headers a browser may send: the call's, gRPC-web's, auth and trace context.
const ALLOWED: [&str; 10] = [
    "content-type",
    "accept",
    "authorization",
    "x-grpc-web",
    "x-user-agent",
    "grpc-timeout",
    "traceparent",
    "tracestate",
    "x-trace-id",
    "x-parent-span-id",
];

/// Response headers a page may read: the call's status and its trace ids.
const EXPOSED: [&str; 5] = [
    "grpc-status",
    "grpc-message",
    "grpc-status-details-bin",
    "x-trace-id",
    "x-span-id",
];

/// The CORS layer for `origins` (already validated by the config); `None` when empty.
pub fn cors_layer(origins: &[String]) -> anyhow::Result<Option<CorsLayer>> {
    if origins.is_empty() {
        return Ok(None);
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        let values = origins
            .iter()
            .map(|o| HeaderValue::from_str(o))
            .collect::<Result<Vec<_>, _>>()?;
        AllowOrigin::list(values)
    };
    let names = |list: &[&'static str]| {
        list.iter()
            .map(|h| HeaderName::from_static(h))
            .collect::<Vec<_>>()
    };
    Ok(Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::POST, Method::GET, Method::OPTIONS])
            .allow_headers(names(&ALLOWED))
            .expose_headers(names(&EXPOSED))
            .max_age(Duration::from_secs(24 * 60 * 60)),
    ))
}
