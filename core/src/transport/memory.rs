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
//! * offsets are per partition and grow by one per record.
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
pub mod faults;

pub use faults::{Faults, ProcessClock, ProcessState};

use crate::transport::{
    check_guarded, Backlog, Coordinator, Describer, LeaseWriter, OutRecord, PastStable, ReadBatch,
    Record, Registrar, StateReader, StateRecord, Superseded,
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
}

/// The shared state of an in-memory "cluster".
#[derive(Clone)]
pub struct MemoryCluster {
    inner: Arc<Mutex<Inner>>,
    changed: Arc<Notify>,
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

/// One member's handle on a [`MemoryCluster`]; implements the four transport traits.
#[derive(Clone, Debug)]
pub struct MemoryTransport {
    cluster: MemoryCluster,
    /// The epochs this handle minted whose [`MemoryEpoch`] is still alive:
    /// (epoch id, role, token).
    live: Arc<Mutex<Vec<(u64, String, FencingToken)>>>,
    next_epoch_id: Arc<std::sync::atomic::AtomicU64>,
    /// What a test does to this process (see [`faults`]).
    faults: Arc<Faults>,
}

impl MemoryTransport {
    /// The cluster this handle talks to.
    pub fn cluster(&self) -> &MemoryCluster {
        &self.cluster
    }

    /// The faults of this handle's process, shared by its clones and its
    /// epochs: cut it off, pause, crash, fail for a while (see [`faults`]).
    pub fn faults(&self) -> &Arc<Faults> {
        &self.faults
    }

    /// Waits or fails as this handle's process state says (see [`faults`]).
    async fn gate(&self, what: &str) -> Result<()> {
        self.faults
            .gate(what, self.cluster.clock.now_millis())
            .await
    }

    /// The tokens of the epochs of `role` that this handle minted and whose
    /// [`MemoryEpoch`] is still alive, oldest first.
    pub fn held(&self, role: &str) -> Vec<FencingToken> {
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, r, _)| r == role)
            .map(|(_, _, t)| *t)
            .collect()
    }
}

/// A held epoch of the in-memory cluster: writes are checked against the
/// coordinator's current token of the role.
#[derive(Debug)]
pub struct MemoryEpoch {
    transport: MemoryTransport,
    id: u64,
    role: String,
    token: FencingToken,
    /// The fate of this epoch's write whose commit went unconfirmed.
    pending: Mutex<Option<bool>>,
    /// See [`LeaseWriter::take_resolved`].
    resolved: Mutex<Option<bool>>,
}

impl MemoryEpoch {
    /// Writes a lease record inside a transaction that then aborts: the record
    /// takes an offset but is never read.
    pub fn write_lease_aborted(&self, record: StateRecord) -> Result<()> {
        self.write_state(record, EntryState::Aborted)
    }

    /// Writes a lease record inside a transaction left **open**, as a holder
    /// that stalls mid-transaction: it holds the partition's last stable
    /// offset back until this epoch's next write commits it or a newer mint
    /// of the role aborts it.
    pub fn write_lease_open(&self, record: StateRecord) -> Result<()> {
        self.write_state(record, EntryState::Open(self.role.clone(), self.token))
    }

    /// Appends one state record through this epoch; wakes pollers for a
    /// committed one. Commits what this epoch left open first.
    fn write_state(&self, record: StateRecord, state: EntryState) -> Result<()> {
        let cluster = &self.transport.cluster;
        let mut inner = cluster.enter("write_lease")?;
        self.check_epoch(&inner)?;
        self.complete_pending(&mut inner);
        MemoryCluster::decide_open(&mut inner, &self.role, EntryState::Committed);
        let committed = state == EntryState::Committed;
        let topic = cluster.state_topic.clone();
        let StateRecord {
            partition,
            key,
            value,
        } = record;
        let writer = Some((self.role.clone(), self.token));
        MemoryCluster::append(&mut inner, &topic, partition, key, value, state, writer);
        drop(inner);
        if committed {
            cluster.changed.notify_waiters();
        }
        Ok(())
    }

    /// Completes a commit that went unconfirmed, as the first step of the
    /// next write.
    fn complete_pending(&self, inner: &mut Inner) {
        let fate = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(committed) = fate {
            let to = if committed {
                EntryState::Committed
            } else {
                EntryState::Aborted
            };
            MemoryCluster::decide_open(inner, &self.role, to);
            *self.resolved.lock().unwrap_or_else(|e| e.into_inner()) = Some(committed);
        }
    }

    /// Answers `Fenced` when the coordinator's token of the role is no longer
    /// this epoch's.
    fn check_epoch(&self, inner: &Inner) -> Result<()> {
        let current = inner.epochs.get(&self.role).copied().unwrap_or(NO_EPOCH);
        if current != self.token {
            return Err(Error::Fenced(format!(
                "role {:?}: producer {} superseded by {current} (PRODUCER_FENCED)",
                self.role, self.token
            )));
        }
        Ok(())
    }
}

impl Drop for MemoryEpoch {
    fn drop(&mut self) {
        self.transport
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(id, _, _)| *id != self.id);
    }
}

#[async_trait]
impl LeaseWriter for MemoryEpoch {
    fn role(&self) -> &str {
        &self.role
    }

    fn token(&self) -> FencingToken {
        self.token
    }

    async fn write_lease(&self, record: StateRecord, within: Duration) -> Result<()> {
        self.transport.gate("write_lease").await?;
        let cluster = &self.transport.cluster;
        cluster
            .wait_unstalled(&[cluster.state_topic.as_str()], within, "write_lease")
            .await?;
        self.write_state(record, EntryState::Committed)
    }

    async fn write_guarded(&self, records: Vec<OutRecord>, within: Duration) -> Result<()> {
        self.transport.gate("write_guarded").await?;
        let cluster = &self.transport.cluster;
        check_guarded(&records, &cluster.state_topic)?;
        let topics: Vec<&str> = records.iter().map(|r| r.topic.as_str()).collect();
        cluster
            .wait_unstalled(&topics, within, "write_guarded")
            .await?;
        let mut inner = cluster.enter("write_guarded")?;
        self.check_epoch(&inner)?;
        self.complete_pending(&mut inner);
        MemoryCluster::decide_open(&mut inner, &self.role, EntryState::Committed);
        let unknown = inner.commit_unknown.take();
        let state = match unknown {
            Some(_) => EntryState::Open(self.role.clone(), self.token),
            None => EntryState::Committed,
        };
        for r in records {
            let partition = r.partition.unwrap_or(0);
            MemoryCluster::append(
                &mut inner,
                &r.topic,
                partition,
                r.key.unwrap_or_default(),
                r.value,
                state.clone(),
                Some((self.role.clone(), self.token)),
            );
        }
        drop(inner);
        cluster.changed.notify_waiters();
        if let Some(committed) = unknown {
            *self.pending.lock().unwrap_or_else(|e| e.into_inner()) = Some(committed);
            return Err(Error::OutcomeUnknown {
                context: format!("a guarded write for role {:?}: commit", self.role),
                source: "the commit was sent but not confirmed".into(),
            });
        }
        Ok(())
    }

    fn take_resolved(&self) -> Option<bool> {
        self.resolved
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    async fn supersede(&self, _within: Duration) -> Result<Superseded> {
        self.transport.gate("supersede").await?;
        let mut inner = self.transport.cluster.enter("supersede")?;
        if self.check_epoch(&inner).is_err() {
            return Ok(Superseded::AlreadySuperseded);
        }
        Ok(Superseded::Bumped(MemoryCluster::bump(
            &mut inner, &self.role,
        )))
    }
}

impl MemoryCluster {
    /// The coordinator's next token of `role`: the epoch bumped, or a new
    /// producer id at epoch 0 once the epoch is exhausted (or for a new id).
    /// Commits or aborts (`to`) every entry a transaction of `role` left open.
    fn decide_open(inner: &mut Inner, role: &str, to: EntryState) {
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

#[async_trait]
impl Describer for MemoryTransport {
    async fn describe_epoch(&self, role: &str) -> Result<FencingToken> {
        self.gate("describe_epoch").await?;
        let inner = self.cluster.enter("describe_epoch")?;
        Ok(inner.epochs.get(role).copied().unwrap_or(NO_EPOCH))
    }
}

impl MemoryTransport {
    /// Mints the epoch of `role` like [`Coordinator::acquire_epoch`] and
    /// returns the concrete [`MemoryEpoch`], for tests that need its
    /// inherent methods ([`MemoryEpoch::write_lease_aborted`]).
    pub fn mint(&self, role: &str) -> Result<MemoryEpoch> {
        let mut inner = self.cluster.enter("acquire_epoch")?;
        let token = MemoryCluster::bump(&mut inner, role);
        drop(inner);
        let id = self
            .next_epoch_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, role.to_owned(), token));
        Ok(MemoryEpoch {
            transport: self.clone(),
            id,
            role: role.to_owned(),
            token,
            pending: Mutex::new(None),
            resolved: Mutex::new(None),
        })
    }
}

#[async_trait]
impl Coordinator for MemoryTransport {
    async fn acquire_epoch(
        &self,
        role: &str,
        _lease_duration: Duration,
    ) -> Result<Box<dyn LeaseWriter>> {
        self.gate("acquire_epoch").await?;
        Ok(Box::new(self.mint(role)?))
    }

    async fn check_member(
        &self,
        _role: &str,
        options: &crate::election::ElectionOptions,
    ) -> Result<()> {
        self.gate("check_member").await?;
        drop(self.cluster.enter("check_member")?);
        match self.cluster.lock().min_lease_duration {
            Some(min) if options.lease_duration < min => Err(Error::InvalidArgument(format!(
                "lease duration {} is below this transport's minimum {}",
                crate::human::duration(options.lease_duration),
                crate::human::duration(min)
            ))),
            _ => Ok(()),
        }
    }
}

#[async_trait]
impl StateReader for MemoryTransport {
    async fn read_partition(&self, partition: i32) -> Result<Vec<Record>> {
        self.gate("read_partition").await?;
        drop(self.cluster.enter("read_partition")?);
        Ok(self.cluster.committed(&self.cluster.state_topic, partition))
    }

    async fn poll_partition(
        &self,
        partition: i32,
        from: i64,
        max_wait: Duration,
    ) -> Result<ReadBatch> {
        let deadline = self.cluster.clock.sleep(max_wait);
        tokio::pin!(deadline);
        loop {
            // Register for a wake-up before looking, so no append is missed.
            let changed = self.cluster.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            self.gate("poll_partition").await?;
            {
                let inner = self.cluster.enter("poll_partition")?;
                let key = (self.cluster.state_topic.clone(), partition);
                if let Some(log) = inner.partitions.get(&key) {
                    let start = from.max(0) as usize;
                    let stable = last_stable(log);
                    if start < stable {
                        let records = log[start..stable]
                            .iter()
                            .filter(|e| e.state == EntryState::Committed)
                            .map(|e| e.record.clone())
                            .collect();
                        return Ok(ReadBatch {
                            records,
                            next_offset: stable as i64,
                        });
                    }
                }
            }
            tokio::select! {
                _ = &mut changed => {}
                _ = &mut deadline => return Ok(ReadBatch { records: Vec::new(), next_offset: from }),
            }
        }
    }

    async fn held_back(&self, partition: i32, position: i64) -> Result<Backlog> {
        self.held_back_now(partition, position).await
    }

    async fn read_past_stable(&self, partition: i32, position: i64) -> Result<Option<PastStable>> {
        if position < 0 {
            return Err(Error::InvalidArgument(format!(
                "read position must not be negative, got {position}"
            )));
        }
        self.gate("read_past_stable").await?;
        let inner = self.cluster.enter("read_past_stable")?;
        let key = (self.cluster.state_topic.clone(), partition);
        let Some(log) = inner.partitions.get(&key) else {
            return Ok(None);
        };
        let (end, stable) = (log.len(), last_stable(log));
        let from = usize::try_from(position).unwrap_or(usize::MAX);
        // Nothing open, decided records unread below the position, or a
        // position past the end.
        if stable >= end || from < stable || from > end {
            return Ok(None);
        }
        let mut past = PastStable {
            end: end as i64,
            ..PastStable::default()
        };
        for e in &log[from..] {
            match e.state {
                EntryState::Committed => past.committed.push(e.record.clone()),
                EntryState::Open(..) => past.open.push(e.record.clone()),
                EntryState::Aborted => {}
            }
        }
        Ok(Some(past))
    }
}

impl MemoryTransport {
    /// The end of the log (open entries included) against `position`, and
    /// the last stable offset, read together.
    async fn held_back_now(&self, partition: i32, position: i64) -> Result<Backlog> {
        if position < 0 {
            return Err(Error::InvalidArgument(format!(
                "read position must not be negative, got {position}"
            )));
        }
        self.gate("held_back").await?;
        let inner = self.cluster.enter("held_back")?;
        let key = (self.cluster.state_topic.clone(), partition);
        let (end, stable) = inner
            .partitions
            .get(&key)
            .map_or((0, 0), |log| (log.len() as i64, last_stable(log) as i64));
        Ok(Backlog::of(position, end, stable))
    }
}

#[async_trait]
impl Registrar for MemoryTransport {
    fn is_gone(&self) -> bool {
        self.faults.state() == ProcessState::Crashed
    }

    async fn append(&self, record: StateRecord) -> Result<i64> {
        self.gate("append").await?;
        let mut inner = self.cluster.enter("append")?;
        let topic = self.cluster.state_topic.clone();
        let StateRecord {
            partition,
            key,
            value,
        } = record;
        let offset = MemoryCluster::append(
            &mut inner,
            &topic,
            partition,
            key,
            value,
            EntryState::Committed,
            None,
        );
        drop(inner);
        self.cluster.changed.notify_waiters();
        Ok(offset)
    }
}
