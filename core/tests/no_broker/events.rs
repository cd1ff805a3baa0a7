//! The leadership event stream on the in-memory transport
//! and a manual clock: every step of a member arrives as a typed event, in
//! the order the member took it, with the values of that step.

use crate::world;

use std::sync::Arc;

use krabka_coordination::codec::{encode_key, Key};
use krabka_coordination::events::{self, Event, EventKind};
use krabka_coordination::leadership::describe_role_state;
use krabka_coordination::transport::{Coordinator, LeaseWriter};
use krabka_coordination::{Error, ErrorKind, FencingToken};
use world::hooked::Hooked;
use world::*;

/// Asserts every event is of `member` in [`ROLE`] and the clock never runs
/// backwards between them.
fn assert_of(events: &[Event], member: &str) {
    for e in events {
        assert_eq!((&*e.role, &*e.member), (ROLE, member), "{e:?}");
    }
    assert!(events.windows(2).all(|p| p[0].at <= p[1].at), "{events:?}");
}

/// The event's time on the manual clock, relative to [`T0`].
fn since_t0(e: &Event) -> i64 {
    e.at - T0
}

#[tokio::test(flavor = "current_thread")]
async fn a_standbys_whole_term_arrives_in_order() {
    let w = World::new();
    let (atx, mut arx) = events::channel();
    let a = w.spawn_with("a", w.options().with_events(atx));
    w.run_until(T0).await;
    let a = leader(a).await;
    let (tx, mut rx) = events::channel();
    let b = w.spawn_with("b", w.options().with_events(tx));
    w.run_until(T0 + 1_000).await;
    // a freezes before its first renewal: b challenges at a's deadline.
    let a_token = a.token();
    drop(a);
    let deadline = T0 + ms(LEASE);
    w.run_until(deadline).await;
    let b = leader(b).await;
    // Three renewals, then a resign.
    w.run_until(deadline + 3 * ms(RENEW) + 5_000).await;
    b.resign().await.unwrap();

    let a_events = drain(&mut arx);
    assert_eq!(
        names(&a_events),
        ["registered", "challenging", "elected"],
        "the first member challenges at once; a dropped handle emits nothing more"
    );
    assert_of(&a_events, "a");

    let events = drain(&mut rx);
    assert_of(&events, "b");
    assert_eq!(
        names(&events),
        [
            "registered",
            "waiting",
            "challenging",
            "elected",
            "renewed",
            "renewed",
            "renewed",
            "resigned",
            "deregistered"
        ]
    );
    let EventKind::Registered { partition, offset } = events[0].kind else {
        panic!("{:?}", events[0]);
    };
    assert_eq!(partition, w.partition());
    let registered = w
        .state_log()
        .into_iter()
        .find(|r| r.offset == offset)
        .expect("the registration's offset");
    assert_eq!(
        registered.key,
        encode_key(&Key::registration(ROLE, "b")).unwrap(),
        "the offset is b's registration record"
    );
    let state = describe_role_state(w.transport().as_ref(), ROLE, PARTITIONS)
        .await
        .unwrap();
    assert!(
        state.roster.iter().all(|e| e.member != "b"),
        "b deregistered"
    );
    assert_eq!(since_t0(&events[0]), 0);
    let EventKind::Waiting {
        rank: 0,
        challenge_at,
        holder: Some(holder),
        holder_token,
    } = &events[1].kind
    else {
        panic!("b waits behind a's lease: {:?}", events[1]);
    };
    assert_eq!(*challenge_at, deadline);
    assert_eq!(&**holder, "a", "the waiting event names the holder");
    assert_eq!(*holder_token, Some(a_token), "and the holder's token");
    assert_eq!(events[2].at, deadline, "challenges at the deadline");
    match events[3].kind {
        EventKind::Elected {
            token,
            granted_at,
            deadline: lease_deadline,
        } => {
            assert_eq!(token, b.token());
            assert_eq!(granted_at, deadline);
            assert_eq!(lease_deadline, deadline + ms(LEASE));
        }
        ref other => panic!("{other:?}"),
    }
    for (i, e) in events[4..7].iter().enumerate() {
        let renewed_at = deadline + (i as i64 + 1) * ms(RENEW);
        assert_eq!(e.at, renewed_at);
        assert!(
            matches!(e.kind, EventKind::Renewed { deadline: d } if d == renewed_at + ms(LEASE)),
            "{e:?}"
        );
    }
    assert!(matches!(
        events[7].kind,
        EventKind::Resigned { cleared: true }
    ));
}

#[tokio::test(flavor = "current_thread")]
async fn a_fenced_leader_emits_fenced_and_nothing_after_it() {
    let w = World::new();
    let (tx, mut rx) = events::channel();
    let a = w.spawn_with("a", w.options().with_events(tx));
    w.run_until(T0).await;
    let a = leader(a).await;
    let _newer = w.transport().acquire_epoch(ROLE, LEASE).await.unwrap();
    w.run_until(T0 + ms(RENEW)).await;
    w.run_until(T0 + 5 * ms(RENEW)).await;
    let events = drain(&mut rx);
    assert_eq!(
        names(&events),
        ["registered", "challenging", "elected", "fenced"]
    );
    assert_eq!(events[3].at, T0 + ms(RENEW), "at the renewal");
    let EventKind::Fenced { error } = &events[3].kind else {
        unreachable!()
    };
    assert_eq!(error.kind(), ErrorKind::Fenced);
    assert!(a.err().unwrap().is_fenced());

    // A guarded write that meets the fence emits it once, and the renewal
    // that would follow never runs.
    let w = World::new();
    let (tx, mut rx) = events::channel();
    let b = w.spawn_with("b", w.options().with_events(tx));
    w.run_until(T0).await;
    let b = leader(b).await;
    let _newer = w.transport().acquire_epoch(ROLE, LEASE).await.unwrap();
    let err = b.write(vec![order("late")]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced);
    w.run_until(T0 + 5 * ms(RENEW)).await;
    assert_eq!(
        names(&drain(&mut rx)),
        ["registered", "challenging", "elected", "fenced"]
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_lost_challenge_emits_lost_challenge_and_waits_again() {
    let w = World::new();
    let hooked = Arc::new(Hooked::new(w.cluster.transport()));
    let rival = w.transport();
    let rival_token = Arc::new(std::sync::Mutex::new(None::<FencingToken>));
    {
        let (rival, slot) = (rival.clone(), Arc::clone(&rival_token));
        hooked.after_next_mint(move || {
            // The rival mints between b's mint and b's first lease, then
            // dies without writing a lease (its epoch handle is dropped).
            *slot.lock().unwrap() = Some(rival.mint(ROLE).unwrap().token());
        });
    }
    let (tx, mut rx) = events::channel();
    let b = spawn_on(hooked.clone(), "b", w.options().with_events(tx));
    w.run_until(T0).await;
    assert!(!b.is_finished());
    let rival_token = rival_token.lock().unwrap().unwrap();
    // Nobody's lease shows up: b challenges again one lease later.
    w.run_until(T0 + ms(LEASE)).await;
    let b = leader(b).await;
    let events = drain(&mut rx);
    assert_of(&events, "b");
    assert_eq!(
        names(&events),
        [
            "registered",
            "challenging",
            "lost_challenge",
            "waiting",
            "challenging",
            "elected"
        ]
    );
    let EventKind::LostChallenge { token: lost } = events[2].kind else {
        unreachable!()
    };
    assert!(lost < rival_token, "{lost} lost to {rival_token}");
    assert!(
        matches!(
            events[3].kind,
            EventKind::Waiting { rank: 0, challenge_at, holder: None, holder_token: None }
                if challenge_at == T0 + ms(LEASE)
        ),
        "the rival wrote no lease: nobody holds the role: {:?}",
        events[3]
    );
    assert_eq!(events[4].at, T0 + ms(LEASE));
    assert!(b.token() > rival_token);
    assert!(matches!(events[5].kind, EventKind::Elected { token, .. } if token == b.token()));
}

#[tokio::test(flavor = "current_thread")]
async fn an_outage_during_renewals_emits_renewal_failing_with_the_count() {
    let w = World::new();
    let (tx, mut rx) = events::channel();
    let a = w.spawn_with("a", w.options().with_events(tx));
    w.run_until(T0).await;
    let a = leader(a).await;
    assert_eq!(
        names(&drain(&mut rx)),
        ["registered", "challenging", "elected"]
    );

    w.cluster.set_unavailable(true);
    // The renewal at +10 s fails, then retries (backing off 100, 200 ms) run
    // at the next steps of the clock: +11 s and +12 s.
    w.run_until(T0 + ms(RENEW) + 2_000).await;
    let failing = drain(&mut rx);
    assert_eq!(
        names(&failing),
        ["renewal_failing", "renewal_failing", "renewal_failing"]
    );
    for (i, e) in failing.iter().enumerate() {
        let EventKind::RenewalFailing { failures, error } = &e.kind else {
            unreachable!()
        };
        assert_eq!(*failures, i as u32 + 1);
        assert_eq!(error.kind(), ErrorKind::Transient);
        assert!(matches!(**error, Error::Transient { .. }));
        assert_eq!(e.at, T0 + ms(RENEW) + 1_000 * i as i64);
    }
    assert!(a.is_held(), "an outage does not end the term");
    assert_eq!(a.renewal_failures(), 3);

    w.cluster.set_unavailable(false);
    w.run_until(T0 + ms(RENEW) + 3_000).await;
    let recovered = drain(&mut rx);
    assert_eq!(names(&recovered), ["renewed"]);
    let now = T0 + ms(RENEW) + 3_000;
    assert!(
        matches!(recovered[0].kind, EventKind::Renewed { deadline } if deadline == now + ms(LEASE))
    );
    assert_eq!(a.renewal_failures(), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn subscribe_delivers_later_events_to_every_subscriber() {
    let w = World::new();
    let (first, mut first_rx) = events::channel();
    let a = w.spawn_with("a", w.options().with_events(first));
    w.run_until(T0).await;
    let a = leader(a).await;
    let (later, mut later_rx) = events::channel();
    a.subscribe(later);
    // A subscriber that went away is dropped, and costs the others nothing.
    let (gone, gone_rx) = events::channel();
    a.subscribe(gone);
    drop(gone_rx);
    w.run_until(T0 + ms(RENEW)).await;
    a.resign().await.unwrap();

    let all = drain(&mut first_rx);
    assert_eq!(
        names(&all),
        [
            "registered",
            "challenging",
            "elected",
            "renewed",
            "resigned",
            "deregistered"
        ]
    );
    let later = drain(&mut later_rx);
    assert_eq!(
        names(&later),
        ["renewed", "resigned", "deregistered"],
        "a later subscriber sees the events from then on"
    );
    assert_of(&later, "a");
    assert_eq!(later[0].at, T0 + ms(RENEW));
}

/// A renewal whose transport overruns the bound it was given (it hangs) does
/// not keep the term alive: at the local lease deadline the term ends with
/// `lease_expired`, `lease_left` is zero and `is_held` false together, and a
/// guarded write that overruns too returns `OUTCOME_UNKNOWN` then (its commit
/// may be on its way), never a failure that could be a commit.
#[tokio::test(flavor = "current_thread")]
async fn a_renewal_that_overruns_its_bound_ends_the_term_at_the_local_deadline() {
    let w = World::new();
    let hooked = Arc::new(Hooked::new(w.cluster.transport()));
    let (tx, mut rx) = events::channel();
    let b = spawn_on(hooked.clone(), "b", w.options().with_events(tx));
    w.run_until(T0).await;
    let b = leader(b).await;
    let elected_at = T0;
    hooked.set_overrunning(true);
    let write = tokio::spawn({
        let b = Arc::new(b);
        let writer = Arc::clone(&b);
        async move { (writer.write(vec![order("late")]).await, b) }
    });
    // The first renewal (at RENEW) hangs; the lease of the election stands
    // until its deadline.
    w.run_until(elected_at + ms(LEASE) - 1_000).await;
    assert!(
        !write.is_finished(),
        "the write waits for the overrunning transport"
    );
    let events = drain(&mut rx);
    assert_eq!(names(&events), ["registered", "challenging", "elected"]);
    w.run_until(elected_at + ms(LEASE)).await;
    let (written, b) = tokio::time::timeout(std::time::Duration::from_secs(10), write)
        .await
        .expect("the write returned at the local deadline")
        .unwrap();
    assert_eq!(
        written.unwrap_err().kind(),
        ErrorKind::OutcomeUnknown,
        "the write in flight ends with the term, its outcome unknown"
    );
    assert!(!b.is_held());
    assert_eq!(b.lease_left(), std::time::Duration::ZERO);
    assert!(matches!(b.err().as_deref(), Some(Error::LeaseExpired(_))));
    let events = drain(&mut rx);
    assert_eq!(names(&events), ["lease_expired"]);
    assert!(
        events[0].at <= elected_at + ms(LEASE),
        "ended at the local deadline, not later: {}",
        since_t0(&events[0])
    );
    hooked.set_overrunning(false);
}

/// `lease_left` reaching zero means the term has ended,
/// even when nothing else noticed yet (the renewal task not scheduled).
#[tokio::test(flavor = "current_thread")]
async fn a_lease_left_of_zero_is_never_seen_with_the_role_held() {
    let w = World::new();
    let (tx, mut rx) = events::channel();
    let b = w.spawn_with("b", w.options().with_events(tx));
    w.run_until(T0).await;
    let b = leader(b).await;
    // The clock jumps past the deadline with no task run in between.
    w.clock.advance(LEASE + std::time::Duration::from_secs(1));
    assert_eq!(b.lease_left(), std::time::Duration::ZERO);
    assert!(!b.is_held(), "zero left and held are never seen together");
    assert!(matches!(b.err().as_deref(), Some(Error::LeaseExpired(_))));
    settle().await;
    assert_eq!(
        names(&drain(&mut rx)),
        ["registered", "challenging", "elected", "lease_expired"]
    );
}
