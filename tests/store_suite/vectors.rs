//! The vector logs (semantic recall) on both stores: sequence numbers, paging, the epoch that
//! deletions bump, deletion by thread and by position, and what a second replica reads.

use agentd::store::{VectorBatch, VectorEntry};
use bytes::Bytes;

use super::Fixture;

suite!(
    vectors_append_and_page,
    vectors_delete_by_position_and_thread_bump_the_epoch,
    vectors_replacing_a_message_keeps_one_entry,
);

fn entry(thread: &str, position: u64, fill: u8) -> VectorEntry {
    // Bytes that look like separators must survive too.
    VectorEntry {
        thread_id: thread.into(),
        position,
        vector: Bytes::from(vec![fill, b':', 0, 255, fill, b'{', b'}', 0]),
    }
}

fn seqs(batch: &VectorBatch) -> Vec<u64> {
    batch.entries.iter().map(|(seq, _)| *seq).collect()
}

async fn vectors_append_and_page(f: Fixture) {
    let empty = f.store.read_vectors("r", 0, 10).await.unwrap();
    assert_eq!(empty, VectorBatch::default());
    let first = vec![entry("t1", 0, 1), entry("t2:x", 5, 2)];
    f.store.append_vectors("r", first.clone()).await.unwrap();
    f.store
        .append_vectors("r", vec![entry("t1", 1, 3)])
        .await
        .unwrap();
    f.store.append_vectors("r", Vec::new()).await.unwrap();
    let page = f.peer.read_vectors("r", 0, 2).await.unwrap();
    assert_eq!(seqs(&page), [1, 2]);
    assert_eq!(page.entries[0].1, first[0]);
    assert_eq!(page.entries[1].1, first[1]);
    assert_eq!((page.epoch, page.last_seq), (0, 3));
    let rest = f.peer.read_vectors("r", 2, 100).await.unwrap();
    assert_eq!(seqs(&rest), [3]);
    assert_eq!(rest.entries[0].1, entry("t1", 1, 3));
    assert!(
        f.store
            .read_vectors("r", 3, 100)
            .await
            .unwrap()
            .entries
            .is_empty()
    );
    let other = f.store.read_vectors("r2", 0, 100).await.unwrap();
    assert_eq!(other, VectorBatch::default(), "logs are per resource");
}

async fn vectors_delete_by_position_and_thread_bump_the_epoch(f: Fixture) {
    let entries = vec![
        entry("a", 0, 1),
        entry("a", 1, 2),
        entry("a", 2, 3),
        entry("b", 0, 4),
    ];
    f.store.append_vectors("r", entries).await.unwrap();
    let deleted = f
        .store
        .delete_vectors("r", "a", Some(&[1, 9]))
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    let batch = f.peer.read_vectors("r", 0, 100).await.unwrap();
    assert_eq!(
        (seqs(&batch), batch.epoch, batch.last_seq),
        (vec![1, 3, 4], 1, 4)
    );
    assert_eq!(
        f.store.delete_vectors("r", "a", Some(&[])).await.unwrap(),
        0
    );
    assert_eq!(f.store.delete_vectors("r", "a", None).await.unwrap(), 2);
    assert_eq!(f.store.delete_vectors("r", "a", None).await.unwrap(), 0);
    assert_eq!(f.store.delete_vectors("r2", "b", None).await.unwrap(), 0);
    let batch = f.peer.read_vectors("r", 0, 100).await.unwrap();
    assert_eq!(
        (seqs(&batch), batch.epoch),
        (vec![4], 2),
        "nothing deleted: no bump"
    );
    f.store
        .append_vectors("r", vec![entry("a", 3, 5)])
        .await
        .unwrap();
    let batch = f.peer.read_vectors("r", 4, 100).await.unwrap();
    assert_eq!(seqs(&batch), [5], "sequence numbers are never reused");
    assert_eq!(f.store.delete_vectors("r", "b", None).await.unwrap(), 1);
    assert_eq!(f.store.delete_vectors("r", "a", None).await.unwrap(), 1);
    let batch = f.peer.read_vectors("r", 0, 100).await.unwrap();
    assert_eq!(
        (batch.entries.len(), batch.epoch, batch.last_seq),
        (0, 4, 5)
    );
}

async fn vectors_replacing_a_message_keeps_one_entry(f: Fixture) {
    f.store
        .append_vectors("r", vec![entry("t", 0, 1), entry("t", 1, 2)])
        .await
        .unwrap();
    f.store
        .append_vectors("r", vec![entry("t", 0, 9)])
        .await
        .unwrap();
    let batch = f.peer.read_vectors("r", 0, 100).await.unwrap();
    assert_eq!(seqs(&batch), [2, 3]);
    assert_eq!(batch.entries[1].1, entry("t", 0, 9));
    assert_eq!(batch.epoch, 1, "readers holding the old entry must reload");
}
