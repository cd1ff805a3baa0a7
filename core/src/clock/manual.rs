//! [`ManualClock`]: a clock that only moves when a test moves it, with
//! timers that fire when it passes their deadline.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::sync::Notify;

use super::{duration_millis, Clock, Sleep};

/// A clock that only moves when a test moves it.
///
/// Clones share one time and one set of timers. It keeps a wall clock, a
/// monotonic clock (that of its timers) and a boot clock
/// ([`Clock::boot_millis`]): [`ManualClock::advance`] and a forward
/// [`ManualClock::set`] move all three (time passes),
/// [`ManualClock::step_wall`] and a backward `set` move the wall clock alone
/// (a clock step), and [`ManualClock::suspend`] moves the wall and the boot
/// clock but not the monotonic one (the machine slept: its monotonic timers
/// did not run). Stepping back fires nothing, and a timer that already fired
/// stays fired.
///
/// ```
/// # use krabka_coordination::{Clock, ManualClock};
/// # use std::time::Duration;
/// # tokio_test_block(async {
/// let clock = ManualClock::new(1_000);
/// let c = clock.clone();
/// let task = tokio::spawn(async move { c.sleep_until(1_500).await; c.now_millis() });
/// clock.wait_for_sleepers(1).await; // the task is now blocked on its timer
/// clock.advance(Duration::from_millis(500));
/// assert_eq!(task.await.unwrap(), 1_500);
/// # });
/// # fn tokio_test_block(f: impl std::future::Future<Output = ()>) {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Clone)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

struct ManualInner {
    state: Mutex<ManualState>,
    /// Signalled (outside the lock) whenever the number of pending timers changes.
    sleepers_changed: Notify,
}

struct ManualState {
    now: i64,
    /// Monotonic milliseconds: the clock of the monotonic timers.
    mono: i64,
    /// Boot-clock milliseconds: monotonic time plus the time suspended.
    boot: i64,
    next_id: u64,
    /// Pending wall-clock timers by (deadline, registration order). A timer
    /// is removed when it fires or when its future is dropped.
    timers: BTreeMap<(i64, u64), Waker>,
    /// Pending monotonic timers by (monotonic deadline, registration order).
    mono_timers: BTreeMap<(i64, u64), Waker>,
}

impl ManualState {
    /// The earliest pending deadline, as a wall-clock instant (a monotonic
    /// timer's deadline seen from the wall clock as it reads now).
    fn next_deadline(&self) -> Option<i64> {
        let wall = self.timers.keys().next().map(|k| k.0);
        let mono = self
            .mono_timers
            .keys()
            .next()
            .map(|k| self.now.saturating_add(k.0.saturating_sub(self.mono)));
        match (wall, mono) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn pending(&self) -> usize {
        self.timers.len() + self.mono_timers.len()
    }
}

impl ManualClock {
    /// A manual clock that reads `start_millis` until it is moved.
    pub fn new(start_millis: i64) -> Self {
        ManualClock {
            inner: Arc::new(ManualInner {
                state: Mutex::new(ManualState {
                    now: start_millis,
                    mono: 0,
                    boot: 0,
                    next_id: 0,
                    timers: BTreeMap::new(),
                    mono_timers: BTreeMap::new(),
                }),
                sleepers_changed: Notify::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, ManualState> {
        lock_state(&self.inner)
    }

    /// Sets the wall time to `millis` and fires every timer due at or before
    /// it, in deadline order (ties in registration order). Setting it forward
    /// moves the monotonic and the boot time by as much (time passed);
    /// setting it backwards is a wall-clock step and fires nothing.
    pub fn set(&self, millis: i64) {
        let due = {
            let mut st = self.lock();
            if millis > st.now {
                let passed = millis.saturating_sub(st.now);
                st.mono = st.mono.saturating_add(passed);
                st.boot = st.boot.saturating_add(passed);
            }
            st.now = millis;
            take_due(&mut st)
        };
        self.wake(due);
    }

    /// Steps the wall clock by `delta_millis` (forward or back) without any
    /// time passing: the monotonic clock stays, so only wall-clock timers
    /// (those of [`Clock::sleep_until`]) may fire.
    pub fn step_wall(&self, delta_millis: i64) {
        let due = {
            let mut st = self.lock();
            st.now = st.now.saturating_add(delta_millis);
            take_due(&mut st)
        };
        self.wake(due);
    }

    /// The machine sleeps for `d` and resumes: the wall and the boot clock
    /// move forward by `d` (saturating), the monotonic clock does not, so no
    /// monotonic timer ([`Clock::sleep`]) fires, as tokio's timers do not
    /// run while a machine is suspended. Wall-clock timers
    /// ([`Clock::sleep_until`]) now due fire, as [`SystemClock`](super::SystemClock)'s re-read
    /// the wall clock within a slice of the resume.
    pub fn suspend(&self, d: Duration) {
        let due = {
            let mut st = self.lock();
            let slept = duration_millis(d);
            st.now = st.now.saturating_add(slept);
            st.boot = st.boot.saturating_add(slept);
            take_due(&mut st)
        };
        self.wake(due);
    }

    fn wake(&self, due: Vec<Waker>) {
        // The lock is released: a woken task may read or use the clock at once.
        let fired = !due.is_empty();
        for w in due {
            w.wake();
        }
        if fired {
            self.inner.sleepers_changed.notify_waiters();
        }
    }

    /// Moves the wall, the monotonic and the boot time forward by `d`
    /// (saturating) and fires the due timers.
    pub fn advance(&self, d: Duration) {
        let now = self.now_millis();
        self.set(now.saturating_add(duration_millis(d)));
    }

    /// Moves the time to the earliest pending deadline, if it is in the future,
    /// and fires what is due; returns the new time, or `None` (and leaves the
    /// time alone) when no timer is pending.
    pub fn advance_to_next_deadline(&self) -> Option<i64> {
        let (now, next) = {
            let st = self.lock();
            (st.now, st.next_deadline())
        };
        let next = next?;
        let to = next.max(now);
        self.set(to);
        Some(to)
    }

    /// The number of timers that are registered and have not fired: every
    /// polled, pending [`Clock::sleep_until`] or [`Clock::sleep`] future that
    /// is still alive.
    pub fn pending_timers(&self) -> usize {
        self.lock().pending()
    }

    /// How many timers have been set on this clock since it was made (a
    /// count that moves whenever code under test sets a timer).
    pub fn timers_set(&self) -> u64 {
        self.lock().next_id
    }

    /// The earliest deadline of a pending timer, as a wall-clock instant.
    pub fn next_deadline(&self) -> Option<i64> {
        self.lock().next_deadline()
    }

    /// Resolves once at least `n` timers are pending, that is once the code
    /// under test is blocked on its timers. Waits on a notification, not by
    /// polling the time.
    pub async fn wait_for_sleepers(&self, n: usize) {
        loop {
            let notified = self.inner.sleepers_changed.notified();
            tokio::pin!(notified);
            // Register for the next notification before reading the count, so
            // a change between the read and the await is not lost.
            notified.as_mut().enable();
            if self.pending_timers() >= n {
                return;
            }
            notified.await;
        }
    }
}

fn lock_state(inner: &ManualInner) -> MutexGuard<'_, ManualState> {
    // A panic while the lock is held cannot leave the state half-updated (each
    // critical section is a single map operation), so a poisoned lock is used as is.
    inner.state.lock().unwrap_or_else(|e| e.into_inner())
}

fn take_due(st: &mut ManualState) -> Vec<Waker> {
    // Both timelines fire in deadline order; a wall-clock timer and a
    // monotonic one are ordered by the wall-clock instant each stands for.
    let mut due: Vec<(i64, u64, Waker)> = Vec::new();
    while let Some(entry) = st.timers.first_entry() {
        if entry.key().0 > st.now {
            break;
        }
        let (at, id) = *entry.key();
        due.push((at, id, entry.remove()));
    }
    while let Some(entry) = st.mono_timers.first_entry() {
        if entry.key().0 > st.mono {
            break;
        }
        let (at, id) = *entry.key();
        let wall = st.now.saturating_add(at.saturating_sub(st.mono));
        due.push((wall, id, entry.remove()));
    }
    due.sort_by_key(|(at, id, _)| (*at, *id));
    due.into_iter().map(|(_, _, w)| w).collect()
}

impl Default for ManualClock {
    /// A manual clock at epoch millisecond 0.
    fn default() -> Self {
        ManualClock::new(0)
    }
}

impl std::fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.lock();
        f.debug_struct("ManualClock")
            .field("now", &st.now)
            .field("elapsed", &st.mono)
            .field("boot", &st.boot)
            .field("pending_timers", &st.pending())
            .finish()
    }
}

impl Clock for ManualClock {
    fn now_millis(&self) -> i64 {
        self.lock().now
    }

    fn elapsed_millis(&self) -> i64 {
        self.lock().mono
    }

    fn boot_millis(&self) -> i64 {
        self.lock().boot
    }

    fn sleep_until(&self, at_millis: i64) -> Sleep {
        Box::pin(ManualSleep {
            inner: Arc::clone(&self.inner),
            at: at_millis,
            monotonic: false,
            id: None,
        })
    }

    fn sleep(&self, d: Duration) -> Sleep {
        let at = self.elapsed_millis().saturating_add(duration_millis(d));
        Box::pin(ManualSleep {
            inner: Arc::clone(&self.inner),
            at,
            monotonic: true,
            id: None,
        })
    }
}

/// The timer future of a [`ManualClock`].
struct ManualSleep {
    inner: Arc<ManualInner>,
    at: i64,
    /// `at` is monotonic time (else wall-clock time).
    monotonic: bool,
    /// Set once the timer is registered.
    id: Option<u64>,
}

impl Future for ManualSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let mut guard = lock_state(&this.inner);
        let st = &mut *guard;
        let (now, timers) = if this.monotonic {
            (st.mono, &mut st.mono_timers)
        } else {
            (st.now, &mut st.timers)
        };
        match this.id {
            Some(id) => match timers.get_mut(&(this.at, id)) {
                // Fired (removed by `set`): done, even if time went back since.
                None => {
                    this.id = None;
                    Poll::Ready(())
                }
                Some(w) => {
                    if !w.will_wake(cx.waker()) {
                        let old = std::mem::replace(w, cx.waker().clone());
                        // Drop the old waker outside the lock: dropping it may run
                        // code that uses this clock.
                        drop(guard);
                        drop(old);
                    }
                    Poll::Pending
                }
            },
            None if now >= this.at => Poll::Ready(()),
            None => {
                let id = st.next_id;
                st.next_id += 1;
                let timers = if this.monotonic {
                    &mut st.mono_timers
                } else {
                    &mut st.timers
                };
                timers.insert((this.at, id), cx.waker().clone());
                this.id = Some(id);
                drop(guard);
                this.inner.sleepers_changed.notify_waiters();
                Poll::Pending
            }
        }
    }
}

impl Drop for ManualSleep {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let mut st = lock_state(&self.inner);
            let timers = if self.monotonic {
                &mut st.mono_timers
            } else {
                &mut st.timers
            };
            let removed = timers.remove(&(self.at, id));
            drop(st);
            if removed.is_some() {
                self.inner.sleepers_changed.notify_waiters();
            }
        }
    }
}
