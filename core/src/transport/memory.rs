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
//!   [`Error::Fenced`], and the fenced producer is dropped;
//! * aborted records take offsets but are never read (read_committed);
//! * offsets are per partition and grow by one per record.
//!
//! Failure injection: [`MemoryCluster::set_unavailable`] makes every call fail
//! with a transient error, to test retries.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::state::Record;
use crate::token::{FencingToken, NO_EPOCH};
use crate::transport::{Coordinator, LeaseWriter, OutRecord, ReadBatch, Registrar, StateReader};

/// The epoch at which the coordinator rotates to a new producer id.
const MAX_EPOCH_BEFORE_ROTATION: i16 = i16::MAX - 1;

#[derive(Debug)]
struct Entry {
    record: Record,
    committed: bool,
}

#[derive(Debug, Default)]
struct Inner {
    partitions: HashMap<(String, i32), Vec<Entry>>,
    /// Role → current token at the coordinator.
    epochs: HashMap<String, FencingToken>,
    next_producer_id: i64,
    unavailable: bool,
    requests: u64,
    min_lease_duration: Option<Duration>,
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
            producers: Arc::new(Mutex::new(HashMap::new())),
            prepared: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Makes every call of every handle fail with a transient error (a broker
    /// outage) until set back to `false`.
    pub fn set_unavailable(&self, unavailable: bool) {
        self.lock().unavailable = unavailable;
        self.changed.notify_waiters();
    }

    /// Makes [`Coordinator::check_options`] refuse leases shorter than `d`, as
    /// the Kafka transport refuses leases below the shortest transaction
    /// timeout.
    pub fn set_min_lease_duration(&self, d: Duration) {
        self.lock().min_lease_duration = Some(d);
    }

    /// Sets the next producer id the coordinator assigns and the epoch of
    /// `role`, to test producer id rotation.
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
                log.iter()
                    .filter(|e| e.committed)
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
        committed: bool,
    ) -> i64 {
        let log = inner
            .partitions
            .entry((topic.to_owned(), partition))
            .or_default();
        let offset = log.len() as i64;
        log.push(Entry {
            record: Record { offset, key, value },
            committed,
        });
        offset
    }
}

/// One member's handle on a [`MemoryCluster`]; implements the four transport traits.
#[derive(Clone, Debug)]
pub struct MemoryTransport {
    cluster: MemoryCluster,
    /// Role → the token of the producer this handle holds.
    producers: Arc<Mutex<HashMap<String, FencingToken>>>,
    /// Role → the lease of the member's last `prepare_epoch` hint.
    prepared: Arc<Mutex<HashMap<String, Duration>>>,
}

impl MemoryTransport {
    /// The cluster this handle talks to.
    pub fn cluster(&self) -> &MemoryCluster {
        &self.cluster
    }

    /// The lease of the last [`Coordinator::prepare_epoch`] hint for `role`,
    /// or `None` once the member left the role (or never hinted).
    pub fn prepared(&self, role: &str) -> Option<Duration> {
        self.prepared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(role)
            .copied()
    }

    /// The token of the producer this handle holds for `role`, if any.
    pub fn held(&self, role: &str) -> Option<FencingToken> {
        self.producers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(role)
            .copied()
    }

    /// Writes a lease record inside a transaction that then aborts: the record
    /// takes an offset but is never read.
    pub fn write_lease_aborted(
        &self,
        role: &str,
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    ) -> Result<()> {
        self.write_state(role, partition, key, value, false)
    }

    /// Appends one state record of `role` through its epoch-bound producer,
    /// committed or aborted; wakes pollers for a committed one.
    fn write_state(
        &self,
        role: &str,
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
        committed: bool,
    ) -> Result<()> {
        let mut inner = self.cluster.enter("write_lease")?;
        self.check_epoch(&inner, role)?;
        let topic = self.cluster.state_topic.clone();
        MemoryCluster::append(&mut inner, &topic, partition, key, value, committed);
        drop(inner);
        if committed {
            self.cluster.changed.notify_waiters();
        }
        Ok(())
    }

    /// Checks that this handle's producer for `role` still holds the current
    /// epoch; drops it and answers `Fenced` when it does not.
    fn check_epoch(&self, inner: &Inner, role: &str) -> Result<()> {
        let mut producers = self.producers.lock().unwrap_or_else(|e| e.into_inner());
        let Some(mine) = producers.get(role).copied() else {
            return Err(Error::fatal(
                format!("write for role {role:?}"),
                "this transport holds no epoch for the role (acquire_epoch first)",
            ));
        };
        let current = inner.epochs.get(role).copied().unwrap_or(NO_EPOCH);
        if current != mine {
            producers.remove(role);
            return Err(Error::Fenced(format!(
                "role {role:?}: producer {mine} superseded by {current} (PRODUCER_FENCED)"
            )));
        }
        Ok(())
    }
}

#[async_trait]
impl Coordinator for MemoryTransport {
    async fn acquire_epoch(&self, role: &str, _lease_duration: Duration) -> Result<FencingToken> {
        let mut inner = self.cluster.enter("acquire_epoch")?;
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
        drop(inner);
        self.producers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(role.to_owned(), token);
        Ok(token)
    }

    fn prepare_epoch(&self, role: &str, lease_duration: Option<Duration>) {
        let mut prepared = self.prepared.lock().unwrap_or_else(|e| e.into_inner());
        match lease_duration {
            Some(d) => prepared.insert(role.to_owned(), d),
            None => prepared.remove(role),
        };
    }

    fn check_options(&self, options: &crate::election::ElectionOptions) -> Result<()> {
        match self.cluster.lock().min_lease_duration {
            Some(min) if options.lease_duration < min => Err(Error::InvalidArgument(format!(
                "lease duration {:?} is below this transport's minimum {min:?}",
                options.lease_duration
            ))),
            _ => Ok(()),
        }
    }

    async fn describe_epoch(&self, role: &str) -> Result<FencingToken> {
        let inner = self.cluster.enter("describe_epoch")?;
        Ok(inner.epochs.get(role).copied().unwrap_or(NO_EPOCH))
    }
}

#[async_trait]
impl StateReader for MemoryTransport {
    async fn read_partition(&self, partition: i32) -> Result<Vec<Record>> {
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
            {
                let inner = self.cluster.enter("poll_partition")?;
                let key = (self.cluster.state_topic.clone(), partition);
                if let Some(log) = inner.partitions.get(&key) {
                    let start = from.max(0) as usize;
                    if start < log.len() {
                        let records = log[start..]
                            .iter()
                            .filter(|e| e.committed)
                            .map(|e| e.record.clone())
                            .collect();
                        return Ok(ReadBatch {
                            records,
                            next_offset: log.len() as i64,
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
}

#[async_trait]
impl Registrar for MemoryTransport {
    async fn append(&self, partition: i32, key: Vec<u8>, value: Option<Vec<u8>>) -> Result<i64> {
        let mut inner = self.cluster.enter("append")?;
        let topic = self.cluster.state_topic.clone();
        let offset = MemoryCluster::append(&mut inner, &topic, partition, key, value, true);
        drop(inner);
        self.cluster.changed.notify_waiters();
        Ok(offset)
    }
}

#[async_trait]
impl LeaseWriter for MemoryTransport {
    async fn write_lease(
        &self,
        role: &str,
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    ) -> Result<()> {
        self.write_state(role, partition, key, value, true)
    }

    async fn write_guarded(&self, role: &str, records: Vec<OutRecord>) -> Result<()> {
        let mut inner = self.cluster.enter("write_guarded")?;
        self.check_epoch(&inner, role)?;
        for r in records {
            let partition = r.partition.unwrap_or(0);
            MemoryCluster::append(
                &mut inner,
                &r.topic,
                partition,
                r.key.unwrap_or_default(),
                r.value,
                true,
            );
        }
        drop(inner);
        self.cluster.changed.notify_waiters();
        Ok(())
    }

    async fn release(&self, role: &str) -> Result<()> {
        self.producers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(role);
        Ok(())
    }
}
