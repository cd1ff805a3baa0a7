//! A guarded write never takes the time a renewal needs, whatever the
//! lease and renew interval (in-memory transport, manual clock).

use crate::world;

use std::time::Duration;

use krabka_coordination::events::{self, EventKind};
use krabka_coordination::{Clock, ErrorKind};
use world::*;

/// With a lease shorter than two renew intervals, a write that starts late
/// in an interval is cut where the renewal's share begins (lease - renew
/// before the deadline), so the renewal that follows it commits. Bounded
/// by the renew interval alone, the write held the producer until the
/// deadline and the term expired behind it.
#[tokio::test(flavor = "current_thread")]
async fn a_late_write_leaves_the_renewal_its_share_of_a_short_lease() {
    const SHORT_LEASE: Duration = Duration::from_secs(15);
    let w = World::new();
    let (tx, mut rx) = events::channel();
    let options = w.options().with_lease_duration(SHORT_LEASE).with_events(tx);
    let a = w.spawn_with("a", options);
    w.run_until(T0).await;
    let a = std::sync::Arc::new(leader(a).await);
    let elected = w.clock.now_millis();
    // One second before the renewal is due (RENEW after the first lease),
    // a write to a partition that does not answer.
    w.run_until(elected + ms(RENEW) - 1_000).await;
    w.cluster.set_stalled("orders", true);
    let writer = std::sync::Arc::clone(&a);
    let write = tokio::spawn(async move { writer.write(vec![order("stuck")]).await });
    settle().await;
    // The write is given until the renewal's share begins, about a second.
    w.run_until(elected + ms(RENEW) + 1_000).await;
    assert!(
        write.is_finished(),
        "the write gave up where the renewal's share began"
    );
    let e = write.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transient, "{e}");
    // The renewal went right after it, and the term goes on.
    w.run_until(elected + ms(SHORT_LEASE) + 1_000).await;
    assert!(a.is_held(), "{:?}", a.err());
    let renewed = drain(&mut rx)
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Renewed { .. }))
        .count();
    assert!(renewed >= 1, "a renewal committed after the write");
}

/// While renewals fail and less than the renewal's share of the lease is
/// left, a write fails at once without sending anything, rather than
/// taking the last of the lease from the renewal.
#[tokio::test(flavor = "current_thread")]
async fn a_write_into_the_renewals_share_fails_at_once() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let elected = w.clock.now_millis();
    // Renewals fail from now on: the cluster does not answer.
    w.cluster.set_unavailable(true);
    w.run_until(elected + ms(LEASE) - ms(RENEW) + 1_000).await;
    assert!(a.is_held());
    assert!(a.renewal_failures() > 0);
    assert!(a.lease_left() < RENEW, "{:?}", a.lease_left());
    // The cluster answers writes again, but the lease left is the renewal's.
    w.cluster.set_unavailable(false);
    let requests = w.cluster.requests();
    let e = a.write(vec![order("late")]).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transient, "{e}");
    assert!(e.to_string().contains("kept for its renewal"), "{e}");
    assert_eq!(w.cluster.requests(), requests, "nothing was sent");
    assert!(w.cluster.committed("orders", 0).is_empty());
}

/// A lease that runs out while renewals fail says why the last one failed,
/// so the cause (a partition named by the transport, say) is not lost.
#[tokio::test(flavor = "current_thread")]
async fn an_expired_lease_names_the_last_renewal_failure() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let elected = w.clock.now_millis();
    w.cluster.set_unavailable(true);
    w.run_until(elected + ms(LEASE) + 1_000).await;
    let why = a.err().expect("the term ended");
    assert_eq!(why.kind(), ErrorKind::LeaseExpired, "{why}");
    assert!(
        why.to_string().contains("the last renewal failed: "),
        "{why}"
    );
}
