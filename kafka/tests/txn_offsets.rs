//! A consumer group's offsets in a producer's transaction, on a real Kafka,
//! with this crate's client alone: InitProducerId, AddPartitionsToTxn and
//! Produce to an output topic, AddOffsetsToTxn and TxnOffsetCommit, EndTxn;
//! then OffsetFetch with `require_stable`.
//!
//! Needs a real cluster: `KRABKA_BOOTSTRAP`, or `ci/kafka.sh start 1` is
//! run (with the `KAFKA_*` settings of the environment); the tests fail,
//! naming the cause, when neither gives a broker that answers.

mod support;

use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use krabka_kafka::records::Marker;
use krabka_kafka::{
    deadline_in, Client, Committed, Error, OffsetToCommit, PartitionCommitted, ProducerEpoch,
    Settings, TxnError,
};
use support::{tried, unique, STEP};

/// The transaction timeout of every epoch: long enough that no test's
/// transaction times out while it looks at it.
const TXN_TIMEOUT_MS: i32 = 60_000;
/// The input partition whose offsets the tests commit.
const IN_PARTITION: i32 = 0;

/// The single-node cluster's bootstrap address, and the tests' two topics
/// (input, output) created on it once.
fn cluster() -> &'static (String, String, String) {
    static CLUSTER: OnceLock<(String, String, String)> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let bootstrap = support::bootstrap().to_owned();
        let run = unique("eos");
        let (input, output) = (format!("{run}-in"), format!("{run}-out"));
        // On a thread of its own: the first test to get here runs in a
        // runtime that must not block.
        let (b, i, o) = (bootstrap.clone(), input.clone(), output.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().expect("a runtime");
            rt.block_on(support::create_topics(&b, &[&i, &o], "txn-offsets-test"));
        })
        .join()
        .unwrap_or_else(|_| panic!("creating the topics {input} and {output} failed"));
        (bootstrap, input, output)
    })
}

fn client() -> Client {
    let (bootstrap, _, _) = cluster();
    let mut settings = Settings::new(bootstrap.clone());
    settings.operation_timeout = STEP;
    Client::new(&settings).expect("valid settings")
}

/// A new epoch of a new transactional id.
async fn epoch(client: &Client, transactional_id: &str) -> ProducerEpoch {
    client
        .init_producer_id(transactional_id, TXN_TIMEOUT_MS, deadline_in(STEP))
        .await
        .expect("InitProducerId")
}

/// One transactional record batch of `token` of one record, its sequence
/// `sequence` (the epoch's batches before it on the partition, one record
/// each).
fn batch(token: ProducerEpoch, sequence: i32, value: &str) -> Bytes {
    support::batch(Some(token), sequence, value)
}

/// The input partition's position `offset`, with `metadata`.
fn position(offset: i64, metadata: &str) -> Vec<OffsetToCommit> {
    let (_, input, _) = cluster();
    vec![OffsetToCommit {
        topic: input.clone(),
        partition: IN_PARTITION,
        offset,
        metadata: Some(metadata.to_owned()),
    }]
}

/// The input partition, as the reads ask for it.
fn input_partition() -> Vec<(String, Vec<i32>)> {
    let (_, input, _) = cluster();
    vec![(input.clone(), vec![IN_PARTITION])]
}

/// One whole read-process-write transaction of `token`: its record of
/// `sequence` to the output topic and the input position `offset` for
/// `group`, then EndTxn (`commit` or abort). Returns the output record's
/// offset.
async fn transaction(
    client: &Client,
    (id, token, sequence): (&str, ProducerEpoch, i32),
    group: &str,
    offset: i64,
    commit: bool,
) -> i64 {
    let (_, _, output) = cluster();
    open_with_offsets(client, id, token, group, offset).await;
    let at = tried("Produce", || {
        client.produce(
            id,
            output,
            0,
            batch(token, sequence, "out"),
            deadline_in(STEP),
        )
    })
    .await
    .expect("Produce");
    tried("EndTxn", || {
        client.end_txn(id, token, commit, deadline_in(STEP))
    })
    .await
    .expect("EndTxn");
    at
}

/// Opens a transaction of `token` with the output partition and the
/// group's offsets added, and the input position `offset` committed in it
/// (pending until EndTxn).
async fn open_with_offsets(
    client: &Client,
    id: &str,
    token: ProducerEpoch,
    group: &str,
    offset: i64,
) {
    let (_, _, output) = cluster();
    let parts = [(output.clone(), vec![0])];
    tried("AddPartitionsToTxn", || {
        client.add_partitions(id, token, &parts, deadline_in(STEP))
    })
    .await
    .expect("AddPartitionsToTxn");
    tried("AddOffsetsToTxn", || {
        client.add_offsets(id, token, group, deadline_in(STEP))
    })
    .await
    .expect("AddOffsetsToTxn");
    let offsets = position(offset, &format!("epoch {}", token.producer_epoch));
    tried("TxnOffsetCommit", || {
        client.commit_offsets_in_txn(id, token, group, &offsets, deadline_in(STEP))
    })
    .await
    .expect("TxnOffsetCommit");
}

/// What `group` has committed for the input partition (stable only).
async fn committed(client: &Client, group: &str) -> Committed {
    let got = client
        .committed_offsets(group, &input_partition(), deadline_in(STEP))
        .await
        .expect("OffsetFetch");
    one(got)
}

fn one(got: Vec<PartitionCommitted>) -> Committed {
    let (_, input, _) = cluster();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!((&got[0].topic, got[0].partition), (input, IN_PARTITION));
    got.into_iter().next().expect("one").committed
}

/// The marker (commit or abort) of `token` that ended the transaction
/// holding the output record at `offset` (the tests share the output
/// partition, so other producers' markers may come first): the coordinator
/// writes it after its EndTxn answered, so it is read again until it is
/// there (for at most [`STEP`]).
async fn output_marker(client: &Client, token: ProducerEpoch, offset: i64) -> Marker {
    let (_, _, output) = cluster();
    let deadline = deadline_in(STEP);
    loop {
        let fetched = client
            .fetch_uncommitted(output, 0, offset + 1, 1 << 16, deadline)
            .await
            .expect("Fetch of the output");
        let ours = fetched
            .batches
            .batches
            .iter()
            .filter(|b| b.producer_id == token.producer_id)
            .find_map(|b| b.marker);
        if let Some(marker) = ours {
            return marker;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no marker after offset {offset} within {STEP:?}: {fetched:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn at(offset: i64, epoch: i16) -> Committed {
    Committed::At {
        offset,
        metadata: Some(format!("epoch {epoch}")),
    }
}

#[tokio::test]
async fn offsets_commit_with_the_transaction() {
    let client = client();
    let (id, group) = (unique("txn"), unique("group"));
    assert_eq!(committed(&client, &group).await, Committed::Nothing);
    let token = epoch(&client, &id).await;
    let out = transaction(&client, (&id, token, 0), &group, 42, true).await;
    assert_eq!(
        committed(&client, &group).await,
        at(42, token.producer_epoch)
    );
    assert_eq!(output_marker(&client, token, out).await, Marker::Commit);
}

#[tokio::test]
async fn an_aborted_transaction_leaves_the_offset_committed_before() {
    let client = client();
    let (id, group) = (unique("txn"), unique("group"));
    let token = epoch(&client, &id).await;
    transaction(&client, (&id, token, 0), &group, 10, true).await;
    let out = transaction(&client, (&id, token, 1), &group, 20, false).await;
    assert_eq!(output_marker(&client, token, out).await, Marker::Abort);
    assert_eq!(
        committed(&client, &group).await,
        at(10, token.producer_epoch)
    );
}

#[tokio::test]
async fn an_open_transactions_offset_is_pending_not_returned() {
    let client = client();
    let (id, group) = (unique("txn"), unique("group"));
    let token = epoch(&client, &id).await;
    transaction(&client, (&id, token, 0), &group, 7, true).await;
    open_with_offsets(&client, &id, token, &group, 8).await;

    // Asked at once: pending, neither 7 nor 8.
    let now = client
        .committed_offsets_now(&group, &input_partition(), deadline_in(STEP))
        .await
        .expect("OffsetFetch");
    assert_eq!(one(now), Committed::Pending);
    // Waited for: retried until the deadline, which says why.
    let e = client
        .committed_offsets(
            &group,
            &input_partition(),
            deadline_in(Duration::from_millis(300)),
        )
        .await
        .expect_err("pending until the transaction ends");
    let text = e.to_string();
    assert!(matches!(e, Error::Transient { .. }), "{text}");
    assert!(
        text.contains("UNSTABLE_OFFSET_COMMIT") && text.contains(&group),
        "{text}"
    );

    tried("EndTxn", || {
        client.end_txn(&id, token, true, deadline_in(STEP))
    })
    .await
    .expect("EndTxn");
    assert_eq!(
        committed(&client, &group).await,
        at(8, token.producer_epoch)
    );
}

#[tokio::test]
async fn a_fenced_epoch_cannot_commit_offsets() {
    let client = client();
    let (id, group) = (unique("txn"), unique("group"));
    let old = epoch(&client, &id).await;
    transaction(&client, (&id, old, 0), &group, 5, true).await;
    // The old epoch's next transaction is open, its offsets partition added.
    let (_, _, output) = cluster();
    let parts = [(output.clone(), vec![0])];
    tried("AddPartitionsToTxn", || {
        client.add_partitions(&id, old, &parts, deadline_in(STEP))
    })
    .await
    .expect("AddPartitionsToTxn");
    tried("AddOffsetsToTxn", || {
        client.add_offsets(&id, old, &group, deadline_in(STEP))
    })
    .await
    .expect("AddOffsetsToTxn");

    // A newer epoch: the old one's open transaction is aborted.
    let new = epoch(&client, &id).await;
    assert!(new.producer_epoch > old.producer_epoch, "{old} then {new}");

    let offsets = position(6, "deposed");
    let commit = tried("TxnOffsetCommit", || {
        client.commit_offsets_in_txn(&id, old, &group, &offsets, deadline_in(STEP))
    })
    .await;
    match commit {
        Err(TxnError::Fenced(why)) => {
            assert!(why.contains(&group) && why.contains(&id), "{why}")
        }
        other => panic!("the deposed epoch's TxnOffsetCommit: {other:?}"),
    }
    let add = tried("AddOffsetsToTxn", || {
        client.add_offsets(&id, old, &group, deadline_in(STEP))
    })
    .await;
    match add {
        Err(TxnError::Fenced(why)) => {
            assert!(why.contains(&group) && why.contains(&id), "{why}")
        }
        other => panic!("the deposed epoch's AddOffsetsToTxn: {other:?}"),
    }
    assert_eq!(committed(&client, &group).await, at(5, old.producer_epoch));

    // The new epoch commits where the old one could not.
    transaction(&client, (&id, new, 0), &group, 6, true).await;
    assert_eq!(committed(&client, &group).await, at(6, new.producer_epoch));
}

/// AddOffsetsToTxn is what makes the offsets part of the transaction:
/// without it the group coordinator refuses them (TRANSACTION_ABORTABLE,
/// on brokers that verify transactions: Kafka 4.1) or holds them pending
/// (Kafka 3.6), and the EndTxn that commits the transaction never commits
/// them.
#[tokio::test]
async fn offsets_without_add_offsets_never_commit() {
    let client = client();
    let (id, group) = (unique("txn"), unique("group"));
    let token = epoch(&client, &id).await;
    let (_, _, output) = cluster();
    let parts = [(output.clone(), vec![0])];
    tried("AddPartitionsToTxn", || {
        client.add_partitions(&id, token, &parts, deadline_in(STEP))
    })
    .await
    .expect("AddPartitionsToTxn");
    let offsets = position(3, "not added");
    let commit = tried("TxnOffsetCommit", || {
        client.commit_offsets_in_txn(&id, token, &group, &offsets, deadline_in(STEP))
    })
    .await;
    tried("EndTxn", || {
        client.end_txn(&id, token, true, deadline_in(STEP))
    })
    .await
    .expect("EndTxn");
    let now = client
        .committed_offsets_now(&group, &input_partition(), deadline_in(STEP))
        .await
        .expect("OffsetFetch");
    match commit {
        Err(TxnError::Refused(e)) => {
            assert!(e.to_string().contains("AddOffsetsToTxn"), "{e}");
            assert_eq!(one(now), Committed::Nothing);
        }
        Ok(()) => assert!(
            matches!(one(now.clone()), Committed::Nothing | Committed::Pending),
            "{now:?}"
        ),
        Err(other) => panic!("TxnOffsetCommit without AddOffsetsToTxn: {other:?}"),
    }
}
