//! Checks the model's scenarios at a size and prints, for each, the state
//! count, the time and the verdicts; exits 1 when a verdict differs from
//! the expected one (the current core's known findings, or none with
//! `--proposed`).
//!
//! ```text
//! krabka-model [--size N] [--proposed] [--dfs] [--threads N] [--traces] [SCENARIO...]
//! ```

use std::process::ExitCode;

use krabka_model::check::{check_with, Search};
use krabka_model::scenarios;

fn main() -> ExitCode {
    let mut size = 0u8;
    let mut proposed = false;
    let mut search = Search::Bfs;
    let mut threads = 1usize;
    let mut traces = false;
    let mut only = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |what: &str| -> Option<usize> {
            let n = args.next().and_then(|v| v.parse().ok());
            if n.is_none() {
                eprintln!("{what} takes a number");
            }
            n
        };
        match arg.as_str() {
            "--size" => match number("--size") {
                Some(n) => size = n.min(u8::MAX as usize) as u8,
                None => return ExitCode::from(2),
            },
            "--threads" => match number("--threads") {
                Some(n) => threads = n.max(1),
                None => return ExitCode::from(2),
            },
            "--proposed" => proposed = true,
            "--dfs" => search = Search::Dfs,
            "--traces" => traces = true,
            name if !name.starts_with('-') => only.push(name.to_owned()),
            other => {
                eprintln!("unknown option {other}");
                return ExitCode::from(2);
            }
        }
    }
    let mut unexpected = 0;
    let (mut states, mut seconds) = (0usize, 0f64);
    for (name, config) in scenarios::all() {
        if !only.is_empty() && !only.iter().any(|o| o == name) {
            continue;
        }
        let mut config = scenarios::scaled(config, size);
        if proposed {
            config = scenarios::with_proposed_fixes(config);
        }
        let outcome = check_with(config.clone(), search, threads);
        states += outcome.unique_states;
        seconds += outcome.elapsed.as_secs_f64();
        let expected = scenarios::current_findings(name, &config);
        let found = outcome.violations();
        let ok = found == expected;
        println!(
            "{name:<12} {:>10} states {:>10} generated  depth {:>3}  {:>8.2}s  {}",
            outcome.unique_states,
            outcome.states,
            outcome.max_depth,
            outcome.elapsed.as_secs_f64(),
            if found.is_empty() {
                "every property holds".to_owned()
            } else {
                format!("violated: {}", found.join("; "))
            },
        );
        if !ok {
            unexpected += 1;
            println!("  UNEXPECTED: expected violations {expected:?}");
        }
        if traces || !ok {
            for name in &found {
                println!(
                    "  counterexample of {name:?}:\n{}",
                    outcome.discoveries[name]
                );
            }
        }
    }
    println!(
        "total {states} states in {seconds:.2}s (size {size}, {search:?}, {threads} thread(s))"
    );
    if unexpected > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
