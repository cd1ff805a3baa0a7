//! The acquire machine's transitions, one test per row of the module's
//! table (each names its row). J5 is not reachable: with no token held,
//! [`evaluate`](crate::election::evaluate) never gives `RenewAt` or
//! `StandDown`; P5 is covered by a view whose step is `Register`.
//!
//! The rows with their actions, through the driver on the in-memory
//! transport, are the integration tests': `core/tests/no_broker/held_back.rs`
//! (C1, C2, B1 to B3, P1, P3), `no_broker/roster.rs` (J1, J6, B1's passed
//! over), `no_broker/events.rs` and `no_broker/owned_epochs.rs` (F2),
//! `no_broker/first_lease.rs` (F3, F4) and `no_broker/faults.rs` (a cancel during
//! `FirstLease`).

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::codec::{encode_key, encode_lease, encode_registration, Key, Registration};
use crate::transport::Record;

const ROLE: &str = "billing";
const ME: &str = "me";
const NOW: i64 = 1_000_000;
const LEASE_MS: i64 = 10_000;

const T: FencingToken = FencingToken {
    producer_id: 7,
    producer_epoch: 3,
};
const NEWER: FencingToken = FencingToken {
    producer_id: 7,
    producer_epoch: 4,
};

/// A role state from registrations (member, offset) and an optional lease
/// (member, token, deadline), at offsets in order.
fn view(registered: &[(&str, i64)], lease: Option<(&str, FencingToken, i64)>) -> RoleState {
    let mut records: Vec<Record> = registered
        .iter()
        .map(|(member, offset)| Record {
            offset: *offset,
            key: encode_key(&Key::registration(ROLE, *member)).unwrap(),
            value: Some(
                encode_registration(&Registration {
                    member: (*member).into(),
                    registered_at: 0,
                })
                .unwrap(),
            ),
        })
        .collect();
    if let Some(l) = lease {
        records.push(Record {
            offset: records.last().map_or(0, |r| r.offset + 1),
            key: encode_key(&Key::lease(ROLE)).unwrap(),
            value: Some(encode_lease(&lease_of(l)).unwrap()),
        });
    }
    RoleState::build(ROLE, &records).unwrap()
}

fn lease_of((member, token, deadline): (&str, FencingToken, i64)) -> Lease {
    Lease {
        member: member.into(),
        token,
        granted_at: deadline - LEASE_MS,
        deadline,
    }
}

fn options() -> ElectionOptions {
    ElectionOptions {
        lease_duration: Duration::from_millis(LEASE_MS as u64),
        challenge_stagger: Duration::from_secs(1),
        ..ElectionOptions::default()
    }
}

/// The epoch in these tests: its strong count tells whether the machine
/// let it go.
type Epoch = Arc<()>;

/// A machine whose member registered first at offset 2.
fn machine(options: &ElectionOptions) -> Machine<'_> {
    Machine::new(
        ME,
        ROLE,
        options,
        Memory {
            own: vec![2],
            ..Memory::default()
        },
    )
}

fn next(
    machine: &mut Machine<'_>,
    state: State<Epoch>,
    event: Event<Epoch>,
    view: &RoleState,
) -> Transition<Epoch> {
    machine.next(state, event, view)
}

fn looked() -> Event<Epoch> {
    Event::Looked { now: NOW, mono: 0 }
}

fn transient() -> Error {
    Error::transient("a test", "the broker did not answer")
}

fn fatal() -> Error {
    Error::fatal("a test", "not allowed")
}

fn state_name(t: &Transition<Epoch>) -> &'static str {
    match &t.then {
        Then::Go(s) => s.name(),
        Then::Won(_) => "won",
        Then::Fail(_) => "fail",
    }
}

fn note_names(t: &Transition<Epoch>) -> Vec<&'static str> {
    t.notes
        .iter()
        .map(|n| match n {
            Note::Capped { .. } => "capped",
            Note::HeldBack => "held back",
            Note::Challenging => "challenging",
            Note::LostChallenge { .. } => "lost",
        })
        .collect()
}

fn failure(t: Transition<Epoch>) -> Error {
    match t.then {
        Then::Fail(e) => e,
        _ => panic!("expected the loop to fail, got {}", state_name(&t)),
    }
}

/// A challenge decided at `NOW` that minted `T`, at its first lease.
fn at_first_lease(epoch: &Epoch, stale: &[&str]) -> State<Epoch> {
    State::FirstLease {
        epoch: Arc::clone(epoch),
        token: T,
        stale: stale.iter().map(|s| s.to_string()).collect(),
    }
}

fn wrote(result: Result<(Lease, i64)>, token: FencingToken) -> Event<Epoch> {
    Event::Wrote {
        result,
        token,
        now: NOW,
    }
}

#[test]
fn j1_a_twin_in_the_view_fails_naming_the_member() {
    let o = options();
    let mut m = machine(&o);
    // A registration of this id after this process's first, not its own.
    let v = view(&[(ME, 5)], None);
    let e = failure(next(&mut m, State::Judge, looked(), &v));
    assert!(!e.is_transient());
    let text = e.to_string();
    assert!(text.contains("\"me\"") && text.contains("unique"), "{text}");
}

#[test]
fn j2_not_in_the_roster_registers() {
    let o = options();
    let mut m = machine(&o);
    let t = next(&mut m, State::Judge, looked(), &view(&[("x", 1)], None));
    assert!(matches!(t.then, Then::Go(State::Register)));
    assert!(t.notes.is_empty());
}

#[test]
fn j3_a_turn_to_come_waits_behind_the_views_lease() {
    let o = options();
    let mut m = machine(&o);
    let holder = ("h", T, NOW + 5_000);
    let v = view(&[("h", 1), (ME, 2)], Some(holder));
    let t = next(&mut m, State::Judge, looked(), &v);
    match t.then {
        Then::Go(State::Wait {
            at,
            rank,
            holder: Some(l),
        }) => {
            assert_eq!((at, rank), (NOW + 5_000, 0));
            assert_eq!(l, lease_of(holder));
        }
        _ => panic!("expected a wait, got {}", state_name(&t)),
    }
    assert!(t.notes.is_empty(), "no cap: the deadline is within a lease");
}

#[test]
fn j4_the_turn_come_catches_up_first_with_the_judges_clock() {
    let o = options();
    let mut m = machine(&o);
    let t = next(&mut m, State::Judge, looked(), &view(&[(ME, 2)], None));
    assert!(matches!(t.then, Then::Go(State::CatchUp { now: NOW })));
}

#[test]
fn j6_a_deadline_beyond_one_lease_is_capped_and_warned_of() {
    let o = options();
    let mut m = machine(&o);
    let far = NOW + 3_600_000;
    let v = view(&[("h", 1), (ME, 2)], Some(("h", T, far)));
    let t = next(&mut m, State::Judge, looked(), &v);
    assert_eq!(note_names(&t), ["capped"]);
    assert!(matches!(
        t.notes[0],
        Note::Capped { deadline, capped } if deadline == far && capped == NOW + LEASE_MS
    ));
    assert!(matches!(
        t.then,
        Then::Go(State::Wait { at, .. }) if at == NOW + LEASE_MS
    ));
    // One lease later on the monotonic clock the capped turn has come.
    let later = Event::Looked {
        now: NOW + LEASE_MS,
        mono: LEASE_MS,
    };
    let t = next(&mut m, State::Judge, later, &v);
    assert_eq!(note_names(&t), ["capped"]);
    assert!(matches!(t.then, Then::Go(State::CatchUp { .. })));
}

#[test]
fn r1_a_registration_is_remembered_as_this_process_own() {
    let o = options();
    let mut m = machine(&o);
    let t = next(
        &mut m,
        State::Register,
        Event::Registered(9),
        &view(&[], None),
    );
    assert!(matches!(t.then, Then::Go(State::Judge)));
    assert_eq!(m.memory.own, [2, 9]);
    // Its registration at 9 is no twin's.
    let t = next(&mut m, State::Judge, looked(), &view(&[(ME, 9)], None));
    assert!(matches!(t.then, Then::Go(State::CatchUp { .. })));
}

#[test]
fn d1_a_wait_a_poll_or_a_pause_done_judges_again() {
    let o = options();
    let mut m = machine(&o);
    let v = view(&[], None);
    let done = [
        State::Wait {
            at: NOW,
            rank: 0,
            holder: None,
        },
        State::Follow,
        State::BackOff {
            what: "a test",
            error: transient(),
        },
    ];
    for s in done {
        let t = next(&mut m, s, Event::Done, &v);
        assert!(matches!(t.then, Then::Go(State::Judge)));
    }
}

#[test]
fn c1_to_c4_the_challenges_catch_up() {
    let o = options();
    let mut m = machine(&o);
    let v = view(&[(ME, 2)], None);
    let catch_up = || State::CatchUp { now: NOW };
    // C1: records read: judge again.
    let t = next(&mut m, catch_up(), Event::CaughtUp(Ok(3)), &v);
    assert!(matches!(t.then, Then::Go(State::Judge)));
    // C2: nothing new: check the backlog, with the challenge's clock.
    let t = next(&mut m, catch_up(), Event::CaughtUp(Ok(0)), &v);
    assert!(matches!(t.then, Then::Go(State::CheckBacklog { now: NOW })));
    // C3: a transient error backs off.
    let t = next(&mut m, catch_up(), Event::CaughtUp(Err(transient())), &v);
    assert!(matches!(t.then, Then::Go(State::BackOff { .. })));
    // C4: another error fails with it.
    let e = failure(next(&mut m, catch_up(), Event::CaughtUp(Err(fatal())), &v));
    assert!(e.to_string().contains("not allowed"));
}

#[test]
fn b1_caught_up_announces_the_challenge_and_mints_with_the_passed_over() {
    let o = options();
    let mut m = machine(&o);
    m.memory.held_back_reported = true;
    // "x" ranks ahead and did not take its turn.
    let v = view(&[("x", 1), (ME, 2)], None);
    let t = next(
        &mut m,
        State::CheckBacklog { now: NOW },
        Event::Backlog(Ok(Backlog::CaughtUp)),
        &v,
    );
    assert_eq!(note_names(&t), ["challenging"]);
    assert!(matches!(&t.then, Then::Go(State::Mint { stale }) if stale == &["x"]));
    assert!(!m.memory.held_back_reported);
}

#[test]
fn b2_unread_records_are_followed_and_forget_the_held_back_report() {
    let o = options();
    let mut m = machine(&o);
    m.memory.held_back_reported = true;
    let t = next(
        &mut m,
        State::CheckBacklog { now: NOW },
        Event::Backlog(Ok(Backlog::Unread)),
        &view(&[(ME, 2)], None),
    );
    assert!(matches!(t.then, Then::Go(State::Follow)));
    assert!(t.notes.is_empty(), "nothing is held back, nothing reported");
    assert!(!m.memory.held_back_reported);
}

#[test]
fn b3_held_back_looks_past_and_is_reported_once() {
    let o = options();
    let mut m = machine(&o);
    let v = view(&[(ME, 2)], None);
    let held_back = |m: &mut Machine<'_>| {
        next(
            m,
            State::CheckBacklog { now: NOW },
            Event::Backlog(Ok(Backlog::HeldBack)),
            &v,
        )
    };
    let t = held_back(&mut m);
    assert_eq!(note_names(&t), ["held back"]);
    assert!(matches!(t.then, Then::Go(State::LookPast { now: NOW })));
    assert!(note_names(&held_back(&mut m)).is_empty(), "reported once");
    // Not held back once (B2): reported again the next time.
    next(
        &mut m,
        State::CheckBacklog { now: NOW },
        Event::Backlog(Ok(Backlog::Unread)),
        &v,
    );
    assert_eq!(note_names(&held_back(&mut m)), ["held back"]);
}

#[test]
fn b4_b5_a_failed_check_backs_off_or_fails() {
    let o = options();
    let mut m = machine(&o);
    let v = view(&[(ME, 2)], None);
    let check = || State::CheckBacklog { now: NOW };
    let t = next(&mut m, check(), Event::Backlog(Err(transient())), &v);
    assert!(matches!(
        t.then,
        Then::Go(State::BackOff { what, .. }) if what.contains("checking the partition")
    ));
    let e = failure(next(&mut m, check(), Event::Backlog(Err(fatal())), &v));
    assert!(e.to_string().contains("not allowed"));
}

fn past(view: Option<RoleState>) -> Event<Epoch> {
    Event::Past { view, mono: 0 }
}

#[test]
fn p1_no_view_past_the_open_transaction_follows() {
    let o = options();
    let mut m = machine(&o);
    let t = next(
        &mut m,
        State::LookPast { now: NOW },
        past(None),
        &view(&[(ME, 2)], None),
    );
    assert!(matches!(t.then, Then::Go(State::Follow)));
}

#[test]
fn p2_a_twin_past_the_open_transaction_fails() {
    let o = options();
    let mut m = machine(&o);
    let beyond = view(&[(ME, 2)], Some((ME, T, NOW + 5_000)));
    let e = failure(next(
        &mut m,
        State::LookPast { now: NOW },
        past(Some(beyond)),
        &view(&[(ME, 2)], None),
    ));
    assert!(e.to_string().contains("renews a lease under it"), "{e}");
}

#[test]
fn p3_a_challenge_past_the_open_transaction_mints_with_that_views_passed_over() {
    let o = options();
    let mut m = machine(&o);
    // The follower's view has "x" ahead; the view past the transaction
    // shows "x" deregistered and "y" ahead instead.
    let follower = view(&[("x", 1), (ME, 2)], None);
    let beyond = view(&[("y", 1), (ME, 2)], None);
    let t = next(
        &mut m,
        State::LookPast { now: NOW },
        past(Some(beyond)),
        &follower,
    );
    assert_eq!(note_names(&t), ["challenging"]);
    assert!(matches!(&t.then, Then::Go(State::Mint { stale }) if stale == &["y"]));
}

#[test]
fn p4_a_wait_past_the_open_transaction_waits_behind_that_views_lease() {
    let o = options();
    let mut m = machine(&o);
    let newer = ("h", NEWER, NOW + 5_000);
    let follower = view(&[("h", 1), (ME, 2)], Some(("h", T, NOW - 1)));
    let beyond = view(&[("h", 1), (ME, 2)], Some(newer));
    let t = next(
        &mut m,
        State::LookPast { now: NOW },
        past(Some(beyond)),
        &follower,
    );
    match t.then {
        Then::Go(State::Wait {
            at,
            holder: Some(l),
            ..
        }) => {
            assert_eq!(at, NOW + 5_000);
            assert_eq!(l, lease_of(newer));
        }
        _ => panic!("expected a wait, got {}", state_name(&t)),
    }
    // The view past keeps its own first-seen lease; the follower's is
    // untouched.
    assert!(m.memory.seen.is_none());
    assert!(m.memory.seen_past.is_some_and(|s| s.token == NEWER));
}

#[test]
fn p5_another_step_past_the_open_transaction_follows() {
    let o = options();
    let mut m = machine(&o);
    // Past the transaction this member's registration is gone: Register.
    let t = next(
        &mut m,
        State::LookPast { now: NOW },
        past(Some(view(&[("x", 1)], None))),
        &view(&[(ME, 2)], None),
    );
    assert!(matches!(t.then, Then::Go(State::Follow)));
}

#[test]
fn m1_a_minted_token_is_remembered_and_the_first_lease_follows() {
    let o = options();
    let mut m = machine(&o);
    let epoch: Epoch = Arc::new(());
    let t = next(
        &mut m,
        State::Mint {
            stale: vec!["x".into()],
        },
        Event::Minted {
            epoch: Arc::clone(&epoch),
            token: T,
        },
        &view(&[], None),
    );
    assert!(matches!(
        &t.then,
        Then::Go(State::FirstLease { token, stale, .. }) if *token == T && stale == &["x"]
    ));
    assert_eq!(m.memory.minted, [T]);
    // A lease under this id with the minted token is no twin's.
    let t = next(
        &mut m,
        State::Judge,
        looked(),
        &view(&[(ME, 2)], Some((ME, T, NOW + 5_000))),
    );
    assert!(!matches!(t.then, Then::Fail(_)));
}

#[test]
fn f1_written_wins_with_the_token_the_commit_carries() {
    let o = options();
    let mut m = machine(&o);
    m.memory.minted = vec![T];
    let epoch: Epoch = Arc::new(());
    let lease = lease_of((ME, NEWER, NOW + LEASE_MS));
    let t = next(
        &mut m,
        at_first_lease(&epoch, &["x"]),
        wrote(Ok((lease.clone(), 42)), NEWER),
        &view(&[], None),
    );
    assert!(t.notes.is_empty());
    match t.then {
        Then::Won(won) => {
            assert_eq!(won.token, NEWER);
            assert_eq!(
                (won.lease, won.sent, won.stale),
                (lease, 42, vec!["x".into()])
            );
        }
        _ => panic!("expected a win, got {}", state_name(&t)),
    }
    assert_eq!(
        m.memory.minted,
        [T, NEWER],
        "the corrected token is one's own"
    );
    // Uncorrected, the token is remembered once.
    let mut m = machine(&o);
    m.memory.minted = vec![T];
    let lease = lease_of((ME, T, NOW + LEASE_MS));
    next(
        &mut m,
        at_first_lease(&epoch, &[]),
        wrote(Ok((lease, 42)), T),
        &view(&[], None),
    );
    assert_eq!(m.memory.minted, [T]);
}

#[test]
fn f2_fenced_reports_the_lost_challenge_lets_go_and_holds_off() {
    let o = options();
    let mut m = machine(&o);
    let epoch: Epoch = Arc::new(());
    let fenced = Error::Fenced("a newer epoch".into());
    let t = next(
        &mut m,
        at_first_lease(&epoch, &[]),
        wrote(Err(fenced), T),
        &view(&[], None),
    );
    assert_eq!(note_names(&t), ["lost"]);
    assert!(matches!(t.then, Then::Go(State::Judge)));
    assert_eq!(
        m.memory.lost.map(|h| (h.token, h.until)),
        Some((T, NOW + LEASE_MS))
    );
    assert_eq!(Arc::strong_count(&epoch), 2, "the note holds the epoch");
    drop(t);
    assert_eq!(Arc::strong_count(&epoch), 1, "let go once reported");
    // During the hold-off the turn does not challenge: it waits until the
    // hold-off ends.
    let t = next(&mut m, State::Judge, looked(), &view(&[(ME, 2)], None));
    assert!(matches!(t.then, Then::Go(State::Wait { at, .. }) if at == NOW + LEASE_MS));
}

#[test]
fn f3_f4_a_first_lease_given_up_backs_off_or_fails() {
    let o = options();
    let mut m = machine(&o);
    let epoch: Epoch = Arc::new(());
    let t = next(
        &mut m,
        at_first_lease(&epoch, &[]),
        wrote(Err(transient()), T),
        &view(&[], None),
    );
    assert!(matches!(
        t.then,
        Then::Go(State::BackOff { what, .. }) if what.contains("first lease")
    ));
    assert_eq!(Arc::strong_count(&epoch), 1, "the epoch is let go");
    assert!(m.memory.lost.is_none(), "no hold-off: nothing newer won");
    let e = failure(next(
        &mut m,
        at_first_lease(&epoch, &[]),
        wrote(Err(fatal()), T),
        &view(&[], None),
    ));
    assert!(e.to_string().contains("not allowed"));
}

#[test]
fn an_event_of_another_state_fails_naming_both() {
    let o = options();
    let mut m = machine(&o);
    let e = failure(next(&mut m, State::Judge, Event::Done, &view(&[], None)));
    assert!(!e.is_transient());
    assert!(e.to_string().contains("Judge on Done"), "{e}");
}
