//! The lease list behind run takeovers, on every store: a running run is listed once its lease
//! ends, renewing moves it, ending or deleting the run takes it off, and a record that expired
//! is never listed.

use std::time::Duration;

use agentd::agent::message::now_ms;
use agentd::store::Cas;

use super::{Fixture, b};

suite!(expired_leases_list_runs_whose_owner_stopped_renewing);

async fn expired_leases_list_runs_whose_owner_stopped_renewing(f: Fixture) {
    let (s, long) = (&f.store, Duration::from_secs(30));
    let now = now_ms();
    let listed = |ids: Vec<String>, id: &str| ids.iter().any(|x| x == id);
    // "old" lapsed a second ago, "fresh" runs for another minute, "done" never had a lease.
    assert_eq!(
        s.cas_run("old", 0, b("a"), long, Some(now - 1_000))
            .await
            .unwrap(),
        Cas::Written(1)
    );
    s.cas_run("fresh", 0, b("a"), long, Some(now + 60_000))
        .await
        .unwrap();
    s.cas_run("done", 0, b("a"), long, None).await.unwrap();
    let due = f.peer.expired_leases(now_ms(), 100).await.unwrap();
    assert!(listed(due.clone(), "old"), "{due:?}");
    assert!(!listed(due.clone(), "fresh"), "{due:?}");
    assert!(!listed(due, "done"));

    // Renewed: off the list until the new end; a write that ends the run takes it off.
    s.cas_run("old", 1, b("b"), long, Some(now_ms() + 60_000))
        .await
        .unwrap();
    assert!(!listed(
        s.expired_leases(now_ms(), 100).await.unwrap(),
        "old"
    ));
    assert!(listed(
        s.expired_leases(now_ms() + 120_000, 100).await.unwrap(),
        "old"
    ));
    s.cas_run("old", 2, b("c"), long, None).await.unwrap();
    assert!(!listed(
        s.expired_leases(now_ms() + 120_000, 100).await.unwrap(),
        "old"
    ));
    // A conflicting write changes nothing, the lease list included.
    assert!(matches!(
        s.cas_run("fresh", 7, b("x"), long, Some(now - 5_000))
            .await
            .unwrap(),
        Cas::Conflict(_)
    ));
    assert!(!listed(
        s.expired_leases(now_ms(), 100).await.unwrap(),
        "fresh"
    ));

    // Deleted, or expired with its record: never listed.
    s.delete_run("fresh").await.unwrap();
    assert!(!listed(
        s.expired_leases(now_ms() + 120_000, 100).await.unwrap(),
        "fresh"
    ));
    s.cas_run(
        "short",
        0,
        b("a"),
        Duration::from_millis(200),
        Some(now - 1),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!listed(
        s.expired_leases(now_ms(), 100).await.unwrap(),
        "short"
    ));

    // At most `limit`.
    for i in 0..5 {
        s.cas_run(&format!("many-{i}"), 0, b("a"), long, Some(now - 100))
            .await
            .unwrap();
    }
    assert_eq!(s.expired_leases(now_ms(), 3).await.unwrap().len(), 3);
}
