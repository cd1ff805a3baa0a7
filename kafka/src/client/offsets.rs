//! A consumer group's offsets in a producer's transaction (the
//! read-process-write loop): AddOffsetsToTxn v4 or lower at the
//! transaction coordinator, TxnOffsetCommit v4 or lower at the group
//! coordinator, and what the group has committed, OffsetFetch v7 or v8
//! with `require_stable`.
//!
//! # The commit
//!
//! Within a transaction opened by the epoch `token` of a transactional
//! id, [`Client::add_offsets`] adds the group's `__consumer_offsets`
//! partition to the transaction, and [`Client::commit_offsets_in_txn`]
//! writes the offsets there as a pending commit of that producer. The
//! transaction's EndTxn decides them with its records: committed, the
//! offsets become the group's; aborted, they are dropped and the group's
//! offsets stay as they were. Both requests carry the producer id and
//! epoch, so an epoch that a newer one fenced is refused
//! ([`TxnError::Fenced`]) exactly as its Produce is, and its offsets never
//! reach the group.
//!
//! The versions are those of transaction version 1, as for the other
//! transactional requests (the `txn` module): TxnOffsetCommit v5 would ask
//! the group coordinator to add the partition to the transaction itself,
//! under transaction version 2, which this client's EndTxn does not use.
//! Without [`Client::add_offsets`] first, the transaction coordinator does
//! not know the partition, so its EndTxn never decides the offsets: a
//! broker that verifies transactional writes (Kafka 4.1) refuses the commit
//! (TRANSACTION_ABORTABLE), one that does not (Kafka 3.6) accepts it, and
//! the offset stays pending until a later transaction of the same producer
//! that adds the group ends, which decides it with its own outcome. A
//! caller therefore sends [`Client::add_offsets`] for the group in every
//! transaction that commits offsets, before [`Client::commit_offsets_in_txn`].
//!
//! The commit names no group member: generation -1, an empty member id and
//! no group instance id (TxnOffsetCommit v3 and up; KIP-447 lets a member
//! of the group send its generation instead). The committing producer is
//! fenced by its epoch, not by a group generation: it holds no membership
//! of the group, and a group with members of its own (consumers that joined
//! it with `subscribe`) refuses such a commit
//! ([`crate::codes::Meaning::GroupHasMembers`]).
//!
//! What the group has committed, and the OffsetFetch that reads it, are
//! the `committed` module ([`Client::committed_offsets`]).

mod committed;

pub use committed::{Committed, PartitionCommitted};

use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, ApiKey, GroupId, ProducerId, TopicName,
    TransactionalId, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::group::group_denied;
use super::txn::{settle, txn_error};
use super::*;

/// The highest AddOffsetsToTxn of transaction version 1.
const ADD_OFFSETS_MAX: i16 = 4;
/// The highest TxnOffsetCommit of transaction version 1 (v5 adds the
/// offsets partition to the transaction implicitly).
const TXN_OFFSET_COMMIT_MAX: i16 = 4;

/// One input partition's position to commit: the offset of the next record
/// to read there, as a Kafka consumer commits it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetToCommit {
    /// The topic read.
    pub topic: String,
    /// Its partition.
    pub partition: i32,
    /// The offset of the next record to read (the last one processed, plus
    /// one).
    pub offset: i64,
    /// Kept with the offset and returned by OffsetFetch; at most the
    /// brokers' `offset.metadata.max.bytes` (4096 by default).
    pub metadata: Option<String>,
}

impl Client {
    /// One AddOffsetsToTxn: adds consumer group `group`'s offsets
    /// partition to the open transaction of `token` (the transaction
    /// begins here when nothing was added to it yet). Returns the address
    /// of the transaction coordinator that accepted it, as
    /// [`Client::add_partitions`] does, for a pinned EndTxn.
    ///
    /// One attempt (the caller retries [`TxnError::Retry`] and
    /// [`TxnError::Busy`] with [`crate::client::retry::retry`]). A newer
    /// epoch is [`TxnError::Fenced`]; a principal without WRITE on the
    /// transactional id or READ on the group is [`TxnError::Refused`]
    /// naming the one missing; a group id the protocol cannot carry is
    /// refused before any request.
    pub async fn add_offsets(
        &self,
        transactional_id: &str,
        token: ProducerEpoch,
        group: &str,
        deadline: Instant,
    ) -> Result<String, TxnError> {
        crate::error::check_group_id(group).map_err(TxnError::Refused)?;
        let what = |addr: &str| {
            format!(
                "AddOffsetsToTxn of group {} for {} at {addr}",
                crate::error::quote(group),
                crate::error::quote(transactional_id)
            )
        };
        let target = Target::Coordinator(transactional_id);
        settle(
            self.at(target, deadline, |at| async move {
                let version = at.version(ApiKey::AddOffsetsToTxn, (0, ADD_OFFSETS_MAX), "")?;
                let mut req = AddOffsetsToTxnRequest::default();
                req.transactional_id =
                    TransactionalId(StrBytes::from_string(transactional_id.to_owned()));
                req.producer_id = ProducerId(token.producer_id);
                req.producer_epoch = token.producer_epoch;
                req.group_id = GroupId(StrBytes::from_string(group.to_owned()));
                let resp: AddOffsetsToTxnResponse = self
                    .exchange(&at, ApiKey::AddOffsetsToTxn, version, &req)
                    .await?;
                match codes::meaning(ApiKey::AddOffsetsToTxn, resp.error_code) {
                    Meaning::Ok => Ok(Ok(at.addr)),
                    Meaning::Denied(Resource::Group) => Ok(Err(TxnError::Refused(Error::fatal(
                        what(&at.addr),
                        group_denied(group),
                    )))),
                    _ => {
                        txn_error(ApiKey::AddOffsetsToTxn, resp.error_code, what(&at.addr)).map(Err)
                    }
                }
            })
            .await,
        )
    }

    /// One TxnOffsetCommit at the group coordinator of `group`: `offsets`
    /// as a pending commit of the open transaction of `token`, which its
    /// EndTxn commits or drops (see the module docs). [`Client::add_offsets`]
    /// for the same group must come first in the transaction.
    ///
    /// One attempt, as [`Client::add_offsets`]; no offsets, no request. An
    /// offset below 0 is refused before any request. A partition refused is
    /// reported naming it: a newer epoch is [`TxnError::Fenced`] (nothing
    /// of the commit reaches the group); an unknown topic, metadata over
    /// the brokers' limit and a group with members of its own are
    /// [`TxnError::Refused`], and the transaction must be aborted.
    pub async fn commit_offsets_in_txn(
        &self,
        transactional_id: &str,
        token: ProducerEpoch,
        group: &str,
        offsets: &[OffsetToCommit],
        deadline: Instant,
    ) -> Result<(), TxnError> {
        crate::error::check_group_id(group).map_err(TxnError::Refused)?;
        if let Some(o) = offsets.iter().find(|o| o.offset < 0) {
            return Err(TxnError::Refused(Error::InvalidArgument(format!(
                "offset {} for {}/{} of group {}: an offset to commit is the next one to read, \
                 0 or more",
                o.offset,
                crate::error::quote(&o.topic),
                o.partition,
                crate::error::quote(group)
            ))));
        }
        if offsets.is_empty() {
            return Ok(());
        }
        let req = txn_offset_commit(transactional_id, token, group, offsets);
        let req = &req;
        settle(
            self.at(Target::Group(group), deadline, |at| async move {
                let version =
                    at.version(ApiKey::TxnOffsetCommit, (0, TXN_OFFSET_COMMIT_MAX), "")?;
                let resp: TxnOffsetCommitResponse = self
                    .exchange(&at, ApiKey::TxnOffsetCommit, version, req)
                    .await?;
                let refused = resp
                    .topics
                    .iter()
                    .flat_map(|t| {
                        t.partitions
                            .iter()
                            .map(move |p| (t.name.0.as_str(), p.partition_index, p.error_code))
                    })
                    .find(|(_, _, code)| *code != codes::NONE);
                let Some((topic, partition, code)) = refused else {
                    let answered: usize = resp.topics.iter().map(|t| t.partitions.len()).sum();
                    if answered < offsets.len() {
                        return Ok(Err(TxnError::Retry(format!(
                            "TxnOffsetCommit for group {} at {} answered {answered} of {} \
                             partitions",
                            crate::error::quote(group),
                            at.addr,
                            offsets.len()
                        ))));
                    }
                    return Ok(Ok(()));
                };
                let what = format!(
                    "TxnOffsetCommit of {}/{partition} for group {} and {} at {}",
                    crate::error::quote(topic),
                    crate::error::quote(group),
                    crate::error::quote(transactional_id),
                    at.addr
                );
                if code == codes::TRANSACTION_ABORTABLE {
                    return Ok(Err(TxnError::Refused(Error::transient(
                        format!("{what}: {}", code_name(code)),
                        "the group coordinator could not verify that the group's offsets are \
                         part of the open transaction (AddOffsetsToTxn for the group must come \
                         first in it); the transaction must be aborted",
                    ))));
                }
                match codes::meaning(ApiKey::TxnOffsetCommit, code) {
                    Meaning::Denied(Resource::Group) => Ok(Err(TxnError::Refused(Error::fatal(
                        format!("{what}: {}", code_name(code)),
                        group_denied(group),
                    )))),
                    Meaning::Denied(Resource::Topic) => Ok(Err(TxnError::Refused(Error::fatal(
                        format!("{what}: {}", code_name(code)),
                        "not authorized to commit offsets of the topic (an ACL allowing READ on \
                         it is needed)",
                    )))),
                    _ => txn_error(ApiKey::TxnOffsetCommit, code, what).map(Err),
                }
            })
            .await,
        )
    }
}

/// The TxnOffsetCommit of `offsets` for `group` under `token`, as a
/// producer without group membership sends it (see the module docs).
fn txn_offset_commit(
    transactional_id: &str,
    token: ProducerEpoch,
    group: &str,
    offsets: &[OffsetToCommit],
) -> TxnOffsetCommitRequest {
    let mut topics: Vec<TxnOffsetCommitRequestTopic> = Vec::new();
    for o in offsets {
        let mut p = TxnOffsetCommitRequestPartition::default();
        p.partition_index = o.partition;
        p.committed_offset = o.offset;
        p.committed_leader_epoch = -1;
        p.committed_metadata = o.metadata.clone().map(StrBytes::from_string);
        match topics.iter_mut().find(|t| t.name.0.as_str() == o.topic) {
            Some(t) => t.partitions.push(p),
            None => {
                let mut t = TxnOffsetCommitRequestTopic::default();
                t.name = TopicName(StrBytes::from_string(o.topic.clone()));
                t.partitions = vec![p];
                topics.push(t);
            }
        }
    }
    let mut req = TxnOffsetCommitRequest::default();
    req.transactional_id = TransactionalId(StrBytes::from_string(transactional_id.to_owned()));
    req.group_id = GroupId(StrBytes::from_string(group.to_owned()));
    req.producer_id = ProducerId(token.producer_id);
    req.producer_epoch = token.producer_epoch;
    req.generation_id = -1;
    req.member_id = StrBytes::default();
    req.group_instance_id = None;
    req.topics = topics;
    req
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(topic: &str, partition: i32, offset: i64, metadata: Option<&str>) -> OffsetToCommit {
        OffsetToCommit {
            topic: topic.to_owned(),
            partition,
            offset,
            metadata: metadata.map(str::to_owned),
        }
    }

    /// A committed partition as the tests compare it: index, offset,
    /// metadata and leader epoch.
    type Sent<'a> = (i32, i64, Option<&'a str>, i32);

    /// No group membership: generation -1, an empty member id, no
    /// instance id; the producer's id and epoch; one entry per topic.
    #[test]
    fn a_commit_names_the_producer_and_no_member() {
        let token = ProducerEpoch::new(77, 3);
        let offsets = [
            pos("in", 0, 10, Some("m")),
            pos("other", 2, 5, None),
            pos("in", 1, 11, None),
        ];
        let req = txn_offset_commit("role", token, "g", &offsets);
        assert_eq!(req.transactional_id.0.as_str(), "role");
        assert_eq!(req.group_id.0.as_str(), "g");
        assert_eq!((req.producer_id.0, req.producer_epoch), (77, 3));
        assert_eq!(req.generation_id, -1);
        assert!(req.member_id.is_empty());
        assert_eq!(req.group_instance_id, None);
        let topics: Vec<(&str, Vec<Sent>)> = req
            .topics
            .iter()
            .map(|t| {
                let parts = t
                    .partitions
                    .iter()
                    .map(|p| {
                        (
                            p.partition_index,
                            p.committed_offset,
                            p.committed_metadata.as_ref().map(|m| m.as_str()),
                            p.committed_leader_epoch,
                        )
                    })
                    .collect();
                (t.name.0.as_str(), parts)
            })
            .collect();
        assert_eq!(
            topics,
            vec![
                ("in", vec![(0, 10, Some("m"), -1), (1, 11, None, -1)]),
                ("other", vec![(2, 5, None, -1)]),
            ]
        );
    }

    /// Both layouts ask for stable offsets only, of the partitions asked.
    /// Bad input is refused before any request; no offsets, no request.
    #[tokio::test]
    async fn bad_groups_are_refused_before_any_request() {
        // Nothing listens there: a request would fail otherwise.
        let client = Client::new(&Settings::new("127.0.0.1:9")).expect("client");
        let token = ProducerEpoch::new(1, 0);
        let soon = crate::deadline_in(std::time::Duration::from_secs(5));
        let refused = |e: TxnError| match e {
            TxnError::Refused(Error::InvalidArgument(why)) => why,
            other => panic!("{other:?}"),
        };
        let why = refused(
            client
                .add_offsets("role", token, "", soon)
                .await
                .unwrap_err(),
        );
        assert!(
            why.contains("consumer group id \"\" must not be empty"),
            "{why}"
        );
        let one = [pos("in", 0, 1, None)];
        let e = client
            .commit_offsets_in_txn("role", token, "", &one, soon)
            .await
            .unwrap_err();
        assert!(refused(e).contains("must not be empty"));
        let e = client.committed_offsets("", &[], soon).await.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        let below = [pos("in", 3, -1, None)];
        let e = client
            .commit_offsets_in_txn("role", token, "g", &below, soon)
            .await
            .unwrap_err();
        assert!(refused(e).contains("offset -1 for \"in\"/3"));
        client
            .commit_offsets_in_txn("role", token, "g", &[], soon)
            .await
            .expect("nothing to commit");
        assert_eq!(client.requests_sent(), 0);
    }
}
