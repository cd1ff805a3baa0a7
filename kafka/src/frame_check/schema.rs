//! The response layouts the frame check walks, transcribed from
//! `kafka-protocol` 0.18's generated decoders (`src/messages/*_response.rs`):
//! each field with the versions it is present in, each known tagged field
//! with its tag and versions, and per API its first flexible version.
//!
//! Long module: one transcription, table for table in the order of the
//! decoders it copies, so that a reviewer checks it against them side by
//! side; splitting it would only scatter the tables.

use Ty::{
    Array, Bool, Bytes, Int16, Int32, Int64, Int8, NullableArray, NullableStr, Records, Str, Uuid,
};

/// A field's wire type. Strings, bytes and arrays take their compact
/// encoding (unsigned varint length plus one) in flexible versions.
#[derive(Debug, Clone, Copy)]
pub(super) enum Ty {
    Int8,
    Int16,
    Int32,
    Int64,
    Uuid,
    Bool,
    Str,
    NullableStr,
    Bytes,
    /// A record set: nullable bytes, not looked into.
    Records,
    Array(&'static Ty),
    NullableArray(&'static Ty),
    /// A struct; in flexible versions it ends with its tagged fields.
    Struct(&'static Schema),
}

/// The versions, inclusive, in which a field or tag is present.
#[derive(Debug, Clone, Copy)]
pub(super) struct Versions {
    min: i16,
    max: i16,
}

impl Versions {
    pub(super) fn contains(self, version: i16) -> bool {
        self.min <= version && version <= self.max
    }
}

const ALL: Versions = Versions {
    min: 0,
    max: i16::MAX,
};

const fn from(min: i16) -> Versions {
    Versions { min, max: i16::MAX }
}

const fn to(max: i16) -> Versions {
    Versions { min: 0, max }
}

const fn between(min: i16, max: i16) -> Versions {
    Versions { min, max }
}

/// A field of a struct, in wire order.
#[derive(Debug)]
pub(super) struct Field {
    pub(super) name: &'static str,
    pub(super) ty: Ty,
    pub(super) versions: Versions,
}

/// A tagged field `kafka-protocol` decodes by its tag (others are skipped).
#[derive(Debug)]
pub(super) struct Tag {
    pub(super) tag: u32,
    pub(super) name: &'static str,
    pub(super) ty: Ty,
    pub(super) versions: Versions,
}

/// A struct: its fields, then (in flexible versions) its tagged fields.
#[derive(Debug)]
pub(super) struct Schema {
    pub(super) fields: &'static [Field],
    pub(super) tags: &'static [Tag],
}

/// The response of one API.
#[derive(Debug)]
pub(super) struct Api {
    pub(super) key: i16,
    pub(super) name: &'static str,
    /// The versions the walker is used for (the client sends no others).
    pub(super) covered: &'static [i16],
    /// The first flexible version (`i16::MAX`: none).
    pub(super) flexible_from: i16,
    pub(super) body: Schema,
}

const fn f(name: &'static str, ty: Ty, versions: Versions) -> Field {
    Field { name, ty, versions }
}

const fn t(tag: u32, name: &'static str, ty: Ty, versions: Versions) -> Tag {
    Tag {
        tag,
        name,
        ty,
        versions,
    }
}

const fn plain(fields: &'static [Field]) -> Schema {
    Schema { fields, tags: &[] }
}

const fn s(schema: &'static Schema) -> Ty {
    Ty::Struct(schema)
}

/// The response header: a correlation id, then tagged fields when flexible.
pub(super) const RESPONSE_HEADER: Schema = plain(&[f("correlation_id", Int32, ALL)]);

const NEVER: i16 = i16::MAX;

// ApiVersions (18)
const API_VERSION: Schema = plain(&[
    f("api_key", Int16, ALL),
    f("min_version", Int16, ALL),
    f("max_version", Int16, ALL),
]);
const SUPPORTED_FEATURE: Schema = plain(&[
    f("name", Str, from(3)),
    f("min_version", Int16, from(3)),
    f("max_version", Int16, from(3)),
]);
const FINALIZED_FEATURE: Schema = plain(&[
    f("name", Str, from(3)),
    f("max_version_level", Int16, from(3)),
    f("min_version_level", Int16, from(3)),
]);

// FindCoordinator (10)
const COORDINATOR: Schema = plain(&[
    f("key", Str, from(4)),
    f("node_id", Int32, from(4)),
    f("host", Str, from(4)),
    f("port", Int32, from(4)),
    f("error_code", Int16, from(4)),
    f("error_message", NullableStr, from(4)),
]);

// DescribeTransactions (65)
const TXN_TOPIC: Schema = plain(&[f("topic", Str, ALL), f("partitions", Array(&Int32), ALL)]);
const TXN_STATE: Schema = plain(&[
    f("error_code", Int16, ALL),
    f("transactional_id", Str, ALL),
    f("transaction_state", Str, ALL),
    f("transaction_timeout_ms", Int32, ALL),
    f("transaction_start_time_ms", Int64, ALL),
    f("producer_id", Int64, ALL),
    f("producer_epoch", Int16, ALL),
    f("topics", Array(&s(&TXN_TOPIC)), ALL),
]);

// DescribeProducers (61)
const PRODUCER_STATE: Schema = plain(&[
    f("producer_id", Int64, ALL),
    f("producer_epoch", Int32, ALL),
    f("last_sequence", Int32, ALL),
    f("last_timestamp", Int64, ALL),
    f("coordinator_epoch", Int32, ALL),
    f("current_txn_start_offset", Int64, ALL),
]);
const PRODUCERS_PARTITION: Schema = plain(&[
    f("partition_index", Int32, ALL),
    f("error_code", Int16, ALL),
    f("error_message", NullableStr, ALL),
    f("active_producers", Array(&s(&PRODUCER_STATE)), ALL),
]);
const PRODUCERS_TOPIC: Schema = plain(&[
    f("name", Str, ALL),
    f("partitions", Array(&s(&PRODUCERS_PARTITION)), ALL),
]);

// AddPartitionsToTxn (24)
const ADD_PARTITION_RESULT: Schema = plain(&[
    f("partition_index", Int32, ALL),
    f("partition_error_code", Int16, ALL),
]);
const ADD_TOPIC_RESULT: Schema = plain(&[
    f("name", Str, ALL),
    f(
        "results_by_partition",
        Array(&s(&ADD_PARTITION_RESULT)),
        ALL,
    ),
]);
const ADD_TXN_RESULT: Schema = plain(&[
    f("transactional_id", Str, from(4)),
    f("topic_results", Array(&s(&ADD_TOPIC_RESULT)), from(4)),
]);

// Produce (0)
const BATCH_INDEX_ERROR: Schema = plain(&[
    f("batch_index", Int32, from(8)),
    f("batch_index_error_message", NullableStr, from(8)),
]);
const PRODUCE_LEADER: Schema = plain(&[
    f("leader_id", Int32, from(10)),
    f("leader_epoch", Int32, from(10)),
]);
const PRODUCE_NODE: Schema = plain(&[
    f("node_id", Int32, from(10)),
    f("host", Str, from(10)),
    f("port", Int32, from(10)),
    f("rack", NullableStr, from(10)),
]);
const PRODUCE_PARTITION: Schema = Schema {
    fields: &[
        f("index", Int32, ALL),
        f("error_code", Int16, ALL),
        f("base_offset", Int64, ALL),
        f("log_append_time_ms", Int64, ALL),
        f("log_start_offset", Int64, from(5)),
        f("record_errors", Array(&s(&BATCH_INDEX_ERROR)), from(8)),
        f("error_message", NullableStr, from(8)),
    ],
    tags: &[t(0, "current_leader", s(&PRODUCE_LEADER), from(10))],
};
const PRODUCE_TOPIC: Schema = plain(&[
    f("name", Str, to(12)),
    f("topic_id", Uuid, from(13)),
    f("partition_responses", Array(&s(&PRODUCE_PARTITION)), ALL),
]);

// Metadata (3)
const METADATA_BROKER: Schema = plain(&[
    f("node_id", Int32, ALL),
    f("host", Str, ALL),
    f("port", Int32, ALL),
    f("rack", NullableStr, from(1)),
]);
const METADATA_PARTITION: Schema = plain(&[
    f("error_code", Int16, ALL),
    f("partition_index", Int32, ALL),
    f("leader_id", Int32, ALL),
    f("leader_epoch", Int32, from(7)),
    f("replica_nodes", Array(&Int32), ALL),
    f("isr_nodes", Array(&Int32), ALL),
    f("offline_replicas", Array(&Int32), from(5)),
]);
const METADATA_TOPIC: Schema = plain(&[
    f("error_code", Int16, ALL),
    f("name", NullableStr, ALL),
    f("topic_id", Uuid, from(10)),
    f("is_internal", Bool, from(1)),
    f("partitions", Array(&s(&METADATA_PARTITION)), ALL),
    f("topic_authorized_operations", Int32, from(8)),
]);

// DescribeConfigs (32)
const CONFIG_SYNONYM: Schema = plain(&[
    f("name", Str, ALL),
    f("value", NullableStr, ALL),
    f("source", Int8, ALL),
]);
const CONFIG_ENTRY: Schema = plain(&[
    f("name", Str, ALL),
    f("value", NullableStr, ALL),
    f("read_only", Bool, ALL),
    f("config_source", Int8, ALL),
    f("is_sensitive", Bool, ALL),
    f("synonyms", Array(&s(&CONFIG_SYNONYM)), ALL),
    f("config_type", Int8, from(3)),
    f("documentation", NullableStr, from(3)),
]);
const CONFIG_RESULT: Schema = plain(&[
    f("error_code", Int16, ALL),
    f("error_message", NullableStr, ALL),
    f("resource_type", Int8, ALL),
    f("resource_name", Str, ALL),
    f("configs", Array(&s(&CONFIG_ENTRY)), ALL),
]);

// ListOffsets (2)
const OFFSETS_PARTITION: Schema = plain(&[
    f("partition_index", Int32, ALL),
    f("error_code", Int16, ALL),
    f("timestamp", Int64, ALL),
    f("offset", Int64, ALL),
    f("leader_epoch", Int32, from(4)),
]);
const OFFSETS_TOPIC: Schema = plain(&[
    f("name", Str, ALL),
    f("partitions", Array(&s(&OFFSETS_PARTITION)), ALL),
]);

// Fetch (1)
const ABORTED_TXN: Schema = plain(&[f("producer_id", Int64, ALL), f("first_offset", Int64, ALL)]);
const EPOCH_END_OFFSET: Schema = plain(&[
    f("epoch", Int32, from(12)),
    f("end_offset", Int64, from(12)),
]);
const FETCH_LEADER: Schema = plain(&[
    f("leader_id", Int32, from(12)),
    f("leader_epoch", Int32, from(12)),
]);
const SNAPSHOT_ID: Schema = plain(&[f("end_offset", Int64, ALL), f("epoch", Int32, ALL)]);
const FETCH_NODE: Schema = plain(&[
    f("node_id", Int32, from(16)),
    f("host", Str, from(16)),
    f("port", Int32, from(16)),
    f("rack", NullableStr, from(16)),
]);
const FETCH_PARTITION: Schema = Schema {
    fields: &[
        f("partition_index", Int32, ALL),
        f("error_code", Int16, ALL),
        f("high_watermark", Int64, ALL),
        f("last_stable_offset", Int64, ALL),
        f("log_start_offset", Int64, from(5)),
        f("aborted_transactions", NullableArray(&s(&ABORTED_TXN)), ALL),
        f("preferred_read_replica", Int32, from(11)),
        f("records", Records, ALL),
    ],
    tags: &[
        t(0, "diverging_epoch", s(&EPOCH_END_OFFSET), ALL),
        t(1, "current_leader", s(&FETCH_LEADER), ALL),
        t(2, "snapshot_id", s(&SNAPSHOT_ID), ALL),
    ],
};
const FETCH_TOPIC: Schema = plain(&[
    f("topic", Str, to(12)),
    f("topic_id", Uuid, from(13)),
    f("partitions", Array(&s(&FETCH_PARTITION)), ALL),
]);

// TxnOffsetCommit (28)
const TXN_COMMIT_PARTITION: Schema = plain(&[
    f("partition_index", Int32, ALL),
    f("error_code", Int16, ALL),
]);
const TXN_COMMIT_TOPIC: Schema = plain(&[
    f("name", Str, ALL),
    f("partitions", Array(&s(&TXN_COMMIT_PARTITION)), ALL),
]);

// OffsetFetch (9)
const FETCHED_OFFSET: Schema = plain(&[
    f("partition_index", Int32, ALL),
    f("committed_offset", Int64, ALL),
    f("committed_leader_epoch", Int32, from(5)),
    f("metadata", NullableStr, ALL),
    f("error_code", Int16, ALL),
]);
const FETCHED_TOPIC: Schema = plain(&[
    f("name", Str, to(9)),
    f("topic_id", Uuid, from(10)),
    f("partitions", Array(&s(&FETCHED_OFFSET)), ALL),
]);
const FETCHED_GROUP: Schema = plain(&[
    f("group_id", Str, from(8)),
    f("topics", Array(&s(&FETCHED_TOPIC)), from(8)),
    f("error_code", Int16, from(8)),
]);

/// Every response the walker knows.
pub(super) const APIS: &[Api] = &[
    Api {
        key: 18,
        name: "ApiVersions",
        covered: &[0, 3],
        flexible_from: 3,
        body: Schema {
            fields: &[
                f("error_code", Int16, ALL),
                f("api_keys", Array(&s(&API_VERSION)), ALL),
                f("throttle_time_ms", Int32, from(1)),
            ],
            tags: &[
                t(0, "supported_features", Array(&s(&SUPPORTED_FEATURE)), ALL),
                t(1, "finalized_features_epoch", Int64, ALL),
                t(2, "finalized_features", Array(&s(&FINALIZED_FEATURE)), ALL),
                t(3, "zk_migration_ready", Bool, ALL),
            ],
        },
    },
    Api {
        key: 17,
        name: "SaslHandshake",
        covered: &[1],
        flexible_from: NEVER,
        body: plain(&[
            f("error_code", Int16, ALL),
            f("mechanisms", Array(&Str), ALL),
        ]),
    },
    Api {
        key: 36,
        name: "SaslAuthenticate",
        covered: &[0, 1, 2],
        flexible_from: 2,
        body: plain(&[
            f("error_code", Int16, ALL),
            f("error_message", NullableStr, ALL),
            f("auth_bytes", Bytes, ALL),
            f("session_lifetime_ms", Int64, from(1)),
        ]),
    },
    Api {
        key: 10,
        name: "FindCoordinator",
        covered: &[0, 1, 2, 3, 4, 5, 6],
        flexible_from: 3,
        body: plain(&[
            f("throttle_time_ms", Int32, from(1)),
            f("error_code", Int16, to(3)),
            f("error_message", NullableStr, between(1, 3)),
            f("node_id", Int32, to(3)),
            f("host", Str, to(3)),
            f("port", Int32, to(3)),
            f("coordinators", Array(&s(&COORDINATOR)), from(4)),
        ]),
    },
    Api {
        key: 65,
        name: "DescribeTransactions",
        covered: &[0],
        flexible_from: 0,
        body: plain(&[
            f("throttle_time_ms", Int32, ALL),
            f("transaction_states", Array(&s(&TXN_STATE)), ALL),
        ]),
    },
    Api {
        key: 61,
        name: "DescribeProducers",
        covered: &[0],
        flexible_from: 0,
        body: plain(&[
            f("throttle_time_ms", Int32, ALL),
            f("topics", Array(&s(&PRODUCERS_TOPIC)), ALL),
        ]),
    },
    Api {
        key: 22,
        name: "InitProducerId",
        covered: &[0, 1, 2, 3, 4],
        flexible_from: 2,
        body: plain(&[
            f("throttle_time_ms", Int32, ALL),
            f("error_code", Int16, ALL),
            f("producer_id", Int64, ALL),
            f("producer_epoch", Int16, ALL),
            f("ongoing_txn_producer_id", Int64, from(6)),
            f("ongoing_txn_producer_epoch", Int16, from(6)),
        ]),
    },
    Api {
        key: 24,
        name: "AddPartitionsToTxn",
        covered: &[0, 1, 2, 3],
        flexible_from: 3,
        body: plain(&[
            f("throttle_time_ms", Int32, ALL),
            f("error_code", Int16, from(4)),
            f(
                "results_by_transaction",
                Array(&s(&ADD_TXN_RESULT)),
                from(4),
            ),
            f(
                "results_by_topic_v3_and_below",
                Array(&s(&ADD_TOPIC_RESULT)),
                to(3),
            ),
        ]),
    },
    Api {
        key: 0,
        name: "Produce",
        covered: &[3, 4, 5, 6, 7, 8, 9, 10, 11],
        flexible_from: 9,
        body: Schema {
            fields: &[
                f("responses", Array(&s(&PRODUCE_TOPIC)), ALL),
                f("throttle_time_ms", Int32, ALL),
            ],
            tags: &[t(0, "node_endpoints", Array(&s(&PRODUCE_NODE)), from(10))],
        },
    },
    Api {
        key: 26,
        name: "EndTxn",
        covered: &[0, 1, 2, 3, 4],
        flexible_from: 3,
        body: plain(&[
            f("throttle_time_ms", Int32, ALL),
            f("error_code", Int16, ALL),
            f("producer_id", Int64, from(5)),
            f("producer_epoch", Int16, from(5)),
        ]),
    },
    Api {
        key: 3,
        name: "Metadata",
        covered: &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
        flexible_from: 9,
        body: plain(&[
            f("throttle_time_ms", Int32, from(3)),
            f("brokers", Array(&s(&METADATA_BROKER)), ALL),
            f("cluster_id", NullableStr, from(2)),
            f("controller_id", Int32, from(1)),
            f("topics", Array(&s(&METADATA_TOPIC)), ALL),
            f("cluster_authorized_operations", Int32, between(8, 10)),
            f("error_code", Int16, from(13)),
        ]),
    },
    Api {
        key: 32,
        name: "DescribeConfigs",
        covered: &[1, 2, 3, 4],
        flexible_from: 4,
        body: plain(&[
            f("throttle_time_ms", Int32, ALL),
            f("results", Array(&s(&CONFIG_RESULT)), ALL),
        ]),
    },
    Api {
        key: 2,
        name: "ListOffsets",
        covered: &[2, 3, 4, 5, 6, 7, 8],
        flexible_from: 6,
        body: plain(&[
            f("throttle_time_ms", Int32, from(2)),
            f("topics", Array(&s(&OFFSETS_TOPIC)), ALL),
        ]),
    },
    Api {
        key: 1,
        name: "Fetch",
        covered: &[4, 5, 6, 7, 8, 9, 10, 11, 12],
        flexible_from: 12,
        body: Schema {
            fields: &[
                f("throttle_time_ms", Int32, ALL),
                f("error_code", Int16, from(7)),
                f("session_id", Int32, from(7)),
                f("responses", Array(&s(&FETCH_TOPIC)), ALL),
            ],
            tags: &[t(0, "node_endpoints", Array(&s(&FETCH_NODE)), from(16))],
        },
    },
    Api {
        key: 25,
        name: "AddOffsetsToTxn",
        covered: &[0, 1, 2, 3, 4],
        flexible_from: 3,
        body: plain(&[
            f("throttle_time_ms", Int32, ALL),
            f("error_code", Int16, ALL),
        ]),
    },
    Api {
        key: 28,
        name: "TxnOffsetCommit",
        covered: &[0, 1, 2, 3, 4],
        flexible_from: 3,
        body: plain(&[
            f("throttle_time_ms", Int32, ALL),
            f("topics", Array(&s(&TXN_COMMIT_TOPIC)), ALL),
        ]),
    },
    Api {
        key: 9,
        name: "OffsetFetch",
        covered: &[7, 8],
        flexible_from: 6,
        body: plain(&[
            f("throttle_time_ms", Int32, from(3)),
            f("topics", Array(&s(&FETCHED_TOPIC)), to(7)),
            f("error_code", Int16, between(2, 7)),
            f("groups", Array(&s(&FETCHED_GROUP)), from(8)),
        ]),
    },
];
