//! The transport seam: four small async traits.
//!
//! * [`Coordinator`]: mint the epoch of a role ([`Coordinator::acquire_epoch`]
//!   returns the held epoch, a [`LeaseWriter`] owned by whoever minted it)
//!   and describe it ([`Describer`], the narrow part a third party needs).
//! * [`StateReader`]: read a partition of `__coordination_state` (read_committed,
//!   up to the last stable offset, in offset order), and tell whether a
//!   reader's view of it is complete ([`StateReader::held_back`]).
//! * [`Registrar`]: append registration records through a plain idempotent producer.
//! * [`LeaseWriter`]: the held epoch of one role: lease records and guarded
//!   writes go through the producer that the epoch binds, and dropping it
//!   releases that producer.
//!
//! [`Transport`] is all four. Three methods have default bodies (and the
//! offsets methods of [`LeaseWriter`] have none, so a wrapper that does not
//! forward them does not compile):
//! [`StateReader::read_state`] (every record, through `read_partition`),
//! [`StateReader::kept_state`] (`None`) and
//! [`StateReader::read_past_stable`] (`None`). A wrapper (a timing shim, a
//! fault injector) must forward those three as well as the others, or the
//! wrapped transport's kept views, and its look past an open transaction,
//! are lost behind it. The in-memory
//! transport ([`memory::MemoryTransport`]) has the coordinator's semantics for
//! fast deterministic tests; the Kafka transport (feature `kafka`) is the real
//! thing.

use std::time::Duration;

use async_trait::async_trait;

use crate::error::Result;
use crate::token::FencingToken;

#[cfg(feature = "kafka")]
pub mod kafka;
pub mod memory;
mod offsets;

pub use offsets::{check_offsets, check_query, CommittedOffset, ConsumedOffsets, InputOffset};

/// A committed record of `__coordination_state`, as a [`StateReader`] returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The record's offset in its partition.
    pub offset: i64,
    /// The key bytes.
    pub key: Vec<u8>,
    /// The value bytes; `None` (and an empty value) is a tombstone.
    pub value: Option<Vec<u8>>,
}

/// A record to write to `__coordination_state`: a registration (through the
/// [`Registrar`]) or a lease (through the held epoch). The partition is pinned
/// by the caller ([`crate::role_partition`]); no partitioner applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateRecord {
    /// The partition of the state topic.
    pub partition: i32,
    /// The encoded key.
    pub key: Vec<u8>,
    /// The encoded value, or `None` for a tombstone (written as a null value).
    pub value: Option<Vec<u8>>,
}

/// Describes the leadership epoch of a role: all a third party that checks
/// authority needs.
#[async_trait]
pub trait Describer: Send + Sync {
    /// The current (producer id, epoch) of the role's transactional id, from
    /// its transaction coordinator; [`crate::NO_EPOCH`] when no member has
    /// taken the role (or the coordinator has forgotten the id).
    async fn describe_epoch(&self, role: &str) -> Result<FencingToken>;
}

/// Mints the leadership epoch of a role.
#[async_trait]
pub trait Coordinator: Describer {
    /// Calls InitProducerId for `transactional.id = role` with `lease_duration`
    /// as the transaction timeout and returns the held epoch: the producer
    /// that the epoch binds, owned by the caller, with the token actually
    /// minted. Dropping it releases the producer. Epochs minted earlier for the
    /// role (by anyone, this transport included) are superseded: their writes
    /// are fenced by the broker.
    async fn acquire_epoch(
        &self,
        role: &str,
        lease_duration: Duration,
    ) -> Result<Box<dyn LeaseWriter>>;

    /// Refuses, before a member of `role` registers, what this transport
    /// cannot honour, so the member learns it at once rather than when its
    /// turn comes: options (for Kafka, a lease outside the transaction
    /// timeouts the client and the broker allow), a state topic that is
    /// missing or of another shape than the options say, a cluster that does
    /// not answer within a bounded time. The error names the values.
    async fn check_member(
        &self,
        role: &str,
        options: &crate::election::ElectionOptions,
    ) -> Result<()>;
}

/// A batch of committed records of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadBatch {
    /// Records in offset order.
    pub records: Vec<Record>,
    /// The offset to read from next (the last stable offset seen).
    pub next_offset: i64,
}

/// Reads committed records of `__coordination_state`.
#[async_trait]
pub trait StateReader: Send + Sync {
    /// Every committed record of `partition` from its first offset to the last
    /// stable offset, in offset order. Aborted records never appear. A commit
    /// acknowledged before the call is in it (on Kafka the read waits, a
    /// moment at most, for the commit's transaction markers). Returns
    /// promptly even while another transaction is open.
    async fn read_partition(&self, partition: i32) -> Result<Vec<Record>>;

    /// What a new follower of a role in `partition` starts from: the
    /// partition's committed records to the last stable offset, with the
    /// same guarantees as [`StateReader::read_partition`], except that
    /// records a later record of their key makes irrelevant may be left out
    /// (as Kafka's log compaction leaves them out, and drops tombstones in
    /// time), and the offset to poll from next. A [`crate::RoleState`] built from it
    /// is, in all an election reads of it (roster, lease, and with no lease
    /// the deadline last cleared), the one built from every record.
    ///
    /// The default reads every record. The Kafka transport keeps what its
    /// reader of the partition read, so the followers of many roles in one
    /// partition read the partition once, not once each.
    async fn read_state(&self, partition: i32) -> Result<ReadBatch> {
        let records = self.read_partition(partition).await?;
        let next_offset = records.last().map_or(0, |r| r.offset + 1);
        Ok(ReadBatch {
            records,
            next_offset,
        })
    }

    /// What the transport keeps of `partition` without reading: the
    /// partition as [`StateReader::read_state`] returns it, up to where it
    /// was last read ([`ReadBatch::next_offset`]), or `None` (the default:
    /// nothing is kept). A follower far behind (a leader's, through its
    /// term) that finds it further on builds its state from it and polls on
    /// from there, rather than through every record since.
    async fn kept_state(&self, partition: i32) -> Option<ReadBatch> {
        let _ = partition;
        None
    }

    /// Committed records of `partition` from offset `from` on. Waits up to
    /// `max_wait` for at least one new record when there is none yet, and then
    /// returns an empty batch; an empty batch may come earlier when its
    /// `next_offset` moved past decided records that are never returned
    /// (aborted ones, transaction markers). Steady-state cost grows with new
    /// records only.
    async fn poll_partition(
        &self,
        partition: i32,
        from: i64,
        max_wait: Duration,
    ) -> Result<ReadBatch>;

    /// Whether a reader of `partition` whose next offset is `position` (the
    /// [`ReadBatch::next_offset`] of its last poll) has read everything
    /// written to the partition: decided by **one** read of the high
    /// watermark (the end of the log, records of open transactions
    /// included) compared with `position` ([`Backlog::of`]). Only when it
    /// is not caught up may a second read tell an open transaction
    /// ([`Backlog::HeldBack`]) from decided records not read yet
    /// ([`Backlog::Unread`]).
    ///
    /// A standby must not read the missing renewals of a stall (a
    /// transaction of another role of the partition held open) as an
    /// expired lease, and must not take a view that misses records written
    /// before the check for a complete one: it challenges only on
    /// [`Backlog::CaughtUp`]. The one read is what makes the answer
    /// describe the view at `position`; a check and a read after it, as
    /// two requests, would let a transaction opened in between hide what
    /// the read should have seen.
    async fn held_back(&self, partition: i32, position: i64) -> Result<Backlog>;

    /// What lies past the last stable offset of `partition` for a reader
    /// that stands there (`position` at or past it): every record from
    /// `position` to the high watermark, read as written (read_uncommitted),
    /// sorted by what the transaction markers below the high watermark say
    /// of it ([`PastStable`]). One read of the high watermark bounds it, as
    /// in [`StateReader::held_back`].
    ///
    /// A standby held back by another role's open transaction decides from
    /// it: the records of its own role are all decided, so it does not wait
    /// for a transaction that is not its role's.
    ///
    /// `None` when there is nothing to look past (no transaction is open),
    /// when records below the last stable offset are not read yet at
    /// `position` (read them first), when what lies past cannot be read
    /// whole (a compressed batch, a bound on what is read), or when the
    /// transport cannot look past the last stable offset: the default.
    async fn read_past_stable(&self, partition: i32, position: i64) -> Result<Option<PastStable>> {
        let _ = (partition, position);
        Ok(None)
    }
}

/// What [`StateReader::read_past_stable`] found from a reader's position
/// to the high watermark.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PastStable {
    /// The committed records, in offset order: those written outside any
    /// transaction, and those of transactions whose commit marker lies
    /// below [`PastStable::end`].
    pub committed: Vec<Record>,
    /// The records of transactions with no marker below
    /// [`PastStable::end`] (still open when the high watermark was read),
    /// in offset order. Aborted records are in neither list.
    pub open: Vec<Record>,
    /// The high watermark the read went to.
    pub end: i64,
}

/// What [`StateReader::held_back`] found at and past a reader's position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backlog {
    /// Nothing: every record written to the partition when the high
    /// watermark was read lies below the position, so a reader there has
    /// read all of it (decided: committed records applied, aborted ones and
    /// transaction markers skipped).
    CaughtUp,
    /// Decided records (committed or aborted, or transaction markers) at or
    /// past the position are not read yet, and nothing is open: read them
    /// and look again.
    Unread,
    /// An open transaction holds the last stable offset back: records past
    /// it (another role's, or this role's renewals and first leases) are
    /// written but not readable until it ends.
    HeldBack,
}

impl Backlog {
    /// The answer for a reader at `position`, from the partition's
    /// `high_watermark` (the end of the log, open transactions included):
    /// caught up when it is at most `position`. Otherwise `last_stable`
    /// (read after the high watermark) tells an open transaction (below the
    /// high watermark) from decided records not read yet; a transaction
    /// decided between the two reads counts as decided.
    pub fn of(position: i64, high_watermark: i64, last_stable: i64) -> Backlog {
        if high_watermark <= position {
            Backlog::CaughtUp
        } else if last_stable < high_watermark {
            Backlog::HeldBack
        } else {
            Backlog::Unread
        }
    }
}

/// Appends registration records.
#[async_trait]
pub trait Registrar: Send + Sync {
    /// Appends `record` to its partition with acks=all and returns its
    /// offset.
    async fn append(&self, record: StateRecord) -> Result<i64>;

    /// True when this transport's process is gone for good (a crashed
    /// test-kit process): nothing it sends would ever be answered, so
    /// clean-up after an abandoned call is not attempted. Always false on
    /// Kafka.
    fn is_gone(&self) -> bool {
        false
    }
}

/// One record of a guarded write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutRecord {
    /// The topic to write to (never the state topic: a leader must not forge
    /// other roles' records).
    pub topic: String,
    /// The partition, or `None` to let the producer's partitioner choose.
    pub partition: Option<i32>,
    /// The record key.
    pub key: Option<Vec<u8>>,
    /// The record value (`None` is a tombstone).
    pub value: Option<Vec<u8>>,
    /// Record headers.
    pub headers: Vec<(String, Vec<u8>)>,
}

/// The held epoch of one role: the producer that the epoch binds, owned by
/// the member that minted it. Dropping it releases the producer (an open
/// transaction is aborted first).
///
/// Writes are serialised: one transaction at a time.
#[async_trait]
pub trait LeaseWriter: Send + Sync {
    /// The role (the transactional id).
    fn role(&self) -> &str;

    /// The token minted for this epoch. It may change only before the
    /// epoch's first commit (the Kafka transport takes the broker's word
    /// over a stale coordinator's); every committed record of the epoch
    /// carries the token read after it.
    fn token(&self) -> FencingToken;

    /// Writes one lease record of the role inside a transaction of the
    /// epoch-bound producer, acks=all, within `within` (see below). Fails
    /// with [`crate::Error::Fenced`] when the broker answers
    /// INVALID_PRODUCER_EPOCH (47) or PRODUCER_FENCED (90), and on every write
    /// after that.
    ///
    /// A write not acknowledged within `within` is aborted and fails with
    /// [`crate::Error::Transient`]: nothing of it is written. A failure once
    /// the commit was sent (a timeout, a fence at the commit) is
    /// [`crate::Error::OutcomeUnknown`], with the cause as its source.
    async fn write_lease(&self, record: StateRecord, within: Duration) -> Result<()>;

    /// Writes the role's lease tombstone and the member's deregistration
    /// record (`deregistration`: the record the member's [`Registrar`]
    /// would append, key and value unchanged) in **one** transaction of the
    /// epoch-bound producer, in that order, within `within`: a reader sees
    /// both or neither. Errors as [`LeaseWriter::write_lease`]: on
    /// [`crate::Error::Fenced`] and [`crate::Error::Transient`] neither
    /// record was written; on [`crate::Error::OutcomeUnknown`] both or
    /// neither were. Refuses, without sending anything
    /// ([`crate::Error::InvalidArgument`]), a `tombstone` with a value and
    /// two records on different partitions.
    async fn write_lease_and_deregister(
        &self,
        tombstone: StateRecord,
        deregistration: StateRecord,
        within: Duration,
    ) -> Result<()>;

    /// Writes `records` in one transaction of the epoch-bound producer,
    /// within `within` (as [`LeaseWriter::write_lease`]). A deposed holder's
    /// write fails with [`crate::Error::Fenced`] and none of its records
    /// become visible.
    async fn write_guarded(&self, records: Vec<OutRecord>, within: Duration) -> Result<()>;

    /// [`LeaseWriter::write_guarded`] with the input offsets `offsets`
    /// committed for their consumer group in the same transaction: the
    /// records and the offsets commit together or not at all. A deposed
    /// holder's write fails with [`crate::Error::Fenced`], and the group's
    /// offsets stay as they were. `records` may be empty (only the offsets
    /// commit); with no offsets it is [`LeaseWriter::write_guarded`].
    /// Offsets that [`check_offsets`] refuses fail the write with
    /// [`crate::Error::InvalidArgument`], nothing sent.
    ///
    /// Required, with no default: a wrapper that did not forward it would
    /// commit records without their offsets.
    async fn write_guarded_with_offsets(
        &self,
        records: Vec<OutRecord>,
        offsets: ConsumedOffsets,
        within: Duration,
    ) -> Result<()>;

    /// What consumer group `group` has committed for `partitions` (by
    /// topic), in the order asked: only offsets of decided transactions. A
    /// partition whose offset a pending commit of an open transaction
    /// holds is waited for, within `within`; still pending then,
    /// [`crate::Error::Transient`] naming the group and the partitions.
    ///
    /// Required, with no default, as
    /// [`LeaseWriter::write_guarded_with_offsets`].
    async fn committed_offsets(
        &self,
        group: &str,
        partitions: &[(String, Vec<i32>)],
        within: Duration,
    ) -> Result<Vec<CommittedOffset>>;

    /// How an earlier write of this epoch that failed with
    /// [`crate::Error::OutcomeUnknown`] ended, once a later write completed it
    /// (only a commit goes on): `Some(true)` committed,
    /// `Some(false)` did not. Taken once; `None` when nothing was resolved.
    fn take_resolved(&self) -> Option<bool>;

    /// Ends this epoch's term at the coordinator: bumps the role's epoch
    /// only if this epoch is still the current one (so a member deposed
    /// without noticing can never fence its successor), within `within`.
    /// Afterwards this epoch's writes are fenced.
    async fn supersede(&self, within: Duration) -> Result<Superseded>;
}

/// What [`LeaseWriter::supersede`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Superseded {
    /// The epoch was current; the coordinator now holds this newer token.
    Bumped(FencingToken),
    /// A newer epoch existed already; nothing was bumped.
    AlreadySuperseded,
}

/// All four traits: what a member needs.
pub trait Transport: Coordinator + StateReader + Registrar {}
impl<T: Coordinator + StateReader + Registrar + ?Sized> Transport for T {}

/// Refuses what [`LeaseWriter::write_lease_and_deregister`] must not
/// write: a tombstone with a value, two records on different partitions.
pub(crate) fn check_tombstone_and_deregistration(
    tombstone: &StateRecord,
    deregistration: &StateRecord,
) -> Result<()> {
    if tombstone.value.is_some() {
        return Err(crate::Error::InvalidArgument(
            "the lease record written with a deregistration must be a tombstone (no value)".into(),
        ));
    }
    if tombstone.partition != deregistration.partition {
        return Err(crate::Error::InvalidArgument(format!(
            "the lease tombstone (partition {}) and the deregistration (partition {}) must go to one partition",
            tombstone.partition, deregistration.partition
        )));
    }
    Ok(())
}

/// Refuses guarded records a [`LeaseWriter`] must not write: an empty topic,
/// the state topic itself, a negative partition.
pub(crate) fn check_guarded(records: &[OutRecord], state_topic: &str) -> Result<()> {
    for r in records {
        if r.topic.is_empty() {
            return Err(crate::Error::InvalidArgument(
                "a guarded record has an empty topic".into(),
            ));
        }
        if r.topic == state_topic {
            return Err(crate::Error::InvalidArgument(format!(
                "a guarded record may not go to the state topic {state_topic:?}: a leader must not forge coordination records"
            )));
        }
        if let Some(p) = r.partition {
            if p < 0 {
                return Err(crate::Error::InvalidArgument(format!(
                    "a guarded record's partition must not be negative, got {p}"
                )));
            }
        }
    }
    Ok(())
}
