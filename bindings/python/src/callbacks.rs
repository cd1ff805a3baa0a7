//! `on_event=`: a member's events handed to a Python callback, from its
//! registration to the end of its term (every term, for a leader loop).
//!
//! * **No runtime worker waits for the GIL.** A subscription is the core's
//!   event channel ([`krabka_coordination::events::channel`]) drained by a
//!   small task on the runtime, which only moves each event, in order, onto
//!   one queue per process. One thread, `krabka-events` ([`THREAD_NAME`]),
//!   takes the GIL per callback and calls it; a thousand acquires share it
//!   (no thread per subscription), as the log records share `krabka-log`
//!   ([`crate::logging`]) and the asyncio outcomes `krabka-asyncio`.
//! * **Where the callback runs**: for the blocking `Client`, on that thread
//!   (so it must be quick and thread-safe, and must not block: it holds up
//!   every other member's events); for the `AsyncClient`, on the event loop
//!   that started the operation, through `loop.call_soon_threadsafe`, so an
//!   asyncio program never sees a foreign thread. Either way one queue, read
//!   in order, so each member's events arrive in the order the member took
//!   its steps.
//! * **A callback that raises** is reported through `sys.unraisablehook`
//!   (`PyErr::write_unraisable`); the member goes on, and so do the later
//!   callbacks. An event for a loop that has closed is dropped.
//! * **Fork**: the queue and its thread are a [`PerProcess`]: a forked
//!   child makes its own on its first subscription (the parent's thread is
//!   not copied). A child cannot subscribe through an inherited client
//!   anyway: the client is a `ProcessBound`.

use std::sync::mpsc::Sender;
use std::sync::Arc;

use krabka_coordination::events::{self, Event, EventSender};
use krabka_coordination_bindings::PerProcess;
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;

use crate::events::PyEvent;
use crate::runtime::runtime;

/// The name of the thread that calls the callbacks.
pub const THREAD_NAME: &str = "krabka-events";

/// Where one subscription's events go.
struct Target {
    callback: Py<PyAny>,
    /// The asyncio loop to call it on; `None`: the dispatcher thread.
    event_loop: Option<Py<PyAny>>,
}

/// What the dispatcher thread is given.
enum Job {
    /// An event for a target.
    Event(Arc<Target>, Event),
    /// The subscription ended: its reference to the target, released on
    /// the dispatcher thread (with the GIL) rather than on a worker.
    Done(Arc<Target>),
}

/// The queue of this process's dispatcher thread.
struct Dispatcher {
    queue: Sender<Job>,
}

static DISPATCHER: PerProcess<Dispatcher> = PerProcess::new();

impl Dispatcher {
    fn start() -> std::io::Result<Dispatcher> {
        let (queue, jobs) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || {
                while let Ok(job) = jobs.recv() {
                    let mut job = Some(job);
                    // One take of the GIL per callback: the GIL is free
                    // between two of them.
                    crate::exit::attach(|py| {
                        if let Some(job) = job.take() {
                            run(py, job);
                        }
                    });
                    if let Some(job) = job {
                        // The interpreter is exiting or gone: nothing to
                        // call, and no reference to release safely.
                        std::mem::forget(job);
                    }
                }
            })?;
        Ok(Dispatcher { queue })
    }
}

/// Calls `callback(event)`, reporting what it raises as unraisable.
fn call(py: Python<'_>, callback: &Py<PyAny>, event: Py<PyEvent>) {
    if let Err(e) = callback.call1(py, (event,)) {
        e.write_unraisable(py, Some(callback.bind(py)));
    }
}

fn run(py: Python<'_>, job: Job) {
    let (target, event) = match job {
        Job::Event(target, event) => (target, event),
        Job::Done(target) => {
            drop(target);
            return;
        }
    };
    let event = match Py::new(py, PyEvent::new(&event)) {
        Ok(e) => e,
        Err(e) => {
            e.write_unraisable(py, Some(target.callback.bind(py)));
            return;
        }
    };
    match &target.event_loop {
        None => call(py, &target.callback, event),
        Some(event_loop) => {
            let on_loop = CallOnLoop {
                callback: target.callback.clone_ref(py),
                event,
            };
            let scheduled = Py::new(py, on_loop).and_then(|c| {
                event_loop
                    .bind(py)
                    .call_method1("call_soon_threadsafe", (c,))
            });
            // A closed loop refuses it: nobody is left to tell.
            drop(scheduled);
        }
    }
}

/// One callback, scheduled on an asyncio loop.
#[pyclass(frozen)]
struct CallOnLoop {
    callback: Py<PyAny>,
    event: Py<PyEvent>,
}

#[pymethods]
impl CallOnLoop {
    fn __call__(&self, py: Python<'_>) {
        call(py, &self.callback, self.event.clone_ref(py));
    }
}

/// The event sender of an `on_event=` callback (`None` when there is
/// none): `callback` is called with each event, on the dispatcher thread,
/// or on `event_loop` when one is given (see the module documentation).
/// A `callback` that is not callable raises `TypeError`; nothing is
/// started then.
pub fn subscribe(
    callback: Option<&Bound<'_, PyAny>>,
    event_loop: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<EventSender>> {
    let Some(callback) = callback.filter(|c| !c.is_none()) else {
        return Ok(None);
    };
    if !callback.is_callable() {
        return Err(PyTypeError::new_err(format!(
            "on_event must be a callable taking an Event, got {}",
            callback.get_type().name()?
        )));
    }
    let rt = runtime()?;
    let dispatcher = DISPATCHER.get_or_try_init(Dispatcher::start).map_err(|e| {
        PyRuntimeError::new_err(format!("cannot start the {THREAD_NAME} thread: {e}"))
    })?;
    let target = Arc::new(Target {
        callback: callback.clone().unbind(),
        event_loop: event_loop
            .filter(|l| !l.is_none())
            .map(|l| l.clone().unbind()),
    });
    let queue = dispatcher.queue.clone();
    let (tx, mut rx) = events::channel();
    // Ends when every sender is gone (the member's term over and its
    // handles dropped).
    drop(rt.spawn(async move {
        while let Some(event) = rx.recv().await {
            if queue.send(Job::Event(Arc::clone(&target), event)).is_err() {
                break;
            }
        }
        let _ = queue.send(Job::Done(target));
    }));
    Ok(Some(tx))
}
