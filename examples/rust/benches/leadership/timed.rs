//! A transport that times every call of the one it wraps, and the held
//! epochs it hands out. Every method is forwarded here, those with default
//! bodies too (`read_state`, `kept_state`): the option check and the kept
//! views reach the Kafka transport exactly as without the wrapper, and the
//! option checks are counted so a run shows they were delivered.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use krabka_coordination::election::ElectionOptions;
use krabka_coordination::transport::{
    Backlog, CommittedOffset, ConsumedOffsets, Coordinator, Describer, LeaseWriter, OutRecord,
    PastStable, ReadBatch, Registrar, StateReader, StateRecord, Superseded, Transport,
};
use krabka_coordination::{FencingToken, Record, Result};
use serde_json::{json, Value};

/// One timed transport call.
#[derive(Debug, Clone)]
pub struct Span {
    /// The member whose transport it is.
    pub who: &'static str,
    /// The call.
    pub op: &'static str,
    /// When it started.
    pub start: Instant,
    /// When it returned.
    pub end: Instant,
    /// Records a poll returned.
    pub records: usize,
    /// Whether it succeeded.
    pub ok: bool,
}

/// The spans of every timed transport of a run.
pub type Spans = Arc<Mutex<Vec<Span>>>;

/// How many option checks reached the wrapped transports, and a signal of
/// each lease write as it starts.
#[derive(Debug, Default)]
pub struct Hints {
    check_options: AtomicU64,
    /// Notified as a lease write (a first lease or a renewal) starts.
    pub lease_write_started: tokio::sync::Notify,
}

impl Hints {
    /// The counts as JSON: `check_options`.
    pub fn json(&self) -> Value {
        json!({
            "check_options": self.check_options.load(Ordering::Relaxed),
        })
    }
}

/// Appends spans for one wrapped transport or epoch.
#[derive(Clone)]
struct Recorder {
    who: &'static str,
    spans: Spans,
}

impl Recorder {
    fn record(&self, op: &'static str, start: Instant, records: usize, ok: bool) {
        let end = Instant::now();
        self.spans
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Span {
                who: self.who,
                op,
                start,
                end,
                records,
                ok,
            });
    }
}

/// A transport that times every call of `inner`.
pub struct Timed {
    inner: Arc<dyn Transport>,
    rec: Recorder,
    hints: Arc<Hints>,
}

impl Timed {
    /// Times the calls of `inner` as `who`.
    pub fn new(
        inner: Arc<dyn Transport>,
        who: &'static str,
        spans: Spans,
        hints: Arc<Hints>,
    ) -> Timed {
        Timed {
            inner,
            rec: Recorder { who, spans },
            hints,
        }
    }
}

#[async_trait]
impl Describer for Timed {
    async fn describe_epoch(&self, role: &str) -> Result<FencingToken> {
        let t = Instant::now();
        let r = self.inner.describe_epoch(role).await;
        self.rec.record("describe_epoch", t, 0, r.is_ok());
        r
    }
}

#[async_trait]
impl Coordinator for Timed {
    async fn acquire_epoch(
        &self,
        role: &str,
        lease_duration: Duration,
    ) -> Result<Box<dyn LeaseWriter>> {
        let t = Instant::now();
        let r = self.inner.acquire_epoch(role, lease_duration).await;
        self.rec.record("acquire_epoch", t, 0, r.is_ok());
        r.map(|inner| {
            Box::new(TimedEpoch {
                inner,
                rec: self.rec.clone(),
                hints: self.hints.clone(),
            }) as Box<dyn LeaseWriter>
        })
    }

    async fn check_member(&self, role: &str, options: &ElectionOptions) -> Result<()> {
        self.hints.check_options.fetch_add(1, Ordering::Relaxed);
        self.inner.check_member(role, options).await
    }
}

#[async_trait]
impl StateReader for Timed {
    async fn read_partition(&self, partition: i32) -> Result<Vec<Record>> {
        let t = Instant::now();
        let r = self.inner.read_partition(partition).await;
        let n = r.as_ref().map_or(0, Vec::len);
        self.rec.record("read_partition", t, n, r.is_ok());
        r
    }

    async fn read_state(&self, partition: i32) -> Result<ReadBatch> {
        let t = Instant::now();
        let r = self.inner.read_state(partition).await;
        let n = r.as_ref().map_or(0, |b| b.records.len());
        self.rec.record("read_state", t, n, r.is_ok());
        r
    }

    async fn kept_state(&self, partition: i32) -> Option<ReadBatch> {
        let t = Instant::now();
        let r = self.inner.kept_state(partition).await;
        let n = r.as_ref().map_or(0, |b| b.records.len());
        self.rec.record("kept_state", t, n, r.is_some());
        r
    }

    async fn poll_partition(
        &self,
        partition: i32,
        from: i64,
        max_wait: Duration,
    ) -> Result<ReadBatch> {
        let t = Instant::now();
        let r = self.inner.poll_partition(partition, from, max_wait).await;
        let n = r.as_ref().map_or(0, |b| b.records.len());
        self.rec.record("poll_partition", t, n, r.is_ok());
        r
    }

    async fn held_back(&self, partition: i32, position: i64) -> Result<Backlog> {
        let t = Instant::now();
        let r = self.inner.held_back(partition, position).await;
        self.rec.record("held_back", t, 0, r.is_ok());
        r
    }

    async fn read_past_stable(&self, partition: i32, position: i64) -> Result<Option<PastStable>> {
        let t = Instant::now();
        let r = self.inner.read_past_stable(partition, position).await;
        let n = r
            .as_ref()
            .ok()
            .and_then(Option::as_ref)
            .map_or(0, |p| p.committed.len() + p.open.len());
        self.rec.record("read_past_stable", t, n, r.is_ok());
        r
    }
}

#[async_trait]
impl Registrar for Timed {
    async fn append(&self, record: StateRecord) -> Result<i64> {
        let t = Instant::now();
        let op = if record.value.is_some() {
            "append(register)"
        } else {
            "append(deregister)"
        };
        let r = self.inner.append(record).await;
        self.rec.record(op, t, 0, r.is_ok());
        r
    }
}

/// A held epoch whose writes are timed; dropping it drops (releases) the
/// wrapped one.
struct TimedEpoch {
    inner: Box<dyn LeaseWriter>,
    rec: Recorder,
    hints: Arc<Hints>,
}

#[async_trait]
impl LeaseWriter for TimedEpoch {
    fn role(&self) -> &str {
        self.inner.role()
    }

    fn token(&self) -> FencingToken {
        self.inner.token()
    }

    async fn write_lease(&self, record: StateRecord, within: Duration) -> Result<()> {
        let t = Instant::now();
        let op = if record.value.is_some() {
            self.hints.lease_write_started.notify_waiters();
            "write_lease(lease)"
        } else {
            "write_lease(tombstone)"
        };
        let r = self.inner.write_lease(record, within).await;
        self.rec.record(op, t, 0, r.is_ok());
        r
    }

    async fn write_lease_and_deregister(
        &self,
        tombstone: StateRecord,
        deregistration: StateRecord,
        within: Duration,
    ) -> Result<()> {
        let t = Instant::now();
        let r = self
            .inner
            .write_lease_and_deregister(tombstone, deregistration, within)
            .await;
        self.rec
            .record("write_lease_and_deregister", t, 0, r.is_ok());
        r
    }

    async fn write_guarded(&self, records: Vec<OutRecord>, within: Duration) -> Result<()> {
        let t = Instant::now();
        let r = self.inner.write_guarded(records, within).await;
        self.rec.record("write_guarded", t, 0, r.is_ok());
        r
    }

    async fn write_guarded_with_offsets(
        &self,
        records: Vec<OutRecord>,
        offsets: ConsumedOffsets,
        within: Duration,
    ) -> Result<()> {
        let t = Instant::now();
        let r = self
            .inner
            .write_guarded_with_offsets(records, offsets, within)
            .await;
        self.rec
            .record("write_guarded_with_offsets", t, 0, r.is_ok());
        r
    }

    async fn committed_offsets(
        &self,
        group: &str,
        partitions: &[(String, Vec<i32>)],
        within: Duration,
    ) -> Result<Vec<CommittedOffset>> {
        let t = Instant::now();
        let r = self
            .inner
            .committed_offsets(group, partitions, within)
            .await;
        self.rec.record("committed_offsets", t, 0, r.is_ok());
        r
    }

    fn take_resolved(&self) -> Option<bool> {
        self.inner.take_resolved()
    }

    async fn supersede(&self, within: Duration) -> Result<Superseded> {
        let t = Instant::now();
        let r = self.inner.supersede(within).await;
        self.rec.record("supersede", t, 0, r.is_ok());
        r
    }
}
