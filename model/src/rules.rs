//! The acquire loop's own rules that are private to the core
//! (`core/src/leadership/acquire.rs`), mirrored line by line so the model's
//! members take the same decisions: the duplicate-member-id check
//! (`check_unique`), the far-future-deadline cap and the hold-off after a
//! lost challenge (the head of `acquire_loop`), and the registrations a
//! winner removes (`passed_over`).
//!
//! The election step itself is not mirrored: members call the core's
//! [`krabka_coordination::evaluate`] on the core's
//! [`krabka_coordination::RoleState`]. Were these four helpers public in the
//! core, the model would call them too; until then a change of one of them
//! must be made here as well (the model's tests name the rule that moved).

use krabka_coordination::{ElectionOptions, RoleState, Step};

use crate::config::TICK_MS;
use crate::state::Acquire;

/// `check_unique`: another live process uses this member id. It registered
/// after this process did (a registration of the id at an offset this
/// process did not write), or it writes a lease under the id while this
/// process watches (a lease under the id other than the one the first
/// catch-up found, with a token this process never minted).
pub fn twin(state: &RoleState, member: &str, acquire: &Acquire) -> bool {
    let registered_after = match (state.entry(member), acquire.own.first()) {
        (Some(e), Some(first)) => {
            e.offset > *first as i64 && !acquire.own.iter().any(|o| *o as i64 == e.offset)
        }
        _ => false,
    };
    registered_after
        || state.lease().is_some_and(|l| {
            l.member == member
                && acquire.found != Some((l.token, l.granted_at))
                && !acquire.minted.contains(&l.token)
        })
}

/// `passed_over`: the members whose turn came before this member's and who
/// did not take it (the challengers ranked ahead, and a holder whose lease
/// ran out by `now`), which the winner deregisters.
pub fn passed_over(state: &RoleState, member: &str, now: i64) -> Vec<String> {
    let Some(own) = state.entry(member) else {
        return Vec::new();
    };
    let holder = state.lease();
    let mut out: Vec<String> = state
        .roster()
        .take_while(|e| e.offset < own.offset)
        .filter(|e| holder.is_none_or(|l| l.member != e.member))
        .map(|e| e.member.clone())
        .collect();
    if let Some(l) = holder {
        if l.member != member && l.deadline <= now && state.is_registered(&l.member) {
            out.push(l.member.clone());
        }
    }
    out
}

/// The head of `acquire_loop` after `evaluate`: remembers when the current
/// lease was first seen and caps a wait at one lease duration (this
/// member's, on its monotonic clock) past that, plus the member's stagger;
/// then holds a challenge off after a lost one until the winner's lease
/// shows up or the hold-off passes. `now` is the wall clock (ms), `mono`
/// the monotonic clock (ticks). Returns the step and whether the cap
/// shortened the wait.
pub fn adjust(
    mut step: Step,
    state: &RoleState,
    acquire: &mut Acquire,
    now: i64,
    mono: u8,
    options: &ElectionOptions,
) -> (Step, bool) {
    let mut capped_wait = false;
    let mono_ms = mono as i64 * TICK_MS;
    if let Some(l) = state.lease() {
        if acquire
            .seen
            .is_none_or(|(t, g, _)| (t, g) != (l.token, l.granted_at))
        {
            acquire.seen = Some((l.token, l.granted_at, mono));
        }
        let (_, _, first_seen) = acquire.seen.expect("set above");
        let lease_ms = millis(options.lease_duration);
        let cap =
            now.saturating_add((first_seen as i64 * TICK_MS).saturating_add(lease_ms) - mono_ms);
        if let Step::WaitUntil { at, rank } = step {
            let stagger = millis(options.challenge_stagger);
            let capped = cap.saturating_add(stagger.saturating_mul(rank as i64));
            if capped < at {
                capped_wait = true;
                step = if now >= capped {
                    Step::Challenge
                } else {
                    Step::WaitUntil { at: capped, rank }
                };
            }
        }
    } else {
        acquire.seen = None;
    }
    if let Some((token, until)) = acquire.lost {
        let superseded = state.lease().is_some_and(|l| l.token > token);
        if superseded || now >= until {
            acquire.lost = None;
        } else if step == Step::Challenge {
            step = Step::WaitUntil { at: until, rank: 0 };
        }
    }
    (step, capped_wait)
}

/// A duration in milliseconds (the core's `millis`).
pub fn millis(d: std::time::Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}
