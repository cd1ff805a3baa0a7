//! Crash failover with member processes: two `member` processes write
//! guarded records every 150 ms; the leader is killed with SIGKILL at a
//! varying point of its renew interval; the overhead is the standby's
//! `elected` instant minus the dead leader's last committed deadline (the
//! standby is rank 0, so the stagger adds nothing). The killed member
//! restarts and rejoins at the tail for the next trial.

use std::path::Path;
use std::time::Duration;

use krabka_coordination::client::Client;
use krabka_coordination::transport::kafka::KafkaConfig;
use krabka_examples::{kafka, now_ms, MemberProcess, MemberSpec};
use serde_json::{json, Value};

use crate::stats::{stat_line, stats};
use crate::Args;

/// A member process of `role` with the bench's settings: the command line
/// every member-process benchmark starts from.
pub(crate) fn member_spec(a: &Args, role: &str, id: &str, logs: &Path) -> MemberSpec {
    MemberSpec::new(&a.member_bin, &a.bootstrap, role, id)
        .arg("--partitions", a.partitions)
        .arg("--lease-ms", a.lease_ms)
        .arg("--renew-ms", a.renew_ms)
        .arg("--stagger-ms", a.stagger_ms)
        .flag("--exit-on-stdin-eof")
        .flag("--skip-topic-check")
        .kafka_settings(&a.settings)
        .env(
            "RUST_LOG",
            &std::env::var("BENCH_MEMBER_LOG")
                .unwrap_or_else(|_| "warn,krabka_coordination=info".into()),
        )
        .stderr_to(logs.join(format!("{id}-{}.log", now_ms())))
}

fn spawn(
    a: &Args,
    role: &str,
    topic: &str,
    id: &'static str,
    logs: &Path,
) -> Result<MemberProcess, String> {
    member_spec(a, role, id, logs)
        .arg("--data-topic", topic)
        .arg("--write-every-ms", 150)
        .spawn()
        .map_err(|e| e.to_string())
}

/// SIGKILL of the leader -> the standby's first lease, `--crash-trials`
/// times.
pub async fn crash(a: &Args, config: &KafkaConfig) -> Result<Value, String> {
    let role = format!("bench-crash-{}", now_ms());
    let topic = format!("bench-crash-data-{}", now_ms());
    kafka::create_topic(&a.bootstrap, &topic, 1, 1).await?;
    let logs = std::env::temp_dir().join("krabka-bench").join(&role);
    std::fs::create_dir_all(&logs).map_err(|e| format!("creating {}: {e}", logs.display()))?;
    let observer = Client::new(config.clone())
        .and_then(|c| c.with_partitions(a.partitions))
        .map_err(|e| e.to_string())?;
    let start = Duration::from_secs(30);
    let mut leader = spawn(a, &role, &topic, "x", &logs)?;
    leader
        .wait_named("elected", start)
        .map_err(|e| e.to_string())?;
    let mut standby = spawn(a, &role, &topic, "y", &logs)?;
    standby
        .wait_named("waiting", start)
        .map_err(|e| e.to_string())?;
    eprintln!(
        "crash failover: {} trials on role {role} (member logs in {})",
        a.crash_trials,
        logs.display()
    );
    let mut beyond = Vec::new();
    let mut total = Vec::new();
    for trial in 0..a.crash_trials {
        // Kill at a varying point of the renew interval.
        let pause = 700 + (trial as u64 * 173) % a.renew_ms.max(1);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let kill_at = now_ms();
        leader
            .kill()
            .map_err(|e| format!("killing {}: {e}", leader.member()))?;
        // The dead leader's last committed lease (an open renewal, if it
        // died in one, is never committed).
        tokio::time::sleep(Duration::from_millis(50)).await;
        let s = observer
            .describe_role_state(&role)
            .await
            .map_err(|e| e.to_string())?;
        let dead = s.lease.ok_or("no lease after the kill")?;
        if dead.member != leader.member() {
            return Err(format!(
                "the lease names {} but {} was the leader",
                dead.member,
                leader.member()
            ));
        }
        let elected = standby
            .wait_named("elected", Duration::from_millis(a.lease_ms * 3 + 10_000))
            .map_err(|e| e.to_string())?;
        let at = elected["t_ms"].as_i64().unwrap_or(0);
        // The standby is rank 0: it challenges at the deadline.
        let over = (at - dead.deadline) as f64;
        if a.verbose {
            eprintln!(
                "  trial {trial:>3}: kill at deadline-{} ms, elected {} ms after the deadline ({} ms after the kill)",
                dead.deadline - kill_at,
                over,
                at - kill_at
            );
        }
        beyond.push(over);
        total.push((at - kill_at) as f64);
        // The killed member restarts and waits at the tail; roles swap.
        let id = if leader.member() == "x" { "x" } else { "y" };
        let restarted = spawn(a, &role, &topic, id, &logs)?;
        restarted
            .wait_named("waiting", start)
            .map_err(|e| e.to_string())?;
        leader = std::mem::replace(&mut standby, restarted);
    }
    println!(
        "crash failover ({} trials, lease {} ms, renew {} ms, rank 0)",
        beyond.len(),
        a.lease_ms,
        a.renew_ms
    );
    println!("{}", stat_line("beyond deadline + rank x stagger", &beyond));
    println!("{}", stat_line("kill -> next lease committed", &total));
    Ok(json!({ "beyond_deadline": stats(&beyond), "kill_to_lease": stats(&total) }))
}
