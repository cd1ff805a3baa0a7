//! A standby that loses the cluster after it started keeps retrying and
//! reports every retry as an event, on the in-memory
//! transport and a manual clock, where the cut can be made exactly. That a
//! cluster unreachable from the start fails the acquire promptly instead is
//! tested on Kafka in `config_inputs`.

use crate::world;

use krabka_coordination::events::{self, Event, EventKind};
use krabka_coordination::ErrorKind;
use world::*;

/// The `retrying` events among `events`: (what, attempt, cause kind).
fn retries(events: &[Event]) -> Vec<(String, u32, ErrorKind)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Retrying {
                what,
                attempt,
                error,
                ..
            } => Some((what.to_string(), *attempt, error.kind())),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn a_standby_cut_off_from_the_cluster_keeps_retrying_and_reports_each_try() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let (tx, mut rx) = events::channel();
    let b = w.spawn_with("b", w.options().with_events(tx));
    w.run_until(T0 + 1_000).await;
    let before = drain(&mut rx);
    assert!(
        names(&before).contains(&"registered"),
        "{:?}",
        names(&before)
    );
    assert!(
        retries(&before).is_empty(),
        "no retry while the cluster answers"
    );

    // The cut: shorter than the lease, so the leader stays.
    w.cluster.set_unavailable(true);
    w.run_until(T0 + 1_000 + ms(RENEW)).await;
    let during = drain(&mut rx);
    let tries = retries(&during);
    assert!(tries.len() >= 2, "the standby keeps retrying: {tries:?}");
    for (i, (what, attempt, kind)) in tries.iter().enumerate() {
        assert_eq!(what, "following the state partition");
        assert_eq!(*attempt, i as u32 + 1, "attempts count up: {tries:?}");
        assert_eq!(*kind, ErrorKind::Transient);
    }
    assert!(!b.is_finished(), "the standby did not give up");
    assert!(!names(&during).contains(&"ended"), "{:?}", names(&during));

    // The cluster is back: the standby follows again and stops reporting.
    w.cluster.set_unavailable(false);
    w.run_until(T0 + 1_000 + 2 * ms(RENEW)).await;
    drain(&mut rx);
    w.run_until(T0 + 1_000 + 3 * ms(RENEW)).await;
    let after = drain(&mut rx);
    assert!(retries(&after).is_empty(), "{:?}", retries(&after));
    assert!(!b.is_finished(), "still a standby");
    assert!(a.is_held(), "the leader rode out the cut");
    b.abort();
}
