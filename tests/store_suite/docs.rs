//! Thread documents edited in one store step (`update_doc`), on both stores: what the edit sees,
//! versions, ownership, watchers, and concurrent edits from two replicas losing nothing.

use std::sync::{Arc, Mutex};

use bytes::Bytes;

use agentd::store::{DocEdit, Store, StoreError, ThreadKey};

use super::{
    Fixture, WRITERS, assert_quiet, assert_wrong_owner, b, each_writer_adds_itself, key, next, v,
};

suite!(
    update_doc_edits_what_is_stored,
    update_doc_checks_ownership_and_notifies,
    concurrent_update_docs_lose_nothing,
    update_doc_edits_another_replicas_write,
    update_doc_edits_a_thread_created_again,
    update_doc_declines_only_on_the_stored_value,
);

/// What an edit saw at each run: the stored version and value, or nothing.
type Seen = Arc<Mutex<Vec<Option<(u64, Bytes)>>>>;

/// An edit that appends `suffix` to the stored text and records what it saw.
fn append(suffix: &'static str, seen: Seen) -> DocEdit {
    Box::new(move |doc| {
        seen.lock()
            .unwrap()
            .push(doc.map(|d| (d.version, d.value.clone())));
        let mut text = doc.map(|d| d.value.to_vec()).unwrap_or_default();
        text.extend_from_slice(suffix.as_bytes());
        Ok(Some(Bytes::from(text)))
    })
}

async fn update_doc_edits_what_is_stored(f: Fixture) {
    let s = &f.store;
    let k = key("t1", "alice");
    let seen = Arc::new(Mutex::new(Vec::new()));
    // Absent: the edit sees nothing, the thread is created for the caller.
    assert_eq!(
        s.update_doc(&k, "d", append("a", seen.clone()))
            .await
            .unwrap(),
        1
    );
    assert!(s.load_thread(&k, 0, &[]).await.unwrap().exists);
    assert_eq!(
        f.peer
            .update_doc(&k, "d", append("b", seen.clone()))
            .await
            .unwrap(),
        2
    );
    assert_eq!(s.get_doc(&k, "d").await.unwrap(), Some(v(2, "ab")));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.first(), Some(&None));
    assert_eq!(seen.last(), Some(&Some((1, b("a")))));
    // An edit that declines writes nothing and reports the stored version.
    let keep: DocEdit = Box::new(|_| Ok(None));
    assert_eq!(s.update_doc(&k, "d", keep).await.unwrap(), 2);
    assert_eq!(s.get_doc(&k, "d").await.unwrap(), Some(v(2, "ab")));
    let nothing: DocEdit = Box::new(|_| Ok(None));
    assert_eq!(
        s.update_doc(&key("t2", "alice"), "d", nothing)
            .await
            .unwrap(),
        0
    );
    assert!(
        !s.load_thread(&key("t2", "alice"), 0, &[])
            .await
            .unwrap()
            .exists
    );
    // The edit's own error reaches the caller and nothing is written.
    let refuse: DocEdit = Box::new(|_| Err(StoreError::Corrupt("bad list".into())));
    match s.update_doc(&k, "d", refuse).await {
        Err(StoreError::Corrupt(message)) => assert_eq!(message, "bad list"),
        other => panic!("expected the edit's error, got {other:?}"),
    }
    assert_eq!(s.get_doc(&k, "d").await.unwrap(), Some(v(2, "ab")));
}

async fn update_doc_checks_ownership_and_notifies(f: Fixture) {
    let s = &f.store;
    let k = key("t1", "alice");
    s.update_doc(&k, "tasks", append("x", Arc::default()))
        .await
        .unwrap();
    let mut watch = s.watch_doc(&k, "tasks").await.unwrap();
    let ran = Arc::new(Mutex::new(Vec::new()));
    assert_wrong_owner(
        f.peer
            .update_doc(&key("t1", "bob"), "tasks", append("y", ran.clone()))
            .await,
    );
    // A store may run the edit on a guess (nothing) before its write is refused; never on
    // another owner's document.
    assert!(
        ran.lock().unwrap().iter().all(Option::is_none),
        "the edit saw another owner's document"
    );
    f.peer
        .update_doc(&k, "tasks", append("z", Arc::default()))
        .await
        .unwrap();
    assert_eq!(next(&mut watch).await, v(2, "xz"));
    assert_quiet(&mut watch).await;
    assert_eq!(s.get_doc(&k, "tasks").await.unwrap(), Some(v(2, "xz")));
}

async fn concurrent_update_docs_lose_nothing(f: Fixture) {
    let mut versions = each_writer_adds_itself(&f, |store, k, i| async move {
        let edit: DocEdit = Box::new(move |doc| {
            let mut items: Vec<usize> = match doc {
                Some(doc) => serde_json::from_slice(&doc.value).unwrap(),
                None => Vec::new(),
            };
            items.push(i);
            Ok(Some(Bytes::from(serde_json::to_vec(&items).unwrap())))
        });
        store.update_doc(&k, "list", edit).await.unwrap()
    })
    .await;
    // Every edit saw the one before it.
    versions.sort_unstable();
    assert_eq!(versions, (1..=WRITERS as u64).collect::<Vec<_>>());
}

/// Appends `suffix` to document "d" through `store`'s `update_doc`; the version written.
async fn add(store: &dyn Store, k: &ThreadKey, suffix: &'static str, seen: &Seen) -> u64 {
    store
        .update_doc(k, "d", append(suffix, seen.clone()))
        .await
        .unwrap()
}

/// A replica's edit after another replica wrote (what it last saw is stale) edits the value
/// the other one wrote.
async fn update_doc_edits_another_replicas_write(f: Fixture) {
    let k = key("t1", "alice");
    let seen = Seen::default();
    add(&*f.store, &k, "a", &seen).await;
    add(&*f.peer, &k, "b", &seen).await;
    assert_eq!(add(&*f.store, &k, "c", &seen).await, 3);
    assert_eq!(f.peer.get_doc(&k, "d").await.unwrap(), Some(v(3, "abc")));
    assert_eq!(seen.lock().unwrap().last(), Some(&Some((2, b("ab")))));
}

/// A thread deleted and created again by another replica starts its versions over: an edit
/// from a replica that saw the first one's document at the same version edits the new one.
async fn update_doc_edits_a_thread_created_again(f: Fixture) {
    let k = key("t1", "alice");
    let seen = Seen::default();
    add(&*f.store, &k, "old", &seen).await;
    assert!(f.peer.delete_thread(&k, &["d"]).await.unwrap());
    assert_eq!(add(&*f.peer, &k, "new", &seen).await, 1);
    assert_eq!(add(&*f.store, &k, "!", &seen).await, 2);
    assert_eq!(f.peer.get_doc(&k, "d").await.unwrap(), Some(v(2, "new!")));
}

/// An edit that declines to write answers from the stored value, not from a stale copy: here
/// it writes only once the text has a "b", which another replica added.
async fn update_doc_declines_only_on_the_stored_value(f: Fixture) {
    let k = key("t1", "alice");
    add(&*f.store, &k, "a", &Seen::default()).await;
    add(&*f.peer, &k, "b", &Seen::default()).await;
    let once_b: DocEdit = Box::new(|doc| {
        Ok(doc
            .filter(|d| d.value.contains(&b'b'))
            .map(|d| Bytes::from([d.value.as_ref(), b"c"].concat())))
    });
    assert_eq!(f.store.update_doc(&k, "d", once_b).await.unwrap(), 3);
    assert_eq!(f.peer.get_doc(&k, "d").await.unwrap(), Some(v(3, "abc")));
    // And one that declines on the stored value reports its version.
    let never: DocEdit = Box::new(|_| Ok(None));
    assert_eq!(f.store.update_doc(&k, "d", never).await.unwrap(), 3);
}
