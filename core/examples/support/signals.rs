//! SIGINT and SIGTERM as a flag the examples poll.
//!
//! The crate's tokio does not enable the `signal` feature, so the examples
//! install a minimal handler through the C library themselves: the handler
//! only stores the signal number in an atomic (async-signal-safe), and
//! [`received`] polls it.
#![allow(dead_code)]

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

/// SIGINT (ctrl-c).
pub const SIGINT: i32 = 2;
/// SIGTERM.
pub const SIGTERM: i32 = 15;

static LAST: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: i32) {
    LAST.store(signal, Ordering::SeqCst);
}

extern "C" {
    // sighandler_t signal(int signum, sighandler_t handler); the result (the
    // previous handler) is a pointer-sized value we do not use.
    fn signal(signum: i32, handler: extern "C" fn(i32)) -> usize;
}

/// Routes SIGINT and SIGTERM to the flag instead of ending the process.
pub fn install() {
    // SAFETY: `on_signal` only does an atomic store, which is async-signal-safe.
    unsafe {
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
    }
}

/// The signal received so far, if any.
pub fn pending() -> Option<i32> {
    match LAST.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Resolves with the signal number once SIGINT or SIGTERM arrived.
pub async fn received() -> i32 {
    loop {
        if let Some(s) = pending() {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The name of a signal number, for messages.
pub fn name(signal: i32) -> &'static str {
    match signal {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}
