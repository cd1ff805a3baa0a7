//! Awaiting an operation on asyncio: the operation runs on the runtime and
//! its outcome is handed to an `asyncio.Future` of the running loop.
//!
//! * **No worker waits for the GIL.** A finished task's outcome is handed to
//!   the loop by one delivery thread per process ([`Deliverer`]), which
//!   takes the GIL to call `loop.call_soon_threadsafe`, for every outcome
//!   waiting at that moment at once; the runtime's workers go on renewing
//!   leases while a Python thread holds the GIL in a long C call. One thread,
//!   not tokio's blocking pool: a thousand acquires ending together, or the
//!   events of a thousand held roles, would make up to a thread each.
//! * **Cancelling** the asyncio future does what the operation's
//!   [`OnInterrupt`] says: aborts it, fires the core's cancellation token
//!   (an acquire then deregisters its member), or lets it finish.
//! * **Nothing is dropped on the floor.** An outcome that finds its future
//!   cancelled (before or after it was handed to the loop) is settled
//!   ([`crate::pending::Outcome::abandon`]): a leadership won in the instant
//!   of the cancel is resigned.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use krabka_coordination_bindings::blocking::panic_message;
use krabka_coordination_bindings::per_process::PerProcess;
use krabka_coordination_bindings::OnInterrupt;
use pyo3::panic::PanicException;
use pyo3::prelude::*;
use tokio::runtime::Handle;
use tokio::task::AbortHandle;

use crate::error::error_to_py;
use crate::pending::{settle, Op, OpResult};
use crate::runtime::runtime;

/// What a finished task hands to the loop.
enum Delivered {
    /// The operation's result.
    Value(OpResult),
    /// The task panicked (the message).
    Panic(String),
}

impl Delivered {
    /// Settles a value nobody will take, on the runtime.
    fn abandon(self, handle: &Handle) {
        if let Delivered::Value(value) = self {
            if let Some(cleanup) = settle(value) {
                drop(handle.spawn(cleanup));
            }
        }
    }
}

/// Sets the outcome on the asyncio future, on the loop's thread
/// (`loop.call_soon_threadsafe(setter)`).
#[pyclass(frozen)]
struct SetOutcome {
    future: Py<PyAny>,
    outcome: Mutex<Option<Delivered>>,
    handle: Handle,
}

impl SetOutcome {
    fn take(&self) -> Option<Delivered> {
        self.outcome
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}

#[pymethods]
impl SetOutcome {
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        let Some(outcome) = self.take() else {
            return Ok(());
        };
        let future = self.future.bind(py);
        if future.call_method0("done")?.is_truthy()? {
            // Cancelled after the task finished.
            outcome.abandon(&self.handle);
            return Ok(());
        }
        let result = match outcome {
            Delivered::Value(Ok(value)) => value.into_py(py),
            Delivered::Value(Err(e)) => Err(error_to_py(py, &e)),
            Delivered::Panic(message) => Err(PanicException::new_err((message,))),
        };
        match result {
            Ok(value) => future.call_method1("set_result", (value,))?,
            Err(e) => future.call_method1("set_exception", (e.into_value(py),))?,
        };
        Ok(())
    }
}

/// The done-callback of the asyncio future: on a cancel, stops the task as
/// its operation allows.
#[pyclass(frozen)]
struct OnCancel {
    task: AbortHandle,
    on_interrupt: OnInterrupt,
    cancelled: Arc<AtomicBool>,
}

#[pymethods]
impl OnCancel {
    fn __call__(&self, future: Bound<'_, PyAny>) -> PyResult<()> {
        if future.call_method0("cancelled")?.is_truthy()? {
            self.cancelled.store(true, Ordering::SeqCst);
            match &self.on_interrupt {
                OnInterrupt::Abort => self.task.abort(),
                OnInterrupt::Cancel(token, _) => token.cancel(),
                OnInterrupt::Finish(_) => {}
            }
        }
        Ok(())
    }
}

/// An outcome on its way to its loop.
struct Delivery {
    event_loop: Py<PyAny>,
    future: Py<PyAny>,
    outcome: Delivered,
    handle: Handle,
}

/// The delivery thread of this process (see the module docs): outcomes
/// queue on a channel; the thread takes the GIL once for all that wait.
/// Made on first use and again in a forked child, whose copy of the parent's
/// channel has no thread behind it ([`PerProcess`]).
struct Deliverer {
    queue: std::sync::mpsc::Sender<Delivery>,
}

static DELIVERER: PerProcess<Deliverer> = PerProcess::new();

/// The most outcomes handed over under one take of the GIL.
const DELIVERY_BATCH: usize = 256;

impl Deliverer {
    fn start() -> std::io::Result<Deliverer> {
        let (queue, waiting) = std::sync::mpsc::channel::<Delivery>();
        std::thread::Builder::new()
            .name("krabka-asyncio".into())
            .spawn(move || {
                while let Ok(first) = waiting.recv() {
                    let mut batch = vec![first];
                    while batch.len() < DELIVERY_BATCH {
                        match waiting.try_recv() {
                            Ok(d) => batch.push(d),
                            Err(_) => break,
                        }
                    }
                    deliver(batch);
                }
            })?;
        Ok(Deliverer { queue })
    }
}

/// Queues `delivery` for the delivery thread; settles it when the thread
/// cannot be started (nobody could await it).
fn send(delivery: Delivery) {
    match DELIVERER.get_or_try_init(Deliverer::start) {
        Ok(d) => {
            if let Err(std::sync::mpsc::SendError(d)) = d.queue.send(delivery) {
                d.outcome.abandon(&d.handle);
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "could not start the asyncio delivery thread");
            delivery.outcome.abandon(&delivery.handle);
        }
    }
}

/// Hands each outcome of `batch` to its loop under one take of the GIL; runs
/// on the delivery thread, where waiting for the GIL holds up no runtime
/// worker. An outcome its loop refuses (closed), or that finds the
/// interpreter gone, is settled.
fn deliver(batch: Vec<Delivery>) {
    let mut refused: Vec<(Delivered, Handle)> = Vec::new();
    let mut batch = Some(batch);
    let attached = crate::exit::attach(|py| {
        for d in batch.take().into_iter().flatten() {
            let Delivery {
                event_loop,
                future,
                outcome,
                handle,
            } = d;
            let setter = SetOutcome {
                future,
                outcome: Mutex::new(Some(outcome)),
                handle: handle.clone(),
            };
            let setter = match Py::new(py, setter) {
                Ok(s) => s,
                Err(_) => continue,
            };
            if event_loop
                .bind(py)
                .call_method1("call_soon_threadsafe", (setter.clone_ref(py),))
                .is_err()
            {
                // A closed loop: nobody awaits the outcome.
                if let Some(outcome) = setter.get().take() {
                    refused.push((outcome, handle));
                }
            }
        }
    });
    if attached.is_none() {
        // No interpreter to attach to: nobody awaits any of them.
        for d in batch.into_iter().flatten() {
            refused.push((d.outcome, d.handle));
        }
    }
    for (outcome, handle) in refused {
        outcome.abandon(&handle);
    }
}

/// Starts `op` on the runtime and returns an `asyncio.Future` of the
/// running loop for its outcome. Must be called with a running loop
/// (otherwise `RuntimeError`, as `asyncio.get_running_loop()` raises it).
pub fn spawn<'py>(py: Python<'py>, op: Op) -> PyResult<Bound<'py, PyAny>> {
    let event_loop = py.import("asyncio")?.call_method0("get_running_loop")?;
    let future = event_loop.call_method0("create_future")?;
    let rt = runtime()?;
    let Op { fut, on_interrupt } = op;
    let cancelled = Arc::new(AtomicBool::new(false));
    let task = rt.spawn(fut);
    let on_cancel = OnCancel {
        task: task.abort_handle(),
        on_interrupt,
        cancelled: cancelled.clone(),
    };
    let (event_loop, target) = (event_loop.unbind(), future.clone().unbind());
    // The outer task waits for the inner one, so that a panic is delivered
    // like any other outcome.
    rt.spawn(async move {
        let outcome = match task.await {
            Ok(value) => Delivered::Value(value),
            Err(e) if e.is_panic() => Delivered::Panic(panic_message(e.into_panic())),
            // Aborted by a cancel: the future is done already.
            Err(_) => return,
        };
        let handle = Handle::current();
        if cancelled.load(Ordering::SeqCst) {
            outcome.abandon(&handle);
            return;
        }
        send(Delivery {
            event_loop,
            future: target,
            outcome,
            handle,
        });
    });
    future.call_method1("add_done_callback", (Py::new(py, on_cancel)?,))?;
    Ok(future)
}
