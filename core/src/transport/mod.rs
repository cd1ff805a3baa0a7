//! The transport seam: four small async traits, as the spec names them.
//!
//! * [`Coordinator`]: mint and describe the epoch of a role.
//! * [`StateReader`]: read a partition of `__coordination_state` (read_committed,
//!   up to the last stable offset, in offset order).
//! * [`Registrar`]: append registration records through a plain idempotent producer.
//! * [`LeaseWriter`]: write lease records (and guarded writes) through the
//!   producer that the epoch binds.
//!
//! [`Transport`] is all four. The in-memory transport ([`memory::MemoryTransport`])
//! has the coordinator's semantics for fast deterministic tests; the Kafka
//! transport (feature `kafka`) is the real thing.

use std::time::Duration;

use async_trait::async_trait;

use crate::error::Result;
use crate::state::Record;
use crate::token::FencingToken;

#[cfg(feature = "kafka")]
pub mod kafka;
pub mod memory;

/// Mints and describes the leadership epoch of a role.
#[async_trait]
pub trait Coordinator: Send + Sync {
    /// Calls InitProducerId for `transactional.id = role` with `lease_duration`
    /// as the transaction timeout, keeps the producer that the epoch binds, and
    /// returns the token actually minted. Any earlier producer this transport
    /// held for the role is dropped.
    async fn acquire_epoch(&self, role: &str, lease_duration: Duration) -> Result<FencingToken>;

    /// The current (producer id, epoch) of the role's transactional id, from
    /// its transaction coordinator; [`crate::NO_EPOCH`] when no member has
    /// taken the role (or the coordinator has forgotten the id).
    async fn describe_epoch(&self, role: &str) -> Result<FencingToken>;

    /// A hint from the member: it is registered in `role` and may mint its
    /// epoch later with `lease_duration` (`Some`), or it has left the role
    /// and will not (`None`). A transport may prepare for the mint (the Kafka
    /// transport keeps a pre-connected lease producer). The default does
    /// nothing.
    fn prepare_epoch(&self, role: &str, lease_duration: Option<Duration>) {
        let _ = (role, lease_duration);
    }

    /// Refuses election options this transport cannot honour (for Kafka, a
    /// lease shorter than the shortest transaction timeout), so a member
    /// learns it before it registers rather than when its turn comes. The
    /// error names the values. The default accepts everything.
    fn check_options(&self, options: &crate::election::ElectionOptions) -> Result<()> {
        let _ = options;
        Ok(())
    }
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
    /// stable offset, in offset order. Aborted records never appear. Returns
    /// promptly even while another transaction is open.
    async fn read_partition(&self, partition: i32) -> Result<Vec<Record>>;

    /// Committed records of `partition` from offset `from` on. Waits up to
    /// `max_wait` for at least one new record when there is none yet, and then
    /// returns an empty batch. Steady-state cost grows with new records only.
    async fn poll_partition(
        &self,
        partition: i32,
        from: i64,
        max_wait: Duration,
    ) -> Result<ReadBatch>;
}

/// Appends registration records.
#[async_trait]
pub trait Registrar: Send + Sync {
    /// Appends one record (a `None` value is a tombstone) to `partition` with
    /// acks=all and returns its offset. No partitioner applies.
    async fn append(&self, partition: i32, key: Vec<u8>, value: Option<Vec<u8>>) -> Result<i64>;
}

/// One record of a guarded write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutRecord {
    /// The topic to write to.
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

/// Writes through the producer that the role's epoch binds.
#[async_trait]
pub trait LeaseWriter: Send + Sync {
    /// Writes one lease record (a `None` value is a tombstone) of `role` to
    /// `partition` inside a transaction of the epoch-bound producer, acks=all.
    /// Fails with [`crate::Error::Fenced`] when the broker answers
    /// INVALID_PRODUCER_EPOCH (47) or PRODUCER_FENCED (90); the fenced producer
    /// is dropped.
    async fn write_lease(
        &self,
        role: &str,
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    ) -> Result<()>;

    /// Writes `records` in one transaction of the epoch-bound producer of
    /// `role`, serialised with the lease writes. A deposed holder's write fails
    /// with [`crate::Error::Fenced`] and none of its records become visible.
    async fn write_guarded(&self, role: &str, records: Vec<OutRecord>) -> Result<()>;

    /// Drops the epoch-bound producer of `role`, if any (after a resign).
    async fn release(&self, role: &str) -> Result<()>;
}

/// All four traits: what a member needs.
pub trait Transport: Coordinator + StateReader + Registrar + LeaseWriter {}
impl<T: Coordinator + StateReader + Registrar + LeaseWriter + ?Sized> Transport for T {}
