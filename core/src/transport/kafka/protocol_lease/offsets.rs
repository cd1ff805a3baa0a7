//! A consumer group's input offsets in the write's transaction (rows W16 to
//! W23 of the module table of `protocol_lease`): AddOffsetsToTxn for the
//! group at the transaction coordinator, with the partitions, before any
//! record is sent; TxnOffsetCommit at the group coordinator once every
//! batch is acknowledged, just before the commit. The EndTxn that ends the
//! transaction decides the offsets with the records.
//!
//! AddOffsetsToTxn comes first in every transaction that commits offsets:
//! without it, the coordinator does not know the group's offsets partition,
//! and its EndTxn would not decide the pending offsets (Kafka 4.1 refuses
//! the TxnOffsetCommit; Kafka 3.6 takes it, and the offsets stay pending
//! until a later transaction of the producer that adds the group ends).

use krabka_kafka::OffsetToCommit;
use tokio::time::Instant;

use super::outcome::{context, ending, retrying, Outcome, Tried, TxnError};
use super::ProtocolLease;
use crate::error::Error;
use crate::transport::ConsumedOffsets;

impl ProtocolLease {
    /// Adds consumer group `group`'s offsets partition to the transaction
    /// and pins the transaction to the coordinator that answered (rows W16
    /// to W19).
    pub(super) async fn add_offsets(
        &mut self,
        role: &str,
        what: &str,
        group: &str,
        deadline: Instant,
    ) -> std::result::Result<(), Outcome> {
        let (kafka, token) = (self.kafka.clone(), self.token);
        let added = retrying(deadline, || {
            kafka.add_offsets(role, token.into(), group, deadline)
        });
        match added.await {
            Tried::Done(at) => {
                if let Some(open) = self.txn.open_mut() {
                    open.pin.at = Some(at);
                }
                Ok(())
            }
            Tried::OutOfTime(why) => {
                // The coordinator may have added the group: abort first
                // next time.
                self.enter_abort_pending(Vec::new());
                Err(Outcome::Keep(Error::transient(
                    context(role, what),
                    format!(
                        "the offsets of group {} were not added to the transaction in time \
                         ({why}); nothing was written, and the transaction is aborted before \
                         the next write",
                        crate::error::quote(group)
                    ),
                )))
            }
            Tried::Failed(e @ TxnError::Refused(_)) => {
                Err(self.abort_after(role, what, e, deadline).await)
            }
            Tried::Failed(e) => Err(ending(role, what, e)),
        }
    }

    /// Commits `offsets` in the open transaction, at the group coordinator
    /// (rows W20 to W23): pending until the transaction's EndTxn.
    pub(super) async fn commit_offsets(
        &mut self,
        role: &str,
        what: &str,
        offsets: &ConsumedOffsets,
        deadline: Instant,
    ) -> std::result::Result<(), Outcome> {
        let to_commit: Vec<OffsetToCommit> = offsets
            .offsets
            .iter()
            .map(|o| OffsetToCommit {
                topic: o.topic.clone(),
                partition: o.partition,
                offset: o.offset,
                metadata: o.metadata.clone(),
            })
            .collect();
        let (kafka, token, group) = (self.kafka.clone(), self.token, offsets.group.as_str());
        if let Some(pin) = self.txn.pin_mut() {
            // From here the group coordinator may hold a pending commit of
            // the transaction: what proves its end must see it.
            pin.offsets_sent = true;
        }
        let committed = retrying(deadline, || {
            kafka.commit_offsets_in_txn(role, token.into(), group, &to_commit, deadline)
        });
        match committed.await {
            Tried::Done(()) => Ok(()),
            Tried::OutOfTime(why) => {
                self.enter_abort_pending(Vec::new());
                Err(Outcome::Keep(Error::transient(
                    context(role, what),
                    format!(
                        "the offsets of group {} were not committed in the transaction in time \
                         ({why}); nothing of the write commits, and the transaction is aborted \
                         before the next write",
                        crate::error::quote(group)
                    ),
                )))
            }
            Tried::Failed(e @ TxnError::Refused(_)) => {
                Err(self.abort_after(role, what, e, deadline).await)
            }
            Tried::Failed(e) => Err(ending(role, what, e)),
        }
    }
}
