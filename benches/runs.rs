//! Throughput and latency of a 2-step agent run with memory and task tools against an instant
//! model (the in-process mock planner): step 1 calls task_write, step 2 answers.
//!
//! `cargo bench --bench runs` (embedded store) or `AGENTD_BENCH_STORE=redis cargo bench --bench runs`
//! (starts a private redis-server). Prints figures; asserts nothing about speed.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentd::config::Config;
use agentd::model::{MockOpenAi, planner_reply};
use agentd::pb;
use agentd::pb::agent_service_client::AgentServiceClient;
use agentd::pb::chunk::Payload;
use futures::StreamExt;
use tonic::transport::Channel;

const SEQUENTIAL_RUNS: usize = 400;
const CONCURRENT_RUNS: usize = 4000;
const CONCURRENCY: usize = 16;
const WARMUP_RUNS: usize = 100;

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(bench())
}

struct Redis(Child, u16);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_redis() -> anyhow::Result<Redis> {
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

async fn bench() -> anyhow::Result<()> {
    let mock = MockOpenAi::start().await?;
    mock.set_recording(false);
    mock.set_fallback(Arc::new(planner_reply));
    let dir = tempfile::tempdir()?;
    let redis = match std::env::var("AGENTD_BENCH_STORE").as_deref() {
        Ok("redis") => Some(start_redis()?),
        _ => None,
    };
    let store_url = redis.as_ref().map_or_else(
        || "embedded".to_owned(),
        |r| format!("redis://127.0.0.1:{}/0", r.1),
    );
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
    let config = Config::from_toml(&text)?;
    config.validate()?;
    let server = agentd::server::start(config).await?;
    let channel = Channel::from_shared(format!("http://{}", server.addr))?
        .connect()
        .await?;
    let client = AgentServiceClient::new(channel);

    println!(
        "agentd run benchmark: 2-step run (task_write, then text) with memory, store = {store_url}"
    );
    for i in 0..WARMUP_RUNS {
        one_run(client.clone(), &format!("warmup-{}", i % 8)).await?;
    }

    let mut latencies = Vec::with_capacity(SEQUENTIAL_RUNS);
    for i in 0..SEQUENTIAL_RUNS {
        let started = Instant::now();
        one_run(client.clone(), &format!("seq-{}", i % 8)).await?;
        latencies.push(started.elapsed());
    }
    latencies.sort();
    let pick = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q) as usize];
    println!(
        "one at a time: {SEQUENTIAL_RUNS} runs, median {:.2} ms, p90 {:.2} ms, p99 {:.2} ms",
        ms(pick(0.5)),
        ms(pick(0.9)),
        ms(pick(0.99))
    );

    let started = Instant::now();
    let workers: Vec<_> = (0..CONCURRENCY)
        .map(|w| {
            let client = client.clone();
            tokio::spawn(async move {
                for i in 0..CONCURRENT_RUNS / CONCURRENCY {
                    one_run(client.clone(), &format!("w{w}-{}", i % 8)).await?;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for worker in workers {
        worker.await??;
    }
    let elapsed = started.elapsed();
    println!(
        "{CONCURRENCY} concurrent: {CONCURRENT_RUNS} runs in {:.2} s = {:.0} runs/s",
        elapsed.as_secs_f64(),
        CONCURRENT_RUNS as f64 / elapsed.as_secs_f64()
    );
    server.stop().await?;
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One run on `thread`; fails unless it ends with a two-step `stop`.
async fn one_run(mut client: AgentServiceClient<Channel>, thread: &str) -> anyhow::Result<()> {
    let request = pb::GenerateRequest {
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
    };
    let mut stream = client.generate(request).await?.into_inner();
    let mut finish = None;
    while let Some(chunk) = stream.next().await {
        if let Some(Payload::Finish(result)) = chunk?.payload {
            finish = Some(result);
        }
    }
    let result = finish.ok_or_else(|| anyhow::anyhow!("no finish chunk"))?;
    anyhow::ensure!(
        result.finish_reason() == pb::FinishReason::Stop && result.steps.len() == 2,
        "unexpected run: {:?} after {} steps ({:?})",
        result.finish_reason(),
        result.steps.len(),
        result.error
    );
    Ok(())
}
