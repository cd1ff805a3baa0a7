//! The epoch's writer on the project's own protocol client: rules 1 and 2
//! without a librdkafka producer per role.
//!
//! Chosen with [`super::LeasePath::Protocol`]. The mint is one
//! InitProducerId of the transport's [`DescribeClient`], and its answer is
//! the token: no DescribeTransactions after it and no batch-header check
//! before the first commit, because nothing else names the epoch (the
//! librdkafka path has to ask the coordinator, whose answer can be stale).
//! Every lease write and guarded write of the term is one transaction of
//! that producer id and epoch, sent over the client's connections (one per
//! broker, shared by every role of the transport):
//!
//! 1. AddPartitionsToTxn for the partitions the transaction has not added
//!    yet;
//! 2. one Produce (acks=all) per partition, a transactional record batch
//!    whose base sequence continues the epoch's sequence of that
//!    partition;
//! 3. EndTxn(commit), at most v4, so the epoch stays the term's.
//!
//! # Answers that may or may not have been carried out
//!
//! A Produce without an answer may have been written. Its batch is sent
//! again, with the same sequence, until the leader answers: a batch the
//! leader holds already is answered DUPLICATE_SEQUENCE_NUMBER (written),
//! so the epoch's sequence never skips or repeats a batch. A write whose
//! deadline passes first fails with [`Error::Transient`]; its transaction
//! stays open, and the next write of the epoch first sends the unanswered
//! batches again, then aborts the transaction, before it writes its own
//! records. Nothing of a failed write ever commits. An EndTxn(commit)
//! without an answer leaves the outcome unknown ([`Error::OutcomeUnknown`]);
//! the next write sends it again (a coordinator that committed answers it
//! without error) and reports how it ended ([`LeaseWriter::take_resolved`]).
//!
//! An abort needs no care for partitions the coordinator may not have
//! (librdkafka's issue 4849 on the other path): the coordinator answers an
//! EndTxn(abort) with nothing open INVALID_TXN_STATE, which here only means
//! there was nothing to abort.
//!
//! # Settings
//!
//! Of the librdkafka producer settings of the [`super::KafkaConfig`], the
//! writer honours the security settings (as the protocol client does),
//! `client.id` and `message.max.bytes` (a larger batch is refused, naming
//! its size); it writes uncompressed batches with acks=all whatever
//! `compression.type` and `acks` say.
//!
//! # Errors
//!
//! INVALID_PRODUCER_EPOCH, PRODUCER_FENCED and INVALID_PRODUCER_ID_MAPPING
//! from any request are [`Error::Fenced`], for the write and every later one.
//! A refusal that leaves the epoch usable (no WRITE on a topic, a record too
//! large, an unknown topic) aborts the transaction and fails the write with
//! the broker's reason. A sequence the broker does not accept (it should
//! never happen: the writer is the epoch's only sender) ends the term
//! ([`Error::Fatal`]).
//!
//! [`LeaseWriter::take_resolved`]: crate::transport::LeaseWriter::take_resolved

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::time::Instant;

use super::describe::{busy_pause, TxnError};
use super::lease::Outcome;
use super::DescribeClient;
use crate::error::{Error, Result};
use crate::token::FencingToken;
use crate::transport::OutRecord;

/// The least time an abort gets, even past the caller's deadline.
const MIN_ABORT_TIME: Duration = Duration::from_millis(500);
/// The first pause before a request is sent again; it doubles up to
/// [`MAX_RETRY_PAUSE`]. CONCURRENT_TRANSACTIONS after a commit lasts until
/// the commit's markers are written, a few milliseconds.
const FIRST_RETRY_PAUSE: Duration = Duration::from_millis(2);
const MAX_RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Where the epoch's transaction stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnState {
    /// No transaction open.
    Idle,
    /// Partitions were added or records written; not committed yet.
    Open,
    /// An EndTxn(commit) went without an answer: send it again.
    CommitPending,
    /// The transaction must be aborted before anything else (after its
    /// unanswered batches are answered).
    AbortPending,
}

/// A record batch sent to a partition and not answered yet.
struct Sent {
    topic: String,
    partition: i32,
    records: Bytes,
    count: i32,
}

/// The writer of one held epoch (see the module docs).
pub(crate) struct ProtocolLease {
    describe: DescribeClient,
    pub(crate) token: FencingToken,
    pub(crate) state: TxnState,
    /// The next sequence of the epoch, per partition written.
    sequences: HashMap<(String, i32), i32>,
    /// The partitions added to the open transaction.
    added: HashSet<(String, i32)>,
    /// Batches whose Produce went without an answer.
    unanswered: Vec<Sent>,
    /// How an earlier commit whose outcome was reported unknown ended.
    pub(crate) resolved: Option<bool>,
    /// The partition of the next guarded record without key or partition.
    round_robin: u32,
    /// The largest record batch sent (see [`max_batch_bytes`]).
    max_batch: usize,
}

/// librdkafka's default `message.max.bytes`.
const DEFAULT_MAX_BATCH: usize = 1_000_000;

/// The largest record batch the writer sends: the configuration's
/// `message.max.bytes`, as librdkafka's producers honour it (1,000,000
/// unless set). A larger one is refused before it is sent, naming its size.
pub(crate) fn max_batch_bytes(config: &super::KafkaConfig) -> usize {
    config
        .get("message.max.bytes")
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_MAX_BATCH)
}

/// How a retried request ended within its deadline.
enum Tried<T> {
    Done(T),
    /// The deadline passed; the last reason.
    OutOfTime(String),
    Failed(TxnError),
}

/// Sends a request again after [`TxnError::Retry`] until `deadline`.
async fn retrying<T, F, Fut>(deadline: Instant, mut request: F) -> Tried<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, TxnError>>,
{
    let mut pause = FIRST_RETRY_PAUSE;
    let mut busy = 0u32;
    loop {
        match tokio::time::timeout_at(deadline, request()).await {
            Err(_) => return Tried::OutOfTime("no answer in time".into()),
            Ok(Ok(v)) => return Tried::Done(v),
            Ok(Err(TxnError::Retry(why))) => {
                busy = 0;
                if deadline.saturating_duration_since(Instant::now()) <= pause {
                    return Tried::OutOfTime(why);
                }
                tracing::debug!(%why, "transactional request sent again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_RETRY_PAUSE);
            }
            Ok(Err(TxnError::Busy(why))) => {
                busy += 1;
                let pause = busy_pause(busy);
                if deadline.saturating_duration_since(Instant::now()) <= pause {
                    return Tried::OutOfTime(why);
                }
                tracing::debug!(%why, "transactional request sent again soon");
                tokio::time::sleep(pause).await;
            }
            Ok(Err(e)) => return Tried::Failed(e),
        }
    }
}

fn context(role: &str, what: &str) -> String {
    format!("{what} for role {}", crate::error::quote(role))
}

/// The error of a failure that ends the term.
fn ending(role: &str, what: &str, e: TxnError) -> Outcome {
    match e {
        TxnError::Fenced(why) => Outcome::Drop(Error::Fenced(format!(
            "{}: the epoch is superseded ({why})",
            context(role, what)
        ))),
        TxnError::Broken(e) => Outcome::Drop(e),
        TxnError::Refused(e) => Outcome::Keep(e),
        TxnError::Retry(why) | TxnError::Busy(why) => {
            Outcome::Keep(Error::transient(context(role, what), why))
        }
    }
}

/// The milliseconds since the Unix epoch, for record timestamps.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Encodes `records` as one transactional record batch of `token` whose
/// first record has sequence `sequence`, stamped now.
pub(crate) fn encode_batch(
    token: FencingToken,
    sequence: i32,
    records: &[&OutRecord],
) -> Result<Bytes> {
    encode_batch_at(token, sequence, records, now_ms())
}

/// Appends `v` as Kafka's zigzag varint (records of magic 2).
fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Appends a length-prefixed byte string, or -1 for none.
fn put_bytes(out: &mut Vec<u8>, what: &str, b: Option<&[u8]>) -> Result<()> {
    match b {
        None => put_varint(out, -1),
        Some(b) => {
            let len = i32::try_from(b.len()).map_err(|_| {
                Error::InvalidArgument(format!(
                    "a guarded record's {what} of {} bytes is over 2^31",
                    b.len()
                ))
            })?;
            put_varint(out, i64::from(len));
            out.extend_from_slice(b);
        }
    }
    Ok(())
}

/// [`encode_batch`] with the timestamp given: a record batch of magic 2
/// (Kafka's `DefaultRecordBatch`), uncompressed, transactional, every record
/// at `timestamp`. Headers go out as given, a key repeated included (the
/// `kafka-protocol` encoder keeps headers in a map, which would drop one;
/// the test below shows the two encoders write the same bytes otherwise).
fn encode_batch_at(
    token: FencingToken,
    sequence: i32,
    records: &[&OutRecord],
    timestamp: i64,
) -> Result<Bytes> {
    let count = i32::try_from(records.len())
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "a record batch of {} records (1 to 2^31 - 1 allowed)",
                records.len()
            ))
        })?;
    let mut body = Vec::new();
    let mut rec = Vec::new();
    for (i, r) in records.iter().enumerate() {
        rec.clear();
        rec.push(0); // attributes
        put_varint(&mut rec, 0); // timestamp delta
        put_varint(&mut rec, i as i64); // offset delta
        put_bytes(&mut rec, "key", r.key.as_deref())?;
        put_bytes(&mut rec, "value", r.value.as_deref())?;
        put_varint(&mut rec, r.headers.len() as i64);
        for (k, v) in &r.headers {
            put_bytes(&mut rec, "header key", Some(k.as_bytes()))?;
            put_bytes(&mut rec, "header value", Some(v))?;
        }
        put_varint(&mut body, rec.len() as i64);
        body.extend_from_slice(&rec);
    }
    // After the length field: leader epoch 4, magic 1, CRC 4, attributes 2,
    // last offset delta 4, timestamps 8 + 8, producer id 8, epoch 2, base
    // sequence 4, record count 4.
    let length = i32::try_from(49 + body.len()).map_err(|_| {
        Error::InvalidArgument(format!("a record batch of {} bytes", 61 + body.len()))
    })?;
    let mut out = Vec::with_capacity(61 + body.len());
    out.extend_from_slice(&0i64.to_be_bytes()); // base offset
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    out.push(2); // magic
    let crc_at = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&0x10i16.to_be_bytes()); // transactional, no compression
    out.extend_from_slice(&(count - 1).to_be_bytes());
    out.extend_from_slice(&timestamp.to_be_bytes());
    out.extend_from_slice(&timestamp.to_be_bytes());
    out.extend_from_slice(&token.producer_id.to_be_bytes());
    out.extend_from_slice(&token.producer_epoch.to_be_bytes());
    out.extend_from_slice(&sequence.to_be_bytes());
    out.extend_from_slice(&count.to_be_bytes());
    out.extend_from_slice(&body);
    let crc = crc32c::crc32c(&out[crc_at + 4..]);
    out[crc_at..crc_at + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(Bytes::from(out))
}

impl ProtocolLease {
    /// The writer of the epoch `token` that InitProducerId just minted.
    pub(crate) fn new(
        describe: DescribeClient,
        token: FencingToken,
        max_batch: usize,
    ) -> ProtocolLease {
        ProtocolLease {
            max_batch,
            describe,
            token,
            state: TxnState::Idle,
            sequences: HashMap::new(),
            added: HashSet::new(),
            unanswered: Vec::new(),
            resolved: None,
            round_robin: 0,
        }
    }

    /// Runs one transaction with `records`: finish what an earlier write
    /// left pending, add the partitions, produce, and commit unless
    /// `leave_open`.
    pub(crate) async fn transact(
        &mut self,
        role: &str,
        what: &str,
        records: Vec<OutRecord>,
        leave_open: bool,
        deadline: Instant,
    ) -> std::result::Result<(), Outcome> {
        let placed = match self.place(&records, deadline).await {
            Ok(p) => p,
            Err(e) => {
                let e = match e {
                    Error::Transient { context: c, source } => Error::Transient {
                        context: format!("{}: {c}; nothing was sent", context(role, what)),
                        source,
                    },
                    other => other,
                };
                // A failed write leaves nothing for a later one to commit:
                // a transaction left open goes with it.
                if self.state == TxnState::Open {
                    return Err(self
                        .abort_after(role, what, TxnError::Refused(e), deadline)
                        .await);
                }
                return Err(Outcome::Keep(e));
            }
        };
        self.finish_pending(role, what, deadline).await?;
        if self.state == TxnState::Idle {
            self.state = TxnState::Open;
            self.added.clear();
        }
        // 1. The partitions the transaction does not have yet.
        let mut new: Vec<(String, Vec<i32>)> = Vec::new();
        for ((topic, partition), _) in &placed {
            if !self.added.contains(&(topic.clone(), *partition)) {
                match new.iter_mut().find(|(t, _)| t == topic) {
                    Some((_, ps)) => ps.push(*partition),
                    None => new.push((topic.clone(), vec![*partition])),
                }
            }
        }
        if !new.is_empty() {
            let (describe, token) = (self.describe.clone(), self.token);
            let added = retrying(deadline, || {
                describe.add_partitions(role, token, &new, deadline)
            });
            match added.await {
                Tried::Done(()) => {
                    for (t, ps) in new {
                        for p in ps {
                            self.added.insert((t.clone(), p));
                        }
                    }
                }
                Tried::OutOfTime(why) => {
                    // The coordinator may have added them: abort first next time.
                    self.state = TxnState::AbortPending;
                    return Err(Outcome::Keep(Error::transient(
                        context(role, what),
                        format!(
                            "the partitions were not added to the transaction in time ({why}); \
                             nothing was written, and the transaction is aborted before the \
                             next write"
                        ),
                    )));
                }
                Tried::Failed(e @ TxnError::Refused(_)) => {
                    return Err(self.abort_after(role, what, e, deadline).await);
                }
                Tried::Failed(e) => return Err(ending(role, what, e)),
            }
        }
        // 2. One batch per partition, all encoded before any is sent (a
        // batch refused here must not leave another one in flight), then
        // all partitions at once.
        let mut batches = Vec::new();
        for ((topic, partition), recs) in &placed {
            let key = (topic.clone(), *partition);
            let sequence = *self.sequences.get(&key).unwrap_or(&0);
            let encoded = encode_batch(self.token, sequence, recs).and_then(|b| {
                if b.len() > self.max_batch {
                    Err(Error::InvalidArgument(format!(
                        "a record batch of size {} bytes for {}/{partition} is over \
                         message.max.bytes ({})",
                        b.len(),
                        crate::error::quote(topic),
                        self.max_batch
                    )))
                } else {
                    Ok(b)
                }
            });
            match encoded {
                Ok(records) => batches.push(Sent {
                    topic: topic.clone(),
                    partition: *partition,
                    records,
                    count: i32::try_from(recs.len()).unwrap_or(i32::MAX),
                }),
                Err(e) => {
                    return Err(self
                        .abort_after(role, what, TxnError::Refused(e), deadline)
                        .await)
                }
            }
        }
        let mut sends = tokio::task::JoinSet::new();
        for sent in batches {
            let (describe, role) = (self.describe.clone(), role.to_owned());
            sends.spawn(async move {
                let tried = produce_until(&describe, &role, &sent, deadline).await;
                (sent, tried)
            });
        }
        let mut failure: Option<TxnError> = None;
        let mut late: Option<String> = None;
        while let Some(joined) = sends.join_next().await {
            let (sent, tried) = joined.map_err(|e| {
                Outcome::Drop(Error::fatal(
                    context(role, what),
                    format!("a Produce task: {e}"),
                ))
            })?;
            match tried {
                Tried::Done(_) => self.advance(&sent),
                Tried::OutOfTime(why) => {
                    late.get_or_insert(why);
                    self.unanswered.push(sent);
                }
                Tried::Failed(e) => {
                    // The worst failure decides: a fence or a broken
                    // sequence over a refusal.
                    let worse = matches!(
                        (&failure, &e),
                        (None, _)
                            | (
                                Some(TxnError::Refused(_)),
                                TxnError::Fenced(_) | TxnError::Broken(_)
                            )
                    );
                    if worse {
                        failure = Some(e);
                    }
                }
            }
        }
        match failure {
            Some(e @ TxnError::Refused(_)) if late.is_none() => {
                return Err(self.abort_after(role, what, e, deadline).await)
            }
            Some(TxnError::Refused(e)) => {
                self.state = TxnState::AbortPending;
                return Err(Outcome::Keep(e));
            }
            Some(e) => return Err(ending(role, what, e)),
            None => {}
        }
        if let Some(why) = late {
            self.state = TxnState::AbortPending;
            return Err(Outcome::Keep(Error::transient(
                context(role, what),
                format!(
                    "the records were not acknowledged in time ({why}); the transaction is \
                     aborted before the next write (nothing of it commits)"
                ),
            )));
        }
        if leave_open {
            return Ok(());
        }
        // 3. The commit.
        self.commit(role, what, deadline).await
    }

    /// The partition of each record, in the records' order within a
    /// partition. A record without a partition goes where Kafka's
    /// partitioner puts its key (murmur2), or round robin without a key.
    async fn place<'r>(
        &mut self,
        records: &'r [OutRecord],
        deadline: Instant,
    ) -> Result<Placed<'r>> {
        let mut placed: Placed<'r> = Vec::new();
        for r in records {
            let partitions = self.describe.topic_partitions(&r.topic, deadline).await?;
            let partition = match r.partition {
                Some(p) if p >= partitions => {
                    return Err(Error::InvalidArgument(format!(
                        "partition {p} of topic {} does not exist (it has {partitions})",
                        crate::error::quote(&r.topic)
                    )))
                }
                Some(p) => p,
                None => match &r.key {
                    Some(k) => crate::partition::partition_of_hash(
                        crate::partition::murmur2(k),
                        partitions,
                    ),
                    None => {
                        self.round_robin = self.round_robin.wrapping_add(1);
                        i32::try_from(self.round_robin % partitions.max(1) as u32).unwrap_or(0)
                    }
                },
            };
            let key = (r.topic.clone(), partition);
            match placed.iter_mut().find(|(k, _)| *k == key) {
                Some((_, group)) => group.push(r),
                None => placed.push((key, vec![r])),
            }
        }
        Ok(placed)
    }

    fn advance(&mut self, sent: &Sent) {
        let seq = self
            .sequences
            .entry((sent.topic.clone(), sent.partition))
            .or_insert(0);
        *seq = next_sequence(*seq, sent.count);
    }

    /// Commits the open transaction.
    async fn commit(
        &mut self,
        role: &str,
        what: &str,
        deadline: Instant,
    ) -> std::result::Result<(), Outcome> {
        let (describe, token) = (self.describe.clone(), self.token);
        let mut attempts = 0u32;
        let tried = retrying(deadline, || {
            attempts += 1;
            describe.end_txn(role, token, true, deadline)
        })
        .await;
        let unknown = |e: Error| Error::OutcomeUnknown {
            context: format!("{}: commit", context(role, what)),
            source: Box::new(e),
        };
        match tried {
            Tried::Done(()) => {
                self.state = TxnState::Idle;
                Ok(())
            }
            Tried::OutOfTime(why) => {
                self.state = TxnState::CommitPending;
                Err(Outcome::Keep(unknown(Error::transient(
                    context(role, what),
                    format!("EndTxn(commit) had no answer in time: {why}"),
                ))))
            }
            // A refusal (INVALID_TXN_STATE): the coordinator has no open
            // transaction of the epoch; nothing was committed.
            Tried::Failed(TxnError::Refused(e)) => {
                self.state = TxnState::Idle;
                Err(Outcome::Keep(e))
            }
            // A fence after an unanswered EndTxn may follow a commit.
            Tried::Failed(e @ TxnError::Fenced(_)) if attempts > 1 => match ending(role, what, e) {
                Outcome::Drop(e) | Outcome::Keep(e) => Err(Outcome::Drop(unknown(e))),
            },
            Tried::Failed(e) => Err(ending(role, what, e)),
        }
    }

    /// Aborts the transaction after a refusal `e`, and returns `e`.
    async fn abort_after(
        &mut self,
        role: &str,
        what: &str,
        e: TxnError,
        deadline: Instant,
    ) -> Outcome {
        self.state = TxnState::AbortPending;
        if let Err(o) = self.abort(role, what, deadline).await {
            return o;
        }
        ending(role, what, e)
    }

    /// Aborts the open transaction (given at least [`MIN_ABORT_TIME`]).
    async fn abort(
        &mut self,
        role: &str,
        what: &str,
        deadline: Instant,
    ) -> std::result::Result<(), Outcome> {
        let deadline = deadline.max(Instant::now() + MIN_ABORT_TIME);
        let (describe, token) = (self.describe.clone(), self.token);
        match retrying(deadline, || describe.end_txn(role, token, false, deadline)).await {
            // INVALID_TXN_STATE: nothing was open.
            Tried::Done(()) | Tried::Failed(TxnError::Refused(Error::Transient { .. })) => {
                self.state = TxnState::Idle;
                self.added.clear();
                Ok(())
            }
            Tried::OutOfTime(why) => Err(Outcome::Keep(Error::transient(
                context(role, what),
                format!(
                    "an earlier transaction could not be aborted yet ({why}); nothing of it \
                     commits"
                ),
            ))),
            Tried::Failed(e) => Err(ending(role, what, e)),
        }
    }

    /// Finishes what an earlier write left: its unanswered batches, then
    /// its abort, or its commit.
    async fn finish_pending(
        &mut self,
        role: &str,
        what: &str,
        deadline: Instant,
    ) -> std::result::Result<(), Outcome> {
        while let Some(sent) = self.unanswered.pop() {
            match produce_until(&self.describe, role, &sent, deadline).await {
                Tried::Done(_) => self.advance(&sent),
                Tried::OutOfTime(why) => {
                    self.unanswered.push(sent);
                    return Err(Outcome::Keep(Error::transient(
                        context(role, what),
                        format!(
                            "an earlier write's records are not answered yet ({why}); nothing \
                             of this write was sent"
                        ),
                    )));
                }
                // Refused: not written, the sequence stays.
                Tried::Failed(TxnError::Refused(_)) => {}
                Tried::Failed(e) => return Err(ending(role, what, e)),
            }
        }
        match self.state {
            TxnState::Idle | TxnState::Open => Ok(()),
            TxnState::AbortPending => self.abort(role, what, deadline).await,
            TxnState::CommitPending => {
                let r = self.commit(role, what, deadline).await;
                match &r {
                    Ok(()) => self.resolved = Some(true),
                    Err(Outcome::Keep(e)) if self.state == TxnState::Idle => {
                        tracing::debug!(error = %e, "an earlier commit did not happen");
                        self.resolved = Some(false);
                    }
                    Err(_) => {}
                }
                if let Some(committed) = self.resolved {
                    tracing::warn!(
                        role,
                        committed,
                        "an earlier transaction whose outcome was reported unknown was completed before {what}"
                    );
                }
                match r {
                    Ok(()) => Ok(()),
                    Err(Outcome::Keep(_)) if self.state == TxnState::Idle => Ok(()),
                    Err(o) => Err(o),
                }
            }
        }
    }

    /// Lets go of the epoch: aborts an open transaction, bounded by
    /// `within`. The coordinator aborts one it never hears of at the
    /// transaction timeout.
    pub(crate) async fn release(mut self, role: String, within: Duration) {
        if self.state == TxnState::Idle {
            return;
        }
        let deadline = super::deadline_in(within);
        if let Err(Outcome::Keep(e) | Outcome::Drop(e)) =
            self.abort(&role, "release", deadline).await
        {
            tracing::debug!(error = %e, "aborting the open transaction of a released epoch failed");
        }
    }
}

/// The sequence after `count` records from `base`: Kafka's sequences run
/// from 0 to `i32::MAX` and wrap to 0 (`DefaultRecordBatch.incrementSequence`).
pub(crate) fn next_sequence(base: i32, count: i32) -> i32 {
    base.wrapping_add(count) & i32::MAX
}

/// Sends one batch until it is answered or `deadline` passes.
async fn produce_until(
    describe: &DescribeClient,
    role: &str,
    sent: &Sent,
    deadline: Instant,
) -> Tried<i64> {
    retrying(deadline, || {
        describe.produce(
            role,
            &sent.topic,
            sent.partition,
            sent.records.clone(),
            deadline,
        )
    })
    .await
}

/// Records grouped by partition, in first-seen order.
type Placed<'r> = Vec<((String, i32), Vec<&'r OutRecord>)>;

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::RecordBatchDecoder;

    fn rec(key: &str, value: Option<&str>, headers: &[(&str, &str)]) -> OutRecord {
        OutRecord {
            topic: "t".into(),
            partition: Some(0),
            key: Some(key.as_bytes().to_vec()),
            value: value.map(|v| v.as_bytes().to_vec()),
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
                .collect(),
        }
    }

    #[test]
    fn a_batch_carries_the_epoch_the_sequence_and_the_transactional_flag() {
        let token = FencingToken::new(4005, 7);
        let (a, b) = (rec("k1", Some("v1"), &[("h", "x")]), rec("k2", None, &[]));
        let bytes = encode_batch(token, 41, &[&a, &b]).unwrap();
        let mut buf = bytes.clone();
        let set = RecordBatchDecoder::decode(&mut buf).unwrap();
        assert_eq!(set.records.len(), 2);
        for (i, r) in set.records.iter().enumerate() {
            assert!(r.transactional && !r.control);
            assert_eq!((r.producer_id, r.producer_epoch), (4005, 7));
            assert_eq!(r.sequence, 41 + i as i32);
            assert_eq!(r.offset, i as i64);
        }
        assert_eq!(set.records[0].key.as_deref(), Some(&b"k1"[..]));
        assert_eq!(set.records[0].value.as_deref(), Some(&b"v1"[..]));
        assert_eq!(set.records[1].value, None, "a tombstone is a null value");
        let mut raw = bytes;
        let info = RecordBatchDecoder::decode_batch_info(&mut raw).unwrap();
        assert_eq!(info.len(), 1, "one batch");
        assert_eq!(info[0].base_sequence, 41);
        assert!(info[0].transactional);
    }

    #[test]
    fn sequences_wrap_to_zero_as_kafkas_do() {
        // Kafka's incrementSequence: base > MAX - n wraps to n - (MAX - base) - 1.
        let kafka = |base: i32, n: i32| {
            if base > i32::MAX - n {
                n - (i32::MAX - base) - 1
            } else {
                base + n
            }
        };
        for (base, n) in [
            (0, 1),
            (5, 3),
            (i32::MAX - 1, 1),
            (i32::MAX, 1),
            (i32::MAX, 2),
            (i32::MAX - 3, 10),
        ] {
            assert_eq!(next_sequence(base, n), kafka(base, n), "{base} + {n}");
        }
        // A batch that crosses the end is still one batch.
        let (a, b) = (rec("a", Some("1"), &[]), rec("b", Some("2"), &[]));
        let mut raw = encode_batch(FencingToken::new(1, 0), i32::MAX, &[&a, &b]).unwrap();
        let info = RecordBatchDecoder::decode_batch_info(&mut raw).unwrap();
        assert_eq!(
            (info.len(), info[0].base_sequence, info[0].record_count),
            (1, i32::MAX, 2)
        );
    }

    /// The same records through `kafka-protocol`'s encoder (which keeps
    /// headers in a map: no repeated key here).
    fn their_batch(token: FencingToken, sequence: i32, records: &[&OutRecord], ts: i64) -> Bytes {
        use kafka_protocol::protocol::StrBytes;
        use kafka_protocol::records::{
            Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
        };
        let recs: Vec<Record> = records
            .iter()
            .enumerate()
            .map(|(i, r)| Record {
                transactional: true,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: token.producer_id,
                producer_epoch: token.producer_epoch,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: sequence.wrapping_add(i as i32),
                timestamp: ts,
                key: r.key.as_deref().map(Bytes::copy_from_slice),
                value: r.value.as_deref().map(Bytes::copy_from_slice),
                headers: r
                    .headers
                    .iter()
                    .map(|(k, v)| {
                        (
                            StrBytes::from_string(k.clone()),
                            Some(Bytes::copy_from_slice(v)),
                        )
                    })
                    .collect(),
            })
            .collect();
        let mut buf = bytes::BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            recs.iter(),
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .unwrap();
        buf.freeze()
    }

    #[test]
    fn the_batch_is_byte_for_byte_what_kafka_protocol_encodes() {
        let token = FencingToken::new(4005, 7);
        let long = "x".repeat(300);
        let cases: Vec<Vec<OutRecord>> = vec![
            vec![rec("k", Some("v"), &[])],
            vec![
                rec("k1", Some("v1"), &[("h", "x"), ("trace", "abc")]),
                rec("k2", None, &[]),
            ],
            vec![
                rec(&long, Some(&long), &[(&long, &long)]),
                rec("", Some(""), &[("", "")]),
            ],
        ];
        for (n, case) in cases.iter().enumerate() {
            let refs: Vec<&OutRecord> = case.iter().collect();
            for sequence in [0, 41, i32::MAX] {
                let ours = encode_batch_at(token, sequence, &refs, 1_796_000_000_123).unwrap();
                let theirs = their_batch(token, sequence, &refs, 1_796_000_000_123);
                assert_eq!(ours, theirs, "case {n}, sequence {sequence}");
            }
        }
    }

    #[test]
    fn a_repeated_header_key_is_kept() {
        let a = rec("k", Some("v"), &[("trace", "1"), ("trace", "2")]);
        let bytes = encode_batch(FencingToken::new(1, 0), 0, &[&a]).unwrap();
        // The record's tail: 2 headers, each "trace" then its value.
        let tail: Vec<u8> = [
            &[4u8][..],
            &[10],
            b"trace",
            &[2],
            b"1",
            &[10],
            b"trace",
            &[2],
            b"2",
        ]
        .concat();
        assert!(bytes.ends_with(&tail), "{bytes:?}");
        let mut raw = bytes;
        let info = RecordBatchDecoder::decode_batch_info(&mut raw).unwrap();
        assert_eq!(info[0].record_count, 1);
    }
}
