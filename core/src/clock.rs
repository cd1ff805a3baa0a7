//! Clocks: the wall clock the lease deadlines are written in, and a manual
//! clock that tests drive by hand.
//!
//! Lease instants are wall-clock epoch milliseconds (`i64`), because the holder
//! writes a deadline that another process compares against its own clock.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// A boxed, `'static` timer future.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A source of wall-clock time and timers.
pub trait Clock: Send + Sync + 'static {
    /// Now, in epoch milliseconds.
    fn now_millis(&self) -> i64;

    /// A future that completes once [`Clock::now_millis`] is at or past
    /// `at_millis`. The future does not borrow the clock.
    fn sleep_until(&self, at_millis: i64) -> Sleep;

    /// A future that completes after `d` of this clock's time.
    fn sleep(&self, d: Duration) -> Sleep {
        let at = self.now_millis().saturating_add(d.as_millis().min(i64::MAX as u128) as i64);
        self.sleep_until(at)
    }
}

/// The system's wall clock, with tokio timers.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

/// A clock that only moves when a test moves it.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {}
