//! What the model found in the core, each as a minimal counterexample of the
//! core before its fix (the fix switched off in the model), and the fix that
//! removes it (`docs/model.md`). The core has every fix in
//! `krabka_model::config::Proposed`, so they are on by default in the
//! model; a test switches one off. Clock skew is a documented limit, not a
//! fix.

use krabka_model::properties::*;
use krabka_model::{find, scenarios, Config};

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

/// Without `read_after_held_back`: the held-back check and the view it
/// guards are two reads. A
/// challenger reads nothing new (the leader's renewals are hidden behind a
/// neighbour's open transaction), the transaction is decided, the check
/// answers "not held back", and the challenger mints on its stale view.
#[test]
fn held_back_race_fences_a_healthy_leader() {
    let mut config = scenarios::neighbour();
    config.proposed.held_back_at_read_position = false;
    config.proposed.read_after_held_back = false;
    let trace = counterexample(config.clone(), HEALTHY_LEADER_KEPT);
    assert!(
        trace.contains("held back?"),
        "the challenger asked:\n{trace}"
    );
    // The first fix: a read after the check (enough with one stall).
    config.proposed.read_after_held_back = true;
    let (none, _) = find(config.clone(), HEALTHY_LEADER_KEPT);
    assert!(
        none.is_none(),
        "reading after the check removes it:\n{}",
        none.unwrap_or_default()
    );
    // The core's: the check answers for the read position.
    config.proposed.read_after_held_back = false;
    config.proposed.held_back_at_read_position = true;
    let (none, _) = find(config, HEALTHY_LEADER_KEPT);
    assert!(
        none.is_none(),
        "checking at the read position removes it:\n{}",
        none.unwrap_or_default()
    );
}

/// Without `held_back_without_lease`: a first lease hidden behind a
/// neighbour's open transaction. The standby sees no lease, so it skips the
/// held-back check, and challenges on its stagger against the member elected
/// a moment ago.
#[test]
fn hidden_first_lease_fences_a_healthy_leader() {
    let mut config = scenarios::neighbour();
    config.proposed.held_back_without_lease = false;
    let trace = counterexample(config.clone(), HEALTHY_LEADER_KEPT);
    assert!(
        !trace.contains("held back?"),
        "no check without a lease:\n{trace}"
    );
    config.proposed.held_back_without_lease = true;
    let (none, _) = find(config, HEALTHY_LEADER_KEPT);
    assert!(
        none.is_none(),
        "checking without a lease removes it:\n{}",
        none.unwrap_or_default()
    );
}

/// Without `resign_ends_at_deadline`: a resign stops the renewal task, so
/// nothing ends the term at the local deadline; a resign blocked (cut off,
/// frozen) keeps `is_held` true past it, for up to two lease durations.
#[test]
fn a_blocked_resign_holds_past_the_deadline() {
    let mut config = scenarios::cut_off();
    config.proposed.resign_ends_at_deadline = false;
    let trace = counterexample(config.clone(), NO_HOLDING_PAST_DEADLINE);
    assert!(trace.contains("resigning"), "the holder resigns:\n{trace}");
    config.proposed.resign_ends_at_deadline = true;
    let (none, _) = find(config, NO_HOLDING_PAST_DEADLINE);
    assert!(
        none.is_none(),
        "ending the term at the deadline removes it:\n{}",
        none.unwrap_or_default()
    );
}

/// Clock skew (documented, not fixed): the local deadline is the holder's
/// clock; a standby whose clock runs ahead by one tick is elected one tick
/// before the holder's LEASE_EXPIRED. With equal clocks (the documented bound
/// of the property) no window overlaps; the project documents no skew bound.
#[test]
fn clock_skew_overlaps_the_windows_by_the_skew() {
    let mut config = scenarios::with_proposed_fixes(scenarios::deposed());
    config.documented_skew = 1;
    let trace = counterexample(config, NO_OVERLAPPING_WINDOWS);
    assert!(
        trace.contains("[clock +1]"),
        "the standby's clock runs ahead:\n{trace}"
    );
}

/// Without `held_back_at_read_position`: the held-back check and the read
/// after it (`read_after_held_back`) are two requests. Two challengers decide
/// in the same instant; between one's check and its read, a neighbour opens a
/// transaction that hides the other's first lease, and the read finds nothing
/// new. The core's fix: one request, the end of the log against the read
/// position.
#[test]
fn a_transaction_opened_between_check_and_read_hides_a_first_lease() {
    let mut config = scenarios::neighbour();
    config.max_faults = 2;
    config.proposed.held_back_at_read_position = false;
    let trace = counterexample(config.clone(), HEALTHY_LEADER_KEPT);
    assert!(
        trace.contains("read again") && trace.matches("STALL").count() == 2,
        "a second stall between the check and the read:\n{trace}"
    );
    config.proposed.held_back_at_read_position = true;
    let outcome = krabka_model::check(config);
    outcome.assert_violations(&[]);
}
