//! Threads beyond one run's needs, on both stores: summaries, metadata compare-and-set, the
//! per-resource listing and its paging, messages by position, deletions, resource documents.

use std::collections::BTreeSet;
use std::time::Duration;

use agentd::store::{Cas, MessageQuery, Store, ThreadCursor, ThreadInfo, ThreadOrder};

use super::{Fixture, LogLimits, assert_wrong_owner, b, key, v};

suite!(
    thread_summaries_and_meta_cas,
    listings_page_newest_first_without_gaps,
    messages_page_by_position_and_survive_deletions,
    delete_thread_removes_everything,
    resource_documents_cas,
    delete_run_removes_record_and_log,
);

async fn thread_summaries_and_meta_cas(f: Fixture) {
    let s = f.store;
    let k = key("t1", "alice");
    assert_eq!(s.get_thread(&k).await.unwrap(), None);
    assert_eq!(s.cas_thread_meta(&k, None, b("{}")).await.unwrap(), None);
    let first = s
        .append_messages(&k, Some(b(r#"{"title":null}"#)), vec![b("m0"), b("m1")])
        .await
        .unwrap();
    assert_eq!(first, 0);
    let second = s.append_messages(&k, None, vec![b("m2")]).await.unwrap();
    assert_eq!(second, 2);
    let info = s.get_thread(&k).await.unwrap().unwrap();
    assert_eq!(info.message_count, 3);
    assert_eq!(info.meta, Some(b(r#"{"title":null}"#)));
    assert!(info.updated_ms >= info.created_ms && info.created_ms > 0);
    assert_wrong_owner(s.get_thread(&key("t1", "bob")).await);
    assert_wrong_owner(s.cas_thread_meta(&key("t1", "bob"), None, b("{}")).await);

    // Compare-and-set by value: a stale expectation changes nothing.
    let stale = s.cas_thread_meta(&k, None, b("x")).await.unwrap();
    assert_eq!(stale, Some(false));
    let written = s
        .cas_thread_meta(&k, Some(b(r#"{"title":null}"#)), b(r#"{"title":"T"}"#))
        .await
        .unwrap();
    assert_eq!(written, Some(true));
    let info = f.peer.get_thread(&k).await.unwrap().unwrap();
    assert_eq!(info.meta, Some(b(r#"{"title":"T"}"#)));
    assert_eq!(info.message_count, 3);
}

async fn listings_page_newest_first_without_gaps(f: Fixture) {
    let s = f.store;
    // Several threads per millisecond: ties are ordered by id, and paging must cross them.
    let ids: Vec<String> = (0..23).map(|i| format!("th-{i:02}")).collect();
    for id in &ids {
        s.append_messages(&key(id, "alice"), None, vec![b("hi")])
            .await
            .unwrap();
    }
    s.append_messages(&key("other", "bob"), None, vec![b("hi")])
        .await
        .unwrap();
    for order in [ThreadOrder::Created, ThreadOrder::Updated] {
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let page = f
                .peer
                .list_threads("alice", order, cursor, 5)
                .await
                .unwrap();
            assert!(page.len() <= 5);
            let Some(last) = page.last() else { break };
            cursor = Some(cursor_of(last, order));
            seen.extend(page.iter().map(|t| t.thread_id.clone()));
        }
        let unique: BTreeSet<&String> = seen.iter().collect();
        assert_eq!(seen.len(), ids.len(), "{order:?}: {seen:?}");
        assert_eq!(unique.len(), ids.len());
        // Newest first: the last written thread leads.
        assert_eq!(seen[0], "th-22", "{order:?}");
    }
    // Touching a thread moves it to the front of the update order only.
    tokio::time::sleep(Duration::from_millis(5)).await;
    s.append_messages(&key("th-00", "alice"), None, vec![b("again")])
        .await
        .unwrap();
    let by_updated = s
        .list_threads("alice", ThreadOrder::Updated, None, 1)
        .await
        .unwrap();
    assert_eq!(by_updated[0].thread_id, "th-00");
    assert_eq!(by_updated[0].message_count, 2);
    let by_created = s
        .list_threads("alice", ThreadOrder::Created, None, 1)
        .await
        .unwrap();
    assert_eq!(by_created[0].thread_id, "th-22");
    assert!(
        s.list_threads("nobody", ThreadOrder::Created, None, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

fn cursor_of(t: &ThreadInfo, order: ThreadOrder) -> ThreadCursor {
    ThreadCursor {
        time_ms: match order {
            ThreadOrder::Created => t.created_ms,
            ThreadOrder::Updated => t.updated_ms,
        },
        thread_id: t.thread_id.clone(),
    }
}

fn q(from: u64, to: u64, limit: usize, newest_first: bool) -> MessageQuery {
    MessageQuery {
        from,
        to,
        limit,
        newest_first,
    }
}

async fn messages_page_by_position_and_survive_deletions(f: Fixture) {
    let s = f.store;
    let k = key("t1", "alice");
    assert_eq!(
        s.read_messages(&k, q(0, u64::MAX, 10, false))
            .await
            .unwrap(),
        None
    );
    let all: Vec<_> = (0..10).map(|i| b(&format!("m{i}"))).collect();
    s.append_messages(&k, None, all.clone()).await.unwrap();
    let page = s
        .read_messages(&k, q(0, u64::MAX, 3, false))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(page, vec![(0, b("m0")), (1, b("m1")), (2, b("m2"))]);
    let page = s
        .read_messages(&k, q(0, u64::MAX, 3, true))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(page, vec![(9, b("m9")), (8, b("m8")), (7, b("m7"))]);
    let window = s
        .read_messages(&k, q(4, 7, 10, false))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        window.iter().map(|m| m.0).collect::<Vec<_>>(),
        vec![4, 5, 6]
    );

    // Deleting leaves positions where they were; unknown positions count nothing.
    let removed = s.delete_messages(&k, vec![1, 2, 8, 40, 2]).await.unwrap();
    assert_eq!(removed, 3);
    assert_eq!(s.get_thread(&k).await.unwrap().unwrap().message_count, 7);
    let page = f
        .peer
        .read_messages(&k, q(0, u64::MAX, 3, false))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(page, vec![(0, b("m0")), (3, b("m3")), (4, b("m4"))]);
    let page = s
        .read_messages(&k, q(0, 9, 2, true))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(page, vec![(7, b("m7")), (6, b("m6"))]);
    // The run's history read skips deleted messages too.
    let view = s.load_thread(&k, 3, &[]).await.unwrap();
    assert_eq!(view.messages, vec![b("m6"), b("m7"), b("m9")]);
    // New messages never reuse a position.
    assert_eq!(
        s.append_messages(&k, None, vec![b("m10")]).await.unwrap(),
        10
    );
    // Paging through everything returns each live message exactly once.
    let mut seen = Vec::new();
    let mut after = 0;
    loop {
        let page = s
            .read_messages(&k, q(after, u64::MAX, 2, false))
            .await
            .unwrap()
            .unwrap();
        let Some(last) = page.last() else { break };
        after = last.0 + 1;
        seen.extend(page.into_iter().map(|m| m.0));
    }
    assert_eq!(seen, vec![0, 3, 4, 5, 6, 7, 9, 10]);
    assert_wrong_owner(s.delete_messages(&key("t1", "bob"), vec![0]).await);
}

async fn delete_thread_removes_everything(f: Fixture) {
    let s = f.store;
    let k = key("t1", "alice");
    s.append_messages(&k, Some(b("{}")), vec![b("m0"), b("m1")])
        .await
        .unwrap();
    assert!(matches!(
        s.cas_doc(&k, "tasks", 0, b("[]")).await.unwrap(),
        Cas::Written(1)
    ));
    assert!(matches!(
        s.cas_doc(&k, "wm", 0, b("x")).await.unwrap(),
        Cas::Written(1)
    ));
    assert_wrong_owner(s.delete_thread(&key("t1", "bob"), &["tasks"]).await);
    assert!(s.delete_thread(&k, &["tasks", "wm"]).await.unwrap());
    assert!(!f.peer.delete_thread(&k, &["tasks", "wm"]).await.unwrap());
    assert_eq!(s.get_thread(&k).await.unwrap(), None);
    assert_eq!(s.get_doc(&k, "tasks").await.unwrap(), None);
    assert_eq!(s.get_doc(&k, "wm").await.unwrap(), None);
    assert!(
        s.list_threads("alice", ThreadOrder::Created, None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        s.list_threads("alice", ThreadOrder::Updated, None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // The id is free again, for anyone.
    s.append_messages(&key("t1", "bob"), None, vec![b("new")])
        .await
        .unwrap();
    let view = s
        .load_thread(&key("t1", "bob"), 10, &["tasks"])
        .await
        .unwrap();
    assert_eq!(view.messages, vec![b("new")]);
    assert_eq!(view.docs, vec![None]);
}

async fn resource_documents_cas(f: Fixture) {
    let s = f.store;
    assert_eq!(s.get_resource_doc("alice", "wm").await.unwrap(), None);
    assert_eq!(
        s.cas_resource_doc("alice", "wm", 0, b("a")).await.unwrap(),
        Cas::Written(1)
    );
    assert_eq!(
        s.cas_resource_doc("alice", "wm", 0, b("b")).await.unwrap(),
        Cas::Conflict(Some(v(1, "a")))
    );
    assert_eq!(
        s.cas_resource_doc("alice", "wm", 1, b("b")).await.unwrap(),
        Cas::Written(2)
    );
    assert_eq!(
        f.peer.get_resource_doc("alice", "wm").await.unwrap(),
        Some(v(2, "b"))
    );
    assert_eq!(s.get_resource_doc("bob", "wm").await.unwrap(), None);
}

async fn delete_run_removes_record_and_log(f: Fixture) {
    let s = f.store;
    let ttl = Duration::from_secs(60);
    s.cas_run("r1", 0, b("rec"), ttl, None).await.unwrap();
    s.append_chunks(
        "r1",
        vec![(1, b("c1"))],
        LogLimits {
            max_chunks: 10,
            ttl,
        },
    )
    .await
    .unwrap();
    s.delete_run("r1").await.unwrap();
    assert_eq!(f.peer.get_run("r1").await.unwrap(), None);
    assert!(f.peer.read_chunks("r1", 0).await.unwrap().is_empty());
    // Deleting again is fine; the id can be used afresh.
    s.delete_run("r1").await.unwrap();
    assert_eq!(
        s.cas_run("r1", 0, b("new"), ttl, None).await.unwrap(),
        Cas::Written(1)
    );
}

#[tokio::test]
async fn redis_lists_threads_written_before_the_listings_existed() {
    let server = super::RedisServer::start();
    let client = redis::Client::open(server.url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    // A thread as the previous version stored it: meta and messages, no listing entries.
    redis::cmd("HSET")
        .arg("agentd:{t:old%3Aone}:meta")
        .arg("owner")
        .arg("alice")
        .arg("created_ms")
        .arg(5)
        .arg("updated_ms")
        .arg(7)
        .query_async::<()>(&mut c)
        .await
        .unwrap();
    redis::cmd("RPUSH")
        .arg("agentd:{t:old%3Aone}:msgs")
        .arg("m0")
        .query_async::<()>(&mut c)
        .await
        .unwrap();
    let store = agentd::store::redis::RedisStore::connect(&server.url())
        .await
        .unwrap();
    for order in [ThreadOrder::Created, ThreadOrder::Updated] {
        let listed = store.list_threads("alice", order, None, 10).await.unwrap();
        assert_eq!(listed.len(), 1, "{order:?}");
        assert_eq!(listed[0].thread_id, "old:one");
        assert_eq!((listed[0].created_ms, listed[0].updated_ms), (5, 7));
        assert_eq!(listed[0].message_count, 1);
    }
}
