//! What a write settles before its own records, and what a release
//! settles: the batches an earlier write sent without an answer (sent
//! again, with the same sequence, until answered), then its pending abort
//! or commit; and, for an empty write, whether the epoch is still current.
//!
//! Nothing here commits a transaction the writer did not mean to commit:
//! unanswered batches are answered before the abort that ends them, so a
//! delayed Produce cannot land after the abort markers as a transaction
//! nobody ends. No path aborts with the term's own epoch while a batch is
//! unanswered ([`ProtocolLease::abort`] refuses): such a transaction stays
//! open until its batches are answered, or the coordinator ends it with a
//! bumped epoch.

use std::time::Duration;

use tokio::time::Instant;

use super::outcome::{context, ending, Outcome, Tried, TxnError};
use super::{produce_until, ProtocolLease, Txn};
use crate::error::Error;
use crate::token::FencingToken;

impl ProtocolLease {
    /// Aborts the transaction after a refusal `e`, and returns `e`. An
    /// abort that cannot be completed by `deadline` stays pending (the
    /// next write of the epoch, or its release, sends it first): the write
    /// still fails with `e`, its cause. A fence met by the abort is
    /// returned instead.
    pub(super) async fn abort_after(
        &mut self,
        role: &str,
        what: &str,
        e: TxnError,
        deadline: Instant,
    ) -> Outcome {
        self.enter_abort_pending(Vec::new());
        match self.abort(role, what, deadline).await {
            Ok(()) => {}
            Err(Outcome::Drop(fenced)) => return Outcome::Drop(fenced),
            Err(Outcome::Keep(pending)) => {
                tracing::debug!(role, error = %pending, "the refused write's transaction is aborted before the next write");
            }
        }
        ending(role, what, e)
    }

    /// Finishes what an earlier write left: its unanswered batches (by
    /// `settle_by`), then its abort, or its commit (by `deadline`).
    pub(super) async fn finish_pending(
        &mut self,
        role: &str,
        what: &str,
        settle_by: Instant,
        deadline: Instant,
    ) -> std::result::Result<(), Outcome> {
        self.settle_unanswered(role, what, settle_by).await?;
        match self.txn {
            Txn::Idle | Txn::Ahead(_) | Txn::Open(_) => Ok(()),
            Txn::AbortPending { .. } => self.abort(role, what, deadline).await,
            Txn::CommitPending(_) => {
                let r = self.commit(role, what, deadline).await;
                match &r {
                    Ok(()) => self.resolved = Some(true),
                    // Still unknown, whether or not the transaction is open.
                    Err(Outcome::Keep(Error::OutcomeUnknown { .. })) => {}
                    Err(Outcome::Keep(e)) if matches!(self.txn, Txn::Idle) => {
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
                    Err(Outcome::Keep(_)) if matches!(self.txn, Txn::Idle) => Ok(()),
                    Err(o) => Err(o),
                }
            }
        }
    }

    /// A write of no records: succeeds while the coordinator shows this
    /// epoch as the role's current one, is fenced when it shows a newer
    /// one. The answer is taken only once another broker confirms the
    /// broker that gave it is the coordinator
    /// ([`KafkaClient::describe_transaction_confirmed`]), so a
    /// coordinator cut off from the cluster cannot vouch for a deposed
    /// epoch past the bound `describe_leadership` keeps.
    ///
    /// [`KafkaClient::describe_transaction_confirmed`]: krabka_kafka::Client::describe_transaction_confirmed
    pub(super) async fn check_current(
        &mut self,
        role: &str,
        what: &str,
        deadline: Instant,
    ) -> std::result::Result<(), Outcome> {
        let described =
            tokio::time::timeout_at(deadline, self.kafka.describe_transaction_confirmed(role))
                .await;
        match described {
            Ok(Ok(Some(d))) => {
                let current = FencingToken::from(d.producer);
                if current > self.token {
                    Err(Outcome::Drop(Error::Fenced(format!(
                        "{}: the role's epoch is now {current}, newer than this epoch's {}",
                        context(role, what),
                        self.token
                    ))))
                } else {
                    Ok(())
                }
            }
            Ok(Ok(None)) => Err(Outcome::Keep(Error::transient(
                context(role, what),
                "the coordinator does not know the role's transactional id",
            ))),
            Ok(Err(e)) => Err(Outcome::Keep(e.into())),
            Err(_) => Err(Outcome::Keep(Error::transient(
                context(role, what),
                "the coordinator did not answer in time",
            ))),
        }
    }

    /// Sends every batch that went without an answer again (same
    /// sequence) until each is answered (written, or refused and not
    /// written), so none is left in flight to land later. Out of time, the
    /// batches not answered stay, and the write fails without sending
    /// anything of its own.
    pub(super) async fn settle_unanswered(
        &mut self,
        role: &str,
        what: &str,
        deadline: Instant,
    ) -> std::result::Result<(), Outcome> {
        while let Some(sent) = self.txn.unanswered_mut().and_then(Vec::pop) {
            match produce_until(&self.kafka, role, &sent, deadline).await.0 {
                Tried::Done(offset) => self.advance(&sent, offset),
                Tried::OutOfTime(why) => {
                    if let Some(unanswered) = self.txn.unanswered_mut() {
                        unanswered.push(sent);
                    }
                    return Err(Outcome::Keep(Error::transient(
                        context(role, what),
                        format!(
                            "the records an earlier write sent to {} are not answered yet \
                             ({why}); their transaction cannot be ended with this epoch until \
                             they are (a copy still in flight could land after its abort), so \
                             nothing of this write was sent; the partition's leader must answer, \
                             or the partition move to a leader that does",
                            self.unanswered_partitions().join(", ")
                        ),
                    )));
                }
                // Refused: not written, the sequence stays.
                Tried::Failed(TxnError::Refused(_)) => {}
                Tried::Failed(e) => return Err(ending(role, what, e)),
            }
        }
        Ok(())
    }

    /// The partitions of the batches sent and not answered, as
    /// `"topic"/partition`.
    pub(super) fn unanswered_partitions(&self) -> Vec<String> {
        self.txn
            .unanswered()
            .iter()
            .map(|s| format!("{}/{}", crate::error::quote(&s.topic), s.partition))
            .collect()
    }

    /// Lets go of the epoch, bounded by `within`: first settles every batch
    /// sent and not answered (as a write does before anything else), then
    /// aborts an open transaction.
    ///
    /// A batch that cannot be settled in time leaves the transaction open,
    /// never aborted with this epoch ([`ProtocolLease::abort`] refuses
    /// while a batch is unanswered): without broker-side transaction
    /// verification (Kafka 3.0 to 3.5, or
    /// `transaction.partition.verification.enable=false`) a copy landing
    /// after such an abort would open a transaction the coordinator does not
    /// know, which the next epoch's commit marker would commit and nothing
    /// would ever abort. Left open, the transaction is aborted by the
    /// coordinator with a bumped epoch, at the transaction timeout (the
    /// lease) or at once when a successor mints; a late copy then lands
    /// inside it (and is aborted with it) or is refused as an older epoch.
    /// Reported with a warning naming the role and the partitions.
    pub(crate) async fn release(mut self, role: String, within: Duration) {
        if matches!(self.txn, Txn::Idle) {
            return;
        }
        let deadline = super::super::deadline_in(within);
        if let Err(Outcome::Keep(e) | Outcome::Drop(e)) =
            self.settle_unanswered(&role, "release", deadline).await
        {
            // Fenced: a partition refused the epoch, so a newer epoch's
            // markers are there and none of its batches can land any more
            // (a resign's own bump ends here). Nothing to warn of.
            if e.means_fenced() {
                tracing::debug!(role, error = %e, "releasing an epoch: superseded, nothing of it can land");
                return;
            }
            tracing::warn!(
                role,
                error = %e,
                unanswered = ?self.unanswered_partitions(),
                "releasing an epoch: batches it sent are still unanswered, so its transaction \
                 is left open for the coordinator to abort with a bumped epoch (at the \
                 transaction timeout, or when a successor mints)"
            );
            return;
        }
        if let Err(Outcome::Keep(e) | Outcome::Drop(e)) =
            self.abort(&role, "release", deadline).await
        {
            tracing::debug!(error = %e, "aborting the open transaction of a released epoch failed");
        }
    }
}
