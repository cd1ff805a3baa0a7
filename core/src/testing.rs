//! Test leader code without Kafka: a [`TestCluster`] runs the library's own
//! election rules on the in-memory transport
//! ([`crate::transport::memory`]), with time driven by the test.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use std::time::Duration;
//! use krabka_coordination::testing::TestCluster;
//!
//! let cluster = TestCluster::new();
//! let (a, b) = (cluster.process("a"), cluster.process("b"));
//! let lead_a = a.client().acquire("billing", "a", a.client().leadership_options()).await?;
//! let wait_b = tokio::spawn({
//!     let client = b.client().clone();
//!     async move { client.acquire("billing", "b", client.leadership_options()).await }
//! });
//! cluster.settle().await;
//! a.crash(); // SIGKILL: no renewal, no resign
//! cluster.advance(Duration::from_secs(60)).await; // past a's lease and b's stagger
//! let lead_b = wait_b.await.unwrap()?;
//! assert!(lead_b.token() > lead_a.token());
//! # Ok::<(), krabka_coordination::Error>(()) }).unwrap();
//! ```
//!
//! # What it is
//!
//! * One cluster: the in-memory state log and transaction coordinator, with
//!   Kafka's epochs (a mint supersedes, a superseded epoch's writes are
//!   fenced), read_committed visibility and open transactions holding the
//!   last stable offset back. The rules are the library's own, unchanged:
//!   this module adds processes, faults and time, not a second election.
//! * One [`ManualClock`] for the whole cluster, starting at
//!   [`TestCluster::START_MILLIS`]. Nothing waits on real time: the test
//!   moves it with [`TestCluster::advance`] or
//!   [`TestCluster::advance_to_next_deadline`].
//! * Processes ([`TestProcess`]): each a [`Client`] with the same API as the
//!   Kafka one, on its own transport handle and clock, that the test can
//!   cut off, pause (SIGSTOP), crash (SIGKILL) or make fail for a while
//!   (see [`crate::transport::memory::faults`] for what each does to calls
//!   and timers).
//! * Read-back: [`TestCluster::guarded_writes`] (every committed guarded
//!   write, in commit order, with its token),
//!   [`TestCluster::committed_offset`] (a consumer group's input position
//!   committed with guarded writes) and
//!   [`TestCluster::describe_leadership`] (the coordinator's answer now).
//!
//! # What it is not
//!
//! No broker latency, no coordinator or partition leader moves, no
//! compaction, no transaction timeout. Every claim about Kafka is tested on
//! a real broker; the kit tests the caller's code against the library's
//! rules.
//!
//! # Settling
//!
//! The members' tasks run on the caller's tokio runtime.
//! [`TestCluster::settle`] returns once they have nothing left to do at the
//! current instant: on a current-thread runtime it lets every ready task
//! run (deterministic); on a multi-thread runtime it waits until no member
//! made a call or set a timer for a few consecutive rounds of a
//! millisecond of real time each. [`TestCluster::advance`] settles before
//! and after each instant it moves the clock to.

use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::clock::{Clock, ManualClock};
use crate::error::{Error, Result};
use crate::leadership::LeadershipStatus;
use crate::transport::memory::{
    CommittedWrite, Faults, MemoryCluster, MemoryTransport, ProcessClock, ProcessState,
};

/// An in-memory cluster and its manual clock (see the module docs).
#[derive(Clone, Debug)]
pub struct TestCluster {
    clock: ManualClock,
    cluster: MemoryCluster,
    partitions: i32,
}

impl Default for TestCluster {
    fn default() -> Self {
        TestCluster::new()
    }
}

impl TestCluster {
    /// The wall time a new cluster's clock starts at: 2026-01-01T00:00:00Z.
    pub const START_MILLIS: i64 = 1_767_225_600_000;

    /// A cluster whose state topic has the default 16 partitions.
    pub fn new() -> TestCluster {
        let clock = ManualClock::new(Self::START_MILLIS);
        let cluster = MemoryCluster::new(Arc::new(clock.clone()));
        TestCluster {
            clock,
            cluster,
            partitions: crate::ElectionOptions::DEFAULT_PARTITIONS,
        }
    }

    /// A cluster whose state topic has `partitions` partitions; refused
    /// with [`Error::InvalidArgument`] below 1.
    pub fn with_partitions(partitions: i32) -> Result<TestCluster> {
        if partitions < 1 {
            return Err(Error::InvalidArgument(format!(
                "partitions must be at least 1, got {partitions}"
            )));
        }
        Ok(TestCluster {
            partitions,
            ..TestCluster::new()
        })
    }

    /// A new process on the cluster, named `name` (for the test's own
    /// messages; the member id is what `acquire` is given).
    pub fn process(&self, name: &str) -> TestProcess {
        let transport = Arc::new(self.cluster.transport());
        let faults = Arc::clone(transport.faults());
        let clock: Arc<dyn Clock> = Arc::new(ProcessClock::new(self.clock.clone(), faults));
        let client = Client::from_transport(transport.clone())
            .with_partitions(self.partitions)
            .and_then(|c| c.with_clock(clock))
            .expect("a new client is not shared yet, and the count was checked");
        TestProcess {
            name: name.to_owned(),
            client,
            transport,
            cluster: self.clone(),
        }
    }

    /// The cluster's clock.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// The cluster's wall time (epoch ms).
    pub fn now_millis(&self) -> i64 {
        self.clock.now_millis()
    }

    /// The in-memory cluster underneath, for the faults it offers itself
    /// ([`MemoryCluster::set_stalled`] and the like).
    pub fn memory(&self) -> &MemoryCluster {
        &self.cluster
    }

    /// Moves the clock forward by `d`, instant by instant: to each timer's
    /// deadline on the way, letting every member act there (settling before
    /// and after), then to the end.
    pub async fn advance(&self, d: Duration) {
        let end = self
            .clock
            .now_millis()
            .saturating_add(crate::clock::duration_millis(d));
        self.settle().await;
        while let Some(next) = self.clock.next_deadline().filter(|&n| n <= end) {
            self.clock.set(next.max(self.clock.now_millis()));
            self.settle().await;
        }
        if self.clock.now_millis() < end {
            self.clock.set(end);
        }
        self.settle().await;
    }

    /// Moves the clock to the earliest instant any member waits for and
    /// lets the members act; returns that instant, or `None` (the clock
    /// unmoved) when nobody waits for one.
    pub async fn advance_to_next_deadline(&self) -> Option<i64> {
        self.settle().await;
        let at = self.clock.advance_to_next_deadline();
        self.settle().await;
        at
    }

    /// Returns once the members have nothing left to do at this instant
    /// (see the module docs, "Settling").
    pub async fn settle(&self) {
        const ROUNDS: usize = 400;
        const QUIET: usize = 3;
        let multi = tokio::runtime::Handle::try_current().is_ok_and(|h| {
            matches!(
                h.runtime_flavor(),
                tokio::runtime::RuntimeFlavor::MultiThread
            )
        });
        let mut last = self.activity();
        let mut quiet = 0;
        for _ in 0..ROUNDS {
            for _ in 0..64 {
                tokio::task::yield_now().await;
            }
            if multi {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let now = self.activity();
            if now == last {
                quiet += 1;
                if quiet >= QUIET {
                    return;
                }
            } else {
                quiet = 0;
                last = now;
            }
        }
    }

    /// What changes whenever a member does something: its calls, and the
    /// timers it sets or that fire.
    fn activity(&self) -> (u64, u64, usize) {
        (
            self.cluster.requests(),
            self.clock.timers_set(),
            self.clock.pending_timers(),
        )
    }

    /// Every guarded write the cluster committed (every topic but the state
    /// topic), in commit order, each with the token of the term that wrote
    /// it.
    pub fn guarded_writes(&self) -> Vec<CommittedWrite> {
        self.cluster
            .committed_writes(None)
            .into_iter()
            .filter(|w| w.topic != crate::STATE_TOPIC)
            .collect()
    }

    /// What consumer group `group` has committed for `topic`/`partition`
    /// (the offset of the next record to read), `None` when nothing: the
    /// input position that guarded writes with offsets
    /// ([`crate::leadership::Leadership::write_with_offsets`]) committed; a
    /// commit still pending does not count.
    pub fn committed_offset(&self, group: &str, topic: &str, partition: i32) -> Option<i64> {
        self.cluster.committed_offset(group, topic, partition)
    }

    /// What the role's transaction coordinator says now, as
    /// [`Client::describe_leadership`] answers it, asked by a process of
    /// its own that no fault touches.
    pub async fn describe_leadership(&self, role: &str) -> Result<LeadershipStatus> {
        let transport = self.cluster.transport();
        crate::codec::check_role(role)?;
        crate::leadership::describe_leadership(&transport, role).await
    }
}

/// One process on a [`TestCluster`]: a [`Client`] and the faults the test
/// can put it through. Dropping it drops nothing of the client's.
#[derive(Clone, Debug)]
pub struct TestProcess {
    name: String,
    client: Client,
    transport: Arc<MemoryTransport>,
    cluster: TestCluster,
}

impl TestProcess {
    /// The process's name, as given to [`TestCluster::process`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The process's client: the API of a Kafka [`Client`], on the test
    /// cluster and its clock.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The process's state.
    pub fn state(&self) -> ProcessState {
        self.faults().state()
    }

    fn faults(&self) -> &Arc<Faults> {
        self.transport.faults()
    }

    fn set(&self, to: ProcessState) {
        if let Err(e) = self.faults().set(to) {
            tracing::warn!(process = %self.name, error = %e, "ignored");
        }
    }

    /// Kills the process (SIGKILL): it never answers or wakes again, so it
    /// neither renews nor resigns; its registration stays until a
    /// challenger passes it over. For good. Its client counts as closed:
    /// what the test had pending on it ends at once with the closed error
    /// naming the crash ([`Error::InvalidArgument`], "the client is closed:
    /// its process crashed"): an acquire, a describe, an observer's next
    /// view, a guarded write, a resign, a leader loop; each term it held
    /// ends with that error as its reason ([`crate::leadership::Leadership::done`]
    /// resolves), locally, sending nothing. A later operation is refused
    /// with the same error, and `close` returns at once (nothing of a
    /// killed process is left to end). The cluster sees none of it: the
    /// other members wait out its lease as after a real kill.
    pub fn crash(&self) {
        self.set(ProcessState::Crashed);
        self.client.abandon();
    }

    /// Stops the process (SIGSTOP): its calls and timers wait. Its clocks go
    /// on, so on [`TestProcess::resume`] what came due fires at once and a
    /// write it had in flight reaches the cluster, which fences it if
    /// another member minted meanwhile. Nothing for a crashed process.
    pub fn pause(&self) {
        self.set(ProcessState::Paused);
    }

    /// Resumes a paused process (SIGCONT). Nothing for a crashed process.
    pub fn resume(&self) {
        self.set(ProcessState::Running);
    }

    /// Cuts the process off from the cluster: each of its calls fails with
    /// a transient error (its timers run), until [`TestProcess::heal`].
    pub fn cut_off(&self) {
        self.set(ProcessState::CutOff);
    }

    /// Ends a cut ([`TestProcess::cut_off`]); the same as
    /// [`TestProcess::resume`].
    pub fn heal(&self) {
        self.set(ProcessState::Running);
    }

    /// Makes each call of the process fail with a transient error for `d`
    /// of the cluster's time from now (a renewal or a guarded write that
    /// fails for a while, then goes through).
    pub fn fail_for(&self, d: Duration) {
        let until = self
            .cluster
            .now_millis()
            .saturating_add(crate::clock::duration_millis(d));
        self.faults().fail_until(Some(until));
    }
}

/// `docs/testing.md`, whose Rust example `cargo test --doc` compiles (the
/// same test runs in `core/tests/no_broker/testing_kit.rs`).
#[cfg(doctest)]
#[doc = include_str!("../../docs/testing.md")]
pub struct TestingGuide;
