//! EndTxn pinned to the coordinator that accepted the transaction, and the
//! DescribeTransactions that says where the coordinator is now, against
//! two scripted fake brokers: A (the bootstrap broker) and B.
//!
//! Run with `cargo test -p krabka-kafka --features fake-broker` (without
//! the feature the file is empty).

#![cfg(feature = "fake-broker")]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kafka_protocol::messages::describe_transactions_response::TransactionState;
use kafka_protocol::messages::{ApiKey, DescribeTransactionsResponse, ProducerId, TransactionalId};
use krabka_kafka::fake_broker::{end_txn, error_for, find_coordinator, FakeBroker, Reply, Request};
use krabka_kafka::{deadline_in, Client, ProducerEpoch, Settings, TxnError};

/// The transactional id of every test.
const ID: &str = "billing-role";
/// The epoch of every test.
const TOKEN: ProducerEpoch = ProducerEpoch::new(4242, 7);

/// A: answers FindCoordinator naming B, and nothing else. B answers with
/// `b`.
fn a_names_b(b: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> (FakeBroker, FakeBroker) {
    let b = FakeBroker::start(move |r| match r.key() {
        Some(ApiKey::ApiVersions) => Reply::Default,
        _ => b(r),
    });
    let named = Arc::new(OnceLock::new());
    named.set(b.endpoint()).expect("set once");
    let a = FakeBroker::start(move |r| match r.key() {
        Some(ApiKey::ApiVersions) => Reply::Default,
        Some(ApiKey::FindCoordinator) => find_coordinator(r, named.get().expect("set")),
        _ => Reply::ScriptError(format!("A: unexpected api key {}", r.api_key)),
    });
    (a, b)
}

fn client(bootstrap: &FakeBroker) -> Client {
    let mut settings = Settings::new(bootstrap.addr());
    settings.operation_timeout = Duration::from_secs(2);
    settings.connect_timeout = Duration::from_secs(2);
    Client::new(&settings).expect("valid settings")
}

/// How many requests of `key` `broker` has read.
fn count(broker: &FakeBroker, key: ApiKey) -> usize {
    broker.requests().iter().filter(|r| r.is(key)).count()
}

#[tokio::test]
async fn add_partitions_names_the_coordinator_that_accepted() {
    let (a, b) = a_names_b(|r| error_for(r, 0));
    let c = client(&a);
    let at = c
        .add_partitions(
            ID,
            TOKEN,
            &[("t".to_owned(), vec![0])],
            deadline_in(Duration::from_secs(2)),
        )
        .await
        .expect("accepted");
    assert_eq!(at, b.addr());
    assert_eq!(count(&b, ApiKey::AddPartitionsToTxn), 1);
}

#[tokio::test]
async fn a_pinned_end_txn_goes_only_to_the_pin() {
    let (a, b) = a_names_b(|r| end_txn(r, 0));
    let c = client(&a);
    let deadline = deadline_in(Duration::from_secs(2));
    // Pinned to A, while the coordinator is B: nothing is sent.
    match c
        .end_txn_pinned(ID, TOKEN, true, Some(&a.addr()), deadline)
        .await
    {
        Err(TxnError::Moved(why)) => {
            for part in ["EndTxn(commit)", &a.addr(), &b.addr(), "nothing was sent"] {
                assert!(why.contains(part), "{part:?} is not in: {why}");
            }
        }
        other => panic!("expected TxnError::Moved, got {other:?}"),
    }
    assert_eq!(count(&a, ApiKey::EndTxn) + count(&b, ApiKey::EndTxn), 0);
    // Pinned to B, the coordinator: sent there.
    c.end_txn_pinned(ID, TOKEN, false, Some(&b.addr()), deadline)
        .await
        .expect("answered");
    assert_eq!(count(&b, ApiKey::EndTxn), 1);
    // Unpinned: wherever the coordinator is.
    c.end_txn(ID, TOKEN, true, deadline)
        .await
        .expect("answered");
    assert_eq!(count(&b, ApiKey::EndTxn), 2);
}

/// A DescribeTransactions answer: [`ID`] `Ongoing` with [`TOKEN`].
fn ongoing(r: &Request) -> Reply {
    let state = TransactionState::default()
        .with_transactional_id(TransactionalId(ID.to_owned().into()))
        .with_transaction_state("Ongoing".to_owned().into())
        .with_transaction_timeout_ms(30_000)
        .with_transaction_start_time_ms(5)
        .with_producer_id(ProducerId(TOKEN.producer_id))
        .with_producer_epoch(TOKEN.producer_epoch);
    Reply::of(
        r,
        &DescribeTransactionsResponse::default().with_transaction_states(vec![state]),
    )
}

#[tokio::test]
async fn describe_at_coordinator_says_where_it_asked() {
    let (a, b) = a_names_b(|r| match r.key_index {
        0 => ongoing(r),
        1 => error_for(r, 105),
        2 => error_for(r, 16),
        _ => ongoing(r),
    });
    let c = client(&a);
    let deadline = deadline_in(Duration::from_secs(2));
    let (at, d) = c
        .describe_at_coordinator(ID, deadline)
        .await
        .expect("described");
    assert_eq!(at, b.addr());
    let d = d.expect("known");
    assert_eq!((d.state.as_str(), d.producer), ("Ongoing", TOKEN));
    assert_eq!(d.timeout_ms, 30_000);
    let (at, d) = c
        .describe_at_coordinator(ID, deadline)
        .await
        .expect("described");
    assert_eq!((at, d), (b.addr(), None), "TRANSACTIONAL_ID_NOT_FOUND");
    // NOT_COORDINATOR: a retry, and the coordinator is found again.
    match c.describe_at_coordinator(ID, deadline).await {
        Err(TxnError::Retry(why)) => assert!(
            why.contains("NOT_COORDINATOR") || why.contains("16"),
            "{why}"
        ),
        other => panic!("expected TxnError::Retry, got {other:?}"),
    }
    assert_eq!(count(&a, ApiKey::FindCoordinator), 1);
    c.describe_at_coordinator(ID, deadline)
        .await
        .expect("described");
    assert_eq!(count(&a, ApiKey::FindCoordinator), 2);
}
