//! Bad input and misconfiguration get a clear error, promptly, and nothing
//! is written: roles and member ids the layout cannot
//! hold, settings the transport refuses, producer timeouts longer than the
//! lease, absurd durations, and a cluster that cannot be reached at all.
//!
//! None of these needs a broker: refusals come before any request, and the
//! unreachable cluster is `127.0.0.1:1`. The checks that read the cluster
//! are in `kafka_preflight`.
#![cfg(feature = "kafka")]

use crate::world;

use std::sync::Arc;
use std::time::Duration;

use krabka_coordination::client::Client;
use krabka_coordination::codec::{check_member_id, check_role};
use krabka_coordination::events::{self, EventReceiver};
use krabka_coordination::leadership::LeadershipOptions;
use krabka_coordination::transport::kafka::{KafkaConfig, KafkaTransport};
use krabka_coordination::transport::StateReader;
use krabka_coordination::{Error, ErrorKind};
use world::World;

/// The address nothing listens on.
const NOWHERE: &str = "127.0.0.1:1";

/// The longest a refused call may take before the test gives up (it would
/// otherwise hang, which is the bug these tests catch).
const PATIENCE: Duration = Duration::from_secs(60);

/// An input far longer than any message should quote.
fn huge() -> String {
    "r".repeat(40_000)
}

/// Asserts `e` is an INVALID_ARGUMENT whose message contains every part
/// and stays short (long inputs are quoted only in part).
fn assert_invalid(e: &Error, parts: &[&str]) {
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e:?}");
    let msg = e.to_string();
    for p in parts {
        assert!(msg.contains(p), "{p:?} missing from: {msg}");
    }
    assert!(msg.len() < 1_000, "a long input is quoted in part: {msg}");
}

/// A client on the in-memory cluster.
fn memory_client(w: &World) -> Client {
    Client::from_transport(w.transport())
}

/// Every event delivered so far.
fn names(rx: &mut EventReceiver) -> Vec<&'static str> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e.kind.name());
    }
    out
}

#[test]
fn names_the_layout_cannot_hold_are_invalid_arguments_quoted_in_part() {
    let long = "r".repeat(32_768);
    for (check, what) in [
        (check_role as fn(&str) -> _, "role"),
        (check_member_id, "member id"),
    ] {
        assert_invalid(&check("").unwrap_err(), &[what, "must not be empty"]);
        assert_invalid(
            &check(&long).unwrap_err(),
            &[what, "32768 bytes", "32767", "(32768 bytes)"],
        );
        assert_invalid(
            &check("bill\0ing").unwrap_err(),
            &[what, "NUL byte", "at byte 4", "bill\\0ing"],
        );
        assert!(check(&"r".repeat(32_767)).is_ok(), "the limit itself fits");
        assert!(check("billing-export.v2 (eu)").is_ok());
    }
}

#[tokio::test(flavor = "current_thread")]
async fn acquire_and_describe_refuse_bad_names_before_any_request() {
    let w = World::new();
    let client = memory_client(&w);
    let options = LeadershipOptions::default().with_clock(Arc::new(w.clock.clone()));
    let nul = "a\0b".to_owned();
    for (role, member, what) in [
        (String::new(), "m".to_owned(), "role"),
        (huge(), "m".to_owned(), "role"),
        (nul.clone(), "m".to_owned(), "role"),
        ("billing".to_owned(), String::new(), "member id"),
        ("billing".to_owned(), huge(), "member id"),
        ("billing".to_owned(), nul.clone(), "member id"),
    ] {
        let e = client
            .acquire(&role, &member, options.clone())
            .await
            .unwrap_err();
        assert_invalid(&e, &[what]);
    }
    for role in [String::new(), huge(), nul] {
        assert_invalid(
            &client.describe_leadership(&role).await.unwrap_err(),
            &["role"],
        );
        assert_invalid(
            &client.describe_role_state(&role).await.unwrap_err(),
            &["role"],
        );
    }
    assert_eq!(
        w.cluster.requests(),
        0,
        "nothing reached the cluster, so nothing was registered"
    );
    assert!(client.claimed_roles().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_broker_reachable_fails_acquire_within_the_connect_timeout_and_registers_nothing() {
    let config = KafkaConfig::new(NOWHERE).with_connect_timeout(Duration::from_millis(500));
    let client = Client::new(config).unwrap();
    let (tx, mut rx) = events::channel();
    let options = client.leadership_options().with_events(tx);
    let e = tokio::time::timeout(PATIENCE, client.acquire("billing", "host-a", options))
        .await
        .expect("the acquire must end on its own, within the connect timeout")
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transient, "{e:?}");
    let msg = format!("{e}: {:?}", std::error::Error::source(&e));
    assert!(msg.contains(NOWHERE), "names the bootstrap address: {msg}");
    assert!(msg.contains("connect timeout"), "{msg}");
    assert!(
        !names(&mut rx).contains(&"registered"),
        "the member never registered"
    );
    assert!(client.claimed_roles().is_empty(), "the claim ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_broker_reachable_fails_describe_within_the_connect_timeout() {
    let config = KafkaConfig::new(NOWHERE).with_connect_timeout(Duration::from_millis(500));
    let client = Client::new(config.clone()).unwrap();
    let e = tokio::time::timeout(PATIENCE, client.describe_leadership("billing"))
        .await
        .expect("the describe must end on its own")
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transient, "{e:?}");
    let msg = format!("{e}");
    assert!(msg.contains(NOWHERE), "names the bootstrap address: {msg}");
    assert!(msg.contains("billing"), "names the role: {msg}");

    // The topic helpers too.
    let e = tokio::time::timeout(
        PATIENCE,
        client.check_state_topic(krabka_coordination::transport::kafka::TopicSpec::default()),
    )
    .await
    .expect("the check must end on its own")
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transient, "{e:?}");
    assert!(e.to_string().contains(NOWHERE), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_state_topic_is_bounded_by_the_connect_timeout() {
    // The operation timeout (librdkafka's admin call) is far longer: the
    // call must end with the connect timeout, naming the address.
    let config = KafkaConfig::new(NOWHERE)
        .with_connect_timeout(Duration::from_millis(500))
        .with_operation_timeout(Duration::from_secs(30));
    let client = Client::new(config).unwrap();
    let started = std::time::Instant::now();
    let e = tokio::time::timeout(
        Duration::from_secs(20),
        client.ensure_state_topic(krabka_coordination::transport::kafka::TopicSpec::default()),
    )
    .await
    .expect("ensure_state_topic must end within the connect timeout, not the operation timeout")
    .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10), "{e}");
    assert_eq!(e.kind(), ErrorKind::Transient, "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains(NOWHERE) && msg.contains("500 ms (the connect timeout)"),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bootstrap_host_that_does_not_resolve_fails_at_once_naming_it() {
    let config = KafkaConfig::new("no-such-broker.invalid:9092")
        .with_connect_timeout(Duration::from_secs(30));
    let client = Client::new(config).unwrap();
    for e in [
        tokio::time::timeout(
            Duration::from_secs(10),
            client.describe_leadership("billing"),
        )
        .await
        .expect("at once, not after the connect timeout")
        .unwrap_err(),
        tokio::time::timeout(
            Duration::from_secs(10),
            client.ensure_state_topic(krabka_coordination::transport::kafka::TopicSpec::default()),
        )
        .await
        .expect("at once, not after the connect timeout")
        .unwrap_err(),
    ] {
        let msg = e.to_string();
        assert!(
            msg.contains("\"no-such-broker.invalid\"") && msg.contains("does not resolve"),
            "{msg}"
        );
    }
}

#[test]
fn a_transactional_id_in_the_settings_is_refused_by_name() {
    let e = Client::new(KafkaConfig::new(NOWHERE).set("transactional.id", "mine")).unwrap_err();
    assert_invalid(&e, &["transactional.id", "\"mine\"", "role"]);
    let e = KafkaTransport::new(
        KafkaConfig::new(NOWHERE).set("transactional.id", huge()),
        None,
    )
    .unwrap_err();
    assert_invalid(&e, &["transactional.id", "40000 bytes"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_timeouts_longer_than_the_lease_are_refused_before_registering() {
    for (key, value) in [
        ("message.timeout.ms", "60000"),
        ("delivery.timeout.ms", "30001"),
        ("socket.timeout.ms", "45000"),
        ("transaction.timeout.ms", "60000"),
    ] {
        // No broker is needed: the settings are refused before any request.
        let client = Client::new(KafkaConfig::new(NOWHERE).set(key, value)).unwrap();
        let (tx, mut rx) = events::channel();
        let options = client.leadership_options().with_events(tx); // 30 s lease
        let e = tokio::time::timeout(PATIENCE, client.acquire("billing", "a", options))
            .await
            .expect("refused at once")
            .unwrap_err();
        assert_invalid(&e, &[&format!("{key}={value}"), "30 s"]);
        assert!(!names(&mut rx).contains(&"registered"), "{key}");
    }
    // At most the lease is fine as far as the settings go (the cluster is
    // what fails here).
    let client = Client::new(
        KafkaConfig::new(NOWHERE)
            .set("message.timeout.ms", "30000")
            .with_connect_timeout(Duration::from_millis(200)),
    )
    .unwrap();
    let e = client
        .acquire("billing", "a", client.leadership_options())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transient, "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_durations_are_refused_or_saturate_and_never_panic() {
    for config in [
        KafkaConfig::new(NOWHERE).with_operation_timeout(Duration::MAX),
        KafkaConfig::new(NOWHERE).with_connect_timeout(Duration::MAX),
        KafkaConfig::new(NOWHERE).with_connect_timeout(Duration::ZERO),
    ] {
        let e = KafkaTransport::new(config, None).unwrap_err();
        assert_invalid(&e, &["timeout", "2147483647 ms"]);
    }
    let client = Client::new(KafkaConfig::new(NOWHERE)).unwrap();
    let options = client
        .leadership_options()
        .with_lease_duration(Duration::MAX)
        .with_renew_interval(Duration::from_secs(1));
    let e = client.acquire("billing", "a", options).await.unwrap_err();
    assert_invalid(&e, &["lease duration", "2147483647 ms"]);

    // A poll with an absurd wait waits (here for a broker that never
    // answers) instead of panicking on the deadline.
    let t = KafkaTransport::new(KafkaConfig::new(NOWHERE), None).unwrap();
    let poll = tokio::time::timeout(
        Duration::from_millis(300),
        t.poll_partition(0, 0, Duration::MAX),
    )
    .await;
    assert!(poll.is_err(), "still waiting: {poll:?}");
}

#[test]
fn a_member_id_of_any_length_never_overflows_the_client_id() {
    let t = KafkaTransport::new(KafkaConfig::new(NOWHERE), Some(&"m".repeat(32_767))).unwrap();
    let shown = format!("{t:?}");
    assert!(shown.len() < 400, "{shown}");
    // A NUL byte, which librdkafka cannot take in a setting, is replaced.
    assert!(KafkaTransport::new(KafkaConfig::new(NOWHERE), Some("a\0b")).is_ok());
    let e = KafkaTransport::new(
        KafkaConfig::new(NOWHERE).set("client.id", "c".repeat(40_000)),
        None,
    )
    .unwrap_err();
    assert_invalid(&e, &["client.id", "32767"]);
}
