//! A deterministic in-memory transport with the transaction coordinator's
//! semantics, for fast tests of the election rules.
//!
//! It is an addition to the tests against a real Kafka, never a replacement:
//! every claim about Kafka's behaviour is tested on a real broker.
//!
//! [`MemoryCluster`] is the shared "cluster": per-partition logs and the
//! coordinator's state of each transactional id. Each member gets its own
//! [`MemoryTransport`] handle from [`MemoryCluster::transport`]; a handle keeps
//! the producers its epochs bind, as a Kafka client would.
//!
//! Semantics kept from Kafka:
//! * `acquire_epoch` bumps the epoch of the role's transactional id (rotating
//!   to a fresh producer id at epoch 32766, as the coordinator does) and
//!   aborts a transaction the previous holder left open;
//! * a write through a producer whose epoch is superseded fails with
//!   [`Error::Fenced`], and so does every later write of that epoch;
//! * aborted records take offsets but are never read (read_committed);
//! * a transaction left open ([`MemoryEpoch::write_lease_open`]) holds the
//!   partition's last stable offset back: nothing at or after it is read
//!   until the epoch's next write commits it or a newer mint of the role
//!   aborts it;
//! * offsets are per partition and grow by one per record;
//! * a consumer group's offsets committed in a guarded write's transaction
//!   commit or abort with its records, and a read of them waits while one
//!   is pending (the `offsets` module).
//!
//! Failure injection: [`MemoryCluster::set_unavailable`] makes every call fail
//! with a transient error, to test retries; [`MemoryCluster::set_stalled`]
//! makes writes to a topic hang (a partition below min ISR, a dead leader)
//! until their time is up, when they abort. One handle (one process) can be
//! cut off, paused, crashed or made to fail for a while on its own
//! ([`MemoryTransport::faults`], see [`faults`]).
//!
//! Every record that commits is numbered in commit order, and a record
//! written through an epoch keeps its token:
//! [`MemoryCluster::committed_writes`] reads them back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::token::{FencingToken, NO_EPOCH};
mod epoch;
pub mod faults;
mod offsets;
mod transport;

pub use epoch::MemoryEpoch;
pub use faults::{Faults, ProcessClock, ProcessState};
pub use transport::MemoryTransport;

use crate::transport::{
    check_guarded, check_offsets, check_tombstone_and_deregistration, Backlog, CommittedOffset,
    ConsumedOffsets, Coordinator, Describer, LeaseWriter, OutRecord, PastStable, ReadBatch, Record,
    Registrar, StateReader, StateRecord, Superseded,
};

/// The epoch at which the coordinator rotates to a new producer id.
const MAX_EPOCH_BEFORE_ROTATION: i16 = i16::MAX - 1;

#[derive(Debug)]
struct Entry {
    record: Record,
    state: EntryState,
    /// The role and token of the epoch that wrote it, if one did.
    writer: Option<(String, FencingToken)>,
    /// Its place in the cluster's commit order, once committed.
    commit: Option<u64>,
}

/// A record the in-memory cluster committed, as
/// [`MemoryCluster::committed_writes`] reads it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedWrite {
    /// Its place in the cluster's commit order (from 0, over every topic).
    pub commit: u64,
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset in the partition.
    pub offset: i64,
    /// The key (empty when it had none).
    pub key: Vec<u8>,
    /// The value; `None` for a tombstone.
    pub value: Option<Vec<u8>>,
    /// The role whose epoch wrote it; `None` for a write outside an epoch
    /// (a registration).
    pub role: Option<String>,
    /// The token of that epoch.
    pub token: Option<FencingToken>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum EntryState {
    Committed,
    Aborted,
    /// In a transaction of this role's epoch that is still open.
    Open(String, FencingToken),
}

/// The offset below which every entry of `log` is decided: the first open
/// entry, or the end of the log.
fn last_stable(log: &[Entry]) -> usize {
    log.iter()
        .position(|e| matches!(e.state, EntryState::Open(..)))
        .unwrap_or(log.len())
}

#[derive(Debug, Default)]
struct Inner {
    partitions: HashMap<(String, i32), Vec<Entry>>,
    /// Role → current token at the coordinator.
    epochs: HashMap<String, FencingToken>,
    next_producer_id: i64,
    unavailable: bool,
    /// Topics whose writes hang.
    stalled: std::collections::HashSet<String>,
    /// The fate of the next guarded write whose commit goes unconfirmed.
    commit_unknown: Option<bool>,
    requests: u64,
    min_lease_duration: Option<Duration>,
    /// How many records have committed.
    commits: u64,
    /// The consumer groups' offsets (the `offsets` module).
    group_offsets: HashMap<offsets::GroupKey, offsets::GroupOffset>,
}

/// The shared state of an in-memory "cluster".
#[derive(Clone)]
pub struct MemoryCluster {
    inner: Arc<Mutex<Inner>>,
    changed: Arc<Notify>,
    /// Notified when a transaction may have been decided (a write of an
    /// epoch, a mint): a read of pending offsets looks again.
    decided: Arc<Notify>,
    clock: Arc<dyn Clock>,
    state_topic: String,
}

impl std::fmt::Debug for MemoryCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryCluster")
            .field("state_topic", &self.state_topic)
            .finish_non_exhaustive()
    }
}

impl MemoryCluster {
    /// A new, empty cluster whose poll waits run on `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        MemoryCluster {
            inner: Arc::new(Mutex::new(Inner {
                next_producer_id: 1000,
                ..Default::default()
            })),
            changed: Arc::new(Notify::new()),
            decided: Arc::new(Notify::new()),
            clock,
            state_topic: crate::STATE_TOPIC.to_owned(),
        }
    }

    /// A transport handle for one member (one process).
    pub fn transport(&self) -> MemoryTransport {
        MemoryTransport {
            cluster: self.clone(),
            live: Arc::new(Mutex::new(Vec::new())),
            next_epoch_id: Arc::default(),
            faults: Arc::default(),
        }
    }

    /// Makes every call of every handle fail with a transient error (a broker
    /// outage) until set back to `false`.
    pub fn set_unavailable(&self, unavailable: bool) {
        self.lock().unavailable = unavailable;
        self.changed.notify_waiters();
    }

    /// Makes the next guarded write's commit go unconfirmed: it fails with
    /// `OUTCOME_UNKNOWN` and its transaction stays pending until the same
    /// epoch's next write completes it, committed (`committed`) or not, as
    /// librdkafka completes a commit that timed out.
    pub fn set_next_commit_unknown(&self, committed: bool) {
        self.lock().commit_unknown = Some(committed);
    }

    /// Makes writes of an epoch to `topic` (the state topic included) hang
    /// until set back to `false`, or until the write's `within` runs out on
    /// the cluster's clock: it then aborts (nothing written) and fails with a
    /// transient error, as the Kafka transport does.
    pub fn set_stalled(&self, topic: &str, stalled: bool) {
        {
            let mut inner = self.lock();
            if stalled {
                inner.stalled.insert(topic.to_owned());
            } else {
                inner.stalled.remove(topic);
            }
        }
        self.changed.notify_waiters();
    }

    /// Waits while a write to any of `topics` is stalled, at most `within`.
    async fn wait_unstalled(&self, topics: &[&str], within: Duration, what: &str) -> Result<()> {
        let deadline = self.clock.sleep(within);
        tokio::pin!(deadline);
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if !topics.iter().any(|t| self.lock().stalled.contains(*t)) {
                return Ok(());
            }
            tokio::select! {
                _ = &mut changed => {}
                _ = &mut deadline => return Err(Error::transient(
                    what.to_owned(),
                    "the records were not acknowledged in time; the transaction was aborted",
                )),
            }
        }
    }

    /// Makes [`Coordinator::check_member`] refuse leases shorter than `d`, as
    /// the Kafka transport refuses leases below the shortest transaction
    /// timeout.
    pub fn set_min_lease_duration(&self, d: Duration) {
        self.lock().min_lease_duration = Some(d);
    }

    /// Sets the coordinator's current token of `role`, to test producer id
    /// rotation: the next mint bumps its epoch, or rotates to the cluster's
    /// next producer id when the epoch is exhausted.
    pub fn set_epoch(&self, role: &str, token: FencingToken) {
        self.lock().epochs.insert(role.to_owned(), token);
    }

    /// The committed records of a topic partition, in offset order.
    pub fn committed(&self, topic: &str, partition: i32) -> Vec<Record> {
        let inner = self.lock();
        inner
            .partitions
            .get(&(topic.to_owned(), partition))
            .map(|log| {
                log[..last_stable(log)]
                    .iter()
                    .filter(|e| e.state == EntryState::Committed)
                    .map(|e| e.record.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// How many requests the handles have made (each trait call is one).
    pub fn requests(&self) -> u64 {
        self.lock().requests
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a request and fails it when the cluster is unavailable.
    fn enter(&self, what: &str) -> Result<MutexGuard<'_, Inner>> {
        let mut inner = self.lock();
        inner.requests += 1;
        if inner.unavailable {
            return Err(Error::transient(
                what.to_owned(),
                "the in-memory cluster is unavailable",
            ));
        }
        Ok(inner)
    }

    fn append(
        inner: &mut Inner,
        topic: &str,
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
        state: EntryState,
        writer: Option<(String, FencingToken)>,
    ) -> i64 {
        let commit = (state == EntryState::Committed).then(|| {
            inner.commits += 1;
            inner.commits - 1
        });
        let log = inner
            .partitions
            .entry((topic.to_owned(), partition))
            .or_default();
        let offset = log.len() as i64;
        log.push(Entry {
            record: Record { offset, key, value },
            state,
            writer,
            commit,
        });
        offset
    }

    /// Every record committed to `topic` (every topic, the state topic
    /// included, when `None`), in commit order, with the token of the epoch
    /// that wrote it. A record of a transaction decided later (an
    /// unconfirmed commit) takes its place when it is decided.
    pub fn committed_writes(&self, topic: Option<&str>) -> Vec<CommittedWrite> {
        let inner = self.lock();
        let mut out: Vec<CommittedWrite> = inner
            .partitions
            .iter()
            .filter(|((t, _), _)| topic.is_none_or(|want| want == t))
            .flat_map(|((t, p), log)| {
                log.iter().filter_map(move |e| {
                    let commit = e.commit?;
                    Some(CommittedWrite {
                        commit,
                        topic: t.clone(),
                        partition: *p,
                        offset: e.record.offset,
                        key: e.record.key.clone(),
                        value: e.record.value.clone(),
                        role: e.writer.as_ref().map(|w| w.0.clone()),
                        token: e.writer.as_ref().map(|w| w.1),
                    })
                })
            })
            .collect();
        out.sort_by_key(|w| w.commit);
        out
    }

    /// The wall time of the cluster's clock (epoch ms).
    pub fn now_millis(&self) -> i64 {
        self.clock.now_millis()
    }
}

impl MemoryCluster {
    /// The coordinator's next token of `role`: the epoch bumped, or a new
    /// producer id at epoch 0 once the epoch is exhausted (or for a new id).
    /// Commits or aborts (`to`) every entry a transaction of `role` left
    /// open, and the group offsets it left pending.
    fn decide_open(inner: &mut Inner, role: &str, to: EntryState) {
        MemoryCluster::decide_offsets(inner, role, to == EntryState::Committed);
        let mut commits = inner.commits;
        for log in inner.partitions.values_mut() {
            for e in log.iter_mut() {
                if matches!(&e.state, EntryState::Open(r, _) if r == role) {
                    e.state = to.clone();
                    if to == EntryState::Committed {
                        e.commit = Some(commits);
                        commits += 1;
                    }
                }
            }
        }
        inner.commits = commits;
    }

    /// The coordinator's mint of `role`: aborts what the previous epoch left
    /// open, then bumps.
    fn bump(inner: &mut Inner, role: &str) -> FencingToken {
        MemoryCluster::decide_open(inner, role, EntryState::Aborted);
        let token = match inner.epochs.get(role).copied() {
            Some(t) if t.producer_epoch < MAX_EPOCH_BEFORE_ROTATION => {
                FencingToken::new(t.producer_id, t.producer_epoch + 1)
            }
            _ => {
                let id = inner.next_producer_id;
                inner.next_producer_id += 1;
                FencingToken::new(id, 0)
            }
        };
        inner.epochs.insert(role.to_owned(), token);
        token
    }
}
