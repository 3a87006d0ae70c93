//! agentd on a Redis Cluster while it changes under load: two replicas keep writing task lists
//! (each write a thread of its own, so they land in every slot) while `redis-cli --cluster
//! reshard` moves every slot of one master to another (keys migrate slot by slot, clients follow
//! MOVED and ASK). Nothing acknowledged may be lost, the listing must still list every thread,
//! and a Watch on a moving thread must either see its new value or end UNAVAILABLE (never go
//! silent).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agentd::pb;
use agentd::pb::thread_service_client::ThreadServiceClient;
use futures::StreamExt;
use support::redis::RedisCluster;
use support::writers;

/// Writers at once.
const WRITERS: usize = 16;
/// Slots of the first master of a fresh 3-master cluster (0..=5460).
const FIRST_MASTER_SLOTS: usize = 5461;

/// How long the thread listing may stay UNAVAILABLE after the move before the test fails.
const LISTING_SETTLES: Duration = Duration::from_secs(15);

/// A thread id whose keys live on the first master when `on_first` (else elsewhere).
fn thread_on(cluster: &RedisCluster, on_first: bool) -> String {
    loop {
        let id = support::unique("t");
        let slot: usize = cluster.nodes()[0]
            .cli(&["cluster", "keyslot", &format!("agentd:{{t:{id}}}:meta")])
            .trim()
            .parse()
            .expect("a slot number");
        if (slot < FIRST_MASTER_SLOTS) == on_first {
            return id;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_migration_under_load_loses_no_acknowledged_write() {
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start(3, 0))
        .await
        .expect("cluster");
    let a = support::start_redis(&cluster.url()).await;
    let b = support::start_redis(&cluster.url()).await;
    let resource = support::unique("r");
    let prefixes: Vec<String> = (0..WRITERS).map(|_| support::unique("w")).collect();
    // A watched thread on the master whose slots all move, written once the move is over.
    let watched = thread_on(&cluster, true);
    let mut watch = support::tasks_client(&b)
        .await
        .watch(pb::WatchRequest {
            thread_id: watched.clone(),
            resource_id: resource.clone(),
        })
        .await
        .expect("watch")
        .into_inner();
    watch.next().await.expect("first").expect("ok");

    let stop = Arc::new(AtomicBool::new(false));
    let clients = vec![
        support::tasks_client(&a).await,
        support::tasks_client(&b).await,
    ];
    let handles = writers::spawn(clients, prefixes, resource.clone(), stop.clone());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.reshard(0, 1, FIRST_MASTER_SLOTS);
        cluster
    })
    .await
    .expect("reshard");
    // Writes go on against the new layout for a while.
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut done = Vec::new();
    for handle in handles {
        done.push(handle.await.expect("writer"));
    }

    // Every slot and key left the first master.
    assert_eq!(cluster.nodes()[0].cli(&["dbsize"]).trim(), "0");
    let mut client = support::tasks_client(&a).await;
    writers::assert_nothing_lost(&client, &resource, &done, Duration::from_secs(3)).await;
    for writer in &done {
        assert!(
            writer.acked.len() >= 5,
            "{writer:?} made too little progress"
        );
    }

    // The watcher sees the moved thread's new value, or is told it may have missed it.
    client
        .write(pb::WriteRequest {
            thread_id: watched.clone(),
            resource_id: resource.clone(),
            tasks: vec![pb::TaskInput {
                id: None,
                content: "After the move".into(),
                status: pb::TaskStatus::Pending.into(),
                active_form: "Moving".into(),
            }],
        })
        .await
        .expect("write after the move");
    let seen = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(update) = watch.next().await {
            match update {
                Ok(update) if update.tasks.iter().any(|t| t.content == "After the move") => {
                    return Ok(());
                }
                Ok(_) => {}
                Err(status) => return Err(status.code()),
            }
        }
        Err(tonic::Code::Ok)
    })
    .await
    .expect("the watch neither saw the last value nor ended");
    assert!(
        matches!(seen, Ok(()) | Err(tonic::Code::Unavailable)),
        "{seen:?}"
    );

    // The listings (on the resource's slot, written apart from the threads) list every thread.
    let mut threads_client = ThreadServiceClient::new(support::channel(&b).await);
    let mut ids = Vec::new();
    let mut page_token = String::new();
    loop {
        let request = pb::ListThreadsRequest {
            resource_id: resource.clone(),
            page_size: 100,
            page_token,
            ..Default::default()
        };
        // While the cluster client refreshes its slot map after the move, a call may fail
        // UNAVAILABLE (retryable, as gRPC clients treat it): a bounded retry, as a client would.
        // A page reads each listed thread in its own slot, a hundred pipelines at once; under
        // load that has wedged redis-rs's cluster client for good, which the store notices and
        // replaces within about two call timeouts.
        let deadline = tokio::time::Instant::now() + LISTING_SETTLES;
        let page = loop {
            match threads_client.list_threads(request.clone()).await {
                Ok(page) => break page.into_inner(),
                Err(status)
                    if status.code() == tonic::Code::Unavailable
                        && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(status) => panic!("list: {status}"),
            }
        };
        ids.extend(page.threads.into_iter().map(|t| t.id));
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    let listed = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), listed, "a thread listed twice");
    let mut expected: Vec<String> = done
        .iter()
        .flat_map(|w| w.acked.iter().map(|&n| w.thread(n)))
        .chain([watched])
        .collect();
    expected.sort();
    // Unacknowledged writes may have landed too; every acknowledged one must be listed.
    for id in &expected {
        assert!(ids.binary_search(id).is_ok(), "{id} is not listed");
    }
    a.stop().await.expect("stop a");
    b.stop().await.expect("stop b");
}

/// The first master's slot of `key`, and a run id whose control channel is in such a slot.
fn run_on_first_master(cluster: &RedisCluster) -> (String, String) {
    loop {
        let id = support::unique("run");
        let slot = cluster.nodes()[0]
            .cli(&["cluster", "keyslot", &format!("agentd:{{r:{id}}}:control")])
            .trim()
            .to_owned();
        if slot.parse::<usize>().expect("a slot number") < FIRST_MASTER_SLOTS {
            return (id, slot);
        }
    }
}

/// The next item of a subscription, within a few seconds.
async fn next_item<T>(
    stream: &mut futures::stream::BoxStream<'static, agentd::store::StoreResult<T>>,
) -> Option<agentd::store::StoreResult<T>> {
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("the subscription went silent")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_subscription_whose_slot_moves_or_node_dies_ends_with_an_error() {
    use agentd::store::{Store, StoreError, redis::RedisStore};
    use bytes::Bytes;

    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start(3, 0))
        .await
        .expect("cluster");
    let store = RedisStore::connect(&cluster.url()).await.expect("connect");
    let (run, slot) = run_on_first_master(&cluster);
    // Subscribes to the run's control channel and sees a message published to it.
    let subscribed = |message: &'static str| {
        let (store, run) = (&store, &run);
        async move {
            let mut control = store.subscribe_control(run).await.expect("subscribe");
            store
                .publish_control(run, Bytes::from(message))
                .await
                .expect("publish");
            assert_eq!(next_item(&mut control).await.unwrap().unwrap(), message);
            control
        }
    };
    let mut control = subscribed("one").await;

    // The (empty) slot moves to the second master: the first drops its shard subscribers.
    let target = cluster.nodes()[1]
        .cli(&["cluster", "myid"])
        .trim()
        .to_owned();
    for node in [1, 0, 2] {
        let out = cluster.nodes()[node].cli(&["cluster", "setslot", &slot, "node", &target]);
        assert_eq!(out.trim(), "OK", "setslot on node {node}");
    }
    match next_item(&mut control).await {
        Some(Err(StoreError::Unavailable(why))) => assert!(why.contains("slot"), "{why}"),
        other => panic!("expected the subscription to end UNAVAILABLE, got {other:?}"),
    }
    assert!(
        next_item(&mut control).await.is_none(),
        "ended after the error"
    );

    // A new subscription follows the slot to its new node.
    let mut control = subscribed("two").await;

    // The node serving it dies: the subscriber is told, not left waiting.
    let mut cluster = cluster;
    cluster.stop_node(1);
    match next_item(&mut control).await {
        Some(Err(StoreError::Unavailable(_))) | None => {}
        other => panic!("expected the subscription to end UNAVAILABLE, got {other:?}"),
    }
}
