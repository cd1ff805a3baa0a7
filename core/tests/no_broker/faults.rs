//! Faults a leader must survive or notice, on the
//! in-memory transport and a manual clock, where the fault can be made
//! exactly: a cluster that stops answering, a write that hangs, a wall clock
//! that steps, a member deposed without noticing.

use crate::world;

use std::time::Duration;

use krabka_coordination::codec::{decode_lease, encode_key, Key};
use krabka_coordination::events::{self, EventKind};
use krabka_coordination::transport::{Coordinator, StateRecord, Superseded};
use krabka_coordination::{Clock, Error, ErrorKind, STATE_TOPIC};
use world::*;

/// How long one write of an epoch may take in these tests.
const WITHIN: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "current_thread")]
async fn a_leader_cut_off_from_the_cluster_ends_its_term_when_its_own_lease_runs_out() {
    let w = World::new();
    let (tx, mut rx) = events::channel();
    let a = w.spawn_with("a", w.options().with_events(tx));
    w.run_until(T0).await;
    let a = leader(a).await;
    // One renewal commits at T0 + RENEW; the local deadline is LEASE after
    // its send time.
    w.run_until(T0 + ms(RENEW)).await;
    assert!(names(&drain(&mut rx)).contains(&"renewed"));
    let last_renewal = T0 + ms(RENEW);
    w.cluster.set_unavailable(true);
    w.run_until(last_renewal + ms(LEASE) - 1_000).await;
    assert!(a.is_held(), "the lease has not run out yet");
    assert!(a.renewal_failures() > 0, "renewals are failing");
    assert!(a.lease_left() > Duration::ZERO && a.lease_left() <= Duration::from_secs(1));
    let failing: Vec<u32> = drain(&mut rx)
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::RenewalFailing { failures, .. } => Some(failures),
            _ => None,
        })
        .collect();
    assert!(!failing.is_empty(), "renewal_failing is reported");
    assert!(failing.windows(2).all(|p| p[1] == p[0] + 1), "{failing:?}");

    w.run_until(last_renewal + ms(LEASE)).await;
    assert!(!a.is_held(), "the term ends at the local deadline");
    assert_eq!(a.lease_left(), Duration::ZERO);
    let why = a.err().expect("ended");
    assert_eq!(why.kind(), ErrorKind::LeaseExpired, "{why}");
    let tail = names(&drain(&mut rx));
    assert_eq!(tail.last(), Some(&"lease_expired"), "{tail:?}");
    // done() has resolved.
    tokio::time::timeout(Duration::from_secs(1), a.done())
        .await
        .expect("done fires");
    // A guarded write afterwards says why the term ended.
    let e = a.write(vec![order("late")]).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseExpired, "{e}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_stepped_wall_clock_moves_no_local_deadline() {
    let w = World::new();
    let (tx, mut rx) = events::channel();
    let a = w.spawn_with("a", w.options().with_events(tx));
    w.run_until(T0).await;
    let a = leader(a).await;
    // The wall clock jumps an hour ahead, then two hours back: no time
    // passes, so no renewal is due and the lease is not over.
    w.clock.step_wall(3_600_000);
    settle().await;
    w.clock.step_wall(-7_200_000);
    settle().await;
    assert!(a.is_held());
    assert_eq!(a.lease_left(), LEASE, "no monotonic time passed");
    // Renewals go on every RENEW of monotonic time and stamp the wall time.
    let start = w.clock.now_millis();
    w.run_until(start + 3 * ms(RENEW)).await;
    let renewed: Vec<i64> = drain(&mut rx)
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Renewed { deadline } => Some(deadline),
            _ => None,
        })
        .collect();
    assert_eq!(renewed.len(), 3, "{renewed:?}");
    assert_eq!(renewed[0], start + ms(RENEW) + ms(LEASE), "wall deadlines");
    assert!(a.is_held());
}

#[tokio::test(flavor = "current_thread")]
async fn a_stuck_guarded_write_never_starves_the_renewals() {
    let w = World::new();
    let (tx, mut rx) = events::channel();
    let a = w.spawn_with("a", w.options().with_events(tx));
    w.run_until(T0).await;
    let a = std::sync::Arc::new(leader(a).await);
    drain(&mut rx);
    // The data topic's partition is unavailable: the write hangs.
    w.cluster.set_stalled("orders", true);
    let writer = std::sync::Arc::clone(&a);
    let write = tokio::spawn(async move { writer.write(vec![order("stuck")]).await });
    // The write holds the producer for at most one renew interval; the
    // renewal due at T0 + RENEW goes right after.
    w.run_until(T0 + ms(RENEW) + 1_000).await;
    assert!(
        write.is_finished(),
        "the write gave up after one renew interval"
    );
    let e = write.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transient, "{e}");
    assert!(e.to_string().contains("aborted"), "{e}");
    assert!(
        w.cluster.committed("orders", 0).is_empty(),
        "nothing of the aborted write is visible"
    );
    w.run_until(T0 + 5 * ms(RENEW)).await;
    let n = names(&drain(&mut rx));
    assert!(
        n.iter().filter(|n| **n == "renewed").count() >= 4,
        "renewals went on: {n:?}"
    );
    assert!(a.is_held());
    assert_eq!(a.renewal_failures(), 0);
    // Once the partition is back, writes go through again.
    w.cluster.set_stalled("orders", false);
    a.write(vec![order("after")]).await.unwrap();
    assert_eq!(w.cluster.committed("orders", 0).len(), 1);
}

/// A process paused while its guarded write waited (SIGSTOP, a VM
/// migration) resumes past its lease: the write's deadline and the lease ran
/// out together. The write reports the term's end (LEASE_EXPIRED), not a
/// transient failure to retry: nothing of it was written, and the member no
/// longer leads.
#[tokio::test(flavor = "current_thread")]
async fn a_write_waiting_while_the_process_is_paused_past_its_lease_reports_lease_expired() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = std::sync::Arc::new(leader(a).await);
    w.cluster.set_stalled("orders", true);
    let writer = std::sync::Arc::clone(&a);
    let write = tokio::spawn(async move { writer.write(vec![order("in flight")]).await });
    settle().await;
    assert!(
        !write.is_finished(),
        "the write waits for the stalled partition"
    );
    // The pause: the clock jumps past the lease with nothing run between.
    w.clock.advance(LEASE + Duration::from_secs(5));
    settle().await;
    let e = write.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseExpired, "{e}");
    assert!(!a.is_held());
    assert_eq!(a.err().unwrap().kind(), ErrorKind::LeaseExpired);
    assert!(
        w.cluster.committed("orders", 0).is_empty(),
        "nothing of the write is visible"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_stuck_state_partition_ends_the_term_at_the_local_deadline_not_later() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    w.cluster.set_stalled(STATE_TOPIC, true);
    w.run_until(T0 + ms(LEASE) - 1_000).await;
    assert!(a.is_held(), "renewals hang but the lease has time left");
    w.run_until(T0 + ms(LEASE)).await;
    assert!(!a.is_held());
    assert_eq!(a.err().unwrap().kind(), ErrorKind::LeaseExpired);
}

/// A resign stops the renewals; one whose tombstone cannot be written (the
/// state partition stuck) must not keep the term alive past the local
/// deadline, and the error says it was the resign that did not finish, not
/// renewals that failed.
#[tokio::test(flavor = "current_thread")]
async fn a_resign_that_cannot_finish_ends_the_term_at_the_local_deadline_saying_so() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = std::sync::Arc::new(leader(a).await);
    w.cluster.set_stalled(STATE_TOPIC, true);
    // A second into the term: the resign's own steps are bounded a lease
    // from now, past the local deadline (the first lease's send time plus
    // the lease).
    w.run_until(T0 + 1_000).await;
    let resigner = std::sync::Arc::clone(&a);
    let _resign = tokio::spawn(async move { resigner.resign().await });
    w.run_until(T0 + ms(LEASE) - 1_000).await;
    assert!(a.is_held(), "the resign waits, the lease has time left");
    w.run_until(T0 + ms(LEASE)).await;
    assert!(!a.is_held());
    let e = a.err().unwrap();
    assert_eq!(e.kind(), ErrorKind::LeaseExpired, "{e}");
    assert!(
        e.to_string().contains("before its resign finished"),
        "the error names the resign: {e}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_deposed_member_that_resigns_never_fences_its_successor() {
    let w = World::new();
    let (tx, mut rx) = events::channel();
    let a = w.spawn_with("a", w.options().with_events(tx));
    w.run_until(T0).await;
    let a = leader(a).await;
    let old = a.token();
    // Unknown to a (paused, cut off), b took over: a newer epoch and its
    // lease.
    let b = w.transport();
    let b_epoch = b.acquire_epoch(ROLE, LEASE).await.unwrap();
    let lease_key =
        krabka_coordination::codec::encode_key(&krabka_coordination::Key::lease(ROLE)).unwrap();
    let b_lease = krabka_coordination::codec::encode_lease(&krabka_coordination::Lease {
        member: "b".into(),
        token: b_epoch.token(),
        granted_at: T0,
        deadline: T0 + ms(LEASE),
    })
    .unwrap();
    b_epoch
        .write_lease(
            StateRecord {
                partition: w.partition(),
                key: lease_key,
                value: Some(b_lease),
            },
            WITHIN,
        )
        .await
        .unwrap();
    assert!(b_epoch.token() > old);

    a.resign().await.unwrap();
    assert!(!a.is_held());
    assert_eq!(a.err().unwrap().kind(), ErrorKind::Resigned);
    // The coordinator still holds b's epoch, b's lease stands, b writes on.
    let described = krabka_coordination::leadership::describe_leadership(b.as_ref(), ROLE)
        .await
        .unwrap();
    assert_eq!(described.token, b_epoch.token(), "a minted nothing above b");
    let state = krabka_coordination::leadership::describe_role_state(b.as_ref(), ROLE, PARTITIONS)
        .await
        .unwrap();
    assert_eq!(
        state.lease.map(|l| (l.member, l.token)),
        Some(("b".to_owned(), b_epoch.token())),
        "a's tombstone was fenced, b's lease stands"
    );
    b_epoch
        .write_guarded(vec![order("b-after")], WITHIN)
        .await
        .unwrap();
    let tail = drain(&mut rx);
    assert_eq!(
        names(&tail[tail.len() - 2..]),
        ["resigned", "deregistered"],
        "{tail:?}"
    );
    assert!(
        tail.iter()
            .any(|e| matches!(e.kind, EventKind::Resigned { cleared: false })),
        "the resign reports that it cleared nothing: {tail:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_current_holder_that_resigns_supersedes_its_own_epoch_exactly_once() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let t = w.transport();
    a.resign().await.unwrap();
    let after = krabka_coordination::leadership::describe_leadership(t.as_ref(), ROLE)
        .await
        .unwrap()
        .token;
    assert!(after > a.token(), "the resigned token is superseded");
    assert_eq!(after.producer_id, a.token().producer_id);
    assert_eq!(
        after.producer_epoch,
        a.token().producer_epoch + 1,
        "one bump"
    );
    // A second resign waits for nothing and bumps nothing.
    a.resign().await.unwrap();
    let again = krabka_coordination::leadership::describe_leadership(t.as_ref(), ROLE)
        .await
        .unwrap()
        .token;
    assert_eq!(again, after);
}

/// A standby that registered after the leader won is found by the resign's
/// read beside the tombstone: the leader deregisters at once and bumps
/// nothing, and the standby's mint is the very next epoch. (A bump of the
/// leader's own could land in the standby's first transaction and fence it:
/// Kafka's coordinator aborts an open transaction for any InitProducerId of
/// the producer id.)
#[tokio::test(flavor = "current_thread")]
async fn a_resign_leaves_the_bump_to_a_standby_that_registered_after_the_win() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let b = w.spawn("b");
    w.run_until(T0 + 1_000).await;
    assert_eq!(w.ranks().await, ["a", "b"], "b waits behind a");
    a.resign().await.unwrap();
    w.run_until(T0 + 2_000).await;
    let b = leader(b).await;
    assert_eq!(b.token().producer_id, a.token().producer_id);
    assert_eq!(
        b.token().producer_epoch,
        a.token().producer_epoch + 1,
        "b minted the epoch after a's: a bumped nothing"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn supersede_bumps_only_the_current_epoch() {
    let w = World::new();
    let t = w.transport();
    let first = t.acquire_epoch(ROLE, LEASE).await.unwrap();
    let second = t.acquire_epoch(ROLE, LEASE).await.unwrap();
    assert_eq!(
        first.supersede(WITHIN).await.unwrap(),
        Superseded::AlreadySuperseded
    );
    let Superseded::Bumped(next) = second.supersede(WITHIN).await.unwrap() else {
        panic!("the current epoch is bumped");
    };
    assert!(next > second.token());
    let e = second
        .write_guarded(vec![order("x")], WITHIN)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Fenced(_)), "{e}");
}

#[tokio::test(flavor = "current_thread")]
async fn an_unknown_outcome_is_reported_and_its_resolution_is_never_silent() {
    let w = World::new();
    let (tx, mut rx) = events::channel();
    let a = w.spawn_with("a", w.options().with_events(tx));
    w.run_until(T0).await;
    let a = leader(a).await;
    w.cluster.set_next_commit_unknown(true);
    let e = a.write(vec![order("maybe")]).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutcomeUnknown, "{e}");
    assert!(a.is_held(), "an unknown outcome does not end the term");
    assert!(
        orders(&w).is_empty(),
        "not visible while the commit is pending"
    );
    // The next renewal completes the pending commit, and says so.
    w.run_until(T0 + ms(RENEW)).await;
    assert_eq!(orders(&w), ["maybe"]);
    let seen: Vec<_> = drain(&mut rx)
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::WriteResolved { committed } => Some(committed),
            _ => None,
        })
        .collect();
    assert_eq!(seen, [true], "the resolution is reported once");

    // An unknown outcome that ends aborted is reported too.
    w.cluster.set_next_commit_unknown(false);
    assert_eq!(
        a.write(vec![order("lost")]).await.unwrap_err().kind(),
        ErrorKind::OutcomeUnknown
    );
    a.write(vec![order("next")]).await.unwrap();
    assert_eq!(orders(&w), ["maybe", "next"]);
    assert!(drain(&mut rx)
        .iter()
        .any(|e| matches!(e.kind, EventKind::WriteResolved { committed: false })));
}

#[tokio::test(flavor = "current_thread")]
async fn a_cancel_during_the_first_lease_write_leaves_no_lease_behind() {
    let w = World::new();
    let cancel = tokio_util::sync::CancellationToken::new();
    let (tx, mut rx) = events::channel();
    // Lease writes to the state partition hang (registrations do not): the
    // candidate registers, mints, and its first lease write waits.
    w.cluster.set_stalled(STATE_TOPIC, true);
    let a = w.spawn_with("a", w.options().with_cancel(cancel.clone()).with_events(tx));
    w.run_until(T0 + 1_000).await;
    let seen = names(&drain(&mut rx));
    assert_eq!(seen, ["registered", "challenging"], "{seen:?}");
    cancel.cancel();
    settle().await;
    assert!(!a.is_finished(), "a write in flight is not cut short");
    // The write gives up at its bound (nothing written), then the cancel
    // takes effect.
    w.run_until(T0 + ms(LEASE) + 1_000).await;
    w.cluster.set_stalled(STATE_TOPIC, false);
    w.run_until(T0 + ms(LEASE) + 2_000).await;
    let e = a.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled, "{e}");
    let state = krabka_coordination::leadership::describe_role_state(
        w.transport().as_ref(),
        ROLE,
        PARTITIONS,
    )
    .await
    .unwrap();
    assert!(state.lease.is_none(), "no lease is left: {state:?}");
    assert!(state.roster.is_empty(), "deregistered: {state:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_write_refused_because_the_lease_ran_out_ends_the_term_at_once() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = std::sync::Arc::new(leader(a).await);
    // A renewal hangs on the state partition and holds the producer.
    w.cluster.set_stalled(STATE_TOPIC, true);
    w.run_until(T0 + ms(RENEW) + 1_000).await;
    let writer = std::sync::Arc::clone(&a);
    let write = tokio::spawn(async move { writer.write(vec![order("late")]).await });
    w.run_until(T0 + ms(LEASE)).await;
    let e = write.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseExpired, "{e}");
    assert!(!a.is_held(), "the refusal and the end of the term agree");
    assert_eq!(a.err().unwrap().kind(), ErrorKind::LeaseExpired);
}

/// A machine suspended (a laptop's lid closed, a VM paused by its host)
/// longer than the lease: the lease ran out on every other member's clock
/// meanwhile, and a standby may lead now. The boot clock counted the
/// suspend, the monotonic timers did not fire; the leader knows at its first
/// check that its term ended, and a guarded write fails without a request.
#[tokio::test(flavor = "current_thread")]
async fn a_leader_suspended_past_its_lease_knows_at_its_first_check_that_the_term_ended() {
    let w = World::new();
    let (tx, mut rx) = events::channel();
    let a = w.spawn_with("a", w.options().with_events(tx));
    w.run_until(T0).await;
    let a = leader(a).await;
    w.run_until(T0 + 1_000).await;
    drain(&mut rx);

    w.clock.suspend(LEASE + Duration::from_secs(5));
    settle().await;
    assert_eq!(a.lease_left(), Duration::ZERO);
    assert!(!a.is_held());
    let e = a.err().expect("the term ended");
    assert_eq!(e.kind(), ErrorKind::LeaseExpired, "{e}");
    assert_eq!(names(&drain(&mut rx)), ["lease_expired"]);

    let requests = w.cluster.requests();
    let e = a.write(vec![order("after the resume")]).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseExpired, "{e}");
    assert_eq!(w.cluster.requests(), requests, "the write was not sent");
    assert!(w.cluster.committed("orders", 0).is_empty());
}

/// The renewal loop's timer does not fire during a suspend either; when it
/// wakes after the resume it finds the lease gone and ends the term, rather
/// than renewing a lease a standby may have taken over.
#[tokio::test(flavor = "current_thread")]
async fn a_renewal_waking_after_a_suspend_past_the_lease_ends_the_term_without_renewing() {
    let w = World::new();
    let (tx, mut rx) = events::channel();
    let a = w.spawn_with("a", w.options().with_events(tx));
    w.run_until(T0).await;
    let a = leader(a).await;
    drain(&mut rx);

    w.clock.suspend(LEASE + Duration::from_secs(5));
    settle().await;
    let resumed = w.clock.now_millis();
    // The renewal timer fires one renew interval (of monotonic time) after
    // the first lease; nothing calls the handle meanwhile.
    w.run_until(resumed + ms(RENEW)).await;
    assert_eq!(names(&drain(&mut rx)), ["lease_expired"]);
    assert_eq!(
        a.err().expect("the term ended").kind(),
        ErrorKind::LeaseExpired
    );
    let renewed_after = w
        .state_log()
        .iter()
        .filter(|r| r.key == encode_key(&Key::lease(ROLE)).unwrap())
        .filter_map(|r| decode_lease(r.value.as_deref()?).ok())
        .filter(|l| l.granted_at > T0)
        .count();
    assert_eq!(renewed_after, 0, "no lease was written after the suspend");
}

/// A suspend shorter than the lease costs the leader the lease time it
/// slept through, and no more: it still holds the role.
#[tokio::test(flavor = "current_thread")]
async fn a_suspend_shorter_than_the_lease_shortens_the_lease_left_by_as_much() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    assert_eq!(a.lease_left(), LEASE);
    w.clock.suspend(Duration::from_secs(8));
    settle().await;
    assert_eq!(a.lease_left(), LEASE - Duration::from_secs(8));
    assert!(a.is_held());
}
