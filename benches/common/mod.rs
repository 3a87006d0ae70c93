//! What the benchmarks share: an instant model (the mock planner), an agentd on the embedded
//! store (or a private redis-server with `AGENTD_BENCH_STORE=redis`), and one planning run.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use agentd::config::Config;
use agentd::model::{MockOpenAi, planner_reply};
use agentd::pb;
use agentd::server::RunningServer;
use tonic::transport::Channel;

/// A benchmark's server and what it runs on.
pub struct Bench {
    /// The server.
    pub server: RunningServer,
    /// A channel to it.
    pub channel: Channel,
    /// The store URL.
    pub store_url: String,
    _mock: MockOpenAi,
    _dir: tempfile::TempDir,
    _redis: Option<Redis>,
}

/// Runs a benchmark on a multi-threaded runtime, as the server runs.
pub fn block_on<F: std::future::Future<Output = anyhow::Result<()>>>(
    bench: F,
) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(bench)
}

/// Starts the model and the server.
pub async fn start() -> anyhow::Result<Bench> {
    let mock = MockOpenAi::start().await?;
    mock.set_recording(false);
    mock.set_fallback(Arc::new(planner_reply));
    let dir = tempfile::tempdir()?;
    let redis = match std::env::var("AGENTD_BENCH_STORE").as_deref() {
        Ok("redis") => Some(start_redis()?),
        _ => None,
    };
    let store_url = redis
        .as_ref()
        .map_or_else(|| "embedded".to_owned(), Redis::url);
    let text = format!(
        r#"
[server]
listen = "127.0.0.1:0"
[store]
url = "{store_url}"
data_dir = "{}"
[log]
filter = "warn"
[[providers]]
name = "mock"
base_url = "{}"
max_retries = 0
[[agents]]
id = "planner"
instructions = "You plan work with the task tools."
model = "mock/planner"
tools = ["tasks"]
"#,
        dir.path().display(),
        mock.base_url()
    );
    let mut config = Config::from_toml(&text)?;
    // AGENTD_BENCH_WEB=off (gRPC only: no gRPC-web or JSON layer, no HTTP/1), =json or
    // =grpc-web (one of them), to measure what those layers cost gRPC calls.
    match std::env::var("AGENTD_BENCH_WEB").as_deref() {
        Ok("off") => (config.web.grpc_web, config.web.json) = (false, false),
        Ok("json") => config.web.grpc_web = false,
        Ok("grpc-web") => config.web.json = false,
        _ => {}
    }
    config.validate()?;
    let server = agentd::server::start(config).await?;
    let channel = Channel::from_shared(format!("http://{}", server.addr))?
        .connect()
        .await?;
    Ok(Bench {
        server,
        channel,
        store_url,
        _mock: mock,
        _dir: dir,
        _redis: redis,
    })
}

/// The benchmark's run on `thread`: step 1 calls task_write, step 2 answers.
pub fn planning_run(thread: &str) -> pb::GenerateRequest {
    pb::GenerateRequest {
        agent_id: "planner".into(),
        prompt: "Write the plan, Review it, Ship it".into(),
        memory: Some(pb::MemoryOptions {
            thread: Some(pb::ThreadRef {
                id: format!("bench-{thread}"),
                ..Default::default()
            }),
            resource: "bench".into(),
            options: None,
        }),
        ..Default::default()
    }
}

/// One `Generate` of the planning run on `thread`, checked with [`check`].
pub async fn generate(
    mut client: pb::agent_service_client::AgentServiceClient<Channel>,
    thread: &str,
) -> anyhow::Result<()> {
    use futures::StreamExt;
    let mut stream = client.generate(planning_run(thread)).await?.into_inner();
    let mut finish = None;
    while let Some(chunk) = stream.next().await {
        if let Some(pb::chunk::Payload::Finish(result)) = chunk?.payload {
            finish = Some(result);
        }
    }
    check(finish)
}

/// Fails unless the run ended with a two-step `stop`.
pub fn check(result: Option<pb::GenerateResult>) -> anyhow::Result<()> {
    let result = result.ok_or_else(|| anyhow::anyhow!("no finish chunk"))?;
    anyhow::ensure!(
        result.finish_reason() == pb::FinishReason::Stop && result.steps.len() == 2,
        "unexpected run: {:?} after {} steps ({:?})",
        result.finish_reason(),
        result.steps.len(),
        result.error
    );
    Ok(())
}

/// `n` in an optimized build; a twentieth of it (at least 16) in a debug build, which only
/// `cargo test --all-targets` makes, to check the benchmark still works.
pub const fn scaled(n: usize) -> usize {
    if cfg!(debug_assertions) {
        let small = n / 20;
        if small < 16 { 16 } else { small }
    } else {
        n
    }
}

/// Milliseconds of a duration.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The `q` quantile of sorted durations.
pub fn quantile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * q) as usize]
}

/// A private redis-server, killed when dropped.
pub struct Redis(Child, u16);

impl Redis {
    /// Its URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.1)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a redis-server on a free port, without persistence.
pub fn start_redis() -> anyhow::Result<Redis> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .spawn()?;
    std::thread::sleep(Duration::from_millis(300));
    Ok(Redis(child, port))
}
