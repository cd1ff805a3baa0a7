//! What a member checks on the cluster before it registers, on a real Kafka:
//! the state topic (exists, the member's partition count, compacted), the
//! brokers' `transaction.max.timeout.ms`, a lease that cannot ride out one
//! broker's loss (warned about once), and the cache that spares later members
//! the requests.
//!
//! Every test makes its own uniquely named state topic
//! ([`KafkaConfig::with_state_topic`]). Needs the single-node cluster
//! (`KRABKA_BOOTSTRAP`) and, for the broker-loss warning, the three-node one
//! (`KRABKA_BOOTSTRAP_3`); `ci/kafka.sh start` is run when they are unset.
#![cfg(feature = "kafka")]

mod captured;
mod support;

use std::time::Duration;

use captured::Captured;
use krabka_coordination::client::Client;
use krabka_coordination::events::{self, EventReceiver};
use krabka_coordination::transport::kafka::{
    ensure_state_topic, KafkaConfig, KafkaTransport, BROKER_LOSS_MARGIN,
};
use krabka_coordination::transport::{Coordinator, StateReader};
use krabka_coordination::{ElectionOptions, Error, ErrorKind};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use support::*;

/// The longest any awaited step may take before the test gives up.
const PATIENCE: Duration = Duration::from_secs(60);

/// A configuration of the single-node cluster with a state topic of its own
/// (not created).
fn own_topic(prefix: &str) -> KafkaConfig {
    init_tracing();
    config(&bootstrap()).with_state_topic(unique(prefix))
}

/// Options of `partitions` partitions with a short lease.
fn election(partitions: i32, lease: Duration, renew: Duration) -> ElectionOptions {
    ElectionOptions::default()
        .with_partitions(partitions)
        .with_lease_duration(lease)
        .with_renew_interval(renew)
}

fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client")
}

/// Creates `topic` with Kafka's defaults (cleanup.policy=delete) on the
/// single-node cluster.
async fn create_deleting(topic: &str, partitions: i32) {
    let a = admin(&bootstrap());
    let r = a
        .create_topics(
            [&NewTopic::new(
                topic,
                partitions,
                TopicReplication::Fixed(1),
            )],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    tokio::task::spawn_blocking(move || drop(a)).await.unwrap();
}

async fn delete_topic(topic: &str) {
    let a = admin(&bootstrap());
    let r = a
        .delete_topics(&[topic], &AdminOptions::new())
        .await
        .unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    tokio::task::spawn_blocking(move || drop(a)).await.unwrap();
}

/// Asserts that no partition of the state topic of `cfg` holds a record.
async fn nothing_registered(cfg: &KafkaConfig, partitions: i32) {
    let reader = KafkaTransport::new(cfg.clone(), Some("preflight-reader")).unwrap();
    for p in 0..partitions {
        let records = reader.read_partition(p).await.unwrap();
        assert!(records.is_empty(), "partition {p}: {records:?}");
    }
}

/// The acquire of `role` by a client of `cfg` with `partitions`, and what it
/// emitted.
async fn acquire_err(
    cfg: &KafkaConfig,
    partitions: i32,
    lease: Duration,
    renew: Duration,
) -> (Error, EventReceiver) {
    let client = Client::new(cfg.clone())
        .and_then(|c| c.with_partitions(partitions))
        .unwrap();
    let (tx, rx) = events::channel();
    let options = client
        .leadership_options()
        .with_lease_duration(lease)
        .with_renew_interval(renew)
        .with_events(tx);
    let e = tokio::time::timeout(PATIENCE, client.acquire(&unique("pre"), "a", options))
        .await
        .expect("the acquire ends on its own")
        .expect_err("the member is refused");
    (e, rx)
}

fn assert_not_registered(rx: &mut EventReceiver) {
    while let Ok(e) = rx.try_recv() {
        assert_ne!(e.kind.name(), "registered", "{e:?}");
    }
}

const LEASE: Duration = Duration::from_secs(10);
const RENEW: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_topic_of_another_partition_count_is_refused_with_the_numbers() {
    let cfg = own_topic("krabka-test-pre-count");
    ensure_state_topic(&cfg, 3, 1, 1).await.unwrap();
    let (e, mut rx) = acquire_err(&cfg, 4, LEASE, RENEW).await;
    assert_eq!(e.kind(), ErrorKind::Fatal, "{e:?}");
    let msg = e.to_string();
    for part in [cfg.state_topic(), "3 partitions", "configured with 4"] {
        assert!(msg.contains(part), "{part:?} missing from: {msg}");
    }
    assert_not_registered(&mut rx);
    nothing_registered(&cfg, 3).await;

    // The real count passes.
    let client = Client::new(cfg.clone())
        .and_then(|c| c.with_partitions(3))
        .unwrap();
    let options = client
        .leadership_options()
        .with_lease_duration(LEASE)
        .with_renew_interval(RENEW);
    let held = client.acquire("counted", "a", options).await.unwrap();
    held.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_topic_that_is_not_compacted_is_refused() {
    let cfg = own_topic("krabka-test-pre-delete");
    create_deleting(cfg.state_topic(), 2).await;
    let (e, mut rx) = acquire_err(&cfg, 2, LEASE, RENEW).await;
    assert_eq!(e.kind(), ErrorKind::Fatal, "{e:?}");
    let msg = e.to_string();
    for part in [cfg.state_topic(), "cleanup.policy", "\"delete\"", "compact"] {
        assert!(msg.contains(part), "{part:?} missing from: {msg}");
    }
    assert_not_registered(&mut rx);
    nothing_registered(&cfg, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_state_topic_says_how_to_create_it() {
    let cfg = own_topic("krabka-test-pre-missing");
    let (e, mut rx) = acquire_err(&cfg, 5, LEASE, RENEW).await;
    assert_eq!(e.kind(), ErrorKind::Fatal, "{e:?}");
    let msg = e.to_string();
    for part in [
        cfg.state_topic(),
        "does not exist",
        "ensure_state_topic",
        "with_partitions(5)",
        "cleanup.policy=compact",
    ] {
        assert!(msg.contains(part), "{part:?} missing from: {msg}");
    }
    assert_not_registered(&mut rx);
    // The check created nothing.
    let t = KafkaTransport::new(cfg.clone(), None).unwrap();
    let e = t
        .preflight("r", &election(5, LEASE, RENEW))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_over_the_brokers_transaction_max_timeout_is_refused_before_registering() {
    let cfg = own_topic("krabka-test-pre-txnmax");
    ensure_state_topic(&cfg, 1, 1, 1).await.unwrap();
    let t = KafkaTransport::new(cfg.clone(), None).unwrap();
    let report = t.preflight("r", &election(1, LEASE, RENEW)).await.unwrap();
    let max = report
        .transaction_max_timeout
        .expect("the broker's transaction.max.timeout.ms is read");
    let max_ms = max.as_millis();

    let over = max + Duration::from_secs(60);
    let (e, mut rx) = acquire_err(&cfg, 1, over, RENEW).await;
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e:?}");
    let msg = e.to_string();
    for part in [
        "transaction.max.timeout.ms".to_owned(),
        format!("{max_ms} ms"),
        krabka_coordination::human::duration(over).to_string(),
    ] {
        assert!(msg.contains(&part), "{part:?} missing from: {msg}");
    }
    assert_not_registered(&mut rx);
    nothing_registered(&cfg, 1).await;

    // The limit itself passes the check.
    t.check_member("r", &election(1, max, RENEW)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passed_check_is_kept_per_transport_and_compared_without_requests() {
    let cfg = own_topic("krabka-test-pre-cache");
    ensure_state_topic(&cfg, 1, 1, 1).await.unwrap();
    let t = KafkaTransport::new(cfg.clone(), None).unwrap();
    let options = election(1, LEASE, RENEW);
    // Many members at once make one read of the cluster.
    let checks = (0..50).map(|i| {
        let (t, options) = (&t, options.clone());
        async move { t.check_member(&format!("role-{i}"), &options).await }
    });
    for r in futures_join(checks.collect()).await {
        r.unwrap();
    }
    delete_topic(cfg.state_topic()).await;
    // The topic is gone, but this transport checked it already: no request.
    t.check_member("later", &options).await.unwrap();
    // Another partition count is still refused, from what was read.
    let e = t
        .check_member("later", &election(2, LEASE, RENEW))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Fatal, "{e:?}");
    assert!(e.to_string().contains("1 partitions"), "{e}");
    // A new transport reads the cluster again and finds no topic.
    let fresh = KafkaTransport::new(cfg.clone(), None).unwrap();
    let e = fresh.check_member("later", &options).await.unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
}

/// Runs the futures concurrently on this task.
async fn futures_join<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut set = Vec::new();
    for f in futures {
        set.push(Box::pin(f));
    }
    let mut out = Vec::new();
    // Start them all, then collect: each first awaits the shared check.
    let joined = std::future::poll_fn(|cx| {
        let mut done = true;
        for (i, f) in set.iter_mut().enumerate() {
            if out.len() <= i {
                out.push(None);
            }
            if out[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => out[i] = Some(v),
                    std::task::Poll::Pending => done = false,
                }
            }
        }
        if done {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    });
    joined.await;
    out.into_iter().map(Option::unwrap).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_that_cannot_ride_out_a_broker_loss_is_warned_about_once() {
    use tracing::instrument::WithSubscriber;
    init_tracing();
    let cfg = config(&bootstrap3()).with_state_topic(unique("krabka-test-pre-loss"));
    ensure_state_topic(&cfg, 1, 3, 2).await.unwrap();
    let t = KafkaTransport::new(cfg.clone(), None).unwrap();

    let report = t.preflight("r", &election(1, LEASE, RENEW)).await.unwrap();
    assert_eq!(report.brokers, 3);
    let detect = report
        .broker_failure_detection
        .expect("broker.session.timeout.ms is read");
    // The rule: renew interval + broker.session.timeout.ms + margin.
    let enough = RENEW + detect + BROKER_LOSS_MARGIN;
    let rides_out = t.preflight("r", &election(1, enough, RENEW)).await.unwrap();
    assert!(
        !rides_out.warnings.iter().any(|w| w.contains("ride out")),
        "{:?}",
        rides_out.warnings
    );
    let short = election(1, enough - Duration::from_millis(1), RENEW);
    let falls_short = t.preflight("r", &short).await.unwrap();
    let warning = falls_short
        .warnings
        .iter()
        .find(|w| w.contains("ride out"))
        .unwrap_or_else(|| panic!("{:?}", falls_short.warnings));
    for part in [
        "broker.session.timeout.ms".to_owned(),
        format!("{} ms", detect.as_millis()),
        krabka_coordination::human::duration(enough).to_string(),
    ] {
        assert!(warning.contains(&part), "{part:?} missing from: {warning}");
    }

    // check_member passes (a warning, not a refusal) and logs it once.
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .finish();
    async {
        t.check_member("r", &short).await.unwrap();
        t.check_member("other", &short).await.unwrap();
    }
    .with_subscriber(subscriber)
    .await;
    assert_eq!(
        captured.lines_with("cannot ride out the loss of one broker"),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_broker_gets_no_broker_loss_warning() {
    let cfg = own_topic("krabka-test-pre-single");
    ensure_state_topic(&cfg, 1, 1, 1).await.unwrap();
    let t = KafkaTransport::new(cfg, None).unwrap();
    let r = t
        .preflight(
            "r",
            &election(1, Duration::from_secs(2), Duration::from_secs(1)),
        )
        .await
        .unwrap();
    assert_eq!(r.brokers, 1);
    assert!(r.broker_failure_detection.is_some());
    assert!(
        !r.warnings.iter().any(|w| w.contains("ride out")),
        "losing the only broker is losing the cluster: {:?}",
        r.warnings
    );
    // The topic's min.insync.replicas=1 is still pointed out.
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("min.insync.replicas=1")),
        "{:?}",
        r.warnings
    );
}

/// `ensure_state_topic` on an existing topic of another shape than asked
/// says so in its report, naming both values; a warning the client's own
/// `ensure_state_topic` logged is not logged again by its members' checks
/// at acquire (one line per process for the usual ensure-then-acquire).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_advice_names_what_differs_and_is_not_repeated_at_acquire() {
    use krabka_coordination::transport::kafka::TopicSpec;
    use tracing::instrument::WithSubscriber;
    let cfg = own_topic("krabka-test-pre-advice");
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .finish();
    let client = Client::new(cfg).unwrap().with_partitions(1).unwrap();
    let asked = TopicSpec::default().with_partitions(1);
    let (created, logged_before_acquire, again) = async {
        let created = client
            .ensure_state_topic(TopicSpec::development().with_partitions(1))
            .await
            .unwrap();
        let logged = captured.lines_with("has min.insync.replicas=1;");
        let options = client
            .leadership_options()
            .with_lease_duration(LEASE)
            .with_renew_interval(RENEW);
        for member in ["m1", "m2"] {
            let l = tokio::time::timeout(PATIENCE, client.acquire("r", member, options.clone()))
                .await
                .unwrap()
                .unwrap();
            l.resign().await.unwrap();
        }
        let again = client.ensure_state_topic(asked).await.unwrap();
        (created, logged, again)
    }
    .with_subscriber(subscriber)
    .await;
    assert!(created.created && created.replication_factor == 1);
    assert!(!again.created);
    let named = |part: &str| again.warnings.iter().any(|w| w.contains(part));
    assert!(
        named("replication factor 1, not the 3 asked for"),
        "{:?}",
        again.warnings
    );
    assert!(
        named("min.insync.replicas=1, not the 2 asked for"),
        "{:?}",
        again.warnings
    );
    // The generic advice (min.insync.replicas below 2): logged by the
    // ensure, not again by the two acquires' checks.
    assert_eq!(logged_before_acquire, 1);
    assert_eq!(captured.lines_with("has min.insync.replicas=1;"), 1);
    assert_eq!(captured.lines_with("not the 3 asked for"), 1);
}
