//! The frame check against `kafka-protocol`'s own encodings: it accepts
//! what `kafka-protocol` encodes for every covered (API, version), refuses
//! every strict prefix of it, and refuses huge counts and lengths naming the
//! field.

use std::collections::BTreeMap;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, ApiVersionsResponse, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchResponse, FetchableTopicResponse,
    LeaderIdAndEpoch as FetchLeader, PartitionData, SnapshotId,
};
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch as ProduceLeader, NodeEndpoint,
    PartitionProduceResponse, ProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{
    add_partitions_to_txn_response as add_txn, describe_configs_response as configs,
    describe_producers_response as describe_producers,
    describe_transactions_response as describe_txn, find_coordinator_response as find_coord,
    list_offsets_response as offsets, metadata_response as meta,
    offset_fetch_response as offset_fetch, txn_offset_commit_response as txn_commit,
    AddOffsetsToTxnResponse, BrokerId, EndTxnResponse, GroupId, InitProducerIdResponse, ProducerId,
    ResponseHeader, SaslAuthenticateResponse, SaslHandshakeResponse, TopicName, TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use krabka_kafka::frame_check::{
    check_response, check_response_header, covered, FrameError, Problem,
};
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;

/// The responses and versions the client sends, by API key.
const CLIENT_VERSIONS: &[(i16, &[i16])] = &[
    (18, &[0, 3]),
    (17, &[1]),
    (36, &[0, 1, 2]),
    (10, &[0, 1, 2, 3, 4, 5, 6]),
    (65, &[0]),
    (61, &[0]),
    (22, &[0, 1, 2, 3, 4]),
    (24, &[0, 1, 2, 3]),
    (0, &[3, 4, 5, 6, 7, 8, 9, 10, 11]),
    (26, &[0, 1, 2, 3, 4]),
    (3, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]),
    (32, &[1, 2, 3, 4]),
    (2, &[2, 3, 4, 5, 6, 7, 8]),
    (1, &[4, 5, 6, 7, 8, 9, 10, 11, 12]),
    (25, &[0, 1, 2, 3, 4]),
    (28, &[0, 1, 2, 3, 4]),
    (9, &[7, 8]),
];

fn versions_of(api_key: i16) -> &'static [i16] {
    CLIENT_VERSIONS
        .iter()
        .find(|(key, _)| *key == api_key)
        .map_or(&[], |(_, versions)| versions)
}

/// Contents drawn in turn (cyclically) by the message builders.
#[derive(Debug, Clone)]
struct Gen {
    strs: Vec<String>,
    counts: Vec<usize>,
    bits: Vec<bool>,
    ints: Vec<i64>,
    blobs: Vec<Vec<u8>>,
    tag_sets: Vec<BTreeMap<i32, Vec<u8>>>,
    at: usize,
}

fn gen() -> impl Strategy<Value = Gen> {
    (
        vec("[a-z0-9._é☃-]{0,10}", 1..5),
        vec(0usize..=2, 1..6),
        vec(any::<bool>(), 1..6),
        vec(any::<i64>(), 1..5),
        vec(vec(any::<u8>(), 0..12), 1..4),
        // Unknown tags only: every known tag of these responses is below 10.
        vec(btree_map(10i32..3000, vec(any::<u8>(), 0..5), 0..3), 1..4),
    )
        .prop_map(|(strs, counts, bits, ints, blobs, tag_sets)| Gen {
            strs,
            counts,
            bits,
            ints,
            blobs,
            tag_sets,
            at: 0,
        })
}

impl Gen {
    /// Empty arrays, empty strings, no tags: near the default message.
    fn minimal() -> Self {
        Gen {
            strs: vec![String::new()],
            counts: vec![0],
            bits: vec![false],
            ints: vec![0],
            blobs: vec![Vec::new()],
            tag_sets: vec![BTreeMap::new()],
            at: 0,
        }
    }

    fn step(&mut self) -> usize {
        self.at = self.at.wrapping_add(1);
        self.at
    }

    fn count(&mut self) -> usize {
        let i = self.step();
        self.counts[i % self.counts.len()]
    }

    fn bit(&mut self) -> bool {
        let i = self.step();
        self.bits[i % self.bits.len()]
    }

    fn long(&mut self) -> i64 {
        let i = self.step();
        self.ints[i % self.ints.len()]
    }

    fn int(&mut self) -> i32 {
        self.long() as i32
    }

    fn small(&mut self) -> i16 {
        self.long() as i16
    }

    fn str(&mut self) -> StrBytes {
        let i = self.step();
        StrBytes::from_string(self.strs[i % self.strs.len()].clone())
    }

    fn opt(&mut self) -> Option<StrBytes> {
        if self.bit() {
            Some(self.str())
        } else {
            None
        }
    }

    fn blob(&mut self) -> Bytes {
        let i = self.step();
        Bytes::from(self.blobs[i % self.blobs.len()].clone())
    }

    fn ids(&mut self) -> Vec<BrokerId> {
        (0..self.count()).map(|_| BrokerId(self.int())).collect()
    }

    /// Unknown tagged fields, none unless `flexible`.
    fn tags(&mut self, flexible: bool) -> BTreeMap<i32, Bytes> {
        let i = self.step();
        if !flexible {
            return BTreeMap::new();
        }
        let set = &self.tag_sets[i % self.tag_sets.len()];
        set.iter()
            .map(|(&tag, value)| (tag, Bytes::from(value.clone())))
            .collect()
    }

    fn many<T>(&mut self, mut item: impl FnMut(&mut Gen) -> T) -> Vec<T> {
        (0..self.count()).map(|_| item(self)).collect()
    }
}

fn api_versions(g: &mut Gen, v: i16) -> ApiVersionsResponse {
    let flex = v >= 3;
    let keys = g.many(|g| {
        ApiVersion::default()
            .with_api_key(g.small())
            .with_min_version(g.small())
            .with_max_version(g.small())
            .with_unknown_tagged_fields(g.tags(flex))
    });
    let r = ApiVersionsResponse::default()
        .with_error_code(g.small())
        .with_api_keys(keys)
        .with_throttle_time_ms(g.int());
    if !flex {
        return r;
    }
    let supported = g.many(|g| {
        SupportedFeatureKey::default()
            .with_name(g.str())
            .with_min_version(g.small())
            .with_max_version(g.small())
            .with_unknown_tagged_fields(g.tags(true))
    });
    let finalized = g.many(|g| {
        FinalizedFeatureKey::default()
            .with_name(g.str())
            .with_max_version_level(g.small())
            .with_min_version_level(g.small())
            .with_unknown_tagged_fields(g.tags(true))
    });
    let epoch = if g.bit() { g.long() } else { -1 };
    r.with_supported_features(supported)
        .with_finalized_features_epoch(epoch)
        .with_finalized_features(finalized)
        .with_zk_migration_ready(g.bit())
        .with_unknown_tagged_fields(g.tags(true))
}

fn find_coordinator(g: &mut Gen, v: i16) -> find_coord::FindCoordinatorResponse {
    let r = find_coord::FindCoordinatorResponse::default()
        .with_throttle_time_ms(g.int())
        .with_error_message(g.opt())
        .with_unknown_tagged_fields(g.tags(v >= 3));
    if v <= 3 {
        return r
            .with_error_code(g.small())
            .with_node_id(BrokerId(g.int()))
            .with_host(g.str())
            .with_port(g.int());
    }
    r.with_coordinators(g.many(|g| {
        find_coord::Coordinator::default()
            .with_key(g.str())
            .with_node_id(BrokerId(g.int()))
            .with_host(g.str())
            .with_port(g.int())
            .with_error_code(g.small())
            .with_error_message(g.opt())
            .with_unknown_tagged_fields(g.tags(true))
    }))
}

fn describe_transactions(g: &mut Gen) -> describe_txn::DescribeTransactionsResponse {
    let topic = |g: &mut Gen| {
        describe_txn::TopicData::default()
            .with_topic(TopicName(g.str()))
            .with_partitions(g.many(Gen::int))
            .with_unknown_tagged_fields(g.tags(true))
    };
    let state = |g: &mut Gen| {
        describe_txn::TransactionState::default()
            .with_error_code(g.small())
            .with_transactional_id(TransactionalId(g.str()))
            .with_transaction_state(g.str())
            .with_transaction_timeout_ms(g.int())
            .with_transaction_start_time_ms(g.long())
            .with_producer_id(ProducerId(g.long()))
            .with_producer_epoch(g.small())
            .with_topics(g.many(topic))
            .with_unknown_tagged_fields(g.tags(true))
    };
    describe_txn::DescribeTransactionsResponse::default()
        .with_throttle_time_ms(g.int())
        .with_transaction_states(g.many(state))
        .with_unknown_tagged_fields(g.tags(true))
}

fn describe_producers(g: &mut Gen) -> describe_producers::DescribeProducersResponse {
    let producer = |g: &mut Gen| {
        describe_producers::ProducerState::default()
            .with_producer_id(ProducerId(g.long()))
            .with_producer_epoch(g.int())
            .with_last_sequence(g.int())
            .with_last_timestamp(g.long())
            .with_coordinator_epoch(g.int())
            .with_current_txn_start_offset(g.long())
            .with_unknown_tagged_fields(g.tags(true))
    };
    let partition = |g: &mut Gen| {
        describe_producers::PartitionResponse::default()
            .with_partition_index(g.int())
            .with_error_code(g.small())
            .with_error_message(g.opt())
            .with_active_producers(g.many(producer))
            .with_unknown_tagged_fields(g.tags(true))
    };
    let topic = |g: &mut Gen| {
        describe_producers::TopicResponse::default()
            .with_name(TopicName(g.str()))
            .with_partitions(g.many(partition))
            .with_unknown_tagged_fields(g.tags(true))
    };
    describe_producers::DescribeProducersResponse::default()
        .with_throttle_time_ms(g.int())
        .with_topics(g.many(topic))
        .with_unknown_tagged_fields(g.tags(true))
}

fn add_partitions_to_txn(g: &mut Gen, v: i16) -> add_txn::AddPartitionsToTxnResponse {
    let flex = v >= 3;
    let partition = |g: &mut Gen| {
        add_txn::AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(g.int())
            .with_partition_error_code(g.small())
            .with_unknown_tagged_fields(g.tags(flex))
    };
    let topic = |g: &mut Gen| {
        add_txn::AddPartitionsToTxnTopicResult::default()
            .with_name(TopicName(g.str()))
            .with_results_by_partition(g.many(partition))
            .with_unknown_tagged_fields(g.tags(flex))
    };
    add_txn::AddPartitionsToTxnResponse::default()
        .with_throttle_time_ms(g.int())
        .with_results_by_topic_v3_and_below(g.many(topic))
        .with_unknown_tagged_fields(g.tags(flex))
}

fn produce(g: &mut Gen, v: i16) -> ProduceResponse {
    let flex = v >= 9;
    let record_error = |g: &mut Gen| {
        BatchIndexAndErrorMessage::default()
            .with_batch_index(g.int())
            .with_batch_index_error_message(g.opt())
            .with_unknown_tagged_fields(g.tags(flex))
    };
    let partition = |g: &mut Gen| {
        let record_errors = if v >= 8 { g.many(record_error) } else { vec![] };
        let leader = if v >= 10 && g.bit() {
            ProduceLeader::default()
                .with_leader_id(BrokerId(g.int()))
                .with_leader_epoch(g.int())
                .with_unknown_tagged_fields(g.tags(true))
        } else {
            ProduceLeader::default()
        };
        PartitionProduceResponse::default()
            .with_index(g.int())
            .with_error_code(g.small())
            .with_base_offset(g.long())
            .with_log_append_time_ms(g.long())
            .with_log_start_offset(g.long())
            .with_record_errors(record_errors)
            .with_error_message(g.opt())
            .with_current_leader(leader)
            .with_unknown_tagged_fields(g.tags(flex))
    };
    let topic = |g: &mut Gen| {
        TopicProduceResponse::default()
            .with_name(TopicName(g.str()))
            .with_partition_responses(g.many(partition))
            .with_unknown_tagged_fields(g.tags(flex))
    };
    let node = |g: &mut Gen| {
        NodeEndpoint::default()
            .with_node_id(BrokerId(g.int()))
            .with_host(g.str())
            .with_port(g.int())
            .with_rack(g.opt())
            .with_unknown_tagged_fields(g.tags(true))
    };
    let nodes = if v >= 10 { g.many(node) } else { vec![] };
    ProduceResponse::default()
        .with_responses(g.many(topic))
        .with_throttle_time_ms(g.int())
        .with_node_endpoints(nodes)
        .with_unknown_tagged_fields(g.tags(flex))
}

fn metadata(g: &mut Gen, v: i16) -> meta::MetadataResponse {
    let flex = v >= 9;
    let broker = |g: &mut Gen| {
        meta::MetadataResponseBroker::default()
            .with_node_id(BrokerId(g.int()))
            .with_host(g.str())
            .with_port(g.int())
            .with_rack(g.opt())
            .with_unknown_tagged_fields(g.tags(flex))
    };
    let partition = |g: &mut Gen| {
        meta::MetadataResponsePartition::default()
            .with_error_code(g.small())
            .with_partition_index(g.int())
            .with_leader_id(BrokerId(g.int()))
            .with_leader_epoch(g.int())
            .with_replica_nodes(g.ids())
            .with_isr_nodes(g.ids())
            .with_offline_replicas(g.ids())
            .with_unknown_tagged_fields(g.tags(flex))
    };
    let topic = |g: &mut Gen| {
        let operations = if v >= 8 { g.int() } else { i32::MIN };
        meta::MetadataResponseTopic::default()
            .with_error_code(g.small())
            .with_name(g.opt().map(TopicName))
            .with_is_internal(g.bit())
            .with_partitions(g.many(partition))
            .with_topic_authorized_operations(operations)
            .with_unknown_tagged_fields(g.tags(flex))
    };
    let operations = if (8..=10).contains(&v) {
        g.int()
    } else {
        i32::MIN
    };
    meta::MetadataResponse::default()
        .with_throttle_time_ms(g.int())
        .with_brokers(g.many(broker))
        .with_cluster_id(g.opt())
        .with_controller_id(BrokerId(g.int()))
        .with_topics(g.many(topic))
        .with_cluster_authorized_operations(operations)
        .with_unknown_tagged_fields(g.tags(flex))
}

fn describe_configs(g: &mut Gen, v: i16) -> configs::DescribeConfigsResponse {
    let flex = v >= 4;
    let synonym = |g: &mut Gen| {
        configs::DescribeConfigsSynonym::default()
            .with_name(g.str())
            .with_value(g.opt())
            .with_source(g.small() as i8)
            .with_unknown_tagged_fields(g.tags(flex))
    };
    let entry = |g: &mut Gen| {
        let (config_type, documentation) = if v >= 3 {
            (g.small() as i8, g.opt())
        } else {
            (0, None)
        };
        configs::DescribeConfigsResourceResult::default()
            .with_name(g.str())
            .with_value(g.opt())
            .with_read_only(g.bit())
            .with_config_source(g.small() as i8)
            .with_is_sensitive(g.bit())
            .with_synonyms(g.many(synonym))
            .with_config_type(config_type)
            .with_documentation(documentation)
            .with_unknown_tagged_fields(g.tags(flex))
    };
    let result = |g: &mut Gen| {
        configs::DescribeConfigsResult::default()
            .with_error_code(g.small())
            .with_error_message(g.opt())
            .with_resource_type(g.small() as i8)
            .with_resource_name(g.str())
            .with_configs(g.many(entry))
            .with_unknown_tagged_fields(g.tags(flex))
    };
    configs::DescribeConfigsResponse::default()
        .with_throttle_time_ms(g.int())
        .with_results(g.many(result))
        .with_unknown_tagged_fields(g.tags(flex))
}

fn list_offsets(g: &mut Gen, v: i16) -> offsets::ListOffsetsResponse {
    let flex = v >= 6;
    let partition = |g: &mut Gen| {
        let epoch = if v >= 4 { g.int() } else { -1 };
        offsets::ListOffsetsPartitionResponse::default()
            .with_partition_index(g.int())
            .with_error_code(g.small())
            .with_timestamp(g.long())
            .with_offset(g.long())
            .with_leader_epoch(epoch)
            .with_unknown_tagged_fields(g.tags(flex))
    };
    let topic = |g: &mut Gen| {
        offsets::ListOffsetsTopicResponse::default()
            .with_name(TopicName(g.str()))
            .with_partitions(g.many(partition))
            .with_unknown_tagged_fields(g.tags(flex))
    };
    offsets::ListOffsetsResponse::default()
        .with_throttle_time_ms(g.int())
        .with_topics(g.many(topic))
        .with_unknown_tagged_fields(g.tags(flex))
}

fn fetch(g: &mut Gen, v: i16) -> FetchResponse {
    let flex = v >= 12;
    let aborted = |g: &mut Gen| {
        AbortedTransaction::default()
            .with_producer_id(ProducerId(g.long()))
            .with_first_offset(g.long())
            .with_unknown_tagged_fields(g.tags(flex))
    };
    let partition = |g: &mut Gen| {
        let aborted = if g.bit() { Some(g.many(aborted)) } else { None };
        let replica = if v >= 11 { g.int() } else { -1 };
        let records = if g.bit() { Some(g.blob()) } else { None };
        let mut p = PartitionData::default()
            .with_partition_index(g.int())
            .with_error_code(g.small())
            .with_high_watermark(g.long())
            .with_last_stable_offset(g.long())
            .with_log_start_offset(g.long())
            .with_aborted_transactions(aborted)
            .with_preferred_read_replica(BrokerId(replica))
            .with_records(records)
            .with_unknown_tagged_fields(g.tags(flex));
        if flex && g.bit() {
            p = p.with_diverging_epoch(
                EpochEndOffset::default()
                    .with_epoch(g.int())
                    .with_end_offset(g.long())
                    .with_unknown_tagged_fields(g.tags(true)),
            );
        }
        if flex && g.bit() {
            p = p.with_current_leader(
                FetchLeader::default()
                    .with_leader_id(BrokerId(g.int()))
                    .with_leader_epoch(g.int())
                    .with_unknown_tagged_fields(g.tags(true)),
            );
        }
        if flex && g.bit() {
            p = p.with_snapshot_id(
                SnapshotId::default()
                    .with_end_offset(g.long())
                    .with_epoch(g.int())
                    .with_unknown_tagged_fields(g.tags(true)),
            );
        }
        p
    };
    let topic = |g: &mut Gen| {
        FetchableTopicResponse::default()
            .with_topic(TopicName(g.str()))
            .with_partitions(g.many(partition))
            .with_unknown_tagged_fields(g.tags(flex))
    };
    let session = if v >= 7 { g.int() } else { 0 };
    FetchResponse::default()
        .with_throttle_time_ms(g.int())
        .with_error_code(g.small())
        .with_session_id(session)
        .with_responses(g.many(topic))
        .with_unknown_tagged_fields(g.tags(flex))
}

fn txn_offset_commit(g: &mut Gen, v: i16) -> txn_commit::TxnOffsetCommitResponse {
    let flex = v >= 3;
    let partition = |g: &mut Gen| {
        txn_commit::TxnOffsetCommitResponsePartition::default()
            .with_partition_index(g.int())
            .with_error_code(g.small())
            .with_unknown_tagged_fields(g.tags(flex))
    };
    let topic = |g: &mut Gen| {
        txn_commit::TxnOffsetCommitResponseTopic::default()
            .with_name(TopicName(g.str()))
            .with_partitions(g.many(partition))
            .with_unknown_tagged_fields(g.tags(flex))
    };
    txn_commit::TxnOffsetCommitResponse::default()
        .with_throttle_time_ms(g.int())
        .with_topics(g.many(topic))
        .with_unknown_tagged_fields(g.tags(flex))
}

fn offset_fetch(g: &mut Gen, v: i16) -> offset_fetch::OffsetFetchResponse {
    // Both versions covered (7 and 8) are flexible.
    let resp = offset_fetch::OffsetFetchResponse::default()
        .with_throttle_time_ms(g.int())
        .with_unknown_tagged_fields(g.tags(true));
    if v <= 7 {
        let partition = |g: &mut Gen| {
            offset_fetch::OffsetFetchResponsePartition::default()
                .with_partition_index(g.int())
                .with_committed_offset(g.long())
                .with_committed_leader_epoch(g.int())
                .with_metadata(g.opt())
                .with_error_code(g.small())
                .with_unknown_tagged_fields(g.tags(true))
        };
        let topic = |g: &mut Gen| {
            offset_fetch::OffsetFetchResponseTopic::default()
                .with_name(TopicName(g.str()))
                .with_partitions(g.many(partition))
                .with_unknown_tagged_fields(g.tags(true))
        };
        return resp.with_topics(g.many(topic)).with_error_code(g.small());
    }
    let partition = |g: &mut Gen| {
        offset_fetch::OffsetFetchResponsePartitions::default()
            .with_partition_index(g.int())
            .with_committed_offset(g.long())
            .with_committed_leader_epoch(g.int())
            .with_metadata(g.opt())
            .with_error_code(g.small())
            .with_unknown_tagged_fields(g.tags(true))
    };
    let topic = |g: &mut Gen| {
        offset_fetch::OffsetFetchResponseTopics::default()
            .with_name(TopicName(g.str()))
            .with_partitions(g.many(partition))
            .with_unknown_tagged_fields(g.tags(true))
    };
    let group = |g: &mut Gen| {
        offset_fetch::OffsetFetchResponseGroup::default()
            .with_group_id(GroupId(g.str()))
            .with_topics(g.many(topic))
            .with_error_code(g.small())
            .with_unknown_tagged_fields(g.tags(true))
    };
    resp.with_groups(g.many(group))
}

fn encode<T: Encodable>(message: &T, version: i16) -> Vec<u8> {
    let mut buf = BytesMut::new();
    message
        .encode(&mut buf, version)
        .unwrap_or_else(|e| panic!("kafka-protocol refused to encode v{version}: {e}"));
    buf.to_vec()
}

/// A response of `api_key` at `version`, built from `g` and encoded by
/// `kafka-protocol`.
fn encoded(api_key: i16, v: i16, g: &mut Gen) -> Vec<u8> {
    match api_key {
        18 => encode(&api_versions(g, v), v),
        17 => encode(
            &SaslHandshakeResponse::default()
                .with_error_code(g.small())
                .with_mechanisms(g.many(Gen::str)),
            v,
        ),
        36 => encode(
            &SaslAuthenticateResponse::default()
                .with_error_code(g.small())
                .with_error_message(g.opt())
                .with_auth_bytes(g.blob())
                .with_session_lifetime_ms(g.long())
                .with_unknown_tagged_fields(g.tags(v >= 2)),
            v,
        ),
        10 => encode(&find_coordinator(g, v), v),
        65 => encode(&describe_transactions(g), v),
        61 => encode(&describe_producers(g), v),
        22 => encode(
            &InitProducerIdResponse::default()
                .with_throttle_time_ms(g.int())
                .with_error_code(g.small())
                .with_producer_id(ProducerId(g.long()))
                .with_producer_epoch(g.small())
                .with_unknown_tagged_fields(g.tags(v >= 2)),
            v,
        ),
        24 => encode(&add_partitions_to_txn(g, v), v),
        0 => encode(&produce(g, v), v),
        26 => encode(
            &EndTxnResponse::default()
                .with_throttle_time_ms(g.int())
                .with_error_code(g.small())
                .with_unknown_tagged_fields(g.tags(v >= 3)),
            v,
        ),
        3 => encode(&metadata(g, v), v),
        32 => encode(&describe_configs(g, v), v),
        2 => encode(&list_offsets(g, v), v),
        1 => encode(&fetch(g, v), v),
        25 => encode(
            &AddOffsetsToTxnResponse::default()
                .with_throttle_time_ms(g.int())
                .with_error_code(g.small())
                .with_unknown_tagged_fields(g.tags(v >= 3)),
            v,
        ),
        28 => encode(&txn_offset_commit(g, v), v),
        9 => encode(&offset_fetch(g, v), v),
        _ => panic!("no builder for API key {api_key}"),
    }
}

/// Decodes `body` with `kafka-protocol`; `Ok` is the bytes it left.
fn decoded_rest(api_key: i16, v: i16, body: &[u8]) -> Result<usize, String> {
    fn rest<T: Decodable>(body: &[u8], v: i16) -> Result<usize, String> {
        let mut buf = Bytes::copy_from_slice(body);
        T::decode(&mut buf, v).map_err(|e| format!("{e:#}"))?;
        Ok(buf.remaining())
    }
    match api_key {
        18 => rest::<ApiVersionsResponse>(body, v),
        17 => rest::<SaslHandshakeResponse>(body, v),
        36 => rest::<SaslAuthenticateResponse>(body, v),
        10 => rest::<find_coord::FindCoordinatorResponse>(body, v),
        65 => rest::<describe_txn::DescribeTransactionsResponse>(body, v),
        61 => rest::<describe_producers::DescribeProducersResponse>(body, v),
        22 => rest::<InitProducerIdResponse>(body, v),
        24 => rest::<add_txn::AddPartitionsToTxnResponse>(body, v),
        0 => rest::<ProduceResponse>(body, v),
        26 => rest::<EndTxnResponse>(body, v),
        3 => rest::<meta::MetadataResponse>(body, v),
        32 => rest::<configs::DescribeConfigsResponse>(body, v),
        2 => rest::<offsets::ListOffsetsResponse>(body, v),
        1 => rest::<FetchResponse>(body, v),
        25 => rest::<AddOffsetsToTxnResponse>(body, v),
        28 => rest::<txn_commit::TxnOffsetCommitResponse>(body, v),
        9 => rest::<offset_fetch::OffsetFetchResponse>(body, v),
        _ => panic!("no decoder for API key {api_key}"),
    }
}

/// The walker accepts `body`, `kafka-protocol` decodes all of it, and the
/// walker refuses every strict prefix and the body plus one byte.
fn check_encoding(api_key: i16, v: i16, body: &[u8]) -> Result<(), TestCaseError> {
    let accepted = check_response(api_key, v, body);
    prop_assert!(accepted.is_ok(), "key {api_key} v{v}: {accepted:?}");
    prop_assert_eq!(decoded_rest(api_key, v, body), Ok(0));
    for len in 0..body.len() {
        let refused = check_response(api_key, v, &body[..len]);
        prop_assert!(
            matches!(refused, Err(FrameError::Body { .. })),
            "key {} v{} prefix {} of {}: {:?}",
            api_key,
            v,
            len,
            body.len(),
            refused
        );
    }
    let mut longer = body.to_vec();
    longer.push(0);
    let refused = check_response(api_key, v, &longer);
    prop_assert!(
        matches!(
            &refused,
            Err(FrameError::Body {
                problem: Problem::Trailing(1),
                ..
            })
        ),
        "key {api_key} v{v} plus a byte: {refused:?}"
    );
    Ok(())
}

macro_rules! encodings_test {
    ($($name:ident: $key:expr,)*) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(48))]
            $(
                #[test]
                fn $name(g in gen()) {
                    for &v in versions_of($key) {
                        let body = encoded($key, v, &mut g.clone());
                        check_encoding($key, v, &body)?;
                    }
                }
            )*
        }
    };
}

encodings_test! {
    api_versions_encodings_pass_and_their_prefixes_fail: 18,
    sasl_handshake_encodings_pass_and_their_prefixes_fail: 17,
    sasl_authenticate_encodings_pass_and_their_prefixes_fail: 36,
    find_coordinator_encodings_pass_and_their_prefixes_fail: 10,
    describe_transactions_encodings_pass_and_their_prefixes_fail: 65,
    init_producer_id_encodings_pass_and_their_prefixes_fail: 22,
    add_partitions_to_txn_encodings_pass_and_their_prefixes_fail: 24,
    produce_encodings_pass_and_their_prefixes_fail: 0,
    end_txn_encodings_pass_and_their_prefixes_fail: 26,
    metadata_encodings_pass_and_their_prefixes_fail: 3,
    describe_configs_encodings_pass_and_their_prefixes_fail: 32,
    list_offsets_encodings_pass_and_their_prefixes_fail: 2,
    fetch_encodings_pass_and_their_prefixes_fail: 1,
    add_offsets_to_txn_encodings_pass_and_their_prefixes_fail: 25,
    txn_offset_commit_encodings_pass_and_their_prefixes_fail: 28,
    offset_fetch_encodings_pass_and_their_prefixes_fail: 9,
}

proptest! {
    /// Whatever the walker accepts of a corrupted encoding, `kafka-protocol`
    /// decodes to its end (or refuses only for invalid UTF-8).
    #[test]
    fn accepted_corruptions_decode_to_the_end(
        api in 0..CLIENT_VERSIONS.len(),
        version in any::<prop::sample::Index>(),
        g in gen(),
        edits in vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let (key, versions) = CLIENT_VERSIONS[api];
        let v = versions[version.index(versions.len())];
        let mut body = encoded(key, v, &mut g.clone());
        prop_assume!(!body.is_empty());
        for (at, byte) in edits {
            let at = at.index(body.len());
            body[at] = byte;
        }
        if check_response(key, v, &body).is_ok() {
            match decoded_rest(key, v, &body) {
                Ok(rest) => prop_assert_eq!(rest, 0, "key {} v{}", key, v),
                Err(e) => prop_assert!(e.contains("utf-8"), "key {} v{}: {}", key, v, e),
            }
        }
    }
}

fn be16(n: i16) -> Vec<u8> {
    n.to_be_bytes().to_vec()
}

fn be32(n: i32) -> Vec<u8> {
    n.to_be_bytes().to_vec()
}

fn uvarint(mut n: u32) -> Vec<u8> {
    let mut out = Vec::new();
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out
}

/// Asserts `body` is refused at `field` with `problem`, and that the
/// message names the API, the version, the field and the number.
fn assert_refused(api_key: i16, v: i16, body: &[u8], field: &str, problem: Problem, number: u64) {
    let err = check_response(api_key, v, body).expect_err("the frame must be refused");
    let message = err.to_string();
    match err {
        FrameError::Body {
            field: at,
            problem: found,
            api_key: key,
            version,
            api,
        } => {
            assert_eq!((key, version), (api_key, v));
            assert_eq!(at, field, "{message}");
            assert_eq!(found, problem, "{message}");
            for part in [api, &format!("v{v}"), field, &number.to_string()] {
                assert!(message.contains(part), "{message:?} lacks {part:?}");
            }
        }
        other => panic!("refused for another reason: {other}"),
    }
}

#[test]
fn huge_array_counts_are_refused_naming_the_field() {
    let tail = [0u8; 8];
    // Metadata v1: brokers, a classic i32 count.
    let body = [be32(0x7fff_ffff), tail.to_vec()].concat();
    let problem = Problem::CountTooLarge {
        count: 0x7fff_ffff,
        left: 8,
    };
    assert_refused(3, 1, &body, "brokers", problem, 0x7fff_ffff);

    // Metadata v12: throttle_time_ms, then brokers as a compact count.
    let body = [be32(0), uvarint(u32::MAX), tail.to_vec()].concat();
    let count = u64::from(u32::MAX - 1);
    let problem = Problem::CountTooLarge { count, left: 8 };
    assert_refused(3, 12, &body, "brokers", problem, count);

    // Fetch v12: one topic "t", then a huge partitions count.
    let body = [
        be32(0),
        be16(0),
        be32(0),
        uvarint(2),
        uvarint(2),
        b"t".to_vec(),
        uvarint(u32::MAX),
    ]
    .concat();
    let problem = Problem::CountTooLarge { count, left: 0 };
    assert_refused(1, 12, &body, "responses[0].partitions", problem, count);

    // Fetch v11: one topic, one partition, huge aborted_transactions.
    let body = [
        be32(0),
        be16(0),
        be32(0),
        be32(1),
        be16(1),
        b"t".to_vec(),
        be32(1),
        vec![0; 4 + 2 + 8 + 8 + 8],
        be32(0x7fff_ffff),
        tail.to_vec(),
    ]
    .concat();
    let field = "responses[0].partitions[0].aborted_transactions";
    let problem = Problem::CountTooLarge {
        count: 0x7fff_ffff,
        left: 8,
    };
    assert_refused(1, 11, &body, field, problem, 0x7fff_ffff);

    // ApiVersions v3: a known tagged field (supported_features) whose
    // value is a huge compact array, checked within its declared size.
    let value = uvarint(u32::MAX);
    let body = [
        be16(0),
        uvarint(1),
        be32(0),
        uvarint(1),
        uvarint(0),
        uvarint(value.len() as u32),
        value,
    ]
    .concat();
    let problem = Problem::CountTooLarge { count, left: 0 };
    assert_refused(18, 3, &body, "supported_features", problem, count);

    // ApiVersions v0: api_keys.
    let body = [be16(0), be32(0x7fff_ffff), tail.to_vec()].concat();
    let problem = Problem::CountTooLarge {
        count: 0x7fff_ffff,
        left: 8,
    };
    assert_refused(18, 0, &body, "api_keys", problem, 0x7fff_ffff);

    // EndTxn v3: a huge count of tagged fields.
    let body = [be32(0), be16(0), uvarint(u32::MAX)].concat();
    let problem = Problem::CountTooLarge {
        count: u64::from(u32::MAX),
        left: 0,
    };
    assert_refused(26, 3, &body, "tagged_fields", problem, u64::from(u32::MAX));
}

#[test]
fn huge_lengths_and_tag_sizes_are_refused_naming_the_field() {
    // SaslHandshake v1: a mechanism string longer than the frame.
    let body = [be16(0), be32(1), be16(i16::MAX), b"abc".to_vec()].concat();
    let problem = Problem::LengthTooLarge {
        len: i16::MAX as u64,
        left: 3,
    };
    assert_refused(17, 1, &body, "mechanisms[0]", problem, i16::MAX as u64);

    // SaslAuthenticate v2: null error_message, then huge compact bytes.
    let body = [be16(0), uvarint(0), uvarint(u32::MAX), vec![0; 8]].concat();
    let len = u64::from(u32::MAX - 1);
    let problem = Problem::LengthTooLarge { len, left: 8 };
    assert_refused(36, 2, &body, "auth_bytes", problem, len);

    // EndTxn v3: an unknown tagged field declaring u32::MAX bytes.
    let body = [be32(0), be16(0), uvarint(1), uvarint(7), uvarint(u32::MAX)].concat();
    let len = u64::from(u32::MAX);
    let problem = Problem::LengthTooLarge { len, left: 0 };
    assert_refused(26, 3, &body, "tagged_fields[tag 7]", problem, len);
}

#[test]
fn malformed_lengths_and_tags_are_refused() {
    // Metadata v1: a negative brokers count, and the null marker for it.
    let body = [be32(-2), vec![0; 8]].concat();
    assert_refused(3, 1, &body, "brokers", Problem::Negative(-2), 2);
    let err = check_response(3, 1, &[be32(-1), vec![0; 8]].concat()).unwrap_err();
    assert!(
        matches!(
            err,
            FrameError::Body {
                problem: Problem::Null,
                ..
            }
        ),
        "{err}"
    );

    // Metadata v12: a compact count needing more than 32 bits.
    let body = [be32(0), vec![0xff, 0xff, 0xff, 0xff, 0x1f]].concat();
    let err = check_response(3, 12, &body).unwrap_err();
    assert!(
        matches!(
            err,
            FrameError::Body {
                problem: Problem::Varint,
                ..
            }
        ),
        "{err}"
    );

    // ApiVersions v3: finalized_features_epoch (tag 1, an Int64) declared
    // with 9 bytes, then with 7.
    let head = [be16(0), uvarint(1), be32(0), uvarint(1), uvarint(1)].concat();
    let body = [head.clone(), uvarint(9), vec![0; 9]].concat();
    let problem = Problem::TagSize {
        tag: 1,
        size: 9,
        used: 8,
    };
    assert_refused(18, 3, &body, "finalized_features_epoch", problem, 9);
    let body = [head, uvarint(7), vec![0; 7]].concat();
    let problem = Problem::Truncated { needed: 8, left: 7 };
    assert_refused(18, 3, &body, "finalized_features_epoch", problem, 7);

    // Fetch v12: tag 0 of the body (node_endpoints) exists from v16 only.
    let body = [
        be32(0),
        be16(0),
        be32(0),
        uvarint(1),
        uvarint(1),
        uvarint(0),
        uvarint(1),
        uvarint(1),
    ]
    .concat();
    let problem = Problem::TagVersion { tag: 0 };
    assert_refused(1, 12, &body, "node_endpoints", problem, 0);
}

#[test]
fn response_headers_are_checked() {
    let mut g = Gen::minimal();
    g.tag_sets = vec![BTreeMap::from([(11, vec![1, 2, 3]), (500, vec![])])];
    for flexible in [false, true] {
        let header = ResponseHeader::default()
            .with_correlation_id(7)
            .with_unknown_tagged_fields(g.tags(flexible));
        let bytes = encode(&header, i16::from(flexible));
        let frame = [bytes.clone(), vec![9; 5]].concat();
        assert_eq!(
            check_response_header(flexible, &frame).ok(),
            Some(bytes.len())
        );
        for len in 0..bytes.len() {
            let refused = check_response_header(flexible, &bytes[..len]);
            assert!(
                matches!(refused, Err(FrameError::Header { .. })),
                "{len}: {refused:?}"
            );
        }
    }
    let overrun = [be32(7), uvarint(1), uvarint(3), uvarint(1000), vec![0; 4]].concat();
    let err = check_response_header(true, &overrun).unwrap_err();
    let problem = Problem::LengthTooLarge { len: 1000, left: 4 };
    assert!(
        matches!(&err, FrameError::Header { field, problem: p, .. }
            if field == "tagged_fields[tag 3]" && *p == problem),
        "{err}"
    );
}

#[test]
fn covered_pairs_are_exactly_the_client_s() {
    let expected: Vec<(i16, i16)> = CLIENT_VERSIONS
        .iter()
        .flat_map(|(key, versions)| versions.iter().map(move |&v| (*key, v)))
        .collect();
    let mut found: Vec<(i16, i16)> = covered().collect();
    let mut sorted = expected.clone();
    sorted.sort_unstable();
    found.sort_unstable();
    assert_eq!(found, sorted);
    assert_eq!(expected.len(), 82);

    for &(key, versions) in CLIENT_VERSIONS {
        for v in -1..=20 {
            let body = if versions.contains(&v) {
                encoded(key, v, &mut Gen::minimal())
            } else {
                Vec::new()
            };
            let checked = check_response(key, v, &body);
            if versions.contains(&v) {
                assert!(checked.is_ok(), "key {key} v{v}: {checked:?}");
            } else {
                assert!(
                    matches!(checked, Err(FrameError::Unknown { api_key, version })
                        if (api_key, version) == (key, v)),
                    "key {key} v{v}: {checked:?}"
                );
            }
        }
    }
    for key in [4, 8, 9, 19, 33, 60, 66, i16::MAX] {
        let checked = check_response(key, 0, &[0; 64]);
        assert!(
            matches!(checked, Err(FrameError::Unknown { .. })),
            "{checked:?}"
        );
    }
}
