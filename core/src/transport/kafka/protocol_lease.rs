//! The epoch's writer on the project's own protocol client: rules 1 and 2
//! without a producer per role.
//!
//! The mint is one InitProducerId of the transport's Kafka client
//! ([`krabka_kafka::Client`]), and
//! its answer is the token: nothing else names the epoch, so no
//! DescribeTransactions after it and no batch-header check before the first
//! commit.
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
//! Shortly after a lease commits (not a tombstone, not a guarded write), the
//! next transaction is opened ahead ([`ProtocolLease::open_ahead`], the `ahead`
//! module): step 1 for the state partition is done then, off the path of
//! the next renewal or of a resign's tombstone.
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
//! the next write sends it again and reports how it ended
//! ([`LeaseWriter::take_resolved`]).
//!
//! # The broker whose EndTxn answer counts
//!
//! The coordinator that accepted a transaction's AddPartitionsToTxn is the
//! one whose EndTxn answer counts (the `pin` module): an EndTxn is sent only
//! there. When the coordinator moved, or nothing pinned the transaction, a
//! DescribeTransactions at the current coordinator must prove the outcome
//! (the transaction open there: pinned there and ended there; ended; or a
//! newer epoch); unproven, a commit is [`Error::OutcomeUnknown`] and an
//! abort stays pending. From the pin, INVALID_TXN_STATE to an abort means
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
//! the broker's reason. A sequence the broker does not accept
//! (OUT_OF_ORDER_SEQUENCE_NUMBER) is refused once in a while for no fault
//! of the writer's: a Produce it gave up on can reach the leader late and
//! leave the leader expecting that batch's sequence (see
//! [`ProtocolLease::transact_once`]). The transaction is aborted, the
//! partition's leader asked where the epoch's sequence stands
//! (DescribeProducers: an earlier attempt of the refused batch may have
//! been written), and the records sent again within the same write; a
//! sequence refused again, or one the leader cannot place, ends the term
//! ([`Error::Fatal`]).
//!
//! [`LeaseWriter::take_resolved`]: crate::transport::LeaseWriter::take_resolved

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use krabka_kafka::client::retry;
use krabka_kafka::Client as KafkaClient;
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::token::FencingToken;
use crate::transport::OutRecord;

mod ahead;
mod batch;
mod pin;
mod settle;
#[cfg(test)]
use batch::DEFAULT_MAX_BATCH;
pub(crate) use batch::{encode_batch, max_batch_bytes, next_sequence};
use pin::Pin;

/// A transactional request's failure, its refusals in the crate's errors.
type TxnError = krabka_kafka::TxnError<Error>;

/// How one failed step ends the write.
pub(crate) enum Outcome {
    /// The epoch's writer is unusable: drop it and return this error.
    Drop(Error),
    /// The writer stays; return this error.
    Keep(Error),
}

/// How one try of a write ended short of success.
enum Once {
    /// The write ends so.
    Ended(Outcome),
    /// A partition refused the epoch's sequence and the transaction was
    /// aborted: try once more.
    Again,
}

impl From<Outcome> for Once {
    fn from(o: Outcome) -> Once {
        Once::Ended(o)
    }
}

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
    kafka: KafkaClient,
    pub(crate) token: FencingToken,
    pub(crate) state: TxnState,
    /// The next sequence of the epoch, per partition written.
    sequences: HashMap<(String, i32), i32>,
    /// The partitions added to the open transaction.
    added: HashSet<(String, i32)>,
    /// True while the open transaction was only opened ahead: partitions
    /// added, nothing produced (see the `ahead` module).
    ahead: bool,
    /// Batches whose Produce went without an answer.
    unanswered: Vec<Sent>,
    /// How an earlier commit whose outcome was reported unknown ended.
    pub(crate) resolved: Option<bool>,
    /// Where the open transaction was accepted, and what it sent and wrote.
    pin: Pin,
    /// The partition of the next guarded record without key or partition.
    round_robin: u32,
    /// The largest record batch sent (see [`max_batch_bytes`]).
    max_batch: usize,
}

/// How a retried request ended within its deadline: the client's, its
/// refusals in the crate's errors.
type Tried<T> = retry::Tried<T, TxnError>;

/// Sends a transactional request again through the client's one retry loop
/// (after [`TxnError::Retry`] and [`TxnError::Busy`]) until `deadline`,
/// with the back-off of a held epoch's requests.
async fn retrying<T, F, Fut>(deadline: Instant, request: F) -> Tried<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, krabka_kafka::TxnError>>,
{
    match retry::retry(deadline, retry::Backoff::TRANSACTION, request).await {
        retry::Tried::Done(v) => Tried::Done(v),
        retry::Tried::OutOfTime(why) => Tried::OutOfTime(why),
        retry::Tried::Failed(e) => Tried::Failed(e.map_err(Error::from)),
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
        TxnError::Retry(why) | TxnError::Busy(why) | TxnError::Moved(why) => {
            Outcome::Keep(Error::transient(context(role, what), why))
        }
    }
}

impl ProtocolLease {
    /// The writer of the epoch `token` that InitProducerId just minted.
    pub(crate) fn new(kafka: KafkaClient, token: FencingToken, max_batch: usize) -> ProtocolLease {
        ProtocolLease {
            max_batch,
            kafka,
            token,
            state: TxnState::Idle,
            sequences: HashMap::new(),
            added: HashSet::new(),
            ahead: false,
            unanswered: Vec::new(),
            resolved: None,
            pin: Pin::default(),
            round_robin: 0,
        }
    }

    /// Runs one transaction with `records`: finish what an earlier write
    /// left pending, add the partitions, produce, and commit unless
    /// `leave_open`. With `data` (a guarded write to data topics), each
    /// partition is first checked able to take the write (the client's
    /// `check_writable`): a partition that could hold the transaction open
    /// fails the write before anything is sent, so the role's renewals never
    /// wait for it.
    ///
    /// A partition that refuses the epoch's sequence
    /// (OUT_OF_ORDER_SEQUENCE_NUMBER) is given one more chance within the
    /// write: the transaction is aborted and the records are sent again,
    /// with the same sequences (see [`ProtocolLease::transact_once`]).
    pub(crate) async fn transact(
        &mut self,
        role: &str,
        what: &str,
        records: Vec<OutRecord>,
        leave_open: bool,
        data: bool,
        deadline: Instant,
    ) -> std::result::Result<(), Outcome> {
        let mut first = true;
        loop {
            match self
                .transact_once(role, what, &records, leave_open, data, first, deadline)
                .await
            {
                Ok(()) => return Ok(()),
                Err(Once::Ended(o)) => return Err(o),
                Err(Once::Again) => first = false,
            }
        }
    }

    /// One try of [`ProtocolLease::transact`]. On the `first` try, a
    /// sequence refused by a partition aborts the transaction and asks for
    /// another try ([`Once::Again`]); on the second it ends the term.
    ///
    /// Why a refused sequence can pass: a Produce the client gave up on
    /// (no answer within the attempt's time, its connection closed) may
    /// still reach the leader after its resend was answered, queued behind
    /// an overloaded broker's other requests. With broker-side transaction
    /// verification (Kafka 3.6+), such a late copy leaves a verification
    /// entry at the leader holding the copy's sequence, and the leader
    /// refuses every higher sequence of the producer until a batch or a
    /// marker of the producer is written to the partition: the abort's
    /// marker is one. The refused batch was not written, so the sequence
    /// stays and nothing is sent twice; a sequence that is really out of
    /// order is refused again and ends the term as before.
    #[allow(clippy::too_many_arguments)]
    async fn transact_once(
        &mut self,
        role: &str,
        what: &str,
        records: &[OutRecord],
        leave_open: bool,
        data: bool,
        first: bool,
        deadline: Instant,
    ) -> std::result::Result<(), Once> {
        let placed = match self.place_checked(records, data, deadline).await {
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
                // a transaction left open goes with it (one only opened
                // ahead holds nothing, and stays for the next write).
                if self.state == TxnState::Open && !self.ahead {
                    return Err(self
                        .abort_after(role, what, TxnError::Refused(e), deadline)
                        .await
                        .into());
                }
                return Err(Outcome::Keep(e).into());
            }
        };
        // A lease write keeps at least half its time for its own
        // transaction: records an earlier guarded write left unanswered
        // (their partition's leader silent) cost a renewal no more than the
        // other half.
        let settle_by = if data {
            deadline
        } else {
            let now = Instant::now();
            now + deadline.saturating_duration_since(now) / 2
        };
        self.finish_pending(role, what, settle_by, deadline).await?;
        if placed.is_empty() && (self.state == TxnState::Idle || self.ahead) {
            // Nothing to write, and no transaction to begin: an EndTxn with
            // nothing added would only be answered from the coordinator's
            // cache. The epoch is checked instead.
            return Ok(self.check_current(role, what, deadline).await?);
        }
        if self.state == TxnState::Idle {
            self.state = TxnState::Open;
            self.added.clear();
            self.pin = Pin::begin();
        }
        // 1. The partitions the transaction does not have yet.
        let new = by_topic(
            placed
                .iter()
                .map(|(key, _)| key)
                .filter(|key| !self.added.contains(*key)),
        );
        if !new.is_empty() {
            let (kafka, token) = (self.kafka.clone(), self.token);
            let added = retrying(deadline, || {
                kafka.add_partitions(role, token.into(), &new, deadline)
            });
            match added.await {
                Tried::Done(at) => {
                    self.pin.at = Some(at);
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
                    ))
                    .into());
                }
                Tried::Failed(e @ TxnError::Refused(_)) => {
                    return Err(self.abort_after(role, what, e, deadline).await.into());
                }
                Tried::Failed(e) => return Err(ending(role, what, e).into()),
            }
        }
        // From here the transaction holds (or may hold) records.
        self.ahead = false;
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
                        .await
                        .into())
                }
            }
        }
        let mut sends = tokio::task::JoinSet::new();
        for sent in batches {
            let (kafka, role) = (self.kafka.clone(), role.to_owned());
            sends.spawn(async move {
                let tried = produce_until(&kafka, &role, &sent, deadline).await;
                (sent, tried)
            });
        }
        let mut failure: Option<TxnError> = None;
        // The batches whose sequence a partition refused.
        let mut refused: Vec<Sent> = Vec::new();
        let mut late: Option<String> = None;
        while let Some(joined) = sends.join_next().await {
            let (sent, tried) = joined.map_err(|e| {
                Once::Ended(Outcome::Drop(Error::fatal(
                    context(role, what),
                    format!("a Produce task: {e}"),
                )))
            })?;
            match tried {
                (Tried::Done(offset), _) => self.advance(&sent, offset),
                (Tried::OutOfTime(why), true) => {
                    late.get_or_insert(why);
                    self.unanswered.push(sent);
                }
                // Never sent: nothing of it can land, and the sequence
                // stays. The write fails as refused (its transaction is
                // aborted unless another batch of it is in flight).
                (Tried::OutOfTime(why), false) => {
                    let unsent = TxnError::Refused(Error::transient(
                        context(role, what),
                        format!(
                            "the leader of {}/{} could not be reached in time ({why}); \
                             nothing of the write was sent to it",
                            crate::error::quote(&sent.topic),
                            sent.partition
                        ),
                    ));
                    if failure.is_none() {
                        failure = Some(unsent);
                    }
                }
                (Tried::Failed(e), _) => {
                    if matches!(e, TxnError::Broken(_)) {
                        refused.push(sent);
                    }
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
                return Err(self.abort_after(role, what, e, deadline).await.into())
            }
            Some(TxnError::Refused(e)) => {
                self.state = TxnState::AbortPending;
                return Err(Outcome::Keep(e).into());
            }
            Some(TxnError::Broken(e)) if first => {
                return Err(self
                    .abort_refused_sequence(role, what, e, &refused, late, deadline)
                    .await)
            }
            Some(e) => return Err(ending(role, what, e).into()),
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
            ))
            .into());
        }
        if leave_open {
            return Ok(());
        }
        // 3. The commit.
        Ok(self.commit(role, what, deadline).await?)
    }

    /// After a partition refused the epoch's sequence on the first try of
    /// a write (`why`, for the batches `refused`): aborts the transaction,
    /// whose marker clears what the leader kept of a late copy (see
    /// [`ProtocolLease::transact_once`]), learns from each partition's
    /// leader where the epoch's sequence stands there, and asks for the
    /// second try. With a batch of the write still unanswered (`late`), or
    /// an abort that cannot complete in time, the term ends as it did
    /// before this second try existed: which sequence the leader holds
    /// cannot be learned while a batch may still land.
    ///
    /// The leader's word decides the sequence of the second try, not the
    /// writer's: an earlier attempt of the refused batch that went
    /// unanswered may have been written before the late copy arrived (then
    /// aborted with the rest). Sent again with its old sequence, the batch
    /// would be answered DUPLICATE_SEQUENCE_NUMBER and counted written
    /// while nothing of it commits. The leader shows the last sequence of
    /// the epoch: the batch's own (written, so the next one follows it) or
    /// the one before (not written, sent again as it was). Anything else,
    /// or no answer, ends the term as a broken sequence did before.
    async fn abort_refused_sequence(
        &mut self,
        role: &str,
        what: &str,
        why: Error,
        refused: &[Sent],
        late: Option<String>,
        deadline: Instant,
    ) -> Once {
        tracing::warn!(
            role,
            error = %why,
            "a partition refused the epoch's record sequence; aborting the transaction and \
             sending the records again (a late copy of an earlier batch leaves the leader \
             expecting its sequence until a marker is written)"
        );
        self.state = TxnState::AbortPending;
        // Only once the transaction is aborted here, with nothing of the
        // write in flight, can the leader tell where the sequence stands.
        let blocked = match late {
            Some(late) => format!("a batch of the write is not answered yet ({late})"),
            None => match self.abort(role, what, deadline).await {
                Ok(()) => {
                    for sent in refused {
                        if let Err(e) = self.resequence(sent, deadline).await {
                            return Once::Ended(Outcome::Drop(Error::fatal(
                                context(role, what),
                                format!("{why}; and after the abort: {e}"),
                            )));
                        }
                    }
                    return Once::Again;
                }
                Err(Outcome::Keep(e)) => format!("the abort did not complete ({e})"),
                Err(fenced @ Outcome::Drop(_)) => return Once::Ended(fenced),
            },
        };
        Once::Ended(Outcome::Drop(Error::fatal(
            context(role, what),
            format!("{why}; not sent again: {blocked}"),
        )))
    }

    /// Sets the epoch's sequence on the partition of the refused batch
    /// `sent` from what the partition's leader holds (see
    /// [`ProtocolLease::abort_refused_sequence`]).
    async fn resequence(&mut self, sent: &Sent, deadline: Instant) -> Result<()> {
        let key = (sent.topic.clone(), sent.partition);
        let base = *self.sequences.get(&key).unwrap_or(&0);
        let at = format!(
            "{}/{} (the batch's sequence {base}, {} records)",
            crate::error::quote(&sent.topic),
            sent.partition,
            sent.count
        );
        let shown = self
            .kafka
            .active_producer(
                &sent.topic,
                sent.partition,
                self.token.producer_id,
                deadline,
            )
            .await?;
        // Before a first batch the last sequence is -1 (none).
        let before = if base == 0 {
            -1
        } else {
            next_sequence(base, -1)
        };
        let Some(p) = shown else {
            if base == 0 {
                return Ok(());
            }
            return Err(Error::fatal(
                at,
                "the partition's leader holds nothing of the epoch's producer",
            ));
        };
        if p.producer_epoch != i32::from(self.token.producer_epoch) {
            return Err(Error::fatal(
                at,
                format!(
                    "the partition's leader shows the producer at epoch {}, not this epoch's {}",
                    p.producer_epoch, self.token.producer_epoch
                ),
            ));
        }
        let written = next_sequence(base, sent.count);
        if p.last_sequence == before {
            // Not written: sent again as it was.
            Ok(())
        } else if p.last_sequence == next_sequence(written, -1) {
            tracing::warn!(
                topic = %sent.topic,
                partition = sent.partition,
                base,
                "the refused batch had been written by an earlier attempt (aborted since); the records are sent again after it"
            );
            self.sequences.insert(key, written);
            Ok(())
        } else {
            Err(Error::fatal(
                at,
                format!(
                    "the partition's leader shows the epoch's last sequence at {}, neither \
                     before nor after the batch",
                    p.last_sequence
                ),
            ))
        }
    }

    /// [`ProtocolLease::place`], then with `data` the check that every
    /// partition placed can take the write, by topic.
    async fn place_checked<'r>(
        &mut self,
        records: &'r [OutRecord],
        data: bool,
        deadline: Instant,
    ) -> Result<Placed<'r>> {
        let placed = self.place(records, deadline).await?;
        if data {
            for (topic, partitions) in by_topic(placed.iter().map(|(key, _)| key)) {
                self.kafka
                    .check_writable(&topic, &partitions, deadline)
                    .await?;
            }
        }
        Ok(placed)
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
            let partitions = self.kafka.topic_partitions(&r.topic, deadline).await?;
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

    /// Notes `sent` acknowledged at `offset`: the partition's sequence moves
    /// on past it.
    fn advance(&mut self, sent: &Sent, offset: i64) {
        self.pin.wrote(&sent.topic, sent.partition, offset);
        let seq = self
            .sequences
            .entry((sent.topic.clone(), sent.partition))
            .or_insert(0);
        *seq = next_sequence(*seq, sent.count);
    }
}

/// Sends one batch until it is answered or `deadline` passes. The flag
/// says whether any try may have reached the partition's leader (see
/// [`KafkaClient::produce_noting`]): a batch out of time with the flag
/// unset never left the process, and cannot land later.
async fn produce_until(
    kafka: &KafkaClient,
    role: &str,
    sent: &Sent,
    deadline: Instant,
) -> (Tried<i64>, bool) {
    let reached = std::sync::atomic::AtomicBool::new(false);
    let tried = retrying(deadline, || {
        kafka.produce_noting(
            role,
            &sent.topic,
            sent.partition,
            sent.records.clone(),
            deadline,
            &reached,
        )
    })
    .await;
    (tried, reached.load(std::sync::atomic::Ordering::SeqCst))
}

/// Records grouped by partition, in first-seen order.
type Placed<'r> = Vec<((String, i32), Vec<&'r OutRecord>)>;

/// The partitions of `keys` grouped by topic, in first-seen order, as
/// AddPartitionsToTxn and the writable check take them.
fn by_topic<'k>(keys: impl IntoIterator<Item = &'k (String, i32)>) -> Vec<(String, Vec<i32>)> {
    let mut topics: Vec<(String, Vec<i32>)> = Vec::new();
    for (topic, partition) in keys {
        match topics.iter_mut().find(|(t, _)| t == topic) {
            Some((_, ps)) => ps.push(*partition),
            None => topics.push((topic.clone(), vec![*partition])),
        }
    }
    topics
}

#[cfg(test)]
mod tests;
