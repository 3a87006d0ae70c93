//! Task-list writers that keep writing while a test breaks the store (moves slots, kills a
//! master), and remember what was acknowledged, so the test can prove nothing acknowledged was
//! lost.
//!
//! Every write is a record of its own: writer `w`'s `n`-th write puts a one-task list on thread
//! `<w's prefix>-<n>`. (Rewriting one list would hide a loss: the next write repairs it.) Writers
//! send through the clients they are given in turn, so several replicas write alike.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use agentd::pb;
use agentd::pb::task_service_client::TaskServiceClient;
use futures::StreamExt;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

/// Pause between one writer's writes (keeps the load steady without flooding a debug build).
const PAUSE: Duration = Duration::from_millis(5);

/// What one writer did.
#[derive(Debug)]
pub struct Writer {
    /// The prefix of its threads' ids.
    pub prefix: String,
    /// The writes acknowledged.
    pub acked: Vec<usize>,
    /// Each failed write: its number, status code and how long it took to fail.
    pub failures: Vec<(usize, tonic::Code, Duration)>,
    /// When its last acknowledged write returned.
    pub last_ack: Option<Instant>,
}

impl Writer {
    /// The thread of write `n`.
    pub fn thread(&self, n: usize) -> String {
        format!("{}-{n}", self.prefix)
    }
}

/// Starts one writer per prefix until `stop` is set.
pub fn spawn(
    clients: Vec<TaskServiceClient<Channel>>,
    prefixes: Vec<String>,
    resource_id: String,
    stop: Arc<AtomicBool>,
) -> Vec<JoinHandle<Writer>> {
    prefixes
        .into_iter()
        .enumerate()
        .map(|(i, prefix)| {
            let clients = clients.clone();
            let (resource_id, stop) = (resource_id.clone(), stop.clone());
            tokio::spawn(async move {
                let mut writer = Writer {
                    prefix,
                    acked: Vec::new(),
                    failures: Vec::new(),
                    last_ack: None,
                };
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let mut client = clients[(i + n) % clients.len()].clone();
                    let started = Instant::now();
                    let written = client
                        .write(pb::WriteRequest {
                            thread_id: writer.thread(n),
                            resource_id: resource_id.clone(),
                            tasks: vec![task(n)],
                        })
                        .await;
                    match written {
                        Ok(reply) if !reply.get_ref().is_error => {
                            writer.acked.push(n);
                            writer.last_ack = Some(Instant::now());
                        }
                        Ok(reply) => panic!("write {n} refused: {}", reply.get_ref().content),
                        Err(status) => writer.failures.push((n, status.code(), started.elapsed())),
                    }
                    tokio::time::sleep(PAUSE).await;
                }
                writer
            })
        })
        .collect()
}

/// Task `i` of a list.
fn task(i: usize) -> pb::TaskInput {
    pb::TaskInput {
        id: Some(format!("t{i}")),
        content: format!("Task {i}"),
        status: pb::TaskStatus::Pending.into(),
        active_form: format!("Doing {i}"),
    }
}

/// The acknowledged writes whose record is gone, per writer (read through `client`).
pub async fn lost(
    client: &TaskServiceClient<Channel>,
    resource_id: &str,
    writers: &[Writer],
) -> Vec<Vec<usize>> {
    let mut lost = Vec::with_capacity(writers.len());
    for writer in writers {
        let checks = writer.acked.iter().map(|&n| {
            let mut client = client.clone();
            let request = pb::CheckRequest {
                thread_id: writer.thread(n),
                resource_id: resource_id.to_owned(),
            };
            async move {
                let list = client.check(request).await.expect("check").into_inner();
                match list.tasks.as_slice() {
                    [] => Some(n),
                    [only] if only.content == task(n).content => None,
                    other => panic!("write {n} holds {other:?}"),
                }
            }
        });
        let gone: Vec<usize> = futures::stream::iter(checks)
            .buffer_unordered(16)
            .filter_map(|gone| async move { gone })
            .collect()
            .await;
        lost.push(gone);
    }
    lost
}

/// Asserts that every failed write was an UNAVAILABLE that came back within `within`.
pub fn assert_failures_fast_and_unavailable(writers: &[Writer], within: Duration) {
    for writer in writers {
        for (n, code, took) in &writer.failures {
            assert_eq!(
                *code,
                tonic::Code::Unavailable,
                "{} write {n}",
                writer.prefix
            );
            assert!(
                *took < within,
                "{} write {n} took {took:?} to fail",
                writer.prefix
            );
        }
    }
}

/// Asserts that no acknowledged write was lost and every failure was a fast UNAVAILABLE.
pub async fn assert_nothing_lost(
    client: &TaskServiceClient<Channel>,
    resource_id: &str,
    writers: &[Writer],
    fail_within: Duration,
) {
    let lost = lost(client, resource_id, writers).await;
    for (writer, lost) in writers.iter().zip(lost) {
        assert!(
            lost.is_empty(),
            "{}: acknowledged writes lost: {lost:?}",
            writer.prefix
        );
    }
    assert_failures_fast_and_unavailable(writers, fail_within);
}
