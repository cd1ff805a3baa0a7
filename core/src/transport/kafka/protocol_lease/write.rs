//! One write of the epoch, as one transaction: what it writes
//! ([`Write`]), and its steps (the rows `W` of the module table of
//! `protocol_lease`): place the records, settle what an earlier write left,
//! begin, add the partitions, encode, produce, then commit or leave open.

use krabka_kafka::Client as KafkaClient;
use tokio::time::Instant;

use super::outcome::{context, ending, retrying, unsent, Once, Outcome, Tried, TxnError};
use super::place::{by_topic, Placed};
use super::{encode_batch, produce_until, ProtocolLease, Sent, Txn};
use crate::error::Error;
use crate::transport::{ConsumedOffsets, OutRecord};

/// What a write puts in its transaction. Each kind of content is one
/// variant, so a content that adds to the transaction more than records
/// is one more variant, with its own steps.
#[derive(Debug)]
pub(crate) enum Content {
    /// The role's lease record or tombstone, on the state topic. The write
    /// keeps at least half its time for its own transaction: settling
    /// what an earlier write left unanswered costs it no more than the
    /// other half.
    Lease(Vec<OutRecord>),
    /// A guarded write's records, to data topics. Each partition is first
    /// checked able to take the write (the client's `check_writable`): a
    /// partition that could hold the transaction open fails the write
    /// before anything is sent, so the role's renewals never wait for it.
    Guarded(Vec<OutRecord>),
    /// A guarded write's records (checked as [`Content::Guarded`]'s, and
    /// possibly none) with a consumer group's input offsets (at least
    /// one), committed in the same transaction (the `offsets` module).
    GuardedWithOffsets(Vec<OutRecord>, ConsumedOffsets),
}

impl Content {
    /// The records to produce.
    pub(crate) fn records(&self) -> &[OutRecord] {
        match self {
            Content::Lease(records)
            | Content::Guarded(records)
            | Content::GuardedWithOffsets(records, _) => records,
        }
    }

    /// The input offsets to commit in the transaction, if any.
    pub(crate) fn offsets(&self) -> Option<&ConsumedOffsets> {
        match self {
            Content::GuardedWithOffsets(_, offsets) => Some(offsets),
            Content::Lease(_) | Content::Guarded(_) => None,
        }
    }

    /// Whether every partition is checked able to take the write before
    /// anything is sent.
    pub(crate) fn checks_writable(&self) -> bool {
        matches!(self, Content::Guarded(_) | Content::GuardedWithOffsets(..))
    }

    /// The time by which what an earlier write left must be settled, for
    /// a write due by `deadline`.
    fn settle_by(&self, deadline: Instant) -> Instant {
        match self {
            Content::Guarded(_) | Content::GuardedWithOffsets(..) => deadline,
            Content::Lease(_) => {
                let now = Instant::now();
                now + deadline.saturating_duration_since(now) / 2
            }
        }
    }
}

/// How a write's transaction ends once its records are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// EndTxn(commit).
    Commit,
    /// Left open (fault injection: a holder that stalls mid-transaction).
    LeaveOpen,
}

/// One write of the epoch: its content, and how its transaction ends.
#[derive(Debug)]
pub(crate) struct Write {
    pub(crate) content: Content,
    pub(crate) end: End,
}

impl Write {
    /// A write of `content` that commits.
    pub(crate) fn commit(content: Content) -> Write {
        Write {
            content,
            end: End::Commit,
        }
    }
}

/// Which try of a write this is (see [`ProtocolLease::transact_once`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Try {
    /// A refused sequence aborts and asks for the second try.
    First,
    /// A refused sequence ends the term.
    Second,
}

/// What the leaders answered to a write's batches, short of success.
#[derive(Default)]
struct Answers {
    /// The worst failure: a fence or a broken sequence over a refusal.
    failure: Option<TxnError>,
    /// The batches whose sequence a partition refused.
    refused: Vec<Sent>,
    /// The batches that went without an answer, and the first one's why.
    late: Vec<Sent>,
    late_why: Option<String>,
}

impl ProtocolLease {
    /// Runs `write` as one transaction by `deadline`: finish what an
    /// earlier write left pending, add the partitions, produce, and end as
    /// `write.end` says. A partition that refuses the epoch's sequence
    /// (OUT_OF_ORDER_SEQUENCE_NUMBER) is given one more chance within the
    /// write: the transaction is aborted and the records are sent again
    /// (rows W13 and W14 of the module table).
    pub(crate) async fn transact(
        &mut self,
        role: &str,
        what: &str,
        write: Write,
        deadline: Instant,
    ) -> std::result::Result<(), Outcome> {
        let mut try_ = Try::First;
        loop {
            match self.transact_once(role, what, &write, try_, deadline).await {
                Ok(()) => return Ok(()),
                Err(Once::Ended(o)) => return Err(o),
                Err(Once::Again) => try_ = Try::Second,
            }
        }
    }

    /// One try of [`ProtocolLease::transact`]. On the first try, a
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
    /// order is refused again and ends the term.
    async fn transact_once(
        &mut self,
        role: &str,
        what: &str,
        write: &Write,
        try_: Try,
        deadline: Instant,
    ) -> std::result::Result<(), Once> {
        let placed = match self.place_checked(&write.content, deadline).await {
            Ok(p) => p,
            Err(e) => return Err(self.unplaced(role, what, e, deadline).await.into()),
        };
        let settle_by = write.content.settle_by(deadline);
        self.finish_pending(role, what, settle_by, deadline).await?;
        let offsets = write.content.offsets();
        if placed.is_empty() && offsets.is_none() && matches!(self.txn, Txn::Idle | Txn::Ahead(_)) {
            // Nothing to write, and no transaction to begin: an EndTxn with
            // nothing added would only be answered from the coordinator's
            // cache. The epoch is checked instead.
            return Ok(self.check_current(role, what, deadline).await?);
        }
        self.begin();
        self.add_partitions(role, what, &placed, deadline).await?;
        if let Some(offsets) = offsets {
            self.add_offsets(role, what, &offsets.group, deadline)
                .await?;
        }
        // From here the transaction holds (or may hold) records.
        self.ahead_to_open();
        let batches = self.encode(role, what, &placed, deadline).await?;
        let answers = self.produce(role, what, batches, deadline).await?;
        self.judge(role, what, answers, try_, deadline).await?;
        if let Some(offsets) = offsets {
            self.commit_offsets(role, what, offsets, deadline).await?;
        }
        match write.end {
            End::LeaveOpen => Ok(()),
            End::Commit => Ok(self.commit(role, what, deadline).await?),
        }
    }

    /// A write whose records could not be placed or checked (`e`), before
    /// anything of it was sent. A failed write leaves nothing for a later
    /// one to commit: a transaction left open goes with it (row W1); one
    /// only opened ahead holds nothing, and stays for the next write, as
    /// does a pending one (row W2).
    async fn unplaced(&mut self, role: &str, what: &str, e: Error, deadline: Instant) -> Outcome {
        let e = unsent(role, what, e);
        if matches!(self.txn, Txn::Open(_)) {
            return self
                .abort_after(role, what, TxnError::Refused(e), deadline)
                .await;
        }
        Outcome::Keep(e)
    }

    /// Adds to the transaction the partitions of `placed` it does not have
    /// yet (rows W5 to W8).
    async fn add_partitions(
        &mut self,
        role: &str,
        what: &str,
        placed: &Placed<'_>,
        deadline: Instant,
    ) -> std::result::Result<(), Outcome> {
        let new = {
            let open = self.txn.open();
            by_topic(
                placed
                    .iter()
                    .map(|(key, _)| key)
                    .filter(|key| open.is_none_or(|o| !o.added.contains(*key))),
            )
        };
        if new.is_empty() {
            return Ok(());
        }
        let (kafka, token) = (self.kafka.clone(), self.token);
        let added = retrying(deadline, || {
            kafka.add_partitions(role, token.into(), &new, deadline)
        });
        match added.await {
            Tried::Done(at) => {
                if let Some(open) = self.txn.open_mut() {
                    open.pin.at = Some(at);
                    for (t, ps) in new {
                        for p in ps {
                            open.added.insert((t.clone(), p));
                        }
                    }
                }
                Ok(())
            }
            Tried::OutOfTime(why) => {
                // The coordinator may have added them: abort first next time.
                self.enter_abort_pending(Vec::new());
                Err(Outcome::Keep(Error::transient(
                    context(role, what),
                    format!(
                        "the partitions were not added to the transaction in time ({why}); \
                         nothing was written, and the transaction is aborted before the \
                         next write"
                    ),
                )))
            }
            Tried::Failed(e @ TxnError::Refused(_)) => {
                Err(self.abort_after(role, what, e, deadline).await)
            }
            Tried::Failed(e) => Err(ending(role, what, e)),
        }
    }

    /// One batch per partition, all encoded before any is sent: a batch
    /// refused here must not leave another one in flight (row W9).
    async fn encode(
        &mut self,
        role: &str,
        what: &str,
        placed: &Placed<'_>,
        deadline: Instant,
    ) -> std::result::Result<Vec<Sent>, Outcome> {
        let mut batches = Vec::new();
        for ((topic, partition), recs) in placed {
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
                    let refused = TxnError::Refused(e);
                    return Err(self.abort_after(role, what, refused, deadline).await);
                }
            }
        }
        Ok(batches)
    }

    /// Sends `batches`, all partitions at once, each until it is answered
    /// or `deadline` passes; notes each one acknowledged, and returns what
    /// the others met.
    async fn produce(
        &mut self,
        role: &str,
        what: &str,
        batches: Vec<Sent>,
        deadline: Instant,
    ) -> std::result::Result<Answers, Once> {
        let mut sends = tokio::task::JoinSet::new();
        for sent in batches {
            let (kafka, role): (KafkaClient, String) = (self.kafka.clone(), role.to_owned());
            sends.spawn(async move {
                let tried = produce_until(&kafka, &role, &sent, deadline).await;
                (sent, tried)
            });
        }
        let mut answers = Answers::default();
        while let Some(joined) = sends.join_next().await {
            let (sent, tried) = match joined {
                Ok(v) => v,
                Err(e) => {
                    // A batch that went without an answer may still land:
                    // it stays to be settled by the release.
                    self.enter_abort_pending(std::mem::take(&mut answers.late));
                    return Err(Once::Ended(Outcome::Drop(Error::fatal(
                        context(role, what),
                        format!("a Produce task: {e}"),
                    ))));
                }
            };
            match tried {
                (Tried::Done(offset), _) => self.advance(&sent, offset),
                (Tried::OutOfTime(why), true) => {
                    answers.late_why.get_or_insert(why);
                    answers.late.push(sent);
                }
                (Tried::OutOfTime(why), false) => answers.never_sent(role, what, &sent, why),
                (Tried::Failed(e), _) => answers.failed(e, sent),
            }
        }
        Ok(answers)
    }

    /// What the leaders' `answers` make of the write (rows W10 to W15): a
    /// batch without an answer leaves the transaction to be aborted after
    /// it is answered; the worst failure decides the rest.
    async fn judge(
        &mut self,
        role: &str,
        what: &str,
        answers: Answers,
        try_: Try,
        deadline: Instant,
    ) -> std::result::Result<(), Once> {
        let Answers {
            failure,
            refused,
            late,
            late_why,
        } = answers;
        if !late.is_empty() {
            self.enter_abort_pending(late);
        }
        match failure {
            Some(e @ TxnError::Refused(_)) if late_why.is_none() => {
                Err(self.abort_after(role, what, e, deadline).await.into())
            }
            Some(TxnError::Refused(e)) => Err(Outcome::Keep(e).into()),
            Some(TxnError::Broken(e)) if try_ == Try::First => Err(self
                .abort_refused_sequence(role, what, e, &refused, late_why, deadline)
                .await),
            Some(e) => Err(ending(role, what, e).into()),
            None => match late_why {
                Some(why) => Err(Outcome::Keep(Error::transient(
                    context(role, what),
                    format!(
                        "the records were not acknowledged in time ({why}); the transaction \
                         is aborted before the next write (nothing of it commits)"
                    ),
                ))
                .into()),
                None => Ok(()),
            },
        }
    }
}

impl Answers {
    /// A batch out of time that never left the process: nothing of it can
    /// land, and the sequence stays. The write fails as refused (its
    /// transaction is aborted unless another batch of it is in flight).
    fn never_sent(&mut self, role: &str, what: &str, sent: &Sent, why: String) {
        let unsent = TxnError::Refused(Error::transient(
            context(role, what),
            format!(
                "the leader of {}/{} could not be reached in time ({why}); nothing of the \
                 write was sent to it",
                crate::error::quote(&sent.topic),
                sent.partition
            ),
        ));
        if self.failure.is_none() {
            self.failure = Some(unsent);
        }
    }

    /// A batch that failed with `e`: the worst failure decides, a fence or
    /// a broken sequence over a refusal.
    fn failed(&mut self, e: TxnError, sent: Sent) {
        if matches!(e, TxnError::Broken(_)) {
            self.refused.push(sent);
        }
        let worse = matches!(
            (&self.failure, &e),
            (None, _)
                | (
                    Some(TxnError::Refused(_)),
                    TxnError::Fenced(_) | TxnError::Broken(_)
                )
        );
        if worse {
            self.failure = Some(e);
        }
    }
}
