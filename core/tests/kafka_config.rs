//! The state topic helpers and the pass-through of client settings, on a
//! real Kafka.
//!
//! Needs a real cluster: `KRABKA_BOOTSTRAP`, or `ci/kafka.sh start 1` is run.
#![cfg(feature = "kafka")]

mod support;

use std::time::Duration;

use krabka_coordination::transport::kafka::{
    check_state_topic, ensure_state_topic, KafkaTransport,
};
use krabka_coordination::transport::{Coordinator, LeaseWriter, Registrar, StateReader};
use krabka_coordination::{Error, ErrorKind};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use support::*;

/// How long one write of an epoch may take in these tests.
const WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// Creates `topic` with plain Kafka defaults plus `settings`, bypassing the helpers.
async fn create_raw(topic: &str, partitions: i32, settings: &[(&str, &str)]) {
    let admin: AdminClient<DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .unwrap();
    let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for (k, v) in settings {
        new = new.set(k, v);
    }
    let r = admin
        .create_topics([&new], &AdminOptions::new())
        .await
        .unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    tokio::task::spawn_blocking(move || drop(admin))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_creates_a_compacted_topic_and_is_idempotent() {
    init_tracing();
    let cfg = config(&bootstrap()).with_state_topic(unique("krabka-test-ensure"));
    let first = ensure_state_topic(&cfg, 3, 1, 1).await.unwrap();
    assert!(first.created);
    assert_eq!(first.topic, cfg.state_topic());
    assert_eq!(first.partitions, 3);
    assert_eq!(first.replication_factor, 1);
    assert_eq!(first.cleanup_policy, "compact");
    assert_eq!(first.min_insync_replicas, Some(1));
    assert!(
        first
            .warnings
            .iter()
            .any(|w| w.contains("min.insync.replicas=1")),
        "a min ISR below 2 is reported: {:?}",
        first.warnings
    );
    let again = ensure_state_topic(&cfg, 3, 1, 1).await.unwrap();
    assert!(!again.created, "the second call finds the topic");
    assert_eq!(again.partitions, 3);
    let checked = check_state_topic(&cfg, 3).await.unwrap();
    assert_eq!(checked.partitions, 3);
    assert!(!checked.created);

    // The same topic with another count is refused, by ensure and by check.
    let e = ensure_state_topic(&cfg, 4, 1, 1).await.unwrap_err();
    assert!(matches!(e, Error::Fatal { .. }), "{e:?}");
    let e = check_state_topic(&cfg, 16).await.unwrap_err();
    assert!(matches!(e, Error::Fatal { .. }), "{e:?}");
    let msg = format!("{e} {:?}", e);
    assert!(
        msg.contains("3 partitions") && msg.contains("16"),
        "the error names both counts: {msg}"
    );

    // Bad arguments never reach the cluster.
    for (p, rf, isr) in [(0, 1, 1), (1, 0, 1), (1, 1, 0), (1, 1, 2)] {
        let e = ensure_state_topic(&cfg, p, rf, isr).await.unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument(_)),
            "({p}, {rf}, {isr}): {e:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_of_the_wrong_shape_is_refused() {
    init_tracing();
    // Not compacted (Kafka's default cleanup.policy=delete).
    let deleting = unique("krabka-test-delete");
    create_raw(&deleting, 2, &[]).await;
    let cfg = config(&bootstrap()).with_state_topic(&deleting);
    let e = check_state_topic(&cfg, 2).await.unwrap_err();
    assert!(matches!(e, Error::Fatal { .. }), "{e:?}");
    let msg = format!("{e} {e:?}");
    assert!(
        msg.contains("cleanup.policy") && msg.contains("delete"),
        "{msg}"
    );
    let e = ensure_state_topic(&cfg, 2, 1, 1).await.unwrap_err();
    assert!(format!("{e:?}").contains("cleanup.policy"), "{e:?}");

    // Compacted and deleted is not compacted only.
    let both = unique("krabka-test-both");
    create_raw(&both, 1, &[("cleanup.policy", "compact,delete")]).await;
    let e = check_state_topic(&config(&bootstrap()).with_state_topic(&both), 1)
        .await
        .unwrap_err();
    assert!(format!("{e:?}").contains("compact,delete"), "{e:?}");

    // Missing.
    let missing = config(&bootstrap()).with_state_topic(unique("krabka-test-missing"));
    let e = check_state_topic(&missing, 1).await.unwrap_err();
    assert!(matches!(e, Error::Fatal { .. }), "{e:?}");
    assert_eq!(e.kind(), ErrorKind::Fatal);
    assert!(e.to_string().contains("does not exist"), "{e}");

    // A compacted topic with min.insync.replicas=2 on one broker passes the
    // check without a warning (the check reads the setting; producing would
    // fail on this cluster, which is the operator's business).
    let good = unique("krabka-test-minisr");
    create_raw(
        &good,
        1,
        &[("cleanup.policy", "compact"), ("min.insync.replicas", "2")],
    )
    .await;
    let r = check_state_topic(&config(&bootstrap()).with_state_topic(&good), 1)
        .await
        .unwrap();
    assert_eq!(r.min_insync_replicas, Some(2));
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_settings_reach_every_producer_and_consumer() {
    init_tracing();
    let cfg = config(&bootstrap()).with_state_topic(unique("krabka-test-settings"));
    ensure_state_topic(&cfg, 1, 1, 1).await.unwrap();
    // message.max.bytes limits what a producer sends: a user value must reach
    // the registration producer and the lease producer alike.
    let limited = cfg.clone().set("message.max.bytes", "2000");
    let t = KafkaTransport::new(limited, Some("settings")).unwrap();
    let k = reg_key("r", "m");
    let small = t
        .append(state_record(0, k.clone(), Some(vec![7; 100])))
        .await
        .expect("a small record fits");
    let e = t
        .append(state_record(0, k.clone(), Some(vec![7; 5000])))
        .await
        .unwrap_err();
    assert!(
        !e.is_transient(),
        "an oversized record is not retried: {e:?}"
    );
    assert!(format!("{e:?}").to_lowercase().contains("size"), "{e:?}");

    let role = unique("settings");
    let epoch = t.mint_epoch(&role, Duration::from_secs(10)).await.unwrap();
    let token = epoch.token();
    epoch
        .write_lease(
            state_record(0, lease_key(&role), Some(lease_value("m", token, 1))),
            WITHIN,
        )
        .await
        .expect("a small lease fits");
    let e = epoch
        .write_lease(
            state_record(0, lease_key(&role), Some(vec![7; 5000])),
            WITHIN,
        )
        .await
        .unwrap_err();
    assert!(!e.is_fenced(), "{e:?}");
    assert!(
        epoch.has_producer().await,
        "an oversized lease is not a fence"
    );
    assert!(format!("{e:?}").to_lowercase().contains("size"), "{e:?}");

    // The next epoch writes with the user settings too.
    let next = t
        .acquire_epoch(&role, Duration::from_secs(10))
        .await
        .unwrap();
    let again = next.token();
    assert!(again > token);
    let e = next
        .write_lease(
            state_record(0, lease_key(&role), Some(vec![7; 5000])),
            WITHIN,
        )
        .await
        .unwrap_err();
    assert!(format!("{e:?}").to_lowercase().contains("size"), "{e:?}");
    next.write_lease(
        state_record(0, lease_key(&role), Some(lease_value("m", again, 2))),
        WITHIN,
    )
    .await
    .expect("a small lease fits");

    // A consumer setting reaches the state consumers: a user group.id is
    // used instead of the default, and reading still works.
    let reader = KafkaTransport::new(
        cfg.clone().set("group.id", unique("krabka-test-group")),
        Some("settings-reader"),
    )
    .unwrap();
    let records = reader.read_partition(0).await.unwrap();
    assert!(records.iter().any(|r| r.offset == small));
    assert!(has_value(&records, &lease_value("m", token, 1)));

    // A setting librdkafka rejects is refused by name when the transport is built.
    let e = KafkaTransport::new(cfg.clone().set("queue.buffering.max.ms", "-5"), None).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("queue.buffering.max.ms"), "{e}");
}
