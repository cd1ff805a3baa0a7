//! `_LeaderLoop` and `_Term`: the leader loop of the shared crate
//! ([`LeadHandle`], over the core's `LeaderLoop`) behind `Client.lead` and
//! `AsyncClient.lead`, whose Python loop runs the user's work between
//! `next_term()` and `finish(term)`. Every rule (resign after the work,
//! the backoff before contending again, what a stop does) is the core's.
//!
//! * `next_term()` is an operation ([`PyPending`]) like an acquire: Ctrl-C
//!   (blocking) or cancelling the awaiting task stops the loop, and the
//!   core deregisters a waiting member (the blocking form waits up to
//!   [`ACQUIRE_GRACE`] for that); a term won in that very instant is
//!   finished (resigned) since nobody takes it.
//! * `finish(term)` resigns a role still held and is left to finish when
//!   interrupted ([`FINISH_GRACE`]), as a resign is.
//! * `_Term.wait_ended()` waits for the term's end signal (`Term::ended`:
//!   the term ended, or the loop was stopped).

use krabka_coordination::leadership::Term;
use krabka_coordination_bindings::args::SecondsBound;
use krabka_coordination_bindings::blocking::BoxFuture;
use krabka_coordination_bindings::{LeadHandle, OnInterrupt, ProcessBound};
use pyo3::prelude::*;
use tokio_util::sync::CancellationToken;

use crate::client::ACQUIRE_GRACE;
use crate::convert::seconds_arg;
use crate::error::IntoPyResult;
use crate::leadership::{PyLeadership, FINISH_GRACE};
use crate::pending::{Outcome, PyPending};
use crate::runtime::runtime;

/// A leader loop (see the module documentation).
#[pyclass(module = "krabka_coordination._native", name = "_LeaderLoop", frozen)]
pub struct PyLeaderLoop {
    inner: ProcessBound<LeadHandle>,
}

impl PyLeaderLoop {
    /// Wraps `handle`, bound to this process.
    pub fn new(handle: LeadHandle) -> PyResult<PyLeaderLoop> {
        let rt = runtime()?.handle().clone();
        Ok(PyLeaderLoop {
            inner: ProcessBound::new("leader loop", handle, Some(rt)),
        })
    }
}

/// The next term, not yet handed to Python; `None` once stopped.
struct NextTerm(Option<(Term, LeadHandle)>);

impl Outcome for NextTerm {
    fn into_py(self: Box<Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let Some((term, _)) = self.0 else {
            return Ok(py.None());
        };
        let rt = runtime()?.handle().clone();
        let leadership = Py::new(
            py,
            PyLeadership::shared(term.leadership().clone(), rt.clone()),
        )?;
        let term = PyTerm {
            term: ProcessBound::new("leader loop term", term, Some(rt)),
            leadership,
        };
        Ok(Py::new(py, term)?.into_any())
    }

    /// Nobody takes the term (the wait was interrupted or cancelled as it
    /// was won): finish it, which resigns the role.
    fn abandon(self: Box<Self>) -> Option<BoxFuture> {
        let (term, handle) = self.0?;
        Some(Box::pin(handle.finish(term)))
    }
}

#[pymethods]
impl PyLeaderLoop {
    /// The next term once this member leads (after the backoff the core
    /// owes), or `None` once the loop is stopped.
    fn next_term(&self, py: Python<'_>) -> PyResult<PyPending> {
        let handle = self.inner.get().into_py_result(py)?.clone();
        let interrupt = CancellationToken::new();
        let on_interrupt = OnInterrupt::Cancel(interrupt.clone(), ACQUIRE_GRACE);
        Ok(PyPending::new(
            async move {
                let next = handle.next_term();
                tokio::pin!(next);
                let term = tokio::select! {
                    biased;
                    term = &mut next => term,
                    _ = interrupt.cancelled() => {
                        // Ctrl-C or a cancelled task: the core stops the
                        // loop (a waiting acquire deregisters).
                        handle.stop();
                        next.await
                    }
                }?;
                Ok(NextTerm(term.map(|t| (t, handle))))
            },
            on_interrupt,
        ))
    }

    /// Ends `term` after its work returned or raised: the core resigns a
    /// role still held and owes the backoff before the next term.
    fn finish(&self, py: Python<'_>, term: &PyTerm) -> PyResult<PyPending> {
        let handle = self.inner.get().into_py_result(py)?.clone();
        let term = term.term.get().into_py_result(py)?.clone();
        Ok(PyPending::plain(
            async move {
                handle.finish(term).await;
                Ok(())
            },
            OnInterrupt::Finish(FINISH_GRACE),
        ))
    }

    /// Stops the loop: a waiting `next_term` deregisters and yields `None`,
    /// a running term's end signal fires. Idempotent, from any thread.
    fn stop(&self) {
        if let Ok(handle) = self.inner.get() {
            handle.stop();
        }
    }

    /// True once stopped.
    #[getter]
    fn stopped(&self) -> bool {
        self.inner.get().map(LeadHandle::is_stopped).unwrap_or(true)
    }
}

/// One term of a leader loop: its leadership and its end signal.
#[pyclass(module = "krabka_coordination._native", name = "_Term", frozen)]
pub struct PyTerm {
    term: ProcessBound<Term>,
    leadership: Py<PyLeadership>,
}

#[pymethods]
impl PyTerm {
    /// The held leadership of the term.
    #[getter]
    fn leadership(&self, py: Python<'_>) -> Py<PyLeadership> {
        self.leadership.clone_ref(py)
    }

    /// The term's number in its loop, from 1.
    #[getter]
    fn number(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.term.get().into_py_result(py)?.number())
    }

    /// True once the term ended or the loop was stopped.
    #[getter]
    fn ended(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.term.get().into_py_result(py)?.ended().is_cancelled())
    }

    /// Waits until the term ends or the loop is stopped (`True`), or
    /// `timeout` seconds pass (`False`; `None`: no limit).
    #[pyo3(signature = (timeout=None))]
    fn wait_ended(
        &self,
        py: Python<'_>,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyPending> {
        let limit = seconds_arg(timeout, "timeout", SecondsBound::NonNegative)?;
        let ended = self.term.get().into_py_result(py)?.ended().clone();
        Ok(PyPending::plain(
            async move {
                Ok(match limit {
                    None => {
                        ended.cancelled().await;
                        true
                    }
                    Some(d) => tokio::time::timeout(d, ended.cancelled()).await.is_ok(),
                })
            },
            OnInterrupt::Abort,
        ))
    }
}
