//! [`SystemClock`]: the system's wall clock, its monotonic and boot clocks,
//! and tokio timers.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{duration_millis, Clock, Sleep};

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
