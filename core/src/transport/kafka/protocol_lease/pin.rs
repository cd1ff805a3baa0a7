//! The end of a transaction: EndTxn only at the broker that accepted the
//! transaction, and what proves the outcome when that broker is no longer
//! the coordinator.
//!
//! An EndTxn of v4 or lower is answered from the coordinator's cache, with
//! nothing written, when the transactional id is in CompleteCommit (a
//! commit asked) or CompleteAbort (an abort asked), and INVALID_TXN_STATE
//! from Empty; only from Ongoing does the coordinator write its log
//! (PrepareCommit, PrepareAbort) before it answers. A broker that still
//! caches the id's `__transaction_state` partition after it lost it
//! (paused, cut off from the controller) answers from a state older than
//! the transaction. Hence:
//!
//! * The coordinator that accepted the transaction's AddPartitionsToTxn is
//!   its *pin*: its cache is never older than the transaction. EndTxn goes
//!   only there ([`krabka_kafka::Client::end_txn_pinned`]); its answers count
//!   (INVALID_TXN_STATE from it: nothing of the transaction was open).
//! * When the coordinator moved, or nothing pinned the transaction (its
//!   AddPartitionsToTxn went unanswered), no other broker's EndTxn answer
//!   is asked for: one DescribeTransactions at the current coordinator
//!   (and, for an ended transaction, the last stable offset of a partition
//!   it wrote) decides; see [`Proof`].
//!
//! Everything is bounded by the write's deadline: a proof that shows the
//! transaction open re-pins it and sends the EndTxn there, at most
//! [`MAX_REPINS`] times.

use std::time::Duration;

use tokio::time::Instant;

use super::outcome::{
    context, ending, outcome_unknown, reason, retrying, Outcome, Tried, TxnError,
};
use super::ProtocolLease;
use crate::error::Error;
use crate::token::FencingToken;

/// How many times one commit or abort pins the transaction to the broker a
/// proof found holding it open.
const MAX_REPINS: u32 = 3;

/// What the writer knows of the open transaction's ending: where it was
/// accepted, which EndTxn went out, and what it wrote. Reset when a
/// transaction begins and when it ends.
#[derive(Debug, Default)]
pub(crate) struct Pin {
    /// The broker whose EndTxn answer counts (`host:port`): the coordinator
    /// that accepted the transaction's last AddPartitionsToTxn, or the one
    /// a proof found holding the transaction open.
    pub(crate) at: Option<String>,
    /// Before the transaction's first AddPartitionsToTxn was sent: the
    /// coordinator's transaction timeout cannot end it before this plus the
    /// timeout.
    began: Option<Instant>,
    /// An EndTxn(commit) of the transaction was sent (it may have been
    /// carried out).
    commit_sent: bool,
    /// An EndTxn(abort) of the transaction was sent.
    abort_sent: bool,
    /// The transaction's batches the leaders acknowledged: topic, partition,
    /// base offset.
    written: Vec<(String, i32, i64)>,
}

impl Pin {
    /// The pin of no transaction.
    pub(crate) const fn none() -> Pin {
        Pin {
            at: None,
            began: None,
            commit_sent: false,
            abort_sent: false,
            written: Vec::new(),
        }
    }

    /// The bookkeeping of a transaction that begins now.
    pub(crate) fn begin() -> Pin {
        Pin {
            began: Some(Instant::now()),
            ..Pin::default()
        }
    }

    /// Notes a batch of the transaction acknowledged at `offset`.
    pub(crate) fn wrote(&mut self, topic: &str, partition: i32, offset: i64) {
        self.written.push((topic.to_owned(), partition, offset));
    }
}

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
    ///   unanswered), any state with the epoch but `Ongoing`: a stale view
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
    /// One EndTxn at the pin (or, without a pin, none), retried within
    /// `deadline`; `None` when the pin is no longer the coordinator (or
    /// there is none), with why.
    async fn end_at_pin(
        &mut self,
        role: &str,
        commit: bool,
        deadline: Instant,
    ) -> std::result::Result<(Tried<()>, u32), String> {
        let Some(pin) = self.txn.pin().at.clone() else {
            return Err("no coordinator is known to have accepted the transaction".into());
        };
        let (kafka, token) = (self.kafka.clone(), self.token);
        let mut attempts = 0u32;
        let tried = retrying(deadline, || {
            attempts += 1;
            kafka.end_txn_pinned(role, token.into(), commit, Some(&pin), deadline)
        })
        .await;
        // Every attempt but a first one refused as moved may have reached a
        // coordinator.
        let sent = !(attempts == 1 && matches!(tried, Tried::Failed(TxnError::Moved(_))));
        if let Some(p) = self.txn.pin_mut().filter(|_| sent) {
            if commit {
                p.commit_sent = true;
            } else {
                p.abort_sent = true;
            }
        }
        match tried {
            Tried::Failed(TxnError::Moved(why)) => Err(why),
            other => Ok((other, attempts)),
        }
    }

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
        let no_records = pin.written.is_empty() && self.txn.unanswered().is_empty();
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
        let Some((topic, partition, _)) = self
            .txn
            .pin()
            .written
            .iter()
            .find(|(_, _, offset)| *offset >= 0)
        else {
            return Err("no batch of the transaction has a known offset".into());
        };
        let where_ = || format!("{}/{partition}", crate::error::quote(topic));
        let asked = self
            .kafka
            .active_producer(topic, *partition, self.token.producer_id, deadline);
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
        let Some((topic, partition, offset)) = self
            .txn
            .pin()
            .written
            .iter()
            .find(|(_, _, offset)| *offset >= 0)
        else {
            return Err("no batch of the transaction has a known offset".into());
        };
        let read = tokio::time::timeout_at(
            deadline,
            self.kafka.end_offset(topic, *partition, true, deadline),
        )
        .await;
        match read {
            Ok(Ok(stable)) if stable > *offset => Ok(()),
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

    /// Commits the open transaction at its pin; when the coordinator moved
    /// (or nothing pinned it), what [`Self::prove`] shows decides (rows C1
    /// to C11 of the module table of `protocol_lease`).
    pub(crate) async fn commit(
        &mut self,
        role: &str,
        what: &str,
        deadline: Instant,
    ) -> std::result::Result<(), Outcome> {
        let mut repins = 0u32;
        loop {
            let moved = match self.end_at_pin(role, true, deadline).await {
                Err(moved) => moved,
                Ok(answered) => return self.commit_answered(role, what, answered),
            };
            let proof = self.prove(role, deadline).await;
            tracing::debug!(role, %moved, ?proof, "a commit not answered by its pin");
            match proof {
                Proof::Open(addr) if repins < MAX_REPINS => {
                    repins += 1;
                    if let Some(pin) = self.txn.pin_mut() {
                        pin.at = Some(addr);
                    }
                }
                proof => return self.commit_proven(role, what, &moved, proof),
            }
        }
    }

    /// What the pin's answer to an EndTxn(commit), after `attempts`
    /// tries, makes of the commit (rows C1 to C5).
    fn commit_answered(
        &mut self,
        role: &str,
        what: &str,
        (tried, attempts): (Tried<()>, u32),
    ) -> std::result::Result<(), Outcome> {
        match tried {
            Tried::Done(()) => {
                self.idle();
                Ok(())
            }
            Tried::OutOfTime(why) => {
                self.enter_commit_pending();
                Err(Outcome::Keep(outcome_unknown(
                    role,
                    what,
                    Error::transient(
                        context(role, what),
                        format!("EndTxn(commit) had no answer in time: {why}"),
                    ),
                )))
            }
            // A refusal (INVALID_TXN_STATE) from the pin: it has no
            // open transaction of the epoch; nothing was committed.
            Tried::Failed(TxnError::Refused(e)) => {
                self.idle();
                Err(Outcome::Keep(e))
            }
            // A fence after an unanswered EndTxn may follow a commit.
            Tried::Failed(e @ TxnError::Fenced(_)) if attempts > 1 => match ending(role, what, e) {
                Outcome::Drop(e) | Outcome::Keep(e) => {
                    Err(Outcome::Drop(outcome_unknown(role, what, e)))
                }
            },
            Tried::Failed(e) => Err(ending(role, what, e)),
        }
    }

    /// What `proof` makes of a commit its pin did not answer (`moved`
    /// says why), short of a re-pin (rows C7 to C11).
    fn commit_proven(
        &mut self,
        role: &str,
        what: &str,
        moved: &str,
        proof: Proof,
    ) -> std::result::Result<(), Outcome> {
        let unknown = |e: Error| outcome_unknown(role, what, e);
        match proof {
            Proof::Closed(Some(true)) => {
                self.idle();
                Ok(())
            }
            Proof::Closed(Some(false)) => {
                self.idle();
                Err(Outcome::Keep(Error::transient(
                    context(role, what),
                    format!("{moved}; the transaction was aborted, nothing of it committed"),
                )))
            }
            Proof::Closed(None) => {
                self.idle();
                Err(Outcome::Keep(unknown(Error::transient(
                    context(role, what),
                    format!("{moved}; the transaction ended, committed or aborted"),
                ))))
            }
            Proof::Superseded(why) => {
                let sent = self.txn.pin().commit_sent;
                self.idle();
                let fenced = Error::Fenced(format!(
                    "{}: the epoch is superseded ({moved}; {why})",
                    context(role, what)
                ));
                // A commit sent may have been carried out before the
                // epoch was bumped.
                Err(Outcome::Drop(if sent { unknown(fenced) } else { fenced }))
            }
            Proof::Open(_) | Proof::Unknown(_) => {
                let why = match proof {
                    Proof::Unknown(why) => why,
                    _ => "the coordinator kept moving".to_owned(),
                };
                self.enter_commit_pending();
                Err(Outcome::Keep(unknown(Error::transient(
                    context(role, what),
                    format!("{moved}; {why}"),
                ))))
            }
        }
    }

    /// Aborts the open transaction by `deadline` (never later: the epoch's
    /// writes are bounded by the lease) at its pin; when the coordinator moved (or nothing pinned it), what
    /// [`Self::prove`] shows decides. Unproven, the transaction stays to be
    /// aborted before anything else.
    pub(crate) async fn abort(
        &mut self,
        role: &str,
        what: &str,
        deadline: Instant,
    ) -> std::result::Result<(), Outcome> {
        let not_yet = |why: String| {
            Outcome::Keep(Error::transient(
                context(role, what),
                format!(
                    "an earlier transaction could not be aborted yet ({why}); nothing of it \
                     commits"
                ),
            ))
        };
        if !self.txn.unanswered().is_empty() {
            return Err(not_yet(format!(
                "records sent to {} are not answered yet, and a copy of them still in flight \
                 could land after an abort of this epoch",
                self.unanswered_partitions().join(", ")
            )));
        }
        let mut repins = 0u32;
        loop {
            let moved = match self.end_at_pin(role, false, deadline).await {
                Err(moved) => moved,
                // INVALID_TXN_STATE from the pin: nothing was open.
                Ok((
                    Tried::Done(()) | Tried::Failed(TxnError::Refused(Error::Transient { .. })),
                    _,
                )) => {
                    self.idle();
                    return Ok(());
                }
                Ok((Tried::OutOfTime(why), _)) => return Err(not_yet(why)),
                Ok((Tried::Failed(e), _)) => return Err(ending(role, what, e)),
            };
            let proof = self.prove(role, deadline).await;
            tracing::debug!(role, %moved, ?proof, "an abort not answered by its pin");
            match proof {
                Proof::Open(addr) if repins < MAX_REPINS => {
                    repins += 1;
                    if let Some(pin) = self.txn.pin_mut() {
                        pin.at = Some(addr);
                    }
                }
                Proof::Closed(_) => {
                    self.idle();
                    return Ok(());
                }
                Proof::Superseded(why) => {
                    self.idle();
                    return Err(Outcome::Drop(Error::Fenced(format!(
                        "{}: the epoch is superseded ({moved}; {why})",
                        context(role, what)
                    ))));
                }
                Proof::Open(_) => {
                    return Err(not_yet(format!("{moved}; the coordinator kept moving")))
                }
                Proof::Unknown(why) => return Err(not_yet(format!("{moved}; {why}"))),
            }
        }
    }
}
