//! Throughput and latency of a 2-step agent run with memory and task tools against an instant
//! model (the in-process mock planner): step 1 calls task_write, step 2 answers.
//!
//! `cargo bench --bench runs` (embedded store) or `AGENTD_BENCH_STORE=redis cargo bench --bench runs`
//! (starts a private redis-server). Prints figures; asserts nothing about speed.

mod common;

use std::time::Instant;

use agentd::pb::agent_service_client::AgentServiceClient;

const CONCURRENCY: usize = 16;
// `cargo test --all-targets` runs this debug build once as a smoke test: a few runs only.
const SEQUENTIAL_RUNS: usize = common::scaled(400);
const CONCURRENT_RUNS: usize = common::scaled(4000);
const WARMUP_RUNS: usize = common::scaled(100);

fn main() -> anyhow::Result<()> {
    common::block_on(bench())
}

async fn bench() -> anyhow::Result<()> {
    let bench = common::start().await?;
    let store_url = bench.store_url.clone();
    let client = AgentServiceClient::new(bench.channel.clone());

    println!(
        "agentd run benchmark: 2-step run (task_write, then text) with memory, store = {store_url}"
    );
    for i in 0..WARMUP_RUNS {
        common::generate(client.clone(), &format!("warmup-{}", i % 8)).await?;
    }

    let mut latencies = Vec::with_capacity(SEQUENTIAL_RUNS);
    for i in 0..SEQUENTIAL_RUNS {
        let started = Instant::now();
        common::generate(client.clone(), &format!("seq-{}", i % 8)).await?;
        latencies.push(started.elapsed());
    }
    latencies.sort();
    let pick = |q: f64| common::quantile(&latencies, q);
    println!(
        "one at a time: {SEQUENTIAL_RUNS} runs, median {:.2} ms, p90 {:.2} ms, p99 {:.2} ms",
        common::ms(pick(0.5)),
        common::ms(pick(0.9)),
        common::ms(pick(0.99))
    );

    let started = Instant::now();
    let workers: Vec<_> = (0..CONCURRENCY)
        .map(|w| {
            let client = client.clone();
            tokio::spawn(async move {
                for i in 0..CONCURRENT_RUNS / CONCURRENCY {
                    common::generate(client.clone(), &format!("w{w}-{}", i % 8)).await?;
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
    bench.server.stop().await?;
    Ok(())
}
