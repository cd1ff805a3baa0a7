//! `_Leadership`: the held leadership of a role, the core's handle, behind
//! the package's `Leadership` and `AsyncLeadership` classes.
//!
//! Properties read the handle directly; the operations (`write`,
//! `write_records`, `resign`, `wait`) return a [`PyPending`], so each is
//! written once for both classes. A guarded write or a resign that is
//! interrupted (Ctrl-C) or cancelled is left to finish within a grace period
//! rather than cut off halfway: a transaction is never abandoned open.
//!
//! A `_Leadership` belongs to the process that acquired it
//! ([`ProcessBound`]): in a forked child every use raises `FatalError`, and
//! it is leaked rather than dropped there (its Kafka clients' threads are
//! the parent's). In its own process it is dropped inside the runtime, so
//! the epoch's producer is destroyed on the runtime's blocking pool.

use std::sync::Arc;
use std::time::Duration;

use krabka_coordination::leadership::Leadership;
use krabka_coordination::transport::OutRecord;
use krabka_coordination_bindings::args::SecondsBound;
use krabka_coordination_bindings::blocking::BoxFuture;
use krabka_coordination_bindings::{OnInterrupt, ProcessBound};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::convert::{seconds_arg, str_field};
use crate::error::{error_to_py, IntoPyResult};
use crate::events::PyEventStream;
use crate::offsets::{consumed_offsets, query_partitions, PyCommittedOffset};
use crate::pending::{Outcome, PyPending};
use crate::records::{many_records, py_repr, PyOutRecord};
use crate::runtime::runtime;
use crate::values::{PyFencingToken, PyLease};

/// How long an interrupted or cancelled guarded write or resign may take to
/// finish before the interrupt is raised anyway.
pub const FINISH_GRACE: Duration = Duration::from_secs(10);

/// A leadership just won, not yet handed to Python.
pub struct Acquired(pub Leadership);

impl Outcome for Acquired {
    fn into_py(self: Box<Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let handle = runtime()?.handle().clone();
        Ok(Py::new(py, PyLeadership::new(self.0, handle))?.into_any())
    }

    /// Nobody took the leadership (the acquire was interrupted or cancelled
    /// after the core had won): resign it, so that a caller who gave up
    /// never leaves the role held until its lease runs out.
    fn abandon(self: Box<Self>) -> Option<BoxFuture> {
        let leadership = self.0;
        Some(Box::pin(async move {
            if let Err(e) = leadership.resign().await {
                tracing::warn!(error = %e, "resigning a leadership won after its acquire was given up");
            }
        }))
    }
}

/// An acquire with a timeout: the leadership, or `None` (Python's) when the
/// time ran out first and the member deregistered.
pub struct MaybeAcquired(pub Option<Acquired>);

impl Outcome for MaybeAcquired {
    fn into_py(self: Box<Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self.0 {
            Some(won) => Box::new(won).into_py(py),
            None => Ok(py.None()),
        }
    }

    fn abandon(self: Box<Self>) -> Option<BoxFuture> {
        self.0.and_then(|won| Box::new(won).abandon())
    }
}

/// The held leadership of a role (see the module documentation).
#[pyclass(module = "krabka_coordination._native", name = "_Leadership", frozen)]
pub struct PyLeadership {
    inner: ProcessBound<Arc<Leadership>>,
    /// The exception of the end reason, made once (so `error` is the same
    /// object every time).
    error: PyOnceLock<Py<PyAny>>,
}

impl PyLeadership {
    fn new(leadership: Leadership, handle: tokio::runtime::Handle) -> PyLeadership {
        PyLeadership::shared(Arc::new(leadership), handle)
    }

    /// The leadership of a leader loop's term (the loop keeps a handle too).
    pub fn shared(leadership: Arc<Leadership>, handle: tokio::runtime::Handle) -> PyLeadership {
        PyLeadership {
            inner: ProcessBound::new("Leadership", leadership, Some(handle)),
            error: PyOnceLock::new(),
        }
    }

    /// The core handle, or `FatalError` in a forked child.
    fn core(&self, py: Python<'_>) -> PyResult<&Arc<Leadership>> {
        self.inner.get().into_py_result(py)
    }

    fn write_pending(&self, py: Python<'_>, records: Vec<OutRecord>) -> PyResult<PyPending> {
        // Checked at this call, not when the runtime first polls: a write
        // called after `resign()` never commits, whatever runs first.
        let write = Arc::clone(self.core(py)?).write_owned(records);
        Ok(PyPending::plain(write, OnInterrupt::Finish(FINISH_GRACE)))
    }
}

#[pymethods]
impl PyLeadership {
    /// The fencing token of this term.
    #[getter]
    fn token(&self, py: Python<'_>) -> PyResult<PyFencingToken> {
        Ok(PyFencingToken(self.core(py)?.token()))
    }

    /// The role.
    #[getter]
    fn role(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.core(py)?.role().to_owned())
    }

    /// The member id.
    #[getter]
    fn member(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.core(py)?.member().to_owned())
    }

    /// The partition of `__coordination_state` that holds the role.
    #[getter]
    fn partition(&self, py: Python<'_>) -> PyResult<i32> {
        Ok(self.core(py)?.partition())
    }

    /// The last lease this member wrote.
    #[getter]
    fn lease(&self, py: Python<'_>) -> PyResult<PyLease> {
        Ok(PyLease(self.core(py)?.lease()))
    }

    /// How many renewals in a row have failed with a transient error.
    #[getter]
    fn renewal_failures(&self, py: Python<'_>) -> PyResult<u32> {
        Ok(self.core(py)?.renewal_failures())
    }

    /// Seconds of the lease left on this member's monotonic clock: what the
    /// work may still count on. Zero means the term has ended (the local
    /// deadline passed: `LeaseExpired`), and `is_held` is then false too.
    #[getter]
    fn lease_left(&self, py: Python<'_>) -> PyResult<f64> {
        Ok(self.core(py)?.lease_left().as_secs_f64())
    }

    /// True until the role ends (fenced, resigned, or a fatal error).
    #[getter]
    fn is_held(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.core(py)?.is_held())
    }

    /// Why the role ended, as an exception instance (`Fenced`, `Resigned`,
    /// `FatalError`, ...), or `None` while it is held.
    #[getter]
    fn error(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let Some(reason) = self.core(py)?.err() else {
            return Ok(None);
        };
        let exc = self
            .error
            .get_or_init(py, || error_to_py(py, &reason).into_value(py).into_any());
        Ok(Some(exc.clone_ref(py)))
    }

    /// Waits until the role ends (`True`) or `timeout` seconds pass
    /// (`False`; `None`: no limit).
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<PyPending> {
        let limit = seconds_arg(timeout, "timeout", SecondsBound::NonNegative)?;
        let done = self.core(py)?.done();
        Ok(PyPending::plain(
            async move {
                Ok(match limit {
                    None => {
                        done.await;
                        true
                    }
                    Some(d) => tokio::time::timeout(d, done).await.is_ok(),
                })
            },
            OnInterrupt::Abort,
        ))
    }

    /// A guarded write of one record: one transaction of the epoch-bound
    /// producer. A deposed leader's write raises `Fenced`.
    #[pyo3(signature = (topic, value, key=None, partition=None, headers=None))]
    fn write(
        &self,
        py: Python<'_>,
        topic: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        key: Option<&Bound<'_, PyAny>>,
        partition: Option<&Bound<'_, PyAny>>,
        headers: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyPending> {
        let record = PyOutRecord::convert(topic, value, key, partition, headers)?;
        self.write_pending(py, vec![record.0])
    }

    /// A guarded write of several records in one transaction: all of them
    /// become visible, or (fenced) none.
    fn write_records(&self, py: Python<'_>, records: &Bound<'_, PyAny>) -> PyResult<PyPending> {
        let records = many_records(records)?;
        self.write_pending(py, records)
    }

    /// A guarded write of `records` (an iterable of `OutRecord`, possibly
    /// empty) that commits `offsets` (a `ConsumedOffsets`: the input they
    /// were made from) for its consumer group in the same transaction of
    /// this term's epoch: both become visible, or neither. A deposed
    /// leader's write raises `Fenced` and the group's offsets do not move.
    /// Bad offsets (an empty group or topic, a negative partition or
    /// offset, a partition named twice) raise `InvalidArgumentError` naming
    /// the value, nothing sent; after `resign()`, `Resigned`.
    fn write_with_offsets(
        &self,
        py: Python<'_>,
        records: &Bound<'_, PyAny>,
        offsets: &Bound<'_, PyAny>,
    ) -> PyResult<PyPending> {
        let records = many_records(records)?;
        let offsets = consumed_offsets(offsets)?;
        // Checked at this call (a resign, the offsets), as `write` is.
        let write = Arc::clone(self.core(py)?).write_with_offsets_owned(records, offsets);
        Ok(PyPending::plain(write, OnInterrupt::Finish(FINISH_GRACE)))
    }

    /// What consumer group `group` has committed for `partitions` (a dict
    /// of topic to partitions, or (topic, partitions) pairs), as a list of
    /// `CommittedOffset` in the order asked: where a new leader resumes.
    /// Only offsets of decided transactions are returned (read_committed);
    /// a pending commit is waited for at most one lease duration, then
    /// `TransientError`. `offset` is `None` for a partition the group
    /// committed nothing for. An empty group or topic, a negative partition
    /// or a partition named twice raises `InvalidArgumentError`.
    fn committed_offsets(
        &self,
        py: Python<'_>,
        group: &Bound<'_, PyAny>,
        partitions: &Bound<'_, PyAny>,
    ) -> PyResult<PyPending> {
        let group = str_field(group, "group")?;
        let partitions = query_partitions(partitions)?;
        let leadership = Arc::clone(self.core(py)?);
        Ok(PyPending::plain(
            async move {
                let found = leadership.committed_offsets(&group, &partitions).await?;
                Ok(found.into_iter().map(PyCommittedOffset).collect::<Vec<_>>())
            },
            OnInterrupt::Abort,
        ))
    }

    /// Gives the role up: the core stops renewing, supersedes the token,
    /// clears the lease and deregisters. Idempotent. From this call on,
    /// every write called on this leadership fails with `Resigned`.
    fn resign(&self, py: Python<'_>) -> PyResult<PyPending> {
        let resign = Arc::clone(self.core(py)?).resign_owned();
        Ok(PyPending::plain(resign, OnInterrupt::Finish(FINISH_GRACE)))
    }

    /// The member's events from now on, ending with the term.
    fn events(&self, py: Python<'_>) -> PyResult<PyEventStream> {
        let l = self.core(py)?;
        Ok(PyEventStream::subscribe(l, runtime()?.handle().clone()))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let l = self.core(py)?;
        Ok(format!(
            "role={} member={} token={} held={}",
            py_repr(py, l.role())?,
            py_repr(py, l.member())?,
            l.token(),
            if l.is_held() { "True" } else { "False" }
        ))
    }
}
