//! The observer on a real Kafka: a third party that
//! watches a role without joining it sees a hand-over and a crash failover
//! in order, each new leader with the token that the role's transaction
//! coordinator reports (`describe_leadership`), and a standby's `waiting`
//! event names the holder. The member that crashes is a separate process
//! killed with SIGKILL.
#![cfg(feature = "kafka")]

mod support;

use std::time::{Duration, Instant};

use krabka_coordination::client::Client;
use krabka_coordination::events::{self, EventKind};
use krabka_coordination::observe::{Change, ObserveOptions, Observer, RoleView};
use krabka_coordination::FencingToken;
use support::*;

const LEASE: Duration = Duration::from_secs(3);
const RENEW: Duration = Duration::from_secs(1);

fn client() -> Client {
    Client::new(config(&bootstrap()))
        .unwrap()
        .with_partitions(STATE_PARTITIONS)
        .unwrap()
}

fn options(c: &Client) -> krabka_coordination::leadership::LeadershipOptions {
    c.leadership_options()
        .with_lease_duration(LEASE)
        .with_renew_interval(RENEW)
        .with_challenge_stagger(Duration::from_millis(500))
}

/// The next view within `within`, or a failure naming what was awaited.
async fn next_view(o: &mut Observer, what: &str, within: Duration) -> RoleView {
    match tokio::time::timeout(within, o.next()).await {
        Ok(Ok(Some(v))) => v,
        Ok(Ok(None)) => panic!("the observer ended while waiting for {what}"),
        Ok(Err(e)) => panic!("the observer failed while waiting for {what}: {e}"),
        Err(_) => panic!("no view within {within:?} while waiting for {what}"),
    }
}

/// Views until one of `change`, skipping roster changes (registrations
/// and deregistrations interleave with the leader's records); any other
/// change first fails the test, so the order is asserted.
async fn expect(o: &mut Observer, change: Change, within: Duration) -> RoleView {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let v = next_view(o, change.name(), left).await;
        if v.change == change {
            return v;
        }
        assert_eq!(
            v.change,
            Change::Roster,
            "expected {change:?} next (roster changes aside), got {v:#?}"
        );
    }
}

/// Child mode: member "b" acquires the role, prints its token once
/// elected, and waits to be killed.
async fn member_b_child(role: &str) {
    init_tracing();
    let c = client();
    let held = c.acquire(role, "b", options(&c)).await.unwrap();
    let t = held.token();
    println!("ELECTED {} {}", t.producer_id, t.producer_epoch);
    tokio::time::sleep(Duration::from_secs(120)).await;
    panic!("the child was not killed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_sees_a_handover_and_a_crash_failover_in_order() {
    if let Ok(role) = std::env::var(CHILD_ENV) {
        return member_b_child(&role).await;
    }
    init_tracing();
    let role = unique("observe");
    let _ = transport("observe-setup").await; // the shared state topic
    let watcher = client();
    let mut o = watcher
        .observe(&[role.as_str()], ObserveOptions::default())
        .await
        .unwrap();
    let initial = next_view(&mut o, "the initial view", Duration::from_secs(20)).await;
    assert_eq!(initial.change, Change::Initial);
    assert!(
        initial.leader.is_none() && initial.roster.is_empty(),
        "{initial:#?}"
    );

    // a leads.
    let ca = client();
    let a = ca.acquire(&role, "a", options(&ca)).await.unwrap();
    let v = expect(&mut o, Change::Elected, Duration::from_secs(10)).await;
    let lease = v.leader.as_ref().unwrap();
    assert_eq!((lease.member.as_str(), lease.token), ("a", a.token()));
    let status = watcher.describe_leadership(&role).await.unwrap();
    assert!(
        status.authoritative(&lease.token),
        "{status:?} vs {lease:?}"
    );

    // b (another process) waits behind a; its waiting event is checked
    // through c below, which waits behind b the same way.
    let mut child = spawn_child(
        "an_observer_sees_a_handover_and_a_crash_failover_in_order",
        &[(CHILD_ENV, role.clone()), ("KRABKA_BOOTSTRAP", bootstrap())],
    );
    let joined = expect_roster(&mut o, &["a", "b"]).await;
    assert_eq!(joined.leader.as_ref().unwrap().member, "a");

    // The hand-over: a resigns, b is elected.
    let a_token = a.token();
    a.resign().await.unwrap();
    let cleared = expect(&mut o, Change::Cleared, Duration::from_secs(10)).await;
    assert!(cleared.leader.is_none());
    let ready = wait_for_line(&mut child, "ELECTED", Duration::from_secs(30));
    let mut parts = ready.split_whitespace().map(|s| s.parse::<i64>().unwrap());
    let b_token = FencingToken::new(parts.next().unwrap(), parts.next().unwrap() as i16);
    let v = expect(&mut o, Change::Elected, Duration::from_secs(10)).await;
    let lease = v.leader.as_ref().unwrap();
    assert_eq!((lease.member.as_str(), lease.token), ("b", b_token));
    assert!(b_token > a_token);
    let status = watcher.describe_leadership(&role).await.unwrap();
    assert!(status.authoritative(&b_token), "{status:?} vs {b_token}");

    // c waits behind b: its waiting event names b and b's token.
    let cc = client();
    let (tx, mut rx) = events::channel();
    let c_task = {
        let (cc, role, opts) = (cc.clone(), role.clone(), options(&cc).with_events(tx));
        tokio::spawn(async move { cc.acquire(&role, "c", opts).await })
    };
    let waiting = loop {
        let e = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("c reports waiting")
            .expect("c's events");
        if let EventKind::Waiting {
            holder,
            holder_token,
            ..
        } = e.kind
        {
            break (holder, holder_token);
        }
    };
    assert_eq!(
        (waiting.0.as_deref(), waiting.1),
        (Some("b"), Some(b_token)),
        "the standby's waiting event names the holder and its token"
    );
    expect_roster(&mut o, &["b", "c"]).await;

    // The crash: b is killed; its lease lapses, then c is elected.
    let killed = Instant::now();
    sigkill(&mut child);
    let lapsed = expect(&mut o, Change::Lapsed, LEASE + Duration::from_secs(10)).await;
    assert!(lapsed.leader.is_none());
    assert_eq!(lapsed.lapsed.as_ref().unwrap().token, b_token);
    assert!(
        lapsed.at >= lapsed.lapsed.as_ref().unwrap().deadline,
        "a lapse is reported at the deadline, not before: {lapsed:#?}"
    );
    let v = expect(&mut o, Change::Elected, Duration::from_secs(20)).await;
    let c = c_task.await.unwrap().unwrap();
    let lease = v.leader.as_ref().unwrap();
    assert_eq!((lease.member.as_str(), lease.token), ("c", c.token()));
    assert!(c.token() > b_token);
    let status = watcher.describe_leadership(&role).await.unwrap();
    assert!(status.authoritative(&c.token()), "{status:?}");
    println!(
        "observer: crash to c's election seen {:?} after the kill",
        killed.elapsed()
    );
    c.resign().await.unwrap();
    expect(&mut o, Change::Cleared, Duration::from_secs(10)).await;
}

/// Waits for a view whose roster is `members` (in rank order).
async fn expect_roster(o: &mut Observer, members: &[&str]) -> RoleView {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let v = next_view(o, &format!("the roster {members:?}"), left).await;
        let now: Vec<&str> = v.roster.iter().map(|e| e.member.as_str()).collect();
        if now == members {
            return v;
        }
        assert_eq!(
            v.change,
            Change::Roster,
            "only roster changes before {members:?}: {v:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_on_a_missing_state_topic_fails_as_the_acquire_does() {
    let topic = unique("krabka-test-observe-missing");
    let c = Client::new(config(&bootstrap()).with_state_topic(&topic))
        .unwrap()
        .with_partitions(STATE_PARTITIONS)
        .unwrap();
    let mut o = c
        .observe(&["billing"], ObserveOptions::default())
        .await
        .unwrap();
    let e = match tokio::time::timeout(Duration::from_secs(15), o.next()).await {
        Ok(Err(e)) => e,
        Ok(Ok(v)) => panic!("a view of a topic that does not exist: {v:?}"),
        Err(_) => panic!("the observer stayed silent on a missing state topic"),
    };
    let acquired = c.acquire("billing", "a", options(&c)).await.unwrap_err();
    assert_eq!(e.kind(), acquired.kind(), "{e} / {acquired}");
    let m = e.to_string();
    assert!(m.contains(&topic) && m.contains("does not exist"), "{m}");
    assert!(m.contains("ensure_state_topic"), "names the remedy: {m}");
    assert!(
        m.contains(&format!("--partitions {STATE_PARTITIONS} ")),
        "with the client's partition count: {m}"
    );
}
