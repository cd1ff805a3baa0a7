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
//! * [`SystemClock`] reads [`SystemTime`](std::time::SystemTime), `CLOCK_BOOTTIME` for the boot
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

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

mod manual;
mod system;

pub use manual::ManualClock;
pub use system::SystemClock;

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
