use std::time::Duration;

use super::batch::tests::rec;
use super::*;
use crate::error::Error;
use crate::transport::OutRecord;

mod offsets;
mod rows;

/// A fake broker that leads partition 0 of topic `t`, coordinates every
/// transactional id, leaves the first Produce unanswered and answers
/// everything else.
fn one_broker_cluster() -> krabka_kafka::fake_broker::FakeBroker {
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::produce_response::{
        PartitionProduceResponse, TopicProduceResponse,
    };
    use kafka_protocol::messages::*;
    use krabka_kafka::fake_broker::{self, FakeBroker, Reply};
    let endpoint = std::sync::Arc::new(std::sync::OnceLock::new());
    let seen = std::sync::Arc::clone(&endpoint);
    let broker = FakeBroker::start(move |r| {
        let me: &fake_broker::Endpoint = seen.get().expect("set before the first request");
        match r.key() {
            Some(ApiKey::FindCoordinator) => fake_broker::find_coordinator(r, me),
            Some(ApiKey::Metadata) => {
                let mut b = MetadataResponseBroker::default();
                b.node_id = BrokerId(me.node_id);
                b.host = me.host.clone().into();
                b.port = me.port;
                let mut p = MetadataResponsePartition::default();
                p.leader_id = BrokerId(me.node_id);
                let mut t = MetadataResponseTopic::default();
                t.name = Some(TopicName("t".to_owned().into()));
                t.partitions = vec![p];
                let mut resp = MetadataResponse::default();
                resp.brokers = vec![b];
                resp.topics = vec![t];
                Reply::of(r, &resp)
            }
            Some(ApiKey::AddPartitionsToTxn) => fake_broker::error_for(r, 0),
            Some(ApiKey::Produce) if r.key_index == 0 => Reply::Silence,
            Some(ApiKey::Produce) => {
                let mut p = PartitionProduceResponse::default();
                p.base_offset = 7;
                let mut t = TopicProduceResponse::default();
                t.name = TopicName("t".to_owned().into());
                t.partition_responses = vec![p];
                let mut resp = ProduceResponse::default();
                resp.responses = vec![t];
                Reply::of(r, &resp)
            }
            Some(ApiKey::EndTxn) => fake_broker::end_txn(r, 0),
            _ => Reply::Default,
        }
    });
    endpoint.set(broker.endpoint()).expect("set once");
    broker
}

/// Rows W3, W5, W11, R2, R3, A2 of the module table.
#[tokio::test]
async fn a_release_settles_an_unanswered_batch_before_it_aborts() {
    use kafka_protocol::messages::ApiKey;
    let broker = one_broker_cluster();
    let mut settings = krabka_kafka::Settings::new(broker.addr());
    settings.operation_timeout = Duration::from_secs(5);
    let client = KafkaClient::new(&settings).unwrap();
    let mut lease = ProtocolLease::new(client, FencingToken::new(11, 3), DEFAULT_MAX_BATCH);
    let deadline = Instant::now() + Duration::from_millis(300);
    let e = match lease
        .transact(
            "r",
            "write_guarded",
            Write::commit(Content::Lease(vec![rec("k", Some("v"), &[])])),
            deadline,
        )
        .await
    {
        Err(Outcome::Keep(e)) => e,
        Err(Outcome::Drop(e)) => panic!("the epoch was dropped: {e}"),
        Ok(()) => panic!("a write whose Produce had no answer succeeded"),
    };
    assert!(e.to_string().contains("not acknowledged in time"), "{e}");
    assert_eq!(lease.unanswered().len(), 1);
    lease.release("r".into(), Duration::from_secs(5)).await;
    let sent: Vec<i16> = broker
        .requests()
        .iter()
        .map(|r| r.api_key)
        .filter(|k| [ApiKey::Produce as i16, ApiKey::EndTxn as i16].contains(k))
        .collect();
    assert_eq!(
        sent,
        vec![
            ApiKey::Produce as i16,
            ApiKey::Produce as i16,
            ApiKey::EndTxn as i16
        ],
        "the unanswered batch is sent again and answered before the abort"
    );
}

// ---------------------------------------------------------------------------
// The broker whose EndTxn answer counts (the `pin` module).
// ---------------------------------------------------------------------------

use kafka_protocol::messages::ApiKey;
use krabka_kafka::fake_broker::{self, Endpoint, FakeBroker, Reply, Request};

/// The held epoch of the tests below.
const TOKEN: FencingToken = FencingToken::new(11, 3);

/// Where the two brokers of [`two_brokers`] listen.
#[derive(Clone)]
struct Endpoints {
    a: Endpoint,
    b: Endpoint,
}

/// A script of one broker of [`two_brokers`]: `Some` answers the request,
/// `None` leaves it to [`usual`].
type Script = Box<dyn Fn(&Request, &Endpoints) -> Option<Reply> + Send + Sync>;

/// What a broker of [`two_brokers`] answers unless its script says
/// otherwise: Metadata with A leading `t`/0, FindCoordinator naming A,
/// AddPartitionsToTxn and EndTxn without error, Produce at offset 7, and
/// ApiVersions; anything else is a script error.
fn usual(r: &Request, at: &Endpoints) -> Reply {
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::produce_response::{
        PartitionProduceResponse, TopicProduceResponse,
    };
    use kafka_protocol::messages::{BrokerId, MetadataResponse, ProduceResponse, TopicName};
    match r.key() {
        Some(ApiKey::ApiVersions) => Reply::Default,
        Some(ApiKey::FindCoordinator) => fake_broker::find_coordinator(r, &at.a),
        Some(ApiKey::Metadata) => {
            let brokers = [&at.a, &at.b]
                .iter()
                .map(|e| {
                    MetadataResponseBroker::default()
                        .with_node_id(BrokerId(e.node_id))
                        .with_host(e.host.clone().into())
                        .with_port(e.port)
                })
                .collect();
            let p = MetadataResponsePartition::default().with_leader_id(BrokerId(at.a.node_id));
            let t = MetadataResponseTopic::default()
                .with_name(Some(TopicName("t".to_owned().into())))
                .with_partitions(vec![p]);
            Reply::of(
                r,
                &MetadataResponse::default()
                    .with_brokers(brokers)
                    .with_topics(vec![t]),
            )
        }
        Some(ApiKey::AddPartitionsToTxn) => fake_broker::error_for(r, 0),
        Some(ApiKey::Produce) => {
            let p = PartitionProduceResponse::default().with_base_offset(7);
            let t = TopicProduceResponse::default()
                .with_name(TopicName("t".to_owned().into()))
                .with_partition_responses(vec![p]);
            Reply::of(r, &ProduceResponse::default().with_responses(vec![t]))
        }
        Some(ApiKey::EndTxn) => fake_broker::end_txn(r, 0),
        _ => Reply::ScriptError(format!("unexpected api key {}", r.api_key)),
    }
}

/// Two fake brokers, A (node 1, the bootstrap broker, leader of `t`/0) and
/// B (node 2), each answering with its script, then [`usual`].
fn two_brokers(a: Script, b: Script) -> (FakeBroker, FakeBroker) {
    use krabka_kafka::fake_broker::Config;
    let at = std::sync::Arc::new(std::sync::OnceLock::<Endpoints>::new());
    let start = |node_id: i32, script: Script| {
        let at = std::sync::Arc::clone(&at);
        FakeBroker::start_with(
            Config {
                node_id,
                ..Config::default()
            },
            move |r| {
                let at = at.get().expect("set before the first request");
                script(r, at).unwrap_or_else(|| usual(r, at))
            },
        )
    };
    let (a, b) = (start(1, a), start(2, b));
    let endpoints = Endpoints {
        a: a.endpoint(),
        b: b.endpoint(),
    };
    assert!(at.set(endpoints).is_ok(), "set once");
    (a, b)
}

/// A DescribeTransactions answer: the asked id in `state` with `token`.
fn described(r: &Request, state: &str, token: FencingToken) -> Reply {
    fake_broker::describe_transactions(r, state, token.producer_id, token.producer_epoch)
}

/// A ListOffsets answer: `offset` for `t`/0.
fn stable_offset(r: &Request, offset: i64) -> Reply {
    use kafka_protocol::messages::list_offsets_response::{
        ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
    };
    use kafka_protocol::messages::{ListOffsetsResponse, TopicName};
    let p = ListOffsetsPartitionResponse::default()
        .with_partition_index(0)
        .with_offset(offset)
        .with_timestamp(-1)
        .with_leader_epoch(-1);
    let t = ListOffsetsTopicResponse::default()
        .with_name(TopicName("t".to_owned().into()))
        .with_partitions(vec![p]);
    Reply::of(r, &ListOffsetsResponse::default().with_topics(vec![t]))
}

/// A DescribeProducers answer for `t`/0: the producer of [`TOKEN`], its last
/// marker of `epoch`, nothing of it open.
fn last_marker(r: &Request, epoch: i32) -> Reply {
    producer_at(r, epoch, 0)
}

/// A DescribeProducers answer for `t`/0: the producer of [`TOKEN`] at
/// `epoch` with `last_sequence`, nothing of it open.
fn producer_at(r: &Request, epoch: i32, last_sequence: i32) -> Reply {
    use kafka_protocol::messages::describe_producers_response::{
        DescribeProducersResponse, PartitionResponse, ProducerState, TopicResponse,
    };
    use kafka_protocol::messages::{ProducerId, TopicName};
    let producer = ProducerState::default()
        .with_producer_id(ProducerId(TOKEN.producer_id))
        .with_producer_epoch(epoch)
        .with_last_sequence(last_sequence)
        .with_current_txn_start_offset(-1);
    let p = PartitionResponse::default()
        .with_partition_index(0)
        .with_active_producers(vec![producer]);
    let t = TopicResponse::default()
        .with_name(TopicName("t".to_owned().into()))
        .with_partitions(vec![p]);
    Reply::of(
        r,
        &DescribeProducersResponse::default().with_topics(vec![t]),
    )
}

/// The requests `broker` read, by name, ApiVersions left out; an EndTxn is
/// not told apart by its kind (see [`end_txns`]).
fn sent(broker: &FakeBroker) -> Vec<String> {
    broker
        .requests()
        .iter()
        .filter(|r| !r.is(ApiKey::ApiVersions))
        .map(|r| match ApiKey::try_from(r.api_key) {
            Ok(key) => format!("{key:?}"),
            Err(()) => format!("key {}", r.api_key),
        })
        .collect()
}

/// The transactional requests `broker` read, by name: [`sent`] without
/// the lookups (Metadata, FindCoordinator).
fn sent_txn(broker: &FakeBroker) -> Vec<String> {
    let mut requests = sent(broker);
    requests.retain(|k| k != "Metadata" && k != "FindCoordinator");
    requests
}

/// A log of the EndTxn requests a script answered: `true` for a commit.
#[derive(Clone, Default)]
struct EndTxns(std::sync::Arc<std::sync::Mutex<Vec<bool>>>);

impl EndTxns {
    /// Notes the EndTxn `r` and answers it with `code`.
    fn answer(&self, r: &Request, code: i16) -> Reply {
        let asked: kafka_protocol::messages::EndTxnRequest = match r.decode() {
            Ok(asked) => asked,
            Err(e) => return Reply::ScriptError(e.to_string()),
        };
        self.0.lock().unwrap().push(asked.committed);
        fake_broker::end_txn(r, code)
    }

    fn kinds(&self) -> Vec<&'static str> {
        let log = self.0.lock().unwrap();
        log.iter()
            .map(|c| if *c { "commit" } else { "abort" })
            .collect()
    }
}

/// A writer of [`TOKEN`] on a client of `bootstrap`.
fn writer(bootstrap: &FakeBroker) -> ProtocolLease {
    let mut settings = krabka_kafka::Settings::new(bootstrap.addr());
    settings.operation_timeout = Duration::from_secs(2);
    settings.connect_timeout = Duration::from_secs(2);
    let client = KafkaClient::new(&settings).unwrap();
    ProtocolLease::new(client, TOKEN, DEFAULT_MAX_BATCH)
}

/// One guarded write of one record to `t`/0 within `within`.
async fn write(lease: &mut ProtocolLease, within: Duration) -> std::result::Result<(), Outcome> {
    let deadline = Instant::now() + within;
    lease
        .transact(
            "r",
            "write_guarded",
            Write::commit(Content::Lease(vec![rec("k", Some("v"), &[])])),
            deadline,
        )
        .await
}

/// The error of a write that failed, and whether the epoch was dropped.
fn failed(outcome: std::result::Result<(), Outcome>) -> (Error, bool) {
    match outcome {
        Ok(()) => panic!("the write succeeded"),
        Err(Outcome::Keep(e)) => (e, false),
        Err(Outcome::Drop(e)) => (e, true),
    }
}

/// A stale coordinator: A accepts the transaction's partitions and its
/// batch, then answers its EndTxn NOT_COORDINATOR, and FindCoordinator (at
/// A, the bootstrap broker) names B from then on. B answers every EndTxn
/// without error, as a broker whose cache holds the id in CompleteCommit
/// does; `describe` is B's DescribeTransactions, `stable` A's ListOffsets.
fn stale_coordinator(
    describe: impl Fn(&Request) -> Reply + Send + Sync + 'static,
    stable: Option<i64>,
    marker: Option<i32>,
) -> (FakeBroker, FakeBroker) {
    two_brokers(
        Box::new(move |r, at| match r.key() {
            Some(ApiKey::FindCoordinator) if r.key_index > 0 => {
                Some(fake_broker::find_coordinator(r, &at.b))
            }
            Some(ApiKey::EndTxn) => Some(fake_broker::end_txn(r, 16)),
            Some(ApiKey::ListOffsets) => stable.map(|o| stable_offset(r, o)),
            Some(ApiKey::DescribeProducers) => marker.map(|e| last_marker(r, e)),
            _ => None,
        }),
        Box::new(move |r, _| match r.key() {
            Some(ApiKey::DescribeTransactions) => Some(describe(r)),
            _ => None,
        }),
    )
}

/// What A of [`stale_coordinator`] reads up to B's naming.
const A_UNTIL_MOVED: [&str; 6] = [
    "Metadata",
    "FindCoordinator",
    "AddPartitionsToTxn",
    "Produce",
    "EndTxn",
    "FindCoordinator",
];

/// Rows C6, C1 of the module table.
#[tokio::test]
async fn a_commit_the_new_coordinator_holds_open_is_sent_there() {
    let (a, b) = stale_coordinator(|r| described(r, "Ongoing", TOKEN), None, None);
    let mut lease = writer(&a);
    write(&mut lease, Duration::from_secs(2))
        .await
        .unwrap_or_else(|o| panic!("the write failed: {}", failed(Err(o)).0));
    assert_eq!(lease.state(), TxnState::Idle);
    assert_eq!(sent(&a), A_UNTIL_MOVED);
    assert_eq!(
        sent(&b),
        ["DescribeTransactions", "EndTxn"],
        "the commit goes to the broker that shows the transaction open"
    );
}

/// Rows C10 of the module table.
#[tokio::test]
async fn a_commit_after_the_epoch_moved_on_is_not_reported_committed() {
    let newer = FencingToken::new(TOKEN.producer_id, TOKEN.producer_epoch + 1);
    let (a, b) = stale_coordinator(move |r| described(r, "CompleteAbort", newer), None, None);
    let mut lease = writer(&a);
    let (e, dropped) = failed(write(&mut lease, Duration::from_secs(2)).await);
    assert!(dropped, "the term is over: {e}");
    assert!(e.means_fenced(), "{e}");
    // A's NOT_COORDINATOR does not say its log has no PrepareCommit.
    assert!(matches!(e, Error::OutcomeUnknown { .. }), "{e:?}");
    assert_eq!(sent(&a), A_UNTIL_MOVED);
    assert_eq!(sent(&b), ["DescribeTransactions"], "no EndTxn at B");
}

/// Rows C11 of the module table.
#[tokio::test]
async fn a_commit_nothing_proves_is_unknown_and_never_asked_of_the_new_coordinator() {
    type Describe = fn(&Request) -> Reply;
    let cases: [(&str, Describe, Option<i64>, Option<i32>); 6] = [
        (
            "the id unknown",
            |r| fake_broker::error_for(r, 105),
            None,
            None,
        ),
        (
            "an older epoch",
            |r| described(r, "CompleteCommit", FencingToken::new(11, 2)),
            None,
            None,
        ),
        ("Empty", |r| described(r, "Empty", TOKEN), None, None),
        (
            "CompleteAbort",
            |r| described(r, "CompleteAbort", TOKEN),
            None,
            None,
        ),
        // B's cache: the epoch's previous transaction committed. The
        // transaction's batch is still open (last stable offset 7).
        (
            "CompleteCommit, the batch still open",
            |r| described(r, "CompleteCommit", TOKEN),
            Some(7),
            None,
        ),
        // B's cache: the epoch's previous transaction committed. The
        // transaction's batch is closed, but by markers of the next epoch:
        // the coordinator bumped the epoch and aborted it (a successor's
        // InitProducerId, or the transaction timeout).
        (
            "CompleteCommit, the batch closed by a newer epoch's markers",
            |r| described(r, "CompleteCommit", TOKEN),
            Some(8),
            Some(i32::from(TOKEN.producer_epoch) + 1),
        ),
    ];
    for (case, describe, stable, marker) in cases {
        let (a, b) = stale_coordinator(describe, stable, marker);
        let mut lease = writer(&a);
        let (e, dropped) = failed(write(&mut lease, Duration::from_secs(2)).await);
        assert!(!dropped, "{case}: {e}");
        assert!(matches!(e, Error::OutcomeUnknown { .. }), "{case}: {e:?}");
        assert_eq!(lease.state(), TxnState::CommitPending, "{case}");
        let mut from_a = A_UNTIL_MOVED.map(str::to_owned).to_vec();
        if stable.is_some() {
            from_a.push("ListOffsets".into());
        }
        if marker.is_some() {
            from_a.push("DescribeProducers".into());
        }
        assert_eq!(sent(&a), from_a, "{case}");
        assert_eq!(sent(&b), ["DescribeTransactions"], "{case}: no EndTxn at B");
    }
}

/// Rows C7 of the module table.
#[tokio::test]
async fn a_commit_whose_markers_are_written_is_committed_without_an_end_txn() {
    // A wrote PrepareCommit and lost the partition before it answered; B
    // completed the commit, and the batch at 7 is below the last stable
    // offset.
    let epoch = Some(i32::from(TOKEN.producer_epoch));
    let (a, b) = stale_coordinator(|r| described(r, "CompleteCommit", TOKEN), Some(8), epoch);
    let mut lease = writer(&a);
    write(&mut lease, Duration::from_secs(2))
        .await
        .unwrap_or_else(|o| panic!("the write failed: {}", failed(Err(o)).0));
    assert_eq!(lease.state(), TxnState::Idle);
    let mut from_a = A_UNTIL_MOVED.map(str::to_owned).to_vec();
    from_a.push("ListOffsets".into());
    from_a.push("DescribeProducers".into());
    assert_eq!(sent(&a), from_a);
    assert_eq!(sent(&b), ["DescribeTransactions"]);
}

/// One broker, A, whose first AddPartitionsToTxn goes unanswered; its
/// DescribeTransactions is `describe`, its EndTxn answers `end_code`.
fn lost_add_partitions(
    describe: impl Fn(&Request) -> Reply + Send + Sync + 'static,
    end_code: i16,
    end_txns: &EndTxns,
) -> FakeBroker {
    let end_txns = end_txns.clone();
    let (a, _b) = two_brokers(
        Box::new(move |r, _| match r.key() {
            Some(ApiKey::AddPartitionsToTxn) if r.key_index == 0 => Some(Reply::Silence),
            Some(ApiKey::DescribeTransactions) => Some(describe(r)),
            Some(ApiKey::EndTxn) => Some(end_txns.answer(r, end_code)),
            _ => None,
        }),
        Box::new(|_, _| None),
    );
    a
}

/// The first write of [`lost_add_partitions`]: it fails, the transaction to
/// be aborted and pinned nowhere.
async fn lose_the_add_partitions_answer(lease: &mut ProtocolLease) {
    let (e, dropped) = failed(write(lease, Duration::from_millis(300)).await);
    assert!(!dropped && e.is_transient(), "{e}");
    assert_eq!(lease.state(), TxnState::AbortPending);
}

/// Rows W6, S2, A5, A2 of the module table.
#[tokio::test]
async fn an_abort_without_a_pin_goes_where_the_transaction_is_shown_open() {
    let end_txns = EndTxns::default();
    let a = lost_add_partitions(|r| described(r, "Ongoing", TOKEN), 0, &end_txns);
    let mut lease = writer(&a);
    lose_the_add_partitions_answer(&mut lease).await;
    aborts_then_writes(&a, &mut lease, &end_txns).await;
}

/// After [`lost_add_partitions`] left a transaction pinned nowhere: the
/// next write finds it shown open, aborts it there, then writes its own.
async fn aborts_then_writes(a: &FakeBroker, lease: &mut ProtocolLease, end_txns: &EndTxns) {
    write(lease, Duration::from_secs(2))
        .await
        .unwrap_or_else(|o| panic!("the write failed: {}", failed(Err(o)).0));
    assert_eq!(
        sent_txn(a),
        [
            "AddPartitionsToTxn",
            "DescribeTransactions",
            "EndTxn",
            "AddPartitionsToTxn",
            "Produce",
            "EndTxn"
        ]
    );
    assert_eq!(end_txns.kinds(), ["abort", "commit"]);
}

/// Rows W6, S2, A8 of the module table.
#[tokio::test]
async fn an_abort_without_a_pin_trusts_no_invalid_txn_state() {
    // A would answer an EndTxn(abort) INVALID_TXN_STATE ("nothing open"),
    // as a stale cache does; its DescribeTransactions shows nothing of the
    // epoch.
    let end_txns = EndTxns::default();
    let a = lost_add_partitions(|r| fake_broker::error_for(r, 105), 48, &end_txns);
    let mut lease = writer(&a);
    lose_the_add_partitions_answer(&mut lease).await;
    let (e, dropped) = failed(write(&mut lease, Duration::from_secs(2)).await);
    assert!(!dropped && e.is_transient(), "{e}");
    assert!(e.to_string().contains("could not be aborted yet"), "{e}");
    assert_eq!(lease.state(), TxnState::AbortPending);
    assert_eq!(
        sent_txn(&a),
        ["AddPartitionsToTxn", "DescribeTransactions"],
        "no EndTxn, and nothing of the second write"
    );
    assert!(end_txns.kinds().is_empty());
}

/// Rows W3, W5, W10, C1 of the module table.
#[tokio::test]
async fn the_healthy_path_sends_each_request_once_and_no_describe() {
    let (a, b) = two_brokers(Box::new(|_, _| None), Box::new(|_, _| None));
    let mut lease = writer(&a);
    write(&mut lease, Duration::from_secs(2))
        .await
        .unwrap_or_else(|o| panic!("the write failed: {}", failed(Err(o)).0));
    assert_eq!(lease.state(), TxnState::Idle);
    assert_eq!(
        sent(&a),
        [
            "Metadata",
            "FindCoordinator",
            "AddPartitionsToTxn",
            "Produce",
            "EndTxn"
        ]
    );
    assert!(sent(&b).is_empty());
}

/// Rows C11, S3, C7 of the module table.
#[tokio::test]
async fn a_commit_left_unknown_is_resolved_by_the_next_write_once_proven() {
    // The first DescribeTransactions at B knows nothing; the second shows
    // the commit completed, its batch below the last stable offset.
    let (a, b) = stale_coordinator(
        |r| match r.key_index {
            0 => fake_broker::error_for(r, 105),
            _ => described(r, "CompleteCommit", TOKEN),
        },
        Some(8),
        Some(i32::from(TOKEN.producer_epoch)),
    );
    let mut lease = writer(&a);
    let (e, _) = failed(write(&mut lease, Duration::from_secs(2)).await);
    assert!(matches!(e, Error::OutcomeUnknown { .. }), "{e:?}");
    assert_eq!(lease.state(), TxnState::CommitPending);
    write(&mut lease, Duration::from_secs(2))
        .await
        .unwrap_or_else(|o| panic!("the second write failed: {}", failed(Err(o)).0));
    assert_eq!(lease.resolved, Some(true));
    // The second transaction: accepted by B, so committed at B.
    assert_eq!(
        sent_txn(&b),
        [
            "DescribeTransactions",
            "DescribeTransactions",
            "AddPartitionsToTxn",
            "EndTxn"
        ]
    );
}

// ---------------------------------------------------------------------------
// The next transaction, opened ahead (the `ahead` module).
// ---------------------------------------------------------------------------

/// Opens the next transaction ahead on `t`/0 within `within`.
async fn open_ahead(lease: &mut ProtocolLease, within: Duration) {
    lease.open_ahead("r", "t", 0, Instant::now() + within).await;
}

/// Rows H1, W4, W10, C1 of the module table.
#[tokio::test]
async fn a_write_after_opening_ahead_is_one_produce_and_one_commit() {
    let end_txns = EndTxns::default();
    let log = end_txns.clone();
    let (a, _b) = two_brokers(
        Box::new(move |r, _| match r.key() {
            Some(ApiKey::EndTxn) => Some(log.answer(r, 0)),
            _ => None,
        }),
        Box::new(|_, _| None),
    );
    let mut lease = writer(&a);
    write(&mut lease, Duration::from_secs(2))
        .await
        .unwrap_or_else(|o| panic!("the write failed: {}", failed(Err(o)).0));
    open_ahead(&mut lease, Duration::from_secs(2)).await;
    assert_eq!(lease.state(), TxnState::Ahead);
    let before = sent_txn(&a).len();
    assert_eq!(before, 4, "{:?}", sent_txn(&a));
    write(&mut lease, Duration::from_secs(2))
        .await
        .unwrap_or_else(|o| panic!("the write failed: {}", failed(Err(o)).0));
    assert_eq!(lease.state(), TxnState::Idle);
    assert_eq!(
        sent_txn(&a)[before..],
        ["Produce", "EndTxn"],
        "the second write adds nothing itself"
    );
    assert_eq!(end_txns.kinds(), ["commit", "commit"]);
}

/// Rows H1, W2, W4 of the module table.
#[tokio::test]
async fn a_write_refused_before_sending_leaves_the_transaction_opened_ahead() {
    let (a, _b) = two_brokers(Box::new(|_, _| None), Box::new(|_, _| None));
    let mut lease = writer(&a);
    open_ahead(&mut lease, Duration::from_secs(2)).await;
    // Partition 5 of `t` does not exist: refused before anything is sent.
    let mut bad = rec("k", Some("v"), &[]);
    bad.partition = Some(5);
    let refused = lease
        .transact(
            "r",
            "write_guarded",
            Write::commit(Content::Lease(vec![bad])),
            Instant::now() + Duration::from_secs(2),
        )
        .await;
    let (e, dropped) = failed(refused);
    assert!(!dropped, "{e}");
    assert!(e.to_string().contains("does not exist"), "{e}");
    assert_eq!(lease.state(), TxnState::Ahead, "nothing to abort");
    write(&mut lease, Duration::from_secs(2))
        .await
        .unwrap_or_else(|o| panic!("the write failed: {}", failed(Err(o)).0));
    assert_eq!(
        sent_txn(&a),
        ["AddPartitionsToTxn", "Produce", "EndTxn"],
        "no abort, and the partition added once"
    );
}

/// Rows H2, S2, A5, A2 of the module table.
#[tokio::test]
async fn opening_ahead_without_an_answer_aborts_before_the_next_write() {
    let end_txns = EndTxns::default();
    let a = lost_add_partitions(|r| described(r, "Ongoing", TOKEN), 0, &end_txns);
    let mut lease = writer(&a);
    open_ahead(&mut lease, Duration::from_millis(300)).await;
    assert_eq!(lease.state(), TxnState::AbortPending);
    aborts_then_writes(&a, &mut lease, &end_txns).await;
}

/// Rows H4 of the module table.
#[tokio::test]
async fn nothing_is_opened_ahead_over_an_open_transaction() {
    let (a, _b) = two_brokers(Box::new(|_, _| None), Box::new(|_, _| None));
    let mut lease = writer(&a);
    lease.txn = Txn::CommitPending(Open::default());
    open_ahead(&mut lease, Duration::from_secs(2)).await;
    assert_eq!(lease.state(), TxnState::CommitPending);
    assert!(sent_txn(&a).is_empty());
}

/// A Produce answer for `t`/0 with `code`.
fn produced(r: &Request, code: i16) -> Reply {
    use kafka_protocol::messages::produce_response::{
        PartitionProduceResponse, TopicProduceResponse,
    };
    use kafka_protocol::messages::{ProduceResponse, TopicName};
    let p = PartitionProduceResponse::default()
        .with_base_offset(if code == 0 { 7 } else { -1 })
        .with_error_code(code);
    let t = TopicProduceResponse::default()
        .with_name(TopicName("t".to_owned().into()))
        .with_partition_responses(vec![p]);
    Reply::of(r, &ProduceResponse::default().with_responses(vec![t]))
}

/// A log of the base sequences of the Produce requests a script answered.
#[derive(Clone, Default)]
struct Sequences(std::sync::Arc<std::sync::Mutex<Vec<i32>>>);

impl Sequences {
    /// Notes the base sequence of the Produce `r` and answers it with
    /// `code`.
    fn answer(&self, r: &Request, code: i16) -> Reply {
        let asked: kafka_protocol::messages::ProduceRequest = match r.decode() {
            Ok(asked) => asked,
            Err(e) => return Reply::ScriptError(e.to_string()),
        };
        let Some(records) = asked
            .topic_data
            .first()
            .and_then(|t| t.partition_data.first())
            .and_then(|p| p.records.clone())
        else {
            return Reply::ScriptError("a Produce without a record batch".into());
        };
        // A v2 record batch's base sequence: bytes 53 to 57 of its header.
        let Some(Ok(header)) = records.get(53..57).map(<[u8; 4]>::try_from) else {
            return Reply::ScriptError("a record batch shorter than its header".into());
        };
        self.0.lock().unwrap().push(i32::from_be_bytes(header));
        produced(r, code)
    }

    fn seen(&self) -> Vec<i32> {
        self.0.lock().unwrap().clone()
    }
}

const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;

/// A leader whose Produce answers are `codes` in turn (then no error),
/// whose DescribeProducers shows [`TOKEN`]'s last sequence at `last`, and
/// whose EndTxn answers are logged: the writer, its log of EndTxn kinds
/// and of Produce sequences.
fn refusing(
    codes: &'static [i16],
    last: i32,
) -> (FakeBroker, FakeBroker, ProtocolLease, EndTxns, Sequences) {
    let (end_txns, sequences) = (EndTxns::default(), Sequences::default());
    let (ends, seqs) = (end_txns.clone(), sequences.clone());
    let (a, b) = two_brokers(
        Box::new(move |r, _| match r.key() {
            Some(ApiKey::Produce) => {
                Some(seqs.answer(r, codes.get(r.key_index).copied().unwrap_or(0)))
            }
            Some(ApiKey::EndTxn) => Some(ends.answer(r, 0)),
            Some(ApiKey::DescribeProducers) => {
                Some(producer_at(r, i32::from(TOKEN.producer_epoch), last))
            }
            _ => None,
        }),
        Box::new(|_, _| None),
    );
    let lease = writer(&a);
    (a, b, lease, end_txns, sequences)
}

async fn written(lease: &mut ProtocolLease) {
    write(lease, Duration::from_secs(2))
        .await
        .unwrap_or_else(|o| panic!("the write failed: {}", failed(Err(o)).0));
}

const REFUSED: i16 = OUT_OF_ORDER_SEQUENCE_NUMBER;

/// Rows W13 of the module table.
#[tokio::test]
async fn a_refused_sequence_is_aborted_and_the_batch_sent_again_as_it_was() {
    // The second write's batch (sequence 1) is refused once; the leader
    // shows sequence 0 as the epoch's last: the batch was not written.
    let (a, _b, mut lease, end_txns, sequences) = refusing(&[0, REFUSED], 0);
    written(&mut lease).await;
    written(&mut lease).await;
    assert_eq!(lease.state(), TxnState::Idle);
    assert_eq!(end_txns.kinds(), ["commit", "abort", "commit"]);
    assert_eq!(
        sent_txn(&a),
        [
            "AddPartitionsToTxn",
            "Produce",
            "EndTxn",
            "AddPartitionsToTxn",
            "Produce",
            "EndTxn",
            "DescribeProducers",
            "AddPartitionsToTxn",
            "Produce",
            "EndTxn"
        ]
    );
    assert_eq!(sequences.seen(), [0, 1, 1], "sent again with its sequence");
    written(&mut lease).await;
    assert_eq!(sequences.seen(), [0, 1, 1, 2]);
}

/// Rows W13 of the module table.
#[tokio::test]
async fn a_refused_batch_an_earlier_attempt_wrote_is_sent_again_after_it() {
    // The leader shows the refused batch's own sequence (1) as the epoch's
    // last: an earlier attempt wrote it, and the abort ended it. Sent again
    // as sequence 1 it would be answered as a duplicate and commit nothing.
    let (_a, _b, mut lease, end_txns, sequences) = refusing(&[0, REFUSED], 1);
    written(&mut lease).await;
    written(&mut lease).await;
    assert_eq!(end_txns.kinds(), ["commit", "abort", "commit"]);
    assert_eq!(sequences.seen(), [0, 1, 2]);
}

/// Rows W13 (dropped) of the module table.
#[tokio::test]
async fn a_refused_sequence_the_leader_cannot_place_ends_the_term() {
    let (_a, _b, mut lease, end_txns, sequences) = refusing(&[0, REFUSED], 7);
    written(&mut lease).await;
    let (e, dropped) = failed(write(&mut lease, Duration::from_secs(2)).await);
    assert!(dropped, "{e}");
    assert!(matches!(e, Error::Fatal { .. }), "{e:?}");
    assert!(e.to_string().contains("last sequence at 7"), "{e}");
    assert_eq!(end_txns.kinds(), ["commit", "abort"]);
    assert_eq!(sequences.seen(), [0, 1]);
}

/// Rows W13, W14 of the module table.
#[tokio::test]
async fn a_sequence_refused_twice_in_one_write_ends_the_term() {
    let (_a, _b, mut lease, end_txns, sequences) = refusing(&[0, REFUSED, REFUSED], 0);
    written(&mut lease).await;
    let (e, dropped) = failed(write(&mut lease, Duration::from_secs(2)).await);
    assert!(dropped, "the epoch's writer is dropped: {e}");
    assert!(matches!(e, Error::Fatal { .. }), "{e:?}");
    assert!(e.to_string().contains("OutOfOrderSequenceNumber"), "{e}");
    assert_eq!(
        end_txns.kinds(),
        ["commit", "abort"],
        "one abort, before the second try"
    );
    assert_eq!(sequences.seen(), [0, 1, 1]);
}

// ---------------------------------------------------------------------------
// A data partition whose leader does not answer (the `settle` module).
// ---------------------------------------------------------------------------

/// Broker A leads `t`/0 (the role's state partition) and coordinates; B
/// leads `d`/0 (a data partition) and runs `b`. A logs its EndTxns.
fn silent_data_leader(b: Script) -> (FakeBroker, FakeBroker, EndTxns) {
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::{BrokerId, MetadataResponse, TopicName};
    let end_txns = EndTxns::default();
    let log = end_txns.clone();
    let (a, b) = two_brokers(
        Box::new(move |r, at| match r.key() {
            Some(ApiKey::Metadata) => {
                let brokers = [&at.a, &at.b]
                    .iter()
                    .map(|e| {
                        MetadataResponseBroker::default()
                            .with_node_id(BrokerId(e.node_id))
                            .with_host(e.host.clone().into())
                            .with_port(e.port)
                    })
                    .collect();
                let topic = |name: &str, leader: &Endpoint| {
                    MetadataResponseTopic::default()
                        .with_name(Some(TopicName(name.to_owned().into())))
                        .with_partitions(vec![MetadataResponsePartition::default()
                            .with_leader_id(BrokerId(leader.node_id))])
                };
                Some(Reply::of(
                    r,
                    &MetadataResponse::default()
                        .with_brokers(brokers)
                        .with_topics(vec![topic("t", &at.a), topic("d", &at.b)]),
                ))
            }
            Some(ApiKey::EndTxn) => Some(log.answer(r, 0)),
            _ => None,
        }),
        b,
    );
    (a, b, end_txns)
}

/// One record for the data partition `d`/0.
fn data_record() -> OutRecord {
    OutRecord {
        topic: "d".into(),
        ..rec("k", Some("v"), &[])
    }
}

/// One guarded write of [`data_record`] within 400 ms.
async fn data_write(lease: &mut ProtocolLease) -> std::result::Result<(), Outcome> {
    let deadline = Instant::now() + Duration::from_millis(400);
    lease
        .transact(
            "r",
            "write_guarded",
            Write::commit(Content::Lease(vec![data_record()])),
            deadline,
        )
        .await
}

/// One lease write (a record to `t`/0) within `within`.
async fn lease_write(
    lease: &mut ProtocolLease,
    within: Duration,
) -> std::result::Result<(), Outcome> {
    let deadline = Instant::now() + within;
    lease
        .transact(
            "r",
            "write_lease",
            Write::commit(Content::Lease(vec![rec("k", Some("v"), &[])])),
            deadline,
        )
        .await
}

/// A write to a partition whose leader never answers a connection's
/// handshake sends nothing there, so nothing of it can land later: it
/// fails at once with its transaction aborted, and the lease writes of the
/// term go on, round after round.
///
/// Rows W12, A2 of the module table.
#[tokio::test]
async fn a_data_leader_never_reached_costs_the_write_not_the_lease() {
    let (a, _b, end_txns) = silent_data_leader(Box::new(|_, _| Some(Reply::Silence)));
    let mut lease = writer(&a);
    for round in 0..3 {
        let written = data_write(&mut lease).await;
        let (e, dropped) = failed(written);
        assert!(!dropped, "round {round}: {e}");
        assert!(e.is_transient(), "round {round}: {e}");
        let msg = e.to_string();
        assert!(
            msg.contains("could not be reached") && msg.contains("\"d\"/0"),
            "round {round}: {msg}"
        );
        assert!(
            lease.unanswered().is_empty(),
            "round {round}: nothing was sent"
        );
        let renewed = lease_write(&mut lease, Duration::from_secs(2)).await;
        assert!(renewed.is_ok(), "round {round}: the lease write failed");
    }
    // Each failed write was aborted (again before the lease write when
    // its own deadline cut the abort short), each lease committed.
    let kinds = end_txns.kinds();
    let rounds: Vec<&[&str]> = kinds.split_inclusive(|k| *k == "commit").collect();
    assert_eq!(rounds.len(), 3, "{kinds:?}");
    for round in rounds {
        assert!(
            round.len() >= 2 && round[..round.len() - 1].iter().all(|k| *k == "abort"),
            "{kinds:?}"
        );
    }
}

/// A batch sent to a leader that went silent after its handshake may land
/// at any time: the transaction holding it is never aborted with the
/// term's epoch, neither by a lease write (which fails within half its
/// time, naming the partition) nor by the release (which leaves it to the
/// coordinator's bumped abort).
///
/// Rows W11, S1, R2 of the module table.
#[tokio::test]
async fn a_batch_sent_and_unanswered_is_never_aborted_with_the_epoch() {
    let (a, _b, end_txns) = silent_data_leader(Box::new(|r, _| match r.key() {
        Some(ApiKey::ApiVersions) => None,
        _ => Some(Reply::Silence),
    }));
    let mut lease = writer(&a);
    let written = data_write(&mut lease).await;
    let (e, _) = failed(written);
    assert!(e.to_string().contains("not acknowledged in time"), "{e}");
    assert_eq!(lease.unanswered().len(), 1);

    let started = Instant::now();
    let (e, dropped) = failed(lease_write(&mut lease, Duration::from_secs(1)).await);
    assert!(!dropped && e.is_transient(), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("\"d\"/0") && msg.contains("not answered yet"),
        "{msg}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "the settling took more than half the lease write's time: {:?}",
        started.elapsed()
    );
    lease.release("r".into(), Duration::from_millis(500)).await;
    assert_eq!(end_txns.kinds(), Vec::<&str>::new(), "no abort was sent");
}

// ---------------------------------------------------------------------------
// Rows of the table the tests above leave out.
// ---------------------------------------------------------------------------

/// A writer on [`two_brokers`] whose A logs its EndTxns and answers them
/// `end_code`, or not at all with `None`.
fn logging_end_txns(end_code: Option<i16>) -> (FakeBroker, FakeBroker, EndTxns) {
    let end_txns = EndTxns::default();
    let log = end_txns.clone();
    let (a, b) = two_brokers(
        Box::new(move |r, _| match (r.key(), end_code) {
            (Some(ApiKey::EndTxn), Some(code)) => Some(log.answer(r, code)),
            (Some(ApiKey::EndTxn), None) => Some(Reply::Silence),
            _ => None,
        }),
        Box::new(|_, _| None),
    );
    (a, b, end_txns)
}

/// Row W9: a batch over `message.max.bytes` is refused before it is sent,
/// naming its size, and the transaction it was added to is aborted.
#[tokio::test]
async fn a_batch_over_the_largest_is_refused_unsent_and_its_transaction_aborted() {
    let (a, _b, end_txns) = logging_end_txns(Some(0));
    let mut lease = writer(&a);
    lease.max_batch = 10;
    let (e, dropped) = failed(write(&mut lease, Duration::from_secs(2)).await);
    assert!(!dropped, "{e}");
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    assert!(e.to_string().contains("over message.max.bytes (10)"), "{e}");
    assert_eq!(lease.state(), TxnState::Idle);
    assert_eq!(sent_txn(&a), ["AddPartitionsToTxn", "EndTxn"]);
    assert_eq!(end_txns.kinds(), ["abort"]);
}

/// Row C2: an EndTxn(commit) without an answer leaves the outcome unknown,
/// and the commit pending for the next write.
#[tokio::test]
async fn a_commit_without_an_answer_is_unknown_and_pending() {
    let (a, _b, _end_txns) = logging_end_txns(None);
    let mut lease = writer(&a);
    let (e, dropped) = failed(write(&mut lease, Duration::from_millis(300)).await);
    assert!(!dropped, "{e}");
    assert!(matches!(e, Error::OutcomeUnknown { .. }), "{e:?}");
    assert!(e.to_string().contains("no answer in time"), "{e}");
    assert_eq!(lease.state(), TxnState::CommitPending);
}

/// Row C3: the pin's INVALID_TXN_STATE to a commit says nothing was open:
/// the write fails with it, and the writer is idle.
#[tokio::test]
async fn a_commit_the_pin_finds_nothing_open_for_fails_and_leaves_the_writer_idle() {
    let (a, _b, end_txns) = logging_end_txns(Some(48));
    let mut lease = writer(&a);
    let (e, dropped) = failed(write(&mut lease, Duration::from_secs(2)).await);
    assert!(!dropped, "{e}");
    assert!(e.is_transient(), "{e:?}");
    assert_eq!(lease.state(), TxnState::Idle);
    assert_eq!(end_txns.kinds(), ["commit"]);
}

/// Row W15: a Produce fenced (INVALID_PRODUCER_EPOCH) ends the term.
#[tokio::test]
async fn a_produce_fenced_drops_the_writer() {
    let (a, _b) = two_brokers(
        Box::new(|r, _| match r.key() {
            Some(ApiKey::Produce) => Some(produced(r, 47)),
            _ => None,
        }),
        Box::new(|_, _| None),
    );
    let mut lease = writer(&a);
    let (e, dropped) = failed(write(&mut lease, Duration::from_secs(2)).await);
    assert!(dropped, "{e}");
    assert!(e.means_fenced(), "{e:?}");
}

/// Row W1: records that cannot be placed, with a transaction open (left
/// open by an earlier write), abort that transaction: nothing of it
/// commits later.
#[tokio::test]
async fn a_write_refused_before_sending_aborts_an_open_transaction() {
    let (a, _b, end_txns) = logging_end_txns(Some(0));
    let mut lease = writer(&a);
    let left_open = Write {
        content: Content::Lease(vec![rec("k", Some("v"), &[])]),
        end: End::LeaveOpen,
    };
    lease
        .transact(
            "r",
            "write_lease",
            left_open,
            Instant::now() + Duration::from_secs(2),
        )
        .await
        .unwrap_or_else(|o| panic!("the write failed: {}", failed(Err(o)).0));
    assert_eq!(lease.state(), TxnState::Open);
    let mut bad = rec("k", Some("v"), &[]);
    bad.partition = Some(5);
    let refused = Write::commit(Content::Lease(vec![bad]));
    let deadline = Instant::now() + Duration::from_secs(2);
    let (e, dropped) = failed(
        lease
            .transact("r", "write_guarded", refused, deadline)
            .await,
    );
    assert!(!dropped, "{e}");
    assert!(e.to_string().contains("does not exist"), "{e}");
    assert_eq!(lease.state(), TxnState::Idle);
    assert_eq!(end_txns.kinds(), ["abort"]);
}

/// Rows A6 then W3: a transaction pinned nowhere that the coordinator
/// shows aborted, with no record of it sent, is done with: the write goes
/// on without an EndTxn for it.
#[tokio::test]
async fn an_abort_the_coordinator_shows_done_sends_no_end_txn() {
    let end_txns = EndTxns::default();
    let a = lost_add_partitions(|r| described(r, "CompleteAbort", TOKEN), 0, &end_txns);
    let mut lease = writer(&a);
    lose_the_add_partitions_answer(&mut lease).await;
    written(&mut lease).await;
    assert_eq!(
        sent_txn(&a),
        [
            "AddPartitionsToTxn",
            "DescribeTransactions",
            "AddPartitionsToTxn",
            "Produce",
            "EndTxn"
        ]
    );
    assert_eq!(end_txns.kinds(), ["commit"]);
}

/// Row A7: a transaction to abort whose coordinator shows a newer epoch
/// ends the term, fenced, without an EndTxn.
#[tokio::test]
async fn an_abort_the_coordinator_shows_superseded_drops_the_writer() {
    let newer = FencingToken::new(TOKEN.producer_id, TOKEN.producer_epoch + 1);
    let end_txns = EndTxns::default();
    let a = lost_add_partitions(move |r| described(r, "Ongoing", newer), 0, &end_txns);
    let mut lease = writer(&a);
    lose_the_add_partitions_answer(&mut lease).await;
    let (e, dropped) = failed(write(&mut lease, Duration::from_secs(2)).await);
    assert!(dropped && e.means_fenced(), "{e:?}");
    assert!(end_txns.kinds().is_empty());
}

/// Rows H5, H6 and R1: a supersede aborts a transaction opened ahead and
/// nothing else; the release of an idle writer sends nothing.
#[tokio::test]
async fn only_a_transaction_opened_ahead_is_aborted_before_a_supersede() {
    let (a, _b, end_txns) = logging_end_txns(Some(0));
    let mut lease = writer(&a);
    let deadline = Instant::now() + Duration::from_secs(2);
    assert!(lease.abort_ahead("r", deadline).await.is_ok());
    assert!(sent_txn(&a).is_empty(), "H6: nothing to abort");
    open_ahead(&mut lease, Duration::from_secs(2)).await;
    assert_eq!(lease.state(), TxnState::Ahead);
    assert!(lease.abort_ahead("r", deadline).await.is_ok());
    assert_eq!(lease.state(), TxnState::Idle);
    assert_eq!(end_txns.kinds(), ["abort"]);
    let before = sent_txn(&a).len();
    lease.release("r".into(), Duration::from_secs(1)).await;
    assert_eq!(sent_txn(&a).len(), before, "R1: nothing sent");
}
