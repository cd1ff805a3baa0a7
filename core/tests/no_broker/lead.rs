//! The leader loop on the in-memory transport and a
//! manual clock: two members alternate as the role is handed over and one
//! is killed; the work learns when its term ends; a fenced member backs off
//! before it contends again; the loop's cancel resigns.

use crate::world;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use krabka_coordination::client::Client;
use krabka_coordination::leadership::{LeadershipOptions, Term};
use krabka_coordination::transport::LeaseWriter;
use krabka_coordination::{Clock, Error, ErrorKind, FencingToken};
use tokio::task::JoinHandle;
use world::*;

/// (member, term number, token, the clock when the term started).
type Log = Arc<Mutex<Vec<(String, u64, FencingToken, i64)>>>;

fn client(w: &World) -> Client {
    Client::from_transport(w.transport())
        .with_partitions(PARTITIONS)
        .unwrap()
}

/// `member` leads [`ROLE`] in a task: each term is logged, then `work`
/// runs; the loop's result is the task's.
fn lead<F, Fut>(
    w: &World,
    member: &str,
    options: LeadershipOptions,
    log: &Log,
    mut work: F,
) -> JoinHandle<Result<(), Error>>
where
    F: FnMut(Term) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<(), Error>> + Send + 'static,
{
    let (c, m, log, clock) = (client(w), member.to_owned(), log.clone(), w.clock.clone());
    tokio::spawn(async move {
        c.lead(ROLE, &m, options, |term| {
            log.lock()
                .unwrap()
                .push((m.clone(), term.number(), term.token(), clock.now_millis()));
            work(term)
        })
        .await
    })
}

/// Work that runs until its term ends.
async fn until_ended(term: Term) -> Result<(), Error> {
    term.ended().cancelled().await;
    Ok(())
}

fn who(log: &Log) -> Vec<(String, u64)> {
    log.lock()
        .unwrap()
        .iter()
        .map(|(m, n, _, _)| (m.clone(), *n))
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn two_members_alternate_through_a_handover_and_a_kill() {
    let w = World::new();
    let log: Log = Arc::default();
    let a_cancel = w.options().cancel.clone();
    let a_options = LeadershipOptions {
        cancel: a_cancel.clone(),
        ..w.options()
    };
    let clock = w.clock.clone();
    // a's first term hands over after 5 s of work; its later terms run
    // until they end.
    let a = lead(&w, "a", a_options, &log, move |term| {
        let clock = clock.clone();
        async move {
            if term.number() == 1 {
                clock.sleep(Duration::from_secs(5)).await;
                Ok(())
            } else {
                until_ended(term).await
            }
        }
    });
    w.run_until(T0).await;
    let b = lead(&w, "b", w.options(), &log, until_ended);
    w.run_until(T0 + 1_000).await;
    assert_eq!(who(&log), [("a".into(), 1)]);
    assert_eq!(w.ranks().await, ["a", "b"]);

    // a's work returns: it resigns, b takes over at once, and a contends
    // again from the tail.
    w.run_until(T0 + 6_000).await;
    assert_eq!(who(&log), [("a".into(), 1), ("b".into(), 1)]);
    let handed = log.lock().unwrap()[1].3;
    assert!(
        handed - T0 <= 5_100,
        "the hand-over is at once: {}",
        handed - T0
    );
    assert_eq!(w.ranks().await, ["b", "a"], "a waits at the tail");

    // b is killed (its task dropped: no resign): a takes over once b's
    // lease has run out.
    b.abort();
    let _ = b.await;
    w.run_until(handed + ms(LEASE) + ms(STAGGER) + 2_000).await;
    assert_eq!(
        who(&log),
        [("a".into(), 1), ("b".into(), 1), ("a".into(), 2)]
    );
    let tokens: Vec<FencingToken> = log.lock().unwrap().iter().map(|t| t.2).collect();
    assert!(tokens.windows(2).all(|p| p[0] < p[1]), "{tokens:?}");
    let took_over = log.lock().unwrap()[2].3;
    assert!(
        took_over >= handed + ms(LEASE),
        "not before b's lease ran out"
    );

    // Cancelling a's loop ends its term (the work sees it) and resigns.
    a_cancel.cancel();
    w.run_until(took_over + 3_000).await;
    assert!(a.is_finished());
    a.await.unwrap().unwrap();
    let state = client(&w).describe_role_state(ROLE).await.unwrap();
    assert!(state.lease.is_none(), "a resigned: {state:?}");
    assert!(
        state.roster.iter().all(|e| e.member != "a"),
        "a deregistered: {state:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_fenced_term_ends_the_work_and_the_member_backs_off() {
    let w = World::new();
    let log: Log = Arc::default();
    let options = LeadershipOptions {
        initial_backoff: Duration::from_secs(2),
        ..w.options()
    };
    let ends: Arc<Mutex<Vec<i64>>> = Arc::default();
    let (ends2, clock) = (ends.clone(), w.clock.clone());
    let a = lead(&w, "a", options, &log, move |term| {
        let (ends, clock) = (ends2.clone(), clock.clone());
        async move {
            term.ended().cancelled().await;
            ends.lock().unwrap().push(clock.now_millis());
            Ok(())
        }
    });
    w.run_until(T0).await;
    assert_eq!(who(&log), [("a".into(), 1)]);
    // A rival mints the role's epoch: a's next renewal is fenced.
    let rival = w.transport().mint(ROLE).unwrap();
    w.run_until(T0 + ms(RENEW) + 500).await;
    let ended = *ends
        .lock()
        .unwrap()
        .first()
        .expect("the work saw its term end");
    assert!(ended <= T0 + ms(RENEW) + 500);
    // a registers again (contends) only after its backoff.
    let registered_at = |w: &World| {
        let w = client(w);
        async move {
            let state = w.describe_role_state(ROLE).await.unwrap();
            state
                .roster
                .iter()
                .find(|e| e.member == "a")
                .map(|e| e.registered_at)
        }
    };
    w.run_until(ended + 1_000).await;
    assert_eq!(
        registered_at(&w).await,
        Some(T0),
        "backing off: the first registration"
    );
    w.run_until(ended + 2_500).await;
    let again = registered_at(&w).await.unwrap();
    assert!(
        again >= ended + 2_000,
        "registered again, not before the backoff: {again}"
    );
    // Its turn comes at its old lease's deadline (the rival wrote none).
    w.run_until(T0 + ms(LEASE) + 2_000).await;
    let log = log.lock().unwrap().clone();
    assert_eq!(log.len(), 2, "{log:?}");
    assert!(log[1].2 > rival.token());
    drop(rival);
    a.abort();
}

#[tokio::test(flavor = "current_thread")]
async fn a_failing_work_resigns_and_ends_the_loop_with_its_error() {
    let w = World::new();
    let log: Log = Arc::default();
    let a = lead(&w, "a", w.options(), &log, |_term| async {
        Err(Error::InvalidArgument("the work failed".into()))
    });
    w.run_until(T0 + 1_000).await;
    let e = a.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("the work failed"), "{e}");
    assert_eq!(who(&log), [("a".into(), 1)], "one term, no retry");
    let state = client(&w).describe_role_state(ROLE).await.unwrap();
    assert!(
        state.lease.is_none() && state.roster.is_empty(),
        "{state:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn cancelling_a_waiting_loop_deregisters_it() {
    let w = World::new();
    let log: Log = Arc::default();
    let a = lead(&w, "a", w.options(), &log, until_ended);
    w.run_until(T0).await;
    let b_options = w.options();
    let b_cancel = b_options.cancel.clone();
    let b = lead(&w, "b", b_options, &log, until_ended);
    w.run_until(T0 + 1_000).await;
    assert_eq!(w.ranks().await, ["a", "b"]);
    b_cancel.cancel();
    w.run_until(T0 + 2_000).await;
    b.await.unwrap().unwrap();
    assert_eq!(w.ranks().await, ["a"]);
    assert_eq!(who(&log), [("a".into(), 1)]);
    a.abort();
}
