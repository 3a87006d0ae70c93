//! The plain-HTTP side of agentd: the Prometheus scrape endpoint.

mod metrics;

pub use metrics::MetricsEndpoint;
