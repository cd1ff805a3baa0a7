//! The leadership event stream in Python: the `Event` class and the native
//! stream behind `Leadership.events()` / `AsyncLeadership.events()`.
//!
//! An `Event` is the core's event, flattened by the shared crate
//! (`EventView`): `kind` is the core's stable name (`"elected"`,
//! `"renewed"`, `"fenced"`, ...), `role`, `member` and `at` (the member's
//! clock, epoch ms) are always set, and the kind's own fields (`token`,
//! `deadline`, `rank`, `offset`, `failures`, `error`, ...) are set for the
//! kinds that have them and `None` otherwise.
//!
//! The stream is the shared `EventStream`: it yields the member's events
//! from the subscription on and ends with the term. Its `next()` is one
//! operation ([`PyPending`]), awaited or waited for by the Python iterator
//! classes; the stream itself sits behind an async mutex, so an interrupted
//! or cancelled `next()` loses no event.

use std::sync::Arc;

use krabka_coordination::events::Event;
use krabka_coordination::leadership::Leadership;
use krabka_coordination_bindings::{EventStream, EventView, OnInterrupt, ProcessBound};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::error::{error_to_py, IntoPyResult};
use crate::pending::PyPending;
use crate::records::py_repr;
use crate::values::PyFencingToken;

/// One step of a member of a role.
#[pyclass(module = "krabka_coordination", name = "Event", frozen)]
pub struct PyEvent {
    view: EventView,
    /// The exception of `error`, made once.
    error: PyOnceLock<Py<PyAny>>,
}

impl PyEvent {
    /// The Python event of a core event.
    pub fn new(event: &Event) -> PyEvent {
        PyEvent {
            view: EventView::from(event),
            error: PyOnceLock::new(),
        }
    }
}

#[pymethods]
impl PyEvent {
    /// What happened: the core's stable name of the kind (`"registered"`,
    /// `"waiting"`, `"held_back"`, `"challenging"`, `"lost_challenge"`,
    /// `"elected"`, `"renewed"`, `"renewal_failing"`, `"write_resolved"`,
    /// `"retrying"`, `"fenced"`, `"lease_expired"`, `"ended"`, `"resigned"`,
    /// `"deregistered"`; the core may add kinds).
    #[getter]
    fn kind(&self) -> &'static str {
        self.view.kind
    }

    /// The role.
    #[getter]
    fn role(&self) -> &str {
        &self.view.role
    }

    /// The member id.
    #[getter]
    fn member(&self) -> &str {
        &self.view.member
    }

    /// When the step was taken, in epoch milliseconds of the member's clock.
    #[getter]
    fn at(&self) -> i64 {
        self.view.at
    }

    /// `registered`: the partition of `__coordination_state`.
    #[getter]
    fn partition(&self) -> Option<i32> {
        self.view.partition
    }

    /// `registered`: the offset of the registration record.
    #[getter]
    fn offset(&self) -> Option<i64> {
        self.view.offset
    }

    /// `waiting`: the member's place among the challengers (0 first).
    #[getter]
    fn rank(&self) -> Option<usize> {
        self.view.rank
    }

    /// `waiting`: when the member challenges if nothing changes (epoch ms).
    #[getter]
    fn challenge_at(&self) -> Option<i64> {
        self.view.challenge_at
    }

    /// `elected`, `lost_challenge`: the member's token; `waiting` behind a
    /// lease: the token of the holder (`holder`).
    #[getter]
    fn token(&self) -> Option<PyFencingToken> {
        self.view.token.map(PyFencingToken)
    }

    /// `waiting` behind a lease: the member the lease names (it may have
    /// lapsed: `challenge_at` is then its deadline plus the stagger).
    #[getter]
    fn holder(&self) -> Option<&str> {
        self.view.holder.as_deref()
    }

    /// `elected`: when the lease was granted (epoch ms).
    #[getter]
    fn granted_at(&self) -> Option<i64> {
        self.view.granted_at
    }

    /// `elected`, `renewed`: the lease deadline (epoch ms).
    #[getter]
    fn deadline(&self) -> Option<i64> {
        self.view.deadline
    }

    /// `renewal_failing`: how many renewals in a row have failed.
    #[getter]
    fn failures(&self) -> Option<u32> {
        self.view.failures
    }

    /// `renewal_failing`, `retrying`, `fenced`, `ended`: the cause, as the
    /// exception the package raises for it (the same object every time).
    #[getter]
    fn error(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        let e = self.view.error.as_ref()?;
        let exc = self
            .error
            .get_or_init(py, || error_to_py(py, e).into_value(py).into_any());
        Some(exc.clone_ref(py))
    }

    /// `resigned`: True when the lease was cleared (the hand-over is
    /// immediate), False when standbys wait for the deadline.
    #[getter]
    fn cleared(&self) -> Option<bool> {
        self.view.cleared
    }

    /// `write_resolved`: True when the earlier guarded write whose outcome
    /// was unknown committed (its records are visible), False when not.
    #[getter]
    fn committed(&self) -> Option<bool> {
        self.view.committed
    }

    /// `retrying`: what failed (`"registering"`, `"minting the epoch"`...).
    #[getter]
    fn what(&self) -> Option<&str> {
        self.view.what.as_deref()
    }

    /// `retrying`: how many times in a row it failed (1 at the first).
    #[getter]
    fn attempt(&self) -> Option<u32> {
        self.view.attempt
    }

    /// `retrying`: the pause before the next try, in seconds.
    #[getter]
    fn retry_in(&self) -> Option<f64> {
        self.view.retry_in.map(|d| d.as_secs_f64())
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let py = slf.py();
        let this = slf.get();
        let mut out = format!(
            "Event(kind={}, role={}, member={}, at={}",
            py_repr(py, this.view.kind)?,
            py_repr(py, &this.view.role)?,
            py_repr(py, &this.view.member)?,
            this.view.at
        );
        for field in this.view.fields() {
            let value = slf.getattr(field)?.repr()?;
            out.push_str(&format!(", {field}={value}"));
        }
        out.push(')');
        Ok(out)
    }
}

/// The event stream of one leadership (`Leadership.events()`).
#[pyclass(module = "krabka_coordination._native", name = "_EventStream", frozen)]
pub struct PyEventStream {
    stream: ProcessBound<Arc<tokio::sync::Mutex<EventStream>>>,
}

impl PyEventStream {
    /// Subscribes to `leadership` from now on.
    pub fn subscribe(leadership: &Arc<Leadership>, handle: tokio::runtime::Handle) -> Self {
        let stream = EventStream::subscribe(leadership);
        PyEventStream {
            stream: ProcessBound::new(
                "event stream",
                Arc::new(tokio::sync::Mutex::new(stream)),
                Some(handle),
            ),
        }
    }
}

#[pymethods]
impl PyEventStream {
    /// The next event, or `None` once the term ended and its last events
    /// were yielded.
    fn next(&self, py: Python<'_>) -> PyResult<PyPending> {
        let stream = Arc::clone(self.stream.get().into_py_result(py)?);
        Ok(PyPending::plain(
            async move {
                let mut stream = stream.lock().await;
                Ok(stream.next().await.as_ref().map(PyEvent::new))
            },
            OnInterrupt::Abort,
        ))
    }
}
