//! What the protocol lease path promises beyond rules 1 and 2 (the suites of
//! `kafka_epoch.rs`, `kafka_client.rs` and `kafka_state.rs`), on a real
//! Kafka: many held epochs share the protocol client's few connections per
//! broker and add no threads, and a guarded record that leaves its
//! partition open goes where Kafka's own partitioner puts it.
//!
//! Needs a real cluster: `KRABKA_BOOTSTRAP`, or `ci/kafka.sh start 1` is run.
#![cfg(feature = "kafka")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use krabka_coordination::transport::kafka::{
    ensure_state_topic, KafkaClient, KafkaConfig, KafkaTransport,
};
use krabka_coordination::transport::{Describer, LeaseWriter, OutRecord, StateReader};
use krabka_kafka::client::retry;
use support::*;

const LEASE: Duration = Duration::from_secs(10);
const WITHIN: Duration = Duration::from_secs(30);

/// The tests of this file count the process's threads: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn protocol_config() -> KafkaConfig {
    config(&bootstrap())
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
    let (threads_before, connections_before) = (threads(), t.kafka_client().connections_made());

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
    let (threads_after, connections_after) = (threads(), t.kafka_client().connections_made());
    // librdkafka's path builds a producer per role (about 15 threads each);
    // tokio's blocking pool may add a few threads, never one per role.
    assert!(
        threads_after <= threads_before + 8,
        "40 held epochs grew the process from {threads_before} to {threads_after} threads"
    );
    // One broker: at most the client's bound, however many roles (and one
    // more, should the bootstrap address name the broker otherwise).
    let bound = KafkaClient::CONNECTIONS_PER_BROKER as u64 + 1;
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

/// One transactional batch of `producer` (id, epoch) with sequence
/// `sequence`: the key and value `value`, encoded by kafka-protocol.
fn one_batch(producer: (i64, i16), sequence: i32, value: &[u8]) -> bytes::Bytes {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let record = Record {
        transactional: true,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: producer.0,
        producer_epoch: producer.1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence,
        timestamp: 1_796_000_000_000,
        key: Some(bytes::Bytes::copy_from_slice(value)),
        value: Some(bytes::Bytes::copy_from_slice(value)),
        headers: Default::default(),
    };
    let mut buf = bytes::BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, [record].iter(), &options).expect("encodable");
    buf.freeze()
}

/// A copy of the epoch's first batch (sequence 0) of `token` with `value`,
/// sent by hand to partition 0 of `topic`, as a late copy of a batch the
/// writer gave up on would arrive: the leader's answer.
async fn late_copy(
    kafka: &krabka_kafka::Client,
    role: &str,
    topic: &str,
    token: krabka_coordination::FencingToken,
    value: &[u8],
) -> Result<i64, krabka_kafka::TxnError> {
    let producer = (token.producer_id, token.producer_epoch);
    let deadline = tokio::time::Instant::now() + WITHIN;
    kafka
        .produce(role, topic, 0, one_batch(producer, 0, value), deadline)
        .await
}

/// The producer's state on partition 0 of `topic` once the leader shows
/// nothing of it open (its transaction's markers written), within 20 s.
async fn until_nothing_open(
    kafka: &krabka_kafka::Client,
    topic: &str,
    producer_id: i64,
) -> krabka_kafka::ActiveProducer {
    let started = std::time::Instant::now();
    loop {
        let p = kafka
            .active_producer(topic, 0, producer_id, tokio::time::Instant::now() + WITHIN)
            .await
            .expect("DescribeProducers")
            .expect("the leader knows the producer");
        if p.open_transaction_from.is_none() {
            return p;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the transaction's markers were not written: {p:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A role of a new name with `prefix` whose minted epoch committed one
/// guarded write ("one") to partition 0 of a new data topic: the transport,
/// the topic, the role, the epoch and the transport's protocol client.
async fn one_guarded_write(
    prefix: &str,
) -> (
    KafkaTransport,
    String,
    String,
    krabka_coordination::transport::kafka::KafkaEpoch,
    krabka_kafka::Client,
) {
    let (topic, _reader) = data_topic(prefix).await;
    let t = protocol_transport(prefix).await;
    let role = unique(prefix);
    let held = t.mint_epoch(&role, LEASE).await.unwrap();
    held.write_guarded(vec![data_record(&topic, 0, b"one")], WITHIN)
        .await
        .expect("a committed guarded write");
    let kafka = t.kafka_client().kafka().clone();
    (t, topic, role, held, kafka)
}

/// What the commit proof of the lease writer relies on (`pin.rs`,
/// `ended_by_this_epoch`): after the epoch's own EndTxn(commit) (v4 or
/// lower, so no bump), the partition's leader reports the producer at that
/// epoch with nothing open; after a new holder's InitProducerId aborts an
/// open transaction of the epoch, it reports a newer epoch, the abort
/// markers' own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitions_last_marker_carries_the_epoch_of_whoever_ended_the_transaction() {
    let _serial = SERIAL.lock().await;
    let (t, topic, role, held, kafka) = one_guarded_write("marker-epoch").await;
    let token = held.token();
    let deadline = || tokio::time::Instant::now() + WITHIN;
    // EndTxn is answered once the coordinator logged the commit; its
    // markers reach the partition after that.
    let after_commit = until_nothing_open(&kafka, &topic, token.producer_id).await;
    assert_eq!(
        after_commit.producer_epoch,
        i32::from(token.producer_epoch),
        "{after_commit:?}"
    );
    assert_eq!(after_commit.open_transaction_from, None, "{after_commit:?}");
    assert_eq!(after_commit.last_sequence, 0, "{after_commit:?}");

    // A transaction of the epoch left open: its partition added and its
    // batch (sequence 1) written, no EndTxn. The partition's markers can be
    // written before the coordinator logs the commit complete, so the
    // AddPartitionsToTxn may meet CONCURRENT_TRANSACTIONS: it goes through
    // the client's one retry loop, as the lease path's does.
    let partitions = [(topic.clone(), vec![0])];
    let added = retry::retry(deadline(), retry::Backoff::TRANSACTION, || {
        kafka.add_partitions(&role, token.into(), &partitions, deadline())
    })
    .await;
    assert!(
        matches!(added, retry::Tried::Done(_)),
        "AddPartitionsToTxn: {added:?}"
    );
    let producer = (token.producer_id, token.producer_epoch);
    kafka
        .produce(&role, &topic, 0, one_batch(producer, 1, b"two"), deadline())
        .await
        .expect("the open transaction's batch");
    let open = kafka
        .active_producer(&topic, 0, token.producer_id, deadline())
        .await
        .expect("DescribeProducers")
        .expect("known");
    assert!(open.open_transaction_from.is_some(), "{open:?}");

    // A new holder's mint: the coordinator bumps the epoch and aborts.
    let successor = t
        .mint_epoch(&role, LEASE)
        .await
        .expect("the successor's mint");
    assert!(successor.token() > token);
    let ended = until_nothing_open(&kafka, &topic, token.producer_id).await;
    assert!(
        ended.producer_epoch > i32::from(token.producer_epoch),
        "the abort markers carry the bumped epoch: {ended:?} (the epoch was {token})"
    );
}

/// A Produce the client gave up on can reach the leader after its resend
/// was answered (queued behind an overloaded broker's other requests, on a
/// connection the client already closed). With broker-side transaction
/// verification (Kafka 3.6+) such a late copy of an acknowledged batch
/// leaves a verification entry behind at the leader, holding the copy's
/// sequence, and the leader then refuses the epoch's next batch with
/// OUT_OF_ORDER_SEQUENCE_NUMBER until a marker of the producer is written
/// to the partition. The writer aborts its transaction (the abort marker
/// clears the entry) and sends the batch again, with the same sequence:
/// the write succeeds and the term goes on, at the same epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_copy_of_an_acknowledged_batch_does_not_end_the_term() {
    let _serial = SERIAL.lock().await;
    let (_t, topic, role, held, kafka) = one_guarded_write("late-copy").await;
    let token = held.token();
    until_nothing_open(&kafka, &topic, token.producer_id).await;

    // The late copy: the same producer, epoch and sequence, arriving with
    // no transaction of the epoch open on the partition. The leader
    // refuses it (nothing is written) and keeps its verification entry.
    let late = late_copy(&kafka, &role, &topic, token, b"one").await;
    assert!(late.is_err(), "the late copy is not written: {late:?}");

    held.write_guarded(vec![data_record(&topic, 0, b"two")], WITHIN)
        .await
        .expect("the next write of the term, after the late copy");
    assert_eq!(held.token(), token, "the term goes on at the same epoch");
    let after = until_nothing_open(&kafka, &topic, token.producer_id).await;
    assert_eq!(
        after.producer_epoch,
        i32::from(token.producer_epoch),
        "{after:?}"
    );
    assert_eq!(
        after.last_sequence, 1,
        "the refused batch's sequence was sent again: {after:?}"
    );
}

/// The same on the lease path, where the late copy meets the transaction
/// the writer opened ahead after the lease committed (the partition is
/// already added to it, so the leader verifies the copy and answers it as
/// a duplicate, keeping its verification entry all the same): the next
/// renewal still commits, at the same epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_copy_of_a_lease_does_not_end_the_term() {
    let _serial = SERIAL.lock().await;
    // A one-partition topic as the transport's state topic.
    let (topic, t) = data_topic("late-lease").await;
    let role = unique("late-lease");
    let held = t.mint_epoch(&role, LEASE).await.unwrap();
    let token = held.token();
    let lease = |n: i64| state_record(0, lease_key(&role), Some(lease_value("m", token, n)));
    held.write_lease(lease(1), WITHIN)
        .await
        .expect("the first lease");
    let kafka = t.kafka_client().kafka().clone();
    until_nothing_open(&kafka, &topic, token.producer_id).await;
    // The opening ahead is off the write's path: the copy comes after it.
    wait_opened_ahead(&t, &role, &topic, 0).await;

    let late = late_copy(&kafka, &role, &topic, token, b"first lease").await;
    tracing::info!(?late, "the late copy");

    held.write_lease(lease(2), WITHIN)
        .await
        .expect("the renewal after the late copy");
    assert_eq!(held.token(), token, "the term goes on at the same epoch");
    let after = until_nothing_open(&kafka, &topic, token.producer_id).await;
    assert_eq!(
        after.producer_epoch,
        i32::from(token.producer_epoch),
        "{after:?}"
    );
    assert_eq!(after.last_sequence, 1, "{after:?}");
}
