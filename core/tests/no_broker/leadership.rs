//! Deterministic tests of the election rules: the in-memory transport (with
//! the coordinator's minting and fencing semantics) driven by `ManualClock`.
//! No test waits on real time: tasks run on a current-thread runtime and
//! `settle` lets every ready task run before the clock moves.
//!
//! Every claim about Kafka's own behaviour is tested against a real broker
//! in the `kafka_*` and `e2e_*` tests; these test our rules.

use crate::captured;
use crate::world;

use std::sync::Arc;
use std::time::Duration;

use captured::Captured;
use krabka_coordination::codec::{encode_key, Key};
use krabka_coordination::leadership::{acquire_leadership, describe_leadership};
use krabka_coordination::transport::{Coordinator, OutRecord, StateRecord, Transport};
use krabka_coordination::{role_partition, Clock, Error, FencingToken};
use tokio_util::sync::CancellationToken;
use world::*;

/// How long one write of an epoch may take in these tests.
const WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

#[tokio::test(flavor = "current_thread")]
async fn rank0_takes_over_at_the_deadline_and_not_before() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let b = w.spawn("b");
    let c = w.spawn("c");
    w.run_until(T0 + 1).await;
    assert!(!b.is_finished() && !c.is_finished());
    assert_eq!(w.ranks().await, ["a", "b", "c"]);

    // a stops renewing (its process froze): its last lease is the one it wrote at T0.
    let deadline = a.lease().deadline;
    assert_eq!(deadline, T0 + 30_000);
    drop(a);
    w.run_until(deadline - 1).await;
    assert!(
        !b.is_finished(),
        "rank 0 must not challenge before the deadline"
    );
    w.run_until(deadline).await;
    let b = leader(b).await;
    assert!(!c.is_finished(), "rank 1 waits while rank 0 took over");
    assert!(b.token() > FencingToken::new(1000, 0));
    let status = describe_leadership(w.transport().as_ref(), ROLE)
        .await
        .unwrap();
    assert!(status.authoritative(&b.token()));
    w.run_until(deadline + STAGGER.as_millis() as i64 + 1).await;
    assert!(!c.is_finished(), "rank 1 sees b's lease and keeps waiting");
    assert!(b.is_held());
}

#[tokio::test(flavor = "current_thread")]
async fn rank1_challenges_one_stagger_after_the_deadline_when_rank0_did_not() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    w.ghost("b").await; // rank 0, but dead
    let c = w.spawn("c");
    w.run_until(T0 + 1).await;
    let deadline = a.lease().deadline;
    drop(a);
    w.run_until(deadline + STAGGER.as_millis() as i64 - 1).await;
    assert!(
        !c.is_finished(),
        "rank 1 must wait one stagger past the deadline"
    );
    w.run_until(deadline + STAGGER.as_millis() as i64).await;
    let c = leader(c).await;
    assert_eq!(c.member(), "c");
}

#[tokio::test(flavor = "current_thread")]
async fn a_live_holder_renews_and_keeps_the_role() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let b = w.spawn("b");
    // Ten lease durations pass; a renews every 10 s, so b never challenges.
    w.run_until(T0 + 10 * 30_000).await;
    assert!(a.is_held());
    assert!(!b.is_finished());
    assert!(a.lease().deadline >= T0 + 10 * 30_000);
    assert_eq!(a.lease().deadline - a.lease().granted_at, 30_000);
    // One epoch per term: renewals mint nothing.
    let status = describe_leadership(w.transport().as_ref(), ROLE)
        .await
        .unwrap();
    assert_eq!(status.token, a.token());
}

/// A standby behind a live holder logs its wait once, with the challenge
/// time in RFC 3339, not again at each of the holder's renewals; it logs
/// again when the holder changes.
#[tokio::test(flavor = "current_thread")]
async fn a_standby_logs_its_wait_once_per_holder_not_per_renewal() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .finish();
    // The current-thread runtime runs the members' tasks on this thread.
    let _log = tracing::subscriber::set_default(subscriber);
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let b = w.spawn("b");
    // Ten lease durations: thirty renewals of a.
    w.run_until(T0 + 10 * 30_000).await;
    assert!(a.is_held() && !b.is_finished());
    assert_eq!(captured.lines_with(" waiting "), 1, "one line for holder a");
    assert_eq!(captured.lines_with("holder=\"a\""), 1);
    // The first turn: a's first deadline, T0 + 30 s.
    assert_eq!(
        captured.lines_with("challenge_at=2023-11-14T22:13:50.000Z"),
        1
    );

    // a freezes; b takes over; c waits behind b: a line for the new holder.
    drop(a);
    w.run_until(T0 + 11 * 30_000).await;
    let b = leader(b).await;
    let c = w.spawn("c");
    w.run_until(T0 + 15 * 30_000).await;
    assert!(b.is_held() && !c.is_finished());
    assert_eq!(captured.lines_with("holder=\"b\""), 1);
    assert_eq!(captured.lines_with(" waiting "), 2);
}

#[tokio::test(flavor = "current_thread")]
async fn every_standby_challenging_at_once_leaves_exactly_one_leader() {
    let w = World::new();
    let opts = w.options().with_challenge_stagger(Duration::ZERO);
    let a = w.spawn_with("a", opts.clone());
    w.run_until(T0).await;
    let a = leader(a).await;
    let standbys: Vec<_> = ["b", "c", "d", "e"]
        .iter()
        .map(|m| w.spawn_with(m, opts.clone()))
        .collect();
    w.run_until(T0 + 1).await;
    let deadline = a.lease().deadline;
    drop(a);
    w.run_until(deadline).await;
    // Let any member that briefly won run into the fence at its next write.
    w.run_until(deadline + 2 * RENEW.as_millis() as i64).await;
    let mut held = Vec::new();
    for h in standbys {
        if h.is_finished() {
            let l = h.await.unwrap().unwrap();
            if l.is_held() {
                held.push(l);
            } else {
                assert!(l.err().unwrap().is_fenced());
            }
        }
    }
    assert_eq!(held.len(), 1, "exactly one leader");
    let status = describe_leadership(w.transport().as_ref(), ROLE)
        .await
        .unwrap();
    assert!(status.authoritative(&held[0].token()));
}

#[tokio::test(flavor = "current_thread")]
async fn a_recovered_member_rejoins_at_the_tail() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let b = w.spawn("b");
    let c = w.spawn("c");
    w.run_until(T0 + 1).await;
    let deadline = a.lease().deadline;
    drop(a); // a crashes
    w.run_until(deadline).await;
    let b = leader(b).await;
    // a recovers and registers again: it goes to the tail, behind c.
    let a2 = w.spawn("a");
    w.run_until(deadline + 1).await;
    assert_eq!(w.ranks().await, ["b", "c", "a"]);
    // b crashes: c (rank 0 among challengers) takes over, not a. No failback.
    let deadline = b.lease().deadline;
    drop(b);
    w.run_until(deadline).await;
    let c = leader(c).await;
    assert!(!a2.is_finished());
    assert_eq!(c.member(), "c");
}

#[tokio::test(flavor = "current_thread")]
async fn resign_hands_over_without_waiting_for_the_deadline() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let b = w.spawn("b");
    w.run_until(T0 + 1_000).await;
    let old = a.token();
    a.resign().await.unwrap();
    a.resign().await.unwrap(); // idempotent
    assert!(matches!(a.err().as_deref(), Some(Error::Resigned)));
    // The resigned token is no longer authoritative, even before b takes over.
    let status = describe_leadership(w.transport().as_ref(), ROLE)
        .await
        .unwrap();
    assert!(!status.authoritative(&old));
    settle().await;
    let now = w.clock.now_millis();
    let b = leader(b).await;
    assert_eq!(
        w.clock.now_millis(),
        now,
        "b took over without the clock moving"
    );
    assert!(b.token() > old);
    let status = describe_leadership(w.transport().as_ref(), ROLE)
        .await
        .unwrap();
    assert!(status.authoritative(&b.token()));
    assert_eq!(w.ranks().await, ["b"], "a deregistered");
}

#[tokio::test(flavor = "current_thread")]
async fn a_deposed_leaders_guarded_write_fails_with_fenced() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let record = |v: &str| OutRecord {
        topic: "orders".into(),
        partition: Some(0),
        key: None,
        value: Some(v.as_bytes().to_vec()),
        headers: vec![],
    };
    a.write(vec![record("one")]).await.unwrap();
    // Another process mints a newer epoch for the role (a take-over).
    let other = w.transport();
    let _newer = other.acquire_epoch(ROLE, LEASE).await.unwrap();
    let err = a.write(vec![record("two")]).await.unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err:?}");
    assert!(a.err().unwrap().is_fenced());
    a.done().await;
    let data: Vec<_> = w
        .cluster
        .committed("orders", 0)
        .into_iter()
        .map(|r| r.value.unwrap())
        .collect();
    assert_eq!(data, [b"one".to_vec()], "the deposed write is not visible");
}

#[tokio::test(flavor = "current_thread")]
async fn a_fenced_holder_learns_it_at_its_next_renewal() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let _newer = w.transport().acquire_epoch(ROLE, LEASE).await.unwrap();
    assert!(a.is_held(), "nothing tells a before it writes");
    w.run_until(T0 + RENEW.as_millis() as i64).await;
    assert!(!a.is_held());
    assert!(a.err().unwrap().is_fenced());
}

#[tokio::test(flavor = "current_thread")]
async fn transient_errors_are_retried_and_the_role_is_kept() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    w.cluster.set_unavailable(true);
    w.run_until(T0 + RENEW.as_millis() as i64 + 2_000).await;
    assert!(a.renewal_failures() > 0);
    assert!(a.is_held());
    w.cluster.set_unavailable(false);
    w.run_until(T0 + 2 * RENEW.as_millis() as i64).await;
    assert_eq!(a.renewal_failures(), 0);
    assert!(a.is_held());
    assert!(a.lease().granted_at > T0 + RENEW.as_millis() as i64);
}

#[tokio::test(flavor = "current_thread")]
async fn cancelling_a_waiting_member_deregisters_it() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let _a = leader(a).await;
    let cancel = CancellationToken::new();
    let b = w.spawn_with("b", w.options().with_cancel(cancel.clone()));
    w.run_until(T0 + 1).await;
    assert_eq!(w.ranks().await, ["a", "b"]);
    cancel.cancel();
    settle().await;
    let err = b.await.unwrap().unwrap_err();
    assert!(matches!(err, Error::Cancelled));
    assert_eq!(w.ranks().await, ["a"]);
}

#[tokio::test(flavor = "current_thread")]
async fn dropping_a_waiting_acquire_deregisters_it() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let _a = leader(a).await;
    let b = w.spawn("b");
    w.run_until(T0 + 1).await;
    assert_eq!(w.ranks().await, ["a", "b"]);
    b.abort();
    settle().await;
    assert_eq!(w.ranks().await, ["a"]);
}

#[tokio::test(flavor = "current_thread")]
async fn options_are_validated_up_front_with_the_values_named() {
    let w = World::new();
    let t: Arc<dyn Transport> = w.transport();
    let bad = w
        .options()
        .with_lease_duration(Duration::from_secs(5))
        .with_renew_interval(Duration::from_secs(10));
    let err = acquire_leadership(t.clone(), ROLE, "a", bad)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(msg.contains("5 s") && msg.contains("10 s"), "{msg}");
    let err = acquire_leadership(t.clone(), ROLE, "a", w.options().with_partitions(0))
        .await
        .unwrap_err();
    assert!(err.to_string().contains('0'), "{err}");
    let err = acquire_leadership(t.clone(), "", "a", w.options())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("role"), "{err}");
    let err = acquire_leadership(t.clone(), ROLE, "", w.options())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("member"), "{err}");
    let long = "x".repeat(40_000);
    let err = acquire_leadership(t, ROLE, &long, w.options())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("32767"), "{err}");
    assert_eq!(
        w.cluster.requests(),
        0,
        "nothing was sent for invalid options"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn options_the_transport_cannot_honour_are_refused_before_registering() {
    let w = World::new();
    w.cluster.set_min_lease_duration(Duration::from_secs(1));
    let t: Arc<dyn Transport> = w.transport();
    let opts = w
        .options()
        .with_lease_duration(Duration::from_millis(500))
        .with_renew_interval(Duration::from_millis(100));
    let err = acquire_leadership(t, ROLE, "a", opts).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("500 ms") && msg.contains("1 s"), "{msg}");
    assert!(w.state_log().is_empty(), "nothing was written");
}

#[tokio::test(flavor = "current_thread")]
async fn the_memory_transport_keeps_the_coordinators_semantics() {
    use krabka_coordination::transport::{LeaseWriter, StateReader};
    let w = World::new();
    let (a, b) = (w.transport(), w.transport());
    let p = role_partition(ROLE, 16).unwrap();
    let key = encode_key(&Key::lease(ROLE)).unwrap();
    let lease = |value: Option<&[u8]>| StateRecord {
        partition: p,
        key: key.clone(),
        value: value.map(<[u8]>::to_vec),
    };
    // Minting: each acquire supersedes the last.
    let ea = a.mint(ROLE).unwrap();
    let ta = ea.token();
    assert_eq!(ea.role(), ROLE);
    assert_eq!(a.held(ROLE), [ta], "the live epoch is listed");
    // An aborted write takes an offset but is never read.
    ea.write_lease_aborted(lease(Some(b"aborted"))).unwrap();
    ea.write_lease(lease(Some(b"committed")), WITHIN)
        .await
        .unwrap();
    let read = a.read_partition(p).await.unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(
        (read[0].offset, read[0].value.as_deref()),
        (1, Some(&b"committed"[..]))
    );
    // Fencing: b's mint supersedes a's epoch; every write through it fails.
    let eb = b.acquire_epoch(ROLE, LEASE).await.unwrap();
    let tb = eb.token();
    assert!(tb > ta);
    let err = ea.write_lease(lease(None), WITHIN).await.unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err:?}");
    let err = ea
        .write_lease(lease(Some(b"again")), WITHIN)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "a later write: {err:?}");
    let err = ea.write_lease_aborted(lease(Some(b"again"))).unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err:?}");
    let err = ea
        .write_guarded(vec![order("late")], WITHIN)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced(_)), "{err:?}");
    assert!(
        orders(&w).is_empty(),
        "the fenced guarded write is not visible"
    );
    assert_eq!(
        a.read_partition(p).await.unwrap(),
        read,
        "nothing fenced is read"
    );
    // The epoch is released when its handle goes, and only that one.
    assert_eq!(a.held(ROLE), [ta]);
    drop(ea);
    assert!(a.held(ROLE).is_empty(), "dropping the epoch releases it");
    assert_eq!(b.held(ROLE), [tb]);
    // Per-partition logs: nothing of this role lands in another partition.
    assert!(a.read_partition((p + 1) % 16).await.unwrap().is_empty());
    // Guarded writes never go to the state topic.
    let mut forged = order("forged");
    forged.topic = krabka_coordination::STATE_TOPIC.into();
    let err = eb.write_guarded(vec![forged], WITHIN).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    // Producer id rotation at the exhausted epoch.
    w.cluster
        .set_epoch(ROLE, FencingToken::new(tb.producer_id, 32766));
    let rotated = b.acquire_epoch(ROLE, LEASE).await.unwrap().token();
    assert_eq!(rotated.producer_epoch, 0);
    assert_ne!(rotated.producer_id, tb.producer_id);
    assert!(rotated > FencingToken::new(tb.producer_id, 32766));
}

/// A guarded write called after `resign` on the same leadership never
/// commits, whatever order the three futures (`w1 = write`, `resign`,
/// `w2 = write`, called in that order) are first polled in, and with or
/// without the tasks yielding first: `w2` fails with `Resigned`, `w1` and the
/// resign settle.
/// One of the calls of the call-order test, boxed to be polled in any order.
type BoxedCall = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), Error>> + Send>>;

#[tokio::test(flavor = "current_thread")]
async fn a_write_called_after_resign_never_commits_whatever_runs_first() {
    const PERMUTATIONS: [[usize; 3]; 6] = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    let mut runs = 0;
    for (p, poll_order) in PERMUTATIONS.iter().enumerate() {
        for yields in 0..40usize {
            let w = World::new();
            let a = w.spawn("a");
            w.run_until(T0).await;
            let a = Arc::new(leader(a).await);
            let (one, two) = (format!("w1-{p}-{yields}"), format!("w2-{p}-{yields}"));
            // The calls, in program order; nothing has run yet.
            let w1 = Box::pin(Arc::clone(&a).write_owned(vec![order(&one)]));
            let r = Box::pin(Arc::clone(&a).resign_owned());
            let w2 = Box::pin(Arc::clone(&a).write_owned(vec![order(&two)]));
            let mut futures: Vec<Option<BoxedCall>> = vec![Some(w1), Some(r), Some(w2)];
            let mut handles: [Option<tokio::task::JoinHandle<Result<(), Error>>>; 3] =
                [None, None, None];
            for (k, &i) in poll_order.iter().enumerate() {
                let f = futures[i].take().unwrap();
                // Each task yields a different number of times first, so the
                // three interleave differently from run to run.
                let skip = (yields >> k) % 4;
                handles[i] = Some(tokio::spawn(async move {
                    for _ in 0..skip {
                        tokio::task::yield_now().await;
                    }
                    f.await
                }));
            }
            settle().await;
            let [h1, hr, h2] = handles.map(Option::unwrap);
            for h in [&h1, &hr, &h2] {
                assert!(h.is_finished(), "every call settles");
            }
            let first = h1.await.unwrap();
            assert!(
                first.is_ok() || matches!(first, Err(Error::Resigned)),
                "{first:?}"
            );
            hr.await.unwrap().unwrap();
            let second = h2.await.unwrap();
            assert!(matches!(second, Err(Error::Resigned)), "{second:?}");
            let committed = orders(&w);
            assert!(
                !committed.contains(&two),
                "a write called after resign committed: {committed:?} (poll order {poll_order:?}, yields {yields})"
            );
            assert_eq!(committed.contains(&one), first.is_ok());
            runs += 1;
        }
    }
    assert_eq!(runs, 240);
}
