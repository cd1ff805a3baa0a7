//! The tokio runtime behind every asynchronous call of the package, made safe
//! for `fork()`.
//!
//! # Design
//!
//! * **Lazy.** Nothing starts at import: the runtime is built by the first
//!   call that needs it ([`runtime`]), so a process that only encodes and
//!   decodes never has runtime threads.
//! * **One per process.** The holder records the pid that built the runtime.
//!   A `fork()` copies the holder into the child but not the runtime's worker
//!   threads, so the child's copy is a runtime with no threads. Two guards
//!   retire it:
//!   1. `os.register_at_fork(after_in_child=...)` (installed at import by
//!      [`install_fork_hook`]) retires it as soon as Python's `os.fork()`
//!      returns in the child;
//!   2. [`runtime`] compares the recorded pid with `std::process::id()` on
//!      every call, which also covers a fork made outside Python's `os.fork`.
//!
//!   Either way the next call builds a fresh runtime in the child.
//! * **Retired, never dropped.** Dropping a runtime joins its worker threads,
//!   and in a child those threads do not exist; the inherited runtime is
//!   leaked on purpose (`std::mem::forget`). The leak is one runtime's memory,
//!   once per fork.
//! * **Attached while locked.** The holder's mutex is only taken while the
//!   caller is attached to the interpreter (the functions take a `Python`
//!   token), and nothing inside the lock calls Python or blocks. `os.fork()`
//!   runs with the GIL held by the forking thread, so no other thread can be
//!   inside the lock at the fork, and the child never inherits it locked.
//!
//! # Running a future
//!
//! Two ways, for the two kinds of Python caller:
//!
//! * [`block_on`] (a blocking call) runs a future on the runtime from a
//!   Python thread: the GIL is released while it waits, and every
//!   [`SIGNAL_POLL`] it re-attaches to run Python's signal handlers, so Ctrl-C
//!   interrupts a long wait (the task is aborted and `KeyboardInterrupt`
//!   raised). A panic in the task surfaces as `pyo3_runtime.PanicException`;
//!   an aborted task as `Cancelled`.
//! * [`future_into_py`] (an `async def` caller) spawns the future and returns
//!   an `asyncio.Future` of the running event loop. The outcome is handed to
//!   the loop with `call_soon_threadsafe`; cancelling the asyncio future
//!   aborts the task. Errors of the future map through [`IntoPyErr`] (a core
//!   `Error` through the one mapping in `error.rs`).
//!
//! A future that can wind itself down (an acquire, which must deregister
//! its member) uses the graceful twins, [`block_on_graceful`] and
//! [`future_into_py_graceful`]: an interrupt or a cancel then calls a stop
//! function (the core's cancellation token) instead of aborting the task, and
//! the blocking form waits, for a bounded grace period, until the future has
//! finished its clean-up.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use pyo3::exceptions::PyRuntimeError;
use pyo3::panic::PanicException;
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;
use tokio::runtime::Runtime;
use tokio::task::AbortHandle;

use crate::error::{Exc, IntoPyErr};

/// How often [`block_on`] wakes to let Python run its signal handlers.
pub const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// The name of the runtime's threads (visible in `ps -T`, `py-spy`, debuggers).
pub const THREAD_NAME: &str = "krabka-rt";

/// The number of runtime worker threads: the machine is shared with the
/// interpreter, and the coordination work is I/O-bound.
const WORKER_THREADS: usize = 2;

/// The runtime of this process and the pid that built it.
struct Holder {
    pid: u32,
    runtime: Arc<Runtime>,
}

static HOLDER: Mutex<Option<Holder>> = Mutex::new(None);

/// The lock on the holder. A panic while it was held cannot leave the holder
/// half-written (it is replaced whole), so a poisoned lock is taken as is.
fn lock(_py: Python<'_>) -> MutexGuard<'static, Option<Holder>> {
    HOLDER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Forgets an inherited runtime without dropping it (its threads are not in
/// this process).
fn retire(holder: Holder) {
    std::mem::forget(holder.runtime);
}

/// The runtime of this process, built on first use and rebuilt after a fork.
pub fn runtime(py: Python<'_>) -> PyResult<Arc<Runtime>> {
    let pid = std::process::id();
    let mut guard = lock(py);
    if let Some(holder) = guard.as_ref() {
        if holder.pid == pid {
            return Ok(holder.runtime.clone());
        }
    }
    if let Some(stale) = guard.take() {
        retire(stale);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKER_THREADS)
        .thread_name(THREAD_NAME)
        .enable_all()
        .build()
        .map_err(|e| {
            PyRuntimeError::new_err(format!("cannot start the krabka_coordination runtime: {e}"))
        })?;
    let runtime = Arc::new(runtime);
    *guard = Some(Holder {
        pid,
        runtime: runtime.clone(),
    });
    Ok(runtime)
}

/// The pid that built the current runtime, if one is live in this process.
pub fn runtime_pid(py: Python<'_>) -> Option<u32> {
    let pid = std::process::id();
    lock(py).as_ref().map(|h| h.pid).filter(|p| *p == pid)
}

/// Retires the runtime inherited through a fork. Called in the child by the
/// `os.register_at_fork` hook; harmless anywhere else (a runtime of this very
/// process is kept).
#[pyfunction]
pub fn _reset_runtime_after_fork(py: Python<'_>) {
    let pid = std::process::id();
    let mut guard = lock(py);
    if guard.as_ref().is_some_and(|h| h.pid != pid) {
        if let Some(stale) = guard.take() {
            retire(stale);
        }
    }
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

/// Runs `fut` on the runtime and waits for it with the GIL released, running
/// Python's signal handlers every [`SIGNAL_POLL`].
///
/// Refuses to run on a runtime thread (a Python callback running on the
/// runtime must not block it).
pub fn block_on<F, T>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    wait_blocking(py, fut, None)
}

/// [`block_on`] for a future that can wind itself down: when a signal handler
/// raises (Ctrl-C), `on_interrupt` is called (it asks the future to stop,
/// e.g. by firing the core's cancellation token) and the wait goes on, with
/// the GIL released, for up to `grace` so that the future can undo what it
/// did (deregister). Then the handler's exception is raised. Another signal
/// during the grace period, or the end of it, aborts the task at once.
pub fn block_on_graceful<F, T>(
    py: Python<'_>,
    fut: F,
    on_interrupt: impl FnOnce(),
    grace: Duration,
) -> PyResult<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    wait_blocking(py, fut, Some((Box::new(on_interrupt), grace)))
}

/// What [`block_on_graceful`] does on an interrupt.
type Graceful<'a> = Option<(Box<dyn FnOnce() + 'a>, Duration)>;

fn wait_blocking<F, T>(py: Python<'_>, fut: F, mut graceful: Graceful<'_>) -> PyResult<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(PyRuntimeError::new_err(
            "a blocking krabka_coordination call was made on the runtime's own thread",
        ));
    }
    let rt = runtime(py)?;
    let mut task = rt.spawn(fut);
    // Set once a signal handler raised: the exception to raise and the end
    // of the grace period.
    let mut interrupted: Option<(PyErr, std::time::Instant)> = None;
    loop {
        let waited =
            py.detach(|| rt.block_on(async { tokio::time::timeout(SIGNAL_POLL, &mut task).await }));
        match waited {
            Ok(outcome) => {
                if let Some((interrupt, _)) = interrupted {
                    // The future wound down (or finished) after the interrupt.
                    drop(outcome);
                    return Err(interrupt);
                }
                return match outcome {
                    Ok(value) => Ok(value),
                    Err(join) if join.is_panic() => Err(panic_to_py(join.into_panic())),
                    Err(_cancelled) => Err(Exc::Cancelled.new_err(py, "the task was cancelled")),
                };
            }
            Err(_elapsed) => {
                if let Err(signal) = py.check_signals() {
                    if interrupted.is_some() {
                        task.abort();
                        return Err(signal);
                    }
                    match graceful.take() {
                        Some((on_interrupt, grace)) => {
                            on_interrupt();
                            interrupted = Some((signal, std::time::Instant::now() + grace));
                        }
                        None => {
                            task.abort();
                            return Err(signal);
                        }
                    }
                } else if let Some((_, until)) = &interrupted {
                    if std::time::Instant::now() >= *until {
                        task.abort();
                        let (interrupt, _) = interrupted.take().expect("checked above");
                        return Err(interrupt);
                    }
                }
            }
        }
    }
}

/// A task's panic as `pyo3_runtime.PanicException`, with the panic message.
fn panic_to_py(payload: Box<dyn std::any::Any + Send + 'static>) -> PyErr {
    let message = if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else {
        "a krabka_coordination task panicked".to_owned()
    };
    PanicException::new_err((message,))
}

/// Runs a tokio task on the runtime and reports who ran it: the pid that
/// built the runtime and the name of the runtime thread the task ran on.
///
/// Internal: it exists to test the runtime (and its rebuild after `fork()`)
/// until the leadership API uses it for real.
#[pyfunction]
pub fn _runtime_ping(py: Python<'_>) -> PyResult<(u32, String)> {
    let thread = block_on(py, async {
        // A real hop through the scheduler and the timer: a spawned task
        // that sleeps, then answers over a channel.
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let name = std::thread::current().name().unwrap_or("").to_owned();
            let _ = tx.send(name);
        });
        rx.await.unwrap_or_default()
    })?;
    let pid = runtime_pid(py)
        .ok_or_else(|| PyRuntimeError::new_err("the runtime vanished during the ping"))?;
    Ok((pid, thread))
}

/// Hands the outcome of a task to its asyncio future, on the loop's thread
/// (`loop.call_soon_threadsafe(setter, ok, value)`). A future that is done
/// already (cancelled) is left alone.
#[pyclass(frozen)]
struct SetOutcome {
    future: Py<PyAny>,
}

#[pymethods]
impl SetOutcome {
    fn __call__(&self, py: Python<'_>, ok: bool, value: Bound<'_, PyAny>) -> PyResult<()> {
        let future = self.future.bind(py);
        if future.call_method0("done")?.is_truthy()? {
            return Ok(());
        }
        let method = if ok { "set_result" } else { "set_exception" };
        future.call_method1(method, (value,))?;
        Ok(())
    }
}

/// The done-callback of an asyncio future: when the asyncio future was
/// cancelled, aborts the task (the caller's future), or, for a future that
/// winds itself down, calls its stop function and lets it finish.
#[pyclass(frozen)]
struct OnCancel {
    task: AbortHandle,
    stop: Option<Box<dyn Fn() + Send + Sync>>,
}

#[pymethods]
impl OnCancel {
    fn __call__(&self, future: Bound<'_, PyAny>) -> PyResult<()> {
        if future.call_method0("cancelled")?.is_truthy()? {
            match &self.stop {
                Some(stop) => stop(),
                None => self.task.abort(),
            }
        }
        Ok(())
    }
}

/// Runs `fut` on the runtime and returns an `asyncio.Future` of the running
/// event loop that completes with its outcome: the value converted to Python,
/// or the error through [`IntoPyErr`]. A panic of the task becomes
/// `PanicException`. Cancelling the asyncio future aborts the task.
///
/// Must be called from a coroutine (with a running event loop); otherwise
/// `RuntimeError` as `asyncio.get_running_loop()` raises it.
pub fn future_into_py<'py, F, T, E>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Result<T, E>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
    E: IntoPyErr,
{
    spawn_for_asyncio(py, fut, None)
}

/// [`future_into_py`] for a future that can wind itself down: cancelling the
/// asyncio future calls `stop` (e.g. fires the core's cancellation token)
/// instead of aborting the task, so the future undoes what it did
/// (deregisters) on the runtime. Its outcome is then dropped.
pub fn future_into_py_graceful<'py, F, T, E>(
    py: Python<'py>,
    fut: F,
    stop: impl Fn() + Send + Sync + 'static,
) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Result<T, E>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
    E: IntoPyErr,
{
    spawn_for_asyncio(py, fut, Some(Box::new(stop)))
}

fn spawn_for_asyncio<'py, F, T, E>(
    py: Python<'py>,
    fut: F,
    stop: Option<Box<dyn Fn() + Send + Sync>>,
) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Result<T, E>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
    E: IntoPyErr,
{
    let event_loop = py.import("asyncio")?.call_method0("get_running_loop")?;
    let future = event_loop.call_method0("create_future")?;
    let setter = Py::new(
        py,
        SetOutcome {
            future: future.clone().unbind(),
        },
    )?;
    let event_loop = event_loop.unbind();
    let rt = runtime(py)?;
    let inner = rt.spawn(fut);
    let on_cancel = OnCancel {
        task: inner.abort_handle(),
        stop,
    };
    // The outer task waits for the inner one so that a panic of the inner
    // task is caught and delivered like any other outcome.
    rt.spawn(async move {
        let outcome = inner.await;
        Python::try_attach(|py| {
            let (ok, value) = match outcome {
                Ok(Ok(v)) => match v.into_py_any(py) {
                    Ok(obj) => (true, obj),
                    Err(e) => (false, e.into_value(py).into_any()),
                },
                Ok(Err(e)) => (false, e.into_py_err(py).into_value(py).into_any()),
                Err(join) if join.is_panic() => (
                    false,
                    panic_to_py(join.into_panic()).into_value(py).into_any(),
                ),
                // Aborted: the asyncio future was cancelled and is done.
                Err(_) => return,
            };
            // A closed loop refuses the callback: nobody awaits the outcome.
            let _ = event_loop
                .bind(py)
                .call_method1("call_soon_threadsafe", (setter, ok, value));
        });
    });
    future.call_method1("add_done_callback", (Py::new(py, on_cancel)?,))?;
    Ok(future)
}

/// The asyncio twin of [`_runtime_ping`]: an awaitable that runs a task on
/// the runtime, waits `delay_ms` on the runtime's timer, and answers (pid
/// that built the runtime, runtime thread name). A negative delay fails
/// inside the task with the core's `InvalidArgument`, to test how errors of
/// a future reach Python.
///
/// Internal, like [`_runtime_ping`].
#[pyfunction]
#[pyo3(signature = (delay_ms=1))]
pub fn _runtime_ping_async(py: Python<'_>, delay_ms: i64) -> PyResult<Bound<'_, PyAny>> {
    let pid = std::process::id();
    future_into_py(py, async move {
        let delay = u64::try_from(delay_ms).map_err(|_| {
            krabka_coordination::Error::InvalidArgument(format!(
                "delay_ms must not be negative, got {delay_ms}"
            ))
        })?;
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let name = std::thread::current().name().unwrap_or("").to_owned();
        Ok::<_, krabka_coordination::Error>((pid, name))
    })
}

/// The number of tasks alive on this process's runtime (0 when it has none
/// yet). Internal: lets the tests see that a cancelled call's task is gone.
#[pyfunction]
pub fn _runtime_alive_tasks(py: Python<'_>) -> usize {
    let pid = std::process::id();
    lock(py)
        .as_ref()
        .filter(|h| h.pid == pid)
        .map_or(0, |h| h.runtime.metrics().num_alive_tasks())
}
