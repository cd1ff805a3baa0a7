//! What only the protocol lease path promises, on a real Kafka: many held
//! epochs share the protocol client's few connections per broker and add
//! no threads, and a
//! guarded record that leaves its partition open goes where Kafka's own
//! partitioner puts it. (Rules 1 and 2 on this path are the suites of
//! `kafka_epoch.rs`, `kafka_client.rs` and `kafka_state.rs`, which
//! `ci/rust-tests.sh` runs on this path, the default, and once more with
//! `KRABKA_LEASE_PATH=librdkafka`.)
//!
//! Needs a real cluster: `KRABKA_BOOTSTRAP`, or `ci/kafka.sh start 1` is run.
#![cfg(feature = "kafka")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use krabka_coordination::transport::kafka::{
    ensure_state_topic, DescribeClient, KafkaConfig, KafkaTransport, LeasePath,
};
use krabka_coordination::transport::{Describer, LeaseWriter, OutRecord, StateReader};
use support::*;

const LEASE: Duration = Duration::from_secs(10);
const WITHIN: Duration = Duration::from_secs(30);

/// The tests of this file count the process's threads: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn protocol_config() -> KafkaConfig {
    config(&bootstrap()).with_lease_path(LeasePath::Protocol)
}

async fn protocol_transport(member: &str) -> KafkaTransport {
    init_tracing();
    let cfg = protocol_config();
    ensure_shared_topic(&cfg, 1, 1).await;
    KafkaTransport::new(cfg, Some(member)).expect("transport")
}

/// The threads of this process, from `/proc/self/status`.
fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("a Threads: line")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_held_epochs_share_the_protocol_clients_connections_and_add_no_threads() {
    let _serial = SERIAL.lock().await;
    let t = protocol_transport("many-epochs").await;
    // One epoch first: the protocol client connects, tokio's pools warm up.
    let warm = unique("many-warm");
    let first = t.mint_epoch(&warm, LEASE).await.unwrap();
    first
        .write_lease(
            lease_record(&warm, Some(lease_value("m", first.token(), 1))),
            WITHIN,
        )
        .await
        .unwrap();
    let (threads_before, connections_before) = (threads(), t.describe_client().connections_made());

    let mut held = Vec::new();
    for i in 0..40 {
        let role = unique(&format!("many-{i}"));
        let epoch = t.mint_epoch(&role, LEASE).await.unwrap();
        epoch
            .write_lease(
                lease_record(&role, Some(lease_value("m", epoch.token(), 1))),
                WITHIN,
            )
            .await
            .unwrap();
        assert_eq!(
            t.describe_epoch(&role).await.unwrap(),
            epoch.token(),
            "the token is the one InitProducerId minted"
        );
        held.push((role, Arc::new(epoch)));
    }
    // Every epoch renews once more, all at once.
    let mut renewals = tokio::task::JoinSet::new();
    for (role, epoch) in &held {
        let (role, epoch) = (role.clone(), Arc::clone(epoch));
        renewals.spawn(async move {
            epoch
                .write_lease(
                    lease_record(&role, Some(lease_value("m", epoch.token(), 2))),
                    WITHIN,
                )
                .await
        });
    }
    while let Some(r) = renewals.join_next().await {
        r.unwrap().expect("a renewal");
    }
    let (threads_after, connections_after) = (threads(), t.describe_client().connections_made());
    // librdkafka's path builds a producer per role (about 15 threads each);
    // tokio's blocking pool may add a few threads, never one per role.
    assert!(
        threads_after <= threads_before + 8,
        "40 held epochs grew the process from {threads_before} to {threads_after} threads"
    );
    // One broker: at most the client's bound, however many roles (and one
    // more, should the bootstrap address name the broker otherwise).
    let bound = DescribeClient::CONNECTIONS_PER_BROKER as u64 + 1;
    assert!(
        connections_after <= bound,
        "40 held epochs made {connections_before} -> {connections_after} connections to one broker (bound {bound})"
    );
    let read: Vec<_> = held.iter().map(|(r, _)| partition_of(r)).collect();
    for ((role, epoch), p) in held.iter().zip(read) {
        let value = lease_value("m", epoch.token(), 2);
        let records = read_until(&t, p, Duration::from_secs(10), |r| has_value(r, &value)).await;
        assert!(
            has_value(&records, &value),
            "the renewal of {role} is committed"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_guarded_records_without_a_partition_go_where_kafkas_partitioner_puts_them() {
    let _serial = SERIAL.lock().await;
    const PARTITIONS: i32 = 4;
    let topic = unique("krabka-test-keyed");
    let data_cfg = config(&bootstrap()).with_state_topic(&topic);
    ensure_state_topic(&data_cfg, PARTITIONS, 1, 1)
        .await
        .unwrap();
    let data = KafkaTransport::new(data_cfg, Some("keyed-reader")).unwrap();

    let t = protocol_transport("keyed").await;
    let role = unique("keyed");
    let epoch = t.mint_epoch(&role, LEASE).await.unwrap();
    let keys: Vec<String> = (0..24).map(|i| format!("order-{i}")).collect();
    let records = keys
        .iter()
        .map(|k| OutRecord {
            topic: topic.clone(),
            partition: None,
            key: Some(k.as_bytes().to_vec()),
            value: Some(k.as_bytes().to_vec()),
            headers: Vec::new(),
        })
        .collect();
    epoch.write_guarded(records, WITHIN).await.unwrap();

    let mut seen = 0;
    for p in 0..PARTITIONS {
        for r in data.read_partition(p).await.unwrap() {
            let want = krabka_coordination::role_partition(
                std::str::from_utf8(&r.key).unwrap(),
                PARTITIONS,
            )
            .unwrap();
            assert_eq!(
                p,
                want,
                "key {:?} is in partition {p}",
                String::from_utf8_lossy(&r.key)
            );
            seen += 1;
        }
    }
    assert_eq!(seen, keys.len(), "every record is committed once");
}
