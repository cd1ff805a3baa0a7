//! Running a future to completion from a host thread that must stay
//! interruptible (Ctrl-C in Python, a signal in a C program).
//!
//! [`block_on`] spawns the future on the runtime and waits for it in slices
//! of [`Interruptible::every`]; between slices it calls the host's
//! `check_interrupt`. What happens when that reports an interrupt is the
//! call's [`OnInterrupt`]:
//!
//! * [`OnInterrupt::Abort`]: the task is aborted at once (a describe, a wait).
//! * [`OnInterrupt::Cancel`]: a cancellation token is fired and the future
//!   gets a bounded grace period to wind down (an acquire deregisters its
//!   member); a second interrupt, or the end of the grace, aborts it.
//! * [`OnInterrupt::Finish`]: the future is left to finish within the grace
//!   period (a guarded write or a resign, which must not stop halfway).
//!
//! A value the future produced after the interrupt has nobody to take it;
//! [`Interruptible::settle`] turns it into clean-up (a leadership won in
//! the instant of the interrupt is resigned), run within what is left of
//! the grace period.
//!
//! The host releases its interpreter lock around the call and takes it
//! inside `check_interrupt` only.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

/// A boxed future of clean-up work.
pub type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// What an interrupt does to the running future.
#[derive(Debug, Clone)]
pub enum OnInterrupt {
    /// Abort the task at once.
    Abort,
    /// Fire the token, then wait up to the grace period for the future.
    Cancel(CancellationToken, Duration),
    /// Let the future finish, waiting up to the grace period.
    Finish(Duration),
}

/// How [`block_on`] waits and reacts to interrupts.
pub struct Interruptible<'a, T, E> {
    /// How often the host's interrupt check runs.
    pub every: Duration,
    /// The host's check: `Err` is the interrupt to raise.
    pub check: &'a mut dyn FnMut() -> Result<(), E>,
    /// What an interrupt does.
    pub on_interrupt: OnInterrupt,
    /// Clean-up for a value produced after an interrupt (nobody takes it).
    pub settle: Option<fn(T) -> Option<BoxFuture>>,
}

/// Why [`block_on`] returned without the future's value.
#[derive(Debug)]
pub enum Blocked<E> {
    /// The host's check reported an interrupt (after the reaction to it).
    Interrupted(E),
    /// The future panicked; the panic message.
    Panicked(String),
    /// The task was aborted by someone else (the runtime shut down).
    Aborted,
    /// Called on a thread of a tokio runtime, which must never block.
    OnRuntimeThread,
}

impl<E: std::fmt::Display> std::fmt::Display for Blocked<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Blocked::Interrupted(e) => write!(f, "interrupted: {e}"),
            Blocked::Panicked(m) => write!(f, "a krabka_coordination task panicked: {m}"),
            Blocked::Aborted => f.write_str("the task was aborted"),
            Blocked::OnRuntimeThread => f.write_str(
                "a blocking krabka_coordination call was made on a thread of its runtime",
            ),
        }
    }
}

/// The message of a task's panic payload.
pub fn panic_message(payload: Box<dyn std::any::Any + Send + 'static>) -> String {
    if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else {
        "a task panicked".to_owned()
    }
}

/// Runs `fut` on `rt` and waits for it, checking for interrupts (see the
/// module documentation).
pub fn block_on<F, T, E>(
    rt: &Runtime,
    fut: F,
    how: Interruptible<'_, T, E>,
) -> Result<T, Blocked<E>>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(Blocked::OnRuntimeThread);
    }
    let Interruptible {
        every,
        check,
        on_interrupt,
        settle,
    } = how;
    let mut task = rt.spawn(fut);
    // Once interrupted: the interrupt to raise and the end of the grace.
    let mut interrupted: Option<(E, Instant)> = None;
    loop {
        let waited = rt.block_on(async { tokio::time::timeout(every, &mut task).await });
        let joined = match waited {
            Ok(joined) => joined,
            Err(_elapsed) => {
                match check() {
                    Err(interrupt) => {
                        let grace = match (&on_interrupt, &interrupted) {
                            (_, Some(_)) | (OnInterrupt::Abort, None) => None,
                            (OnInterrupt::Cancel(token, grace), None) => {
                                token.cancel();
                                Some(*grace)
                            }
                            (OnInterrupt::Finish(grace), None) => Some(*grace),
                        };
                        match grace {
                            Some(grace) => interrupted = Some((interrupt, Instant::now() + grace)),
                            None => {
                                task.abort();
                                return Err(Blocked::Interrupted(interrupt));
                            }
                        }
                    }
                    Ok(()) => {
                        if interrupted
                            .as_ref()
                            .is_some_and(|(_, until)| Instant::now() >= *until)
                        {
                            task.abort();
                            let (interrupt, _) = interrupted.take().expect("checked above");
                            return Err(Blocked::Interrupted(interrupt));
                        }
                    }
                }
                continue;
            }
        };
        let value = match joined {
            Ok(value) => value,
            Err(e) if e.is_panic() => return Err(Blocked::Panicked(panic_message(e.into_panic()))),
            Err(_) => return Err(Blocked::Aborted),
        };
        let Some((interrupt, until)) = interrupted else {
            return Ok(value);
        };
        // Finished after the interrupt: nobody takes the value.
        if let Some(cleanup) = settle.and_then(|settle| settle(value)) {
            let left = until.saturating_duration_since(Instant::now());
            let cleanup = rt.spawn(cleanup);
            let _ = rt.block_on(async { tokio::time::timeout(left, cleanup).await });
        }
        return Err(Blocked::Interrupted(interrupt));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    fn rt() -> Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    const EVERY: Duration = Duration::from_millis(5);

    fn never_interrupted() -> impl FnMut() -> Result<(), &'static str> {
        || Ok(())
    }

    /// Reports one interrupt, at the first check.
    fn interrupt_once() -> impl FnMut() -> Result<(), &'static str> {
        let mut n = 0;
        move || {
            n += 1;
            if n == 1 {
                Err("interrupt")
            } else {
                Ok(())
            }
        }
    }

    /// Reports an interrupt from the `after`-th check on.
    fn interrupt_after(after: usize) -> impl FnMut() -> Result<(), &'static str> {
        let mut n = 0;
        move || {
            n += 1;
            if n >= after {
                Err("interrupt")
            } else {
                Ok(())
            }
        }
    }

    #[test]
    fn returns_the_value() {
        let rt = rt();
        let mut check = never_interrupted();
        let how = Interruptible {
            every: EVERY,
            check: &mut check,
            on_interrupt: OnInterrupt::Abort,
            settle: None,
        };
        let v = block_on(
            &rt,
            async {
                tokio::time::sleep(Duration::from_millis(30)).await;
                7
            },
            how,
        );
        assert_eq!(v.unwrap(), 7);
    }

    #[test]
    fn abort_stops_the_task_at_the_interrupt() {
        let rt = rt();
        let finished = Arc::new(AtomicBool::new(false));
        let f = finished.clone();
        let mut check = interrupt_after(2);
        let how = Interruptible {
            every: EVERY,
            check: &mut check,
            on_interrupt: OnInterrupt::Abort,
            settle: None,
        };
        let r = block_on(
            &rt,
            async move {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                f.store(true, Ordering::SeqCst);
            },
            how,
        );
        assert!(matches!(r, Err(Blocked::Interrupted("interrupt"))));
        assert!(!finished.load(Ordering::SeqCst));
    }

    #[test]
    fn cancel_fires_the_token_and_waits_for_the_wind_down() {
        let rt = rt();
        let token = CancellationToken::new();
        let wound_down = Arc::new(AtomicBool::new(false));
        let (t, w) = (token.clone(), wound_down.clone());
        let mut check = interrupt_once();
        let how = Interruptible {
            every: EVERY,
            check: &mut check,
            on_interrupt: OnInterrupt::Cancel(token.clone(), Duration::from_secs(3600)),
            settle: None,
        };
        let r = block_on(
            &rt,
            async move {
                t.cancelled().await;
                // Clean-up that takes a while, after the cancel.
                tokio::time::sleep(Duration::from_millis(50)).await;
                w.store(true, Ordering::SeqCst);
            },
            how,
        );
        assert!(matches!(r, Err(Blocked::Interrupted(_))));
        assert!(token.is_cancelled());
        assert!(
            wound_down.load(Ordering::SeqCst),
            "returned before the wind-down"
        );
    }

    #[test]
    fn a_second_interrupt_during_the_grace_aborts() {
        let rt = rt();
        let token = CancellationToken::new();
        let mut check = interrupt_after(1); // every check interrupts
        let how = Interruptible {
            every: EVERY,
            check: &mut check,
            on_interrupt: OnInterrupt::Cancel(token.clone(), Duration::from_secs(3600)),
            settle: None,
        };
        // A future that ignores the token: only the abort ends it.
        let r = block_on(
            &rt,
            async { tokio::time::sleep(Duration::from_secs(3600)).await },
            how,
        );
        assert!(matches!(r, Err(Blocked::Interrupted(_))));
        assert!(token.is_cancelled());
    }

    #[test]
    fn the_grace_is_bounded() {
        let rt = rt();
        let mut check = interrupt_once();
        let how = Interruptible {
            every: EVERY,
            check: &mut check,
            on_interrupt: OnInterrupt::Finish(Duration::from_millis(50)),
            settle: None,
        };
        let r = block_on(
            &rt,
            async { tokio::time::sleep(Duration::from_secs(3600)).await },
            how,
        );
        assert!(matches!(r, Err(Blocked::Interrupted("interrupt"))));
    }

    #[test]
    fn finish_lets_the_future_complete_then_settles_its_value() {
        static SETTLED: AtomicUsize = AtomicUsize::new(0);
        fn settle(v: usize) -> Option<BoxFuture> {
            Some(Box::pin(async move {
                SETTLED.store(v, Ordering::SeqCst);
            }))
        }
        let rt = rt();
        let mut check = interrupt_once();
        let how = Interruptible {
            every: EVERY,
            check: &mut check,
            on_interrupt: OnInterrupt::Finish(Duration::from_secs(3600)),
            settle: Some(settle),
        };
        let r = block_on(
            &rt,
            async {
                tokio::time::sleep(Duration::from_millis(40)).await;
                42
            },
            how,
        );
        assert!(matches!(r, Err(Blocked::Interrupted("interrupt"))));
        assert_eq!(
            SETTLED.load(Ordering::SeqCst),
            42,
            "the late value was not settled"
        );
    }

    #[test]
    fn a_panic_is_reported_with_its_message() {
        let rt = rt();
        let mut check = never_interrupted();
        let how = Interruptible {
            every: EVERY,
            check: &mut check,
            on_interrupt: OnInterrupt::Abort,
            settle: None,
        };
        let r: Result<(), _> = block_on(&rt, async { panic!("boom") }, how);
        match r {
            Err(Blocked::Panicked(m)) => assert_eq!(m, "boom"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn refuses_to_block_a_runtime_thread() {
        let outer = rt();
        let inner = rt();
        let r = outer.block_on(async {
            let mut check = never_interrupted();
            let how = Interruptible {
                every: EVERY,
                check: &mut check,
                on_interrupt: OnInterrupt::Abort,
                settle: None,
            };
            block_on(&inner, async { 1 }, how)
        });
        assert!(matches!(r, Err(Blocked::OnRuntimeThread)));
        assert!(Blocked::<&str>::OnRuntimeThread
            .to_string()
            .contains("thread of its runtime"));
        std::thread::spawn(move || drop(inner)).join().unwrap();
    }
}
