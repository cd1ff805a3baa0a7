//! What proves a transaction's outcome when the broker that accepted it is
//! no longer its coordinator (or nothing pinned it): one
//! DescribeTransactions at the current coordinator, and, for an ended
//! transaction, the last stable offset and the last marker's epoch of a
//! partition it wrote ([`Proof`]). The rows C6 to C11 and A5 to A8 of the
//! module table of `protocol_lease` act on it.

use std::time::Duration;

use tokio::time::Instant;

use super::outcome::{reason, retrying, Tried};
use super::ProtocolLease;
use crate::token::FencingToken;

/// What a DescribeTransactions at the current coordinator (with the last
/// stable offset of a partition the transaction wrote) proves about the
/// transaction of the epoch's producer id and epoch.
#[derive(Debug)]
pub(crate) enum Proof {
    /// The coordinator at this address reports the transaction `Ongoing`
    /// with the epoch's producer id and epoch: it holds it open, and
    /// answers its EndTxn only after writing its log, which a broker that
    /// lost the partition cannot.
    Open(String),
    /// Nothing of the transaction is open: committed (`Some(true)`),
    /// aborted (`Some(false)`), or one of them (`None`). Proven by:
    /// * a PrepareCommit or CompleteCommit state after an EndTxn(commit) was
    ///   sent, within the transaction timeout of the first
    ///   AddPartitionsToTxn, with a last stable offset past a batch of the
    ///   transaction (its markers are written: it is open nowhere), and
    ///   those markers of the epoch itself (DescribeProducers at the
    ///   partition's leader: not an abort by the coordinator, which bumps
    ///   the epoch first);
    /// * a PrepareAbort or CompleteAbort state after an EndTxn(abort) was
    ///   sent, with such a last stable offset;
    /// * for a transaction without a record (none acknowledged, none
    ///   unanswered) and without offsets (no TxnOffsetCommit sent), any state with the epoch but `Ongoing`: a stale view
    ///   leaves at worst a transaction without records open, which the
    ///   next write joins or the transaction timeout aborts.
    Closed(Option<bool>),
    /// The coordinator reports a newer producer id or epoch: the term is
    /// over, and the transaction with it (a coordinator that bumps an epoch
    /// aborts its open transaction, at the transaction timeout or for a new
    /// holder's InitProducerId).
    Superseded(String),
    /// Nothing is proven (no answer, the id unknown, an older epoch, or a
    /// state a view older than the transaction would show as well).
    Unknown(String),
}

impl ProtocolLease {
    /// What the current coordinator proves about the open transaction (see
    /// [`Proof`]), within `deadline`.
    pub(crate) async fn prove(&self, role: &str, deadline: Instant) -> Proof {
        let kafka = self.kafka.clone();
        let described = retrying(deadline, || kafka.describe_at_coordinator(role, deadline)).await;
        let (addr, description) = match described {
            Tried::Done(v) => v,
            Tried::OutOfTime(why) => {
                return Proof::Unknown(format!("DescribeTransactions had no answer in time: {why}"))
            }
            Tried::Failed(e) => {
                return Proof::Unknown(format!("DescribeTransactions failed: {}", reason(e)))
            }
        };
        let Some(d) = description else {
            return Proof::Unknown(format!(
                "the coordinator at {addr} does not know the transactional id"
            ));
        };
        let theirs = FencingToken::from(d.producer);
        if theirs > self.token {
            return Proof::Superseded(format!(
                "the coordinator at {addr} reports the newer epoch {theirs} (in state {})",
                d.state
            ));
        }
        if theirs < self.token {
            return Proof::Unknown(format!(
                "the coordinator at {addr} reports the older epoch {theirs}: its view is older \
                 than the epoch"
            ));
        }
        let committing = matches!(d.state.as_str(), "PrepareCommit" | "CompleteCommit");
        let aborting = matches!(d.state.as_str(), "PrepareAbort" | "CompleteAbort");
        let pin = self.txn.pin();
        let no_records =
            pin.written.is_empty() && self.txn.unanswered().is_empty() && !pin.offsets_sent;
        if d.state == "Ongoing" {
            return Proof::Open(addr);
        }
        if no_records && (committing || aborting || d.state == "Empty") {
            return Proof::Closed(None);
        }
        let within_timeout = pin.began.is_some_and(|b| {
            b.elapsed() < Duration::from_millis(u64::try_from(d.timeout_ms).unwrap_or(0))
        });
        let ended = if committing && pin.commit_sent && within_timeout {
            Some(true)
        } else if aborting && pin.abort_sent {
            Some(false)
        } else {
            None
        };
        let Some(committed) = ended else {
            return Proof::Unknown(format!(
                "the coordinator at {addr} reports {} with the epoch, which a view older than \
                 the transaction shows as well",
                d.state
            ));
        };
        match self.past_a_batch(deadline).await {
            Ok(()) if committed => match self.ended_by_this_epoch(deadline).await {
                Ok(()) => Proof::Closed(Some(true)),
                Err(why) => Proof::Unknown(format!(
                    "the coordinator at {addr} reports {}, but {why}",
                    d.state
                )),
            },
            Ok(()) => Proof::Closed((!self.txn.pin().commit_sent).then_some(false)),
            Err(why) => Proof::Unknown(format!(
                "the coordinator at {addr} reports {}, but {why}",
                d.state
            )),
        }
    }

    /// Whether the transaction's markers on a partition it wrote carry the
    /// epoch, with nothing of the producer open there: the transaction was
    /// ended by this epoch's own EndTxn. A coordinator that ends a
    /// transaction itself (its timeout, a new holder's InitProducerId)
    /// bumps the epoch first, so its abort markers carry a newer one. This
    /// is what a view of a coordinator older than the transaction (which
    /// may show an earlier commit of the same epoch) cannot fake: the
    /// partition's leader holds the marker itself.
    async fn ended_by_this_epoch(&self, deadline: Instant) -> std::result::Result<(), String> {
        let (topic, partition, _) = self.batch_at_known_offset()?;
        let where_ = || format!("{}/{partition}", crate::error::quote(topic));
        let asked = self
            .kafka
            .active_producer(topic, partition, self.token.producer_id, deadline);
        match tokio::time::timeout_at(deadline, asked).await {
            Ok(Ok(Some(p))) if p.open_transaction_from.is_some() => Err(format!(
                "the leader of {} shows a transaction of the producer open",
                where_()
            )),
            Ok(Ok(Some(p))) if p.producer_epoch == i32::from(self.token.producer_epoch) => Ok(()),
            Ok(Ok(Some(p))) => Err(format!(
                "the leader of {} shows the producer at epoch {}, not the epoch's {}: the \
                 transaction may have been ended by the coordinator",
                where_(),
                p.producer_epoch,
                self.token.producer_epoch
            )),
            Ok(Ok(None)) => Err(format!(
                "the leader of {} holds no state of the producer",
                where_()
            )),
            Ok(Err(e)) => Err(format!("DescribeProducers failed: {e}")),
            Err(_) => Err("DescribeProducers had no answer in time".into()),
        }
    }

    /// Whether the last stable offset of a partition the transaction wrote
    /// is past the transaction's batch there: its markers are written.
    async fn past_a_batch(&self, deadline: Instant) -> std::result::Result<(), String> {
        let (topic, partition, offset) = self.batch_at_known_offset()?;
        let read = tokio::time::timeout_at(
            deadline,
            self.kafka.end_offset(topic, partition, true, deadline),
        )
        .await;
        match read {
            Ok(Ok(stable)) if stable > offset => Ok(()),
            Ok(Ok(stable)) => Err(format!(
                "the last stable offset of {}/{partition} is {stable}, not past the \
                 transaction's batch at {offset} (the transaction is open, or its markers are \
                 being written)",
                crate::error::quote(topic)
            )),
            Ok(Err(e)) => Err(format!("reading the last stable offset failed: {e}")),
            Err(_) => Err("the last stable offset had no answer in time".into()),
        }
    }

    /// The first batch of the transaction the leaders acknowledged at a
    /// known offset (topic, partition, base offset): the partition whose
    /// markers [`Self::past_a_batch`] and [`Self::ended_by_this_epoch`]
    /// read. Why not, when there is none.
    fn batch_at_known_offset(&self) -> std::result::Result<(&str, i32, i64), String> {
        self.txn
            .pin()
            .written
            .iter()
            .find(|(_, _, offset)| *offset >= 0)
            .map(|(topic, partition, offset)| (topic.as_str(), *partition, *offset))
            .ok_or_else(|| "no batch of the transaction has a known offset".to_owned())
    }
}
