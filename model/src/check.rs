//! Running a check: every reachable state of a configuration explored
//! breadth first, and what was found, with readable traces.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::time::{Duration, Instant};

use stateright::{Checker, Expectation, HasDiscoveries, Model};

use crate::config::Config;
use crate::model::LeaseModel;

/// What one check found.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Distinct states visited.
    pub unique_states: usize,
    /// States generated (repeats included).
    pub states: usize,
    /// The longest path explored, in steps.
    pub max_depth: usize,
    /// Wall time of the check.
    pub elapsed: Duration,
    /// Property name → the readable trace of its discovery (an example for
    /// a `sometimes` property, a counterexample otherwise).
    pub discoveries: BTreeMap<&'static str, String>,
    /// Property name → its expectation.
    pub expectations: BTreeMap<&'static str, Expectation>,
}

impl Outcome {
    /// The `always` and `eventually` properties the checker refuted.
    pub fn violations(&self) -> Vec<&'static str> {
        self.expectations
            .iter()
            .filter(|(n, e)| **e != Expectation::Sometimes && self.discoveries.contains_key(*n))
            .map(|(n, _)| *n)
            .collect()
    }

    /// The `sometimes` properties for which no example was found.
    pub fn missing_examples(&self) -> Vec<&'static str> {
        self.expectations
            .iter()
            .filter(|(n, e)| **e == Expectation::Sometimes && !self.discoveries.contains_key(*n))
            .map(|(n, _)| *n)
            .collect()
    }

    /// The counts, then each violation with its trace.
    pub fn report(&self) -> String {
        let mut out = format!(
            "{} distinct states ({} generated), depth {}, {:.2?}\n",
            self.unique_states, self.states, self.max_depth, self.elapsed
        );
        for name in self.violations() {
            let _ = writeln!(out, "VIOLATED: {name}\n{}", self.discoveries[name]);
        }
        for name in self.missing_examples() {
            let _ = writeln!(out, "no example of: {name}");
        }
        out
    }

    /// Panics with the report unless exactly the `expected` properties are
    /// violated.
    pub fn assert_violations(&self, expected: &[&str]) {
        let found: BTreeSet<&str> = self.violations().into_iter().collect();
        let wanted: BTreeSet<&str> = expected.iter().copied().collect();
        assert_eq!(found, wanted, "unexpected verdicts:\n{}", self.report());
    }
}

/// How the state space is walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Search {
    /// Breadth first: near-shortest traces, memory for the whole frontier.
    Bfs,
    /// Depth first: far less memory, longer traces.
    Dfs,
}

/// Explores every reachable state of `config` breadth first, on one thread.
pub fn check(config: Config) -> Outcome {
    run(config, Search::Bfs, 1, None)
}

/// Explores every reachable state of `config` with `search` on `threads`
/// threads.
pub fn check_with(config: Config, search: Search, threads: usize) -> Outcome {
    run(config, search, threads, None)
}

/// Explores `config` breadth first until `property` has a discovery (or
/// every state has been visited) and returns its trace, if any.
pub fn find(config: Config, property: &'static str) -> (Option<String>, Outcome) {
    let outcome = run(config, Search::Bfs, 1, Some(property));
    (outcome.discoveries.get(property).cloned(), outcome)
}

fn run(config: Config, search: Search, threads: usize, target: Option<&'static str>) -> Outcome {
    let model = LeaseModel::new(config);
    let expectations = model
        .properties()
        .into_iter()
        .map(|p| (p.name, p.expectation))
        .collect();
    let started = Instant::now();
    let mut builder = model.clone().checker().threads(threads.max(1));
    builder = match target {
        Some(name) => builder.finish_when(HasDiscoveries::AnyOf([name].into())),
        None => builder.finish_when(HasDiscoveries::All),
    };
    let (outcome, elapsed) = match search {
        Search::Bfs => collect(&model, builder.spawn_bfs().join(), started),
        Search::Dfs => collect(&model, builder.spawn_dfs().join(), started),
    };
    Outcome {
        elapsed,
        expectations,
        ..outcome
    }
}

/// The counts and the truncated, explained discoveries of a finished check.
fn collect(
    model: &LeaseModel,
    checker: impl Checker<LeaseModel>,
    started: Instant,
) -> (Outcome, Duration) {
    let elapsed = started.elapsed();
    let properties = model.properties();
    let discoveries = checker
        .discoveries()
        .into_iter()
        .map(|(name, path)| {
            let property = properties
                .iter()
                .find(|p| p.name == name)
                .expect("a named property");
            let mut steps = path.into_vec();
            // The checker keeps the last discovery it visited; the trace
            // ends at the first state of the path that decides it.
            let decides = |s: &crate::State| match property.expectation {
                Expectation::Always => !(property.condition)(model, s),
                Expectation::Sometimes => (property.condition)(model, s),
                Expectation::Eventually => false,
            };
            if let Some(first) = steps.iter().position(|(s, _)| decides(s)) {
                steps.truncate(first + 1);
            }
            (name, crate::trace::explain(model, &steps))
        })
        .collect();
    let outcome = Outcome {
        unique_states: checker.unique_state_count(),
        states: checker.state_count(),
        max_depth: checker.max_depth(),
        elapsed,
        discoveries,
        expectations: BTreeMap::new(),
    };
    (outcome, elapsed)
}
