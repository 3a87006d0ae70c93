//! The plain-HTTP side of agentd: the JSON mapping of every RPC and its OpenAPI document
//! (beside gRPC and gRPC-web on the gRPC port), CORS for browsers, and the Prometheus scrape
//! endpoint on its own port, and the web playground.

mod call;
mod cors;
mod frames;
mod gateway;
mod metrics;
mod openapi;
mod playground;
mod status;

pub use cors::cors_layer;
pub use gateway::{JSON_SERVICES, JsonGateway, JsonLayer, OPENAPI_PATH};
pub use metrics::MetricsEndpoint;
pub use playground::{Playground, PlaygroundLayer};
