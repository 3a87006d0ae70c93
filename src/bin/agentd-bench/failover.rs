//! A Redis failover under load, measured: 16 writers put one-task lists on fresh threads as fast
//! as agentd acknowledges them (each write a record of its own, so a lost one shows), the master
//! is killed, Sentinel promotes a replica, agentd follows it, and the writers go on. Then every
//! acknowledged write is read back: the ones missing are what the failover lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use agentd::pb;
use agentd::pb::task_service_client::TaskServiceClient;
use anyhow::Context;
use futures::StreamExt;

use crate::procs::Procs;

/// Writers at once.
const WRITERS: usize = 16;

/// What one failover did.
pub struct Outcome {
    /// Writes acknowledged per second before the kill.
    pub acked_per_sec: f64,
    /// Acknowledged writes missing afterwards.
    pub lost: u64,
    /// Writes acknowledged in all.
    pub acked: u64,
    /// The longest time no writer had a write acknowledged, in seconds (the switch as clients
    /// see it).
    pub gap_secs: f64,
}

/// Writes for `before`, kills the master, waits for the promotion, writes for `after`, then
/// counts what is lost.
pub async fn round(
    procs: &mut Procs,
    tag: &str,
    before: Duration,
    after: Duration,
) -> anyhow::Result<Outcome> {
    let channel = procs.connect().await?;
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let mut client = TaskServiceClient::new(channel.clone());
            let (stop, prefix) = (stop.clone(), format!("{tag}-w{w}"));
            tokio::spawn(async move {
                let mut acked = Vec::new();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let written = client.write(write(&prefix, n)).await;
                    if written.is_ok_and(|reply| !reply.get_ref().is_error) {
                        acked.push((n, Instant::now()));
                    }
                }
                (prefix, acked)
            })
        })
        .collect();
    let started = Instant::now();
    tokio::time::sleep(before).await;
    let redis = procs
        .redis
        .as_mut()
        .context("failover needs a Sentinel store")?;
    let killed = Instant::now();
    redis.kill_master()?;
    redis.wait_promoted().await?;
    tokio::time::sleep(after).await;
    stop.store(true, Ordering::Relaxed);
    let mut done = Vec::new();
    for writer in writers {
        done.push(writer.await?);
    }

    let mut times: Vec<Instant> = done
        .iter()
        .flat_map(|(_, acked)| acked.iter().map(|(_, at)| *at))
        .collect();
    times.sort();
    let before_kill = times.iter().filter(|at| **at < killed).count();
    let gap_secs = times
        .windows(2)
        .map(|pair| pair[1].duration_since(pair[0]).as_secs_f64())
        .fold(0.0, f64::max);
    let mut lost = 0;
    let client = TaskServiceClient::new(procs.connect().await?);
    for (prefix, acked) in &done {
        let checks = acked.iter().map(|(n, _)| {
            let mut client = client.clone();
            let request = pb::CheckRequest {
                thread_id: format!("{prefix}-{n}"),
                resource_id: "bench".into(),
            };
            async move {
                client
                    .check(request)
                    .await
                    .map(|r| r.into_inner().tasks.is_empty())
            }
        });
        let missing: Vec<_> = futures::stream::iter(checks)
            .buffer_unordered(16)
            .collect()
            .await;
        for gone in missing {
            lost += u64::from(gone?);
        }
    }
    Ok(Outcome {
        acked_per_sec: before_kill as f64 / killed.duration_since(started).as_secs_f64(),
        lost,
        acked: times.len() as u64,
        gap_secs,
    })
}

/// Writer `prefix`'s `n`-th write: one task on a thread of its own.
fn write(prefix: &str, n: u64) -> pb::WriteRequest {
    pb::WriteRequest {
        thread_id: format!("{prefix}-{n}"),
        resource_id: "bench".into(),
        tasks: vec![pb::TaskInput {
            id: Some("t".into()),
            content: format!("Write {n}"),
            status: pb::TaskStatus::Pending.into(),
            active_form: "Writing".into(),
        }],
    }
}
