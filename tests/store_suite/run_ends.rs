//! A run's end written with its last messages (`end_run`), on every store: both land, a
//! conflicting record appends nothing where the store writes both in one step (the embedded
//! store, one Redis node; a cluster keeps a thread and a run in different slots and writes
//! them in two calls), and a thread of another resource writes neither.

use std::time::Duration;

use bytes::Bytes;

use agentd::agent::message::now_ms;
use agentd::store::{Cas, MessageAppend, MessageQuery, RunWrite, ThreadOrder};

use super::{Fixture, assert_wrong_owner, b, key, v};

suite!(
    end_run_appends_the_messages_and_writes_the_record,
    end_run_over_a_changed_record_appends_nothing,
    end_run_on_another_resources_thread_writes_nothing,
);

const TTL: Duration = Duration::from_secs(60);

fn append(resource: &str, meta: Option<&str>, messages: &[&str]) -> MessageAppend {
    MessageAppend {
        key: key("t1", resource),
        thread_meta: meta.map(b),
        messages: messages.iter().map(|m| b(m)).collect(),
    }
}

fn end(expected: u64, value: &str) -> RunWrite {
    RunWrite {
        run_id: "r1".into(),
        expected,
        value: b(value),
        ttl: TTL,
        lease_until_ms: None,
    }
}

async fn messages(f: &Fixture) -> Vec<Bytes> {
    let query = MessageQuery {
        from: 0,
        to: u64::MAX,
        limit: 100,
        newest_first: false,
    };
    let read = f.peer.read_messages(&key("t1", "alice"), query).await;
    read.unwrap()
        .unwrap_or_default()
        .into_iter()
        .map(|(_, m)| m)
        .collect()
}

/// A running run (leased, lease already over) and a thread with one message.
async fn running_run_and_thread(f: &Fixture) {
    let lapsed = Some(now_ms() - 1_000);
    let started = f.store.cas_run("r1", 0, b("running"), TTL, lapsed).await;
    assert_eq!(started.unwrap(), Cas::Written(1));
    let thread = key("t1", "alice");
    let first = f.store.append_messages(&thread, None, vec![b("m0")]).await;
    assert_eq!(first.unwrap(), 0);
}

async fn end_run_appends_the_messages_and_writes_the_record(f: Fixture) {
    running_run_and_thread(&f).await;
    let written = f
        .store
        .end_run(
            &append("alice", Some("meta"), &["m1", "m2"]),
            end(1, "ended"),
        )
        .await
        .unwrap();
    assert_eq!(written.first_message, Some(1));
    assert_eq!(written.record.unwrap(), Cas::Written(2));

    // Both are there for another replica: the messages after the first, the thread's meta,
    // the record, and the run is off the lease list.
    assert_eq!(messages(&f).await, vec![b("m0"), b("m1"), b("m2")]);
    let thread = f.peer.get_thread(&key("t1", "alice")).await.unwrap();
    let thread = thread.expect("the thread exists");
    assert_eq!((thread.message_count, thread.meta), (3, Some(b("meta"))));
    assert_eq!(f.peer.get_run("r1").await.unwrap(), Some(v(2, "ended")));
    let due = f
        .peer
        .expired_leases(now_ms() + 120_000, 100)
        .await
        .unwrap();
    assert!(!due.contains(&"r1".to_owned()), "{due:?}");

    // A thread that did not exist is created for the resource, and listed.
    let fresh = MessageAppend {
        key: key("t2", "alice"),
        thread_meta: None,
        messages: vec![b("only")],
    };
    let run = RunWrite {
        run_id: "r2".into(),
        ..end(0, "new")
    };
    let written = f.store.end_run(&fresh, run).await.unwrap();
    assert_eq!(written.first_message, Some(0));
    assert_eq!(written.record.unwrap(), Cas::Written(1));
    let listed = f
        .peer
        .list_threads("alice", ThreadOrder::Created, None, 10)
        .await
        .unwrap();
    assert!(listed.iter().any(|t| t.thread_id == "t2"), "{listed:?}");
}

async fn end_run_over_a_changed_record_appends_nothing(f: Fixture) {
    running_run_and_thread(&f).await;
    // Another write (an Abort recording its reason) came first: version 2.
    let changed = f
        .peer
        .cas_run("r1", 1, b("aborting"), TTL, Some(now_ms()))
        .await;
    assert_eq!(changed.unwrap(), Cas::Written(2));
    let written = f
        .store
        .end_run(&append("alice", None, &["m1"]), end(1, "ended"))
        .await
        .unwrap();
    assert_eq!(
        written.record.unwrap(),
        Cas::Conflict(Some(v(2, "aborting")))
    );
    assert_eq!(f.peer.get_run("r1").await.unwrap(), Some(v(2, "aborting")));
    let one_step = f._cluster.is_none();
    if one_step {
        assert_eq!(written.first_message, None);
        assert_eq!(messages(&f).await, vec![b("m0")]);
    } else {
        // Two calls: the messages went first, and the caller is told so (it must not send
        // them again with the record's retry).
        assert_eq!(written.first_message, Some(1));
        assert_eq!(messages(&f).await, vec![b("m0"), b("m1")]);
    }
    // The retry on the newer record lands the record (and the messages, if still unsent).
    let retry = if one_step {
        append("alice", None, &["m1"])
    } else {
        append("alice", None, &[])
    };
    let written = f.store.end_run(&retry, end(2, "ended")).await.unwrap();
    assert_eq!(written.record.unwrap(), Cas::Written(3));
    assert_eq!(messages(&f).await, vec![b("m0"), b("m1")]);
}

async fn end_run_on_another_resources_thread_writes_nothing(f: Fixture) {
    running_run_and_thread(&f).await;
    assert_wrong_owner(
        f.store
            .end_run(&append("bob", None, &["evil"]), end(1, "ended"))
            .await,
    );
    assert_eq!(f.peer.get_run("r1").await.unwrap(), Some(v(1, "running")));
    assert_eq!(messages(&f).await, vec![b("m0")]);
    // Still running: its lease is still listed.
    let due = f.peer.expired_leases(now_ms(), 100).await.unwrap();
    assert!(due.contains(&"r1".to_owned()), "{due:?}");
}
