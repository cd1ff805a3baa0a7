//! `_TestCluster`, `_TestProcess` and `GuardedWrite`: the core's test kit
//! (`krabka_coordination::testing`) behind the package's
//! `krabka_coordination.testing`.
//!
//! A process's client is a `_Client` like any other (the shared crate's
//! `KafkaClient::on_test_process`), so the package's `Client` and
//! `AsyncClient` wrap it unchanged. The cluster's time operations
//! (`advance`, `advance_to_next_deadline`, `settle`) and its
//! `describe_leadership` return a [`PyPending`]: run on the package's
//! multi-thread runtime, where the members' tasks run, blocking (the GIL
//! released) or awaited. The core's `settle` sees the multi-thread flavour
//! and waits until the members are quiet.

use krabka_coordination::testing::{TestCluster, TestProcess};
use krabka_coordination::transport::memory::{CommittedWrite, ProcessState};
use std::time::Duration;

use krabka_coordination_bindings::args::{SecondsBound, SECONDS_TYPE};
use krabka_coordination_bindings::ArgError;
use krabka_coordination_bindings::{options, KafkaClient, OnInterrupt};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::client::PyClient;
use crate::convert::{int_field, int_value, seconds_arg, str_field, type_name};
use crate::error::{arg_error, IntoPyResult};
use crate::pending::PyPending;
use crate::records::py_repr;
use crate::reports::PyLeadershipStatus;
use crate::runtime::runtime;
use crate::values::PyFencingToken;

/// A span of the cluster's time: a non-negative number of seconds or a
/// `timedelta` (`None` is refused as of the wrong type).
fn span(seconds: &Bound<'_, PyAny>) -> PyResult<Duration> {
    seconds_arg(Some(seconds), "seconds", SecondsBound::NonNegative)?.ok_or_else(|| {
        arg_error(
            seconds.py(),
            ArgError::wrong_type("seconds", SECONDS_TYPE, &type_name(seconds)),
        )
    })
}

/// An in-memory cluster and its manual clock (the core's `TestCluster`).
#[pyclass(module = "krabka_coordination._native", name = "_TestCluster", frozen)]
pub struct PyTestCluster {
    cluster: TestCluster,
}

#[pymethods]
impl PyTestCluster {
    /// A cluster whose state topic has `partitions` partitions (16 when
    /// `None`); below 1 raises `InvalidArgumentError`.
    #[new]
    #[pyo3(signature = (partitions=None))]
    fn new(py: Python<'_>, partitions: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let cluster = match int_value(partitions, "partitions", 1, i32::MAX.into())? {
            None => TestCluster::new(),
            Some(n) => options::partitions(n)
                .map_err(krabka_coordination::Error::from)
                .and_then(TestCluster::with_partitions)
                .into_py_result(py)?,
        };
        Ok(PyTestCluster { cluster })
    }

    /// A new process named `name`.
    fn process(&self, name: &Bound<'_, PyAny>) -> PyResult<PyTestProcess> {
        let name = str_field(name, "name")?;
        let _rt = runtime()?.enter();
        Ok(PyTestProcess {
            process: self.cluster.process(&name),
        })
    }

    /// The cluster's wall time (epoch ms).
    #[getter]
    fn now_millis(&self) -> i64 {
        self.cluster.now_millis()
    }

    /// Moves the clock forward by `seconds` (a non-negative number or a
    /// `timedelta`), deadline by deadline, letting the members act at each.
    fn advance(&self, seconds: &Bound<'_, PyAny>) -> PyResult<PyPending> {
        let d = span(seconds)?;
        let cluster = self.cluster.clone();
        Ok(PyPending::plain(
            async move {
                cluster.advance(d).await;
                Ok(())
            },
            OnInterrupt::Abort,
        ))
    }

    /// Moves the clock to the earliest deadline a member waits for; yields
    /// that instant (epoch ms), or `None` when nobody waits.
    fn advance_to_next_deadline(&self) -> PyPending {
        let cluster = self.cluster.clone();
        PyPending::plain(
            async move { Ok(cluster.advance_to_next_deadline().await) },
            OnInterrupt::Abort,
        )
    }

    /// Completes once the members have nothing left to do at this instant.
    fn settle(&self) -> PyPending {
        let cluster = self.cluster.clone();
        PyPending::plain(
            async move {
                cluster.settle().await;
                Ok(())
            },
            OnInterrupt::Abort,
        )
    }

    /// Every guarded write the cluster committed, in commit order.
    fn guarded_writes(&self) -> Vec<PyGuardedWrite> {
        self.cluster
            .guarded_writes()
            .into_iter()
            .map(PyGuardedWrite)
            .collect()
    }

    /// What consumer group `group` has committed for `topic` / `partition`
    /// (the offset of the next record to read), `None` when nothing: the
    /// input position that guarded writes with offsets committed; a commit
    /// still pending does not count.
    fn committed_offset(
        &self,
        group: &Bound<'_, PyAny>,
        topic: &Bound<'_, PyAny>,
        partition: &Bound<'_, PyAny>,
    ) -> PyResult<Option<i64>> {
        let group = str_field(group, "group")?;
        let topic = str_field(topic, "topic")?;
        let partition = int_field::<i32>(partition, "partition")?;
        Ok(self.cluster.committed_offset(&group, &topic, partition))
    }

    /// Sets the coordinator's current token of `role` (the core's
    /// `MemoryCluster::set_epoch`): the next mint bumps its epoch, or
    /// rotates to the cluster's next producer id when the epoch is
    /// exhausted.
    fn set_epoch(&self, role: &Bound<'_, PyAny>, token: PyRef<'_, PyFencingToken>) -> PyResult<()> {
        let role = str_field(role, "role")?;
        self.cluster.memory().set_epoch(&role, token.0);
        Ok(())
    }

    /// What the role's transaction coordinator says now.
    fn describe_leadership(&self, role: &Bound<'_, PyAny>) -> PyResult<PyPending> {
        let role = str_field(role, "role")?;
        let cluster = self.cluster.clone();
        Ok(PyPending::plain(
            async move {
                cluster
                    .describe_leadership(&role)
                    .await
                    .map(PyLeadershipStatus)
            },
            OnInterrupt::Abort,
        ))
    }
}

/// One process of a test cluster (the core's `TestProcess`).
#[pyclass(module = "krabka_coordination._native", name = "_TestProcess", frozen)]
pub struct PyTestProcess {
    process: TestProcess,
}

#[pymethods]
impl PyTestProcess {
    /// The process's name.
    #[getter]
    fn name(&self) -> &str {
        self.process.name()
    }

    /// `"running"`, `"cut_off"`, `"paused"` or `"crashed"`.
    #[getter]
    fn state(&self) -> &'static str {
        match self.process.state() {
            ProcessState::Running => "running",
            ProcessState::CutOff => "cut_off",
            ProcessState::Paused => "paused",
            ProcessState::Crashed => "crashed",
        }
    }

    /// A `_Client` on the process's core client (every call returns one on
    /// the same core client: closing one closes them all).
    fn client(&self) -> PyResult<PyClient> {
        PyClient::on(KafkaClient::on_test_process(&self.process))
    }

    /// SIGKILL: no renewal, no resign, for good.
    fn crash(&self) {
        self.process.crash();
    }

    /// SIGSTOP: calls and timers wait until `resume`.
    fn pause(&self) {
        self.process.pause();
    }

    /// SIGCONT; nothing for a crashed process.
    fn resume(&self) {
        self.process.resume();
    }

    /// Each call fails as transient until `heal`.
    fn cut_off(&self) {
        self.process.cut_off();
    }

    /// Ends a cut.
    fn heal(&self) {
        self.process.heal();
    }

    /// Each call fails as transient for `seconds` of the cluster's time.
    fn fail_for(&self, seconds: &Bound<'_, PyAny>) -> PyResult<()> {
        let d = span(seconds)?;
        self.process.fail_for(d);
        Ok(())
    }
}

/// One guarded write the test cluster committed.
#[pyclass(
    module = "krabka_coordination.testing",
    name = "GuardedWrite",
    frozen,
    eq
)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyGuardedWrite(pub CommittedWrite);

#[pymethods]
impl PyGuardedWrite {
    /// Its place in the cluster's commit order (from 0, counting the state
    /// topic's records too).
    #[getter]
    fn commit(&self) -> u64 {
        self.0.commit
    }

    /// The topic.
    #[getter]
    fn topic(&self) -> &str {
        &self.0.topic
    }

    /// The partition.
    #[getter]
    fn partition(&self) -> i32 {
        self.0.partition
    }

    /// The offset in the partition.
    #[getter]
    fn offset(&self) -> i64 {
        self.0.offset
    }

    /// The key (`b""` when the record had none).
    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.key)
    }

    /// The value; `None` for a tombstone.
    #[getter]
    fn value<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.0.value.as_deref().map(|v| PyBytes::new(py, v))
    }

    /// The role whose term wrote it.
    #[getter]
    fn role(&self) -> &str {
        self.0.role.as_deref().unwrap_or_default()
    }

    /// The token of that term.
    #[getter]
    fn token(&self) -> PyFencingToken {
        PyFencingToken(self.0.token.unwrap_or(krabka_coordination::NO_EPOCH))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let token = Bound::new(py, self.token())?.repr()?;
        Ok(format!(
            "GuardedWrite(topic={}, partition={}, offset={}, role={}, token={token})",
            py_repr(py, &self.0.topic)?,
            self.0.partition,
            self.0.offset,
            py_repr(py, self.role())?,
        ))
    }
}
