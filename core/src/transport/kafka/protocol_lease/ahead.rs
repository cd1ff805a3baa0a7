//! The next transaction, opened ahead: shortly after a lease commits (once
//! the coordinator can have completed the commit: the epoch's writer waits
//! about as long as the commit took, `AHEAD_AFTER_MIN` in `epoch.rs`), the
//! state partition is added to a new transaction of the epoch, so the next
//! renewal, or a resign's tombstone, is one Produce and one EndTxn: one
//! replicated write of the transaction log is off the hand-over's path.
//!
//! A transaction opened ahead holds no record: the partition leader does
//! not know of it, so it holds no last stable offset back and no reader
//! waits for it. Its cost is elsewhere, and bounded:
//!
//! * The coordinator counts the transaction timeout (the lease) from this
//!   AddPartitionsToTxn, so from just after the lease's commit: later than
//!   the send time the holder's local deadline counts from. A holder that
//!   renews within its lease never meets the timeout; one that does not has
//!   already ended its term when the coordinator aborts and fences.
//! * A successor's InitProducerId for a holder that died or froze aborts
//!   that empty transaction first (the markers of a transaction without a
//!   record: a few milliseconds of the crash failover, which waits out a
//!   lease anyway).
//! * Releasing the epoch aborts it, as any open transaction.
//!
//! Nothing is opened ahead after a tombstone (the term is ending, and the
//! successor's mint must find the role's transaction complete) or after a
//! guarded write (every transaction of a guarded write would carry a
//! marker to the state partition, waking every standby's fetch). A write
//! that fails before anything is sent leaves a transaction opened ahead
//! open for the next one; any other failure aborts it with the rest.

use tokio::time::Instant;

use super::outcome::{reason, retrying, Outcome, Tried};
use super::{Open, ProtocolLease, Txn};

impl ProtocolLease {
    /// Opens the next transaction with `topic`/`partition` added, by
    /// `deadline`; nothing when a transaction is open or pending, or when a
    /// batch is unanswered. Failure is quiet (the next write adds the
    /// partition itself), except that an AddPartitionsToTxn without an
    /// answer leaves the transaction to be aborted before the next write:
    /// the coordinator may have carried it out.
    pub(crate) async fn open_ahead(
        &mut self,
        role: &str,
        topic: &str,
        partition: i32,
        deadline: Instant,
    ) {
        if !matches!(self.txn, Txn::Idle) {
            return;
        }
        self.txn = Txn::Ahead(Open::begin());
        let new = vec![(topic.to_owned(), vec![partition])];
        let (kafka, token) = (self.kafka.clone(), self.token);
        let added = retrying(deadline, || {
            kafka.add_partitions(role, token.into(), &new, deadline)
        })
        .await;
        match added {
            Tried::Done(at) => {
                if let Some(open) = self.txn.open_mut() {
                    open.pin.at = Some(at);
                    open.added.insert((topic.to_owned(), partition));
                }
            }
            Tried::OutOfTime(why) => {
                tracing::debug!(role, %why, "opening the next transaction ahead had no answer; it is aborted before the next write");
                self.enter_abort_pending(Vec::new());
            }
            // Nothing was added: a refusal or a fence shows again on the
            // next write's own requests, which report it.
            Tried::Failed(e) => {
                let why = reason(e);
                tracing::debug!(role, %why, "opening the next transaction ahead failed; the next write opens its own");
                self.idle();
            }
        }
    }

    /// Aborts a transaction that was only opened ahead (it holds nothing),
    /// by `deadline`; nothing when none is. Before a conditional bump of
    /// the epoch: a coordinator that finds the epoch's transaction
    /// `Ongoing` aborts it with an epoch bump of its own, so the bump that
    /// follows would find a newer epoch than the one it was asked for.
    pub(crate) async fn abort_ahead(
        &mut self,
        role: &str,
        deadline: Instant,
    ) -> std::result::Result<(), Outcome> {
        if !matches!(self.txn, Txn::Ahead(_)) {
            return Ok(());
        }
        self.enter_abort_pending(Vec::new());
        self.abort(role, "supersede", deadline).await
    }
}
