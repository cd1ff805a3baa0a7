//! One operation, two ways to wait for it: [`PyPending`] (`_Pending` in
//! Python) is an operation of the core not yet started. `wait()` runs it as
//! a blocking call; `await` runs it on the asyncio loop ([`crate::asyncio`]).
//! Every native method of the package returns one, so each operation is
//! written once and the blocking and asyncio classes of the package
//! (`Client`, `AsyncClient`, ...) are thin Python over the same methods.
//!
//! Arguments are converted and checked when the operation is made, so a bad
//! argument raises at the call, before any I/O and before any await.
//!
//! # The blocking wait
//!
//! The GIL is released while waiting; every [`SIGNAL_POLL`] the wait takes
//! it back to run Python's signal handlers, so Ctrl-C interrupts
//! (`krabka_coordination_bindings::blocking`). What an interrupt does is the
//! operation's [`OnInterrupt`]: a describe or a wait is aborted; an acquire
//! is cancelled through the core's token and given a grace period to
//! deregister; a guarded write or a resign is left to finish within a grace
//! period (a transaction is never cut in half). A value produced after the
//! interrupt is settled ([`Outcome::abandon`]): a leadership won in the
//! instant of the interrupt is resigned before `KeyboardInterrupt` is raised.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use krabka_coordination::Error;
use krabka_coordination_bindings::blocking::{self, BoxFuture};
use krabka_coordination_bindings::{Blocked, Interruptible, OnInterrupt};
use pyo3::exceptions::PyRuntimeError;
use pyo3::panic::PanicException;
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;

use crate::error::{error_to_py, Exc};
use crate::runtime::runtime;

/// How often a blocking wait takes the GIL to run Python's signal handlers.
pub const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// What an operation produces, turned into Python once the interpreter is
/// at hand.
pub trait Outcome: Send + 'static {
    /// The Python value.
    fn into_py(self: Box<Self>, py: Python<'_>) -> PyResult<Py<PyAny>>;

    /// Clean-up for a value nobody takes (the waiter was interrupted or
    /// cancelled after the operation finished). Nothing by default.
    fn abandon(self: Box<Self>) -> Option<BoxFuture> {
        None
    }
}

/// An outcome that is a plain Python value.
pub struct Plain<T>(pub T);

impl<T> Outcome for Plain<T>
where
    T: for<'py> IntoPyObject<'py> + Send + 'static,
{
    fn into_py(self: Box<Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.0.into_py_any(py)
    }
}

/// What an operation's future yields.
pub type OpResult = Result<Box<dyn Outcome>, Error>;

/// An operation's future.
pub type OpFuture = Pin<Box<dyn Future<Output = OpResult> + Send + 'static>>;

/// An operation not yet started.
pub struct Op {
    /// The work.
    pub fut: OpFuture,
    /// What an interrupt (blocking) or a cancel (asyncio) does.
    pub on_interrupt: OnInterrupt,
}

/// Clean-up of a value produced after an interrupt.
pub fn settle(value: OpResult) -> Option<BoxFuture> {
    value.ok()?.abandon()
}

/// An operation of the core, to be waited for (`wait()`) or awaited, once.
#[pyclass(module = "krabka_coordination._native", name = "_Pending", frozen)]
pub struct PyPending {
    op: Mutex<Option<Op>>,
}

impl PyPending {
    /// An operation whose future yields an [`Outcome`].
    pub fn new<F, T>(fut: F, on_interrupt: OnInterrupt) -> PyPending
    where
        F: Future<Output = Result<T, Error>> + Send + 'static,
        T: Outcome,
    {
        let fut: OpFuture =
            Box::pin(async move { fut.await.map(|v| Box::new(v) as Box<dyn Outcome>) });
        PyPending {
            op: Mutex::new(Some(Op { fut, on_interrupt })),
        }
    }

    /// An operation whose future yields a plain Python value.
    pub fn plain<F, T>(fut: F, on_interrupt: OnInterrupt) -> PyPending
    where
        F: Future<Output = Result<T, Error>> + Send + 'static,
        T: for<'py> IntoPyObject<'py> + Send + 'static,
    {
        PyPending::new(async move { fut.await.map(Plain) }, on_interrupt)
    }

    fn take(&self) -> PyResult<Op> {
        self.op
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(|| {
                PyRuntimeError::new_err("this operation was waited for or awaited already")
            })
    }
}

/// Runs `op` as a blocking call (see the module documentation).
pub fn wait_blocking(py: Python<'_>, op: Op) -> PyResult<Py<PyAny>> {
    let rt = runtime()?;
    let Op { fut, on_interrupt } = op;
    let blocked = py.detach(|| {
        // An interpreter that is shutting down runs no signal handlers: the
        // wait goes on (the process is ending anyway).
        let mut check = || Python::try_attach(|py| py.check_signals()).unwrap_or(Ok(()));
        let how = Interruptible {
            every: SIGNAL_POLL,
            check: &mut check,
            on_interrupt,
            settle: Some(settle),
        };
        blocking::block_on(rt, fut, how)
    });
    match blocked {
        Ok(Ok(outcome)) => outcome.into_py(py),
        Ok(Err(e)) => Err(error_to_py(py, &e)),
        Err(Blocked::Interrupted(interrupt)) => Err(interrupt),
        Err(Blocked::Panicked(message)) => Err(PanicException::new_err((message,))),
        Err(Blocked::Aborted) => Err(Exc::Cancelled.new_err(py, "the task was aborted")),
        Err(e @ Blocked::OnRuntimeThread) => Err(PyRuntimeError::new_err(e.to_string())),
    }
}

#[pymethods]
impl PyPending {
    /// Runs the operation and blocks until it finishes (the GIL released,
    /// Ctrl-C interrupting); returns its value or raises its error.
    pub fn wait(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let op = self.take()?;
        wait_blocking(py, op)
    }

    /// Runs the operation on the running asyncio loop; cancelling the
    /// awaiting task stops it as its kind allows.
    fn __await__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let op = self.take()?;
        crate::asyncio::spawn(py, op)?.call_method0("__await__")
    }

    fn __repr__(&self) -> &'static str {
        match self.op.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            Some(_) => "<_Pending operation, not started>",
            None => "<_Pending operation, started>",
        }
    }
}
