//! `_Observer` and `RoleView`: the core's observer (`Client::observe`)
//! through the shared crate's [`ObserverHandle`], whose `next` is a
//! `'static` future: the package's `Observer` waits for it (the GIL
//! released, Ctrl-C aborting the wait, which loses no view: `next` is
//! cancel-safe) and its `AsyncObserver` awaits it. Any thread may close it.

use krabka_coordination::observe::RoleView;
use krabka_coordination_bindings::args::SecondsBound;
use krabka_coordination_bindings::{ObserverHandle, OnInterrupt, ProcessBound};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::convert::seconds_arg;
use crate::error::IntoPyResult;
use crate::pending::PyPending;
use crate::records::py_repr;
use crate::reports::PyRosterEntry;
use crate::values::PyLease;

/// One role as an observer saw it: why it was reported, the leader, the
/// lapsed lease, the roster.
#[pyclass(module = "krabka_coordination", name = "RoleView", frozen, eq)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyRoleView(pub RoleView);

#[pymethods]
impl PyRoleView {
    /// The role.
    #[getter]
    fn role(&self) -> &str {
        &self.0.role
    }

    /// The partition of the state topic that holds the role.
    #[getter]
    fn partition(&self) -> i32 {
        self.0.partition
    }

    /// Why this view was reported: the core's stable name of the change
    /// (`"initial"`, `"elected"`, `"renewed"`, `"cleared"`, `"lapsed"`,
    /// `"roster"`; the core may add changes).
    #[getter]
    fn change(&self) -> &'static str {
        self.0.change.name()
    }

    /// The leader's lease, or `None`: no lease yet, cleared by a resign, or
    /// lapsed (see `lapsed`).
    #[getter]
    fn leader(&self) -> Option<PyLease> {
        self.0.leader.clone().map(PyLease)
    }

    /// The lease whose deadline passed without a renewal, while the view has
    /// no leader because of it (until the role's next lease record).
    #[getter]
    fn lapsed(&self) -> Option<PyLease> {
        self.0.lapsed.clone().map(PyLease)
    }

    /// The roster in rank order (`roster[i].rank == i`).
    #[getter]
    fn roster(&self) -> Vec<PyRosterEntry> {
        self.0
            .roster
            .iter()
            .enumerate()
            .map(|(rank, e)| PyRosterEntry::new(e.clone(), rank))
            .collect()
    }

    /// The member ids of the roster in rank order.
    #[getter]
    fn members(&self) -> Vec<String> {
        self.0.roster.iter().map(|e| e.member.clone()).collect()
    }

    /// The offset the view was read up to (every record of the partition
    /// below it was read).
    #[getter]
    fn position(&self) -> i64 {
        self.0.position
    }

    /// When the view was taken, in epoch milliseconds of the observer's clock.
    #[getter]
    fn at(&self) -> i64 {
        self.0.at
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let lease = |l: &Option<krabka_coordination::Lease>| -> PyResult<String> {
            Ok(match l {
                Some(l) => Bound::new(py, PyLease(l.clone()))?.repr()?.to_string(),
                None => "None".to_owned(),
            })
        };
        Ok(format!(
            "RoleView(role={}, change={}, partition={}, leader={}, lapsed={}, members={}, position={}, at={})",
            py_repr(py, &self.0.role)?,
            py_repr(py, self.0.change.name())?,
            self.0.partition,
            lease(&self.0.leader)?,
            lease(&self.0.lapsed)?,
            PyList::new(py, self.members())?.repr()?,
            self.0.position,
            self.0.at
        ))
    }
}

/// A watch of one or more roles (`Client.observe`), behind the package's
/// `Observer` and `AsyncObserver`.
#[pyclass(module = "krabka_coordination._native", name = "_Observer", frozen)]
pub struct PyObserver {
    handle: ProcessBound<ObserverHandle>,
}

impl PyObserver {
    /// Wraps the shared crate's handle, bound to this process.
    pub fn new(handle: ObserverHandle, rt: tokio::runtime::Handle) -> PyObserver {
        PyObserver {
            handle: ProcessBound::new("observer", handle, Some(rt)),
        }
    }
}

#[pymethods]
impl PyObserver {
    /// The next view, or `None` once the observer is closed or ended (an
    /// error ends it: raised once, then `None`), or when `timeout` seconds
    /// (`None`: no limit) pass first. Losing the wait (a timeout, Ctrl-C, a
    /// cancelled task) loses no view.
    #[pyo3(signature = (timeout=None))]
    fn next(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<PyPending> {
        let limit = seconds_arg(timeout, "timeout", SecondsBound::NonNegative)?;
        let next = self.handle.get().into_py_result(py)?.next();
        Ok(PyPending::plain(
            async move {
                let view = match limit {
                    None => next.await?,
                    Some(d) => match tokio::time::timeout(d, next).await {
                        Ok(view) => view?,
                        Err(_elapsed) => None,
                    },
                };
                Ok(view.map(PyRoleView))
            },
            OnInterrupt::Abort,
        ))
    }

    /// Stops the reads: a waiting and every later `next` yields `None`.
    /// Idempotent, from any thread.
    fn close(&self) {
        // In a forked child the parent's observer is not this process's to stop.
        if let Ok(h) = self.handle.get() {
            h.close();
        }
    }

    /// True once closed, or ended by an error.
    #[getter]
    fn closed(&self) -> bool {
        self.handle.get().map_or(true, ObserverHandle::is_closed)
    }

    /// The roles watched, sorted, each once.
    #[getter]
    fn roles(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        Ok(self.handle.get().into_py_result(py)?.roles().to_vec())
    }

    fn __repr__(&self) -> String {
        match self.handle.get() {
            Ok(h) => format!(
                "<_Observer of {:?}{}>",
                h.roles(),
                if h.is_closed() { ", closed" } else { "" }
            ),
            Err(_) => "<_Observer of another process>".to_owned(),
        }
    }
}
