//! The acquire loop's rules beside `evaluate`, called from the core
//! ([`krabka_coordination::election::guards`]) on the model's state: the
//! duplicate-member-id check, the far-future-deadline cap with the hold-off
//! after a lost challenge, and the registrations a winner removes. Nothing
//! here decides anything: these functions convert the model's compact
//! state (offsets as `u16`, the monotonic clock in ticks) to the core's
//! types and back, so the model checks the rules the core runs.

use krabka_coordination::election::guards::{self, HoldOff, SeenLease};
use krabka_coordination::{ElectionOptions, RoleState, Step};

use crate::config::TICK_MS;
use crate::state::Acquire;

/// [`guards::find_twin`]: another live process uses this member id.
pub fn twin(state: &RoleState, member: &str, acquire: &Acquire) -> bool {
    let own: Vec<i64> = acquire.own.iter().map(|o| *o as i64).collect();
    guards::find_twin(state, member, &own, acquire.found, &acquire.minted).is_some()
}

/// [`guards::passed_over`]: the registrations the winner removes.
pub fn passed_over(state: &RoleState, member: &str, now: i64) -> Vec<String> {
    guards::passed_over(state, member, now)
}

/// [`guards::bound_step`] on the member's memory: `now` is the wall clock
/// (ms), `mono` the monotonic clock (ticks). Returns the step and whether
/// the cap shortened the wait.
pub fn adjust(
    step: Step,
    state: &RoleState,
    acquire: &mut Acquire,
    now: i64,
    mono: u8,
    options: &ElectionOptions,
) -> (Step, bool) {
    let mut seen = acquire.seen.map(|(token, granted_at, tick)| SeenLease {
        token,
        granted_at,
        first_seen: tick as i64 * TICK_MS,
    });
    let mut lost = acquire.lost.map(|(token, until)| HoldOff { token, until });
    let bounded = guards::bound_step(
        step,
        state,
        now,
        mono as i64 * TICK_MS,
        options,
        &mut seen,
        &mut lost,
    );
    // A lease is first seen at the current tick, so `first_seen` is a
    // whole number of ticks.
    acquire.seen = seen.map(|s| (s.token, s.granted_at, (s.first_seen / TICK_MS) as u8));
    acquire.lost = lost.map(|h| (h.token, h.until));
    (bounded.step, bounded.capped_at.is_some())
}

/// A duration in milliseconds (the core's `millis`).
pub fn millis(d: std::time::Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}
