//! The input reader on a real Kafka: it reads what transactional producers
//! committed and never what they aborted, long-polls for new records,
//! moves its positions exactly past what it returned, seeks, fails an
//! offset outside the log naming the partition and the log's range (or
//! resets by a policy), and refuses to read once the term it is bound to
//! ended, cutting a long poll in flight short.
//!
//! Needs a real cluster: `KRABKA_BOOTSTRAP`, or `ci/kafka.sh start 1` is run.
#![cfg(feature = "kafka")]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use krabka_coordination::client::Client;
use krabka_coordination::input::{
    start_positions, InputOptions, InputOutOfRange, InputPosition, InputReader, InputRecord,
    OnOutOfRange, ReaderState, Reset,
};
use krabka_coordination::leadership::Leadership;
use krabka_coordination::transport::kafka::{KafkaClient, TopicSpec};
use krabka_coordination::ErrorKind;
use krabka_kafka::client::retry::{retry, Backoff, Tried};
use krabka_kafka::{deadline_in, ProducerEpoch, TxnError};
use support::*;

/// The create time the test's producers give their records.
const STAMP: i64 = 1_700_000_000_123;

/// The longest one step (a request with its retries) may take.
const STEP: Duration = Duration::from_secs(20);

/// A leadership of a fresh role, and the Kafka client the reader reads
/// through.
async fn leader() -> (Arc<Leadership>, KafkaClient) {
    init_tracing();
    let client = Client::new(config(&bootstrap())).expect("client");
    client
        .ensure_state_topic(TopicSpec::development())
        .await
        .expect("the shared state topic");
    let options = client
        .leadership_options()
        .with_lease_duration(Duration::from_secs(10))
        .with_renew_interval(Duration::from_secs(2));
    let held = client
        .acquire(&unique("input"), "m", options)
        .await
        .expect("acquire");
    let kafka = KafkaClient::new(&config(&bootstrap())).expect("kafka client");
    (Arc::new(held), kafka)
}

/// A producer of partition 0 of a topic: transactional (its id, epoch and
/// next sequence) or not.
struct Writer {
    id: String,
    token: Option<ProducerEpoch>,
    sequence: i32,
}

async fn tried<T, F, Fut>(what: &str, attempt: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, TxnError>>,
{
    match retry(deadline_in(STEP), Backoff::TRANSACTION, attempt).await {
        Tried::Done(v) => v,
        Tried::Failed(e) => panic!("{what}: {e:?}"),
        Tried::OutOfTime(why) => panic!("{what}: out of time: {why}"),
    }
}

impl Writer {
    async fn transactional(k: &krabka_kafka::Client) -> Writer {
        let id = unique("input-txn");
        let token = k
            .init_producer_id(&id, 60_000, deadline_in(STEP))
            .await
            .expect("InitProducerId");
        Writer {
            id,
            token: Some(token),
            sequence: 0,
        }
    }

    /// One transaction of `values` on `topic`/0, committed or aborted.
    async fn transaction(
        &mut self,
        k: &krabka_kafka::Client,
        topic: &str,
        values: &[&str],
        commit: bool,
    ) {
        let token = self.token.expect("a transactional writer");
        let parts = [(topic.to_owned(), vec![0])];
        tried("AddPartitionsToTxn", || {
            k.add_partitions(&self.id, token, &parts, deadline_in(STEP))
        })
        .await;
        for v in values {
            self.write(k, topic, v).await;
        }
        tried("EndTxn", || {
            k.end_txn(&self.id, token, commit, deadline_in(STEP))
        })
        .await;
    }

    /// Writes one record of `value`; returns its offset.
    async fn write(&mut self, k: &krabka_kafka::Client, topic: &str, value: &str) -> i64 {
        let (pid, epoch) = self
            .token
            .map_or((-1, -1), |t| (t.producer_id, t.producer_epoch));
        let record = Record {
            transactional: self.token.is_some(),
            control: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: 0,
            sequence: self.sequence,
            timestamp: STAMP,
            // The data topic is compacted: every record has a key.
            key: Some(Bytes::copy_from_slice(value.as_bytes())),
            value: Some(Bytes::copy_from_slice(value.as_bytes())),
            headers: [(
                StrBytes::from_static_str("h"),
                Some(Bytes::copy_from_slice(value.as_bytes())),
            )]
            .into_iter()
            .collect(),
            delete_horizon: false,
        };
        if self.token.is_some() {
            self.sequence += 1;
        }
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut buf, [&record], &options).expect("encode the batch");
        let batch = buf.freeze();
        tried("Produce", || {
            k.produce(&self.id, topic, 0, batch.clone(), deadline_in(STEP))
        })
        .await
    }
}

fn values(records: &[InputRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
        .collect()
}

/// Reads until `n` records came (or panics after `within`).
async fn read_n(reader: &mut InputReader, n: usize, within: Duration) -> Vec<InputRecord> {
    let until = Instant::now() + within;
    let mut got = Vec::new();
    while got.len() < n {
        assert!(
            Instant::now() < until,
            "only {:?} of {n} came",
            values(&got)
        );
        got.extend(reader.next_batch().await.expect("next_batch"));
    }
    got
}

/// `topic`/0 with committed c0 c1, aborted a0 a1, committed c2 (each
/// transaction ending with its marker): offsets 0 1 [2] 3 4 [5] 6 [7].
async fn committed_and_aborted(k: &KafkaClient) -> String {
    let (topic, _t) = data_topic("krabka-test-input").await;
    let mut w = Writer::transactional(k.kafka()).await;
    w.transaction(k.kafka(), &topic, &["c0", "c1"], true).await;
    w.transaction(k.kafka(), &topic, &["a0", "a1"], false).await;
    w.transaction(k.kafka(), &topic, &["c2"], true).await;
    // EndTxn returns before the coordinator wrote the last marker: wait
    // for it, so the log ends at 8 in every test.
    let until = Instant::now() + STEP;
    loop {
        let end = k
            .kafka()
            .reset_offset(&topic, 0, Reset::Latest, deadline_in(STEP))
            .await
            .unwrap();
        if end == 8 {
            return topic;
        }
        assert!(Instant::now() < until, "the log ends at {end}, not 8");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn quick() -> InputOptions {
    InputOptions::default()
        .with_max_wait(Duration::from_millis(300))
        .with_timeout(Duration::from_secs(20))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_committed_records_only_and_positions_end_exactly_past_them() {
    let (held, k) = leader().await;
    let topic = committed_and_aborted(&k).await;
    let start = start_positions(&k, &[(topic.clone(), 0, None)], Reset::Earliest, STEP)
        .await
        .unwrap();
    assert_eq!(start, [InputPosition::new(&topic, 0, 0)]);
    let mut reader = InputReader::new(&k, held.clone(), start, quick()).unwrap();
    let got = read_n(&mut reader, 3, STEP).await;
    assert_eq!(values(&got), ["c0", "c1", "c2"], "{got:?}");
    assert_eq!(got.iter().map(|r| r.offset).collect::<Vec<_>>(), [0, 1, 6]);
    assert!(got
        .iter()
        .all(|r| r.topic == topic && r.partition == 0 && r.key == r.value));
    for r in &got {
        assert_eq!(r.timestamp, STAMP, "{r:?}");
        assert_eq!(r.headers, [(b"h".to_vec(), r.value.clone())], "{r:?}");
    }
    // Past c2 and its commit marker: the last stable offset, exactly.
    let end = k
        .kafka()
        .reset_offset(&topic, 0, Reset::Latest, deadline_in(STEP))
        .await
        .unwrap();
    assert_eq!(end, 8);
    assert_eq!(reader.positions(), [InputPosition::new(&topic, 0, 8)]);
    // Nothing more: an empty batch, and the positions stay.
    assert!(reader.next_batch().await.unwrap().is_empty());
    assert_eq!(reader.positions(), [InputPosition::new(&topic, 0, 8)]);

    // A committed offset is where a start goes, not the reset.
    let at = start_positions(&k, &[(topic.clone(), 0, Some(6))], Reset::Earliest, STEP)
        .await
        .unwrap();
    assert_eq!(at, [InputPosition::new(&topic, 0, 6)]);
    let latest = start_positions(&k, &[(topic.clone(), 0, None)], Reset::Latest, STEP)
        .await
        .unwrap();
    assert_eq!(latest, [InputPosition::new(&topic, 0, 8)]);
    held.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_at_the_end_long_polls_and_returns_the_next_record() {
    let (held, k) = leader().await;
    let topic = committed_and_aborted(&k).await;
    let opts = InputOptions::default()
        .with_max_wait(Duration::from_secs(5))
        .with_timeout(Duration::from_secs(20));
    let mut reader = InputReader::new(
        &k,
        held.clone(),
        vec![InputPosition::new(&topic, 0, 8)],
        opts,
    )
    .unwrap();
    let writer = {
        let (k, topic) = (k.clone(), topic.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(800)).await;
            let mut w = Writer::transactional(k.kafka()).await;
            w.transaction(k.kafka(), &topic, &["late"], true).await;
        })
    };
    let started = Instant::now();
    let got = reader.next_batch().await.unwrap();
    let took = started.elapsed();
    writer.await.unwrap();
    assert_eq!(
        values(&got),
        ["late"],
        "one long poll returns the new record"
    );
    assert!(
        took >= Duration::from_millis(700) && took < Duration::from_secs(5),
        "the read waited for the record, not for max_wait: {took:?}"
    );
    assert_eq!(got[0].offset, 8);
    assert_eq!(reader.positions(), [InputPosition::new(&topic, 0, 10)]);

    // With nothing new, a call returns empty after about max_wait.
    let mut idle = InputReader::new(
        &k,
        held.clone(),
        vec![InputPosition::new(&topic, 0, 10)],
        quick(),
    )
    .unwrap();
    let started = Instant::now();
    assert!(idle.next_batch().await.unwrap().is_empty());
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(5),
        "{took:?}"
    );
    held.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seek_rewinds_and_refuses_a_partition_not_assigned() {
    let (held, k) = leader().await;
    let topic = committed_and_aborted(&k).await;
    let mut reader = InputReader::new(
        &k,
        held.clone(),
        vec![InputPosition::new(&topic, 0, 0)],
        quick(),
    )
    .unwrap();
    read_n(&mut reader, 3, STEP).await;
    reader.seek(&topic, 0, 1).unwrap();
    assert_eq!(reader.positions(), [InputPosition::new(&topic, 0, 1)]);
    let again = read_n(&mut reader, 2, STEP).await;
    assert_eq!(values(&again), ["c1", "c2"]);
    assert_eq!(reader.positions(), [InputPosition::new(&topic, 0, 8)]);
    let e = reader.seek(&topic, 1, 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("not assigned"), "{e}");
    held.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offset_outside_the_log_fails_naming_it_or_resets_by_the_policy() {
    let (held, k) = leader().await;
    let topic = committed_and_aborted(&k).await;
    let mut reader = InputReader::new(
        &k,
        held.clone(),
        vec![InputPosition::new(&topic, 0, 1_000)],
        quick(),
    )
    .unwrap();
    let e = reader.next_batch().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Fatal, "{e}");
    let text = e.to_string();
    assert!(text.contains(&format!("\"{topic}\"/0")), "{text}");
    let source = std::error::Error::source(&e).expect("a source");
    let range = source
        .downcast_ref::<InputOutOfRange>()
        .unwrap_or_else(|| panic!("an InputOutOfRange source: {source}"));
    assert_eq!(
        (range.offset, range.log_start, range.last_stable),
        (1_000, Some(0), Some(8))
    );
    assert!(text.contains("offsets 0 up to 8"), "{text}");
    assert_eq!(reader.positions(), [InputPosition::new(&topic, 0, 1_000)]);
    assert!(matches!(reader.state(), ReaderState::Reading));

    // The caller's choice: a reset policy reads on from the log's start.
    let policy = quick().with_on_out_of_range(OnOutOfRange::Reset(Reset::Earliest));
    let mut reset = InputReader::new(
        &k,
        held.clone(),
        vec![InputPosition::new(&topic, 0, 1_000)],
        policy,
    )
    .unwrap();
    let got = read_n(&mut reset, 3, STEP).await;
    assert_eq!(values(&got), ["c0", "c1", "c2"]);
    held.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_the_term_ends_the_reader_is_refused_and_a_long_poll_is_cut_short() {
    let (held, k) = leader().await;
    let topic = committed_and_aborted(&k).await;
    // A request timeout past the long poll, so the broker would hold the
    // read for the whole max_wait. The reader has a client of its own: the
    // connection of a read cut short stays busy at the broker until it
    // answers, and the writes below must not queue behind it.
    let reading =
        KafkaClient::new(&config(&bootstrap()).set("request.timeout.ms", "30000")).unwrap();
    let opts = InputOptions::default()
        .with_max_wait(Duration::from_secs(15))
        .with_timeout(Duration::from_secs(40));
    let mut reader = InputReader::new(
        &reading,
        held.clone(),
        vec![InputPosition::new(&topic, 0, 0)],
        opts,
    )
    .unwrap();
    assert_eq!(
        values(&read_n(&mut reader, 3, STEP).await),
        ["c0", "c1", "c2"]
    );
    // A long poll at the end of the log, in flight while the term ends.
    let polling = tokio::spawn(async move {
        let started = Instant::now();
        let r = reader.next_batch().await;
        (reader, r, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    held.resign().await.unwrap();
    let (mut reader, r, took) = polling.await.unwrap();
    let e = r.expect_err("no record once the term ended");
    assert_eq!(e.kind(), ErrorKind::Resigned, "{e}");
    assert!(
        took < Duration::from_secs(4),
        "the poll was cut short by the term's end: {took:?}"
    );
    assert!(matches!(reader.state(), ReaderState::Ended(_)));
    assert_eq!(reader.positions(), [InputPosition::new(&topic, 0, 8)]);

    // Records committed after the end are never returned, and every call
    // fails the same way.
    let mut w = Writer::transactional(k.kafka()).await;
    w.transaction(k.kafka(), &topic, &["after"], true).await;
    for _ in 0..2 {
        let e = reader.next_batch().await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Resigned, "{e}");
    }
    assert_eq!(
        reader.seek(&topic, 0, 0).unwrap_err().kind(),
        ErrorKind::Resigned
    );
    // A reader made for an ended term is refused at once.
    let e =
        InputReader::new(&k, held, vec![InputPosition::new(&topic, 0, 0)], quick()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Resigned);
}
