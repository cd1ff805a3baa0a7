//! The bounded check: every scenario explored completely, once with the
//! current core's behaviour (only the findings recorded in
//! `scenarios::current_findings` may be refuted) and once with the proposed
//! fixes (every property holds). A refuted property fails the test with
//! its counterexample trace.

use krabka_model::properties::*;
use krabka_model::{check, scenarios, Config};

/// The examples each scenario must show with the proposed fixes.
fn examples(name: &str) -> &'static [&'static str] {
    match name {
        "crashes" => &[FAILOVER, EXHAUSTION],
        "deposed" => &[FAILOVER, HANDOVER, ZOMBIE_FENCED],
        "cut_off" => &[FAILOVER, HANDOVER],
        "neighbour" => &[],
        "twins" => &[TWIN_REFUSED],
        "clock_steps" => &[FAILOVER, CAPPED_WAIT],
        other => panic!("no examples listed for scenario {other}"),
    }
}

fn scenario(name: &str) -> Config {
    scenarios::all()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no scenario {name}"))
        .1
}

fn current(name: &str) {
    let config = scenario(name);
    let expected = scenarios::current_findings(name, &config);
    let outcome = check(config);
    println!("{name} (current core): {}", outcome.report());
    outcome.assert_violations(&expected);
}

fn proposed(name: &str) {
    let outcome = check(scenarios::with_proposed_fixes(scenario(name)));
    println!("{name} (proposed fixes): {}", outcome.report());
    outcome.assert_violations(&[]);
    for example in examples(name) {
        assert!(
            outcome.discoveries.contains_key(example),
            "scenario {name} shows no example of {example:?}:\n{}",
            outcome.report()
        );
    }
}

#[test]
fn crashes_current() {
    current("crashes");
}

#[test]
fn crashes_proposed() {
    proposed("crashes");
}

#[test]
fn deposed_current() {
    current("deposed");
}

#[test]
fn deposed_proposed() {
    proposed("deposed");
}

#[test]
fn cut_off_current() {
    current("cut_off");
}

#[test]
fn cut_off_proposed() {
    proposed("cut_off");
}

#[test]
fn neighbour_current() {
    current("neighbour");
}

#[test]
fn neighbour_proposed() {
    proposed("neighbour");
}

#[test]
fn twins_current() {
    current("twins");
}

#[test]
fn twins_proposed() {
    proposed("twins");
}

#[test]
fn clock_steps_current() {
    current("clock_steps");
}

#[test]
fn clock_steps_proposed() {
    proposed("clock_steps");
}

/// Every `sometimes` property has an example in some scenario.
#[test]
fn every_example_is_shown_somewhere() {
    let shown: Vec<&str> = scenarios::all()
        .iter()
        .flat_map(|(name, _)| examples(name).iter().copied())
        .collect();
    let model = krabka_model::LeaseModel::new(scenarios::crashes());
    for p in stateright::Model::properties(&model) {
        if p.expectation == stateright::Expectation::Sometimes {
            assert!(shown.contains(&p.name), "no scenario shows {:?}", p.name);
        }
    }
}

/// The liveness property has teeth: with a window shorter than the lease,
/// no failover can make it, and the checker says so.
#[test]
fn a_window_shorter_than_the_lease_refutes_the_liveness() {
    let mut config = scenarios::with_proposed_fixes(scenarios::crashes());
    config.liveness_window = config.lease - 1;
    config.max_restarts = 0;
    let (trace, _) = krabka_model::find(config, CRASH_REPLACED);
    let trace = trace.expect("a crashed holder cannot be replaced within a lease");
    println!("{trace}");
    assert!(
        trace.contains("CRASH"),
        "the trace crashes the holder:\n{trace}"
    );
}
