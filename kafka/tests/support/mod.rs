//! What the suites on a real Kafka share: the cluster's bootstrap address
//! (`KRABKA_BOOTSTRAP`, or `ci/kafka.sh start 1`), topics made with
//! CreateTopics, names no earlier run used, one transactional request
//! through the client's retry loop, and the record batch of a producer.
//!
//! Each suite takes what it needs (`mod support;`); the rest is unused
//! there.
#![allow(dead_code)]

use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use krabka_kafka::client::retry::{retry, Backoff, Tried};
use krabka_kafka::{deadline_in, ProducerEpoch, TxnError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The longest one step (a request with its retries) may take.
pub const STEP: Duration = Duration::from_secs(20);

/// The cluster's bootstrap address: `KRABKA_BOOTSTRAP`, else the one
/// `ci/kafka.sh start 1` prints (see [`start_kafka`]); asked once per
/// suite.
pub fn bootstrap() -> &'static str {
    static BOOTSTRAP: OnceLock<String> = OnceLock::new();
    BOOTSTRAP.get_or_init(|| match std::env::var("KRABKA_BOOTSTRAP") {
        Ok(v) if !v.trim().is_empty() => v.trim().to_owned(),
        _ => start_kafka(),
    })
}

/// `ci/kafka.sh start 1`, its last line the bootstrap address; panics
/// (fails the test) naming why when there is none.
pub fn start_kafka() -> String {
    let out = kafka_sh(&["start", "1"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    match stdout.lines().last().map(str::trim) {
        Some(addr) if out.status.success() && !addr.is_empty() => addr.to_owned(),
        _ => panic!(
            "a real Kafka is needed for this test: KRABKA_BOOTSTRAP is unset and \
             `ci/kafka.sh start 1` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// Runs `ci/kafka.sh ARGS`, with `input` on its standard input; panics
/// naming the script when it cannot run.
pub fn kafka_sh(args: &[&str], input: Option<&str>) -> std::process::Output {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../ci/kafka.sh");
    let mut child = Command::new("bash")
        .arg(script)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{script} cannot run: {e}"));
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(input.unwrap_or_default().as_bytes())
        .expect("write the tool's input");
    drop(stdin);
    child.wait_with_output().expect("the tool's output")
}

/// A name no earlier run used.
pub fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// Creates `topics` (one partition each, the broker's replication factor)
/// with one CreateTopics v5 at the first broker of `bootstrap`, sent as
/// `client_id`; panics naming the topic and the error of any it refuses.
pub async fn create_topics(bootstrap: &str, topics: &[&str], client_id: &'static str) {
    const VERSION: i16 = 5;
    let broker = bootstrap.split(',').next().expect("a broker").trim();
    let mut conn = tokio::net::TcpStream::connect(broker)
        .await
        .unwrap_or_else(|e| panic!("a real Kafka is needed: {broker} cannot be reached: {e}"));
    let mut req = CreateTopicsRequest::default();
    req.timeout_ms = 10_000;
    req.topics = topics
        .iter()
        .map(|name| {
            let mut t = CreatableTopic::default();
            t.name = TopicName(StrBytes::from_string((*name).to_owned()));
            t.num_partitions = 1;
            t.replication_factor = -1;
            t
        })
        .collect();
    let mut header = RequestHeader::default();
    header.request_api_key = ApiKey::CreateTopics as i16;
    header.request_api_version = VERSION;
    header.correlation_id = 1;
    header.client_id = Some(StrBytes::from_static_str(client_id));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, CreateTopicsRequest::header_version(VERSION))
        .expect("encode the header");
    req.encode(&mut body, VERSION).expect("encode CreateTopics");
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    conn.write_all(&frame).await.expect("send CreateTopics");
    let len = conn.read_i32().await.expect("CreateTopics answer length");
    let mut answer = vec![0u8; len as usize];
    conn.read_exact(&mut answer)
        .await
        .expect("CreateTopics answer");
    let mut answer = Bytes::from(answer);
    ResponseHeader::decode(&mut answer, CreateTopicsResponse::header_version(VERSION))
        .expect("decode the answer header");
    let resp = CreateTopicsResponse::decode(&mut answer, VERSION).expect("decode CreateTopics");
    for t in resp.topics {
        assert_eq!(
            t.error_code,
            0,
            "creating topic {}: {}",
            t.name.0.as_str(),
            krabka_kafka::codes::name(t.error_code)
        );
    }
}

/// Runs one transactional request through the client's retry loop (as a
/// lease writer does) for at most [`STEP`]; panics naming `what` when it
/// runs out of time.
pub async fn tried<T, F, Fut>(what: &str, attempt: F) -> Result<T, TxnError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, TxnError>>,
{
    match retry(deadline_in(STEP), Backoff::TRANSACTION, attempt).await {
        Tried::Done(v) => Ok(v),
        Tried::Failed(e) => Err(e),
        Tried::OutOfTime(why) => panic!("{what}: out of time: {why}"),
    }
}

/// A record batch of one record of `value` at `sequence`: transactional
/// for `token`, else a plain producer's (producer id and epoch -1).
pub fn batch(token: Option<ProducerEpoch>, sequence: i32, value: &str) -> Bytes {
    let (producer_id, producer_epoch) =
        token.map_or((-1, -1), |t| (t.producer_id, t.producer_epoch));
    let record = Record {
        transactional: token.is_some(),
        control: false,
        partition_leader_epoch: -1,
        producer_id,
        producer_epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence,
        timestamp: 0,
        key: None,
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: Default::default(),
        delete_horizon: false,
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, [&record], &options).expect("encode the batch");
    buf.freeze()
}
