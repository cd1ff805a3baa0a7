//! The group coordinator of a consumer group, against scripted fake
//! brokers: found with FindCoordinator of the group key type, cached apart
//! from the transaction coordinator of a transactional id of the same
//! name, and found again when it says it moved.
//!
//! Run with `cargo test -p krabka-kafka --features fake-broker` (without
//! the feature the file is empty).

#![cfg(feature = "fake-broker")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnResponse, ApiKey, FindCoordinatorRequest, OffsetFetchRequest,
    OffsetFetchResponse,
};
use kafka_protocol::protocol::StrBytes;
use krabka_kafka::fake_broker::{find_coordinator, Endpoint, FakeBroker, Reply, Request};
use krabka_kafka::{deadline_in, Client, Committed, ProducerEpoch, Settings};

/// The transactional id and the consumer group: one name for both.
const NAME: &str = "billing";
/// FindCoordinator's key type of a consumer group.
const GROUP: i8 = 0;

/// An OffsetFetch answer (v8 and up: by group) of `offset` for every
/// partition asked, or the group-level `error_code`.
fn offsets(request: &Request, error_code: i16, offset: i64) -> Reply {
    let asked: OffsetFetchRequest = match request.decode() {
        Ok(asked) => asked,
        Err(e) => return Reply::ScriptError(e.to_string()),
    };
    if request.api_version < 8 {
        return Reply::ScriptError(format!("OffsetFetch v{}", request.api_version));
    }
    let groups = asked
        .groups
        .into_iter()
        .map(|g| {
            let topics = g
                .topics
                .unwrap_or_default()
                .into_iter()
                .map(|t| {
                    let partitions = t
                        .partition_indexes
                        .iter()
                        .map(|&p| {
                            OffsetFetchResponsePartitions::default()
                                .with_partition_index(p)
                                .with_committed_offset(offset)
                                .with_committed_leader_epoch(-1)
                                .with_metadata(Some(StrBytes::from_static_str("m")))
                        })
                        .collect();
                    OffsetFetchResponseTopics::default()
                        .with_name(t.name)
                        .with_partitions(partitions)
                })
                .collect();
            OffsetFetchResponseGroup::default()
                .with_group_id(g.group_id)
                .with_topics(topics)
                .with_error_code(error_code)
        })
        .collect();
    Reply::of(request, &OffsetFetchResponse::default().with_groups(groups))
}

fn answers_versions(r: &Request, rest: impl Fn(&Request) -> Reply) -> Reply {
    match r.key() {
        Some(ApiKey::ApiVersions) => Reply::Default,
        _ => rest(r),
    }
}

#[tokio::test]
async fn a_groups_coordinator_is_its_own_and_found_again_when_it_moves() {
    // B: the transaction coordinator of "billing".
    let b = FakeBroker::start(|r| {
        answers_versions(r, |r| match r.key() {
            Some(ApiKey::AddOffsetsToTxn) => {
                Reply::of(r, &AddOffsetsToTxnResponse::default().with_error_code(0))
            }
            _ => Reply::ScriptError(format!("B: unexpected api key {}", r.api_key)),
        })
    });
    // C: the group coordinator first named, which says it no longer is.
    let c = FakeBroker::start(|r| {
        answers_versions(r, |r| match r.key() {
            Some(ApiKey::OffsetFetch) => offsets(r, 16, -1), // NOT_COORDINATOR
            _ => Reply::ScriptError(format!("C: unexpected api key {}", r.api_key)),
        })
    });
    // D: the group coordinator named next.
    let d = FakeBroker::start(|r| {
        answers_versions(r, |r| match r.key() {
            Some(ApiKey::OffsetFetch) => offsets(r, 0, 9),
            _ => Reply::ScriptError(format!("D: unexpected api key {}", r.api_key)),
        })
    });
    let (b_at, c_at, d_at) = (b.endpoint(), c.endpoint(), d.endpoint());
    let group_lookups = Arc::new(Mutex::new(0));
    let counted = Arc::clone(&group_lookups);
    // A: the bootstrap broker; names B for the transactional id, C then D
    // for the group.
    let a = FakeBroker::start(move |r| {
        answers_versions(r, |r| match r.key() {
            Some(ApiKey::FindCoordinator) => {
                let asked: FindCoordinatorRequest = match r.decode() {
                    Ok(asked) => asked,
                    Err(e) => return Reply::ScriptError(e.to_string()),
                };
                if asked.key_type != GROUP {
                    return find_coordinator(r, &b_at);
                }
                let mut n = counted.lock().expect("count");
                *n += 1;
                let to: &Endpoint = if *n == 1 { &c_at } else { &d_at };
                find_coordinator(r, to)
            }
            _ => Reply::ScriptError(format!("A: unexpected api key {}", r.api_key)),
        })
    });
    let mut settings = Settings::new(a.addr());
    settings.operation_timeout = Duration::from_secs(5);
    let client = Client::new(&settings).expect("valid settings");

    let token = ProducerEpoch::new(4242, 7);
    let coordinator = client
        .add_offsets(NAME, token, NAME, deadline_in(Duration::from_secs(5)))
        .await
        .expect("AddOffsetsToTxn at B");
    assert_eq!(coordinator, b.addr());

    let asked = [("in".to_owned(), vec![0, 1])];
    let got = client
        .committed_offsets(NAME, &asked, deadline_in(Duration::from_secs(5)))
        .await
        .expect("OffsetFetch at D, after C said it moved");
    let want = Committed::At {
        offset: 9,
        metadata: Some("m".to_owned()),
    };
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got.iter().all(|p| p.committed == want), "{got:?}");

    let count =
        |broker: &FakeBroker, key: ApiKey| broker.requests().iter().filter(|r| r.is(key)).count();
    assert_eq!(count(&b, ApiKey::OffsetFetch), 0);
    assert_eq!(count(&c, ApiKey::OffsetFetch), 1);
    assert_eq!(count(&d, ApiKey::OffsetFetch), 1);
    assert_eq!(*group_lookups.lock().expect("count"), 2);
    assert_eq!(client.group_coordinators_cached(), 1);
    assert_eq!(client.coordinators_cached(), 1);

    // Both stay cached: no further lookup.
    client
        .committed_offsets(NAME, &asked, deadline_in(Duration::from_secs(5)))
        .await
        .expect("OffsetFetch at D");
    client
        .add_offsets(NAME, token, NAME, deadline_in(Duration::from_secs(5)))
        .await
        .expect("AddOffsetsToTxn at B");
    assert_eq!(count(&a, ApiKey::FindCoordinator), 3);
}
