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
//!   it wrote) decides; see the `proof` module.
//!
//! Everything is bounded by the write's deadline: a proof that shows the
//! transaction open re-pins it and sends the EndTxn there, at most
//! [`MAX_REPINS`] times.

use tokio::time::Instant;

use super::outcome::{context, ending, outcome_unknown, retrying, Outcome, Tried, TxnError};
use super::proof::Proof;
use super::ProtocolLease;
use crate::error::Error;

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
    pub(super) began: Option<Instant>,
    /// An EndTxn(commit) of the transaction was sent (it may have been
    /// carried out).
    pub(super) commit_sent: bool,
    /// An EndTxn(abort) of the transaction was sent.
    pub(super) abort_sent: bool,
    /// A TxnOffsetCommit of the transaction was sent: the group
    /// coordinator may hold a pending offset commit of it.
    pub(super) offsets_sent: bool,
    /// The transaction's batches the leaders acknowledged: topic, partition,
    /// base offset.
    pub(super) written: Vec<(String, i32, i64)>,
}

impl Pin {
    /// The pin of no transaction.
    pub(crate) const fn none() -> Pin {
        Pin {
            at: None,
            began: None,
            commit_sent: false,
            abort_sent: false,
            offsets_sent: false,
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
