//! agentd through Sentinel: the master is killed under load and Sentinel promotes its replica.
//! agentd follows without a restart: calls during the switch fail fast with UNAVAILABLE, the
//! ones after succeed. The master dies inside a replication loss window (its replica stalled),
//! which shows what `store.wait_replicas` is for: without it, writes acknowledged in the window
//! are lost with the master; with it, none acknowledged is.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use agentd::store::redis::{RedisOptions, RedisStore};
use agentd::store::{Store, StoreError, ThreadKey};
use bytes::Bytes;
use support::redis::{RedisServer, SentinelSet};
use support::writers;

/// Writers (each its own thread).
const WRITERS: usize = 8;
/// Longest a call may take to fail while the master is gone.
const FAIL_FAST: Duration = Duration::from_secs(3);
/// How long the master acknowledges writes its replica does not get before it dies.
const LOSS_WINDOW: Duration = Duration::from_millis(250);

/// What the writers did across a failover, and which acknowledged writes are gone after it.
struct Outcome {
    writers: Vec<writers::Writer>,
    lost: Vec<Vec<usize>>,
    /// When agentd could write again (the new master had what writes need).
    recovered: Instant,
}

/// Writers on one agentd through Sentinel; the master dies inside a loss window.
async fn writes_across_a_failover(wait_replicas: u32) -> Outcome {
    let set = tokio::task::spawn_blocking(SentinelSet::start)
        .await
        .expect("sentinel set");
    let dir = tempfile::tempdir().expect("dir");
    let mut config = support::test_config(&set.url(), dir.path());
    config.store.wait_replicas = wait_replicas;
    config.store.wait_timeout_ms = 500;
    let server = support::start(config).await;
    let resource = support::unique("r");
    let prefixes: Vec<String> = (0..WRITERS).map(|_| support::unique("w")).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let client = support::tasks_client(&server).await;
    let handles = writers::spawn(
        vec![client.clone()],
        prefixes,
        resource.clone(),
        stop.clone(),
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    let set = tokio::task::spawn_blocking(move || {
        let mut set = set;
        set.kill_master_while_replica_lags(LOSS_WINDOW);
        // Waited writes need a replica again: Sentinel makes the old master one when it is back.
        if wait_replicas > 0 {
            set.restart_old_master_as_replica();
        }
        set
    })
    .await
    .expect("failover");
    let recovered = Instant::now();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut done = Vec::new();
    for handle in handles {
        done.push(handle.await.expect("writer"));
    }
    writers::assert_failures_fast_and_unavailable(&done, FAIL_FAST);
    for writer in &done {
        // No restart: writes were acknowledged again after the switch.
        let last = writer.last_ack.expect("acknowledged writes");
        assert!(
            last > recovered,
            "{}: nothing acknowledged after the failover",
            writer.prefix
        );
    }
    let lost = writers::lost(&client, &resource, &done).await;
    server.stop().await.expect("stop");
    drop(set);
    Outcome {
        writers: done,
        lost,
        recovered,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_wait_replicas_writes_acknowledged_in_the_loss_window_are_lost() {
    let outcome = writes_across_a_failover(0).await;
    let lost: usize = outcome.lost.iter().map(Vec::len).sum();
    // Replication is asynchronous: an acknowledged write can die with the master. That is the
    // window README's "What an acknowledged write means" describes.
    assert!(
        lost > 0,
        "the loss window lost nothing: the test did not open one"
    );
    assert!(outcome.recovered.elapsed() > Duration::ZERO);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_wait_replicas_no_acknowledged_write_is_lost_in_a_failover() {
    let outcome = writes_across_a_failover(1).await;
    for (writer, lost) in outcome.writers.iter().zip(&outcome.lost) {
        assert!(
            lost.is_empty(),
            "{}: acknowledged writes lost: {lost:?}",
            writer.prefix
        );
    }
    // The window's writes were refused (UNAVAILABLE), not acknowledged and lost.
    assert!(outcome.writers.iter().any(|w| !w.failures.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_no_replica_confirms_is_not_acknowledged() {
    let master = RedisServer::start();
    let options = RedisOptions {
        wait_replicas: 1,
        wait_timeout: Duration::from_millis(100),
        ..RedisOptions::default()
    };
    let store = RedisStore::connect_with(&master.url(), options)
        .await
        .expect("connect");
    let key = ThreadKey {
        thread_id: "t".into(),
        resource_id: "r".into(),
    };
    let started = Instant::now();
    match store.cas_doc(&key, "tasks", 0, Bytes::from("v1")).await {
        Err(StoreError::Unavailable(message)) => {
            assert!(message.contains("0 of 1 replicas"), "{message}")
        }
        other => panic!("expected UNAVAILABLE, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(1));
    // Reads do not wait (the unconfirmed write is on the master: WAIT cannot undo it).
    assert!(store.get_doc(&key, "tasks").await.expect("read").is_some());

    // With a replica attached, the same store's writes are acknowledged.
    let port = master.port().to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    assert!(
        support::eventually(Duration::from_secs(10), || async {
            master
                .cli(&["info", "replication"])
                .contains("state=online")
        })
        .await
    );
    let current = store.get_doc(&key, "tasks").await.expect("read");
    let version = current.map_or(0, |doc| doc.version);
    store
        .cas_doc(&key, "tasks", version, Bytes::from("v2"))
        .await
        .expect("a confirmed write");
    assert_eq!(
        replica
            .cli(&["hget", "agentd:{t:t}:doc:tasks", "value"])
            .trim(),
        "v2"
    );
}
