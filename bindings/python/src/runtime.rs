//! The package's tokio runtime: the shared crate's fork-aware holder, the
//! `os.register_at_fork` hook, and the internal hooks the tests use.
//!
//! The runtime is built by the first call that needs it (a process that
//! only encodes and decodes never has runtime threads), one per process, and
//! rebuilt in a forked child (`krabka_coordination_bindings::runtime`). The
//! holder takes no lock, so a fork by any thread at any instant leaves
//! nothing locked in the child. `os.register_at_fork(after_in_child=...)`
//! forgets the inherited runtime at once; the holder's pid check covers a
//! fork that skips Python's hooks.

use std::time::Duration;

use krabka_coordination::Error;
use krabka_coordination_bindings::{OnInterrupt, RuntimeHolder};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use tokio::runtime::Runtime;

use crate::pending::PyPending;

/// The name of the runtime's threads (visible in `ps -T`, `py-spy`, debuggers).
pub const THREAD_NAME: &str = "krabka-rt";

/// The runtime's worker threads. The work is I/O-bound and no worker ever
/// waits for the GIL (outcomes and log records reach Python from other
/// threads), so a few suffice; more than one keeps a long poll from
/// delaying a renewal.
pub const WORKER_THREADS: usize = 4;

/// The runtime of this process.
pub static RUNTIME: RuntimeHolder = RuntimeHolder::new(THREAD_NAME, WORKER_THREADS);

/// The runtime of this process, built on first use and after a fork.
pub fn runtime() -> PyResult<&'static Runtime> {
    RUNTIME.get().map_err(|e| {
        PyRuntimeError::new_err(format!("cannot start the krabka_coordination runtime: {e}"))
    })
}

/// Forgets the runtime inherited through a fork. Called in the child by the
/// `os.register_at_fork` hook; harmless anywhere else.
#[pyfunction]
pub fn _reset_runtime_after_fork() {
    RUNTIME.forget_inherited();
}

/// Registers [`_reset_runtime_after_fork`] with `os.register_at_fork` (a
/// no-op on platforms without it).
pub fn install_fork_hook(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    let os = py.import("os")?;
    if !os.hasattr("register_at_fork")? {
        return Ok(());
    }
    let hook = module.getattr("_reset_runtime_after_fork")?;
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("after_in_child", hook)?;
    os.call_method("register_at_fork", (), Some(&kwargs))?;
    Ok(())
}

/// A task aborted when its handle is dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// An operation that runs a task on the runtime, waits `delay_ms` on the
/// runtime's timer, and answers (this pid, the name of the runtime thread
/// that ran it). A negative delay fails inside the task with the core's
/// `InvalidArgument`, to test how errors of a future reach Python.
///
/// Internal: tests the runtime, the blocking and the asyncio paths.
#[pyfunction]
#[pyo3(signature = (delay_ms=1))]
pub fn _runtime_ping(delay_ms: i64) -> PyPending {
    let pid = std::process::id();
    PyPending::plain(
        async move {
            let delay = u64::try_from(delay_ms).map_err(|_| {
                Error::InvalidArgument(format!("delay_ms must not be negative, got {delay_ms}"))
            })?;
            // A real hop through the scheduler and the timer, in a task
            // aborted with the operation.
            let mut task = AbortOnDrop(tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(delay)).await;
                std::thread::current().name().unwrap_or("").to_owned()
            }));
            let name = (&mut task.0)
                .await
                .map_err(|e| Error::fatal("the ping task", e))?;
            Ok((pid, name))
        },
        OnInterrupt::Abort,
    )
}

/// The number of tasks alive on this process's runtime (0 when it has none
/// yet). Internal: lets the tests see that a cancelled call's task is gone.
#[pyfunction]
pub fn _runtime_alive_tasks() -> usize {
    RUNTIME.alive_tasks()
}
