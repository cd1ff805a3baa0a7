//! Clocks: the wall clock the lease deadlines are written in, the monotonic
//! clocks every local deadline and wait runs on, and a manual clock that
//! tests drive by hand.
//!
//! Lease instants are wall-clock epoch milliseconds (`i64`), because the holder
//! writes a deadline that another process compares against its own clock.
//! Everything local uses monotonic clocks, so a stepped wall clock moves none
//! of it:
//!
//! * the holder's own lease deadline, and every span compared with a lease,
//!   is measured on [`Clock::boot_millis`], which keeps counting while the
//!   machine is suspended: the lease runs out on the other members' clocks
//!   meanwhile, so it must run out on the holder's too;
//! * waits (the renewal schedule, back-offs) are timers on the monotonic
//!   clock of [`Clock::elapsed_millis`] ([`Clock::sleep`]), which, like
//!   tokio's timers, may stop while the machine is suspended. Code that waits
//!   for a deadline of the boot clock reads that clock again whenever it
//!   wakes, so a suspend that outlasted the deadline is noticed at the first
//!   check after the resume.
//!
//! * [`SystemClock`] reads [`SystemTime`], `CLOCK_BOOTTIME` for the boot
//!   clock on Linux and Android (elsewhere the monotonic clock of
//!   [`std::time::Instant`], which may or may not count suspended time), and
//!   sleeps with tokio timers. Tokio timers run on a monotonic clock, so a
//!   sleep until a wall-clock instant wakes at least once a second
//!   ([`SystemClock::MAX_SLEEP_SLICE`]) and re-reads the wall clock: a jump of
//!   the wall clock delays a wake-up by at most one slice.
//! * [`ManualClock`] only moves when a test calls [`ManualClock::set`],
//!   [`ManualClock::advance`], [`ManualClock::step_wall`] or
//!   [`ManualClock::suspend`] (time that passes for the wall and the boot
//!   clock while the monotonic clock and its timers stand still). Its timers
//!   are registered wakers (no polling), they fire outside the clock's lock,
//!   and a test can wait until the code under test is blocked on a timer
//!   with [`ManualClock::wait_for_sleepers`].

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::Notify;

/// A boxed, `'static` timer future.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A source of wall-clock time, monotonic time and timers.
pub trait Clock: Send + Sync + 'static {
    /// Now, in epoch milliseconds (the wall clock; it may step).
    fn now_millis(&self) -> i64;

    /// Milliseconds of monotonic time since an arbitrary origin of this clock:
    /// never goes back, and a step of the wall clock does not move it. The
    /// clock of [`Clock::sleep`]'s timers; it may stop while the machine is
    /// suspended.
    fn elapsed_millis(&self) -> i64;

    /// Milliseconds since an arbitrary origin on a monotonic clock that
    /// counts the time the machine spent suspended as well: never goes back,
    /// a step of the wall clock does not move it, and a suspend moves it by
    /// as long as the suspend lasted. The local lease deadline is measured on
    /// it, because the lease runs out on the other members' clocks while this
    /// machine sleeps.
    ///
    /// Timers ([`Clock::sleep`]) need not count suspended time, so whoever
    /// waits for an instant of this clock reads it again after each wake-up.
    /// The default is [`Clock::elapsed_millis`], for a clock that cannot
    /// count suspended time apart.
    fn boot_millis(&self) -> i64 {
        self.elapsed_millis()
    }

    /// A future that completes once [`Clock::now_millis`] is at or past
    /// `at_millis` (a wall-clock instant, such as a lease deadline another
    /// member wrote). The future does not borrow the clock.
    fn sleep_until(&self, at_millis: i64) -> Sleep;

    /// A future that completes after `d` of monotonic time. The future does
    /// not borrow the clock.
    fn sleep(&self, d: Duration) -> Sleep;
}

/// `d` in whole milliseconds, saturating at `i64::MAX`.
pub(crate) fn duration_millis(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

/// The members' back-off (the acquire loop, the renewal task, the
/// observer): the project's one jittered back-off, `krabka_backoff::Backoff`
/// (pauses from `initial` doubling up to `max`, back to `initial` after
/// [`Backoff::reset`], each scaled by a random factor in [0.8, 1.2) so that
/// members, or the roles of one process, that failed together do not retry
/// in lockstep). The caller sleeps on its own clock.
pub(crate) use krabka_backoff::Backoff;

// ---------------------------------------------------------------- system clock

/// The system's wall clock, with tokio timers.
///
/// [`Clock::sleep_until`] needs a tokio runtime with the time driver enabled.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl SystemClock {
    /// The longest single tokio sleep inside [`Clock::sleep_until`]; after it the
    /// wall clock is read again, so a wall-clock jump delays a wake-up by at most
    /// this much.
    pub const MAX_SLEEP_SLICE: Duration = Duration::from_secs(1);
}

fn system_now_millis() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => duration_millis(d),
        // A clock set before 1970: negative epoch milliseconds.
        Err(e) => duration_millis(e.duration()).saturating_neg(),
    }
}

/// The origin of [`SystemClock`]'s monotonic time: its first use.
fn monotonic_origin() -> std::time::Instant {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *ORIGIN.get_or_init(std::time::Instant::now)
}

/// `CLOCK_BOOTTIME` in milliseconds: monotonic, counting suspended time.
/// `None` if the kernel does not know the clock (older than 2.6.39).
#[cfg(any(target_os = "linux", target_os = "android"))]
// `time_t` and `c_long` are 32 bits wide on some targets: the conversions
// are not useless there.
#[allow(clippy::useless_conversion)]
fn read_boot_clock() -> Option<i64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    (rc == 0).then(|| {
        i64::from(ts.tv_sec)
            .saturating_mul(1_000)
            .saturating_add(i64::from(ts.tv_nsec) / 1_000_000)
    })
}

/// Platforms without a boot clock: the monotonic clock stands in for it.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn read_boot_clock() -> Option<i64> {
    None
}

/// [`SystemClock`]'s boot-clock milliseconds: `CLOCK_BOOTTIME` since its
/// first use where the platform has it, else the monotonic time of
/// [`Clock::elapsed_millis`]. Which one is decided at the first call and kept,
/// so the readings never mix origins; and they never go back, even if a later
/// read of the boot clock failed (it then repeats the last reading).
fn system_boot_millis() -> i64 {
    use std::sync::atomic::{AtomicI64, Ordering};
    static ORIGIN: std::sync::OnceLock<Option<i64>> = std::sync::OnceLock::new();
    static LAST: AtomicI64 = AtomicI64::new(0);
    let Some(origin) = *ORIGIN.get_or_init(read_boot_clock) else {
        return duration_millis(monotonic_origin().elapsed());
    };
    match read_boot_clock() {
        Some(now) => {
            let ms = now.saturating_sub(origin).max(0);
            LAST.fetch_max(ms, Ordering::Relaxed).max(ms)
        }
        None => LAST.load(Ordering::Relaxed),
    }
}

impl Clock for SystemClock {
    fn now_millis(&self) -> i64 {
        system_now_millis()
    }

    fn elapsed_millis(&self) -> i64 {
        duration_millis(monotonic_origin().elapsed())
    }

    /// `CLOCK_BOOTTIME` on Linux and Android; elsewhere the monotonic clock
    /// of [`Clock::elapsed_millis`] ([`std::time::Instant`]), which counts
    /// suspended time on some platforms and not on others.
    fn boot_millis(&self) -> i64 {
        system_boot_millis()
    }

    fn sleep(&self, d: Duration) -> Sleep {
        // tokio's timers are monotonic; a far-off instant saturates instead
        // of overflowing.
        let at = tokio::time::Instant::now()
            .checked_add(d)
            .unwrap_or_else(|| {
                tokio::time::Instant::now() + Duration::from_secs(86_400 * 365 * 30)
            });
        Box::pin(tokio::time::sleep_until(at))
    }

    fn sleep_until(&self, at_millis: i64) -> Sleep {
        Box::pin(async move {
            loop {
                let now = system_now_millis();
                if now >= at_millis {
                    return;
                }
                // `at_millis - now` is positive; it may overflow i64 only if
                // `now` is negative, hence the saturation.
                let left = Duration::from_millis(at_millis.saturating_sub(now) as u64);
                tokio::time::sleep(left.min(SystemClock::MAX_SLEEP_SLICE)).await;
            }
        })
    }
}

// ---------------------------------------------------------------- manual clock

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
    /// ([`Clock::sleep_until`]) now due fire, as [`SystemClock`]'s re-read
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
