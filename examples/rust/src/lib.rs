//! The Rust examples of krabka-coordination, and what they share.
//!
//! Binaries:
//!
//! * `member` (`src/bin/member/`): one member of a role as a process. It
//!   prints what it does as JSON lines, built from the core's typed event
//!   stream ([`krabka_coordination::events`]), never from log text.
//! * `failover` (`src/bin/failover/`): the failover demo, three `member`
//!   processes of one role, a kill, a restart and a resign, with the measured
//!   times.
//!
//! This library is what the demo, the leadership benchmark
//! (`benches/leadership/`) and the end-to-end tests (`tests/e2e_failover.rs`)
//! share:
//!
//! * [`process`]: the member-process harness (spawn a `member`, read its JSON
//!   event lines on a thread, wait for an event, send stdin commands and
//!   signals);
//! * [`signal`]: the signals the harness sends, by their `libc` names;
//! * [`lines`]: the member's JSON line of each core event, so the member
//!   and its readers agree on one spelling;
//! * [`kafka`]: finding or starting the local Kafka, data topics, unique
//!   names;
//! * [`cli`]: the small command-line helpers of the binaries.

pub mod bench;
pub mod cli;
pub mod kafka;
pub mod lines;
pub mod process;
pub mod signal;

pub use process::{MemberProcess, MemberSpec, WaitError};
pub use signal::Signal;

/// The member's exit codes, as `member --help` documents them.
pub mod exit {
    /// Stopped cleanly (resigned, or deregistered while waiting).
    pub const OK: i32 = 0;
    /// An error (Kafka unusable, a fatal error, a resign that failed).
    pub const ERROR: i32 = 1;
    /// Bad arguments.
    pub const USAGE: i32 = 2;
    /// Fenced: a newer epoch took the role; the member deregistered first.
    pub const FENCED: i32 = 3;
    /// The member's own lease ran out (no renewal committed within it, for
    /// example while the process was stopped); the member deregistered
    /// first.
    pub const LEASE_EXPIRED: i32 = 4;
}

/// The wall clock in epoch milliseconds (the `t_ms` of every line).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
