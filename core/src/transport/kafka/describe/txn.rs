//! The transactional requests of the protocol lease path: InitProducerId
//! (the mint), AddPartitionsToTxn v3 or lower, a transactional Produce
//! (v3 to v11) and EndTxn v4 or lower.
//!
//! The versions are those of a client of transaction version 1: EndTxn up
//! to v4 keeps one epoch per term on a transaction version 2 cluster (no
//! bump per commit), and Produce up to v11 never asks the partition leader
//! to add a partition implicitly (v12 does, under transaction version 2):
//! each partition is added with AddPartitionsToTxn before its first record.
//!
//! Each request is one attempt; the caller (`protocol_lease.rs`) retries
//! what may be retried. Every answer is classified as a [`TxnError`] that
//! says what the writer must do next.

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

/// The pause after CONCURRENT_TRANSACTIONS: the previous transaction's
/// markers take a few milliseconds on a healthy cluster.
const BUSY_PAUSE: Duration = Duration::from_millis(3);
/// How many CONCURRENT_TRANSACTIONS answers get the short pause.
const BUSY_TRIES: u32 = 10;
/// The longest pause after CONCURRENT_TRANSACTIONS.
const BUSY_MAX: Duration = Duration::from_millis(100);

/// The pause after the `tries`-th CONCURRENT_TRANSACTIONS answer in a row
/// (from 1): [`BUSY_PAUSE`] for the first [`BUSY_TRIES`] (30 ms, what
/// markers take on a healthy cluster), then doubling up to [`BUSY_MAX`], so
/// markers held up by a lost partition leader (seconds) are not asked about
/// hundreds of times a second by every role that waits for them.
pub(crate) fn busy_pause(tries: u32) -> Duration {
    match tries.checked_sub(BUSY_TRIES) {
        None | Some(0) => BUSY_PAUSE,
        Some(n) => BUSY_PAUSE.saturating_mul(1u32 << n.min(8)).min(BUSY_MAX),
    }
}
/// The highest AddPartitionsToTxn a client sends (v4 and up are for brokers).
const ADD_PARTITIONS_MAX: i16 = 3;
/// The highest EndTxn of transaction version 1 semantics.
const END_TXN_MAX: i16 = 4;
/// The highest Produce without transaction version 2's implicit partition
/// registration.
const PRODUCE_MAX: i16 = 11;

/// How a transactional request failed, and what the writer does next.
#[derive(Debug)]
pub(crate) enum TxnError {
    /// A newer epoch of the transactional id exists (INVALID_PRODUCER_EPOCH,
    /// PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING): the term is over.
    Fenced(String),
    /// No answer, or an answer that may change (a moved leader or
    /// coordinator, too few in-sync replicas): the request may or may not
    /// have been carried out; send the same request again after a pause.
    Retry(String),
    /// CONCURRENT_TRANSACTIONS: the epoch's previous transaction is being
    /// completed (its markers written), which takes milliseconds; send the
    /// request again after a short pause.
    Busy(String),
    /// Refused, and certainly not carried out (no authorization, an unknown
    /// topic, a record the broker will not take): the transaction must be
    /// aborted; the epoch stays usable.
    Refused(Error),
    /// The epoch cannot write any more (a broken sequence): the term ends.
    Broken(Error),
}

/// The codes that mean a newer epoch exists.
fn fenced(code: i16) -> bool {
    // INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED.
    matches!(code, 47 | 49 | 90)
}

/// What an error code of a request to the coordinator means.
fn classify_coordinator(code: i16, what: String) -> TxnError {
    match code {
        c if fenced(c) => TxnError::Fenced(format!("{what}: {}", code_name(c))),
        // CONCURRENT_TRANSACTIONS: the previous transaction's markers are
        // being written.
        51 => TxnError::Busy(format!("{what}: {}", code_name(code))),
        // COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR,
        // COORDINATOR_NOT_AVAILABLE (the caller finds the coordinator
        // again).
        14..=16 => TxnError::Retry(format!("{what}: {}", code_name(code))),
        // INVALID_TXN_STATE: nothing open where a transaction was expected.
        48 => TxnError::Refused(Error::transient(
            what,
            format!(
                "{}: the coordinator has no such open transaction",
                code_name(48)
            ),
        )),
        // UNKNOWN_TOPIC_OR_PARTITION.
        3 => TxnError::Refused(Error::InvalidArgument(format!("{what}: {}", code_name(3)))),
        // TOPIC_AUTHORIZATION_FAILED.
        29 => TxnError::Refused(Error::fatal(
            what,
            "not authorized to write a topic of the transaction (an ACL allowing WRITE on it is \
             needed)",
        )),
        _ => match classify_code(code, what.clone()) {
            Attempt::Fail(e) => TxnError::Refused(e),
            Attempt::Refind(r) | Attempt::Backoff(r) => {
                TxnError::Retry(format!("{r}: {}", code_name(code)))
            }
        },
    }
}

impl DescribeClient {
    /// InitProducerId for `transactional_id` with the lease as the
    /// transaction timeout: mints a new epoch and returns it. Retries,
    /// within `deadline`, while the coordinator completes (or aborts) the
    /// id's previous transaction, loads, or moved.
    pub(crate) async fn init_producer_id(
        &self,
        transactional_id: &str,
        transaction_timeout_ms: i32,
        deadline: Instant,
    ) -> Result<FencingToken> {
        let context = || {
            format!(
                "InitProducerId for {}",
                crate::error::quote(transactional_id)
            )
        };
        let started = Instant::now();
        let mut backoff = Duration::from_millis(2);
        let mut busy = 0u32;
        loop {
            let attempt = async {
                let (addr, resp) = self
                    .send_init_producer_id(transactional_id, transaction_timeout_ms, None, deadline)
                    .await?;
                match resp.error_code {
                    0 => Ok(FencingToken::new(resp.producer_id.0, resp.producer_epoch)),
                    // CONCURRENT_TRANSACTIONS: the previous transaction is
                    // completing, or being aborted by this very request.
                    51 => Err(Attempt::Backoff(code_name(51))),
                    // INVALID_TRANSACTION_TIMEOUT: the lease is over the
                    // brokers' transaction.max.timeout.ms.
                    50 => Err(Attempt::Fail(Error::InvalidArgument(format!(
                        "{}: the lease of {transaction_timeout_ms} ms is over the brokers' \
                         transaction.max.timeout.ms ({})",
                        context(),
                        code_name(50)
                    )))),
                    code => Err(classify_code(code, format!("InitProducerId at {addr}"))),
                }
            };
            let why = match attempt.await {
                Ok(token) => return Ok(token),
                Err(Attempt::Fail(e)) => return Err(e),
                Err(Attempt::Refind(r)) => {
                    self.forget_coordinator(transactional_id);
                    r
                }
                Err(Attempt::Backoff(r)) => r,
            };
            // CONCURRENT_TRANSACTIONS lasts milliseconds: short pauses.
            let pause = if why == code_name(51) {
                busy += 1;
                busy_pause(busy)
            } else {
                busy = 0;
                let b = backoff;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                b
            };
            if no_time_for(pause, deadline) {
                return Err(self.gave_up(context(), started.elapsed(), why));
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// One AddPartitionsToTxn of `partitions` (by topic) to the open
    /// transaction of `token`.
    pub(crate) async fn add_partitions(
        &self,
        transactional_id: &str,
        token: FencingToken,
        partitions: &[(String, Vec<i32>)],
        deadline: Instant,
    ) -> Result<(), TxnError> {
        let (addr, conn, version) = self
            .at_coordinator(
                transactional_id,
                ApiKey::AddPartitionsToTxn,
                ADD_PARTITIONS_MAX,
                deadline,
            )
            .await?;
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
            .txn_call(
                transactional_id,
                &conn,
                ApiKey::AddPartitionsToTxn,
                version,
                &req,
                deadline,
            )
            .await?;
        // OPERATION_NOT_ATTEMPTED marks the partitions left alone because
        // another one failed: report that one.
        let worst = resp
            .results_by_topic_v3_and_below
            .iter()
            .flat_map(|t| {
                t.results_by_partition
                    .iter()
                    .map(move |p| (t.name.0.as_str(), p.partition_index, p.partition_error_code))
            })
            .filter(|(_, _, code)| *code != 0)
            .min_by_key(|(_, _, code)| *code == 55);
        match worst {
            None => Ok(()),
            Some((topic, partition, code)) => {
                let what = format!(
                    "AddPartitionsToTxn of {}/{partition} for {} at {addr}",
                    crate::error::quote(topic),
                    crate::error::quote(transactional_id)
                );
                if matches!(code, 15 | 16) {
                    self.forget_coordinator(transactional_id);
                }
                Err(classify_coordinator(code, what))
            }
        }
    }

    /// One transactional Produce (acks=all) of `records`, an encoded record
    /// batch of `token`, to the leader of `topic`/`partition`; returns the
    /// base offset the batch got. A batch the leader already holds (the
    /// answer to an earlier send was lost) counts as written.
    pub(crate) async fn produce(
        &self,
        transactional_id: &str,
        topic: &str,
        partition: i32,
        records: Bytes,
        deadline: Instant,
    ) -> Result<i64, TxnError> {
        let what = || {
            format!(
                "Produce to {}/{partition} for {}",
                crate::error::quote(topic),
                crate::error::quote(transactional_id)
            )
        };
        let addr = match self.partition_leader(topic, partition, deadline).await {
            Ok(a) => a,
            Err(a) => return Err(self.leader_attempt(a, topic, partition)),
        };
        let conn = match self.connection(&addr, deadline).await {
            Ok(c) => c,
            Err(a) => return Err(self.leader_attempt(a, topic, partition)),
        };
        let version = conn
            .version_for(ApiKey::Produce, (3, PRODUCE_MAX))
            .ok_or_else(|| {
                TxnError::Broken(Error::fatal(
                    format!("Produce at {addr}"),
                    "the broker supports no Produce version 3 to 11",
                ))
            })?;
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
        let left = deadline.saturating_duration_since(Instant::now());
        req.timeout_ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX).max(1);
        req.topic_data = vec![t];
        let resp: ProduceResponse = match self
            .call(&conn, ApiKey::Produce, version, &req, deadline)
            .await
        {
            Ok(r) => r,
            Err(a) => return Err(self.leader_attempt(a, topic, partition)),
        };
        let Some(p) = resp
            .responses
            .iter()
            .flat_map(|t| t.partition_responses.iter())
            .find(|p| p.index == partition)
        else {
            return Err(TxnError::Retry(format!("{} answered no partition", what())));
        };
        let said = || {
            let message = p
                .error_message
                .as_ref()
                .map(|m| format!(" ({})", m.as_str()))
                .unwrap_or_default();
            format!("{} at {addr}: {}{message}", what(), code_name(p.error_code))
        };
        match p.error_code {
            // DUPLICATE_SEQUENCE_NUMBER: an earlier send of this batch was
            // written.
            0 | 46 => Ok(p.base_offset),
            c if fenced(c) => Err(TxnError::Fenced(said())),
            // NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
            // LEADER_NOT_AVAILABLE, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH:
            // ask Metadata again.
            6 | 3 | 5 | 74 | 75 => {
                self.forget_leader(topic, partition);
                Err(TxnError::Retry(said()))
            }
            // REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
            // NETWORK_EXCEPTION, KAFKA_STORAGE_ERROR.
            7 | 19 | 20 | 13 | 56 => Err(TxnError::Retry(said())),
            // CONCURRENT_TRANSACTIONS (the partition's verification meets a
            // transaction completing).
            51 => Err(TxnError::Busy(said())),
            // OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID: the
            // sequence this epoch keeps is not the broker's.
            45 | 59 => Err(TxnError::Broken(Error::fatal(
                what(),
                format!("{}: the epoch's record sequence is broken", said()),
            ))),
            // TOPIC_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
            29 | 53 => Err(TxnError::Refused(Error::fatal(
                what(),
                format!(
                    "{}: not authorized (an ACL allowing WRITE is needed)",
                    said()
                ),
            ))),
            // CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE,
            // INVALID_TIMESTAMP, INVALID_RECORD.
            2 | 10 | 18 | 32 | 87 => Err(TxnError::Refused(Error::InvalidArgument(said()))),
            // INVALID_TXN_STATE (the partition is not in an open transaction
            // of the epoch), TRANSACTION_ABORTABLE, and anything else.
            code => match ResponseError::try_from_code(code) {
                Some(e) if e.is_retriable() => Err(TxnError::Retry(said())),
                _ => Err(TxnError::Refused(Error::transient(
                    what(),
                    format!("{}; the transaction must be aborted", said()),
                ))),
            },
        }
    }

    /// One EndTxn (v4 or lower: no epoch bump) of the open transaction of
    /// `token`: commit or abort.
    pub(crate) async fn end_txn(
        &self,
        transactional_id: &str,
        token: FencingToken,
        commit: bool,
        deadline: Instant,
    ) -> Result<(), TxnError> {
        let (addr, conn, version) = self
            .at_coordinator(transactional_id, ApiKey::EndTxn, END_TXN_MAX, deadline)
            .await?;
        let mut req = EndTxnRequest::default();
        req.transactional_id = TransactionalId(StrBytes::from_string(transactional_id.to_owned()));
        req.producer_id = ProducerId(token.producer_id);
        req.producer_epoch = token.producer_epoch;
        req.committed = commit;
        let resp: EndTxnResponse = self
            .txn_call(
                transactional_id,
                &conn,
                ApiKey::EndTxn,
                version,
                &req,
                deadline,
            )
            .await?;
        match resp.error_code {
            0 => Ok(()),
            code => {
                if matches!(code, 15 | 16) {
                    self.forget_coordinator(transactional_id);
                }
                let what = format!(
                    "EndTxn({}) for {} at {addr}",
                    if commit { "commit" } else { "abort" },
                    crate::error::quote(transactional_id)
                );
                Err(classify_coordinator(code, what))
            }
        }
    }

    /// The coordinator of `transactional_id`, a connection to it, and the
    /// version of `key` to send (the highest both speak, at most `max`).
    async fn at_coordinator(
        &self,
        transactional_id: &str,
        key: ApiKey,
        max: i16,
        deadline: Instant,
    ) -> Result<(String, Arc<Connection>, i16), TxnError> {
        let addr = self
            .coordinator(transactional_id, deadline)
            .await
            .map_err(|a| self.coordinator_attempt(a, transactional_id))?;
        let conn = self
            .connection(&addr, deadline)
            .await
            .map_err(|a| self.coordinator_attempt(a, transactional_id))?;
        let version = conn.version_for(key, (0, max)).ok_or_else(|| {
            TxnError::Broken(Error::fatal(
                format!("{key:?} at {addr}"),
                format!("the broker supports no {key:?} version 0 to {max}"),
            ))
        })?;
        Ok((addr, conn, version))
    }

    async fn txn_call<Req: Encodable, Resp: Decodable + HeaderVersion>(
        &self,
        transactional_id: &str,
        conn: &Arc<Connection>,
        key: ApiKey,
        version: i16,
        req: &Req,
        deadline: Instant,
    ) -> Result<Resp, TxnError> {
        self.call(conn, key, version, req, deadline)
            .await
            .map_err(|a| self.coordinator_attempt(a, transactional_id))
    }

    /// A failed step on the way to the coordinator: a broken connection or
    /// a failed lookup finds the coordinator again.
    fn coordinator_attempt(&self, a: Attempt, transactional_id: &str) -> TxnError {
        match a {
            Attempt::Fail(e) => TxnError::Refused(e),
            Attempt::Refind(r) | Attempt::Backoff(r) => {
                self.forget_coordinator(transactional_id);
                TxnError::Retry(r)
            }
        }
    }

    /// A failed step on the way to a partition's leader: a broken
    /// connection or a failed lookup asks Metadata again.
    fn leader_attempt(&self, a: Attempt, topic: &str, partition: i32) -> TxnError {
        match a {
            Attempt::Fail(e) => TxnError::Refused(e),
            Attempt::Refind(r) | Attempt::Backoff(r) => {
                self.forget_leader(topic, partition);
                TxnError::Retry(r)
            }
        }
    }

    /// The partition count of `topic` for a guarded record that leaves
    /// the partition open, within `deadline`.
    pub(crate) async fn topic_partitions(&self, topic: &str, deadline: Instant) -> Result<i32> {
        let started = Instant::now();
        retry_until(
            deadline,
            || self.partition_count(topic, deadline),
            || {},
            |why| {
                self.gave_up(
                    format!("Metadata for topic {}", crate::error::quote(topic)),
                    started.elapsed(),
                    why,
                )
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_pauses_stay_short_then_back_off_to_a_bound() {
        let pauses: Vec<u64> = (1..=20).map(|t| busy_pause(t).as_millis() as u64).collect();
        assert!(pauses[..10].iter().all(|p| *p == 3), "{pauses:?}");
        assert_eq!(&pauses[10..16], &[6, 12, 24, 48, 96, 100], "{pauses:?}");
        assert_eq!(busy_pause(u32::MAX), BUSY_MAX);
    }
}
