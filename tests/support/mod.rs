//! Shared helpers of the integration tests: in-process servers on 127.0.0.1:0, clients, and a
//! private redis-server per test.

#![allow(dead_code)]

pub mod redis;

use std::path::Path;
use std::time::Duration;

use agentd::config::Config;
use agentd::pb::task_service_client::TaskServiceClient;
use agentd::server::{self, RunningServer};
use tonic::transport::Channel;

/// A config for tests: loopback on a free port, fast health probes, short drain.
pub fn test_config(store_url: &str, data_dir: &Path) -> Config {
    let mut config = Config::default();
    config.server.listen = "127.0.0.1:0".parse().expect("loopback address");
    config.server.health_interval_ms = 100;
    config.server.shutdown_grace_secs = 5;
    config.store.url = store_url.to_owned();
    config.store.data_dir = data_dir.to_owned();
    config
}

/// Starts a server with `config`.
pub async fn start(config: Config) -> RunningServer {
    server::start(config).await.expect("server starts")
}

/// Starts a server on the embedded store in `dir`.
pub async fn start_embedded(dir: &Path) -> RunningServer {
    start(test_config("embedded", dir)).await
}

/// Starts a server on Redis at `url`.
pub async fn start_redis(url: &str) -> RunningServer {
    let dir = std::env::temp_dir();
    start(test_config(url, &dir)).await
}

/// A channel to a running server.
pub async fn channel(server: &RunningServer) -> Channel {
    Channel::from_shared(format!("http://{}", server.addr))
        .expect("valid uri")
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .expect("connect to the test server")
}

/// A TaskService client for a running server.
pub async fn tasks_client(server: &RunningServer) -> TaskServiceClient<Channel> {
    TaskServiceClient::new(channel(server).await)
}

/// Polls `probe` every 50 ms until it returns true or `within` passes.
pub async fn eventually<F, Fut>(within: Duration, mut probe: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if probe().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A unique id for test threads and resources.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}
