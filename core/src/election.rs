//! The pure election step.
//!
//! [`evaluate`] turns the state of a role ([`RoleState`]), the member's own
//! view (which token it holds, if any) and the member's clock into one
//! [`Step`]. It does no I/O and reads no clock; the leadership loop acts on the
//! step and evaluates again when the state or the time changes.
//!
//! # Rules
//!
//! *Holder* is the member named by the lease. *Challengers* are the roster
//! minus the holder, in roster order; a member's *challenger rank* is its
//! position among them ([`challenger_rank`]). `stagger` is
//! [`ElectionOptions::challenge_stagger`].
//!
//! When the member holds a token `t` (it believes it leads):
//!
//! | lease in the state                     | step                                  |
//! |----------------------------------------|---------------------------------------|
//! | this member's, token `== t`            | `RenewAt(granted_at + renew_interval)` |
//! | none                                   | `RenewAt(now)`: our lease is not read back yet |
//! | any member's, token `< t`              | `RenewAt(now)`: our lease is not read back yet |
//! | token `> t`                            | `StandDown`                           |
//! | another member's, token `== t`         | `StandDown` (two members cannot share a token) |
//!
//! `StandDown` is advisory: the broker's fence is the real signal.
//!
//! When the member holds no token, in this order:
//!
//! 1. not in the roster → `Register`;
//! 2. a lease (whoever it names: a member in the roster, one that
//!    deregistered, or this member's own id, written by a previous
//!    incarnation or by another live process using the same id): rank `n`
//!    challenges at `deadline + n × stagger`. A holder is never challenged
//!    before its lease could have expired, and a restarted member waits at
//!    the tail like any recovered one (no failback);
//! 3. no lease: rank 0 challenges now; rank `n ≥ 1` at `base + n × stagger`,
//!    where `base` is [`RoleState::last_cleared_deadline`] if a lease was
//!    cleared, else the `registered_at` of this member's own registration (so a
//!    rank-0 member that registered and died never blocks the role forever).
//!
//! In 2 and 3 the step is `WaitUntil { at, rank }` while `now < at` and
//! `Challenge` once `now >= at`.
//!
//! # Clocks
//!
//! `now` is the challenger's clock; the deadline is the holder's clock as
//! written. Skew between them moves the failover by the size of the skew and
//! changes nothing else: the fence, not the clock, decides who writes.

use std::time::Duration;

pub mod guards;

use crate::clock::duration_millis;
use crate::error::Error;
use crate::state::RoleState;
use crate::token::FencingToken;

/// The options of an election.
///
/// ```
/// # use krabka_coordination::ElectionOptions;
/// # use std::time::Duration;
/// let options = ElectionOptions::default()
///     .with_partitions(3)
///     .with_lease_duration(Duration::from_secs(20))
///     .with_renew_interval(Duration::from_secs(5));
/// options.validate().unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionOptions {
    /// The partition count of `__coordination_state` (default 16).
    pub partitions: i32,
    /// How long a lease lasts (default 30 s).
    pub lease_duration: Duration,
    /// How often the holder renews (default 10 s).
    pub renew_interval: Duration,
    /// The delay between ranks of challengers (default 5 s).
    pub challenge_stagger: Duration,
}

impl ElectionOptions {
    /// The default partition count.
    pub const DEFAULT_PARTITIONS: i32 = 16;
    /// The default lease duration.
    pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(30);
    /// The default renew interval.
    pub const DEFAULT_RENEW_INTERVAL: Duration = Duration::from_secs(10);
    /// The default challenge stagger.
    pub const DEFAULT_CHALLENGE_STAGGER: Duration = Duration::from_secs(5);

    /// Sets the partition count of `__coordination_state`.
    pub fn with_partitions(mut self, partitions: i32) -> Self {
        self.partitions = partitions;
        self
    }

    /// Sets the lease duration.
    pub fn with_lease_duration(mut self, d: Duration) -> Self {
        self.lease_duration = d;
        self
    }

    /// Sets the renew interval.
    pub fn with_renew_interval(mut self, d: Duration) -> Self {
        self.renew_interval = d;
        self
    }

    /// Sets the challenge stagger (zero is allowed: every rank challenges at
    /// the deadline).
    pub fn with_challenge_stagger(mut self, d: Duration) -> Self {
        self.challenge_stagger = d;
        self
    }

    /// Checks the options: at least one partition, a lease duration and a renew
    /// interval above zero, and a lease duration longer than the renew
    /// interval. The error names the values.
    pub fn validate(&self) -> Result<(), Error> {
        if self.partitions < 1 {
            return Err(Error::InvalidArgument(format!(
                "partitions must be at least 1, got {}",
                self.partitions
            )));
        }
        if self.lease_duration.is_zero() {
            return Err(Error::InvalidArgument(format!(
                "lease duration must be above zero, got {}",
                crate::human::duration(self.lease_duration)
            )));
        }
        if self.renew_interval.is_zero() {
            return Err(Error::InvalidArgument(format!(
                "renew interval must be above zero, got {}",
                crate::human::duration(self.renew_interval)
            )));
        }
        if self.lease_duration <= self.renew_interval {
            return Err(Error::InvalidArgument(format!(
                "lease duration ({}) must exceed the renew interval ({})",
                crate::human::duration(self.lease_duration),
                crate::human::duration(self.renew_interval)
            )));
        }
        Ok(())
    }
}

impl Default for ElectionOptions {
    /// 16 partitions, a 30 s lease, renewal every 10 s, 5 s between ranks.
    fn default() -> Self {
        ElectionOptions {
            partitions: Self::DEFAULT_PARTITIONS,
            lease_duration: Self::DEFAULT_LEASE_DURATION,
            renew_interval: Self::DEFAULT_RENEW_INTERVAL,
            challenge_stagger: Self::DEFAULT_CHALLENGE_STAGGER,
        }
    }
}

/// One step of the election.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// Register (the member is not in the roster).
    Register,
    /// Wait until `at` (epoch milliseconds of the member's clock), then
    /// evaluate again. `rank` is the member's challenger rank.
    WaitUntil {
        /// When to evaluate again.
        at: i64,
        /// The member's challenger rank.
        rank: usize,
    },
    /// Challenge now: mint an epoch and write a lease.
    Challenge,
    /// Renew the lease at this instant (epoch milliseconds of the member's
    /// clock; at or before now means at once).
    RenewAt(i64),
    /// Another member holds a newer token; stop the role's work. Advisory: the
    /// broker's fence is the real signal.
    StandDown,
}

/// The position of `member` among the challengers (the roster minus the lease
/// holder), or `None` if `member` is not registered or is the holder.
pub fn challenger_rank(state: &RoleState, member: &str) -> Option<usize> {
    let own = state.entry(member)?.offset;
    let holder = state.lease().map(|l| l.member.as_str());
    if holder == Some(member) {
        return None;
    }
    let before = state
        .roster()
        .take_while(|e| e.offset < own)
        .filter(|e| Some(e.member.as_str()) != holder)
        .count();
    Some(before)
}

/// The election step of `member` in `state` at `now_millis` (the member's
/// clock). `held` is the token the member holds if it believes it leads. See
/// the module documentation for the rules.
pub fn evaluate(
    state: &RoleState,
    member: &str,
    held: Option<FencingToken>,
    now_millis: i64,
    options: &ElectionOptions,
) -> Step {
    let lease = state.lease();
    if let Some(t) = held {
        return match lease {
            None => Step::RenewAt(now_millis),
            Some(l) if l.token > t => Step::StandDown,
            Some(l) if l.token < t => Step::RenewAt(now_millis),
            Some(l) if l.member == member => Step::RenewAt(
                l.granted_at
                    .saturating_add(duration_millis(options.renew_interval)),
            ),
            Some(_) => Step::StandDown,
        };
    }
    let Some(own) = state.entry(member) else {
        return Step::Register;
    };
    let stagger = duration_millis(options.challenge_stagger);
    // A lease under this member's own id does not make it the holder (it
    // holds no token): it ranks behind every member registered before it.
    let holder = lease.map(|l| l.member.as_str());
    let rank = state
        .roster()
        .take_while(|e| e.offset < own.offset)
        .filter(|e| Some(e.member.as_str()) != holder)
        .count();
    let staggered = |base: i64| base.saturating_add(stagger.saturating_mul(rank as i64));
    let at = match lease {
        Some(l) => staggered(l.deadline),
        None if rank == 0 => now_millis,
        None => staggered(state.last_cleared_deadline().unwrap_or(own.registered_at)),
    };
    if now_millis < at {
        Step::WaitUntil { at, rank }
    } else {
        Step::Challenge
    }
}
