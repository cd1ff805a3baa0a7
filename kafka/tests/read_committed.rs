//! A read_committed reader on a real Kafka, with this crate's client: the
//! Fetch of assigned partitions drops aborted transactions and markers and
//! stops at the last stable offset, compressed batches of every codec
//! (written by Kafka's own console producer) read as their records, an
//! offset outside the log is a typed error, and ListOffsets gives the
//! earliest and latest offsets of a reset policy.
//!
//! Needs a real cluster: `KRABKA_BOOTSTRAP`, or `ci/kafka.sh start 1` is
//! run (with the `KAFKA_*` settings of the environment); the tests fail,
//! naming the cause, when neither gives a broker that answers.

mod support;

use std::time::Duration;

use krabka_kafka::{
    deadline_in, Client, Error, PartitionRead, ProducerEpoch, ReadError, ReadFrom, Reset, Settings,
    TxnError,
};
use support::{bootstrap, kafka_sh, unique, STEP};

/// How long a leader with nothing new waits in these tests' reads.
const WAIT: Duration = Duration::from_millis(200);

/// A new topic of one partition (see [`support::create_topics`]).
async fn topic(prefix: &str) -> String {
    let name = unique(prefix);
    support::create_topics(bootstrap(), &[&name], "read-committed-test").await;
    name
}

fn client() -> Client {
    let mut settings = Settings::new(bootstrap());
    settings.operation_timeout = STEP;
    Client::new(&settings).expect("valid settings")
}

/// One transactional request through the client's retry loop; panics
/// naming `what` when it fails.
async fn tried<T, F, Fut>(what: &str, attempt: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, TxnError>>,
{
    support::tried(what, attempt)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e:?}"))
}

/// A producer of the topic: transactional (its id, epoch and next
/// sequence) or not.
struct Writer {
    id: String,
    token: Option<ProducerEpoch>,
    sequence: i32,
}

impl Writer {
    async fn transactional(client: &Client) -> Writer {
        let id = unique("reader-txn");
        let token = client
            .init_producer_id(&id, 60_000, deadline_in(STEP))
            .await
            .expect("InitProducerId");
        Writer {
            id,
            token: Some(token),
            sequence: 0,
        }
    }

    /// A producer without a transaction (producer id -1), sending through
    /// the same Produce path.
    fn plain() -> Writer {
        Writer {
            id: unique("reader-plain"),
            token: None,
            sequence: -1,
        }
    }

    async fn begin(&self, client: &Client, topic: &str) {
        let token = self.token.expect("a transactional writer");
        let parts = [(topic.to_owned(), vec![0])];
        tried("AddPartitionsToTxn", || {
            client.add_partitions(&self.id, token, &parts, deadline_in(STEP))
        })
        .await;
    }

    /// Writes one record of `value`; returns its offset.
    async fn write(&mut self, client: &Client, topic: &str, value: &str) -> i64 {
        let batch = support::batch(self.token, self.sequence, value);
        if self.token.is_some() {
            self.sequence += 1;
        }
        tried("Produce", || {
            client.produce(&self.id, topic, 0, batch.clone(), deadline_in(STEP))
        })
        .await
    }

    async fn end(&self, client: &Client, commit: bool) {
        let token = self.token.expect("a transactional writer");
        tried("EndTxn", || {
            client.end_txn(&self.id, token, commit, deadline_in(STEP))
        })
        .await;
    }
}

fn from(topic: &str, offset: i64) -> Vec<ReadFrom> {
    vec![ReadFrom {
        topic: topic.to_owned(),
        partition: 0,
        offset,
    }]
}

async fn read_once(client: &Client, topic: &str, offset: i64) -> PartitionRead {
    let mut got = client
        .read_committed(&from(topic, offset), WAIT, 1 << 20, deadline_in(STEP))
        .await
        .unwrap_or_else(|e| panic!("read_committed of {topic} from {offset}: {e}"));
    assert_eq!(got.len(), 1, "{got:?}");
    got.remove(0)
}

/// Reads from 0 until `want` values were read or [`STEP`] passed; returns
/// (offset, value) of every record read, and the last read.
async fn read_until(
    client: &Client,
    topic: &str,
    want: usize,
) -> (Vec<(i64, String)>, PartitionRead) {
    let deadline = deadline_in(STEP);
    let mut seen = Vec::new();
    let mut offset = 0;
    loop {
        let read = read_once(client, topic, offset).await;
        assert!(read.next_offset >= offset, "{read:?}");
        assert!(read.next_offset <= read.last_stable.max(offset), "{read:?}");
        for r in &read.records {
            let value = r.value.as_deref().map(String::from_utf8_lossy);
            seen.push((r.offset, value.unwrap_or_default().into_owned()));
        }
        offset = read.next_offset;
        if seen.len() >= want || tokio::time::Instant::now() >= deadline {
            return (seen, read);
        }
    }
}

fn values(seen: &[(i64, String)]) -> Vec<&str> {
    seen.iter().map(|(_, v)| v.as_str()).collect()
}

/// Two producers' transactions interleaved with records of a producer
/// without one: the reader gets exactly the committed and plain records,
/// in offset order, never an aborted one, and ends past the markers.
#[tokio::test]
async fn only_committed_and_plain_records_in_offset_order() {
    let client = client();
    let topic = topic("committed").await;
    let (mut a, mut b, mut plain) = (
        Writer::transactional(&client).await,
        Writer::transactional(&client).await,
        Writer::plain(),
    );
    a.begin(&client, &topic).await;
    a.write(&client, &topic, "a1").await;
    a.end(&client, true).await;
    plain.write(&client, &topic, "p1").await;
    a.begin(&client, &topic).await;
    b.begin(&client, &topic).await;
    a.write(&client, &topic, "a2 aborted").await;
    b.write(&client, &topic, "b1").await;
    plain.write(&client, &topic, "p2").await;
    a.write(&client, &topic, "a3 aborted").await;
    a.end(&client, false).await;
    b.end(&client, true).await;
    a.begin(&client, &topic).await;
    a.write(&client, &topic, "a4").await;
    a.end(&client, true).await;

    let (seen, last) = read_until(&client, &topic, 5).await;
    assert_eq!(values(&seen), ["a1", "p1", "b1", "p2", "a4"], "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "{seen:?}");
    // Past a4's commit marker, once it is written: nothing left to read.
    let end = client
        .end_offset(&topic, 0, true, deadline_in(STEP))
        .await
        .expect("ListOffsets");
    let mut next = last.next_offset;
    while next < end {
        let read = read_once(&client, &topic, next).await;
        assert!(read.records.is_empty(), "{read:?}");
        next = read.next_offset;
    }
    assert_eq!(next, end);
}

/// An open transaction holds the reader at its first offset, records of
/// other producers after it included, until it commits.
#[tokio::test]
async fn an_open_transaction_holds_the_reader_at_the_last_stable_offset() {
    let client = client();
    let topic = topic("stable").await;
    let (mut a, mut plain) = (Writer::transactional(&client).await, Writer::plain());
    plain.write(&client, &topic, "p0").await;
    a.begin(&client, &topic).await;
    let open = a.write(&client, &topic, "a0").await;
    plain.write(&client, &topic, "p1").await;

    let read = read_once(&client, &topic, 0).await;
    assert_eq!(values(&collect(&read)), ["p0"], "{read:?}");
    assert_eq!(
        (read.next_offset, read.last_stable),
        (open, open),
        "{read:?}"
    );
    assert_eq!(read.high_watermark, open + 2, "{read:?}");
    // Nothing more while it is open: the leader waits, then answers none.
    let again = read_once(&client, &topic, read.next_offset).await;
    assert!(again.records.is_empty(), "{again:?}");
    assert_eq!(again.next_offset, open);

    a.end(&client, true).await;
    let (seen, _) = read_until(&client, &topic, 3).await;
    assert_eq!(values(&seen), ["p0", "a0", "p1"], "{seen:?}");
}

fn collect(read: &PartitionRead) -> Vec<(i64, String)> {
    read.records
        .iter()
        .map(|r| {
            let v = r.value.as_deref().map(String::from_utf8_lossy);
            (r.offset, v.unwrap_or_default().into_owned())
        })
        .collect()
}

/// An offset past the end is a typed error naming the partition; the
/// reset policy's offsets are the log's start and its last stable offset.
#[tokio::test]
async fn an_offset_outside_the_log_is_out_of_range_and_resets() {
    let client = client();
    let topic = topic("range").await;
    let mut plain = Writer::plain();
    for v in ["r0", "r1", "r2"] {
        plain.write(&client, &topic, v).await;
    }
    let e = client
        .read_committed(&from(&topic, 1_000), WAIT, 1 << 20, deadline_in(STEP))
        .await
        .expect_err("offset 1000 of a log of 3");
    match &e {
        ReadError::OutOfRange(parts) => {
            assert_eq!(parts.len(), 1, "{e}");
            assert_eq!(
                (parts[0].topic.as_str(), parts[0].partition, parts[0].offset),
                (topic.as_str(), 0, 1_000)
            );
            assert!(e.to_string().contains(&topic), "{e}");
        }
        other => panic!("{other:?}"),
    }
    let earliest = client
        .reset_offset(&topic, 0, Reset::Earliest, deadline_in(STEP))
        .await
        .expect("earliest");
    let latest = client
        .reset_offset(&topic, 0, Reset::Latest, deadline_in(STEP))
        .await
        .expect("latest");
    assert_eq!((earliest, latest), (0, 3));

    // Latest is the last stable offset: an open transaction holds it.
    let mut a = Writer::transactional(&client).await;
    a.begin(&client, &topic).await;
    a.write(&client, &topic, "open").await;
    plain.write(&client, &topic, "r3").await;
    let latest = client
        .reset_offset(&topic, 0, Reset::Latest, deadline_in(STEP))
        .await
        .expect("latest");
    assert_eq!(latest, 3);
    a.end(&client, false).await;
}

/// A topic that does not exist is an error naming it, within the call.
#[tokio::test]
async fn a_missing_topic_is_named() {
    let client = client();
    let missing = unique("no-such-topic");
    let e = client
        .read_committed(&from(&missing, 0), WAIT, 1 << 20, deadline_in(STEP))
        .await
        .expect_err("no such topic");
    let text = e.to_string();
    assert!(
        matches!(e, ReadError::Client(Error::Fatal { .. })) && text.contains(&missing),
        "{text}"
    );
}

/// Batches compressed by Kafka's own producer, one topic per codec, read
/// as the records written.
#[tokio::test]
async fn compressed_batches_of_every_codec_read_as_written() {
    let client = client();
    let codecs = ["gzip", "snappy", "lz4", "zstd"];
    let mut topics = Vec::new();
    for codec in codecs {
        topics.push(topic(&format!("codec-{codec}")).await);
    }
    // The console producers (JVMs) at once.
    let writers: Vec<_> = codecs
        .iter()
        .zip(&topics)
        .map(|(codec, topic)| {
            let (codec, topic) = (codec.to_string(), topic.clone());
            std::thread::spawn(move || {
                let lines: String = (0..50)
                    .map(|i| format!("{codec} record {i} {}\n", "padding ".repeat(8)))
                    .collect();
                let out = kafka_sh(
                    &[
                        "tool",
                        "console-producer",
                        "--bootstrap-server",
                        bootstrap(),
                        "--topic",
                        &topic,
                        "--compression-codec",
                        &codec,
                    ],
                    Some(&lines),
                );
                assert!(
                    out.status.success(),
                    "console producer ({codec}): {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                lines
            })
        })
        .collect();
    for ((codec, topic), writer) in codecs.iter().zip(&topics).zip(writers) {
        let lines = writer.join().expect("the console producer");
        let want: Vec<&str> = lines.lines().collect();
        let (seen, _) = read_until(&client, topic, want.len()).await;
        assert_eq!(values(&seen), want, "{codec}");
    }
}

/// A read at the end of the log waits at the leader (the long poll) and
/// returns a record written while it waits.
#[tokio::test]
async fn a_read_at_the_end_waits_for_the_next_record() {
    let client = client();
    let topic = topic("poll").await;
    let mut plain = Writer::plain();
    plain.write(&client, &topic, "before").await;
    let waiting = {
        let (client, topic) = (client.clone(), topic.clone());
        tokio::spawn(async move {
            client
                .read_committed(&from(&topic, 1), STEP / 2, 1 << 20, deadline_in(STEP))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    plain.write(&client, &topic, "while waiting").await;
    let got = waiting.await.expect("the read").expect("read_committed");
    assert_eq!(values(&collect(&got[0])), ["while waiting"], "{got:?}");
    assert_eq!(got[0].next_offset, 2);
}
