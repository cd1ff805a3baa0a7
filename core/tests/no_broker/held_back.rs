//! The challenger's held-back check (the model's held-back fixes,
//! `docs/model.md`) on the in-memory transport and a manual clock: one
//! request compares the end of the log, records of open transactions
//! included, with the follower's read position. The challenger mints only
//! when the answer is "caught up"; it waits while a transaction is open and
//! reads (without reporting anything held back) while records are merely
//! unread. No read follows the check that a transaction opened in between
//! could hide something from.

use crate::captured;
use crate::world;

use std::sync::Arc;

use captured::Captured;
use krabka_coordination::codec::{encode_key, Key};
use krabka_coordination::events;
use krabka_coordination::leadership::describe_leadership;
use krabka_coordination::transport::memory::MemoryTransport;
use krabka_coordination::transport::{Backlog, Registrar, StateReader, StateRecord};
use krabka_coordination::{role_partition, ErrorKind};
use world::hooked::Hooked;
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

/// The neighbour role's leader stalls mid-transaction on the shared
/// partition: everything written after it is hidden until the transaction
/// is decided. The returned epoch keeps it open; a newer mint of the
/// neighbour role aborts it.
fn stall_neighbour(w: &World) -> krabka_coordination::transport::memory::MemoryEpoch {
    let stalled = w.transport().mint(&neighbour()).unwrap();
    stalled
        .write_lease_open(StateRecord {
            partition: w.partition(),
            key: encode_key(&Key::lease(neighbour())).unwrap(),
            value: Some(b"stalled".to_vec()),
        })
        .unwrap();
    stalled
}

/// Aborts the neighbour's open transaction, as its coordinator does when
/// the transaction times out (a newer mint of the role).
fn abort_neighbour(t: &MemoryTransport) {
    drop(t.mint(&neighbour()).unwrap());
}

/// The calls that follow the last held-back check in `calls`, with it.
fn from_last_check(calls: &[String]) -> Vec<String> {
    let last = calls
        .iter()
        .rposition(|c| c.starts_with("held_back"))
        .expect("a held-back check was made");
    calls[last..].to_vec()
}

#[tokio::test(flavor = "current_thread")]
async fn the_check_compares_the_end_of_the_log_with_the_readers_position() {
    let w = World::new();
    let t = w.transport();
    let p = w.partition();
    assert_eq!(t.held_back(p, 0).await.unwrap(), Backlog::CaughtUp);
    let reg = |m: &str| StateRecord {
        partition: p,
        key: encode_key(&Key::registration(ROLE, m)).unwrap(),
        value: Some(m.as_bytes().to_vec()),
    };
    assert_eq!(t.append(reg("a")).await.unwrap(), 0);
    assert_eq!(t.held_back(p, 0).await.unwrap(), Backlog::Unread);
    assert_eq!(t.held_back(p, 1).await.unwrap(), Backlog::CaughtUp);

    // An open transaction at offset 1, a committed record behind it.
    let stalled = stall_neighbour(&w);
    assert_eq!(t.append(reg("b")).await.unwrap(), 2);
    for position in [0, 1] {
        assert_eq!(
            t.held_back(p, position).await.unwrap(),
            Backlog::HeldBack,
            "at {position}"
        );
    }
    let batch = t
        .poll_partition(p, 1, std::time::Duration::ZERO)
        .await
        .unwrap();
    assert!(batch.records.is_empty(), "nothing past the open entry");
    assert_eq!(batch.next_offset, 1);

    // Aborted: the entry is decided, the record behind it is unread.
    abort_neighbour(&t);
    drop(stalled);
    assert_eq!(t.held_back(p, 1).await.unwrap(), Backlog::Unread);
    let batch = t
        .poll_partition(p, 1, std::time::Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(batch.records.len(), 1);
    assert_eq!(
        batch.next_offset, 3,
        "past the aborted entry and the record"
    );
    assert_eq!(t.held_back(p, 3).await.unwrap(), Backlog::CaughtUp);

    let e = t.held_back(p, -1).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

/// The interleaving of a check after the read: the challenger's read finds
/// nothing new (the leader's renewals are hidden behind a neighbour's open
/// transaction), then the transaction is decided before the check. The check
/// answers for the challenger's position, so the released renewals count as
/// unread: the challenger reads them and waits again, and reports nothing held
/// back (nothing is, by then).
#[tokio::test(flavor = "current_thread")]
async fn records_released_after_the_read_are_read_before_any_challenge() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let b_transport = Arc::new(Hooked::new(w.cluster.transport()));
    let (tx, mut rx) = events::channel();
    let b = spawn_on(b_transport.clone(), "b", w.options().with_events(tx));
    w.run_until(T0 + 1_000).await;
    let _stalled = stall_neighbour(&w);
    // The transaction is decided between b's read and b's check.
    let releaser = w.transport();
    b_transport.before_next_held_back(move || abort_neighbour(&releaser));
    // Past a's first deadline, which is all b has seen of a.
    w.run_until(T0 + ms(LEASE) + 1_000).await;
    assert!(!b.is_finished(), "b does not take over");
    assert!(a.is_held(), "a renews all along");
    let calls = b_transport.take_calls();
    let after = from_last_check(&calls);
    assert_eq!(
        after[..2],
        ["held_back Unread", "poll_partition"],
        "b reads after the check: {calls:?}"
    );
    let seen = names(&drain(&mut rx));
    assert!(!seen.contains(&"held_back"), "{seen:?}");
    assert!(!seen.contains(&"challenging"), "{seen:?}");
    w.run_until(T0 + 2 * ms(LEASE)).await;
    assert!(!b.is_finished());
    assert!(a.is_held());
    let t = describe_leadership(w.transport().as_ref(), ROLE)
        .await
        .unwrap();
    assert_eq!(t.token, a.token());
}

/// A read that returns before its records arrive (a Kafka consumer polled
/// without a wait returns what its fetches brought so far) looks like a
/// read of nothing new. The check compares the end of the log with what
/// the challenger has actually read, so it is never taken for a complete
/// view: the challenger keeps reading, and waits again once the leader's
/// renewals arrive. (A check of the partition alone, "nothing open", and a
/// read after it would have let the challenger fence a healthy leader.)
#[tokio::test(flavor = "current_thread")]
async fn a_read_that_lags_is_never_taken_for_a_complete_view() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let b_transport = Arc::new(Hooked::new(w.cluster.transport()));
    let (tx, mut rx) = events::channel();
    let b = spawn_on(b_transport.clone(), "b", w.options().with_events(tx));
    w.run_until(T0 + 1_000).await;
    // From here on b's polls bring nothing: a's renewals do not reach it.
    b_transport.set_lagging(true);
    w.run_until(T0 + 2 * ms(LEASE)).await;
    assert!(!b.is_finished(), "b does not take over on a stale view");
    assert!(a.is_held(), "a renews all along");
    let calls = b_transport.take_calls();
    assert!(
        calls.iter().any(|c| c == "held_back Unread"),
        "b's turn came on its stale view and the check refused it: {calls:?}"
    );
    assert!(!calls.iter().any(|c| c == "acquire_epoch"), "{calls:?}");
    let seen = names(&drain(&mut rx));
    assert!(!seen.contains(&"challenging"), "{seen:?}");
    assert!(
        !seen.contains(&"held_back"),
        "nothing is held back: {seen:?}"
    );

    // The reads catch up: b sees the renewals and waits again.
    b_transport.set_lagging(false);
    w.run_until(T0 + 2 * ms(LEASE) + 2_000).await;
    assert!(!b.is_finished());
    assert!(a.is_held());
    let t = describe_leadership(w.transport().as_ref(), ROLE)
        .await
        .unwrap();
    assert_eq!(t.token, a.token());
}

/// The check and the read are one request: as two, a transaction opened
/// between them would hide from the read what the check did not cover
/// (the first lease of a challenger elected in that instant). The
/// decision rests on the check alone: "caught up" is followed by the
/// mint, with no read in between for a transaction to hide anything from.
/// A transaction opened right after the check is the same as one opened
/// after any check and before InitProducerId: the fence keeps it safe.
#[tokio::test(flavor = "current_thread")]
async fn the_decision_to_challenge_rests_on_the_check_alone() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let b_transport = Arc::new(Hooked::new(w.cluster.transport()));
    let b = spawn_on(b_transport.clone(), "b", w.options());
    w.run_until(T0 + 1_000).await;
    // a dies; b's turn comes at a's deadline.
    let deadline = a.lease().deadline;
    drop(a);
    let staller = w.cluster.clone();
    b_transport.after_next_held_back(move || {
        let t = staller.transport();
        let stalled = t.mint(&neighbour()).unwrap();
        let p = role_partition(ROLE, PARTITIONS).unwrap();
        stalled
            .write_lease_open(StateRecord {
                partition: p,
                key: encode_key(&Key::lease(neighbour())).unwrap(),
                value: Some(b"opened after the check".to_vec()),
            })
            .unwrap();
        // Dropping the handle leaves the transaction open (only a newer
        // mint of the neighbour role would abort it).
        drop(stalled);
    });
    w.run_until(deadline + 1_000).await;
    let b = leader(b).await;
    let calls = b_transport.take_calls();
    assert_eq!(
        from_last_check(&calls),
        ["held_back CaughtUp", "acquire_epoch"],
        "{calls:?}"
    );
    let last_poll = calls
        .iter()
        .rposition(|c| c.starts_with("poll_partition"))
        .unwrap();
    assert!(
        calls[last_poll + 1].starts_with("held_back"),
        "one read, then the check: {calls:?}"
    );
    assert!(b.is_held());
}

/// A neighbour's transaction left open (its member
/// killed between its Produce and its EndTxn: it stays open for the
/// neighbour's whole lease) hides every later record from a read_committed
/// reader, but none of it is this role's. The standby reads past it: it
/// sees the leader's renewals while the leader lives, and takes over at the
/// dead leader's deadline, with the neighbour's transaction still open.
#[tokio::test(flavor = "current_thread")]
async fn a_neighbours_open_transaction_does_not_hold_a_dead_leaders_role() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let b_transport = Arc::new(Hooked::new(w.cluster.transport()));
    let (tx, mut rx) = events::channel();
    let b = spawn_on(b_transport.clone(), "b", w.options().with_events(tx));
    w.run_until(T0 + 1_000).await;
    let _stalled = stall_neighbour(&w);

    // Two leases with the transaction open: a renews, b sees the renewals
    // past it and never challenges.
    w.run_until(T0 + 2 * ms(LEASE)).await;
    assert!(!b.is_finished(), "b does not take over from a live leader");
    assert!(a.is_held(), "a renews all along");
    let seen = names(&drain(&mut rx));
    assert!(seen.contains(&"held_back"), "{seen:?}");
    assert!(!seen.contains(&"challenging"), "{seen:?}");
    let calls = b_transport.take_calls();
    assert!(
        calls
            .iter()
            .any(|c| c.starts_with("read_past_stable") && !c.ends_with("None")),
        "b read past the open transaction: {calls:?}"
    );

    // a dies: b takes over at a's last deadline, the transaction still open.
    let deadline = a.lease().deadline;
    let a_token = a.token();
    drop(a);
    w.run_until(deadline - 500).await;
    assert!(!b.is_finished(), "not before a's deadline");
    w.run_until(deadline + 1_000).await;
    let b = leader(b).await;
    assert!(b.token() > a_token);
    assert_eq!(
        w.transport().held_back(w.partition(), 0).await.unwrap(),
        Backlog::HeldBack,
        "the neighbour's transaction is still open"
    );
    let calls = b_transport.take_calls();
    let last = from_last_check(&calls);
    assert_eq!(last[0], "held_back HeldBack", "{calls:?}");
    assert!(
        last[1].starts_with("read_past_stable") && last[1].ends_with("committed, 1 open"),
        "the renewals a wrote past the open entry, which alone is open: {calls:?}"
    );
    assert_eq!(last[2], "acquire_epoch", "{calls:?}");
}

/// What the look past an open transaction never decides: a record of the
/// role itself in the open transaction (the holder's renewal, a first
/// lease or a resign's tombstone in flight). The standby waits for that
/// transaction, as before; once it is decided, the role fails over.
#[tokio::test(flavor = "current_thread")]
async fn an_open_transaction_holding_the_roles_own_record_is_waited_for() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let b_transport = Arc::new(Hooked::new(w.cluster.transport()));
    let b = spawn_on(b_transport.clone(), "b", w.options());
    w.run_until(T0 + 1_000).await;
    // A writer of this role's lease key left its transaction open.
    let stalled = w.transport().mint(&neighbour()).unwrap();
    stalled
        .write_lease_open(StateRecord {
            partition: w.partition(),
            key: encode_key(&Key::lease(ROLE)).unwrap(),
            value: Some(b"in flight".to_vec()),
        })
        .unwrap();
    let deadline = a.lease().deadline;
    drop(a);
    w.run_until(deadline + ms(LEASE)).await;
    assert!(
        !b.is_finished(),
        "b waits for the transaction that holds a record of its role"
    );
    let calls = b_transport.take_calls();
    assert!(
        calls
            .iter()
            .any(|c| c == "read_past_stable 0 committed, 1 open"),
        "{calls:?}"
    );
    assert!(!calls.iter().any(|c| c == "acquire_epoch"), "{calls:?}");
    abort_neighbour(&w.transport());
    drop(stalled);
    w.run_until(deadline + ms(LEASE) + 2_000).await;
    assert!(leader(b).await.is_held());
}

/// The look itself: committed records past the open entry, the open ones
/// apart, nothing for a reader below the last stable offset or with
/// nothing open.
#[tokio::test(flavor = "current_thread")]
async fn the_look_past_an_open_transaction_sorts_what_lies_there() {
    let w = World::new();
    let t = w.transport();
    let p = w.partition();
    let reg = |m: &str| StateRecord {
        partition: p,
        key: encode_key(&Key::registration(ROLE, m)).unwrap(),
        value: Some(m.as_bytes().to_vec()),
    };
    t.append(reg("a")).await.unwrap();
    assert_eq!(
        t.read_past_stable(p, 1).await.unwrap(),
        None,
        "nothing open"
    );
    let _stalled = stall_neighbour(&w);
    t.append(reg("b")).await.unwrap();
    assert_eq!(
        t.read_past_stable(p, 0).await.unwrap(),
        None,
        "offset 0 is decided and unread"
    );
    let past = t.read_past_stable(p, 1).await.unwrap().unwrap();
    assert_eq!(past.end, 3);
    assert_eq!(
        past.committed.iter().map(|r| r.offset).collect::<Vec<_>>(),
        [2]
    );
    assert_eq!(past.open.iter().map(|r| r.offset).collect::<Vec<_>>(), [1]);
    let e = t.read_past_stable(p, -1).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

/// A member whose registration sits behind a neighbour's open transaction
/// waits to read it back (read_committed) until the transaction is
/// decided; a wait longer than its lease is logged, once, naming the
/// offsets, and the member goes on once the transaction is aborted.
#[tokio::test(flavor = "current_thread")]
async fn a_registration_held_back_past_the_lease_is_warned_about_once() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .finish();
    // The current-thread runtime runs the member's task on this thread.
    let _log = tracing::subscriber::set_default(subscriber);
    let w = World::new();
    let stalled = stall_neighbour(&w);
    let a = w.spawn("a");
    let warning = "the record this member wrote is not readable yet";
    w.run_until(T0 + ms(LEASE) - 1_000).await;
    assert!(!a.is_finished(), "a waits for its registration");
    assert_eq!(captured.lines_with(warning), 0, "not within the lease");
    w.run_until(T0 + 3 * ms(LEASE)).await;
    assert!(!a.is_finished(), "a still waits");
    assert_eq!(captured.lines_with(warning), 1, "once past the lease");
    assert_eq!(
        captured.lines_with("offset=1 read_up_to=0"),
        1,
        "the offsets are named"
    );

    abort_neighbour(&w.transport());
    drop(stalled);
    w.run_until(T0 + 3 * ms(LEASE) + 2_000).await;
    let a = leader(a).await;
    assert!(a.is_held());
    assert_eq!(captured.lines_with(warning), 1);
}

/// Lets `d` of time pass in one-second steps (each poll waits a second),
/// whatever the wall clock reads.
async fn pass(w: &World, d: std::time::Duration) {
    settle().await;
    let mut left = ms(d);
    while left > 0 {
        let step = left.min(1_000);
        w.clock
            .advance(std::time::Duration::from_millis(step as u64));
        settle().await;
        left -= step;
    }
}

/// The wait for a held-back registration is measured on the monotonic
/// clock: a wall clock stepped forward by more than the lease raises no
/// warning, and one stepped back does not hold the warning back once the
/// wait really outlasts the lease.
#[tokio::test(flavor = "current_thread")]
async fn the_held_back_warning_is_measured_on_the_monotonic_clock_not_the_wall_clock() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .finish();
    let _log = tracing::subscriber::set_default(subscriber);
    let w = World::new();
    let _stalled = stall_neighbour(&w);
    let a = w.spawn("a");
    let warning = "the record this member wrote is not readable yet";
    pass(&w, std::time::Duration::from_secs(2)).await;
    assert!(!a.is_finished(), "a waits for its registration");

    w.clock.step_wall(3 * ms(LEASE));
    pass(&w, std::time::Duration::from_secs(3)).await;
    assert!(!a.is_finished(), "a still waits");
    assert_eq!(
        captured.lines_with(warning),
        0,
        "five seconds of waiting, whatever the wall clock says"
    );

    w.clock.step_wall(-10 * ms(LEASE));
    pass(&w, LEASE).await;
    assert!(!a.is_finished(), "a still waits");
    assert_eq!(
        captured.lines_with(warning),
        1,
        "past the lease of waiting, though the wall clock went back"
    );
}
