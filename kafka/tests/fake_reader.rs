//! The read_committed reader against scripted brokers: a partition whose
//! leader says it moved is looked up again and read at the new leader
//! within the same call.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use krabka_kafka::fake_broker::{metadata, FakeBroker, Reply};
use krabka_kafka::{deadline_in, Client, ReadFrom, Settings};

/// One plain batch of `values` from offset `base`.
fn batch(base: i64, values: &[&str]) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: base + i as i64,
            sequence: -1,
            timestamp: 0,
            key: None,
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            headers: Default::default(),
            delete_horizon: false,
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).expect("encode");
    buf.freeze()
}

/// A Fetch answer of partition 0 of "in": `error_code`, and `records`.
fn fetch_answer(
    request: &krabka_kafka::fake_broker::Request,
    error_code: i16,
    records: Option<Bytes>,
) -> Reply {
    let asked: FetchRequest = match request.decode() {
        Ok(r) => r,
        Err(e) => return Reply::ScriptError(format!("{e:?}")),
    };
    if asked.isolation_level != 1 {
        return Reply::ScriptError("not read_committed".into());
    }
    let mut p = PartitionData::default();
    p.partition_index = 0;
    p.error_code = error_code;
    p.high_watermark = 12;
    p.last_stable_offset = 12;
    p.aborted_transactions = Some(Vec::new());
    p.records = records;
    let mut t = FetchableTopicResponse::default();
    t.topic = TopicName(StrBytes::from_static_str("in"));
    t.partitions = vec![p];
    let mut resp = FetchResponse::default();
    resp.responses = vec![t];
    Reply::of(request, &resp)
}

#[tokio::test]
async fn a_moved_leader_is_looked_up_again_and_read_there() {
    let new = FakeBroker::start(|req| match req.key() {
        Some(ApiKey::Fetch) => fetch_answer(req, 0, Some(batch(10, &["x", "y"]))),
        _ => Reply::Default,
    });
    // NOT_LEADER_OR_FOLLOWER
    let old = FakeBroker::start(|req| match req.key() {
        Some(ApiKey::Fetch) => fetch_answer(req, 6, None),
        _ => Reply::Default,
    });
    let (old_at, new_at) = (old.endpoint(), new.endpoint());
    let asked = Arc::new(AtomicU32::new(0));
    let metadata_asked = Arc::clone(&asked);
    let bootstrap = FakeBroker::start(move |req| match req.key() {
        Some(ApiKey::Metadata) => {
            let leader = match metadata_asked.fetch_add(1, Ordering::SeqCst) {
                0 => &old_at,
                _ => &new_at,
            };
            metadata(req, "in", &[leader])
        }
        _ => Reply::Default,
    });
    let client = Client::new(&Settings::new(bootstrap.addr())).expect("settings");
    let from = [ReadFrom {
        topic: "in".into(),
        partition: 0,
        offset: 10,
    }];
    let got = client
        .read_committed(
            &from,
            Duration::from_millis(100),
            1 << 20,
            deadline_in(Duration::from_secs(5)),
        )
        .await
        .expect("read at the new leader");
    let values: Vec<&[u8]> = got[0]
        .records
        .iter()
        .map(|r| r.value.as_deref().unwrap())
        .collect();
    assert_eq!(values, [b"x", b"y"]);
    assert_eq!(got[0].next_offset, 12);
    assert_eq!(asked.load(Ordering::SeqCst), 2, "Metadata asked again");
    let fetches = |b: &FakeBroker| b.requests().iter().filter(|r| r.is(ApiKey::Fetch)).count();
    assert_eq!((fetches(&old), fetches(&new)), (1, 1));
    for b in [&old, &new, &bootstrap] {
        assert!(b.failures().is_empty(), "{:?}", b.failures());
    }
}
