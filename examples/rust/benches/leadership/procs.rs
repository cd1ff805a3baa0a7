//! Hand-over and first election the way a user meets them: `member`
//! processes, timed from outside by this process's clock.
//!
//! * **hand-over** (`handover-procs`): `--members` members (default two)
//!   run with `--rejoin`. The bench writes `resign` to the leader's stdin
//!   and times until it reads the next member's `elected` line; it also
//!   reads when the leader's `resigned` line (its lease tombstone
//!   committed) came. The resigned member registers again at the tail.
//! * **first election** (`first-election`): a member of a role nobody ever
//!   held, timed from its `registered` line to its `elected` line (and from
//!   the process's start, which adds the process and client start-up).

use std::path::Path;
use std::time::{Duration, Instant};

use krabka_examples::{now_ms, MemberProcess};
use serde_json::{json, Value};

use crate::stats::{ms, stat_line, stats};
use crate::Args;

/// Starts one member of `role` with the bench's settings.
fn spawn(
    a: &Args,
    role: &str,
    id: &str,
    logs: &Path,
    rejoin: bool,
) -> Result<MemberProcess, String> {
    let mut spec = crate::crash::member_spec(a, role, id, logs);
    if rejoin {
        spec = spec.flag("--rejoin");
    }
    spec.spawn().map_err(|e| e.to_string())
}

/// Waits for the first `name` line of `p` from index `from` on; returns its
/// index and when this process read it.
fn wait_from(
    p: &MemberProcess,
    from: usize,
    name: &str,
    within: Duration,
) -> Result<(usize, Instant), String> {
    let (i, _) = p
        .wait_event(from, within, name, |e| e["event"] == name)
        .map_err(|e| e.to_string())?;
    Ok((i, p.arrived_at(i).ok_or("a line without its arrival")?))
}

fn log_dir(role: &str) -> Result<std::path::PathBuf, String> {
    let logs = std::env::temp_dir().join("krabka-bench").join(role);
    std::fs::create_dir_all(&logs).map_err(|e| format!("creating {}: {e}", logs.display()))?;
    Ok(logs)
}

/// `resign` on the leader's stdin -> the next member's `elected` line,
/// `--handover-trials` times, with `--members` member processes (the
/// leader and the standbys in rank order; each resigned member registers
/// again at the tail).
pub async fn handover(a: &Args) -> Result<Value, String> {
    let role = format!("bench-handover-procs-{}", now_ms());
    let logs = log_dir(&role)?;
    let start = Duration::from_secs(30);
    let within = Duration::from_millis(a.lease_ms * 3 + 10_000);
    let ids = ["x", "y", "z", "u", "v", "w", "s", "t"];
    let count = a.members.clamp(2, ids.len());
    let first = spawn(a, &role, ids[0], &logs, true)?;
    wait_from(&first, 0, "elected", start)?;
    // In rank order: the leader first, then each standby as it registered.
    let mut ranked = std::collections::VecDeque::from([first]);
    for id in &ids[1..count] {
        let standby = spawn(a, &role, id, &logs, true)?;
        wait_from(&standby, 0, "waiting", start)?;
        ranked.push_back(standby);
    }
    eprintln!(
        "hand-over between processes: {} trials, {count} members, on role {role} (member logs in {})",
        a.handover_trials,
        logs.display()
    );
    let (mut total, mut cleared, mut after_cleared) = (Vec::new(), Vec::new(), Vec::new());
    for trial in 0..a.handover_trials {
        // Between renewals at varying points, as a user's resign comes.
        let pause = 300 + (trial as u64 * 137) % a.renew_ms.max(1);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let (from_l, from_s) = (ranked[0].event_count(), ranked[1].event_count());
        let t0 = Instant::now();
        let leader = &mut ranked[0];
        leader
            .send("resign")
            .map_err(|e| format!("writing to {}: {e}", leader.member()))?;
        let (leader, next) = (&ranked[0], &ranked[1]);
        let (_, elected) = wait_from(next, from_s, "elected", within)?;
        let (_, resigned) = wait_from(leader, from_l, "resigned", within)?;
        total.push(ms(elected - t0));
        cleared.push(ms(resigned.saturating_duration_since(t0)));
        after_cleared.push(ms(elected.saturating_duration_since(resigned)));
        if a.verbose {
            eprintln!(
                "  trial {trial:>3}: elected {:.1} ms after the resign command (lease cleared at {:.1} ms)",
                ms(elected - t0),
                ms(resigned.saturating_duration_since(t0))
            );
        }
        // The resigned member registers again at the tail.
        wait_from(leader, from_l, "waiting", within)?;
        ranked.rotate_left(1);
    }
    println!(
        "hand-over between processes ({} trials, {} members, lease {} ms, renew {} ms, stagger {} ms, timed from outside)",
        total.len(),
        ranked.len(),
        a.lease_ms,
        a.renew_ms,
        a.stagger_ms
    );
    println!("{}", stat_line("resign command -> elected line", &total));
    println!(
        "{}",
        stat_line("  resign -> leader's resigned line", &cleared)
    );
    println!(
        "{}",
        stat_line("  resigned line -> elected line", &after_cleared)
    );
    Ok(json!({
        "members": ranked.len(),
        "lease_ms": a.lease_ms,
        "renew_ms": a.renew_ms,
        "stagger_ms": a.stagger_ms,
        "total": stats(&total),
        "resign_to_cleared": stats(&cleared),
        "cleared_to_elected": stats(&after_cleared),
    }))
}

/// A member of a brand-new role: `registered` -> `elected`, and process
/// start -> `elected`, `--first-trials` times.
pub async fn first_election(a: &Args) -> Result<Value, String> {
    let base = format!("bench-first-{}", now_ms());
    let logs = log_dir(&base)?;
    let (mut registered, mut started) = (Vec::new(), Vec::new());
    for trial in 0..a.first_trials {
        let role = format!("{base}-{trial}");
        let t0 = Instant::now();
        let mut m = spawn(a, &role, "x", &logs, false)?;
        let (_, reg) = wait_from(&m, 0, "registered", Duration::from_secs(30))?;
        let (_, elected) = wait_from(&m, 0, "elected", Duration::from_secs(30))?;
        registered.push(ms(elected.saturating_duration_since(reg)));
        started.push(ms(elected - t0));
        if a.verbose {
            eprintln!(
                "  trial {trial:>3}: elected {:.1} ms after registering, {:.1} ms after the process started",
                ms(elected.saturating_duration_since(reg)),
                ms(elected - t0)
            );
        }
        m.close_stdin();
        if m.wait_exit(Duration::from_secs(10)).is_none() {
            m.kill().map_err(|e| e.to_string())?;
        }
    }
    println!(
        "first election of a new role ({} trials, a member process each)",
        registered.len()
    );
    println!(
        "{}",
        stat_line("registered line -> elected line", &registered)
    );
    println!("{}", stat_line("process start -> elected line", &started));
    Ok(json!({
        "registered_to_elected": stats(&registered),
        "start_to_elected": stats(&started),
    }))
}
