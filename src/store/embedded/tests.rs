//! Unit tests of the embedded store's internals (writer batching, lagging subscribers,
//! expiry); behaviour shared with Redis is in `tests/store_suite.rs`.

use futures::StreamExt;
use redb::{ReadableTable, ReadableTableMetadata};

use super::runs::sweep_expired;
use super::schema::*;
use super::*;

fn open(dir: &tempfile::TempDir, options: EmbeddedOptions) -> EmbeddedStore {
    EmbeddedStore::open_with(dir.path(), options).unwrap()
}

fn small_channels() -> EmbeddedOptions {
    EmbeddedOptions {
        channel_capacity: 2,
        ..EmbeddedOptions::default()
    }
}

async fn next<T>(stream: &mut BoxStream<'static, StoreResult<T>>) -> T {
    tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("no item in time")
        .expect("stream ended")
        .expect("error item")
}

fn key() -> ThreadKey {
    ThreadKey {
        thread_id: "t".into(),
        resource_id: "r".into(),
    }
}

#[tokio::test]
async fn lagging_watcher_gets_the_current_value() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, small_channels());
    let mut watch = store.watch_doc(&key(), "d").await.unwrap();
    for version in 0..10u64 {
        let value = Bytes::from(version.to_string());
        store.cas_doc(&key(), "d", version, value).await.unwrap();
    }
    let first = next(&mut watch).await;
    assert_eq!(first.version, 10);
    store.cas_doc(&key(), "d", 10, Bytes::new()).await.unwrap();
    assert_eq!(next(&mut watch).await.version, 11);
}

#[tokio::test]
async fn lagging_follower_rereads_missed_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, small_channels());
    let mut follow = store.follow_chunks("run").await.unwrap();
    let limits = LogLimits {
        max_chunks: 100,
        ttl: Duration::from_secs(30),
    };
    for seq in 0..10u64 {
        let chunk = (seq, Bytes::from(seq.to_string()));
        store
            .append_chunks("run", vec![chunk], limits)
            .await
            .unwrap();
    }
    for seq in 0..10u64 {
        assert_eq!(next(&mut follow).await.0, seq);
    }
}

#[tokio::test]
async fn lagging_control_subscriber_gets_an_error_then_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, small_channels());
    let mut control = store.subscribe_control("run").await.unwrap();
    for _ in 0..5 {
        store
            .publish_control("run", Bytes::from_static(b"x"))
            .await
            .unwrap();
    }
    let lagged = control.next().await.unwrap();
    assert!(matches!(lagged, Err(StoreError::Unavailable(_))));
    assert_eq!(next(&mut control).await, Bytes::from_static(b"x"));
}

#[tokio::test]
async fn topics_are_dropped_with_their_last_subscriber() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, EmbeddedOptions::default());
    let first = store.watch_doc(&key(), "d").await.unwrap();
    let second = store.watch_doc(&key(), "d").await.unwrap();
    let follow = store.follow_chunks("run").await.unwrap();
    drop(first);
    assert_eq!(store.shared.docs.topics(), 1);
    drop((second, follow));
    assert_eq!(store.shared.docs.topics(), 0);
    assert_eq!(store.shared.chunks.topics(), 0);
}

#[tokio::test]
async fn sweep_purges_expired_records() {
    let dir = tempfile::tempdir().unwrap();
    let options = EmbeddedOptions {
        sweep_every: Duration::from_millis(50),
        ..EmbeddedOptions::default()
    };
    let store = open(&dir, options);
    let ttl = Duration::from_millis(50);
    let limits = LogLimits { max_chunks: 5, ttl };
    store
        .cas_run("run", 0, Bytes::new(), ttl, None)
        .await
        .unwrap();
    store
        .append_chunks("run", vec![(1, Bytes::new())], limits)
        .await
        .unwrap();
    store.claim_key("idem", Bytes::new(), ttl).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let counts = store
        .read(|tx, _| {
            Ok([
                tx.open_table(RUNS)?.len()?,
                tx.open_table(LOG_HEADS)?.len()?,
                tx.open_table(LOG_ENTRIES)?.len()? + tx.open_table(LOG_BATCHES)?.len()?,
                tx.open_table(CLAIMS)?.len()?,
                tx.open_table(EXPIRY)?.len()?,
            ])
        })
        .await
        .unwrap();
    assert_eq!(counts, [0; 5]);
}

#[tokio::test]
async fn strict_durability_mode_works() {
    let dir = tempfile::tempdir().unwrap();
    let options = EmbeddedOptions {
        durable_every: Duration::ZERO,
        ..EmbeddedOptions::default()
    };
    let store = open(&dir, options);
    let written = store.cas_doc(&key(), "d", 0, Bytes::new()).await.unwrap();
    assert_eq!(written, Cas::Written(1));
    assert_eq!(
        store.get_doc(&key(), "d").await.unwrap().unwrap().version,
        1
    );
}

#[tokio::test]
async fn logs_written_one_chunk_per_row_read_and_trim_with_batches() {
    // Earlier versions stored a chunk per row: such a log keeps reading, growing and trimming.
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, EmbeddedOptions::default());
    let limits = LogLimits {
        max_chunks: 4,
        ttl: Duration::from_secs(60),
    };
    store
        .write(|tx, ctx| {
            let mut entries = tx.log_entries()?;
            for position in 0..2u64 {
                let chunk = [b'a' + position as u8];
                entries.insert(("run", position), (position + 1, chunk.as_slice()))?;
            }
            let expires = ctx.expires_at(Duration::from_secs(60));
            tx.log_heads()?.insert("run", (0, 2, expires))?;
            Ok(())
        })
        .await
        .unwrap();
    let chunk = |seq: u64, byte: u8| (seq, Bytes::from(vec![byte]));
    store
        .append_chunks("run", vec![chunk(3, b'c'), chunk(4, b'd')], limits)
        .await
        .unwrap();
    let all = store.read_chunks("run", 0).await.unwrap();
    let expected: Vec<_> = [(1, b'a'), (2, b'b'), (3, b'c'), (4, b'd')]
        .into_iter()
        .map(|(seq, byte)| chunk(seq, byte))
        .collect();
    assert_eq!(all, expected);
    assert_eq!(store.read_chunks("run", 2).await.unwrap(), expected[2..]);
    // Three more: the old rows and the first new chunk go, the batch keeps its tail.
    store
        .append_chunks(
            "run",
            vec![chunk(5, b'e'), chunk(6, b'f'), chunk(7, b'g')],
            limits,
        )
        .await
        .unwrap();
    let kept: Vec<u64> = store
        .read_chunks("run", 0)
        .await
        .unwrap()
        .into_iter()
        .map(|(seq, _)| seq)
        .collect();
    assert_eq!(kept, [4, 5, 6, 7]);
    let rows = store
        .read(|tx, _| {
            Ok((
                tx.open_table(LOG_ENTRIES)?.len()?,
                tx.open_table(LOG_BATCHES)?.len()?,
            ))
        })
        .await
        .unwrap();
    assert_eq!(rows, (0, 2));
}

/// A cache far smaller than the data (redb evicts read pages and writes dirty ones out early)
/// changes nothing a reader sees, also after a reopen.
#[tokio::test]
async fn a_small_cache_holds_more_data_than_fits_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let options = EmbeddedOptions {
        cache_bytes: 256 << 10,
        ..EmbeddedOptions::default()
    };
    let threads = 64;
    let message = |t: usize, i: usize| Bytes::from(format!("{t}:{i}:{}", "x".repeat(2000)));
    {
        let store = open(&dir, options);
        // About 2.5 MiB of messages, ten times the cache.
        for t in 0..threads {
            let key = ThreadKey {
                thread_id: format!("t{t}"),
                resource_id: "r".into(),
            };
            let batch = (0..20).map(|i| message(t, i)).collect();
            store.append_messages(&key, None, batch).await.unwrap();
        }
        store.close().await;
    }
    let store = open(&dir, options);
    for t in 0..threads {
        let key = ThreadKey {
            thread_id: format!("t{t}"),
            resource_id: "r".into(),
        };
        let view = store.load_thread(&key, 20, &[]).await.unwrap();
        let expected: Vec<Bytes> = (0..20).map(|i| message(t, i)).collect();
        assert_eq!(view.messages, expected, "thread t{t}");
    }
}

/// The name of the thread a write ran on.
async fn writer_of(store: &EmbeddedStore, bytes: usize) -> Option<String> {
    store
        .write_sized(bytes, |_, _| {
            Ok(std::thread::current().name().map(str::to_owned))
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn a_lone_small_write_is_committed_by_its_caller() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, EmbeddedOptions::default());
    let here = std::thread::current().name().map(str::to_owned);
    assert!(here.is_some());
    assert_eq!(writer_of(&store, 0).await, here);
    assert_eq!(writer_of(&store, IN_PLACE_BYTES).await, here);
    // Large jobs, and every job of a store that syncs each commit, go to the thread.
    let thread = Some("agentd-store-writer".to_owned());
    assert_eq!(writer_of(&store, IN_PLACE_BYTES + 1).await, thread);
    assert_eq!(writer_of(&store, UNBOUNDED).await, thread);
    drop(store);
    let synced = EmbeddedOptions {
        durable_every: Duration::ZERO,
        ..EmbeddedOptions::default()
    };
    let store = open(&tempfile::tempdir().unwrap(), synced);
    assert_eq!(writer_of(&store, 0).await, thread);
}

#[tokio::test]
async fn jobs_commit_in_the_order_submitted() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, EmbeddedOptions::default());
    for i in 0..50 {
        let member = format!("m{i}");
        let insert = {
            let member = member.clone();
            // On the thread: the write after it must not overtake it in place.
            store.write_sized(UNBOUNDED, move |tx, _| {
                tx.index()?.insert(("i", member.as_str()), ())?;
                Ok(())
            })
        };
        let read = store.write(move |tx, _| Ok(tx.index()?.get(("i", member.as_str()))?.is_some()));
        let (inserted, seen) = tokio::join!(insert, read);
        inserted.unwrap();
        assert!(seen.unwrap(), "write {i} overtook the one before it");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_panicking_in_its_callers_task_leaves_the_store_writing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open(&dir, EmbeddedOptions::default()));
    let panicking = store.clone();
    let outcome = tokio::spawn(async move {
        panicking
            .write(|_, _| -> StoreResult<()> { panic!("a job panics") })
            .await
    })
    .await;
    assert!(outcome.unwrap_err().is_panic());
    let written = tokio::time::timeout(
        Duration::from_secs(5),
        store.cas_doc(&key(), "d", 0, Bytes::from_static(b"x")),
    )
    .await
    .expect("the writer is stuck");
    assert_eq!(written.unwrap(), Cas::Written(1));
}

#[tokio::test]
async fn a_job_panicking_on_the_thread_fails_later_writes_instead_of_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, EmbeddedOptions::default());
    let failed = store
        .write_sized(UNBOUNDED, |_, _| -> StoreResult<()> {
            panic!("a job panics")
        })
        .await;
    assert!(
        matches!(failed, Err(StoreError::Unavailable(_))),
        "{failed:?}"
    );
    let later = tokio::time::timeout(
        Duration::from_secs(5),
        store.cas_doc(&key(), "d", 0, Bytes::from_static(b"x")),
    )
    .await
    .expect("a write hangs");
    assert!(
        matches!(later, Err(StoreError::Unavailable(_))),
        "{later:?}"
    );
}

/// The schedule's entries, oldest first: (time, record kind, id).
async fn schedule(store: &EmbeddedStore) -> Vec<(u64, u8, String)> {
    store
        .read(|tx, _| {
            let mut entries = Vec::new();
            for entry in tx.open_table(EXPIRY)?.iter()? {
                let (key, _) = entry?;
                let (at, kind, id) = key.value();
                entries.push((at, kind, id.to_owned()));
            }
            Ok(entries)
        })
        .await
        .unwrap()
}

/// Runs a sweep as if the clock read `now_ms`.
async fn sweep_at(store: &EmbeddedStore, now_ms: u64) {
    store
        .write(move |tx, _| sweep_expired(tx, now_ms))
        .await
        .unwrap();
}

#[tokio::test]
async fn rewrites_leave_the_schedule_alone_and_the_sweep_catches_up() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, EmbeddedOptions::default());
    let expiry_of = |store: &EmbeddedStore| {
        let run =
            store.read_now(|tx, _| Ok(tx.open_table(RUNS)?.get("run")?.map(|row| row.value().1)));
        run.unwrap()
    };
    store
        .cas_run("run", 0, Bytes::from("a"), Duration::from_secs(60), None)
        .await
        .unwrap();
    let first = expiry_of(&store).unwrap();
    assert_eq!(
        schedule(&store).await,
        [(first, EXPIRING_RUN, "run".into())]
    );

    // A rewrite that pushes the expiry later leaves the entry where it was.
    store
        .cas_run("run", 1, Bytes::from("b"), Duration::from_secs(120), None)
        .await
        .unwrap();
    let later = expiry_of(&store).unwrap();
    assert!(later > first);
    assert_eq!(
        schedule(&store).await,
        [(first, EXPIRING_RUN, "run".into())]
    );

    // The sweep reaching that entry finds the record alive and moves the entry to its expiry.
    sweep_at(&store, first).await;
    assert_eq!(expiry_of(&store), Some(later));
    assert_eq!(
        schedule(&store).await,
        [(later, EXPIRING_RUN, "run".into())]
    );
    sweep_at(&store, later).await;
    assert_eq!(expiry_of(&store), None);
    assert!(schedule(&store).await.is_empty());

    // A rewrite that brings the expiry earlier adds an entry there; the one left behind is
    // dropped by the sweep that reaches it, which finds nothing to purge.
    store
        .cas_run("other", 0, Bytes::from("a"), Duration::from_secs(120), None)
        .await
        .unwrap();
    store
        .cas_run("other", 1, Bytes::from("b"), Duration::from_secs(10), None)
        .await
        .unwrap();
    let entries = schedule(&store).await;
    assert_eq!(entries.len(), 2);
    sweep_at(&store, entries[0].0).await;
    assert_eq!(schedule(&store).await, entries[1..]);
    let gone = store.get_run("other").await.unwrap();
    assert!(gone.is_none(), "purged at its (earlier) expiry");
    sweep_at(&store, entries[1].0).await;
    assert!(schedule(&store).await.is_empty());
}

#[tokio::test]
async fn a_log_appended_to_keeps_one_entry_until_the_sweep_moves_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, EmbeddedOptions::default());
    let limits = |secs| LogLimits {
        max_chunks: 10,
        ttl: Duration::from_secs(secs),
    };
    let append =
        |seq: u64, secs| store.append_chunks("run", vec![(seq, Bytes::new())], limits(secs));
    append(1, 60).await.unwrap();
    append(2, 120).await.unwrap();
    let entries = schedule(&store).await;
    assert_eq!(entries.len(), 1);
    sweep_at(&store, entries[0].0).await;
    assert_eq!(
        store.read_chunks("run", 0).await.unwrap().len(),
        2,
        "still alive"
    );
    let moved = schedule(&store).await;
    assert_eq!(moved.len(), 1);
    assert!(moved[0].0 > entries[0].0);
    sweep_at(&store, moved[0].0).await;
    assert!(schedule(&store).await.is_empty());
    let counts = store
        .read(|tx, _| {
            Ok([
                tx.open_table(LOG_HEADS)?.len()?,
                tx.open_table(LOG_BATCHES)?.len()?,
            ])
        })
        .await
        .unwrap();
    assert_eq!(counts, [0, 0]);
}

#[tokio::test]
async fn a_backlog_of_expired_records_is_swept_pass_after_pass() {
    let dir = tempfile::tempdir().unwrap();
    let options = EmbeddedOptions {
        sweep_every: Duration::from_secs(2),
        ..EmbeddedOptions::default()
    };
    let opened = std::time::Instant::now();
    let store = open(&dir, options);
    let records = SWEEP_LIMIT * 2 + SWEEP_LIMIT / 2;
    store
        .write(move |tx, ctx| {
            for i in 0..records {
                super::runs::claim(tx, ctx, &format!("key-{i}"), b"", Duration::from_millis(1))?;
            }
            Ok(())
        })
        .await
        .unwrap();
    // One pass per interval would leave the last of them to the third pass, 6 s after opening.
    loop {
        let left = store
            .read(|tx, _| Ok(tx.open_table(CLAIMS)?.len()?))
            .await
            .unwrap();
        if left == 0 {
            break;
        }
        assert!(
            opened.elapsed() < Duration::from_millis(3500),
            "{left} expired claims left"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(schedule(&store).await.is_empty());
}

// Read-your-writes, whatever the writer's schedule: a reply (or a watcher's notification) must
// never come before a read can see the write. Replying before the commit without making reads
// wait for it fails both tests below (tried on 2026-12-06, see README: Benchmarks).

#[tokio::test]
async fn a_large_write_reads_back_whole_right_after_its_reply() {
    const ROWS: usize = 100_000;
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, EmbeddedOptions::default());
    // Many rows make a long commit.
    store
        .write_sized(UNBOUNDED, |tx, _| {
            let mut table = tx.index()?;
            for i in 0..ROWS {
                table.insert(("i", format!("m{i:06}").as_str()), ())?;
            }
            Ok(())
        })
        .await
        .unwrap();
    let rows = store.read_now(|tx, _| Ok(tx.open_table(INDEX)?.len()?));
    assert_eq!(rows.unwrap(), ROWS as u64, "the point read missed rows");
    let listed = store.index_members("i").await.unwrap();
    assert_eq!(listed.len(), ROWS, "the pooled read missed rows");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_and_watchers_read_back_what_they_heard_of() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open(&dir, EmbeddedOptions::default()));
    let writers = (0..32).map(|n| {
        let store = store.clone();
        tokio::spawn(async move {
            let key = ThreadKey {
                thread_id: format!("t{n}"),
                resource_id: "r".into(),
            };
            let mut watch = store.watch_doc(&key, "d").await.unwrap();
            for i in 1..=40u64 {
                let edit: DocEdit = Box::new(move |_| Ok(Some(Bytes::from(i.to_string()))));
                let written = store.update_doc(&key, "d", edit).await.unwrap();
                assert_eq!(written, i);
                let read = store.get_doc(&key, "d").await.unwrap().unwrap();
                assert_eq!(read.version, i, "the writer read an older version");
                let heard = next(&mut watch).await.version;
                let read = store.get_doc(&key, "d").await.unwrap().unwrap();
                assert!(read.version >= heard, "a watcher read an older version");
            }
        })
    });
    for writer in futures::future::join_all(writers).await {
        writer.unwrap();
    }
}
