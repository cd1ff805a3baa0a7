//! The roster and the state partition under faults, on the in-memory transport
//! and a manual clock: a stall of a neighbour role's transaction,
//! registrations of dead members, two live processes with one member id, a
//! holder gone from the roster, a far-future deadline.

use crate::world;

use std::time::Duration;

use krabka_coordination::codec::{encode_key, encode_lease, Key, Lease};
use krabka_coordination::events;
use krabka_coordination::leadership::describe_leadership;
use krabka_coordination::transport::{Coordinator, StateRecord};
use krabka_coordination::{role_partition, ErrorKind};
use world::*;

/// A role other than [`ROLE`] whose records share its partition.
fn neighbour() -> String {
    (0..)
        .map(|i| format!("neighbour-{i}"))
        .find(|r| {
            role_partition(r, PARTITIONS).unwrap() == role_partition(ROLE, PARTITIONS).unwrap()
        })
        .unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn a_neighbours_stalled_transaction_does_not_fail_over_a_healthy_leader() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let (tx, mut rx) = events::channel();
    let b = w.spawn_with("b", w.options().with_events(tx));
    w.run_until(T0 + 1_000).await;
    // A holder of the neighbour role stalls mid-transaction on the shared
    // partition: everything after it (a's renewals too) is hidden.
    let stalled = w.transport().mint(&neighbour()).unwrap();
    stalled
        .write_lease_open(StateRecord {
            partition: w.partition(),
            key: encode_key(&Key::lease(neighbour())).unwrap(),
            value: Some(b"stalled".to_vec()),
        })
        .unwrap();
    // Well past a's last visible deadline.
    w.run_until(T0 + 3 * ms(LEASE)).await;
    assert!(!b.is_finished(), "b does not take over");
    assert!(a.is_held(), "a renews all along");
    let seen = names(&drain(&mut rx));
    assert!(seen.contains(&"held_back"), "{seen:?}");
    assert!(!seen.contains(&"challenging"), "{seen:?}");
    // The neighbour's transaction is aborted (a newer mint of its role):
    // a's renewals show up and b goes on waiting.
    drop(w.transport().mint(&neighbour()).unwrap());
    w.run_until(T0 + 4 * ms(LEASE)).await;
    assert!(!b.is_finished());
    assert!(a.is_held());
    let t = describe_leadership(w.transport().as_ref(), ROLE)
        .await
        .unwrap();
    assert_eq!(t.token, a.token());
}

#[tokio::test(flavor = "current_thread")]
async fn the_winner_removes_the_registrations_of_members_that_missed_their_turn() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    w.ghost("ghost-1").await;
    let b = w.spawn("b");
    w.run_until(T0 + 100).await;
    w.ghost("ghost-2").await;
    let c = w.spawn("c");
    w.run_until(T0 + 200).await;
    assert_eq!(w.ranks().await, ["a", "ghost-1", "b", "ghost-2", "c"]);

    // a dies: ghost-1 misses its turn at the deadline, b takes its own.
    drop(a);
    let deadline = T0 + ms(LEASE);
    w.run_until(deadline + ms(STAGGER)).await;
    let b = leader(b).await;
    settle().await;
    assert_eq!(
        w.ranks().await,
        ["b", "ghost-2", "c"],
        "a (expired) and ghost-1 (passed over) are removed"
    );

    // b dies: c waits one stagger (for ghost-2), not three.
    let deadline2 = b.lease().deadline;
    drop(b);
    w.run_until(deadline2 + ms(STAGGER)).await;
    assert!(c.is_finished(), "c leads one stagger after the deadline");
    let c = leader(c).await;
    settle().await;
    assert_eq!(w.ranks().await, ["c"]);
    assert!(c.is_held());
}

#[tokio::test(flavor = "current_thread")]
async fn a_second_live_process_under_the_leaders_member_id_gets_a_loud_error() {
    let w = World::new();
    let first = w.spawn("a");
    w.run_until(T0).await;
    let first = leader(first).await;
    let twin = w.spawn("a");
    // The twin waits behind the lease under its id and sees it renewed.
    w.run_until(T0 + 2 * ms(RENEW)).await;
    assert!(twin.is_finished(), "the twin stops");
    let e = twin.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Fatal, "{e}");
    assert!(e.to_string().contains("another live process"), "{e}");
    assert!(first.is_held(), "the first process was never fenced");
    let t = describe_leadership(w.transport().as_ref(), ROLE)
        .await
        .unwrap();
    assert_eq!(t.token, first.token());
}

#[tokio::test(flavor = "current_thread")]
async fn a_waiting_member_whose_id_is_taken_by_a_later_process_gets_a_loud_error() {
    let w = World::new();
    let leader_h = w.spawn("holder");
    w.run_until(T0).await;
    let _holder = leader(leader_h).await;
    let first = w.spawn("b");
    w.run_until(T0 + 100).await;
    let _second = w.spawn("b");
    w.run_until(T0 + 1_200).await;
    assert!(
        first.is_finished(),
        "the earlier process sees the later registration"
    );
    let e = first.await.unwrap().unwrap_err();
    assert!(e.to_string().contains("another live process"), "{e}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_holder_missing_from_the_roster_is_not_challenged_before_its_lease_could_expire() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let b = w.spawn("b");
    w.run_until(T0 + 100).await;
    // a's registration disappears (removed by a tool, say); a still renews.
    use krabka_coordination::transport::Registrar;
    w.transport()
        .append(StateRecord {
            partition: w.partition(),
            key: encode_key(&Key::registration(ROLE, "a")).unwrap(),
            value: None,
        })
        .await
        .unwrap();
    w.run_until(T0 + 3 * ms(LEASE)).await;
    assert!(!b.is_finished(), "b never takes over from a live holder");
    assert!(a.is_held());
}

#[tokio::test(flavor = "current_thread")]
async fn a_far_future_deadline_delays_the_failover_by_one_lease_at_most() {
    let w = World::new();
    // A holder whose clock runs an hour ahead writes its lease and dies.
    let t = w.transport();
    let epoch = t.acquire_epoch(ROLE, LEASE).await.unwrap();
    w.ghost("fast-clock").await;
    let ahead = T0 + 3_600_000;
    let lease = encode_lease(&Lease {
        member: "fast-clock".into(),
        token: epoch.token(),
        granted_at: ahead,
        deadline: ahead + ms(LEASE),
    })
    .unwrap();
    epoch
        .write_lease(
            StateRecord {
                partition: w.partition(),
                key: encode_key(&Key::lease(ROLE)).unwrap(),
                value: Some(lease),
            },
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    drop(epoch);
    let b = w.spawn("b");
    w.run_until(T0 + ms(LEASE) + 1_000).await;
    assert!(
        b.is_finished(),
        "b takes over one lease after it first saw the lease, not an hour later"
    );
    let b = leader(b).await;
    assert!(b.is_held());
}

#[tokio::test(flavor = "current_thread")]
async fn a_member_restarted_under_its_id_is_no_twin_when_its_predecessors_clock_ran_ahead() {
    let w = World::new();
    // "a" leads with a clock a minute ahead and dies (SIGKILL: no resign).
    let t = w.transport();
    let epoch = t.acquire_epoch(ROLE, LEASE).await.unwrap();
    w.ghost("a").await;
    let ahead = T0 + 60_000;
    let lease = encode_lease(&Lease {
        member: "a".into(),
        token: epoch.token(),
        granted_at: ahead,
        deadline: ahead + ms(LEASE),
    })
    .unwrap();
    epoch
        .write_lease(
            StateRecord {
                partition: w.partition(),
                key: encode_key(&Key::lease(ROLE)).unwrap(),
                value: Some(lease),
            },
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    drop(epoch);
    // "a" comes back at once under the same id, with a true clock: its own
    // last lease is no twin's, it waits like any restarted member.
    let restarted = w.spawn("a");
    w.run_until(T0 + ms(LEASE) + 1_000).await;
    assert!(
        restarted.is_finished(),
        "the restarted member takes the role"
    );
    let a = leader(restarted).await;
    assert!(a.is_held());
}
