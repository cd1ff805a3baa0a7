//! [`TestCluster`] and [`TestProcess`]: the core's test kit
//! (`krabka_coordination::testing`) for Kotlin, Java and Swift.
//!
//! A process's client is a [`Client`] like any other (the shared crate's
//! `KafkaClient::on_test_process`), so every operation of the binding's
//! client works on it unchanged. The members' tasks run on the binding's
//! multi-thread runtime; the cluster's time operations run there too, and
//! the core's settle sees that flavour and waits until the members are
//! quiet. Durations are seconds and instants epoch milliseconds, as
//! everywhere in the generated API (the hand-written Kotlin `TestCluster`
//! adds `java.time` over them). Every rule is the core's.

use std::sync::Arc;

use krabka_coordination::testing;
use krabka_coordination::transport::memory::{CommittedWrite, ProcessState};
use krabka_coordination::{ElectionOptions, NO_EPOCH};
use krabka_coordination_bindings::args::{seconds, SecondsBound};
use krabka_coordination_bindings::options;

use crate::client::Client;
use crate::codec::FencingToken;
use crate::error::KrabkaError;
use crate::leadership::LeadershipStatus;
use crate::runtime::{run, runtime};

/// What a [`TestProcess`] is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum TestProcessState {
    /// Calls go through; timers fire.
    Running,
    /// Every call fails at once as transient (a cut network).
    CutOff,
    /// Calls and timers wait for the resume (SIGSTOP).
    Paused,
    /// Nothing answers and nothing fires, for good (SIGKILL).
    Crashed,
}

impl From<ProcessState> for TestProcessState {
    fn from(s: ProcessState) -> Self {
        match s {
            ProcessState::Running => TestProcessState::Running,
            ProcessState::CutOff => TestProcessState::CutOff,
            ProcessState::Paused => TestProcessState::Paused,
            ProcessState::Crashed => TestProcessState::Crashed,
        }
    }
}

/// One guarded write a test cluster committed.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct GuardedWrite {
    /// Its place in the cluster's commit order (from 0, counting the state
    /// topic's records too; never negative).
    pub commit: i64,
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset in the partition.
    pub offset: i64,
    /// The key (empty when the record had none).
    pub key: Vec<u8>,
    /// The value; absent for a tombstone.
    pub value: Option<Vec<u8>>,
    /// The role whose term wrote it.
    pub role: String,
    /// The token of that term.
    pub token: FencingToken,
}

impl From<CommittedWrite> for GuardedWrite {
    fn from(w: CommittedWrite) -> Self {
        GuardedWrite {
            commit: i64::try_from(w.commit).unwrap_or(i64::MAX),
            topic: w.topic,
            partition: w.partition,
            offset: w.offset,
            key: w.key,
            value: w.value,
            role: w.role.unwrap_or_default(),
            token: w.token.unwrap_or(NO_EPOCH).into(),
        }
    }
}

/// An in-memory cluster running the library's own election rules (the
/// core's state log and transaction coordinator: Kafka's epochs, fencing
/// and read_committed visibility, no broker), with one manual clock for all
/// its processes: nothing waits on real time, the test moves the clock.
/// The clock starts at 2026-01-01T00:00:00Z (epoch ms 1767225600000).
#[derive(Debug, uniffi::Object)]
pub struct TestCluster {
    cluster: testing::TestCluster,
    partitions: i32,
}

/// A span of the cluster's time from the caller's seconds (non-negative).
fn span(secs: f64) -> Result<std::time::Duration, KrabkaError> {
    Ok(seconds("seconds", secs, SecondsBound::NonNegative)?)
}

#[uniffi::export]
impl TestCluster {
    /// A cluster whose state topic has `partitions` partitions (16 when
    /// left out); below 1 is refused with `InvalidArgument`, naming it.
    #[uniffi::constructor(default(partitions = None))]
    pub fn new(partitions: Option<i32>) -> Result<Arc<Self>, KrabkaError> {
        crate::metrics::registry();
        let (cluster, partitions) = match partitions {
            None => (
                testing::TestCluster::new(),
                ElectionOptions::DEFAULT_PARTITIONS,
            ),
            Some(p) => {
                let p = options::partitions(p.into())?;
                (testing::TestCluster::with_partitions(p)?, p)
            }
        };
        Ok(Arc::new(TestCluster {
            cluster,
            partitions,
        }))
    }

    /// The partition count of the state topic.
    pub fn partitions(&self) -> i32 {
        self.partitions
    }

    /// A new process on the cluster, named `name` (for the test's own
    /// messages; the member id is what an acquire is given), with its own
    /// client on the cluster and its clock.
    pub fn process(&self, name: String) -> Result<Arc<TestProcess>, KrabkaError> {
        let _entered = runtime()?.enter();
        let process = self.cluster.process(&name);
        let client = Client::on_test_process(&process, self.partitions)?;
        Ok(Arc::new(TestProcess { process, client }))
    }

    /// The cluster's wall time (epoch ms).
    pub fn now_millis(&self) -> i64 {
        self.cluster.now_millis()
    }

    /// Moves the clock forward by `seconds` (non-negative, else
    /// `InvalidArgument`), deadline by deadline: at each instant a member
    /// waits for on the way the members act, then to the end; returns once
    /// they are quiet there.
    pub async fn advance(&self, seconds: f64) -> Result<(), KrabkaError> {
        let d = span(seconds)?;
        let cluster = self.cluster.clone();
        run(async move {
            cluster.advance(d).await;
            Ok(())
        })
        .await
    }

    /// Moves the clock to the earliest instant any member waits for and
    /// lets the members act there: that instant (epoch ms), or nothing (the
    /// clock unmoved) when nobody waits.
    pub async fn advance_to_next_deadline(&self) -> Result<Option<i64>, KrabkaError> {
        let cluster = self.cluster.clone();
        run(async move { Ok(cluster.advance_to_next_deadline().await) }).await
    }

    /// Returns once the members have nothing left to do at the current
    /// instant (none made a call or set a timer for a few consecutive
    /// milliseconds of real time). Call it after starting an acquire or a
    /// write, before moving the clock.
    pub async fn settle(&self) -> Result<(), KrabkaError> {
        let cluster = self.cluster.clone();
        run(async move {
            cluster.settle().await;
            Ok(())
        })
        .await
    }

    /// Every guarded write the cluster committed (every topic but the state
    /// topic), in commit order, each with the token of the term that wrote
    /// it.
    pub fn guarded_writes(&self) -> Vec<GuardedWrite> {
        self.cluster
            .guarded_writes()
            .into_iter()
            .map(GuardedWrite::from)
            .collect()
    }

    /// What consumer group `group` has committed for `topic`/`partition`
    /// (the offset of the next record to read), nothing when it has
    /// committed none: the input position that guarded writes with offsets
    /// committed; a commit still pending does not count.
    pub fn committed_offset(&self, group: String, topic: String, partition: i32) -> Option<i64> {
        self.cluster.committed_offset(&group, &topic, partition)
    }

    /// What the role's transaction coordinator says now, asked by a process
    /// of the cluster's own that no fault touches.
    pub async fn describe_leadership(
        &self,
        role: String,
    ) -> Result<Arc<LeadershipStatus>, KrabkaError> {
        let cluster = self.cluster.clone();
        let status = run(async move { cluster.describe_leadership(&role).await }).await?;
        Ok(Arc::new(LeadershipStatus::from(status)))
    }
}

/// One process of a [`TestCluster`]: its client and the faults a test puts
/// it through.
#[derive(Debug, uniffi::Object)]
pub struct TestProcess {
    process: testing::TestProcess,
    client: Arc<Client>,
}

#[uniffi::export]
impl TestProcess {
    /// The name given to `TestCluster.process`.
    pub fn name(&self) -> String {
        self.process.name().to_owned()
    }

    /// What the process is doing now.
    pub fn state(&self) -> TestProcessState {
        self.process.state().into()
    }

    /// The process's client: every operation works as on Kafka (the same
    /// object each time; closing it closes the process's client for good).
    /// `ensure_state_topic` and `check_state_topic` report the state topic
    /// as existing.
    pub fn client(&self) -> Arc<Client> {
        Arc::clone(&self.client)
    }

    /// Kills the process (SIGKILL): it never answers or wakes again, so it
    /// neither renews nor resigns; for good (a later resume or heal does
    /// nothing). A call of its client that needs the cluster never returns;
    /// its client counts as closed (`close` returns at once, later calls
    /// are refused).
    pub fn crash(&self) {
        self.process.crash();
    }

    /// Stops the process (SIGSTOP): its calls and timers wait. Its clock
    /// goes on, so on `resume` what came due fires at once and a write it
    /// had in flight reaches the cluster, which fences it if another member
    /// took the role meanwhile. Nothing for a crashed process.
    pub fn pause(&self) {
        self.process.pause();
    }

    /// Resumes a paused process (SIGCONT). Nothing for a crashed process.
    pub fn resume(&self) {
        self.process.resume();
    }

    /// Cuts the process off from the cluster: each call of its client fails
    /// as transient (its timers still run) until `heal`.
    pub fn cut_off(&self) {
        self.process.cut_off();
    }

    /// Ends a cut (the same as `resume`).
    pub fn heal(&self) {
        self.process.heal();
    }

    /// Makes each call of the process fail as transient for `seconds`
    /// (non-negative, else `InvalidArgument`) of the cluster's time from
    /// now: a renewal or a guarded write that fails for a while, then goes
    /// through.
    pub fn fail_for(&self, seconds: f64) -> Result<(), KrabkaError> {
        self.process.fail_for(span(seconds)?);
        Ok(())
    }
}
