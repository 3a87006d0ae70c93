//! What a hook costs: the 2-step planning run one at a time on `Generate`, on
//! `GenerateWithHooks` without hooks (the bidirectional stream's own cost), and with a no-op
//! `prepare_step` hook answered by the client on every step (two hook round trips per run),
//! interleaved in rounds over loopback gRPC. The per-hook figure compares the last two.
//!
//! `cargo bench --bench hooks` (embedded store; `AGENTD_BENCH_STORE=redis` for Redis). Prints
//! figures; asserts nothing about speed.

mod common;

use std::time::Instant;

use agentd::pb;
use agentd::pb::agent_service_client::AgentServiceClient;
use agentd::pb::chunk::Payload;
use agentd::pb::generate_with_hooks_request::Message;
use agentd::pb::hooked_run_event::Event;
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

const ROUNDS: usize = 5;
// `cargo test --all-targets` runs this debug build once as a smoke test: a few runs only.
const RUNS_PER_ROUND: usize = common::scaled(200);
const WARMUP_RUNS: usize = common::scaled(100);
const HOOKS_PER_RUN: f64 = 2.0;

/// Bytes of every hook call received (to report the average size).
static CONTEXT_BYTES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn main() -> anyhow::Result<()> {
    common::block_on(bench())
}

async fn bench() -> anyhow::Result<()> {
    let bench = common::start().await?;
    let client = AgentServiceClient::new(bench.channel.clone());
    println!(
        "agentd hook benchmark: 2-step run, a no-op prepare_step hook per step, store = {}",
        bench.store_url
    );
    for i in 0..WARMUP_RUNS {
        let thread = format!("warm-{}", i % 8);
        common::generate(client.clone(), &thread).await?;
        hooked(client.clone(), &thread, false).await?;
        hooked(client.clone(), &thread, true).await?;
    }
    let mut overheads = Vec::new();
    for round in 0..ROUNDS {
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..RUNS_PER_ROUND {
            let thread = format!("r{round}-{}", i % 8);
            let started = Instant::now();
            common::generate(client.clone(), &thread).await?;
            a.push(started.elapsed());
            let started = Instant::now();
            hooked(client.clone(), &thread, false).await?;
            b.push(started.elapsed());
            let started = Instant::now();
            hooked(client.clone(), &thread, true).await?;
            c.push(started.elapsed());
        }
        let median = |v: &mut Vec<_>| {
            v.sort();
            common::ms(common::quantile(v, 0.5))
        };
        let (pa, pb, pc) = (median(&mut a), median(&mut b), median(&mut c));
        let per_hook = (pc - pb) / HOOKS_PER_RUN;
        let bytes = CONTEXT_BYTES.swap(0, std::sync::atomic::Ordering::Relaxed);
        println!(
            "round {}: median Generate {pa:.3} ms, GenerateWithHooks without hooks {pb:.3} ms, \
             with a hook per step {pc:.3} ms: {per_hook:.3} ms per hook round trip \
             (calls of {} bytes on average)",
            round + 1,
            bytes / (RUNS_PER_ROUND * 2),
        );
        overheads.push(per_hook);
    }
    // A hook with a small context (before_tool_call: one call's arguments, once per run)
    // against the same stream without hooks: how much of a round trip the context is.
    let (mut bare, mut small) = (Vec::new(), Vec::new());
    CONTEXT_BYTES.store(0, std::sync::atomic::Ordering::Relaxed);
    for i in 0..RUNS_PER_ROUND * 2 {
        let thread = format!("small-{}", i % 8);
        let started = Instant::now();
        hooked_with(client.clone(), &thread, &[], false).await?;
        bare.push(started.elapsed());
        let started = Instant::now();
        hooked_with(
            client.clone(),
            &thread,
            &[pb::HookKind::BeforeToolCall],
            false,
        )
        .await?;
        small.push(started.elapsed());
    }
    let small_bytes = CONTEXT_BYTES.swap(0, std::sync::atomic::Ordering::Relaxed);
    // The same prepare_step hook with `omit_messages`: the context without the conversation.
    let mut lean = Vec::new();
    for i in 0..RUNS_PER_ROUND * 2 {
        let started = Instant::now();
        hooked_with(
            client.clone(),
            &format!("small-{}", i % 8),
            &[pb::HookKind::PrepareStep],
            true,
        )
        .await?;
        lean.push(started.elapsed());
    }
    lean.sort();
    let lean_bytes = CONTEXT_BYTES.swap(0, std::sync::atomic::Ordering::Relaxed);
    bare.sort();
    small.sort();
    println!(
        "a prepare_step hook with omit_messages (calls of {} bytes): {:.3} ms per round trip",
        lean_bytes / (RUNS_PER_ROUND * 4),
        (common::ms(common::quantile(&lean, 0.5)) - common::ms(common::quantile(&bare, 0.5)))
            / HOOKS_PER_RUN
    );
    println!(
        "a before_tool_call hook (calls of {} bytes, one per run): {:.3} ms per round trip",
        small_bytes / (RUNS_PER_ROUND * 2),
        common::ms(common::quantile(&small, 0.5)) - common::ms(common::quantile(&bare, 0.5))
    );
    // For scale: a bare unary round trip on the same connection (health Check).
    let mut health = tonic_health::pb::health_client::HealthClient::new(bench.channel.clone());
    let mut unary = Vec::new();
    for _ in 0..RUNS_PER_ROUND * 5 {
        let started = Instant::now();
        health
            .check(tonic_health::pb::HealthCheckRequest::default())
            .await?;
        unary.push(started.elapsed());
    }
    unary.sort();
    println!(
        "a unary health Check for scale: median {:.3} ms",
        common::ms(common::quantile(&unary, 0.5))
    );
    overheads.sort_by(f64::total_cmp);
    println!(
        "per hook round trip over {ROUNDS} rounds: min {:.3} ms, median {:.3} ms, max {:.3} ms",
        overheads[0],
        overheads[overheads.len() / 2],
        overheads[overheads.len() - 1]
    );
    bench.server.stop().await?;
    Ok(())
}

/// A run on GenerateWithHooks; with `hook`, a no-op prepare_step hook answers every step.
async fn hooked(
    client: AgentServiceClient<Channel>,
    thread: &str,
    hook: bool,
) -> anyhow::Result<()> {
    let kinds = if hook {
        &[pb::HookKind::PrepareStep][..]
    } else {
        &[]
    };
    let calls = hooked_with(client, thread, kinds, false).await?;
    let expected = if hook { 2 } else { 0 };
    anyhow::ensure!(
        calls == expected,
        "expected {expected} hook calls, got {calls}"
    );
    Ok(())
}

/// A run on GenerateWithHooks answering `kinds` with empty answers; returns the calls.
async fn hooked_with(
    mut client: AgentServiceClient<Channel>,
    thread: &str,
    kinds: &[pb::HookKind],
    omit_messages: bool,
) -> anyhow::Result<usize> {
    let (tx, rx) = mpsc::channel(8);
    tx.send(pb::GenerateWithHooksRequest {
        message: Some(Message::Start(pb::HookedGenerate {
            request: Some(common::planning_run(thread)),
            hooks: Some(pb::HookOptions {
                kinds: kinds.iter().map(|k| *k as i32).collect(),
                deadline_ms: Some(5000),
                on_failure: pb::HookFailurePolicy::Fail as i32,
                omit_messages,
            }),
        })),
    })
    .await?;
    let mut events = client
        .generate_with_hooks(ReceiverStream::new(rx))
        .await?
        .into_inner();
    let mut finish = None;
    let mut calls = 0;
    while let Some(event) = events.next().await {
        match event?.event {
            Some(Event::HookCall(call)) => {
                calls += 1;
                CONTEXT_BYTES.fetch_add(
                    prost::Message::encoded_len(&call),
                    std::sync::atomic::Ordering::Relaxed,
                );
                tx.send(pb::GenerateWithHooksRequest {
                    message: Some(Message::Answer(pb::HookAnswer {
                        id: call.id,
                        answer: None,
                    })),
                })
                .await?;
            }
            Some(Event::Chunk(chunk)) => {
                if let Some(Payload::Finish(result)) = chunk.payload {
                    finish = Some(result);
                }
            }
            _ => {}
        }
    }
    common::check(finish)?;
    Ok(calls)
}
