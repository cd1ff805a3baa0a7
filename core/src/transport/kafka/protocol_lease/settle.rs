//! What a write settles before its own records, and what a release
//! settles: the batches an earlier write sent without an answer (sent
//! again, with the same sequence, until answered), then its pending abort
//! or commit; and, for an empty write, whether the epoch is still current.
//!
//! Nothing here commits a transaction the writer did not mean to commit:
//! unanswered batches are answered before the abort that ends them, so a
//! delayed Produce cannot land after the abort markers as a transaction
//! nobody ends.

use std::time::Duration;

use tokio::time::Instant;

use super::{context, ending, produce_until, Outcome, ProtocolLease, Tried, TxnError, TxnState};
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
        self.state = TxnState::AbortPending;
        match self.abort(role, what, deadline).await {
            Ok(()) => {}
            Err(Outcome::Drop(fenced)) => return Outcome::Drop(fenced),
            Err(Outcome::Keep(pending)) => {
                tracing::debug!(role, error = %pending, "the refused write's transaction is aborted before the next write");
            }
        }
        ending(role, what, e)
    }

    /// Finishes what an earlier write left: its unanswered batches, then
    /// its abort, or its commit.
    pub(super) async fn finish_pending(
        &mut self,
        role: &str,
        what: &str,
        deadline: Instant,
    ) -> std::result::Result<(), Outcome> {
        self.settle_unanswered(role, what, deadline).await?;
        match self.state {
            TxnState::Idle | TxnState::Open => Ok(()),
            TxnState::AbortPending => self.abort(role, what, deadline).await,
            TxnState::CommitPending => {
                let r = self.commit(role, what, deadline).await;
                match &r {
                    Ok(()) => self.resolved = Some(true),
                    // Still unknown, whether or not the transaction is open.
                    Err(Outcome::Keep(Error::OutcomeUnknown { .. })) => {}
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

    /// A write of no records: succeeds while the coordinator shows this
    /// epoch as the role's current one, is fenced when it shows a newer
    /// one.
    pub(super) async fn check_current(
        &mut self,
        role: &str,
        what: &str,
        deadline: Instant,
    ) -> std::result::Result<(), Outcome> {
        let described =
            tokio::time::timeout_at(deadline, self.describe.describe_transaction(role)).await;
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
        while let Some(sent) = self.unanswered.pop() {
            match produce_until(&self.describe, role, &sent, deadline).await {
                Tried::Done(offset) => self.advance(&sent, offset),
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
        Ok(())
    }

    /// Lets go of the epoch, bounded by `within`: first settles every batch
    /// sent and not answered (as a write does before anything else), then
    /// aborts an open transaction. Without broker-side transaction
    /// verification (Kafka 3.0 to 3.5, or
    /// `transaction.partition.verification.enable=false`) a Produce still in
    /// flight could otherwise land after the abort markers, as a
    /// transaction nobody ends that holds the partition's last stable offset
    /// back. A batch that cannot be settled in time is reported (a warning
    /// naming the role and the partitions) and the abort is sent all the
    /// same. The coordinator aborts a transaction it never hears of at the
    /// transaction timeout.
    pub(crate) async fn release(mut self, role: String, within: Duration) {
        if self.state == TxnState::Idle && self.unanswered.is_empty() {
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
            let partitions: Vec<String> = self
                .unanswered
                .iter()
                .map(|s| format!("{}/{}", s.topic, s.partition))
                .collect();
            tracing::warn!(
                role,
                error = %e,
                unanswered = ?partitions,
                "releasing an epoch: batches it sent are still unanswered and may land after its abort"
            );
        }
        if let Err(Outcome::Keep(e) | Outcome::Drop(e)) =
            self.abort(&role, "release", deadline).await
        {
            tracing::debug!(error = %e, "aborting the open transaction of a released epoch failed");
        }
    }
}
