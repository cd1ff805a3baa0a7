//! The first lease of a won epoch under write failures, on the in-memory
//! cluster and a manual clock: a first lease whose outcome stays unknown
//! is tried again after the member's back-off, not at once; a cancel ends
//! the wait promptly; and a first lease that may have committed, followed
//! by a fatal error or a cancel, is cleared and its epoch superseded, so
//! standbys do not wait out a lease nobody renews.

use crate::world;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use krabka_coordination::leadership::describe_role_state;
use krabka_coordination::transport::memory::MemoryTransport;
use krabka_coordination::transport::{
    Backlog, CommittedOffset, ConsumedOffsets, Coordinator, Describer, LeaseWriter, OutRecord,
    PastStable, ReadBatch, Registrar, StateReader, StateRecord, Superseded,
};
use krabka_coordination::{ElectionOptions, Error, ErrorKind, FencingToken, Record, Result};
use tokio_util::sync::CancellationToken;
use world::{ms, settle, spawn_on, World, PARTITIONS, ROLE, T0};

/// What the next lease write of an epoch does.
#[derive(Debug, Clone, Copy)]
enum Write {
    /// Goes through to the cluster.
    Pass,
    /// Fails with an unknown outcome; nothing is written.
    Unknown,
    /// Goes through to the cluster (it commits), then fails with an unknown
    /// outcome, as a commit whose answer was lost.
    CommittedUnknown,
    /// Fails for good.
    Fatal,
}

/// A [`MemoryTransport`] whose epochs' lease writes follow a script (then
/// [`Write::Unknown`] forever when `unknown_after` is set, else
/// [`Write::Pass`]), counting them.
struct Scripted {
    inner: MemoryTransport,
    script: Arc<Mutex<VecDeque<Write>>>,
    unknown_after: bool,
    writes: Arc<AtomicUsize>,
}

impl Scripted {
    fn new(inner: MemoryTransport, script: &[Write], unknown_after: bool) -> Self {
        Scripted {
            inner,
            script: Arc::new(Mutex::new(script.iter().copied().collect())),
            unknown_after,
            writes: Arc::default(),
        }
    }
}

struct ScriptedEpoch {
    inner: Box<dyn LeaseWriter>,
    script: Arc<Mutex<VecDeque<Write>>>,
    unknown_after: bool,
    writes: Arc<AtomicUsize>,
}

fn unknown() -> Error {
    Error::OutcomeUnknown {
        context: "write_lease: commit".into(),
        source: "the commit was sent but not confirmed".into(),
    }
}

#[async_trait]
impl LeaseWriter for ScriptedEpoch {
    fn role(&self) -> &str {
        self.inner.role()
    }

    fn token(&self) -> FencingToken {
        self.inner.token()
    }

    async fn write_lease(&self, record: StateRecord, within: Duration) -> Result<()> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        // A real write takes a round trip: without it an unpaced retry loop
        // would never let the test run.
        tokio::task::yield_now().await;
        let next = self.script.lock().unwrap().pop_front();
        let next = next.unwrap_or(if self.unknown_after {
            Write::Unknown
        } else {
            Write::Pass
        });
        match next {
            Write::Pass => self.inner.write_lease(record, within).await,
            Write::Unknown => Err(unknown()),
            Write::CommittedUnknown => {
                self.inner.write_lease(record, within).await?;
                Err(unknown())
            }
            Write::Fatal => Err(Error::fatal("write_lease", "refused for good")),
        }
    }

    async fn write_lease_and_deregister(
        &self,
        tombstone: StateRecord,
        deregistration: StateRecord,
        within: Duration,
    ) -> Result<()> {
        self.inner
            .write_lease_and_deregister(tombstone, deregistration, within)
            .await
    }

    async fn write_guarded(&self, records: Vec<OutRecord>, within: Duration) -> Result<()> {
        self.inner.write_guarded(records, within).await
    }

    async fn write_guarded_with_offsets(
        &self,
        records: Vec<OutRecord>,
        offsets: ConsumedOffsets,
        within: Duration,
    ) -> Result<()> {
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
impl Describer for Scripted {
    async fn describe_epoch(&self, role: &str) -> Result<FencingToken> {
        self.inner.describe_epoch(role).await
    }
}

#[async_trait]
impl Coordinator for Scripted {
    async fn acquire_epoch(
        &self,
        role: &str,
        lease_duration: Duration,
    ) -> Result<Box<dyn LeaseWriter>> {
        let epoch = self.inner.acquire_epoch(role, lease_duration).await?;
        Ok(Box::new(ScriptedEpoch {
            inner: epoch,
            script: Arc::clone(&self.script),
            unknown_after: self.unknown_after,
            writes: Arc::clone(&self.writes),
        }))
    }

    async fn check_member(&self, role: &str, options: &ElectionOptions) -> Result<()> {
        self.inner.check_member(role, options).await
    }
}

#[async_trait]
impl StateReader for Scripted {
    async fn read_partition(&self, partition: i32) -> Result<Vec<Record>> {
        self.inner.read_partition(partition).await
    }

    async fn read_state(&self, partition: i32) -> Result<ReadBatch> {
        self.inner.read_state(partition).await
    }

    async fn kept_state(&self, partition: i32) -> Option<ReadBatch> {
        self.inner.kept_state(partition).await
    }

    async fn poll_partition(
        &self,
        partition: i32,
        from: i64,
        max_wait: Duration,
    ) -> Result<ReadBatch> {
        self.inner.poll_partition(partition, from, max_wait).await
    }

    async fn held_back(&self, partition: i32, position: i64) -> Result<Backlog> {
        self.inner.held_back(partition, position).await
    }

    async fn read_past_stable(&self, partition: i32, position: i64) -> Result<Option<PastStable>> {
        self.inner.read_past_stable(partition, position).await
    }
}

#[async_trait]
impl Registrar for Scripted {
    async fn append(&self, record: StateRecord) -> Result<i64> {
        self.inner.append(record).await
    }
}

/// The member's back-off in these tests.
const FIRST: Duration = Duration::from_millis(100);
const MAX: Duration = Duration::from_secs(2);

/// A first lease whose outcome stays unknown is written again after the
/// member's back-off: over ten seconds of clock time, a handful of
/// attempts (100 ms doubling to 2 s: about nine), not one per round trip.
/// A cancel then ends the acquire within one settle, no clock time passing.
#[tokio::test(flavor = "current_thread")]
async fn unknown_first_lease_outcomes_back_off_and_a_cancel_ends_them_at_once() {
    let w = World::new();
    let t = Arc::new(Scripted::new(w.cluster.transport(), &[], true));
    let writes = Arc::clone(&t.writes);
    let cancel = CancellationToken::new();
    let options = w
        .options()
        .with_backoff(FIRST, MAX)
        .with_cancel(cancel.clone());
    let a = spawn_on(t, "a", options);
    w.run_until(T0).await;
    let at_start = writes.load(Ordering::SeqCst);
    assert!(
        (1..=2).contains(&at_start),
        "{at_start} first lease writes before the clock moved"
    );
    w.run_until(T0 + 10_000).await;
    let in_ten_seconds = writes.load(Ordering::SeqCst);
    eprintln!("{in_ten_seconds} first lease writes in 10 s of clock time");
    assert!(
        (5..=14).contains(&in_ten_seconds),
        "{in_ten_seconds} writes in 10 s"
    );
    cancel.cancel();
    settle().await;
    assert!(a.is_finished(), "a cancel ends the back-off pause at once");
    let e = a.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled, "{e}");
}

/// Under outcomes that stay unknown, no first lease write starts once one
/// lease duration has passed since the first: the epoch is given up, and
/// the acquire goes on as a fresh challenge (a new mint).
#[tokio::test(flavor = "current_thread")]
async fn an_unknown_first_lease_is_given_up_after_one_lease_duration() {
    let w = World::new();
    let t = Arc::new(Scripted::new(w.cluster.transport(), &[], true));
    let writes = Arc::clone(&t.writes);
    let cancel = CancellationToken::new();
    let options = w
        .options()
        .with_backoff(FIRST, MAX)
        .with_cancel(cancel.clone());
    let first = w.cluster.transport();
    let a = spawn_on(t, "a", options);
    w.run_until(T0).await;
    let token = first.describe_epoch(ROLE).await.unwrap();
    w.run_until(T0 + ms(world::LEASE) + 5_000).await;
    let now = first.describe_epoch(ROLE).await.unwrap();
    assert!(now > token, "a new epoch was minted: {token} then {now}");
    assert!(!a.is_finished(), "the acquire goes on");
    eprintln!("{} writes", writes.load(Ordering::SeqCst));
    cancel.cancel();
    settle().await;
    assert!(a.is_finished());
}

/// A first lease that committed though its answer was lost, followed by a
/// fatal error: the acquire fails with that error, and on its way out
/// clears the lease and supersedes the epoch, so no lease is left that
/// nobody renews or resigns and standbys need not wait out its deadline.
#[tokio::test(flavor = "current_thread")]
async fn a_first_lease_that_may_have_committed_then_a_fatal_error_is_let_go() {
    let w = World::new();
    let script = [Write::CommittedUnknown, Write::Fatal];
    let t = Arc::new(Scripted::new(w.cluster.transport(), &script, false));
    let reader = w.transport();
    let a = spawn_on(t, "a", w.options().with_backoff(FIRST, MAX));
    w.run_until(T0).await;
    let minted = reader.describe_epoch(ROLE).await.unwrap();
    w.run_until(T0 + 1_000).await;
    assert!(a.is_finished(), "the fatal error ends the acquire");
    let e = a.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Fatal, "{e}");
    let state = describe_role_state(reader.as_ref(), ROLE, PARTITIONS)
        .await
        .unwrap();
    assert!(state.lease.is_none(), "the lease was cleared: {state:?}");
    assert!(state.roster.is_empty(), "deregistered: {state:?}");
    let now = reader.describe_epoch(ROLE).await.unwrap();
    assert!(
        now > minted,
        "the epoch was superseded: {minted} then {now}"
    );
}
