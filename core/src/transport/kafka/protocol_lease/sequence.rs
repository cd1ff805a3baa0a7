//! A sequence a partition refused on the first try of a write: the abort
//! whose marker clears what the leader kept of a late copy, and the
//! leader's word on where the epoch's sequence stands (see
//! [`ProtocolLease::abort_refused_sequence`]).

use tokio::time::Instant;

use super::outcome::{context, Once, Outcome};
use super::{next_sequence, ProtocolLease, Sent};
use crate::error::{Error, Result};

impl ProtocolLease {
    /// After a partition refused the epoch's sequence on the first try of
    /// a write (`why`, for the batches `refused`): aborts the transaction,
    /// whose marker clears what the leader kept of a late copy (see
    /// [`ProtocolLease::transact_once`]), learns from each partition's
    /// leader where the epoch's sequence stands there, and asks for the
    /// second try (row W13 of the module table). With a batch of the write
    /// still unanswered (`late`), or an abort that cannot complete in time,
    /// the term ends ([`Error::Fatal`]): which sequence the leader holds
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
    /// or no answer, ends the term ([`Error::Fatal`]).
    pub(super) async fn abort_refused_sequence(
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
        self.enter_abort_pending(Vec::new());
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
}
