//! A transport wrapper that runs a test's hook at an exact point of a
//! member's steps, where the in-memory transport (which never yields in the
//! middle of a step) leaves no gap for another task to act:
//!
//! * right after a mint, before the member writes its first lease (a rival
//!   minting in between makes the member lose its challenge);
//! * right after a lease write committed (a cancel that fires in the instant
//!   the role was won);
//! * right before and right after the held-back check of a challenger
//!   (records released, or a transaction opened, around it).
//!
//! It can also make the member's polls lag (return nothing, as a Kafka
//! consumer's poll does before its fetch arrives), make its epoch's writes
//! overrun the bound they are given (hang until unset, as a transport with a
//! bug would), and it logs the names of the state-reading and minting calls
//! in order.
//!
//! Every trait method is forwarded; the seam has no default bodies, so the
//! compiler checks that nothing is dropped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use krabka_coordination::transport::memory::MemoryTransport;
use krabka_coordination::transport::{
    Backlog, CommittedOffset, ConsumedOffsets, Coordinator, Describer, LeaseWriter, OutRecord,
    PastStable, ReadBatch, Registrar, StateReader, StateRecord, Superseded,
};
use krabka_coordination::{ElectionOptions, FencingToken, Record, Result};

type Hook = Box<dyn FnOnce() + Send>;
type Slot = Arc<Mutex<Option<Hook>>>;

fn take(slot: &Slot) -> Option<Hook> {
    slot.lock().unwrap().take()
}

/// A [`MemoryTransport`] with one-shot hooks.
pub struct Hooked {
    inner: MemoryTransport,
    after_mint: Slot,
    after_lease: Slot,
    before_held_back: Slot,
    after_held_back: Slot,
    lagging: AtomicBool,
    overrunning: Arc<AtomicBool>,
    calls: Mutex<Vec<String>>,
}

impl Hooked {
    pub fn new(inner: MemoryTransport) -> Self {
        Hooked {
            inner,
            after_mint: Arc::default(),
            after_lease: Arc::default(),
            before_held_back: Arc::default(),
            after_held_back: Arc::default(),
            lagging: AtomicBool::new(false),
            overrunning: Arc::default(),
            calls: Mutex::default(),
        }
    }

    /// Runs `hook` once, right before the next held-back check is sent.
    pub fn before_next_held_back(&self, hook: impl FnOnce() + Send + 'static) {
        *self.before_held_back.lock().unwrap() = Some(Box::new(hook));
    }

    /// Runs `hook` once, right after the next held-back check answered.
    pub fn after_next_held_back(&self, hook: impl FnOnce() + Send + 'static) {
        *self.after_held_back.lock().unwrap() = Some(Box::new(hook));
    }

    /// While `lagging`, every poll waits its `max_wait` on the cluster's
    /// clock and returns nothing, though records are there: a poll that
    /// returns before its fetch arrived.
    pub fn set_lagging(&self, lagging: bool) {
        self.lagging.store(lagging, Ordering::SeqCst);
    }

    /// While `overrunning`, every lease and guarded write of an epoch minted
    /// through this transport waits, past the `within` it is given, until
    /// this is set back to `false`, then writes.
    pub fn set_overrunning(&self, overrunning: bool) {
        self.overrunning.store(overrunning, Ordering::SeqCst);
    }

    /// The calls made so far (`poll_partition`, `held_back` with its answer,
    /// `acquire_epoch`, ...), in order; clears the log.
    pub fn take_calls(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }

    fn log(&self, call: String) {
        self.calls.lock().unwrap().push(call);
    }

    /// The wrapped transport.
    pub fn inner(&self) -> &MemoryTransport {
        &self.inner
    }

    /// Runs `hook` once, right after the next mint through this transport.
    pub fn after_next_mint(&self, hook: impl FnOnce() + Send + 'static) {
        *self.after_mint.lock().unwrap() = Some(Box::new(hook));
    }

    /// Runs `hook` once, right after the next lease write that committed
    /// through an epoch of this transport.
    pub fn after_next_lease(&self, hook: impl FnOnce() + Send + 'static) {
        *self.after_lease.lock().unwrap() = Some(Box::new(hook));
    }
}

struct HookedEpoch {
    inner: Box<dyn LeaseWriter>,
    after_lease: Slot,
    overrunning: Arc<AtomicBool>,
}

impl HookedEpoch {
    /// Waits while the transport is set overrunning.
    async fn overrun(&self) {
        while self.overrunning.load(Ordering::SeqCst) {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

#[async_trait]
impl LeaseWriter for HookedEpoch {
    fn role(&self) -> &str {
        self.inner.role()
    }

    fn token(&self) -> FencingToken {
        self.inner.token()
    }

    async fn write_lease(&self, record: StateRecord, within: Duration) -> Result<()> {
        self.overrun().await;
        self.inner.write_lease(record, within).await?;
        if let Some(hook) = take(&self.after_lease) {
            hook();
        }
        Ok(())
    }

    async fn write_lease_and_deregister(
        &self,
        tombstone: StateRecord,
        deregistration: StateRecord,
        within: Duration,
    ) -> Result<()> {
        self.overrun().await;
        self.inner
            .write_lease_and_deregister(tombstone, deregistration, within)
            .await
    }

    async fn write_guarded(&self, records: Vec<OutRecord>, within: Duration) -> Result<()> {
        self.overrun().await;
        self.inner.write_guarded(records, within).await
    }

    async fn write_guarded_with_offsets(
        &self,
        records: Vec<OutRecord>,
        offsets: ConsumedOffsets,
        within: Duration,
    ) -> Result<()> {
        self.overrun().await;
        self.inner
            .write_guarded_with_offsets(records, offsets, within)
            .await
    }

    async fn committed_offsets(
        &self,
        group: &str,
        partitions: &[(String, Vec<i32>)],
        within: Duration,
    ) -> Result<Vec<CommittedOffset>> {
        self.inner
            .committed_offsets(group, partitions, within)
            .await
    }

    fn take_resolved(&self) -> Option<bool> {
        self.inner.take_resolved()
    }

    async fn supersede(&self, within: Duration) -> Result<Superseded> {
        self.inner.supersede(within).await
    }
}

#[async_trait]
impl Describer for Hooked {
    async fn describe_epoch(&self, role: &str) -> Result<FencingToken> {
        self.inner.describe_epoch(role).await
    }
}

#[async_trait]
impl Coordinator for Hooked {
    async fn acquire_epoch(
        &self,
        role: &str,
        lease_duration: Duration,
    ) -> Result<Box<dyn LeaseWriter>> {
        self.log("acquire_epoch".into());
        let epoch = self.inner.acquire_epoch(role, lease_duration).await?;
        if let Some(hook) = take(&self.after_mint) {
            hook();
        }
        Ok(Box::new(HookedEpoch {
            inner: epoch,
            after_lease: Arc::clone(&self.after_lease),
            overrunning: Arc::clone(&self.overrunning),
        }))
    }

    async fn check_member(&self, role: &str, options: &ElectionOptions) -> Result<()> {
        self.inner.check_member(role, options).await
    }
}

#[async_trait]
impl StateReader for Hooked {
    async fn read_partition(&self, partition: i32) -> Result<Vec<Record>> {
        self.log("read_partition".into());
        self.inner.read_partition(partition).await
    }

    async fn read_state(&self, partition: i32) -> Result<ReadBatch> {
        self.log("read_state".into());
        self.inner.read_state(partition).await
    }

    async fn poll_partition(
        &self,
        partition: i32,
        from: i64,
        max_wait: Duration,
    ) -> Result<ReadBatch> {
        if self.lagging.load(Ordering::SeqCst) {
            self.log("poll_partition (lagging)".into());
            // From past any offset: the poll finds nothing and waits its
            // time out on the cluster's clock.
            self.inner
                .poll_partition(partition, i64::MAX, max_wait)
                .await?;
            return Ok(ReadBatch {
                records: Vec::new(),
                next_offset: from,
            });
        }
        self.log("poll_partition".into());
        self.inner.poll_partition(partition, from, max_wait).await
    }

    async fn held_back(&self, partition: i32, position: i64) -> Result<Backlog> {
        if let Some(hook) = take(&self.before_held_back) {
            hook();
        }
        let r = self.inner.held_back(partition, position).await;
        self.log(match &r {
            Ok(b) => format!("held_back {b:?}"),
            Err(_) => "held_back failed".into(),
        });
        if let Some(hook) = take(&self.after_held_back) {
            hook();
        }
        r
    }

    async fn read_past_stable(&self, partition: i32, position: i64) -> Result<Option<PastStable>> {
        let r = self.inner.read_past_stable(partition, position).await;
        self.log(match &r {
            Ok(Some(p)) => format!(
                "read_past_stable {} committed, {} open",
                p.committed.len(),
                p.open.len()
            ),
            Ok(None) => "read_past_stable None".into(),
            Err(_) => "read_past_stable failed".into(),
        });
        r
    }
}

#[async_trait]
impl Registrar for Hooked {
    async fn append(&self, record: StateRecord) -> Result<i64> {
        self.inner.append(record).await
    }
}
