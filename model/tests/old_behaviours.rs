//! The design-level findings of the review, each as the counterexample the
//! checker finds with the old behaviour switched on. With it off (the
//! scenario with the proposed fixes, `verdicts.rs`) the same property
//! holds.

use krabka_model::properties::*;
use krabka_model::{find, scenarios, Config};

/// Finds a counterexample of `property` in `config`, prints it and returns
/// it; fails when there is none.
fn counterexample(config: Config, property: &'static str) -> String {
    let (trace, outcome) = find(config, property);
    let trace = trace.unwrap_or_else(|| {
        panic!(
            "no counterexample of {property:?} after {} states",
            outcome.unique_states
        )
    });
    println!(
        "counterexample of {property:?} ({} states):\n{trace}",
        outcome.unique_states
    );
    trace
}

/// Deposed resign: a leader deposed without noticing (cut off while a
/// standby whose clock runs ahead took over) resigns; the old resign's
/// unconditional InitProducerId fences the successor.
#[test]
fn deposed_resign_fences_the_successor() {
    let mut config = scenarios::with_proposed_fixes(scenarios::deposed());
    config.old.unconditional_resign = true;
    let trace = counterexample(config, RESIGN_FENCES_NOTHING_NEWER);
    assert!(trace.contains(": resign"), "the trace resigns:\n{trace}");
}

/// Neighbour freeze: another role's transaction left open hides the
/// leader's renewals; without the held-back check the standby challenges
/// at the deadline and fences its healthy leader.
#[test]
fn neighbour_freeze_fences_a_healthy_leader() {
    let mut config = scenarios::with_proposed_fixes(scenarios::neighbour());
    config.old.no_held_back_check = true;
    let trace = counterexample(config, HEALTHY_LEADER_KEPT);
    assert!(
        trace.contains("STALL"),
        "the trace stalls the neighbour:\n{trace}"
    );
    assert!(
        !trace.contains("held back?"),
        "no held-back check in the old behaviour:\n{trace}"
    );
}

/// Dead roster: the winner removed no registration, so a holder that died
/// stays ranked ahead and delays the failover after the next one too.
#[test]
fn dead_roster_delays_every_later_failover() {
    let mut config = scenarios::with_proposed_fixes(scenarios::crashes());
    config.old.no_heal = true;
    let trace = counterexample(config, DEAD_DELAY_ONCE);
    assert_eq!(
        trace.matches("CRASH").count(),
        2,
        "two holders die:\n{trace}"
    );
}

/// Lease-expiry blindness: a leader cut off keeps reporting itself holding
/// past the lease it can no longer renew.
#[test]
fn lease_expiry_blindness_keeps_holding() {
    let mut config = scenarios::with_proposed_fixes(scenarios::cut_off());
    config.old.no_local_deadline = true;
    let trace = counterexample(config, NO_HOLDING_PAST_DEADLINE);
    assert!(
        trace.contains("CUT OFF") || trace.contains("PAUSE"),
        "the leader is cut off:\n{trace}"
    );
    assert!(trace.contains("LEADING"), "{trace}");
}
