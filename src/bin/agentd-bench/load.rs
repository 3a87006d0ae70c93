//! The workloads, driven over gRPC from this process: planning runs one at a time and 16 at
//! once, the TaskService mix next to a bare unary call, idle streams, and Redis memory per run.

use std::time::{Duration, Instant};

use agentd::pb;
use agentd::pb::agent_service_client::AgentServiceClient;
use agentd::pb::task_service_client::TaskServiceClient;
use anyhow::{Context, ensure};
use futures::{StreamExt, TryStreamExt};
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

use crate::procs::{MachineCpu, Procs, per_call};
use crate::report::{median, quantile};

/// Workers per HTTP/2 connection: a load generator's usual pooling.
const WORKERS_PER_CONNECTION: usize = 16;
/// Idle streams per HTTP/2 connection (servers cap concurrent streams per connection).
const STREAMS_PER_CONNECTION: usize = 100;
/// Idle streams opened at once while setting up.
const OPENING_AT_ONCE: usize = 256;

/// The workload's run: step 1 calls `task_write` with the prompt's items, step 2 answers;
/// memory on, a fresh thread per run.
fn planning_run(thread: String) -> pb::GenerateRequest {
    pb::GenerateRequest {
        agent_id: "planner".into(),
        prompt: "Write the plan, Review it".into(),
        memory: Some(pb::MemoryOptions {
            thread: Some(pb::ThreadRef {
                id: thread,
                ..Default::default()
            }),
            resource: "bench".into(),
            options: None,
        }),
        ..Default::default()
    }
}

/// One planning run, checked: it must end `stop` after two steps.
async fn run_once(client: &mut AgentServiceClient<Channel>, thread: String) -> anyhow::Result<()> {
    let mut stream = client.generate(planning_run(thread)).await?.into_inner();
    let mut finish = None;
    while let Some(chunk) = stream.message().await? {
        if let Some(pb::chunk::Payload::Finish(result)) = chunk.payload {
            finish = Some(result);
        }
    }
    let result = finish.context("the run sent no finish chunk")?;
    ensure!(
        result.finish_reason() == pb::FinishReason::Stop && result.steps.len() == 2,
        "unexpected run: {:?} after {} steps ({:?})",
        result.finish_reason(),
        result.steps.len(),
        result.error
    );
    Ok(())
}

/// Connections for `workers` workers.
async fn channels(procs: &Procs, workers: usize, per: usize) -> anyhow::Result<Vec<Channel>> {
    let mut channels = Vec::new();
    for _ in 0..workers.div_ceil(per) {
        channels.push(procs.connect().await?);
    }
    Ok(channels)
}

/// Runs `work` on `workers` callers at once, worker `w` on its share of `channels` with a tag
/// of its own (`<tag>-w<w>`), and sums what they return.
async fn on_workers<F, Fut>(
    channels: &[Channel],
    tag: &str,
    workers: usize,
    work: F,
) -> anyhow::Result<u64>
where
    F: Fn(usize, Channel, String) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<u64>> + Send + 'static,
{
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let channel = channels[w / WORKERS_PER_CONNECTION].clone();
            tokio::spawn(work(w, channel, format!("{tag}-w{w}")))
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await??;
    }
    Ok(total)
}

/// Latencies of `runs` runs one at a time, in milliseconds.
pub async fn sequential_runs(procs: &Procs, tag: &str, runs: usize) -> anyhow::Result<Vec<f64>> {
    let mut client = AgentServiceClient::new(procs.connect().await?);
    let mut latencies = Vec::with_capacity(runs);
    for i in 0..runs {
        let started = Instant::now();
        run_once(&mut client, format!("{tag}-{i}")).await?;
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(latencies)
}

/// Median, p90 and p99 of latencies.
pub fn latency_summary(mut latencies: Vec<f64>) -> [f64; 3] {
    [
        median(&mut latencies),
        quantile(&mut latencies, 0.9),
        quantile(&mut latencies, 0.99),
    ]
}

/// What a timed burst of calls did.
#[derive(Clone, Copy, Debug)]
pub struct Burst {
    /// Runs, or calls, completed.
    pub count: u64,
    /// How long it took, in seconds.
    pub seconds: f64,
}

impl Burst {
    /// Completed per second.
    pub fn rate(&self) -> f64 {
        self.count as f64 / self.seconds
    }
}

/// Runs per second with `workers` runs in flight for `time`, and agentd's CPU time per run
/// (milliseconds).
pub async fn concurrent_runs(
    procs: &Procs,
    tag: &str,
    workers: usize,
    time: Duration,
) -> anyhow::Result<(f64, f64)> {
    let cpu = procs.agentd_cpu()?;
    let burst = run_burst(procs, tag, workers, time).await?;
    let cpu = procs.agentd_cpu_per(cpu, burst.count)?;
    Ok((burst.rate(), cpu.as_secs_f64() * 1000.0))
}

/// Runs with `workers` runs in flight for `time`.
pub async fn run_burst(
    procs: &Procs,
    tag: &str,
    workers: usize,
    time: Duration,
) -> anyhow::Result<Burst> {
    let channels = channels(procs, workers, WORKERS_PER_CONNECTION).await?;
    let started = Instant::now();
    let deadline = started + time;
    let count = on_workers(&channels, tag, workers, |_, channel, tag| async move {
        let mut client = AgentServiceClient::new(channel);
        let mut done = 0u64;
        while Instant::now() < deadline {
            run_once(&mut client, format!("{tag}-{done}")).await?;
            done += 1;
        }
        Ok(done)
    })
    .await?;
    Ok(Burst {
        count,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// What a tasks-mode worker calls.
#[derive(Clone, Copy, Debug)]
pub enum Unary {
    /// The TaskService mix: Write (3 tasks), Update, Complete, Check on a fresh thread.
    TaskMix,
    /// A bare unary RPC on the same server: the health Check.
    HealthCheck,
}

/// What [`unary_ops`] measured.
pub struct UnaryFigures {
    /// Calls per second.
    pub rate: f64,
    /// agentd's CPU time per call, in microseconds.
    pub agentd_cpu_us: f64,
    /// The share of the machine's CPU time left idle meanwhile, in percent.
    pub machine_idle: f64,
    /// The machine's CPU time per call (every process: agentd, the load generator, the store),
    /// in microseconds.
    pub machine_cpu_us: f64,
}

/// Operations per second of `what` with `workers` callers for `time`, what agentd and the whole
/// machine spent per call and how much of the machine stayed idle.
pub async fn unary_ops(
    procs: &Procs,
    tag: &str,
    what: Unary,
    workers: usize,
    time: Duration,
) -> anyhow::Result<UnaryFigures> {
    let cpu = procs.agentd_cpu()?;
    let machine = MachineCpu::now()?;
    let burst = unary_burst(procs, tag, what, workers, time).await?;
    let machine = machine.since()?;
    let cpu = procs.agentd_cpu_per(cpu, burst.count)?;
    Ok(UnaryFigures {
        rate: burst.rate(),
        agentd_cpu_us: cpu.as_secs_f64() * 1e6,
        machine_idle: machine.idle_percent,
        machine_cpu_us: per_call(machine.busy, burst.count).as_secs_f64() * 1e6,
    })
}

/// Calls of `what` with `workers` callers for `time`.
pub async fn unary_burst(
    procs: &Procs,
    tag: &str,
    what: Unary,
    workers: usize,
    time: Duration,
) -> anyhow::Result<Burst> {
    let channels = channels(procs, workers, WORKERS_PER_CONNECTION).await?;
    let started = Instant::now();
    let deadline = started + time;
    let count = on_workers(&channels, tag, workers, |_, channel, tag| async move {
        let mut tasks = TaskServiceClient::new(channel.clone());
        let mut health = HealthClient::new(channel);
        let mut ops = 0u64;
        let mut i = 0u64;
        while Instant::now() < deadline {
            match what {
                Unary::TaskMix => {
                    task_mix(&mut tasks, format!("{tag}-{i}")).await?;
                    ops += 4;
                }
                Unary::HealthCheck => {
                    health.check(HealthCheckRequest::default()).await?;
                    ops += 1;
                }
            }
            i += 1;
        }
        Ok(ops)
    })
    .await?;
    Ok(Burst {
        count,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Write three tasks, rename one, complete another, check the list: four calls.
async fn task_mix(client: &mut TaskServiceClient<Channel>, thread: String) -> anyhow::Result<()> {
    let task = |id: &str, content: &str, status: pb::TaskStatus| pb::TaskInput {
        id: Some(id.into()),
        content: content.into(),
        status: status as i32,
        active_form: format!("Doing {content}"),
    };
    let resource = "bench".to_owned();
    client
        .write(pb::WriteRequest {
            thread_id: thread.clone(),
            resource_id: resource.clone(),
            tasks: vec![
                task("a", "Write the plan", pb::TaskStatus::InProgress),
                task("b", "Review it", pb::TaskStatus::Pending),
                task("c", "Ship it", pb::TaskStatus::Pending),
            ],
        })
        .await?;
    client
        .update(pb::UpdateRequest {
            thread_id: thread.clone(),
            resource_id: resource.clone(),
            id: "b".into(),
            content: Some("Review it twice".into()),
            ..Default::default()
        })
        .await?;
    client
        .complete(pb::CompleteRequest {
            thread_id: thread.clone(),
            resource_id: resource.clone(),
            id: "a".into(),
        })
        .await?;
    let check = client
        .check(pb::CheckRequest {
            thread_id: thread,
            resource_id: resource,
        })
        .await?
        .into_inner();
    ensure!(
        check.summary.is_some_and(|s| s.completed == 1),
        "unexpected task list: {}",
        check.content
    );
    Ok(())
}

/// agentd's memory around `streams` Generate streams of `agent` waiting on a silent model:
/// (RSS before, with them open, after they closed), in bytes.
pub async fn idle_streams(
    procs: &Procs,
    tag: &str,
    agent: &str,
    streams: usize,
) -> anyhow::Result<[u64; 3]> {
    let channels = channels(procs, streams, STREAMS_PER_CONNECTION).await?;
    let before = procs.agentd_rss()?;
    let open: Vec<_> = futures::stream::iter(0..streams)
        .map(|i| {
            let mut client = AgentServiceClient::new(channels[i / STREAMS_PER_CONNECTION].clone());
            let mut request = planning_run(format!("{tag}-{i}"));
            request.agent_id = agent.into();
            async move {
                let mut stream = client.generate(request).await?.into_inner();
                // The start chunk: the run is under way and waits on the model.
                stream
                    .message()
                    .await?
                    .context("an idle stream ended before its first chunk")?;
                anyhow::Ok(stream)
            }
        })
        .buffer_unordered(OPENING_AT_ONCE)
        .try_collect()
        .await?;
    // Every run reaches its model call; then memory is what idle streams hold.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let with = procs.agentd_rss()?;
    drop(open);
    drop(channels);
    // The runs abort (the default on a client's disconnect); let the server settle.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = procs.agentd_rss()?;
    Ok([before, with, after])
}

/// Redis memory per finished run: `runs` planning runs at 16 at once, `used_memory` and key
/// counts before and after (nothing expires within the default retention). (bytes, keys).
pub async fn redis_memory_per_run(
    procs: &Procs,
    tag: &str,
    runs: usize,
) -> anyhow::Result<(f64, f64)> {
    let url = procs
        .redis
        .as_ref()
        .map(|redis| redis.url.as_str())
        .context("redis-memory needs the Redis store")?;
    let mut redis = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let keys_before: u64 = redis::cmd("DBSIZE").query_async(&mut redis).await?;
    let before = used_memory(&mut redis).await?;
    let workers = 16;
    let channels = channels(procs, workers, WORKERS_PER_CONNECTION).await?;
    on_workers(&channels, tag, workers, |w, channel, tag| async move {
        let mut client = AgentServiceClient::new(channel);
        let share = runs / workers + usize::from(w < runs % workers);
        for i in 0..share {
            run_once(&mut client, format!("{tag}-{i}")).await?;
        }
        Ok(0)
    })
    .await?;
    // Run records and logs are written as runs end; give the last ones a moment.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = used_memory(&mut redis).await?;
    let keys_after: u64 = redis::cmd("DBSIZE").query_async(&mut redis).await?;
    Ok((
        (after - before) / runs as f64,
        (keys_after.saturating_sub(keys_before)) as f64 / runs as f64,
    ))
}

/// Redis's `used_memory`, from `INFO memory`.
async fn used_memory(redis: &mut redis::aio::MultiplexedConnection) -> anyhow::Result<f64> {
    let info: String = redis::cmd("INFO").arg("memory").query_async(redis).await?;
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .context("no used_memory in INFO memory")
}
