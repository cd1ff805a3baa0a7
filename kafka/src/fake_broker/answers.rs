//! Builders for common answers and hostile frames.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::describe_transactions_response::TransactionState;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ApiVersionsResponse, BrokerId,
    DescribeTransactionsRequest, DescribeTransactionsResponse, EndTxnRequest, EndTxnResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, InitProducerIdResponse, ProduceRequest,
    ProduceResponse, ProducerId, ResponseHeader, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::{Endpoint, Reply, Request};

/// A whole response frame: the size, the response header for `api_key` at
/// `api_version` (v0, or v1 for flexible versions; v0 for an API
/// kafka-protocol does not know) with `correlation_id`, then `body`.
pub fn response_frame(api_key: i16, api_version: i16, correlation_id: i32, body: &[u8]) -> Bytes {
    let header_version = ApiKey::try_from(api_key)
        .map(|key| key.response_header_version(api_version))
        .unwrap_or(0);
    let mut frame = BytesMut::with_capacity(4 + 5 + body.len());
    frame.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut frame, header_version)
        .expect("a response header without tagged fields encodes");
    frame.put_slice(body);
    let size = i32::try_from(frame.len() - 4).expect("a frame under 2 GiB");
    frame[..4].copy_from_slice(&size.to_be_bytes());
    frame.freeze()
}

/// The first `keep` bytes of `frame` (all of it if shorter): with
/// [`Reply::RawThenClose`] or [`Reply::RawThenHang`], a frame that
/// announces more bytes than it sends.
pub fn truncated(frame: &[u8], keep: usize) -> Bytes {
    Bytes::copy_from_slice(&frame[..keep.min(frame.len())])
}

/// A complete ApiVersions v0 response frame (header v0) whose `api_keys`
/// array claims `0x7fff_ffff` entries and holds none: a client must fail
/// to decode it without trying to allocate for the count. Beware:
/// kafka-protocol 0.18 decodes arrays with `Vec::with_capacity(count)`, so
/// handing this frame to `ApiVersionsResponse::decode` aborts the process
/// (a 64 GiB allocation); the client must check counts before decoding.
pub fn frame_with_huge_array_count(correlation_id: i32) -> Bytes {
    let mut frame = BytesMut::with_capacity(14);
    frame.put_i32(10); // correlation id, error code, array count
    frame.put_i32(correlation_id);
    frame.put_i16(0);
    frame.put_i32(0x7fff_ffff);
    frame.freeze()
}

/// Decodes the request as `T`, or says why the answer cannot be built.
fn asked<T: Decodable>(request: &Request) -> Result<T, Reply> {
    request
        .decode()
        .map_err(|e| Reply::ScriptError(e.to_string()))
}

/// A successful FindCoordinator answer naming `to`, echoing the requested
/// key (v0-3: one coordinator at the top level; v4+: one entry per key in
/// `coordinator_keys`).
pub fn find_coordinator(request: &Request, to: &Endpoint) -> Reply {
    coordinator_answer(request, 0, to)
}

/// FindCoordinator, successful (`error_code == 0`) or failed.
fn coordinator_answer(request: &Request, error_code: i16, to: &Endpoint) -> Reply {
    let asked: FindCoordinatorRequest = match asked(request) {
        Ok(asked) => asked,
        Err(reply) => return reply,
    };
    let host = StrBytes::from_string(to.host.clone());
    let answer = if request.api_version >= 4 {
        let coordinators = asked
            .coordinator_keys
            .into_iter()
            .map(|key| {
                Coordinator::default()
                    .with_key(key)
                    .with_node_id(BrokerId(to.node_id))
                    .with_host(host.clone())
                    .with_port(to.port)
                    .with_error_code(error_code)
                    .with_error_message(None)
            })
            .collect();
        FindCoordinatorResponse::default()
            .with_error_message(None)
            .with_coordinators(coordinators)
    } else {
        FindCoordinatorResponse::default()
            .with_error_code(error_code)
            .with_error_message(None)
            .with_node_id(BrokerId(to.node_id))
            .with_host(host)
            .with_port(to.port)
    };
    Reply::of(request, &answer)
}

/// A successful InitProducerId answer.
pub fn init_producer_id(request: &Request, producer_id: i64, producer_epoch: i16) -> Reply {
    let answer = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(producer_epoch);
    Reply::of(request, &answer)
}

/// A DescribeTransactions answer: every asked transactional id in `state`
/// (`"Ongoing"`, `"CompleteCommit"`, ...) with this producer id and epoch.
pub fn describe_transactions(
    request: &Request,
    state: &str,
    producer_id: i64,
    producer_epoch: i16,
) -> Reply {
    let asked: DescribeTransactionsRequest = match request.decode() {
        Ok(asked) => asked,
        Err(e) => return Reply::ScriptError(format!("undecodable DescribeTransactions: {e}")),
    };
    let states = asked
        .transactional_ids
        .into_iter()
        .map(|id| {
            TransactionState::default()
                .with_transactional_id(id)
                .with_transaction_state(state.to_owned().into())
                .with_transaction_timeout_ms(60_000)
                .with_transaction_start_time_ms(1)
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(producer_epoch)
        })
        .collect();
    Reply::of(
        request,
        &DescribeTransactionsResponse::default().with_transaction_states(states),
    )
}

/// An EndTxn answer with `error_code` (0 for success). At v5 it carries
/// the request's producer id and its epoch plus one on success, as a
/// transactions-v2 coordinator bumps the epoch at every EndTxn, and -1 for
/// both on error.
pub fn end_txn(request: &Request, error_code: i16) -> Reply {
    let mut answer = EndTxnResponse::default().with_error_code(error_code);
    if request.api_version >= 5 {
        let asked: EndTxnRequest = match asked(request) {
            Ok(asked) => asked,
            Err(reply) => return reply,
        };
        answer = if error_code == 0 {
            answer
                .with_producer_id(asked.producer_id)
                .with_producer_epoch(asked.producer_epoch.wrapping_add(1))
        } else {
            answer
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
        };
    }
    Reply::of(request, &answer)
}

/// A SaslHandshake answer with `error_code` and the broker's `mechanisms`
/// (Kafka lists them with `UNSUPPORTED_SASL_MECHANISM`, 33).
pub fn sasl_handshake(request: &Request, error_code: i16, mechanisms: &[&str]) -> Reply {
    let answer = SaslHandshakeResponse::default()
        .with_error_code(error_code)
        .with_mechanisms(
            mechanisms
                .iter()
                .map(|m| StrBytes::from_string((*m).to_owned()))
                .collect(),
        );
    Reply::of(request, &answer)
}

/// An answer of the request's API carrying `error_code` where that API
/// carries errors: at the top level, or for every item the request names
/// (coordinator keys, topics and partitions, transactional ids), with ids,
/// epochs, offsets and ports set to -1. Knows FindCoordinator,
/// InitProducerId, EndTxn, AddPartitionsToTxn, Produce,
/// DescribeTransactions, SaslHandshake (no mechanisms listed; see
/// [`sasl_handshake`]), SaslAuthenticate (with an error message) and
/// ApiVersions (an empty table); another API gets a
/// [`Reply::ScriptError`].
pub fn error_for(request: &Request, error_code: i16) -> Reply {
    match error_answer(request, error_code) {
        Ok(reply) | Err(reply) => reply,
    }
}

fn error_answer(request: &Request, code: i16) -> Result<Reply, Reply> {
    let no_one = Endpoint {
        node_id: -1,
        host: String::new(),
        port: -1,
    };
    Ok(match request.key() {
        Some(ApiKey::FindCoordinator) => coordinator_answer(request, code, &no_one),
        Some(ApiKey::InitProducerId) => {
            let answer = InitProducerIdResponse::default()
                .with_error_code(code)
                .with_producer_epoch(-1);
            Reply::of(request, &answer)
        }
        Some(ApiKey::EndTxn) => end_txn(request, code),
        Some(ApiKey::AddPartitionsToTxn) => add_partitions_error(request, code)?,
        Some(ApiKey::Produce) => produce_error(request, code)?,
        Some(ApiKey::DescribeTransactions) => {
            let asked: DescribeTransactionsRequest = asked(request)?;
            let states = asked.transactional_ids.into_iter().map(|id| {
                TransactionState::default()
                    .with_error_code(code)
                    .with_transactional_id(id)
                    .with_transaction_timeout_ms(-1)
                    .with_transaction_start_time_ms(-1)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
            });
            Reply::of(
                request,
                &DescribeTransactionsResponse::default().with_transaction_states(states.collect()),
            )
        }
        Some(ApiKey::SaslHandshake) => sasl_handshake(request, code, &[]),
        Some(ApiKey::SaslAuthenticate) => {
            let message =
                (code != 0).then(|| StrBytes::from_string(format!("fake broker: error {code}")));
            let answer = SaslAuthenticateResponse::default()
                .with_error_code(code)
                .with_error_message(message);
            Reply::of(request, &answer)
        }
        Some(ApiKey::ApiVersions) => Reply::of(
            request,
            &ApiVersionsResponse::default().with_error_code(code),
        ),
        _ => Reply::ScriptError(format!(
            "error_for does not know api key {} v{}",
            request.api_key, request.api_version
        )),
    })
}

/// An AddPartitionsToTxn answer giving every partition asked `code`.
fn add_partitions_error(request: &Request, code: i16) -> Result<Reply, Reply> {
    let asked: AddPartitionsToTxnRequest = asked(request)?;
    let topics = |topics: Vec<AddPartitionsToTxnTopic>| -> Vec<_> {
        topics
            .into_iter()
            .map(|topic| {
                let partitions = topic.partitions.iter().map(|&index| {
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(index)
                        .with_partition_error_code(code)
                });
                AddPartitionsToTxnTopicResult::default()
                    .with_name(topic.name)
                    .with_results_by_partition(partitions.collect())
            })
            .collect()
    };
    let answer = if request.api_version >= 4 {
        let results = asked.transactions.into_iter().map(|txn| {
            AddPartitionsToTxnResult::default()
                .with_transactional_id(txn.transactional_id)
                .with_topic_results(topics(txn.topics))
        });
        AddPartitionsToTxnResponse::default().with_results_by_transaction(results.collect())
    } else {
        AddPartitionsToTxnResponse::default()
            .with_results_by_topic_v3_and_below(topics(asked.v3_and_below_topics))
    };
    Ok(Reply::of(request, &answer))
}

/// A Produce answer giving every partition asked `code`, offset -1.
fn produce_error(request: &Request, code: i16) -> Result<Reply, Reply> {
    let asked: ProduceRequest = asked(request)?;
    let responses = asked.topic_data.into_iter().map(|topic| {
        let partitions = topic.partition_data.iter().map(|partition| {
            PartitionProduceResponse::default()
                .with_index(partition.index)
                .with_error_code(code)
                .with_base_offset(-1)
        });
        TopicProduceResponse::default()
            .with_name(topic.name)
            .with_topic_id(topic.topic_id)
            .with_partition_responses(partitions.collect())
    });
    Ok(Reply::of(
        request,
        &ProduceResponse::default().with_responses(responses.collect()),
    ))
}

/// A Metadata answer: `topic` with one partition per entry of `leaders`
/// (partition `i` led by `leaders[i]`), and those brokers.
pub fn metadata(request: &Request, topic: &str, leaders: &[&Endpoint]) -> Reply {
    metadata_at_epoch(request, topic, leaders, -1)
}

/// [`metadata`], every partition at leader epoch `leader_epoch` (-1: none,
/// as a broker before Metadata v7 answers).
pub fn metadata_at_epoch(
    request: &Request,
    topic: &str,
    leaders: &[&Endpoint],
    leader_epoch: i32,
) -> Reply {
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::{MetadataResponse, TopicName};
    let mut brokers: Vec<MetadataResponseBroker> = Vec::new();
    for e in leaders {
        if brokers.iter().all(|b| b.node_id.0 != e.node_id) {
            brokers.push(
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(e.node_id))
                    .with_host(StrBytes::from_string(e.host.clone()))
                    .with_port(e.port),
            );
        }
    }
    let partitions = leaders.iter().enumerate().map(|(i, e)| {
        MetadataResponsePartition::default()
            .with_partition_index(i32::try_from(i).unwrap_or(i32::MAX))
            .with_leader_id(BrokerId(e.node_id))
            .with_leader_epoch(leader_epoch)
    });
    let t = MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.to_owned()))))
        .with_partitions(partitions.collect());
    let answer = MetadataResponse::default()
        .with_brokers(brokers)
        .with_topics(vec![t]);
    Reply::of(request, &answer)
}
