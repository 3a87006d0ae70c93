//! One behaviour suite for every `Store` implementation: each case runs against the embedded
//! store, against a private `redis-server` and against a private 3-master Redis Cluster (Redis
//! must be installed: Redis cases fail, never skip, without it). A case gets a `Fixture` with
//! `store` and `peer`: for Redis two separate `RedisStore` instances on one server or cluster
//! (two replicas), for the embedded store the same one.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use tempfile::TempDir;

use agentd::store::{
    Cas, LogLimits, Store, StoreError, StoreResult, ThreadKey, Versioned, embedded::EmbeddedStore,
    redis::RedisStore,
};
use support::redis::{RedisCluster, RedisServer};

/// Longest wait for an expected notification.
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest any single call may take while Redis is down.
const OUTAGE_CALL_LIMIT: Duration = Duration::from_secs(3);

/// A store under test, a second client of the same data, and what keeps the backend alive.
struct Fixture {
    store: Arc<dyn Store>,
    peer: Arc<dyn Store>,
    // Declared last: dropped after the stores.
    _dir: Option<TempDir>,
    _redis: Option<RedisServer>,
    _cluster: Option<RedisCluster>,
}

impl Fixture {
    fn embedded() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
        Self {
            peer: store.clone(),
            store,
            _dir: Some(dir),
            _redis: None,
            _cluster: None,
        }
    }

    async fn redis() -> Self {
        let server = RedisServer::start();
        let store = RedisStore::connect(&server.url()).await.unwrap();
        let peer = RedisStore::connect(&server.url()).await.unwrap();
        Self {
            store: Arc::new(store),
            peer: Arc::new(peer),
            _dir: None,
            _redis: Some(server),
            _cluster: None,
        }
    }

    async fn redis_cluster() -> Self {
        let cluster = tokio::task::spawn_blocking(|| RedisCluster::start(3, 0))
            .await
            .unwrap();
        let store = RedisStore::connect(&cluster.url()).await.unwrap();
        let peer = RedisStore::connect(&cluster.url()).await.unwrap();
        Self {
            store: Arc::new(store),
            peer: Arc::new(peer),
            _dir: None,
            _redis: None,
            _cluster: Some(cluster),
        }
    }
}

/// Runs each listed case against every store (`on_embedded::case`, `on_redis::case`,
/// `on_redis_cluster::case`).
macro_rules! suite {
    ($($case:ident),* $(,)?) => {
        mod on_embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Fixture::embedded()).await;
                }
            )*
        }
        mod on_redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Fixture::redis().await).await;
                }
            )*
        }
        mod on_redis_cluster {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Fixture::redis_cluster().await).await;
                }
            )*
        }
    };
}

#[path = "store_suite/threads.rs"]
mod threads;

#[path = "store_suite/leases.rs"]
mod leases;

#[path = "store_suite/docs.rs"]
mod docs;

#[path = "store_suite/run_ends.rs"]
mod run_ends;

suite!(
    ping_answers,
    ownership_is_enforced_on_every_thread_method,
    absent_threads_read_as_empty,
    cas_semantics,
    concurrent_cas_retry_loops_lose_nothing,
    messages_and_load_thread,
    watch_receives_each_new_value,
    watch_is_scoped_to_the_owner,
    chunk_log_is_bounded_and_followed,
    a_sealed_chunk_log_reads_as_before,
    chunk_log_expires,
    run_cas_and_ttl,
    claim_key_first_wins_then_expires,
    control_messages_reach_subscribers,
    index_sets,
    binary_values_round_trip,
);

fn key(thread_id: &str, resource_id: &str) -> ThreadKey {
    ThreadKey {
        thread_id: thread_id.into(),
        resource_id: resource_id.into(),
    }
}

fn b(text: &str) -> Bytes {
    Bytes::copy_from_slice(text.as_bytes())
}

fn v(version: u64, text: &str) -> Versioned {
    Versioned {
        version,
        value: b(text),
    }
}

fn limits(max_chunks: usize, ttl: Duration) -> LogLimits {
    LogLimits { max_chunks, ttl }
}

/// The next stream item, failing the test if none arrives in time.
async fn next<T>(stream: &mut BoxStream<'static, StoreResult<T>>) -> T {
    tokio::time::timeout(NOTIFY_TIMEOUT, stream.next())
        .await
        .expect("no notification in time")
        .expect("stream ended")
        .expect("stream item is an error")
}

/// Asserts that nothing arrives for a short while.
async fn assert_quiet<T: std::fmt::Debug>(stream: &mut BoxStream<'static, StoreResult<T>>) {
    if let Ok(item) = tokio::time::timeout(Duration::from_millis(150), stream.next()).await {
        panic!("unexpected notification: {item:?}");
    }
}

#[track_caller]
fn assert_wrong_owner<T: std::fmt::Debug>(result: StoreResult<T>) {
    match result {
        Err(StoreError::WrongOwner { thread_id }) => assert_eq!(thread_id, "t1"),
        other => panic!("expected WrongOwner, got {other:?}"),
    }
}

async fn ping_answers(f: Fixture) {
    f.store.ping().await.unwrap();
    f.peer.ping().await.unwrap();
}

async fn ownership_is_enforced_on_every_thread_method(f: Fixture) {
    let (alice, bob) = (key("t1", "alice"), key("t1", "bob"));
    assert_eq!(
        f.store.cas_doc(&alice, "tasks", 0, b("v1")).await.unwrap(),
        Cas::Written(1)
    );
    let s = &f.peer;
    assert_wrong_owner(s.load_thread(&bob, 10, &["tasks"]).await);
    assert_wrong_owner(s.get_doc(&bob, "tasks").await);
    assert_wrong_owner(s.cas_doc(&bob, "tasks", 1, b("evil")).await);
    assert_wrong_owner(s.cas_doc(&bob, "other", 0, b("evil")).await);
    assert_wrong_owner(s.watch_doc(&bob, "tasks").await.map(|_| ()));
    assert_wrong_owner(
        s.append_messages(&bob, Some(b("{}")), vec![b("evil")])
            .await,
    );

    let view = f
        .store
        .load_thread(&alice, 10, &["tasks", "other"])
        .await
        .unwrap();
    assert!(view.exists);
    assert!(view.messages.is_empty(), "bob's message was stored");
    assert_eq!(view.docs, vec![Some(v(1, "v1")), None]);

    // A thread created by appending messages is owned the same way.
    let carol = key("t1-b", "carol");
    f.store
        .append_messages(&carol, None, vec![b("hi")])
        .await
        .unwrap();
    let intruder = key("t1-b", "alice");
    assert!(matches!(
        f.peer.get_doc(&intruder, "tasks").await,
        Err(StoreError::WrongOwner { .. })
    ));
    let view = f.store.load_thread(&carol, 10, &[]).await.unwrap();
    assert_eq!(view.messages, vec![b("hi")]);
}

async fn absent_threads_read_as_empty(f: Fixture) {
    let k = key("nobody", "r");
    let view = f
        .store
        .load_thread(&k, 5, &["tasks", "notes"])
        .await
        .unwrap();
    assert!(!view.exists);
    assert!(view.messages.is_empty());
    assert_eq!(view.docs, vec![None, None]);
    assert_eq!(f.store.get_doc(&k, "tasks").await.unwrap(), None);
}

async fn cas_semantics(f: Fixture) {
    let k = key("t", "r");
    let s = &f.store;
    assert_eq!(
        s.cas_doc(&k, "d", 1, b("x")).await.unwrap(),
        Cas::Conflict(None)
    );
    assert!(
        !s.load_thread(&k, 0, &[]).await.unwrap().exists,
        "a failed CAS created the thread"
    );
    assert_eq!(
        s.cas_doc(&k, "d", 0, b("a")).await.unwrap(),
        Cas::Written(1)
    );
    assert_eq!(
        s.cas_doc(&k, "d", 0, b("b")).await.unwrap(),
        Cas::Conflict(Some(v(1, "a")))
    );
    assert_eq!(
        s.cas_doc(&k, "d", 1, b("b")).await.unwrap(),
        Cas::Written(2)
    );
    assert_eq!(
        f.peer.cas_doc(&k, "d", 1, b("c")).await.unwrap(),
        Cas::Conflict(Some(v(2, "b")))
    );
    assert_eq!(
        s.cas_doc(&k, "d", 7, b("c")).await.unwrap(),
        Cas::Conflict(Some(v(2, "b")))
    );
    assert_eq!(s.get_doc(&k, "d").await.unwrap(), Some(v(2, "b")));
    // Documents of one thread version independently.
    assert_eq!(
        s.cas_doc(&k, "e", 0, b("z")).await.unwrap(),
        Cas::Written(1)
    );
}

async fn concurrent_cas_retry_loops_lose_nothing(f: Fixture) {
    let attempts = each_writer_adds_itself(&f, |store, k, i| async move {
        let mut current = store.get_doc(&k, "list").await.unwrap();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let (expected, mut items) = match &current {
                Some(doc) => (doc.version, serde_json::from_slice(&doc.value).unwrap()),
                None => (0, Vec::<serde_json::Value>::new()),
            };
            items.push(serde_json::json!(i));
            let value = Bytes::from(serde_json::to_vec(&items).unwrap());
            match store.cas_doc(&k, "list", expected, value).await.unwrap() {
                Cas::Written(_) => return attempts,
                Cas::Conflict(latest) => current = latest,
            }
        }
    })
    .await;
    let retries: usize = attempts.iter().map(|a| a - 1).sum();
    eprintln!("{WRITERS} writers needed {retries} retries");
}

/// Concurrent writers in [`each_writer_adds_itself`].
const WRITERS: usize = 64;

/// Runs [`WRITERS`] writers at once, alternating between the two clients (two replicas on
/// Redis), each adding its number to the JSON list in document "list" of one thread; checks
/// that the list holds every number once, at version [`WRITERS`]. Returns the writers' results.
async fn each_writer_adds_itself<T, F, Fut>(f: &Fixture, writer: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(Arc<dyn Store>, ThreadKey, usize) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
{
    let k = key("busy", "r");
    let tasks: Vec<_> = (0..WRITERS)
        .map(|i| {
            let store = if i % 2 == 0 { &f.store } else { &f.peer };
            tokio::spawn(writer(store.clone(), k.clone(), i))
        })
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    let doc = f.store.get_doc(&k, "list").await.unwrap().unwrap();
    let mut items: Vec<usize> = serde_json::from_slice(&doc.value).unwrap();
    items.sort_unstable();
    assert_eq!(items, (0..WRITERS).collect::<Vec<_>>());
    assert_eq!(doc.version, WRITERS as u64);
    results
}

async fn messages_and_load_thread(f: Fixture) {
    let k = key("chat", "r");
    let s = &f.store;
    let messages: Vec<Bytes> = (1..=5).map(|i| b(&format!("m{i}"))).collect();
    s.append_messages(&k, Some(b(r#"{"title":"hi"}"#)), messages[..3].to_vec())
        .await
        .unwrap();
    f.peer
        .append_messages(&k, None, messages[3..].to_vec())
        .await
        .unwrap();
    s.append_messages(&k, Some(b(r#"{"title":"renamed"}"#)), Vec::new())
        .await
        .unwrap();
    s.cas_doc(&k, "a", 0, b("A")).await.unwrap();
    s.cas_doc(&k, "b", 0, b("B")).await.unwrap();

    let view = s.load_thread(&k, 2, &["b", "missing", "a"]).await.unwrap();
    assert!(view.exists);
    assert_eq!(view.messages, messages[3..].to_vec());
    assert_eq!(view.docs, vec![Some(v(1, "B")), None, Some(v(1, "A"))]);

    let view = s.load_thread(&k, 0, &[]).await.unwrap();
    assert!(view.exists && view.messages.is_empty() && view.docs.is_empty());

    let view = s.load_thread(&k, usize::MAX, &["a"]).await.unwrap();
    assert_eq!(view.messages, messages);
}

async fn watch_receives_each_new_value(f: Fixture) {
    let k = key("w", "r");
    f.store.cas_doc(&k, "tasks", 0, b("before")).await.unwrap();
    let mut watch = f.store.watch_doc(&k, "tasks").await.unwrap();
    // Written through the other client (another replica on Redis).
    f.peer.cas_doc(&k, "tasks", 1, b("v2")).await.unwrap();
    f.peer.cas_doc(&k, "tasks", 2, b("v3")).await.unwrap();
    f.store.cas_doc(&k, "tasks", 3, b("v4")).await.unwrap();
    f.store
        .cas_doc(&k, "other", 0, b("elsewhere"))
        .await
        .unwrap();
    f.store
        .cas_doc(&k, "tasks", 1, b("rejected"))
        .await
        .unwrap();
    assert_eq!(next(&mut watch).await, v(2, "v2"));
    assert_eq!(next(&mut watch).await, v(3, "v3"));
    assert_eq!(next(&mut watch).await, v(4, "v4"));
    assert_quiet(&mut watch).await;
}

async fn watch_is_scoped_to_the_owner(f: Fixture) {
    // Bob watches a thread that does not exist yet; Alice then creates it.
    let mut watch = f.peer.watch_doc(&key("w2", "bob"), "tasks").await.unwrap();
    f.store
        .cas_doc(&key("w2", "alice"), "tasks", 0, b("secret"))
        .await
        .unwrap();
    assert_quiet(&mut watch).await;
}

async fn chunk_log_is_bounded_and_followed(f: Fixture) {
    let run = "run-1";
    let bounds = limits(3, Duration::from_secs(30));
    let mut follow = f.store.follow_chunks(run).await.unwrap();
    f.peer
        .append_chunks(run, vec![(1, b("a")), (2, b("b"))], bounds)
        .await
        .unwrap();
    f.peer
        .append_chunks(run, vec![(3, b("c")), (4, b("d"))], bounds)
        .await
        .unwrap();
    for (seq, text) in [(1, "a"), (2, "b"), (3, "c"), (4, "d")] {
        assert_eq!(next(&mut follow).await, (seq, b(text)));
    }
    let all = f.store.read_chunks(run, 0).await.unwrap();
    assert_eq!(all, vec![(2, b("b")), (3, b("c")), (4, b("d"))]);
    assert_eq!(
        f.store.read_chunks(run, 3).await.unwrap(),
        vec![(4, b("d"))]
    );
    assert!(f.store.read_chunks(run, 4).await.unwrap().is_empty());
    assert!(
        f.store
            .read_chunks("no-such-run", 0)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn a_sealed_chunk_log_reads_as_before(f: Fixture) {
    let run = "run-sealed";
    let bounds = limits(3, Duration::from_secs(30));
    let mut follow = f.store.follow_chunks(run).await.unwrap();
    f.peer
        .append_chunks(run, vec![(1, b("a")), (2, b("b"))], bounds)
        .await
        .unwrap();
    let whole = vec![(1, b("a")), (2, b("b")), (3, b("c")), (4, b("d"))];
    f.peer
        .seal_chunks(run, vec![(3, b("c")), (4, b("d"))], whole, bounds)
        .await
        .unwrap();
    // Followers see every chunk once; readers see the bounded log, as without sealing.
    for (seq, text) in [(1, "a"), (2, "b"), (3, "c"), (4, "d")] {
        assert_eq!(next(&mut follow).await, (seq, b(text)));
    }
    assert_eq!(
        f.store.read_chunks(run, 0).await.unwrap(),
        vec![(2, b("b")), (3, b("c")), (4, b("d"))]
    );
    assert_eq!(
        f.store.read_chunks(run, 3).await.unwrap(),
        vec![(4, b("d"))]
    );
    // A log that grows again after its seal reads on in order.
    f.peer
        .append_chunks(run, vec![(5, b("e"))], bounds)
        .await
        .unwrap();
    assert_eq!(
        f.store.read_chunks(run, 3).await.unwrap(),
        vec![(4, b("d")), (5, b("e"))]
    );
    f.store.delete_run(run).await.unwrap();
    assert!(f.store.read_chunks(run, 0).await.unwrap().is_empty());
}

async fn chunk_log_expires(f: Fixture) {
    let run = "run-ttl";
    let short = limits(10, Duration::from_millis(250));
    f.store
        .append_chunks(run, vec![(1, b("old"))], short)
        .await
        .unwrap();
    assert_eq!(f.store.read_chunks(run, 0).await.unwrap().len(), 1);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(f.store.read_chunks(run, 0).await.unwrap().is_empty());
    // A new append after expiry starts a fresh log.
    f.store
        .append_chunks(run, vec![(2, b("new"))], short)
        .await
        .unwrap();
    assert_eq!(
        f.store.read_chunks(run, 0).await.unwrap(),
        vec![(2, b("new"))]
    );
}

async fn run_cas_and_ttl(f: Fixture) {
    let (s, ttl) = (&f.store, Duration::from_millis(250));
    assert_eq!(s.get_run("r1").await.unwrap(), None);
    assert_eq!(
        s.cas_run("r1", 1, b("x"), ttl, None).await.unwrap(),
        Cas::Conflict(None)
    );
    assert_eq!(
        s.cas_run("r1", 0, b("a"), ttl, None).await.unwrap(),
        Cas::Written(1)
    );
    assert_eq!(
        f.peer.cas_run("r1", 0, b("b"), ttl, None).await.unwrap(),
        Cas::Conflict(Some(v(1, "a")))
    );
    assert_eq!(
        s.cas_run("r1", 1, b("b"), ttl, None).await.unwrap(),
        Cas::Written(2)
    );
    assert_eq!(f.peer.get_run("r1").await.unwrap(), Some(v(2, "b")));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(s.get_run("r1").await.unwrap(), None);
    let long = Duration::from_secs(30);
    assert_eq!(
        s.cas_run("r1", 0, b("c"), long, None).await.unwrap(),
        Cas::Written(1)
    );
}

async fn claim_key_first_wins_then_expires(f: Fixture) {
    let ttl = Duration::from_millis(250);
    assert_eq!(
        f.store.claim_key("req-1", b("first"), ttl).await.unwrap(),
        None
    );
    assert_eq!(
        f.peer.claim_key("req-1", b("second"), ttl).await.unwrap(),
        Some(b("first"))
    );
    assert_eq!(
        f.store.claim_key("req-2", b("other"), ttl).await.unwrap(),
        None
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        f.peer.claim_key("req-1", b("third"), ttl).await.unwrap(),
        None
    );
    assert_eq!(
        f.store.claim_key("req-1", b("fourth"), ttl).await.unwrap(),
        Some(b("third"))
    );
}

async fn control_messages_reach_subscribers(f: Fixture) {
    f.store
        .publish_control("nobody-listens", b("abort"))
        .await
        .unwrap();
    let mut control = f.store.subscribe_control("run-c").await.unwrap();
    let mut other = f.store.subscribe_control("run-other").await.unwrap();
    f.peer.publish_control("run-c", b("abort")).await.unwrap();
    f.peer.publish_control("run-c", b("resume")).await.unwrap();
    assert_eq!(next(&mut control).await, b("abort"));
    assert_eq!(next(&mut control).await, b("resume"));
    assert_quiet(&mut other).await;
}

async fn index_sets(f: Fixture) {
    let s = &f.store;
    assert!(s.index_members("awaiting").await.unwrap().is_empty());
    for member in ["run-c", "run-a", "run-b", "run-a"] {
        s.index_set("awaiting", member, true).await.unwrap();
    }
    f.peer.index_set("awaiting", "run-b", false).await.unwrap();
    f.peer
        .index_set("awaiting", "never-added", false)
        .await
        .unwrap();
    s.index_set("awaiting-x", "run-z", true).await.unwrap();
    assert_eq!(
        s.index_members("awaiting").await.unwrap(),
        vec!["run-a", "run-c"]
    );
}

async fn binary_values_round_trip(f: Fixture) {
    let k = key("bin:{t}%", "r:{x}");
    let raw = Bytes::from_static(b"\x00\xff:{}\r\n");
    assert_eq!(
        f.store.cas_doc(&k, "d:{k}", 0, raw.clone()).await.unwrap(),
        Cas::Written(1)
    );
    let found = f.peer.get_doc(&k, "d:{k}").await.unwrap().unwrap();
    assert_eq!(found.value, raw);
    f.store
        .append_messages(&k, None, vec![raw.clone()])
        .await
        .unwrap();
    let view = f.store.load_thread(&k, 1, &["d:{k}"]).await.unwrap();
    assert_eq!(view.messages, vec![raw.clone()]);
    f.store
        .append_chunks(
            "run:{x}",
            vec![(5, raw.clone())],
            limits(5, Duration::from_secs(5)),
        )
        .await
        .unwrap();
    assert_eq!(
        f.store.read_chunks("run:{x}", 0).await.unwrap(),
        vec![(5, raw.clone())]
    );
    let mut follow = f.store.follow_chunks("run:{x}").await.unwrap();
    f.store
        .append_chunks(
            "run:{x}",
            vec![(6, raw.clone())],
            limits(5, Duration::from_secs(5)),
        )
        .await
        .unwrap();
    assert_eq!(next(&mut follow).await, (6, raw.clone()));
    let mut watch = f.store.watch_doc(&k, "d:{k}").await.unwrap();
    f.peer.cas_doc(&k, "d:{k}", 1, raw.clone()).await.unwrap();
    assert_eq!(next(&mut watch).await.value, raw);
}

// ---------------------------------------------------------------------------------------------
// Backend-specific cases

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_data_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let k = key("kept", "r");
    let long = Duration::from_secs(60);
    {
        let store = EmbeddedStore::open(dir.path()).unwrap();
        store.cas_doc(&k, "tasks", 0, b("t1")).await.unwrap();
        store
            .append_messages(&k, None, vec![b("m1"), b("m2")])
            .await
            .unwrap();
        store
            .cas_run("run", 0, b("state"), long, None)
            .await
            .unwrap();
        store
            .append_chunks("run", vec![(1, b("c1"))], limits(10, long))
            .await
            .unwrap();
        store.claim_key("idem", b("first"), long).await.unwrap();
        store.index_set("ix", "run", true).await.unwrap();
        // Dropped without close(): drop must flush durably.
    }
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let view = store.load_thread(&k, 10, &["tasks"]).await.unwrap();
    assert_eq!(view.messages, vec![b("m1"), b("m2")]);
    assert_eq!(view.docs, vec![Some(v(1, "t1"))]);
    assert_eq!(store.get_run("run").await.unwrap(), Some(v(1, "state")));
    assert_eq!(
        store.read_chunks("run", 0).await.unwrap(),
        vec![(1, b("c1"))]
    );
    assert_eq!(
        store.claim_key("idem", b("x"), long).await.unwrap(),
        Some(b("first"))
    );
    assert_eq!(store.index_members("ix").await.unwrap(), vec!["run"]);
    assert_wrong_owner_of(store.get_doc(&key("kept", "other"), "tasks").await);

    // close() flushes, then refuses further writes; reopening sees the data.
    store.cas_doc(&k, "tasks", 1, b("t2")).await.unwrap();
    store.close().await;
    assert!(matches!(
        store.cas_doc(&k, "tasks", 2, b("t3")).await,
        Err(StoreError::Unavailable(_))
    ));
    // close() releases the file although this handle still exists (a restart in-process).
    let reopened = EmbeddedStore::open(dir.path()).unwrap();
    assert_eq!(
        reopened.get_doc(&k, "tasks").await.unwrap(),
        Some(v(2, "t2"))
    );
    assert!(matches!(
        store.get_doc(&k, "tasks").await,
        Err(StoreError::Unavailable(_))
    ));
}

fn assert_wrong_owner_of<T: std::fmt::Debug>(result: StoreResult<T>) {
    assert!(
        matches!(result, Err(StoreError::WrongOwner { .. })),
        "expected WrongOwner, got {result:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_connect_to_a_dead_server_fails_fast() {
    let port = RedisServer::start().port(); // dropped at once: nothing listens there now
    let started = Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        RedisStore::connect(&format!("redis://127.0.0.1:{port}/")),
    )
    .await
    .expect("connect hung");
    assert!(
        matches!(result, Err(StoreError::Unavailable(_))),
        "{result:?}"
    );
    assert!(
        started.elapsed() < OUTAGE_CALL_LIMIT,
        "took {:?}",
        started.elapsed()
    );
}

/// Awaits one call made while Redis is down: it must fail with `Unavailable`, promptly.
async fn assert_unavailable<T: std::fmt::Debug>(
    what: &str,
    call: impl std::future::Future<Output = StoreResult<T>>,
) {
    let started = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .unwrap_or_else(|_| panic!("{what} hung while redis was down"));
    let took = started.elapsed();
    eprintln!("{what} failed after {took:?}");
    assert!(
        matches!(result, Err(StoreError::Unavailable(_))),
        "{what}: expected Unavailable, got {result:?}"
    );
    assert!(took < OUTAGE_CALL_LIMIT, "{what} took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_outage_fails_fast_and_recovers() {
    let mut server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let k = key("t", "r");
    store.cas_doc(&k, "d", 0, b("v1")).await.unwrap();
    let mut watch = store.watch_doc(&k, "d").await.unwrap();

    server.stop();
    assert_unavailable("ping", store.ping()).await;
    assert_unavailable("load_thread", store.load_thread(&k, 5, &["d"])).await;
    assert_unavailable("cas_doc", store.cas_doc(&k, "d", 1, b("v2"))).await;
    assert_unavailable(
        "claim_key",
        store.claim_key("k", b("x"), Duration::from_secs(1)),
    )
    .await;
    assert_unavailable("watch_doc", async {
        store.watch_doc(&k, "d").await.map(|_| ())
    })
    .await;
    assert_unavailable("subscribe_control", async {
        store.subscribe_control("run").await.map(|_| ())
    })
    .await;
    // An open subscription reports the lost connection instead of going silent.
    let ended = tokio::time::timeout(NOTIFY_TIMEOUT, watch.next())
        .await
        .expect("watch did not notice the outage");
    assert!(
        matches!(ended, Some(Err(StoreError::Unavailable(_)))),
        "{ended:?}"
    );

    server.start_again();
    // The same store instance works again (the restarted server is empty).
    store.ping().await.expect("first call after the restart");
    let mut watch = store.watch_doc(&k, "d").await.unwrap();
    assert_eq!(
        store.cas_doc(&k, "d", 0, b("again")).await.unwrap(),
        Cas::Written(1)
    );
    assert_eq!(next(&mut watch).await, v(1, "again"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_hung_server_times_out() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let k = key("t", "r");
    store.cas_doc(&k, "d", 0, b("v1")).await.unwrap();

    server.pause();
    // Concurrent calls on the shared connection: each must give up on its own.
    tokio::join!(
        assert_unavailable("ping", store.ping()),
        assert_unavailable("get_doc", store.get_doc(&k, "d")),
        assert_unavailable("watch_doc", async {
            store.watch_doc(&k, "d").await.map(|_| ())
        }),
    );
    server.resume();
    assert_eq!(store.get_doc(&k, "d").await.unwrap(), Some(v(1, "v1")));
}

#[path = "store_suite/scores.rs"]
mod scores;

#[path = "store_suite/vectors.rs"]
mod vectors;
