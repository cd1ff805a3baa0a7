//! The library's tokio runtime (the shared crate's fork-aware holder) and
//! the blocking calls on it.
//!
//! Nothing starts when a program links the library or uses only the codec:
//! the first client builds the runtime, one per process, and a forked child
//! builds its own (handles of the parent refuse to work there). Every
//! blocking export runs its operation as a task on the runtime and waits on
//! the caller's thread ([`krabka_coordination_bindings::blocking`]); a C
//! caller has no interrupt to check, so the only early end is a timeout the
//! call itself takes.

use std::future::Future;
use std::time::{Duration, Instant};

use krabka_coordination::Error;
use krabka_coordination_bindings::blocking::{self, BoxFuture};
use krabka_coordination_bindings::{Blocked, Interruptible, OnInterrupt, RuntimeHolder};
use tokio::runtime::Runtime;

use crate::ffi::{krabka_result, Failure};

/// The name of the runtime's threads (`ps -T`, debuggers).
pub(crate) const THREAD_NAME: &str = "krabka-rt";

/// The runtime's worker threads: the work is I/O-bound; more than one keeps
/// a long poll from delaying a renewal.
pub(crate) const WORKER_THREADS: usize = 4;

/// The runtime of this process.
pub(crate) static RUNTIME: RuntimeHolder = RuntimeHolder::new(THREAD_NAME, WORKER_THREADS);

/// The runtime, built on first use and in a forked child.
pub fn runtime() -> Result<&'static Runtime, Failure> {
    RUNTIME.get().map_err(|e| {
        Failure::new(
            krabka_result::Fatal,
            format!("cannot start the krabka_coordination runtime: {e}"),
        )
    })
}

/// How often a blocking wait looks at its deadline.
const SLICE: Duration = Duration::from_millis(10);

/// Clean-up of a value that came after the caller stopped waiting.
pub type Settle<T> = fn(Result<T, Error>) -> Option<BoxFuture>;

/// What a blocked call that did not produce a value reports.
fn blocked<E>(b: Blocked<E>) -> Failure {
    match b {
        Blocked::Panicked(m) => Failure::new(
            krabka_result::Panic,
            format!("a krabka_coordination task panicked: {m}"),
        ),
        Blocked::Aborted => Failure::core(&Error::Cancelled),
        Blocked::OnRuntimeThread => Failure::new(
            krabka_result::Fatal,
            "a blocking krabka_coordination call was made on a thread of its runtime",
        ),
        Blocked::Interrupted(_) => Failure::new(krabka_result::TimedOut, "timed out"),
    }
}

/// Runs `fut` on the runtime and waits for it on this thread, as long as it
/// takes (the operation bounds itself).
pub fn block<F, T>(fut: F) -> Result<T, Failure>
where
    F: Future<Output = Result<T, Error>> + Send + 'static,
    T: Send + 'static,
{
    let rt = runtime()?;
    let mut never = || Ok::<(), std::convert::Infallible>(());
    let how = Interruptible {
        every: Duration::from_secs(3600),
        check: &mut never,
        on_interrupt: OnInterrupt::Abort,
        settle: None,
    };
    match blocking::block_on(rt, fut, how) {
        Ok(r) => r.map_err(Failure::from),
        Err(b) => Err(blocked(b)),
    }
}

/// Runs `fut` on the runtime and waits for it up to `limit` (none: as long
/// as it takes). At the limit, `on_timeout` says what happens to the
/// operation (aborted, cancelled with a grace, left to finish) and `settle`
/// cleans up a value that comes too late; the call then reports
/// `KRABKA_RESULT_TIMED_OUT` with `what` in the message.
pub fn block_until<F, T>(
    fut: F,
    limit: Option<Duration>,
    on_timeout: OnInterrupt,
    settle: Option<Settle<T>>,
    what: &str,
) -> Result<T, Failure>
where
    F: Future<Output = Result<T, Error>> + Send + 'static,
    T: Send + 'static,
{
    let rt = runtime()?;
    let deadline = limit.map(|d| Instant::now() + d);
    let mut fired = false;
    // Reports the deadline once: a second report would abort the grace.
    let mut check = || match deadline {
        Some(at) if !fired && Instant::now() >= at => {
            fired = true;
            Err(())
        }
        _ => Ok(()),
    };
    let how = Interruptible {
        every: SLICE,
        check: &mut check,
        on_interrupt: on_timeout,
        settle,
    };
    match blocking::block_on(rt, fut, how) {
        Ok(r) => r.map_err(Failure::from),
        Err(Blocked::Interrupted(())) => Err(Failure::new(
            krabka_result::TimedOut,
            format!(
                "{what} timed out after {} seconds",
                krabka_coordination_bindings::args::number(limit.unwrap_or_default().as_secs_f64())
            ),
        )),
        Err(b) => Err(blocked(b)),
    }
}

/// Waits up to `timeout` seconds (`KRABKA_NO_TIMEOUT`: no limit) until the
/// library has no task left running: every handle was freed and the work
/// they left in the background (a renewal loop ending, an aborted request's
/// reader, a resign's last step, the destruction of a freed client's
/// librdkafka producer and consumer) is done. Returns `KRABKA_RESULT_OK` once
/// idle (at once if no client was ever made), `KRABKA_RESULT_TIMED_OUT`
/// otherwise. For a program, or a leak checker, that wants nothing of the
/// library running when it exits, in the spirit of librdkafka's
/// `rd_kafka_wait_destroyed`; the runtime's own threads stay (they are made
/// once per process). Blocks the calling thread; any thread but a callback's
/// while its leadership lives.
#[no_mangle]
pub extern "C" fn krabka_wait_idle(timeout: f64) -> krabka_result {
    crate::ffi::guard(std::ptr::null_mut(), || {
        let limit = crate::client::timeout_arg(timeout)?;
        let deadline = limit.map(|d| Instant::now() + d);
        loop {
            // Tasks, and the librdkafka clients of freed handles being
            // destroyed on the blocking pool (which tokio does not count
            // as tasks).
            let drops = krabka_coordination::transport::kafka::background_drops();
            if RUNTIME.alive_tasks() == 0 && drops == 0 {
                return Ok(());
            }
            if deadline.is_some_and(|at| Instant::now() >= at) {
                return Err(Failure::new(
                    krabka_result::TimedOut,
                    format!(
                        "{} tasks are still running, {drops} Kafka clients still being destroyed",
                        RUNTIME.alive_tasks()
                    ),
                ));
            }
            std::thread::sleep(SLICE);
        }
    })
}
