//! The fence on a replicated cluster (three nodes, replication factor 3,
//! min.insync.replicas 2 for the state topic and the transaction log), with
//! the transaction coordinator's broker stopped and restarted during the test.
//!
//! Needs a real three-node cluster: `KRABKA_BOOTSTRAP_3`, or
//! `ci/kafka.sh start 3` is run.
#![cfg(feature = "kafka")]

mod support;

use std::time::Duration;

use krabka_coordination::transport::kafka::{KafkaClient, KafkaConfig, KafkaTransport};
use krabka_coordination::transport::{Describer, LeaseWriter};
use krabka_coordination::Error;
use support::*;

/// How long one write of an epoch may take in these tests.
const WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

const LEASE: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fence_holds_while_a_broker_restarts() {
    init_tracing();
    let boot = bootstrap3();
    let cfg: KafkaConfig = config(&boot).with_operation_timeout(Duration::from_secs(60));
    let report = ensure_shared_topic(&cfg, 3, 2).await;
    assert_eq!(report.replication_factor, 3, "{report:?}");
    assert_eq!(report.min_insync_replicas, Some(2), "{report:?}");
    assert!(report.warnings.is_empty(), "{report:?}");

    let role = unique("replicated");
    let p = partition_of(&role);
    let a = KafkaTransport::new(cfg.clone(), Some("repl-a")).unwrap();
    let b = KafkaTransport::new(cfg.clone(), Some("repl-b")).unwrap();
    let key = lease_key(&role);

    let ea = a.mint_epoch(&role, LEASE).await.unwrap();
    let ta = ea.token();
    let a1 = lease_value("a", ta, 1);
    ea.write_lease(state_record(p, key.clone(), Some(a1.clone())), WITHIN)
        .await
        .unwrap();

    // Stop the broker of the role's transaction coordinator.
    let client = KafkaClient::new(&cfg).unwrap();
    let coordinator = client.coordinator_address(&role).await.unwrap();
    let stopped = DownNode::stop(node_of(&coordinator, &boot)).await;

    // The coordinator moves; B still mints a newer epoch, and A is fenced.
    let eb = b
        .mint_epoch(&role, LEASE)
        .await
        .expect("acquire with one broker down");
    let tb = eb.token();
    assert!(tb > ta, "{ta} -> {tb}");
    let a2 = lease_value("a", ta, 2);
    let e = ea
        .write_lease(state_record(p, key.clone(), Some(a2.clone())), WITHIN)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Fenced(_)), "expected Fenced, got {e:?}");
    assert!(!ea.has_producer().await, "the fenced producer is dropped");
    let b1 = lease_value("b", tb, 3);
    eb.write_lease(state_record(p, key.clone(), Some(b1.clone())), WITHIN)
        .await
        .expect("two of three replicas are in sync");
    assert_eq!(client.describe_epoch(&role).await.unwrap(), tb);

    stopped.restart().await;

    let b2 = lease_value("b", tb, 4);
    eb.write_lease(state_record(p, key.clone(), Some(b2.clone())), WITHIN)
        .await
        .expect("a lease after the restart");
    let reader = KafkaTransport::new(cfg.clone(), Some("repl-reader")).unwrap();
    let records = read_until(&reader, p, Duration::from_secs(30), |r| has_value(r, &b2)).await;
    assert!(has_value(&records, &a1), "A's committed lease survives");
    assert!(
        has_value(&records, &b1) && has_value(&records, &b2),
        "B's leases are visible"
    );
    assert!(
        !has_value(&records, &a2),
        "A's fenced lease must never be visible"
    );
    assert_eq!(b.describe_epoch(&role).await.unwrap(), tb);
}
