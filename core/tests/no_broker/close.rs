//! Closing a client ends everything it started, on the in-memory
//! transport: its held terms are resigned (a standby of another process
//! takes over at once), its waiting acquires are cancelled and
//! deregistered, its observers end, its leader loops stop, and every later
//! use is refused. The same on a real Kafka is tested in each binding.

use crate::world;

use std::time::Duration;

use krabka_coordination::client::Client;
use krabka_coordination::observe::ObserveOptions;
use krabka_coordination::{Error, ErrorKind};
use world::*;

const WAITING: &str = "waiting-role";
const LOOPED: &str = "looped-role";

fn client(w: &World) -> Client {
    Client::from_transport(w.transport())
        .with_partitions(PARTITIONS)
        .unwrap()
}

fn assert_closed(e: Error) {
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e:?}");
    assert!(e.to_string().contains("the client is closed"), "{e}");
}

#[tokio::test(flavor = "current_thread")]
async fn close_resigns_cancels_and_stops_everything_the_client_started() {
    let w = World::new();
    let (a, other) = (client(&w), client(&w));
    // a holds ROLE; other's b waits for it.
    let held = a.acquire(ROLE, "a", w.options()).await.unwrap();
    let standby = {
        let (c, o) = (other.clone(), w.options());
        tokio::spawn(async move { c.acquire(ROLE, "b", o).await })
    };
    // other's x holds WAITING; a waits for it.
    let _x = other.acquire(WAITING, "x", w.options()).await.unwrap();
    let pending = {
        let (c, o) = (a.clone(), w.options());
        tokio::spawn(async move { c.acquire(WAITING, "a", o).await })
    };
    // a leads LOOPED in a loop whose work runs until its term ends.
    let looped = {
        let (c, o) = (a.clone(), w.options());
        tokio::spawn(async move {
            c.lead(LOOPED, "a", o, |term| async move {
                term.ended().cancelled().await;
                Ok(())
            })
            .await
        })
    };
    let mut observer = a
        .observe(
            &[ROLE],
            ObserveOptions::default()
                .with_clock(std::sync::Arc::new(w.clock.clone()))
                .with_poll_wait(Duration::from_secs(1)),
        )
        .await
        .unwrap();
    w.run_until(T0 + 2_000).await;
    assert!(!standby.is_finished() && !pending.is_finished());
    assert!(!looped.is_finished());
    assert_eq!(a.claimed_roles(), [ROLE, LOOPED, WAITING]);

    let closing = {
        let a = a.clone();
        tokio::spawn(async move { a.close().await })
    };
    w.run_until(T0 + 4_000).await;
    assert!(closing.is_finished(), "the close returned");
    assert!(a.is_closed());

    // The held term was resigned, and the standby took over at once, long
    // before a's lease would have run out.
    assert!(!held.is_held());
    assert!(matches!(held.err().as_deref(), Some(Error::Resigned)));
    assert!(standby.is_finished(), "b took over within the hand-over");
    let b = standby.await.unwrap().unwrap();
    assert!(b.token() > held.token());
    // The waiting acquire was cancelled and deregistered.
    let e = pending.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled, "{e:?}");
    let roster = other.describe_role_state(WAITING).await.unwrap().roster;
    let members: Vec<_> = roster.iter().map(|r| r.member.as_str()).collect();
    assert_eq!(
        members,
        ["x"],
        "a left the roster of the role it waited for"
    );
    // The leader loop stopped, its term resigned.
    assert!(looped.is_finished());
    looped.await.unwrap().unwrap();
    let lease = other.describe_role_state(LOOPED).await.unwrap().lease;
    assert!(lease.is_none(), "the loop's lease was cleared: {lease:?}");
    // The observer ended.
    assert!(observer.next().await.unwrap().is_none());
    assert!(a.claimed_roles().is_empty());

    // Every later use is refused, and closing again returns at once.
    assert_closed(a.acquire("new-role", "a", w.options()).await.unwrap_err());
    assert_closed(a.describe_leadership(ROLE).await.unwrap_err());
    assert_closed(a.describe_role_state(ROLE).await.unwrap_err());
    assert_closed(a.describe_roles().await.unwrap_err());
    assert_closed(
        a.observe(&[ROLE], ObserveOptions::default())
            .await
            .unwrap_err(),
    );
    let e = a
        .lead("new-role", "a", w.options(), |_| async { Ok(()) })
        .await;
    assert!(e.is_ok(), "a loop of a closed client ends at once: {e:?}");
    a.close().await;
    // The other client goes on.
    assert!(b.is_held());
}

#[tokio::test(flavor = "current_thread")]
async fn a_close_racing_the_win_leaves_nothing_held() {
    let w = World::new();
    let a = client(&w);
    // The close starts while the acquire is under way: either the acquire
    // is refused, or it is cancelled, or the term won is resigned.
    let acquire = {
        let (c, o) = (a.clone(), w.options());
        tokio::spawn(async move { c.acquire(ROLE, "a", o).await })
    };
    tokio::task::yield_now().await;
    a.close().await;
    let outcome = acquire.await.unwrap();
    match outcome {
        Err(e) => assert!(
            matches!(e.kind(), ErrorKind::Cancelled | ErrorKind::InvalidArgument),
            "{e:?}"
        ),
        Ok(l) => assert!(!l.is_held(), "a term won across a close is resigned"),
    }
    w.run_until(T0 + 1_000).await;
    let state = client(&w).describe_role_state(ROLE).await.unwrap();
    assert!(state.lease.is_none(), "{:?}", state.lease);
    assert!(state.roster.is_empty(), "{:?}", state.roster);
}

/// A close resigns the terms with the least lease left first: queued
/// behind many resigns, those are the ones that would miss their lease.
/// Held in the order first, second, third, they have 30, 24 and 28 s left
/// once first renewed, and are resigned second, third, first.
#[tokio::test(flavor = "current_thread")]
async fn close_resigns_the_terms_with_the_least_lease_left_first() {
    let w = World::new();
    let a = client(&w);
    let (tx, mut rx) = krabka_coordination::events::channel();
    let mut held = Vec::new();
    for (i, role) in ["first", "second", "third"].into_iter().enumerate() {
        w.run_until(T0 + 4_000 * i as i64).await;
        let options = w.options().with_events(tx.clone());
        held.push(a.acquire(role, "a", options).await.unwrap());
    }
    // first renews at T0 + 10 s (renew interval 10 s): 30 s left again.
    w.run_until(T0 + 10_500).await;
    drain(&mut rx);
    let closing = {
        let a = a.clone();
        tokio::spawn(async move { a.close().await })
    };
    w.run_until(T0 + 12_000).await;
    assert!(closing.is_finished(), "the close returned");
    let resigned: Vec<String> = drain(&mut rx)
        .into_iter()
        .filter(|e| e.kind.name() == "resigned")
        .map(|e| e.role.to_string())
        .collect();
    assert_eq!(resigned, ["second", "third", "first"]);
}
