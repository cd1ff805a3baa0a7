//! The transactional requests: InitProducerId (a new epoch of a
//! transactional id), AddPartitionsToTxn v3 or lower, a transactional
//! Produce (v3 to v11) and EndTxn v4 or lower.
//!
//! The versions are those of a client of transaction version 1: EndTxn up
//! to v4 keeps one producer epoch across commits on a transaction version 2
//! cluster (no bump per commit), and Produce up to v11 never asks the partition leader
//! to add a partition implicitly (v12 does, under transaction version 2):
//! each partition is added with AddPartitionsToTxn before its first record.
//!
//! Each request but InitProducerId is one attempt of the request layer (the
//! `request` module); the caller retries what may be retried with
//! [`crate::client::retry::retry`] (a [`TxnError`] says what comes next).
//! Every answer is read through the table of [`crate::codes`] as a
//! [`TxnError`] that says what the writer must do next.
//!
//! # Pinned EndTxn
//!
//! An EndTxn of v4 or lower is answered from the coordinator's cache, with
//! nothing written, when the transactional id is in CompleteCommit (a
//! commit asked) or CompleteAbort (an abort asked), and with
//! INVALID_TXN_STATE in Empty; only from Ongoing does the coordinator write
//! its log (PrepareCommit or PrepareAbort) before it answers. A broker that
//! still caches the id's `__transaction_state` partition after it lost it
//! (paused, cut off from the controller) therefore answers a transaction it
//! never saw from an older state. [`Client::add_partitions`] returns the
//! address of the coordinator that accepted the partitions, and
//! [`Client::end_txn_pinned`] sends the EndTxn only there
//! ([`TxnError::Moved`] when the coordinator is now another broker);
//! [`Client::describe_at_coordinator`] tells the caller what the current
//! coordinator holds, and where it is.

use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, EndTxnRequest, EndTxnResponse,
    ProduceRequest, ProduceResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use super::*;

mod error;

pub use error::TxnError;
pub(super) use error::{settle, txn_error};

/// The highest AddPartitionsToTxn a client sends (v4 and up are for brokers).
const ADD_PARTITIONS_MAX: i16 = 3;
/// The highest EndTxn of transaction version 1 semantics.
const END_TXN_MAX: i16 = 4;
/// The highest Produce without transaction version 2's implicit partition
/// registration.
const PRODUCE_MAX: i16 = 11;

impl Client {
    /// InitProducerId for `transactional_id` with the lease as the
    /// transaction timeout: mints a new epoch and returns it. Retries,
    /// within `deadline`, while the coordinator completes (or aborts) the
    /// id's previous transaction, loads, or moved.
    pub async fn init_producer_id(
        &self,
        transactional_id: &str,
        transaction_timeout_ms: i32,
        deadline: Instant,
    ) -> Result<ProducerEpoch> {
        let context = || {
            format!(
                "InitProducerId for {}",
                crate::error::quote(transactional_id)
            )
        };
        let budget = deadline.saturating_duration_since(Instant::now());
        self.retrying(context, deadline, budget, Backoff::TRANSACTION, || async {
            let (addr, resp) = self
                .send_init_producer_id(transactional_id, transaction_timeout_ms, None, deadline)
                .await?;
            match codes::meaning(ApiKey::InitProducerId, resp.error_code) {
                Meaning::Ok => Ok(ProducerEpoch::new(resp.producer_id.0, resp.producer_epoch)),
                // INVALID_TRANSACTION_TIMEOUT: the lease is over the
                // brokers' transaction.max.timeout.ms.
                Meaning::Invalid => Err(Attempt::Fail(Error::InvalidArgument(format!(
                    "{}: the lease of {transaction_timeout_ms} ms is over the brokers' \
                     transaction.max.timeout.ms ({})",
                    context(),
                    code_name(resp.error_code)
                )))),
                // CONCURRENT_TRANSACTIONS (the previous transaction is
                // completing, or being aborted by this very request) is
                // Busy: tried again soon.
                _ => Err(attempt_for(
                    ApiKey::InitProducerId,
                    resp.error_code,
                    format!("InitProducerId at {addr}"),
                )),
            }
        })
        .await
    }

    /// One AddPartitionsToTxn of `partitions` (by topic) to the open
    /// transaction of `token`; returns the address (`host:port`) of the
    /// coordinator that accepted them, the broker whose EndTxn answer
    /// counts for the transaction (see [`Client::end_txn_pinned`]).
    pub async fn add_partitions(
        &self,
        transactional_id: &str,
        token: ProducerEpoch,
        partitions: &[(String, Vec<i32>)],
        deadline: Instant,
    ) -> Result<String, TxnError> {
        let target = Target::Coordinator(transactional_id);
        settle(
            self.at(target, deadline, |at| async move {
                let version =
                    at.version(ApiKey::AddPartitionsToTxn, (0, ADD_PARTITIONS_MAX), "")?;
                let mut req = AddPartitionsToTxnRequest::default();
                req.v3_and_below_transactional_id =
                    TransactionalId(StrBytes::from_string(transactional_id.to_owned()));
                req.v3_and_below_producer_id = ProducerId(token.producer_id);
                req.v3_and_below_producer_epoch = token.producer_epoch;
                req.v3_and_below_topics = partitions
                    .iter()
                    .map(|(topic, parts)| {
                        let mut t = AddPartitionsToTxnTopic::default();
                        t.name = TopicName(StrBytes::from_string(topic.clone()));
                        t.partitions = parts.clone();
                        t
                    })
                    .collect();
                let resp: AddPartitionsToTxnResponse = self
                    .exchange(&at, ApiKey::AddPartitionsToTxn, version, &req)
                    .await?;
                let meaning = |code| codes::meaning(ApiKey::AddPartitionsToTxn, code);
                // OPERATION_NOT_ATTEMPTED marks the partitions left alone
                // because another one failed: report that one.
                let worst = resp
                    .results_by_topic_v3_and_below
                    .iter()
                    .flat_map(|t| {
                        t.results_by_partition.iter().map(move |p| {
                            (t.name.0.as_str(), p.partition_index, p.partition_error_code)
                        })
                    })
                    .filter(|(_, _, code)| meaning(*code) != Meaning::Ok)
                    .min_by_key(|(_, _, code)| meaning(*code) == Meaning::NotAttempted);
                match worst {
                    None => Ok(Ok(at.addr)),
                    Some((topic, partition, code)) => {
                        let what = format!(
                            "AddPartitionsToTxn of {}/{partition} for {} at {}",
                            crate::error::quote(topic),
                            crate::error::quote(transactional_id),
                            at.addr
                        );
                        txn_error(ApiKey::AddPartitionsToTxn, code, what).map(Err)
                    }
                }
            })
            .await,
        )
    }

    /// One transactional Produce (acks=all) of `records`, an encoded record
    /// batch of `token`, to the leader of `topic`/`partition`; returns the
    /// base offset the batch got. A batch the leader already holds (the
    /// answer to an earlier send was lost) counts as written.
    pub async fn produce(
        &self,
        transactional_id: &str,
        topic: &str,
        partition: i32,
        records: Bytes,
        deadline: Instant,
    ) -> Result<i64, TxnError> {
        let sent = AtomicBool::new(false);
        self.produce_noting(transactional_id, topic, partition, records, deadline, &sent)
            .await
    }

    /// [`Client::produce`], and whether the batch may have reached the
    /// leader: `sent` is set (never cleared) once a connection to the
    /// partition's leader answered its handshake and the Produce is about
    /// to be written to it. Left unset, nothing of the batch left this
    /// process (the leader could not be found or reached), so no copy of it
    /// can land later; set, a copy may land at any time until the leader
    /// answers it.
    pub async fn produce_noting(
        &self,
        transactional_id: &str,
        topic: &str,
        partition: i32,
        records: Bytes,
        deadline: Instant,
        sent: &AtomicBool,
    ) -> Result<i64, TxnError> {
        let what = || produce_what(transactional_id, topic, partition);
        let target = Target::Leader(topic, partition);
        settle(
            self.at(target, deadline, |at| {
                let records = records.clone();
                async move {
                    let version = at.version(ApiKey::Produce, (3, PRODUCE_MAX), "")?;
                    // The leader answers (REQUEST_TIMED_OUT at worst)
                    // before this attempt gives up on it.
                    let req = produce_request(
                        transactional_id,
                        topic,
                        partition,
                        records,
                        at.broker_wait_ms(),
                    );
                    sent.store(true, Ordering::SeqCst);
                    let resp: ProduceResponse =
                        self.exchange(&at, ApiKey::Produce, version, &req).await?;
                    let Some(p) = resp
                        .responses
                        .iter()
                        .flat_map(|t| t.partition_responses.iter())
                        .find(|p| p.index == partition)
                    else {
                        return Ok(Err(TxnError::Retry(format!(
                            "{} answered no partition",
                            what()
                        ))));
                    };
                    let said = || {
                        let message = p
                            .error_message
                            .as_ref()
                            .map(|m| format!(" ({})", m.as_str()))
                            .unwrap_or_default();
                        format!(
                            "{} at {}: {}{message}",
                            what(),
                            at.addr,
                            code_name(p.error_code)
                        )
                    };
                    Ok(Err(match codes::meaning(ApiKey::Produce, p.error_code) {
                        // DUPLICATE_SEQUENCE_NUMBER: an earlier send of this
                        // batch was written.
                        Meaning::Ok | Meaning::AlreadyWritten => return Ok(Ok(p.base_offset)),
                        Meaning::Fenced => TxnError::Fenced(said()),
                        // The layer forgets the leader; the next attempt
                        // asks Metadata again.
                        Meaning::LeaderMoved => return Err(Attempt::Moved(said())),
                        // REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND:
                        // the leader took the batch and its replicas did not
                        // follow. Its view may be what is stale (cut off from
                        // its peers and the controller, it still names
                        // itself): the layer forgets it and asks the other
                        // brokers first, and the batch is sent again, with
                        // its sequence, wherever the leader is.
                        Meaning::OutcomeUnknown => return Err(Attempt::NoAnswer(said())),
                        Meaning::Retry => TxnError::Retry(said()),
                        // The partition's verification meets a transaction
                        // completing.
                        Meaning::Busy => TxnError::Busy(said()),
                        // The sequence this epoch keeps is not the broker's.
                        Meaning::BrokenSequence => TxnError::Broken(Error::fatal(
                            what(),
                            format!("{}: the epoch's record sequence is broken", said()),
                        )),
                        Meaning::Denied(_) => TxnError::Refused(Error::fatal(
                            what(),
                            format!(
                                "{}: not authorized (an ACL allowing WRITE is needed)",
                                said()
                            ),
                        )),
                        Meaning::Invalid => TxnError::Refused(Error::InvalidArgument(said())),
                        // INVALID_TXN_STATE (the partition is not in an open
                        // transaction of the epoch), TRANSACTION_ABORTABLE,
                        // and anything else.
                        Meaning::CoordinatorMoved
                        | Meaning::GroupHasMembers
                        | Meaning::Missing(_)
                        | Meaning::NoOpenTransaction
                        | Meaning::NotAttempted
                        | Meaning::OutOfRange
                        | Meaning::Refused => TxnError::Refused(Error::transient(
                            what(),
                            format!("{}; the transaction must be aborted", said()),
                        )),
                    }))
                }
            })
            .await,
        )
    }

    /// One EndTxn (v4 or lower: no epoch bump) of the open transaction of
    /// `token`, commit or abort, at the transactional id's coordinator
    /// whichever broker that is: [`Client::end_txn_pinned`] without a pin.
    pub async fn end_txn(
        &self,
        transactional_id: &str,
        token: ProducerEpoch,
        commit: bool,
        deadline: Instant,
    ) -> Result<(), TxnError> {
        self.end_txn_pinned(transactional_id, token, commit, None, deadline)
            .await
    }

    /// One EndTxn (v4 or lower: no epoch bump) of the open transaction of
    /// `token`: commit or abort.
    ///
    /// With `pinned` (the address [`Client::add_partitions`] returned, or
    /// the one [`Client::describe_at_coordinator`] found holding the
    /// transaction open), the request goes only to that broker: when the
    /// coordinator of the transactional id, cached or found, is another
    /// broker, nothing is sent and the answer is [`TxnError::Moved`]. An
    /// answer of the pinned broker is its own: it saw the transaction
    /// accepted, so its cache is never older than the transaction.
    pub async fn end_txn_pinned(
        &self,
        transactional_id: &str,
        token: ProducerEpoch,
        commit: bool,
        pinned: Option<&str>,
        deadline: Instant,
    ) -> Result<(), TxnError> {
        let what = || {
            format!(
                "EndTxn({}) for {}",
                if commit { "commit" } else { "abort" },
                crate::error::quote(transactional_id)
            )
        };
        let moved = |addr: &str| {
            pinned.filter(|pin| *pin != addr).map(|pin| {
                TxnError::Moved(format!(
                    "{}: the transaction was accepted by the coordinator at {pin}, and the \
                     coordinator is now {addr}; nothing was sent",
                    what()
                ))
            })
        };
        // Before any connect: a pin that is no longer the coordinator sends
        // nothing, even when the new coordinator cannot be reached.
        let addr = self
            .coordinator(transactional_id, deadline)
            .await
            .map_err(TxnError::from)?;
        if let Some(e) = moved(&addr) {
            return Err(e);
        }
        let target = Target::Coordinator(transactional_id);
        settle(
            self.at(target, deadline, |at| async move {
                if let Some(e) = moved(&at.addr) {
                    return Ok(Err(e));
                }
                let version = at.version(ApiKey::EndTxn, (0, END_TXN_MAX), "")?;
                let mut req = EndTxnRequest::default();
                req.transactional_id =
                    TransactionalId(StrBytes::from_string(transactional_id.to_owned()));
                req.producer_id = ProducerId(token.producer_id);
                req.producer_epoch = token.producer_epoch;
                req.committed = commit;
                let resp: EndTxnResponse =
                    self.exchange(&at, ApiKey::EndTxn, version, &req).await?;
                match codes::meaning(ApiKey::EndTxn, resp.error_code) {
                    Meaning::Ok => Ok(Ok(())),
                    _ => txn_error(
                        ApiKey::EndTxn,
                        resp.error_code,
                        format!("{} at {}", what(), at.addr),
                    )
                    .map(Err),
                }
            })
            .await,
        )
    }

    /// One DescribeTransactions of `transactional_id` at its coordinator
    /// (cached, or found with FindCoordinator): the coordinator's address
    /// and what it reports, `None` when it does not know the id
    /// (TRANSACTIONAL_ID_NOT_FOUND). One attempt: a coordinator that moved
    /// (forgotten, so the next attempt finds it again), loads or does not
    /// answer is [`TxnError::Retry`]; a refusal is [`TxnError::Refused`].
    pub async fn describe_at_coordinator(
        &self,
        transactional_id: &str,
        deadline: Instant,
    ) -> Result<(String, Option<TransactionDescription>), TxnError> {
        crate::error::check_transactional_id(transactional_id).map_err(TxnError::Refused)?;
        let target = Target::Coordinator(transactional_id);
        self.at(target, deadline, |at| async move {
            let described = self.describe_at(&at, transactional_id).await?;
            Ok((at.addr, described))
        })
        .await
        .map_err(TxnError::from)
    }

    /// The partition count of `topic` for a guarded record that leaves
    /// the partition open, within `deadline`.
    pub async fn topic_partitions(&self, topic: &str, deadline: Instant) -> Result<i32> {
        let context = || format!("Metadata for topic {}", crate::error::quote(topic));
        let budget = deadline.saturating_duration_since(Instant::now());
        self.retrying(context, deadline, budget, Backoff::LOOKUP, || {
            self.partition_count(topic, deadline)
        })
        .await
    }
}

/// What a Produce is, for its errors: its topic, partition and
/// transactional id.
fn produce_what(transactional_id: &str, topic: &str, partition: i32) -> String {
    format!(
        "Produce to {}/{partition} for {}",
        crate::error::quote(topic),
        crate::error::quote(transactional_id)
    )
}

/// A transactional Produce of `records` to `topic`/`partition`, every
/// in-sync replica acknowledging (`acks` -1) within `timeout_ms`.
fn produce_request(
    transactional_id: &str,
    topic: &str,
    partition: i32,
    records: Bytes,
    timeout_ms: i32,
) -> ProduceRequest {
    let mut part = PartitionProduceData::default();
    part.index = partition;
    part.records = Some(records);
    let mut t = TopicProduceData::default();
    t.name = TopicName(StrBytes::from_string(topic.to_owned()));
    t.partition_data = vec![part];
    let mut req = ProduceRequest::default();
    req.transactional_id = Some(TransactionalId(StrBytes::from_string(
        transactional_id.to_owned(),
    )));
    req.acks = -1;
    req.timeout_ms = timeout_ms;
    req.topic_data = vec![t];
    req
}
