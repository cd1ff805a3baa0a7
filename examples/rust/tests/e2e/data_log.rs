//! The data-topic check: read partition 0 with read_committed (rdkafka)
//! and, for every committed record, the producer id and epoch of its batch
//! straight from a Fetch response (kafka-protocol). The token in the value
//! must be the batch's, and tokens never decrease in log order.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{
    encode_request_header_into_buffer, Decodable, Encodable, HeaderVersion, StrBytes,
};
use kafka_protocol::records::RecordBatchDecoder;
use krabka_coordination::FencingToken;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde_json::Value;

use super::scene::token_of;

/// Every committed record of partition 0 of `topic` (read_committed, up to the
/// last stable offset): offset and value.
fn committed_records(bootstrap: &str, topic: &str) -> Vec<(i64, Value)> {
    let mut cc = ClientConfig::new();
    cc.set("bootstrap.servers", bootstrap)
        .set("group.id", "krabka-e2e-check")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest");
    let consumer: BaseConsumer = cc.create().expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .expect("tpl");
    consumer.assign(&tpl).expect("assign");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut out = Vec::new();
    loop {
        assert!(
            Instant::now() < deadline,
            "reading {topic} to its last stable offset took over 30 s"
        );
        match consumer.poll(Duration::from_millis(200)) {
            None => continue,
            Some(Err(KafkaError::PartitionEOF(_))) => break,
            Some(Err(e)) => panic!("reading {topic}: {e}"),
            Some(Ok(m)) => {
                let v: Value = serde_json::from_slice(m.payload().unwrap_or_default())
                    .unwrap_or_else(|e| {
                        panic!("record {} of {topic} is not JSON: {e}", m.offset())
                    });
                out.push((m.offset(), v));
            }
        }
    }
    out
}

/// The (producer id, epoch) of the batch of every offset of partition 0 of
/// `topic`, control batches included, straight from Fetch responses.
fn batch_producers(bootstrap: &str, topic: &str) -> BTreeMap<i64, (i64, i16, bool)> {
    // The partition leader's address (the 1-node cluster: the bootstrap broker).
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("metadata client");
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("metadata");
    let leader = md.topics()[0]
        .partitions()
        .iter()
        .find(|p| p.id() == 0)
        .expect("partition 0")
        .leader();
    let broker = md
        .brokers()
        .iter()
        .find(|b| b.id() == leader)
        .expect("leader broker");
    let addr = format!("{}:{}", broker.host(), broker.port());
    let mut stream =
        std::net::TcpStream::connect(&addr).unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut out = BTreeMap::new();
    let mut offset = 0i64;
    let version = 12i16;
    for correlation_id in 1.. {
        let mut req = FetchRequest::default();
        req.replica_id = BrokerId(-1);
        req.max_wait_ms = 0;
        req.min_bytes = 0;
        req.max_bytes = 64 << 20;
        req.isolation_level = 0;
        req.session_epoch = -1;
        let mut p = FetchPartition::default();
        p.partition = 0;
        p.fetch_offset = offset;
        p.partition_max_bytes = 32 << 20;
        p.current_leader_epoch = -1;
        p.last_fetched_epoch = -1;
        p.log_start_offset = -1;
        let mut t = FetchTopic::default();
        t.topic = TopicName(StrBytes::from_string(topic.to_owned()));
        t.partitions = vec![p];
        req.topics = vec![t];
        let mut header = RequestHeader::default();
        header.request_api_key = ApiKey::Fetch as i16;
        header.request_api_version = version;
        header.correlation_id = correlation_id;
        header.client_id = Some(StrBytes::from_static_str("krabka-e2e"));
        let mut frame = BytesMut::new();
        frame.put_i32(0);
        encode_request_header_into_buffer(&mut frame, &header).expect("header");
        req.encode(&mut frame, version).expect("fetch request");
        let size = (frame.len() - 4) as i32;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        stream.write_all(&frame).expect("send fetch");
        let mut len = [0u8; 4];
        stream.read_exact(&mut len).expect("response size");
        let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
        stream.read_exact(&mut body).expect("response body");
        let mut body = Bytes::from(body);
        let h = ResponseHeader::decode(&mut body, FetchResponse::header_version(version))
            .expect("response header");
        assert_eq!(h.correlation_id, correlation_id);
        let resp = FetchResponse::decode(&mut body, version).expect("fetch response");
        assert_eq!(resp.error_code, 0, "fetch error");
        let part = &resp.responses[0].partitions[0];
        assert_eq!(
            part.error_code, 0,
            "fetch of {topic}/0 failed with code {}",
            part.error_code
        );
        let high = part.high_watermark;
        let mut records = part.records.clone().unwrap_or_default();
        let before = offset;
        while records.has_remaining() {
            // A fetch may end in a partial batch; the next fetch starts at it.
            let Ok(set) = RecordBatchDecoder::decode(&mut records) else {
                break;
            };
            for r in set.records {
                out.insert(r.offset, (r.producer_id, r.producer_epoch, r.control));
                offset = offset.max(r.offset + 1);
            }
        }
        if offset >= high {
            break;
        }
        assert!(
            offset > before,
            "the fetch of {topic}/0 at offset {before} made no progress (high watermark {high})"
        );
    }
    out
}

/// The data log check: every committed record carries the token of the
/// batch that wrote it, tokens never decrease in log order, each token is one
/// that its member was elected with, and sequence numbers grow within a term.
pub fn check_data_log(
    bootstrap: &str,
    topic: &str,
    elected: &HashMap<FencingToken, String>,
) -> DataLog {
    let committed = committed_records(bootstrap, topic);
    let batches = batch_producers(bootstrap, topic);
    let mut last: Option<(FencingToken, u64)> = None;
    let mut per_token: BTreeMap<FencingToken, usize> = BTreeMap::new();
    let mut problems = Vec::new();
    for (offset, v) in &committed {
        let claimed = token_of(v);
        let member = v["member"].as_str().unwrap_or_default();
        let seq = v["seq"].as_u64().unwrap_or(0);
        match batches.get(offset) {
            Some(&(pid, epoch, control)) => {
                if control || FencingToken::new(pid, epoch) != claimed {
                    problems.push(format!(
                        "offset {offset}: value claims {claimed} but its batch was written by {pid}/{epoch} (control {control})"
                    ));
                }
            }
            None => problems.push(format!("offset {offset}: no batch found in the raw fetch")),
        }
        match elected.get(&claimed) {
            Some(m) if m == member => {}
            other => problems.push(format!(
                "offset {offset}: token {claimed} of {member} was elected for {other:?}"
            )),
        }
        if let Some((t, s)) = last {
            if claimed < t {
                problems.push(format!(
                    "offset {offset}: token {claimed} after {t}: tokens decreased in log order"
                ));
            }
            if claimed == t && seq <= s {
                problems.push(format!(
                    "offset {offset}: seq {seq} after {s} within token {t}"
                ));
            }
        }
        last = Some((claimed, seq));
        *per_token.entry(claimed).or_default() += 1;
    }
    let aborted_or_control = batches.len() - committed.len();
    DataLog {
        committed: committed.len(),
        per_token,
        aborted_or_control,
        problems,
    }
}

/// What the data log check found.
#[derive(Debug)]
pub struct DataLog {
    /// How many records are committed.
    pub committed: usize,
    /// The committed records of each token.
    pub per_token: BTreeMap<FencingToken, usize>,
    /// Offsets in the log that read_committed does not return: transaction
    /// markers and aborted (fenced) writes.
    pub aborted_or_control: usize,
    /// What the check found wrong (empty when all is well).
    pub problems: Vec<String>,
}
