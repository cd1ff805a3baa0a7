//! The broker error codes the client acts on, and the one table that says
//! what each means for the request that got it ([`meaning`]).
//!
//! Codes are read through kafka-protocol's `ResponseError`: no request
//! module matches on a number. A request module asks [`meaning`] with its
//! API key and acts on the [`Meaning`]; the constants below name the few
//! codes a module must recognise by themselves (a SASL mechanism the broker
//! does not enable, say).

use kafka_protocol::error::ResponseError as E;
use kafka_protocol::messages::ApiKey;

/// No error.
pub const NONE: i16 = 0;
/// `UNKNOWN_TOPIC_OR_PARTITION`.
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = E::UnknownTopicOrPartition.code();
/// `COORDINATOR_LOAD_IN_PROGRESS`.
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = E::CoordinatorLoadInProgress.code();
/// `COORDINATOR_NOT_AVAILABLE`.
pub const COORDINATOR_NOT_AVAILABLE: i16 = E::CoordinatorNotAvailable.code();
/// `NOT_COORDINATOR`.
pub const NOT_COORDINATOR: i16 = E::NotCoordinator.code();
/// `TOPIC_AUTHORIZATION_FAILED`.
pub const TOPIC_AUTHORIZATION_FAILED: i16 = E::TopicAuthorizationFailed.code();
/// `GROUP_AUTHORIZATION_FAILED`.
pub const GROUP_AUTHORIZATION_FAILED: i16 = E::GroupAuthorizationFailed.code();
/// `CLUSTER_AUTHORIZATION_FAILED`.
pub const CLUSTER_AUTHORIZATION_FAILED: i16 = E::ClusterAuthorizationFailed.code();
/// `UNSUPPORTED_SASL_MECHANISM`.
pub const UNSUPPORTED_SASL_MECHANISM: i16 = E::UnsupportedSaslMechanism.code();
/// `UNSUPPORTED_VERSION`.
pub const UNSUPPORTED_VERSION: i16 = E::UnsupportedVersion.code();
/// `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`.
pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = E::TransactionalIdAuthorizationFailed.code();
/// `TRANSACTIONAL_ID_NOT_FOUND`.
pub const TRANSACTIONAL_ID_NOT_FOUND: i16 = E::TransactionalIdNotFound.code();
/// `TRANSACTION_ABORTABLE`: the request cannot join the producer's open
/// transaction (a partition the broker could not verify as part of it,
/// say); the transaction must be aborted, the epoch stays usable.
pub const TRANSACTION_ABORTABLE: i16 = E::TransactionAbortable.code();
/// `UNSTABLE_OFFSET_COMMIT`: an OffsetFetch with `require_stable` found an
/// offset commit of an open transaction for the partition.
pub const UNSTABLE_OFFSET_COMMIT: i16 = E::UnstableOffsetCommit.code();

/// The kind of resource an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// A topic.
    Topic,
    /// A consumer group.
    Group,
    /// The cluster (`kafka-cluster`).
    Cluster,
    /// A transactional id.
    TransactionalId,
}

/// What an error code means for the request that got it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meaning {
    /// No error.
    Ok,
    /// An earlier send of this very record batch was written
    /// (`DUPLICATE_SEQUENCE_NUMBER`): as good as no error.
    AlreadyWritten,
    /// The broker asked is not (or no longer) the coordinator: forget it,
    /// find it again, then retry.
    CoordinatorMoved,
    /// The broker asked is not (or no longer) the partition's leader, or
    /// its metadata is behind: forget the leader, ask Metadata again, then
    /// retry.
    LeaderMoved,
    /// The same broker may answer later (loading, too few replicas for
    /// now): retry after a pause. Nothing was carried out.
    Retry,
    /// The request may or may not have been carried out (a Produce that
    /// timed out waiting for its replicas, or written to the leader only):
    /// send the same request again; the outcome is unknown until then.
    OutcomeUnknown,
    /// `CONCURRENT_TRANSACTIONS`: the producer's previous transaction is
    /// being completed (its markers written), which takes milliseconds;
    /// retry soon.
    Busy,
    /// A newer epoch of the transactional id exists: the producer is fenced.
    Fenced,
    /// Not authorized on a resource of this kind: no retry mends it.
    Denied(Resource),
    /// The resource does not exist (a topic; a transactional id no producer
    /// has used, or that expired).
    Missing(Resource),
    /// `INVALID_TXN_STATE`: the coordinator (or the partition) has no open
    /// transaction of the producer where one was expected.
    NoOpenTransaction,
    /// The producer's record sequence is not the broker's
    /// (`OUT_OF_ORDER_SEQUENCE_NUMBER`, `UNKNOWN_PRODUCER_ID`): the epoch
    /// cannot write any more.
    BrokenSequence,
    /// The request's content is refused (a record batch too large or
    /// malformed, a transaction timeout over the brokers' maximum): a retry
    /// would be refused the same way.
    Invalid,
    /// `OPERATION_NOT_ATTEMPTED`: left alone because another part of the
    /// same request failed.
    NotAttempted,
    /// The consumer group has members of its own (`ILLEGAL_GENERATION`,
    /// `UNKNOWN_MEMBER_ID`, `FENCED_INSTANCE_ID`, `STALE_MEMBER_EPOCH`): a
    /// commit made without group membership is refused while consumers
    /// that joined the group hold it. No retry mends it while they do.
    GroupHasMembers,
    /// `OFFSET_OUT_OF_RANGE` to a Fetch: the offset asked is outside the
    /// partition's log (deleted by retention, a topic recreated). The
    /// caller chooses where to read instead.
    OutOfRange,
    /// Refused, and a retry would be refused the same way (an unknown code
    /// included).
    Refused,
}

/// What `code` means in the answer to a request of `api`: the one table of
/// the client. A code means the same for every request, except where the
/// match arms name the request.
pub fn meaning(api: ApiKey, code: i16) -> Meaning {
    use ApiKey as A;
    let Some(e) = E::try_from_code(code) else {
        return Meaning::Ok;
    };
    match (api, e) {
        (A::Produce, E::DuplicateSequenceNumber) => Meaning::AlreadyWritten,
        // A Produce that waited for its replicas in vain may have been
        // written to some of them.
        (
            A::Produce,
            E::RequestTimedOut | E::NotEnoughReplicasAfterAppend | E::NetworkException,
        ) => Meaning::OutcomeUnknown,
        // Requests to a partition's leader: an unknown partition is
        // metadata that is behind (a new topic, a moved partition).
        (A::Produce | A::ListOffsets | A::Fetch, E::UnknownTopicOrPartition) => {
            Meaning::LeaderMoved
        }
        // A new leader that has not caught up with the high watermark yet.
        (A::ListOffsets, E::OffsetNotAvailable) => Meaning::LeaderMoved,
        (A::Fetch, E::OffsetOutOfRange) => Meaning::OutOfRange,
        (_, E::UnknownTopicOrPartition) => Meaning::Missing(Resource::Topic),
        (_, E::TransactionalIdNotFound) => Meaning::Missing(Resource::TransactionalId),
        (_, E::NotCoordinator | E::CoordinatorNotAvailable) => Meaning::CoordinatorMoved,
        (
            _,
            E::NotLeaderOrFollower
            | E::LeaderNotAvailable
            | E::FencedLeaderEpoch
            | E::UnknownLeaderEpoch,
        ) => Meaning::LeaderMoved,
        (_, E::ConcurrentTransactions) => Meaning::Busy,
        (_, E::InvalidProducerEpoch | E::ProducerFenced | E::InvalidProducerIdMapping) => {
            Meaning::Fenced
        }
        (_, E::TopicAuthorizationFailed) => Meaning::Denied(Resource::Topic),
        (_, E::GroupAuthorizationFailed) => Meaning::Denied(Resource::Group),
        (_, E::ClusterAuthorizationFailed) => Meaning::Denied(Resource::Cluster),
        (_, E::TransactionalIdAuthorizationFailed) => Meaning::Denied(Resource::TransactionalId),
        (_, E::InvalidTxnState) => Meaning::NoOpenTransaction,
        (_, E::OutOfOrderSequenceNumber | E::UnknownProducerId) => Meaning::BrokenSequence,
        (
            _,
            E::CorruptMessage
            | E::MessageTooLarge
            | E::RecordListTooLarge
            | E::InvalidTimestamp
            | E::InvalidRecord
            | E::InvalidTransactionTimeout,
        ) => Meaning::Invalid,
        (_, E::OperationNotAttempted) => Meaning::NotAttempted,
        (
            _,
            E::IllegalGeneration | E::UnknownMemberId | E::FencedInstanceId | E::StaleMemberEpoch,
        ) => Meaning::GroupHasMembers,
        (_, E::GroupIdNotFound) => Meaning::Missing(Resource::Group),
        // An offset's metadata over the brokers' `offset.metadata.max.bytes`,
        // a commit too large for `__consumer_offsets`, an empty group id.
        (_, E::OffsetMetadataTooLarge | E::InvalidCommitOffsetSize | E::InvalidGroupId) => {
            Meaning::Invalid
        }
        // Retriable by Kafka too; named for the reader: the transaction
        // that holds the offset commit ends in its own time.
        (A::OffsetFetch, E::UnstableOffsetCommit) => Meaning::Retry,
        (_, e) if e.is_retriable() => Meaning::Retry,
        _ => Meaning::Refused,
    }
}

/// `code` in words: its name and number, or "no error".
pub fn name(code: i16) -> String {
    match E::try_from_code(code) {
        Some(e) => format!("{e} (code {code})"),
        None => "no error".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ApiKey as A;

    #[test]
    fn the_codes_are_kafkas() {
        assert_eq!(
            [
                NOT_COORDINATOR,
                COORDINATOR_NOT_AVAILABLE,
                COORDINATOR_LOAD_IN_PROGRESS
            ],
            [16, 15, 14]
        );
        assert_eq!(
            [
                TOPIC_AUTHORIZATION_FAILED,
                GROUP_AUTHORIZATION_FAILED,
                CLUSTER_AUTHORIZATION_FAILED
            ],
            [29, 30, 31]
        );
        assert_eq!(
            [
                UNKNOWN_TOPIC_OR_PARTITION,
                UNSUPPORTED_SASL_MECHANISM,
                UNSUPPORTED_VERSION,
                TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                TRANSACTIONAL_ID_NOT_FOUND,
                UNSTABLE_OFFSET_COMMIT,
                TRANSACTION_ABORTABLE
            ],
            [3, 33, 35, 53, 105, 88, 120]
        );
    }

    /// The table by Kafka's numbers (`Errors.java`), so a renamed or
    /// renumbered variant of kafka-protocol cannot change a meaning
    /// unnoticed.
    #[test]
    fn the_table() {
        let cases: &[(ApiKey, i16, Meaning)] = &[
            (A::EndTxn, 0, Meaning::Ok),
            (A::Produce, 46, Meaning::AlreadyWritten),
            (A::EndTxn, 46, Meaning::Refused),
            (A::Produce, 7, Meaning::OutcomeUnknown),
            (A::Produce, 20, Meaning::OutcomeUnknown),
            (A::Produce, 13, Meaning::OutcomeUnknown),
            (A::FindCoordinator, 7, Meaning::Retry),
            (A::Produce, 19, Meaning::Retry), // also a failed transaction verification
            (A::Produce, 56, Meaning::Retry),
            (A::Produce, 3, Meaning::LeaderMoved),
            (A::ListOffsets, 3, Meaning::LeaderMoved),
            (A::ListOffsets, 78, Meaning::LeaderMoved),
            (A::Produce, 78, Meaning::Retry), // retriable, by Kafka
            (A::Metadata, 3, Meaning::Missing(Resource::Topic)),
            (A::AddPartitionsToTxn, 3, Meaning::Missing(Resource::Topic)),
            (
                A::DescribeTransactions,
                105,
                Meaning::Missing(Resource::TransactionalId),
            ),
            (A::EndTxn, 16, Meaning::CoordinatorMoved),
            (A::InitProducerId, 15, Meaning::CoordinatorMoved),
            (A::InitProducerId, 14, Meaning::Retry),
            (A::Produce, 6, Meaning::LeaderMoved),
            (A::Produce, 5, Meaning::LeaderMoved),
            (A::ListOffsets, 74, Meaning::LeaderMoved),
            (A::ListOffsets, 75, Meaning::LeaderMoved),
            (A::EndTxn, 51, Meaning::Busy),
            (A::Produce, 51, Meaning::Busy),
            (A::EndTxn, 47, Meaning::Fenced),
            (A::InitProducerId, 90, Meaning::Fenced),
            (A::AddPartitionsToTxn, 49, Meaning::Fenced),
            (A::Produce, 29, Meaning::Denied(Resource::Topic)),
            (A::FindCoordinator, 30, Meaning::Denied(Resource::Group)),
            (A::Metadata, 31, Meaning::Denied(Resource::Cluster)),
            (
                A::InitProducerId,
                53,
                Meaning::Denied(Resource::TransactionalId),
            ),
            (A::EndTxn, 48, Meaning::NoOpenTransaction),
            (A::Produce, 45, Meaning::BrokenSequence),
            (A::Produce, 59, Meaning::BrokenSequence),
            (A::Produce, 2, Meaning::Invalid),
            (A::Produce, 10, Meaning::Invalid),
            (A::Produce, 18, Meaning::Invalid),
            (A::Produce, 32, Meaning::Invalid),
            (A::Produce, 87, Meaning::Invalid),
            (A::InitProducerId, 50, Meaning::Invalid),
            (A::AddPartitionsToTxn, 55, Meaning::NotAttempted),
            // The transactional offset commit: AddOffsetsToTxn at the
            // transaction coordinator, TxnOffsetCommit and OffsetFetch at
            // the group coordinator.
            (A::AddOffsetsToTxn, 16, Meaning::CoordinatorMoved),
            (A::AddOffsetsToTxn, 14, Meaning::Retry),
            (A::AddOffsetsToTxn, 51, Meaning::Busy),
            (A::AddOffsetsToTxn, 47, Meaning::Fenced),
            (A::AddOffsetsToTxn, 90, Meaning::Fenced),
            (
                A::AddOffsetsToTxn,
                53,
                Meaning::Denied(Resource::TransactionalId),
            ),
            (A::AddOffsetsToTxn, 30, Meaning::Denied(Resource::Group)),
            (A::AddOffsetsToTxn, 48, Meaning::NoOpenTransaction),
            (A::AddOffsetsToTxn, 120, Meaning::Refused), // TRANSACTION_ABORTABLE
            (A::TxnOffsetCommit, 16, Meaning::CoordinatorMoved),
            (A::TxnOffsetCommit, 15, Meaning::CoordinatorMoved),
            (A::TxnOffsetCommit, 14, Meaning::Retry),
            (A::TxnOffsetCommit, 7, Meaning::Retry),
            (A::TxnOffsetCommit, 51, Meaning::Busy),
            (A::TxnOffsetCommit, 47, Meaning::Fenced),
            (A::TxnOffsetCommit, 90, Meaning::Fenced),
            (A::TxnOffsetCommit, 22, Meaning::GroupHasMembers),
            (A::TxnOffsetCommit, 25, Meaning::GroupHasMembers),
            (A::TxnOffsetCommit, 82, Meaning::GroupHasMembers),
            (A::TxnOffsetCommit, 113, Meaning::GroupHasMembers),
            (A::TxnOffsetCommit, 12, Meaning::Invalid),
            (A::TxnOffsetCommit, 28, Meaning::Invalid),
            (A::TxnOffsetCommit, 29, Meaning::Denied(Resource::Topic)),
            (A::TxnOffsetCommit, 30, Meaning::Denied(Resource::Group)),
            (
                A::TxnOffsetCommit,
                53,
                Meaning::Denied(Resource::TransactionalId),
            ),
            (A::TxnOffsetCommit, 3, Meaning::Missing(Resource::Topic)),
            (A::TxnOffsetCommit, 48, Meaning::NoOpenTransaction),
            (A::TxnOffsetCommit, 120, Meaning::Refused),
            (A::OffsetFetch, 88, Meaning::Retry),
            (A::OffsetFetch, 16, Meaning::CoordinatorMoved),
            (A::OffsetFetch, 14, Meaning::Retry),
            (A::OffsetFetch, 30, Meaning::Denied(Resource::Group)),
            (A::OffsetFetch, 29, Meaning::Denied(Resource::Topic)),
            (A::OffsetFetch, 3, Meaning::Missing(Resource::Topic)),
            (A::OffsetFetch, 69, Meaning::Missing(Resource::Group)),
            (A::OffsetFetch, 24, Meaning::Invalid),
            // A read_committed Fetch.
            (A::Fetch, 1, Meaning::OutOfRange),
            (A::Fetch, 3, Meaning::LeaderMoved),
            (A::Fetch, 6, Meaning::LeaderMoved),
            (A::Fetch, 74, Meaning::LeaderMoved),
            (A::Fetch, 29, Meaning::Denied(Resource::Topic)),
            (A::Fetch, 56, Meaning::Retry), // KAFKA_STORAGE_ERROR
            (A::ListOffsets, 1, Meaning::Refused),
            (A::Produce, 120, Meaning::Refused), // TRANSACTION_ABORTABLE
            (A::FindCoordinator, 42, Meaning::Refused), // INVALID_REQUEST
            (A::FindCoordinator, -1, Meaning::Refused), // UNKNOWN_SERVER_ERROR
            (A::FindCoordinator, 9999, Meaning::Refused), // not Kafka's
        ];
        for &(api, code, want) in cases {
            assert_eq!(meaning(api, code), want, "{api:?} {}", name(code));
        }
    }

    #[test]
    fn names() {
        assert_eq!(
            name(NOT_COORDINATOR),
            format!("{} (code 16)", E::NotCoordinator)
        );
        assert_eq!(name(NONE), "no error");
        assert!(name(9999).contains("9999"), "{}", name(9999));
    }
}
