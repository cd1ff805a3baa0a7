//! The leadership API: acquire, hold, write, resign and describe, on a real
//! Kafka cluster through the core's Kafka transport.
//!
//! Every operation is the core's: [`acquire_leadership`] builds a
//! `KafkaTransport` from the `kafka` dict and calls the core's
//! `acquire_leadership`; a [`PyLeadership`] wraps the core's `Leadership`
//! handle; the describe functions call `describe_leadership` and
//! `describe_role_state`; [`ensure_state_topic`] calls the transport's
//! `ensure_state_topic`. The binding converts arguments and results and maps
//! errors through `error.rs`; it adds no election, lease or Kafka logic.
//!
//! # Two calling conventions, one core
//!
//! Each operation has an asyncio form (an awaitable of the running event
//! loop, [`crate::runtime::future_into_py`]) and a blocking form with the
//! suffix `_blocking` ([`crate::runtime::block_on`]: the GIL is released
//! while it waits and Ctrl-C interrupts it).
//!
//! # Cancelling an acquire
//!
//! A waiting acquire is stopped through the core's cancellation token, not by
//! dropping its future: cancelling the asyncio future (or Ctrl-C in the
//! blocking form) fires the token, and the core then deregisters the member
//! and drops any producer it minted before the call ends. In the blocking
//! form the call waits for that (at most [`ACQUIRE_GRACE`]) before raising
//! `KeyboardInterrupt`. A leadership won in the very instant of the cancel is
//! resigned at once, so a cancelled acquire never leaves the role held.
//!
//! # Processes
//!
//! A `Leadership` belongs to the process that acquired it: its producers'
//! threads are not copied by `fork()`. In a forked child every operation on
//! an inherited `Leadership` raises `FatalError`, and dropping it there
//! leaves the parent's clients alone; the child acquires its own.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use krabka_coordination as core;
use krabka_coordination::leadership::{self as cl, LeadershipOptions};
use krabka_coordination::transport::kafka::{self as ck, KafkaConfig, KafkaTransport};
use krabka_coordination::transport::{OutRecord, Transport};
use krabka_coordination::Error;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PyString};

use crate::convert::{
    headers, i32_arg, int_field, kafka_config, opt_bytes, seconds_arg, str_field,
};
use crate::error::{error_to_py, to_py_err, IntoPyResult};
use crate::runtime::{block_on, block_on_graceful, future_into_py, future_into_py_graceful};
use crate::values::{PyFencingToken, PyLease};

/// How long a blocking acquire interrupted by Ctrl-C waits for the core to
/// deregister the member before it raises `KeyboardInterrupt` anyway.
pub const ACQUIRE_GRACE: Duration = Duration::from_secs(10);

/// Python's `repr()` of a string.
fn py_repr(py: Python<'_>, s: &str) -> PyResult<String> {
    Ok(PyString::new(py, s).repr()?.to_string())
}

// ------------------------------------------------------------------ acquire

/// The arguments of an acquire, converted: what the future needs.
struct Acquire {
    config: KafkaConfig,
    role: String,
    member: String,
    options: LeadershipOptions,
}

impl Acquire {
    #[allow(clippy::too_many_arguments)]
    fn convert(
        py: Python<'_>,
        kafka: &Bound<'_, PyAny>,
        role: &Bound<'_, PyAny>,
        member: &Bound<'_, PyAny>,
        partitions: Option<&Bound<'_, PyAny>>,
        lease_duration: Option<&Bound<'_, PyAny>>,
        renew_interval: Option<&Bound<'_, PyAny>>,
        challenge_stagger: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Acquire> {
        // Left-out options keep the core's defaults.
        let d = core::ElectionOptions::default();
        let options = LeadershipOptions::default()
            .with_partitions(i32_arg(partitions, "partitions", d.partitions)?)
            .with_lease_duration(seconds_arg(
                lease_duration,
                "lease_duration",
                d.lease_duration,
            )?)
            .with_renew_interval(seconds_arg(
                renew_interval,
                "renew_interval",
                d.renew_interval,
            )?)
            .with_challenge_stagger(seconds_arg(
                challenge_stagger,
                "challenge_stagger",
                d.challenge_stagger,
            )?);
        // The core checks the options (and names the values) before any I/O;
        // doing it here too raises at the call rather than at the await.
        options.validate().into_py_result(py)?;
        Ok(Acquire {
            config: kafka_config(kafka)?,
            role: str_field(role, "role")?,
            member: str_field(member, "member")?,
            options,
        })
    }

    /// The core's acquire on a new Kafka transport of this member. When the
    /// cancellation token fired while the leadership was being won, it is
    /// resigned at once and the call ends with `Cancelled`.
    async fn run(self) -> Result<cl::Leadership, Error> {
        let Acquire {
            config,
            role,
            member,
            options,
        } = self;
        let cancel = options.cancel.clone();
        let transport: Arc<dyn Transport> =
            Arc::new(KafkaTransport::new(config, Some(member.as_str()))?);
        let leadership = cl::acquire_leadership(transport, &role, &member, options).await?;
        if cancel.is_cancelled() {
            // The caller stopped waiting: hand the role over rather than
            // hold it until the lease runs out.
            let _ = leadership.resign().await;
            return Err(Error::Cancelled);
        }
        Ok(leadership)
    }
}

/// Acquires the leadership of `role` for `member` (asyncio form).
///
/// Registers the member, waits for its turn, mints the epoch and writes the
/// first lease; the awaitable's result is the held [`PyLeadership`].
/// Cancelling the awaitable deregisters the member. The defaults are the
/// core's (`ElectionOptions::default()`).
#[pyfunction]
#[pyo3(
    signature = (kafka, role, member, *, partitions=None, lease_duration=None, renew_interval=None, challenge_stagger=None),
    text_signature = "(kafka, role, member, *, partitions=16, lease_duration=30.0, renew_interval=10.0, challenge_stagger=5.0)"
)]
#[allow(clippy::too_many_arguments)]
pub fn acquire_leadership<'py>(
    py: Python<'py>,
    kafka: &Bound<'py, PyAny>,
    role: &Bound<'py, PyAny>,
    member: &Bound<'py, PyAny>,
    partitions: Option<&Bound<'py, PyAny>>,
    lease_duration: Option<&Bound<'py, PyAny>>,
    renew_interval: Option<&Bound<'py, PyAny>>,
    challenge_stagger: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let acquire = Acquire::convert(
        py,
        kafka,
        role,
        member,
        partitions,
        lease_duration,
        renew_interval,
        challenge_stagger,
    )?;
    let cancel = acquire.options.cancel.clone();
    future_into_py_graceful(
        py,
        async move { acquire.run().await.map(PyLeadership::new) },
        move || cancel.cancel(),
    )
}

/// Acquires the leadership of `role` for `member` (blocking form). Ctrl-C
/// stops the wait; the member is deregistered before `KeyboardInterrupt`
/// is raised (within [`ACQUIRE_GRACE`]).
#[pyfunction]
#[pyo3(
    signature = (kafka, role, member, *, partitions=None, lease_duration=None, renew_interval=None, challenge_stagger=None),
    text_signature = "(kafka, role, member, *, partitions=16, lease_duration=30.0, renew_interval=10.0, challenge_stagger=5.0)"
)]
#[allow(clippy::too_many_arguments)]
pub fn acquire_leadership_blocking<'py>(
    py: Python<'py>,
    kafka: &Bound<'py, PyAny>,
    role: &Bound<'py, PyAny>,
    member: &Bound<'py, PyAny>,
    partitions: Option<&Bound<'py, PyAny>>,
    lease_duration: Option<&Bound<'py, PyAny>>,
    renew_interval: Option<&Bound<'py, PyAny>>,
    challenge_stagger: Option<&Bound<'py, PyAny>>,
) -> PyResult<PyLeadership> {
    let acquire = Acquire::convert(
        py,
        kafka,
        role,
        member,
        partitions,
        lease_duration,
        renew_interval,
        challenge_stagger,
    )?;
    let cancel = acquire.options.cancel.clone();
    let outcome = block_on_graceful(
        py,
        async move { acquire.run().await.map(PyLeadership::new) },
        move || cancel.cancel(),
        ACQUIRE_GRACE,
    )?;
    outcome.into_py_result(py)
}

// --------------------------------------------------------------- leadership

/// The held leadership of a role: the core's `Leadership` handle.
///
/// The core renews the lease in the background. `done()` / `wait()` tell when
/// the role ended and `error` says why (`Fenced`, `Resigned`, `FatalError`).
/// Stop the role's work then. Garbage collection of a held `Leadership` stops
/// the renewals without resigning (standbys take over at the lease deadline);
/// `resign()` or the `with` / `async with` exit hands over at once.
#[pyclass(module = "krabka_coordination", name = "Leadership", frozen)]
pub struct PyLeadership {
    inner: Option<Arc<cl::Leadership>>,
    /// The process that acquired it.
    pid: u32,
    /// The runtime the core's tasks run on, entered to drop the handle.
    handle: Option<tokio::runtime::Handle>,
    /// The exception of the end reason, made once (so `error` is the same
    /// object every time).
    error: PyOnceLock<Py<PyAny>>,
}

impl PyLeadership {
    /// Wraps a core handle; must run on the runtime (it records its handle).
    fn new(leadership: cl::Leadership) -> PyLeadership {
        PyLeadership {
            inner: Some(Arc::new(leadership)),
            pid: std::process::id(),
            handle: tokio::runtime::Handle::try_current().ok(),
            error: PyOnceLock::new(),
        }
    }

    /// The core handle, or `FatalError` in a forked child.
    fn core(&self, py: Python<'_>) -> PyResult<&Arc<cl::Leadership>> {
        let pid = std::process::id();
        match &self.inner {
            Some(l) if self.pid == pid => Ok(l),
            _ => Err(to_py_err(
                py,
                Error::fatal(
                    format!("using a Leadership in process {pid}"),
                    format!(
                        "it was acquired by process {} and belongs to it; a forked child must acquire its own",
                        self.pid
                    ),
                ),
            )),
        }
    }
}

impl Drop for PyLeadership {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        if self.pid != std::process::id() {
            // Inherited through fork(): its clients' threads are the
            // parent's; touching them here would hang.
            std::mem::forget(inner);
            return;
        }
        // Dropping the last handle stops the renewals; the transport then
        // hands its clients to the runtime's blocking pool, never this thread.
        match &self.handle {
            Some(handle) => {
                let _entered = handle.enter();
                drop(inner);
            }
            None => drop(inner),
        }
    }
}

/// The records of one guarded write.
fn one_record(
    topic: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
    key: Option<&Bound<'_, PyAny>>,
    partition: Option<&Bound<'_, PyAny>>,
    hdrs: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<OutRecord>> {
    Ok(vec![
        PyOutRecord::convert(topic, value, key, partition, hdrs)?.0,
    ])
}

fn many_records(records: &Bound<'_, PyAny>) -> PyResult<Vec<OutRecord>> {
    let iter = records
        .try_iter()
        .map_err(|_| PyTypeError::new_err("records must be an iterable of OutRecord".to_owned()))?;
    let mut out = Vec::new();
    for item in iter {
        let item = item?;
        let rec = item.cast::<PyOutRecord>().map_err(|_| {
            PyTypeError::new_err(format!(
                "records must hold OutRecord values, got {}",
                item.get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })?;
        out.push(rec.get().0.clone());
    }
    Ok(out)
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

    /// True until the role ends (fenced, resigned, or a fatal error).
    #[getter]
    fn is_held(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.core(py)?.is_held())
    }

    /// Why the role ended, as an exception instance (`Fenced`, `Resigned`,
    /// `FatalError`, ...), or `None` while it is held.
    #[getter]
    fn error(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let core = self.core(py)?;
        let Some(reason) = core.err() else {
            return Ok(None);
        };
        let exc = self
            .error
            .get_or_init(py, || error_to_py(py, &reason).into_value(py).into_any());
        Ok(Some(exc.clone_ref(py)))
    }

    /// An awaitable that completes (with `None`) when the role ends.
    fn done<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let done = self.core(py)?.done();
        future_into_py(py, async move {
            done.await;
            Ok::<(), PyErr>(())
        })
    }

    /// Blocks until the role ends or `timeout` seconds pass (`None`: no
    /// limit). True when the role ended. The GIL is released while waiting
    /// and Ctrl-C interrupts.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        let core = self.core(py)?;
        let limit = match timeout {
            Some(t) => Some(seconds_arg(Some(t), "timeout", Duration::ZERO)?),
            None => None,
        };
        if !core.is_held() {
            return Ok(true);
        }
        if limit.is_some_and(|d| d.is_zero()) {
            return Ok(false);
        }
        let done = core.done();
        block_on(py, async move {
            match limit {
                None => {
                    done.await;
                    true
                }
                Some(d) => tokio::time::timeout(d, done).await.is_ok(),
            }
        })
    }

    /// A guarded write of one record (asyncio form): one transaction of the
    /// epoch-bound producer. A deposed leader's write raises `Fenced`.
    #[pyo3(signature = (topic, value, key=None, partition=None, headers=None))]
    fn write<'py>(
        &self,
        py: Python<'py>,
        topic: &Bound<'py, PyAny>,
        value: &Bound<'py, PyAny>,
        key: Option<&Bound<'py, PyAny>>,
        partition: Option<&Bound<'py, PyAny>>,
        headers: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let l = self.core(py)?.clone();
        let records = one_record(topic, value, key, partition, headers)?;
        future_into_py(py, async move { l.write(records).await })
    }

    /// A guarded write of one record (blocking form).
    #[pyo3(signature = (topic, value, key=None, partition=None, headers=None))]
    fn write_blocking(
        &self,
        py: Python<'_>,
        topic: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        key: Option<&Bound<'_, PyAny>>,
        partition: Option<&Bound<'_, PyAny>>,
        headers: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let l = self.core(py)?.clone();
        let records = one_record(topic, value, key, partition, headers)?;
        block_on(py, async move { l.write(records).await })?.into_py_result(py)
    }

    /// A guarded write of several records in one transaction (asyncio form):
    /// all of them become visible, or (fenced) none.
    fn write_records<'py>(
        &self,
        py: Python<'py>,
        records: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let l = self.core(py)?.clone();
        let records = many_records(records)?;
        future_into_py(py, async move { l.write(records).await })
    }

    /// A guarded write of several records in one transaction (blocking form).
    fn write_records_blocking(&self, py: Python<'_>, records: &Bound<'_, PyAny>) -> PyResult<()> {
        let l = self.core(py)?.clone();
        let records = many_records(records)?;
        block_on(py, async move { l.write(records).await })?.into_py_result(py)
    }

    /// Gives the role up (asyncio form): the core stops renewing, supersedes
    /// the token, clears the lease and deregisters. Idempotent.
    fn resign<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let l = self.core(py)?.clone();
        future_into_py(py, async move { l.resign().await })
    }

    /// Gives the role up (blocking form).
    fn resign_blocking(&self, py: Python<'_>) -> PyResult<()> {
        let l = self.core(py)?.clone();
        block_on(py, async move { l.resign().await })?.into_py_result(py)
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// Resigns (blocking); returns `None`, so the exception of the block is
    /// never suppressed.
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.resign_blocking(py)
    }

    fn __aenter__<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let future = py
            .import("asyncio")?
            .call_method0("get_running_loop")?
            .call_method0("create_future")?;
        future.call_method1("set_result", (slf,))?;
        Ok(future)
    }

    /// Resigns (asyncio); the awaitable's result is `None`, so the exception
    /// of the block is never suppressed.
    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        _exc_type: Option<&Bound<'py, PyAny>>,
        _exc: Option<&Bound<'py, PyAny>>,
        _tb: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.resign(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let l = self.core(py)?;
        Ok(format!(
            "<Leadership role={} member={} token={} held={}>",
            py_repr(py, l.role())?,
            py_repr(py, l.member())?,
            l.token(),
            if l.is_held() { "True" } else { "False" }
        ))
    }
}

// --------------------------------------------------------------- OutRecord

/// One record of a guarded write.
#[pyclass(module = "krabka_coordination", name = "OutRecord", frozen, eq)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyOutRecord(pub OutRecord);

impl PyOutRecord {
    fn convert(
        topic: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        key: Option<&Bound<'_, PyAny>>,
        partition: Option<&Bound<'_, PyAny>>,
        hdrs: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyOutRecord> {
        let partition = match partition {
            Some(p) if !p.is_none() => Some(int_field::<i32>(p, "partition")?),
            _ => None,
        };
        Ok(PyOutRecord(OutRecord {
            topic: str_field(topic, "topic")?,
            partition,
            key: opt_bytes(key, "key")?,
            value: opt_bytes(Some(value), "value")?,
            headers: headers(hdrs)?,
        }))
    }
}

#[pymethods]
impl PyOutRecord {
    /// A record for `topic`: `value` (bytes, or `None` for a tombstone), an
    /// optional `key`, an optional `partition` (else the producer's
    /// partitioner chooses) and `headers` (a dict or (name, bytes) pairs).
    #[new]
    #[pyo3(signature = (topic, value, key=None, partition=None, headers=None))]
    fn new(
        topic: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        key: Option<&Bound<'_, PyAny>>,
        partition: Option<&Bound<'_, PyAny>>,
        headers: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        PyOutRecord::convert(topic, value, key, partition, headers)
    }

    /// The topic.
    #[getter]
    fn topic(&self) -> &str {
        &self.0.topic
    }

    /// The value (`None`: a tombstone).
    #[getter]
    fn value(&self) -> Option<&[u8]> {
        self.0.value.as_deref()
    }

    /// The key.
    #[getter]
    fn key(&self) -> Option<&[u8]> {
        self.0.key.as_deref()
    }

    /// The partition, or `None` for the producer's partitioner.
    #[getter]
    fn partition(&self) -> Option<i32> {
        self.0.partition
    }

    /// The headers as (name, value) pairs.
    #[getter]
    fn headers(&self) -> Vec<(String, &[u8])> {
        self.0
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.as_slice()))
            .collect()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let bytes = |b: &Option<Vec<u8>>| -> PyResult<String> {
            match b {
                None => Ok("None".to_owned()),
                Some(b) => Ok(pyo3::types::PyBytes::new(py, b).repr()?.to_string()),
            }
        };
        Ok(format!(
            "OutRecord(topic={}, value={}, key={}, partition={}, headers={})",
            py_repr(py, &self.0.topic)?,
            bytes(&self.0.value)?,
            bytes(&self.0.key)?,
            self.0
                .partition
                .map_or_else(|| "None".to_owned(), |p| p.to_string()),
            PyList::new(py, self.headers())?.repr()?
        ))
    }
}

// ----------------------------------------------------------------- describe

/// The authority of a role as its transaction coordinator reports it.
#[pyclass(module = "krabka_coordination", name = "LeadershipStatus", frozen, eq)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PyLeadershipStatus(pub cl::LeadershipStatus);

#[pymethods]
impl PyLeadershipStatus {
    /// The newest token the coordinator minted for the role (`NO_EPOCH` when
    /// no member has taken it).
    #[getter]
    fn token(&self) -> PyFencingToken {
        PyFencingToken(self.0.token)
    }

    /// True when `token` is the role's current token: its holder is
    /// authoritative. `NO_EPOCH` never is.
    fn authoritative(&self, token: PyRef<'_, PyFencingToken>) -> bool {
        self.0.authoritative(&token.0)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let token = Bound::new(py, PyFencingToken(self.0.token))?.repr()?;
        Ok(format!("LeadershipStatus(token={token})"))
    }
}

/// One member of a role's roster.
#[pyclass(module = "krabka_coordination", name = "RosterEntry", frozen, eq)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyRosterEntry {
    entry: core::RosterEntry,
    rank: usize,
}

#[pymethods]
impl PyRosterEntry {
    /// The member id.
    #[getter]
    fn member(&self) -> &str {
        &self.entry.member
    }

    /// The member's place in the roster (0 first): the order of its
    /// registration.
    #[getter]
    fn rank(&self) -> usize {
        self.rank
    }

    /// The offset of the member's latest registration record.
    #[getter]
    fn offset(&self) -> i64 {
        self.entry.offset
    }

    /// When the member registered, in epoch milliseconds of its clock.
    #[getter]
    fn registered_at(&self) -> i64 {
        self.entry.registered_at
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "RosterEntry(member={}, rank={}, offset={}, registered_at={})",
            py_repr(py, &self.entry.member)?,
            self.rank,
            self.entry.offset,
            self.entry.registered_at
        ))
    }
}

/// The roster (in rank order) and the lease of a role.
#[pyclass(module = "krabka_coordination", name = "RoleStateReport", frozen)]
#[derive(Debug, Clone)]
pub struct PyRoleStateReport(pub cl::RoleStateReport);

#[pymethods]
impl PyRoleStateReport {
    /// The role.
    #[getter]
    fn role(&self) -> &str {
        &self.0.role
    }

    /// The partition of `__coordination_state` that holds the role.
    #[getter]
    fn partition(&self) -> i32 {
        self.0.partition
    }

    /// The roster in rank order (`roster[i].rank == i`).
    #[getter]
    fn roster(&self) -> Vec<PyRosterEntry> {
        self.0
            .roster
            .iter()
            .enumerate()
            .map(|(rank, entry)| PyRosterEntry {
                entry: entry.clone(),
                rank,
            })
            .collect()
    }

    /// The current lease, or `None` (never taken, or cleared by a resign).
    #[getter]
    fn lease(&self) -> Option<PyLease> {
        self.0.lease.clone().map(PyLease)
    }

    /// The member ids in rank order.
    #[getter]
    fn members(&self) -> Vec<String> {
        self.0.roster.iter().map(|e| e.member.clone()).collect()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let lease = match &self.0.lease {
            Some(l) => Bound::new(py, PyLease(l.clone()))?.repr()?.to_string(),
            None => "None".to_owned(),
        };
        Ok(format!(
            "RoleStateReport(role={}, partition={}, members={}, lease={})",
            py_repr(py, &self.0.role)?,
            self.0.partition,
            PyList::new(py, self.members())?.repr()?,
            lease
        ))
    }
}

/// The transports that describe calls use, one per distinct Kafka
/// configuration, kept for the life of the process: the describe client
/// caches each role's transaction coordinator and its connection, so a
/// `describe_leadership` costs one request once the coordinator is known.
/// Tagged with the pid that built them; a forked child builds its own.
static DESCRIBERS: std::sync::Mutex<Option<(u32, Describers)>> = std::sync::Mutex::new(None);

/// Describe transports by their configuration.
type Describers = HashMap<String, Arc<KafkaTransport>>;

fn describer(config: KafkaConfig) -> Result<Arc<KafkaTransport>, Error> {
    let mut settings: Vec<_> = config.settings().collect();
    settings.sort_unstable();
    let key = format!(
        "{}|{}|{settings:?}",
        config.bootstrap(),
        config.state_topic()
    );
    let pid = std::process::id();
    let mut guard = DESCRIBERS.lock().unwrap_or_else(|e| e.into_inner());
    if guard.as_ref().is_some_and(|(p, _)| *p != pid) {
        // The parent's clients have no threads in this child: never drop
        // them here (librdkafka would wait for threads that do not exist).
        if let Some((_, inherited)) = guard.take() {
            std::mem::forget(inherited);
        }
    }
    let (_, cache) = guard.get_or_insert_with(|| (pid, HashMap::new()));
    if let Some(t) = cache.get(&key) {
        return Ok(t.clone());
    }
    let transport = Arc::new(KafkaTransport::new(config, None)?);
    cache.insert(key, transport.clone());
    Ok(transport)
}

/// DescribeTransactions-client requests sent so far by the describe transport
/// of `kafka` (0 before its first describe). For tests of the request cost.
#[pyfunction]
pub fn _describe_requests(py: Python<'_>, kafka: &Bound<'_, PyAny>) -> PyResult<u64> {
    let config = kafka_config(kafka)?;
    let t = describer(config).map_err(|e| to_py_err(py, e))?;
    Ok(t.describe_client().requests_sent())
}

async fn describe_leadership_core(
    config: KafkaConfig,
    role: String,
) -> Result<PyLeadershipStatus, Error> {
    let transport = describer(config)?;
    let status = cl::describe_leadership(transport.as_ref(), &role).await?;
    Ok(PyLeadershipStatus(status))
}

async fn describe_role_state_core(
    config: KafkaConfig,
    role: String,
    partitions: i32,
) -> Result<PyRoleStateReport, Error> {
    let transport = describer(config)?;
    let report = cl::describe_role_state(transport.as_ref(), &role, partitions).await?;
    Ok(PyRoleStateReport(report))
}

/// Asks the role's transaction coordinator for its current token (asyncio
/// form): one DescribeTransactions request once the coordinator is known.
#[pyfunction]
pub fn describe_leadership<'py>(
    py: Python<'py>,
    kafka: &Bound<'py, PyAny>,
    role: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let config = kafka_config(kafka)?;
    let role = str_field(role, "role")?;
    future_into_py(py, describe_leadership_core(config, role))
}

/// Asks the role's transaction coordinator for its current token (blocking form).
#[pyfunction]
pub fn describe_leadership_blocking(
    py: Python<'_>,
    kafka: &Bound<'_, PyAny>,
    role: &Bound<'_, PyAny>,
) -> PyResult<PyLeadershipStatus> {
    let config = kafka_config(kafka)?;
    let role = str_field(role, "role")?;
    block_on(py, describe_leadership_core(config, role))?.into_py_result(py)
}

/// Reads the roster and the lease of `role` from its partition (asyncio form).
#[pyfunction]
#[pyo3(signature = (kafka, role, partitions=None), text_signature = "(kafka, role, partitions=16)")]
pub fn describe_role_state<'py>(
    py: Python<'py>,
    kafka: &Bound<'py, PyAny>,
    role: &Bound<'py, PyAny>,
    partitions: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let config = kafka_config(kafka)?;
    let role = str_field(role, "role")?;
    let partitions = i32_arg(
        partitions,
        "partitions",
        core::ElectionOptions::DEFAULT_PARTITIONS,
    )?;
    future_into_py(py, describe_role_state_core(config, role, partitions))
}

/// Reads the roster and the lease of `role` from its partition (blocking form).
#[pyfunction]
#[pyo3(signature = (kafka, role, partitions=None), text_signature = "(kafka, role, partitions=16)")]
pub fn describe_role_state_blocking(
    py: Python<'_>,
    kafka: &Bound<'_, PyAny>,
    role: &Bound<'_, PyAny>,
    partitions: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyRoleStateReport> {
    let config = kafka_config(kafka)?;
    let role = str_field(role, "role")?;
    let partitions = i32_arg(
        partitions,
        "partitions",
        core::ElectionOptions::DEFAULT_PARTITIONS,
    )?;
    block_on(py, describe_role_state_core(config, role, partitions))?.into_py_result(py)
}

// -------------------------------------------------------------- state topic

/// What `ensure_state_topic` found or made.
#[pyclass(module = "krabka_coordination", name = "TopicReport", frozen)]
#[derive(Debug, Clone)]
pub struct PyTopicReport(pub ck::TopicReport);

#[pymethods]
impl PyTopicReport {
    /// The topic's name.
    #[getter]
    fn topic(&self) -> &str {
        &self.0.topic
    }

    /// True when this call created the topic.
    #[getter]
    fn created(&self) -> bool {
        self.0.created
    }

    /// The partition count.
    #[getter]
    fn partitions(&self) -> i32 {
        self.0.partitions
    }

    /// The replica count of partition 0.
    #[getter]
    fn replication_factor(&self) -> i32 {
        self.0.replication_factor
    }

    /// The topic's `cleanup.policy` (`compact`).
    #[getter]
    fn cleanup_policy(&self) -> &str {
        &self.0.cleanup_policy
    }

    /// The topic's `min.insync.replicas`, when the broker reports it.
    #[getter]
    fn min_insync_replicas(&self) -> Option<i32> {
        self.0.min_insync_replicas
    }

    /// Advice for the operator (such as a `min.insync.replicas` below 2).
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.0.warnings.clone()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "TopicReport(topic={}, created={}, partitions={}, replication_factor={}, cleanup_policy={}, min_insync_replicas={}, warnings={})",
            py_repr(py, &self.0.topic)?,
            if self.0.created { "True" } else { "False" },
            self.0.partitions,
            self.0.replication_factor,
            py_repr(py, &self.0.cleanup_policy)?,
            self.0.min_insync_replicas.map_or_else(|| "None".to_owned(), |v| v.to_string()),
            PyList::new(py, &self.0.warnings)?.repr()?
        ))
    }
}

/// The arguments of `ensure_state_topic`, converted (16 partitions, one
/// replica and `min.insync.replicas=1` when left out).
fn topic_args(
    partitions: Option<&Bound<'_, PyAny>>,
    replication_factor: Option<&Bound<'_, PyAny>>,
    min_insync_replicas: Option<&Bound<'_, PyAny>>,
) -> PyResult<(i32, i32, i32)> {
    Ok((
        i32_arg(
            partitions,
            "partitions",
            core::ElectionOptions::DEFAULT_PARTITIONS,
        )?,
        i32_arg(replication_factor, "replication_factor", 1)?,
        i32_arg(min_insync_replicas, "min_insync_replicas", 1)?,
    ))
}

async fn ensure_state_topic_core(
    config: KafkaConfig,
    (partitions, rf, isr): (i32, i32, i32),
) -> Result<PyTopicReport, Error> {
    Ok(PyTopicReport(
        ck::ensure_state_topic(&config, partitions, rf, isr).await?,
    ))
}

/// Creates `__coordination_state` (compacted) if it does not exist, then
/// checks its shape (asyncio form). An existing topic is left as it is; one
/// of another partition count or cleanup policy is refused.
#[pyfunction]
#[pyo3(
    signature = (kafka, partitions=None, replication_factor=None, min_insync_replicas=None),
    text_signature = "(kafka, partitions=16, replication_factor=1, min_insync_replicas=1)"
)]
pub fn ensure_state_topic<'py>(
    py: Python<'py>,
    kafka: &Bound<'py, PyAny>,
    partitions: Option<&Bound<'py, PyAny>>,
    replication_factor: Option<&Bound<'py, PyAny>>,
    min_insync_replicas: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let config = kafka_config(kafka)?;
    let args = topic_args(partitions, replication_factor, min_insync_replicas)?;
    future_into_py(py, ensure_state_topic_core(config, args))
}

/// Creates and checks `__coordination_state` (blocking form).
#[pyfunction]
#[pyo3(
    signature = (kafka, partitions=None, replication_factor=None, min_insync_replicas=None),
    text_signature = "(kafka, partitions=16, replication_factor=1, min_insync_replicas=1)"
)]
pub fn ensure_state_topic_blocking(
    py: Python<'_>,
    kafka: &Bound<'_, PyAny>,
    partitions: Option<&Bound<'_, PyAny>>,
    replication_factor: Option<&Bound<'_, PyAny>>,
    min_insync_replicas: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTopicReport> {
    let config = kafka_config(kafka)?;
    let args = topic_args(partitions, replication_factor, min_insync_replicas)?;
    block_on(py, ensure_state_topic_core(config, args))?.into_py_result(py)
}
