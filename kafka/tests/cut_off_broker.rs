//! A broker cut off from its peers and from the controller, while its
//! clients still reach it: the controller moves its partitions and its
//! transaction coordinators after the broker session, and the broker goes on
//! answering as what it was (it names itself leader and coordinator, reads
//! come back from its stale log, a Produce waits for replicas that never
//! follow, the transaction it cannot end is CONCURRENT_TRANSACTIONS). Each
//! test scripts that broker as `stale` and the one the cluster moved to as
//! `fresh`, with `stale` first in the bootstrap list, and checks that the
//! client gets to `fresh` without waiting for the cut to heal.
//!
//! Real time. Run with `cargo test -p krabka-kafka --features fake-broker`.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use krabka_kafka::client::retry::{self, Backoff, Tried};
use krabka_kafka::client::LEADER_MAX_AGE;
use krabka_kafka::fake_broker::{
    error_for, find_coordinator, metadata_at_epoch, Endpoint, FakeBroker, Reply, Request,
};
use krabka_kafka::{deadline_in, Client, ProducerEpoch, Settings};
use tokio::time::Instant;

/// The transactional id of every test.
const ID: &str = "billing-role";
/// The data topic of every test (one partition).
const TOPIC: &str = "data";
const REQUEST_TIMED_OUT: i16 = 7;
const CONCURRENT_TRANSACTIONS: i16 = 51;

/// A client of `stale` then `fresh`.
fn client(stale: &FakeBroker, fresh: &FakeBroker) -> Client {
    let mut settings = Settings::new(format!("{},{}", stale.addr(), fresh.addr()));
    settings.operation_timeout = Duration::from_secs(10);
    settings.connect_timeout = Duration::from_secs(2);
    settings.request_timeout = Duration::from_secs(2);
    Client::new(&settings).expect("valid settings")
}

/// How many requests of `key` `broker` has read.
fn count(broker: &FakeBroker, key: ApiKey) -> usize {
    broker.requests().iter().filter(|r| r.is(key)).count()
}

/// A broker that names itself the leader of [`TOPIC`]/0 at `epoch` and
/// coordinator of every id, and answers everything else with `rest`.
fn claiming(epoch: i32, rest: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> FakeBroker {
    let me: Arc<OnceLock<Endpoint>> = Arc::default();
    let endpoint = Arc::clone(&me);
    let broker = FakeBroker::start(move |req| match (req.key(), endpoint.get()) {
        (Some(ApiKey::Metadata), Some(me)) => metadata_at_epoch(req, TOPIC, &[me], epoch),
        (Some(ApiKey::FindCoordinator), Some(me)) => find_coordinator(req, me),
        (Some(ApiKey::ApiVersions), _) => Reply::Default,
        _ => rest(req),
    });
    me.set(broker.endpoint()).expect("set once");
    broker
}

/// A Produce answered with no error.
fn written(req: &Request) -> Reply {
    match req.key() {
        Some(ApiKey::Produce) => error_for(req, 0),
        _ => Reply::ScriptError(format!("unexpected key {}", req.api_key)),
    }
}

async fn produce(c: &Client, within: Duration) -> Result<i64, krabka_kafka::TxnError> {
    c.produce(
        ID,
        TOPIC,
        0,
        bytes::Bytes::from_static(b"batch"),
        deadline_in(within),
    )
    .await
}

/// Reads from a cut-off leader come back without an error, so only the age
/// of the cached leader gets the client off it: past [`LEADER_MAX_AGE`],
/// Metadata is asked again at the other brokers first. An answer naming an
/// older leader epoch than one seen (the cut-off broker's own view) is not
/// taken.
#[tokio::test]
async fn a_leader_the_cluster_moved_is_left_once_its_metadata_ages() {
    let stale = claiming(7, written);
    let fresh = claiming(8, written);
    let c = client(&stale, &fresh);

    produce(&c, Duration::from_secs(2))
        .await
        .expect("written at the first leader named");
    assert_eq!(
        count(&stale, ApiKey::Produce),
        1,
        "the first answer is stale's"
    );

    tokio::time::sleep(LEADER_MAX_AGE + Duration::from_millis(100)).await;
    produce(&c, Duration::from_secs(2))
        .await
        .expect("written at the leader the other broker names");
    assert_eq!(count(&fresh, ApiKey::Metadata), 1, "asked first once aged");
    assert_eq!(count(&fresh, ApiKey::Produce), 1);
    assert_eq!(count(&stale, ApiKey::Produce), 1, "stale left");

    // Aged again: the look avoids the cached leader, so stale answers
    // first, with its older epoch, which is not taken.
    tokio::time::sleep(LEADER_MAX_AGE + Duration::from_millis(100)).await;
    produce(&c, Duration::from_secs(2))
        .await
        .expect("written at the leader of the newest epoch");
    assert_eq!(count(&stale, ApiKey::Metadata), 2, "stale asked first");
    assert_eq!(
        count(&fresh, ApiKey::Produce),
        2,
        "its older epoch not taken"
    );
    assert_eq!(count(&stale, ApiKey::Produce), 1);

    // Within the age, no Metadata at all.
    produce(&c, Duration::from_secs(2)).await.expect("written");
    assert_eq!(
        count(&stale, ApiKey::Metadata) + count(&fresh, ApiKey::Metadata),
        3
    );
}

/// A Produce that waited for replicas in vain (REQUEST_TIMED_OUT) may have
/// been written, and is sent again with its sequence: at the leader the
/// other brokers name, not at the same broker for as long as it is cut off.
#[tokio::test]
async fn a_produce_whose_replicas_did_not_follow_asks_the_other_brokers_for_the_leader() {
    let stale = claiming(3, |req| match req.key() {
        Some(ApiKey::Produce) => error_for(req, REQUEST_TIMED_OUT),
        _ => Reply::ScriptError(format!("unexpected key {}", req.api_key)),
    });
    let fresh = claiming(4, written);
    let c = client(&stale, &fresh);

    let tried = retry::retry(
        deadline_in(Duration::from_secs(3)),
        Backoff::TRANSACTION,
        || produce(&c, Duration::from_secs(3)),
    )
    .await;
    assert!(matches!(tried, Tried::Done(_)), "{tried:?}");
    assert_eq!(
        count(&stale, ApiKey::Produce),
        1,
        "sent once to the cut-off leader"
    );
    assert_eq!(
        count(&fresh, ApiKey::Metadata),
        1,
        "the other broker asked first"
    );
    assert_eq!(count(&fresh, ApiKey::Produce), 1);
}

/// CONCURRENT_TRANSACTIONS to AddPartitionsToTxn for two seconds without a
/// break: the coordinator is looked up again at the other brokers first (as
/// for InitProducerId), and the partitions are added where they name.
#[tokio::test]
async fn a_coordinator_busy_adding_partitions_for_seconds_is_looked_up_again_elsewhere() {
    let stale = claiming(1, |req| match req.key() {
        Some(ApiKey::AddPartitionsToTxn) => error_for(req, CONCURRENT_TRANSACTIONS),
        _ => Reply::ScriptError(format!("unexpected key {}", req.api_key)),
    });
    let fresh = claiming(2, |req| match req.key() {
        Some(ApiKey::AddPartitionsToTxn) => error_for(req, 0),
        _ => Reply::ScriptError(format!("unexpected key {}", req.api_key)),
    });
    let c = client(&stale, &fresh);
    let token = ProducerEpoch::new(4242, 7);
    let partitions = vec![(TOPIC.to_owned(), vec![0])];

    let started = Instant::now();
    let deadline = deadline_in(Duration::from_secs(6));
    let tried = retry::retry(deadline, Backoff::TRANSACTION, || {
        c.add_partitions(ID, token, &partitions, deadline)
    })
    .await;
    let took = started.elapsed();
    match tried {
        Tried::Done(at) => assert_eq!(at, fresh.addr()),
        other => panic!("expected the partitions added at fresh, got {other:?}"),
    }
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(4),
        "looked up again after about two seconds of CONCURRENT_TRANSACTIONS: {took:?}"
    );
    assert_eq!(
        count(&stale, ApiKey::FindCoordinator),
        1,
        "not asked first again"
    );
    assert_eq!(count(&fresh, ApiKey::FindCoordinator), 1);
    assert_eq!(count(&fresh, ApiKey::AddPartitionsToTxn), 1);
}
