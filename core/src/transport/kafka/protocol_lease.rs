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
//! A guarded write with input offsets adds AddOffsetsToTxn for the group
//! after step 1 and TxnOffsetCommit (v4 or lower, no group membership)
//! between steps 2 and 3, so the offsets commit or abort with the records
//! (the `offsets` module).
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
//!//!
//! # States
//!
//! The writer is in one state of [`Txn`], which owns that state's data:
//!
//! * **Idle**: no transaction open, nothing unanswered.
//! * **Ahead**: opened ahead: the state partition added, no record sent
//!   (the partitions added and the pin, an [`Open`]).
//! * **Open**: partitions added, records written or not, every batch
//!   answered; not ended ([`Open`]).
//! * **CommitPending**: an EndTxn(commit) went without an answer, or its
//!   outcome is not proven: sent again before anything else ([`Open`]).
//! * **AbortPending**: must be aborted before anything else, once its
//!   unanswered batches are answered ([`Open`] and the batches). No batch
//!   is unanswered in any other state.
//!
//! The epoch's sequences, the round-robin partition and the largest batch
//! outlive transactions and belong to no state. How an earlier commit
//! whose outcome was reported unknown ended (`resolved`) is a report of
//! rows S3 and C7, taken by the epoch after each write.
//!
//! # The table
//!
//! The contract the code is checked against: each row is a state, an
//! event, what the writer does, and the state it is in after (a dropped
//! writer is released, rows R). A write runs its steps in this order,
//! each row ending the write unless it says "goes on" (the offsets rows
//! W16 to W19 come after W5, W20 to W23 after W10). Rows W are in
//! `write` (W16 to W23 in `offsets`), S and R in `settle`, C and A in `pin` (what proves an
//! outcome in `proof`), H in `ahead`, the refused sequence's second try
//! (W13) in `sequence`; the tests name the
//! rows they cover.
//!
//! | Row | State | Event | Action | Next |
//! |-----|-------|-------|--------|------|
//! | W1  | Open | the records cannot be placed or checked writable | abort (A rows); fail with the cause, nothing sent | Idle, or AbortPending |
//! | W2  | any other | the records cannot be placed or checked writable | fail with the cause, nothing sent | unchanged |
//! | S1  | AbortPending, batches unanswered | a write or the release begins | send each again (same sequence) until answered, by the write's deadline (a lease write's: half its time); a refusal: not written, dropped; another failure: as [`ending`](outcome::ending) maps it; out of time: fail transient naming the partitions, nothing of the write sent | AbortPending, none unanswered; goes on |
//! | S2  | AbortPending | (after S1) | abort (A rows) | Idle, goes on; or as A says |
//! | S3  | CommitPending | a write begins | commit (C rows); report how it ended; unknown still: fail with it | Idle, goes on; or CommitPending |
//! | S4  | Idle, Ahead | a write of no records and no offsets | DescribeTransactions, confirmed: this epoch current: done; a newer one: drop, fenced; the id unknown or no answer: fail transient; a failure: fail with it | unchanged |
//! | W3  | Idle | records placed | begin: a new pin | Open |
//! | W4  | Ahead, Open | records placed | join the transaction | unchanged |
//! | W5  | Ahead, Open | AddPartitionsToTxn answered (or nothing new to add) | pin the transaction to the coordinator that answered | Open, goes on |
//! | W6  | Ahead, Open | AddPartitionsToTxn without an answer in time | fail transient (the coordinator may have added them) | AbortPending |
//! | W7  | Ahead, Open | AddPartitionsToTxn refused | abort (A rows); fail with the refusal | Idle, or AbortPending |
//! | W8  | Ahead, Open | AddPartitionsToTxn fenced, or any other failure | fail as [`ending`](outcome::ending) maps it | unchanged, or dropped |
//! | W9  | Open | a batch cannot be encoded, or is over `message.max.bytes` | abort (A rows); fail invalid argument, nothing sent | Idle, or AbortPending |
//! | W10 | Open | every batch acknowledged | the sequences move on; with offsets, commit them (W20 to W23); commit (C rows), or leave open | as C says; Open |
//! | W11 | Open | a batch sent without an answer in time | fail transient ("not acknowledged in time") | AbortPending, the batch unanswered |
//! | W12 | Open | a batch refused, or its leader never reached (nothing sent) | none unanswered: abort (A rows); else keep the abort pending; fail with the refusal | Idle, or AbortPending |
//! | W13 | Open, first try | a partition refuses the epoch's sequence | abort, ask each refusing partition's leader where the sequence stands (DescribeProducers), try again; a batch unanswered, an abort not done, or a sequence the leader cannot place: drop, fatal | Idle, second try; or dropped |
//! | W14 | Open, second try | a partition refuses the epoch's sequence | drop, fatal | dropped |
//! | W15 | Open | a Produce fenced | drop, fenced | dropped |
//! | W16 | Ahead, Open | offsets to commit: AddOffsetsToTxn for the group answered | pin the transaction to the coordinator that answered | unchanged, goes on |
//! | W17 | Ahead, Open | AddOffsetsToTxn without an answer in time | fail transient (the coordinator may have added the group) | AbortPending |
//! | W18 | Ahead, Open | AddOffsetsToTxn refused (no READ on the group) | abort (A rows); fail with the refusal | Idle, or AbortPending |
//! | W19 | Ahead, Open | AddOffsetsToTxn fenced, or any other failure | fail as [`ending`](outcome::ending) maps it | unchanged, or dropped |
//! | W20 | Open | (after W10) TxnOffsetCommit answered for every partition | commit (C rows); from its sending on, no proof takes the transaction for one without content | as C says |
//! | W21 | Open | TxnOffsetCommit without an answer in time | fail transient (the group coordinator may hold the pending commit) | AbortPending |
//! | W22 | Open | TxnOffsetCommit refused (a group with members, an unknown topic, metadata too large, not verified in the transaction) | abort (A rows); fail with the refusal | Idle, or AbortPending |
//! | W23 | Open | TxnOffsetCommit fenced, or any other failure | fail as [`ending`](outcome::ending) maps it | unchanged, or dropped |
//! | C1  | Open, CommitPending | EndTxn(commit) at the pin answered | done | Idle |
//! | C2  | Open, CommitPending | EndTxn(commit) without an answer in time | fail, outcome unknown | CommitPending |
//! | C3  | Open, CommitPending | the pin refuses (INVALID_TXN_STATE: nothing open) | fail with the refusal | Idle |
//! | C4  | Open, CommitPending | fenced after a try without an answer | drop, outcome unknown (the commit may have been carried out) | dropped |
//! | C5  | Open, CommitPending | fenced at the first try, or a broken epoch | drop | dropped |
//! | C6  | Open, CommitPending | the pin is not the coordinator, or there is none: the proof shows the transaction open at another broker | pin it there (at most three times), EndTxn there | unchanged, C1 to C11 again |
//! | C7  | Open, CommitPending | ... the proof shows it committed | done | Idle |
//! | C8  | Open, CommitPending | ... the proof shows it aborted | fail transient ("aborted, nothing of it committed") | Idle |
//! | C9  | Open, CommitPending | ... the proof shows it ended, committed or aborted | fail, outcome unknown | Idle |
//! | C10 | Open, CommitPending | ... the proof shows a newer epoch | drop, fenced (outcome unknown when a commit was sent) | dropped |
//! | C11 | Open, CommitPending | ... nothing proven, or the coordinator kept moving | fail, outcome unknown | CommitPending |
//! | A1  | AbortPending | batches unanswered | fail transient ("could not be aborted yet") | unchanged |
//! | A2  | AbortPending | EndTxn(abort) at the pin answered, or the pin refuses (INVALID_TXN_STATE: nothing open) | done | Idle |
//! | A3  | AbortPending | EndTxn(abort) without an answer in time | fail transient ("could not be aborted yet") | unchanged |
//! | A4  | AbortPending | EndTxn(abort) fenced, or any other failure | fail as [`ending`](outcome::ending) maps it | unchanged, or dropped |
//! | A5  | AbortPending | the pin is not the coordinator, or there is none: the proof shows the transaction open at another broker | pin it there (at most three times), EndTxn there | unchanged, A1 to A8 again |
//! | A6  | AbortPending | ... the proof shows it ended | done | Idle |
//! | A7  | AbortPending | ... the proof shows a newer epoch | drop, fenced | dropped |
//! | A8  | AbortPending | ... nothing proven, or the coordinator kept moving | fail transient ("could not be aborted yet") | unchanged |
//! | H1  | Idle | open ahead (after a lease commits): AddPartitionsToTxn answered | pin it | Ahead |
//! | H2  | Idle | open ahead: AddPartitionsToTxn without an answer | (quiet) | AbortPending |
//! | H3  | Idle | open ahead: AddPartitionsToTxn failed | (quiet; the next write reports it) | Idle |
//! | H4  | any other | open ahead | nothing | unchanged |
//! | H5  | Ahead | supersede | abort (A rows) before the bump | Idle; or as A says |
//! | H6  | any other | supersede | nothing | unchanged |
//! | R1  | Idle | release | nothing | gone |
//! | R2  | any other | release | S1 (by the release's bound); batches still unanswered: leave the transaction open to the coordinator, warn | gone |
//! | R3  | any other, none unanswered | release | abort (A rows), a failure logged | gone |
//!
//! An abort (A rows) starts by moving the writer to AbortPending, from
//! whichever state it is in; a commit that is not answered (C2, C11)
//! moves it to CommitPending.
//!
//! Rows C8 and C9 are not reached by the writer's own steps (a commit
//! follows acknowledged batches, and no abort was sent for it): their tests
//! begin from a crafted CommitPending.
//! AddPartitionsToTxn and EndTxn answers never read as a broken epoch (only
//! a Produce's sequence does): W8's and C5's failures are fences.
//!
//! [`LeaseWriter::take_resolved`]: crate::transport::LeaseWriter::take_resolved
//! [`Error::Transient`]: crate::error::Error::Transient
//! [`Error::OutcomeUnknown`]: crate::error::Error::OutcomeUnknown
//! [`Error::Fenced`]: crate::error::Error::Fenced
//! [`Error::Fatal`]: crate::error::Error::Fatal

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use krabka_kafka::Client as KafkaClient;
use tokio::time::Instant;

use crate::token::FencingToken;

mod ahead;
mod batch;
mod offsets;
mod outcome;
mod pin;
mod place;
mod proof;
mod sequence;
mod settle;
mod write;
#[cfg(test)]
use batch::DEFAULT_MAX_BATCH;
pub(crate) use batch::{encode_batch, max_batch_bytes, next_sequence};
use outcome::{retrying, Tried};
pub(crate) use outcome::{Gone, Outcome};
use pin::Pin;
pub(crate) use write::{Content, End, Write};

/// Where the epoch's transaction stands, with the data each state owns
/// (see the module's table).
#[derive(Debug)]
pub(crate) enum Txn {
    /// No transaction open, nothing unanswered.
    Idle,
    /// Opened ahead: the state partition added, no record sent.
    Ahead(Open),
    /// Partitions added or records written, every batch answered; not
    /// ended.
    Open(Open),
    /// An EndTxn(commit) went without an answer, or its outcome is not
    /// proven: sent again before anything else.
    CommitPending(Open),
    /// To be aborted before anything else, once `unanswered` are answered.
    AbortPending {
        open: Open,
        /// Batches whose Produce went without an answer: sent again, with
        /// the same sequence, until answered.
        unanswered: Vec<Sent>,
    },
}

/// The name of a [`Txn`] state, without its data (for tests).
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnState {
    Idle,
    Ahead,
    Open,
    CommitPending,
    AbortPending,
}

/// What the writer holds of a transaction that is not idle.
#[derive(Debug, Default)]
pub(crate) struct Open {
    /// The partitions added to the transaction.
    added: HashSet<(String, i32)>,
    /// Where the transaction was accepted, and what it sent and wrote.
    pin: Pin,
}

impl Open {
    /// A transaction that begins now.
    fn begin() -> Open {
        Open {
            added: HashSet::new(),
            pin: Pin::begin(),
        }
    }
}

/// The pin of no transaction.
static NO_PIN: Pin = Pin::none();

impl Txn {
    /// The state's name.
    #[cfg(test)]
    pub(crate) fn state(&self) -> TxnState {
        match self {
            Txn::Idle => TxnState::Idle,
            Txn::Ahead(_) => TxnState::Ahead,
            Txn::Open(_) => TxnState::Open,
            Txn::CommitPending(_) => TxnState::CommitPending,
            Txn::AbortPending { .. } => TxnState::AbortPending,
        }
    }

    /// The transaction's data, in every state but Idle.
    fn open(&self) -> Option<&Open> {
        match self {
            Txn::Idle => None,
            Txn::Ahead(o) | Txn::Open(o) | Txn::CommitPending(o) => Some(o),
            Txn::AbortPending { open, .. } => Some(open),
        }
    }

    fn open_mut(&mut self) -> Option<&mut Open> {
        match self {
            Txn::Idle => None,
            Txn::Ahead(o) | Txn::Open(o) | Txn::CommitPending(o) => Some(o),
            Txn::AbortPending { open, .. } => Some(open),
        }
    }

    /// The transaction's pin (an empty one when Idle).
    fn pin(&self) -> &Pin {
        self.open().map_or(&NO_PIN, |o| &o.pin)
    }

    fn pin_mut(&mut self) -> Option<&mut Pin> {
        self.open_mut().map(|o| &mut o.pin)
    }

    /// The batches sent and not answered (only ever in AbortPending).
    pub(crate) fn unanswered(&self) -> &[Sent] {
        match self {
            Txn::AbortPending { unanswered, .. } => unanswered,
            _ => &[],
        }
    }

    fn unanswered_mut(&mut self) -> Option<&mut Vec<Sent>> {
        match self {
            Txn::AbortPending { unanswered, .. } => Some(unanswered),
            _ => None,
        }
    }
}

/// A record batch sent to a partition and not answered yet.
#[derive(Debug)]
pub(crate) struct Sent {
    topic: String,
    partition: i32,
    records: Bytes,
    count: i32,
}

/// The writer of one held epoch (see the module docs).
pub(crate) struct ProtocolLease {
    kafka: KafkaClient,
    pub(crate) token: FencingToken,
    /// Where the epoch's transaction stands.
    pub(crate) txn: Txn,
    /// The next sequence of the epoch, per partition written.
    sequences: HashMap<(String, i32), i32>,
    /// How an earlier commit whose outcome was reported unknown ended
    /// (rows S3, C7), until the epoch takes it.
    pub(crate) resolved: Option<bool>,
    /// The partition of the next guarded record without key or partition.
    round_robin: u32,
    /// The largest record batch sent (see [`max_batch_bytes`]).
    max_batch: usize,
}

impl ProtocolLease {
    /// The writer of the epoch `token` that InitProducerId just minted.
    pub(crate) fn new(kafka: KafkaClient, token: FencingToken, max_batch: usize) -> ProtocolLease {
        ProtocolLease {
            max_batch,
            kafka,
            token,
            txn: Txn::Idle,
            sequences: HashMap::new(),
            resolved: None,
            round_robin: 0,
        }
    }

    /// The name of the state the writer is in.
    #[cfg(test)]
    pub(crate) fn state(&self) -> TxnState {
        self.txn.state()
    }

    /// The batches sent and not answered.
    #[cfg(test)]
    pub(crate) fn unanswered(&self) -> &[Sent] {
        self.txn.unanswered()
    }

    /// Idle → Open with a new pin (row W3); any other state stays.
    fn begin(&mut self) {
        if matches!(self.txn, Txn::Idle) {
            self.txn = Txn::Open(Open::begin());
        }
    }

    /// Ahead → Open once records may be sent; any other state stays.
    fn ahead_to_open(&mut self) {
        if let Txn::Ahead(_) = self.txn {
            if let Txn::Ahead(open) = std::mem::replace(&mut self.txn, Txn::Idle) {
                self.txn = Txn::Open(open);
            }
        }
    }

    /// To AbortPending from any state, keeping the transaction's data and
    /// its unanswered batches, with `more` unanswered.
    fn enter_abort_pending(&mut self, more: Vec<Sent>) {
        self.txn = match std::mem::replace(&mut self.txn, Txn::Idle) {
            Txn::Idle => Txn::AbortPending {
                open: Open::default(),
                unanswered: more,
            },
            Txn::Ahead(open) | Txn::Open(open) | Txn::CommitPending(open) => Txn::AbortPending {
                open,
                unanswered: more,
            },
            Txn::AbortPending {
                open,
                mut unanswered,
            } => {
                unanswered.extend(more);
                Txn::AbortPending { open, unanswered }
            }
        };
    }

    /// To CommitPending (rows C2, C11) from a transaction being committed,
    /// keeping its data. A commit is only asked with every batch answered:
    /// AbortPending stays.
    fn enter_commit_pending(&mut self) {
        self.txn = match std::mem::replace(&mut self.txn, Txn::Idle) {
            Txn::Idle => Txn::CommitPending(Open::default()),
            Txn::Ahead(open) | Txn::Open(open) | Txn::CommitPending(open) => {
                Txn::CommitPending(open)
            }
            pending @ Txn::AbortPending { .. } => pending,
        };
    }

    /// Back to Idle: the transaction's pin and partitions go.
    pub(crate) fn idle(&mut self) {
        self.txn = Txn::Idle;
    }

    /// Notes `sent` acknowledged at `offset`: the partition's sequence moves
    /// on past it.
    fn advance(&mut self, sent: &Sent, offset: i64) {
        if let Some(pin) = self.txn.pin_mut() {
            pin.wrote(&sent.topic, sent.partition, offset);
        }
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

#[cfg(test)]
mod tests;
