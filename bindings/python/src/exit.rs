//! Interpreter exit and the package's own threads.
//!
//! Four kinds of threads that Python did not start call into Python: the
//! `krabka-events` thread (`on_event=` callbacks), `krabka-asyncio` (asyncio
//! outcomes), `krabka-log` (`logging` records), and the core's threads that
//! ask an `oauth_token=` callable for a token. Once the interpreter
//! finalizes, a thread that asks for the GIL is ended by CPython with
//! `pthread_exit`, whose unwinding cannot cross the Rust frames below it:
//! the process aborts (as when a callback's `print` releases the GIL while
//! the main thread exits, and takes it back during finalization).
//!
//! So every such call goes through [`attach`], and the package registers
//! [`before_exit`] with `atexit` at import. `atexit` runs before
//! finalization, while these threads may still take the GIL: it closes the
//! gate (no thread enters Python after that: the event, record or outcome
//! is dropped, a token request fails) and waits, with the GIL released, up
//! to [`EXIT_WAIT`] for the calls already inside to return. Registered at
//! import, it runs after the program's own `atexit` handlers (they run
//! last-registered first), so a handler that resigns a role still gets its
//! events.
//!
//! After `fork()` the child starts with the gate open and nobody inside
//! (the parent's threads are not copied).

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

/// The longest [`before_exit`] waits for the calls inside Python to return.
pub const EXIT_WAIT: Duration = Duration::from_secs(5);

/// The gate's state, for the process `pid`.
struct Gate {
    pid: u32,
    closed: bool,
    inside: usize,
}

static GATE: Mutex<Gate> = Mutex::new(Gate {
    pid: 0,
    closed: false,
    inside: 0,
});
static LEFT: Condvar = Condvar::new();

fn lock() -> MutexGuard<'static, Gate> {
    let mut gate = GATE.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    if gate.pid != pid {
        // A new process (the first call, or a forked child).
        *gate = Gate {
            pid,
            closed: false,
            inside: 0,
        };
    }
    gate
}

/// Leaves the gate when dropped (also when `f` panics).
struct Inside;

impl Drop for Inside {
    fn drop(&mut self) {
        let mut gate = lock();
        gate.inside = gate.inside.saturating_sub(1);
        LEFT.notify_all();
    }
}

/// Runs `f` with the GIL, from a thread Python did not start, unless the
/// interpreter is exiting (or gone): then `None`, and nothing of Python is
/// touched.
pub fn attach<R>(f: impl FnOnce(Python<'_>) -> R) -> Option<R> {
    {
        let mut gate = lock();
        if gate.closed {
            return None;
        }
        gate.inside += 1;
    }
    let _inside = Inside;
    Python::try_attach(f)
}

// The docstring is the stub's (tests/test_docs.py compares them): the gate
// is closed for good, the wait is [`EXIT_WAIT`] with the GIL released, and
// a second call returns at once.
/// Closes the gate of the package's own threads into Python and waits
/// (at most 5 s) for the calls inside to return; registered with `atexit`
/// by the package.
#[pyfunction(name = "_before_exit")]
pub fn before_exit(py: Python<'_>) {
    py.detach(|| {
        let mut gate = lock();
        gate.closed = true;
        let deadline = Instant::now() + EXIT_WAIT;
        while gate.inside > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            gate = LEFT
                .wait_timeout(gate, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    });
}
