//! The core [`Client`] on a real Kafka: acquire,
//! describe and hand over through clients, two roles on one client, and a
//! cancelled candidate on the holder's transport.
//!
//! That two roles share the client's registration producer, readers and
//! describe connection is not tested: a `Client::new` exposes nothing that
//! would show it (its transport is a `dyn Transport`).
//!
//! Needs a real cluster: `KRABKA_BOOTSTRAP`, or `ci/kafka.sh start 1` is run.
#![cfg(feature = "kafka")]

mod support;

use std::time::Duration;

use krabka_coordination::client::Client;
use krabka_coordination::events::{self, EventKind, EventReceiver};
use krabka_coordination::leadership::{acquire_leadership, LeadershipOptions};
use krabka_coordination::transport::kafka::TopicSpec;
use krabka_coordination::transport::LeaseWriter;
use krabka_coordination::{Error, ErrorKind};
use support::*;
use tokio_util::sync::CancellationToken;

/// The longest any awaited step may take before the test gives up.
const PATIENCE: Duration = Duration::from_secs(60);

/// A client on the single-node cluster, with the shared topic in place.
async fn client() -> Client {
    init_tracing();
    let client = Client::new(config(&bootstrap())).expect("client");
    let report = client
        .ensure_state_topic(TopicSpec::development())
        .await
        .expect("the shared state topic");
    assert_eq!(report.partitions, STATE_PARTITIONS);
    client
}

/// Short leases, so a test's hand-overs and renewals are quick.
fn options(client: &Client) -> LeadershipOptions {
    client
        .leadership_options()
        .with_lease_duration(Duration::from_secs(10))
        .with_renew_interval(Duration::from_secs(2))
        .with_challenge_stagger(Duration::from_secs(1))
}

/// Receives events until one named `name`; returns it.
async fn until_event(rx: &mut EventReceiver, name: &str) -> events::Event {
    tokio::time::timeout(PATIENCE, async {
        loop {
            let e = rx.recv().await.expect("the member's events ended");
            if e.kind.name() == name {
                return e;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {name:?} event"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_acquires_describes_and_hands_over_to_another_client() {
    let first = client().await;
    first
        .check_state_topic(TopicSpec::development())
        .await
        .unwrap();
    let role = unique("client");
    let a = first.acquire(&role, "a", options(&first)).await.unwrap();
    assert_eq!(a.partition(), partition_of(&role));
    let status = first.describe_leadership(&role).await.unwrap();
    assert!(
        status.authoritative(&a.token()),
        "{status:?} vs {}",
        a.token()
    );
    let state = first.describe_role_state(&role).await.unwrap();
    assert_eq!(state.partition, partition_of(&role));
    assert_eq!(
        state
            .roster
            .iter()
            .map(|e| e.member.as_str())
            .collect::<Vec<_>>(),
        ["a"]
    );
    let lease = state.lease.expect("a's lease");
    assert_eq!((lease.member.as_str(), lease.token), ("a", a.token()));

    // The same client refuses the role while it holds it.
    let err = first
        .acquire(&role, "a2", options(&first))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err:?}");

    // Another client waits, and takes over when a resigns.
    let second = client().await;
    let (tx, mut rx) = events::channel();
    let b = {
        let (second, role) = (second.clone(), role.clone());
        let opts = options(&second).with_events(tx);
        tokio::spawn(async move { second.acquire(&role, "b", opts).await })
    };
    until_event(&mut rx, "waiting").await;
    a.resign().await.unwrap();
    let b = tokio::time::timeout(PATIENCE, b)
        .await
        .expect("b takes over")
        .unwrap()
        .unwrap();
    assert!(b.token() > a.token(), "{} -> {}", a.token(), b.token());
    let status = first.describe_leadership(&role).await.unwrap();
    assert!(status.authoritative(&b.token()));
    assert!(!status.authoritative(&a.token()));
    let state = second.describe_role_state(&role).await.unwrap();
    assert_eq!(
        state
            .roster
            .iter()
            .map(|e| e.member.as_str())
            .collect::<Vec<_>>(),
        ["b"],
        "a deregistered"
    );
    assert_eq!(state.lease.map(|l| l.token), Some(b.token()));
    // The role is free on the first client again.
    assert!(first.claimed_roles().is_empty());
    b.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_roles_on_one_client_are_held_and_resigned_independently() {
    let client = client().await;
    let (topic, data) = data_topic("krabka-test-client-data").await;
    let (r1, r2) = (unique("client-one"), unique("client-two"));
    let one = client.acquire(&r1, "m", options(&client)).await.unwrap();
    let two = client.acquire(&r2, "m", options(&client)).await.unwrap();
    let mut claimed = vec![r1.clone(), r2.clone()];
    claimed.sort();
    assert_eq!(client.claimed_roles(), claimed);
    one.write(vec![data_record(&topic, 0, r1.as_bytes())])
        .await
        .unwrap();
    two.write(vec![data_record(&topic, 0, r2.as_bytes())])
        .await
        .unwrap();

    one.resign().await.unwrap();
    assert!(two.is_held(), "resigning one role leaves the other held");
    let after = format!("{r2}-after");
    two.write(vec![data_record(&topic, 0, after.as_bytes())])
        .await
        .expect("the other role still writes");
    let err = one
        .write(vec![data_record(&topic, 0, b"resigned")])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Resigned);
    assert!(client
        .describe_leadership(&r2)
        .await
        .unwrap()
        .authoritative(&two.token()));
    assert!(!client
        .describe_leadership(&r1)
        .await
        .unwrap()
        .authoritative(&one.token()));
    assert_eq!(client.claimed_roles(), [r2.as_str()]);
    let written = read_until(&data, 0, Duration::from_secs(10), |r| {
        has_value(r, after.as_bytes())
    })
    .await;
    for v in [r1.as_bytes(), r2.as_bytes(), after.as_bytes()] {
        assert!(has_value(&written, v));
    }
    assert!(!has_value(&written, b"resigned"));
    two.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_candidate_on_the_holders_transport_leaves_the_holder_writing() {
    // The Client refuses a second acquire of a role, so the candidate comes
    // through the free function on the client's own transport.
    let client = client().await;
    let (topic, data) = data_topic("krabka-test-cancel-data").await;
    let role = unique("cancel");
    let (atx, mut arx) = events::channel();
    let a = client
        .acquire(&role, "a", options(&client).with_events(atx))
        .await
        .unwrap();
    let cancel = CancellationToken::new();
    let (tx, mut rx) = events::channel();
    let b = {
        let (t, role) = (client.transport().clone(), role.clone());
        let opts = options(&client).with_cancel(cancel.clone()).with_events(tx);
        tokio::spawn(async move { acquire_leadership(t, &role, "b", opts).await })
    };
    until_event(&mut rx, "waiting").await;
    cancel.cancel();
    let err = tokio::time::timeout(PATIENCE, b)
        .await
        .expect("the cancel ends the acquire")
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, Error::Cancelled), "{err:?}");
    let rest: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok())
        .map(|e| e.kind.name())
        .collect();
    assert_eq!(rest.last(), Some(&"deregistered"), "{rest:?}");
    assert!(
        rest.iter().all(|n| ["waiting", "deregistered"].contains(n)),
        "b minted nothing and left: {rest:?}"
    );

    // a keeps renewing and writing through its own epoch.
    while arx.try_recv().is_ok() {}
    let renewed = until_event(&mut arx, "renewed").await;
    assert!(matches!(renewed.kind, EventKind::Renewed { .. }));
    assert!(a.is_held());
    a.write(vec![data_record(&topic, 0, b"a-after-the-cancel")])
        .await
        .expect("a still writes");
    let written = read_until(&data, 0, Duration::from_secs(10), |r| {
        has_value(r, b"a-after-the-cancel")
    })
    .await;
    assert!(has_value(&written, b"a-after-the-cancel"));
    let status = client.describe_leadership(&role).await.unwrap();
    assert!(status.authoritative(&a.token()));
    let state = client.describe_role_state(&role).await.unwrap();
    assert_eq!(
        state
            .roster
            .iter()
            .map(|e| e.member.as_str())
            .collect::<Vec<_>>(),
        ["a"]
    );
    a.resign().await.unwrap();
}

/// A leader deposed without noticing (here: a successor minted and wrote its
/// lease while the leader went on) resigns: its tombstone is fenced and no
/// epoch is bumped, so the successor's lease and epoch stand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_leaders_resign_leaves_the_successor_in_place() {
    let role = unique("deposed-resign");
    let a = client().await;
    let leadership = a.acquire(&role, "a", options(&a)).await.expect("a leads");
    let successor = transport("deposed-resign-b").await;
    let b = successor
        .mint_epoch(&role, Duration::from_secs(10))
        .await
        .unwrap();
    b.write_lease(
        lease_record(&role, Some(lease_value("b", b.token(), 1))),
        Duration::from_secs(30),
    )
    .await
    .unwrap();

    leadership
        .resign()
        .await
        .expect("the resign itself succeeds");
    assert!(!leadership.is_held());
    assert_eq!(
        a.describe_leadership(&role).await.unwrap().token,
        b.token(),
        "the resign minted nothing above the successor"
    );
    let state = a.describe_role_state(&role).await.unwrap();
    assert_eq!(
        state.lease.map(|l| (l.member, l.token)),
        Some(("b".to_owned(), b.token())),
        "the successor's lease stands"
    );
    b.write_lease(
        lease_record(&role, Some(lease_value("b", b.token(), 2))),
        Duration::from_secs(30),
    )
    .await
    .expect("the successor renews");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_to_a_data_topic_that_does_not_exist_fails_for_good_naming_it() {
    let client = client().await;
    let role = unique("krabka-test-missing-data");
    let held = tokio::time::timeout(PATIENCE, client.acquire(&role, "a", options(&client)))
        .await
        .expect("elected in time")
        .expect("elected");
    let topic = unique("krabka-test-no-such-data-topic");
    let started = std::time::Instant::now();
    let e = tokio::time::timeout(
        PATIENCE,
        held.write(vec![krabka_coordination::transport::OutRecord {
            topic: topic.clone(),
            partition: Some(0),
            key: None,
            value: Some(b"v".to_vec()),
            headers: vec![],
        }]),
    )
    .await
    .expect("the write ends on its own")
    .unwrap_err();
    // A retry creates no topic: not TRANSIENT, which callers retry.
    assert_eq!(e.kind(), ErrorKind::Fatal, "{e}");
    let m = e.to_string();
    assert!(m.contains(&topic) && m.contains("does not exist"), "{m}");
    // Which of the caller's roles wrote it.
    assert!(
        m.contains(&format!("a guarded write for role \"{role}\"")),
        "{m}"
    );
    assert!(started.elapsed() < Duration::from_secs(5), "{e}");
    // The term goes on: the write failed before anything was sent.
    assert!(held.is_held(), "{e}");
    held.resign().await.unwrap();
}
