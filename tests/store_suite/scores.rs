//! The score lists on both stores: appends to several lists at once, paging by position, lists
//! kept apart (even with separator characters in their names), and what a second replica reads.

use bytes::Bytes;

use super::Fixture;

suite!(scores_append_to_every_list_and_page_in_order);

async fn scores_append_to_every_list_and_page_in_order(f: Fixture) {
    let lists = |run: &str| {
        vec![
            format!("run:{run}"),
            "thread:r\u{1f}t:1}".to_owned(),
            "agent:a".to_owned(),
        ]
    };
    assert!(
        f.store
            .read_scores("agent:a", 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    for i in 0..5u8 {
        let record = Bytes::from(vec![i, b':', 0, 255, b'{']);
        f.store
            .append_score(&lists(&format!("r{}", i % 2)), record)
            .await
            .unwrap();
    }
    let record = |i: u8| Bytes::from(vec![i, b':', 0, 255, b'{']);
    let page = f.peer.read_scores("agent:a", 0, 2).await.unwrap();
    assert_eq!(page, [record(0), record(1)]);
    let rest = f.peer.read_scores("agent:a", 2, 100).await.unwrap();
    assert_eq!(rest, [record(2), record(3), record(4)]);
    assert!(
        f.peer
            .read_scores("agent:a", 5, 100)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        f.peer
            .read_scores("agent:a", u64::MAX, 100)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        f.peer
            .read_scores("agent:a", 0, 0)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        f.peer.read_scores("run:r1", 0, 10).await.unwrap(),
        [record(1), record(3)]
    );
    assert_eq!(
        f.peer
            .read_scores("thread:r\u{1f}t:1}", 1, 1)
            .await
            .unwrap(),
        [record(1)]
    );
    // A list whose name extends another's is its own list.
    assert!(
        f.peer
            .read_scores("agent:", 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(f.peer.read_scores("run:r", 0, 10).await.unwrap().is_empty());
}
