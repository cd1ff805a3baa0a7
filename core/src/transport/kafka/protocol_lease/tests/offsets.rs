//! The offsets rows (W16 to W23) of the module table, on fake brokers: what
//! a write with input offsets sends, in which order, and what each failure
//! of AddOffsetsToTxn or TxnOffsetCommit leaves.

use std::time::Duration;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnResponse, ApiKey, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use krabka_kafka::fake_broker::{FakeBroker, Reply, Request};

use super::*;
use crate::transport::{ConsumedOffsets, InputOffset};

/// The consumer group of the tests.
const GROUP: &str = "g";

/// An AddOffsetsToTxn answer with `code`.
fn offsets_added(r: &Request, code: i16) -> Reply {
    Reply::of(r, &AddOffsetsToTxnResponse::default().with_error_code(code))
}

/// The TxnOffsetCommit requests a broker read.
type Commits = std::sync::Arc<std::sync::Mutex<Vec<TxnOffsetCommitRequest>>>;

/// A TxnOffsetCommit answer giving every partition asked `code`; the
/// request goes to `log`.
fn offsets_committed(r: &Request, code: i16, log: &Commits) -> Reply {
    let asked: TxnOffsetCommitRequest = match r.decode() {
        Ok(asked) => asked,
        Err(e) => return Reply::ScriptError(e.to_string()),
    };
    log.lock().unwrap().push(asked.clone());
    let topics = asked
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    Reply::of(r, &TxnOffsetCommitResponse::default().with_topics(topics))
}

/// Broker A of [`two_brokers`] answering AddOffsetsToTxn with `add` and
/// TxnOffsetCommit with `commit` (`None`: no answer), logging its EndTxns
/// and TxnOffsetCommits.
fn offsets_broker(add: Option<i16>, commit: Option<i16>) -> (FakeBroker, EndTxns, Commits) {
    let end_txns = EndTxns::default();
    let log = end_txns.clone();
    let commits = Commits::default();
    let commit_log = commits.clone();
    let (a, _b) = two_brokers(
        Box::new(move |r, _| match r.key() {
            Some(ApiKey::AddOffsetsToTxn) => {
                Some(add.map_or(Reply::Silence, |c| offsets_added(r, c)))
            }
            Some(ApiKey::TxnOffsetCommit) => {
                Some(commit.map_or(Reply::Silence, |c| offsets_committed(r, c, &commit_log)))
            }
            Some(ApiKey::EndTxn) => Some(log.answer(r, 0)),
            _ => None,
        }),
        Box::new(|_, _| None),
    );
    (a, end_txns, commits)
}

/// Input offset 42 of `in`/0 for [`GROUP`].
fn consumed() -> ConsumedOffsets {
    ConsumedOffsets::new(
        GROUP,
        vec![InputOffset {
            metadata: Some("m".into()),
            ..InputOffset::new("in", 0, 42)
        }],
    )
}

/// One guarded write of one record to `t`/0 (none when `records` is
/// false) with [`consumed`], within `within`.
async fn write_with_offsets(
    lease: &mut ProtocolLease,
    records: bool,
    within: Duration,
) -> std::result::Result<(), Outcome> {
    let records = if records {
        vec![rec("k", Some("v"), &[])]
    } else {
        Vec::new()
    };
    let content = Content::GuardedWithOffsets(records, consumed());
    lease
        .transact(
            "r",
            "a guarded write",
            Write::commit(content),
            Instant::now() + within,
        )
        .await
}

/// The transactional requests A read, without the writable check's.
fn txn_requests(a: &FakeBroker) -> Vec<String> {
    let mut sent = sent_txn(a);
    sent.retain(|k| k != "DescribeConfigs");
    sent
}

/// Rows W3, W5, W16, W10, W20, C1: the group is added with the partitions,
/// the offsets committed after the records, before the commit; they go
/// without group membership, under the epoch.
#[tokio::test]
async fn offsets_are_added_first_and_committed_between_the_records_and_the_commit() {
    let (a, end_txns, commits) = offsets_broker(Some(0), Some(0));
    let mut lease = writer(&a);
    write_with_offsets(&mut lease, true, Duration::from_secs(2))
        .await
        .unwrap_or_else(|o| panic!("the write failed: {}", failed(Err(o)).0));
    assert_eq!(lease.state(), TxnState::Idle);
    assert_eq!(
        txn_requests(&a),
        [
            "AddPartitionsToTxn",
            "AddOffsetsToTxn",
            "Produce",
            "TxnOffsetCommit",
            "EndTxn"
        ]
    );
    assert_eq!(end_txns.kinds(), ["commit"]);
    let commit = commits.lock().unwrap()[0].clone();
    assert_eq!(commit.group_id.0.as_str(), GROUP);
    assert_eq!(
        (commit.producer_id.0, commit.producer_epoch),
        (TOKEN.producer_id, TOKEN.producer_epoch)
    );
    assert_eq!((commit.generation_id, commit.member_id.as_str()), (-1, ""));
    let p = &commit.topics[0].partitions[0];
    assert_eq!(commit.topics[0].name.0.as_str(), "in");
    assert_eq!((p.partition_index, p.committed_offset), (0, 42));
    assert_eq!(p.committed_metadata.as_ref().map(|m| m.as_str()), Some("m"));
}

/// Rows W16, W20 with no records: no partition added, nothing produced,
/// and the epoch is not merely checked (row S4 is for no records and no
/// offsets).
#[tokio::test]
async fn offsets_alone_are_committed_in_a_transaction_of_their_own() {
    let (a, end_txns, _) = offsets_broker(Some(0), Some(0));
    let mut lease = writer(&a);
    write_with_offsets(&mut lease, false, Duration::from_secs(2))
        .await
        .unwrap_or_else(|o| panic!("the write failed: {}", failed(Err(o)).0));
    assert_eq!(
        txn_requests(&a),
        ["AddOffsetsToTxn", "TxnOffsetCommit", "EndTxn"]
    );
    assert_eq!(end_txns.kinds(), ["commit"]);
}

/// Row W17: AddOffsetsToTxn without an answer fails transient before any
/// record is sent, and leaves the transaction to be aborted.
#[tokio::test]
async fn an_add_offsets_without_an_answer_sends_no_record_and_aborts_next() {
    let (a, _, _) = offsets_broker(None, Some(0));
    let mut lease = writer(&a);
    let (e, dropped) =
        failed(write_with_offsets(&mut lease, true, Duration::from_millis(300)).await);
    assert!(!dropped && e.is_transient(), "{e}");
    assert!(e.to_string().contains("offsets of group \"g\""), "{e}");
    assert_eq!(lease.state(), TxnState::AbortPending);
    assert!(!txn_requests(&a).contains(&"Produce".to_owned()));
}

/// Row W18: AddOffsetsToTxn refused (GROUP_AUTHORIZATION_FAILED) aborts
/// the transaction before any record is sent, and names the group.
#[tokio::test]
async fn an_add_offsets_refused_aborts_before_any_record() {
    let (a, end_txns, _) = offsets_broker(Some(30), Some(0));
    let mut lease = writer(&a);
    let (e, dropped) = failed(write_with_offsets(&mut lease, true, Duration::from_secs(2)).await);
    assert!(!dropped, "{e}");
    assert!(e.to_string().contains("\"g\""), "{e}");
    assert_eq!(lease.state(), TxnState::Idle);
    assert_eq!(
        txn_requests(&a),
        ["AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn"]
    );
    assert_eq!(end_txns.kinds(), ["abort"]);
}

/// Rows W19 and W23: AddOffsetsToTxn or TxnOffsetCommit fenced
/// (PRODUCER_FENCED) ends the term, and no EndTxn goes.
#[tokio::test]
async fn offsets_fenced_drop_the_writer_and_end_nothing() {
    for (add, commit, last) in [(90, 0, "AddOffsetsToTxn"), (0, 90, "TxnOffsetCommit")] {
        let (a, end_txns, _) = offsets_broker(Some(add), Some(commit));
        let mut lease = writer(&a);
        let (e, dropped) =
            failed(write_with_offsets(&mut lease, true, Duration::from_secs(2)).await);
        assert!(dropped && e.means_fenced(), "{last}: {e:?}");
        assert_eq!(txn_requests(&a).last().map(String::as_str), Some(last));
        assert!(end_txns.kinds().is_empty(), "{last}");
    }
}

/// Row W21: TxnOffsetCommit without an answer fails transient, never
/// commits, and leaves the transaction to be aborted; the next write
/// aborts it first (row S2).
#[tokio::test]
async fn an_offset_commit_without_an_answer_is_aborted_never_committed() {
    let (a, end_txns, _) = offsets_broker(Some(0), None);
    let mut lease = writer(&a);
    let (e, dropped) =
        failed(write_with_offsets(&mut lease, true, Duration::from_millis(300)).await);
    assert!(!dropped && e.is_transient(), "{e}");
    assert!(
        e.to_string().contains("not committed in the transaction"),
        "{e}"
    );
    assert_eq!(lease.state(), TxnState::AbortPending);
    assert!(end_txns.kinds().is_empty(), "no commit was sent");
    assert!(lease.txn.pin().offsets_sent);
}

/// Row W22: TxnOffsetCommit refused (UNKNOWN_MEMBER_ID: a group with
/// members of its own) aborts the transaction: its records never commit.
#[tokio::test]
async fn an_offset_commit_refused_aborts_the_records() {
    let (a, end_txns, _) = offsets_broker(Some(0), Some(25));
    let mut lease = writer(&a);
    let (e, dropped) = failed(write_with_offsets(&mut lease, true, Duration::from_secs(2)).await);
    assert!(!dropped, "{e}");
    assert!(e.to_string().contains("\"in\"/0"), "{e}");
    assert_eq!(lease.state(), TxnState::Idle);
    assert_eq!(
        txn_requests(&a),
        [
            "AddPartitionsToTxn",
            "AddOffsetsToTxn",
            "Produce",
            "TxnOffsetCommit",
            "EndTxn"
        ]
    );
    assert_eq!(end_txns.kinds(), ["abort"]);
}
