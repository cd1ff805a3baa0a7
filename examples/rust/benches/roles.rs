//! Many roles in one process: one `Client` acquires N
//! roles at once, holds them for a while and resigns them, for each N given.
//! It reports what a user's process pays for them, sampled from `/proc/self`
//! every second while it holds: threads, open file descriptors, TCP sockets
//! (descriptors that are sockets), resident memory; and how late renewals
//! came (a `renewed` event's time minus the previous lease's grant plus the
//! renew interval: commit time and scheduling delay together), renewal
//! failures and roles lost.
//!
//! With `--handovers K`, once all are held, K of the roles are handed over
//! one at a time to a standby (a second `Client` in this process, with its
//! Kafka connections of its own) and back: timed from the resign call to the
//! successor's acquire returning, away from the loaded client and back to it;
//! and as many times a role of a third client that holds nothing else (the
//! control: same cluster, same machine load, no client shared with the 999).
//! Run with `--roles 1,1000` it shows whether a hand-over slows down when the
//! process holds 999 other roles, and whether the holding or the load does it.
//!
//! ```text
//! cargo bench -p krabka-examples --bench roles -- --bootstrap HOST:PORT \
//!     [--roles 1,10,100] [--hold-s 120] [--lease-ms 10000] [--renew-ms 3000] \
//!     [--handovers K] [--acquire-within-s 120] [--state-topic NAME] [--json PATH]
//! ```
//!
//! Run through `ci/bench-roles.sh`; the results are in
//! `docs/benchmarks/scale.md`. Under `cargo test` it only checks its command
//! line.

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant};

use krabka_coordination::client::Client;
use krabka_coordination::events::{Event, EventKind};
use krabka_coordination::leadership::{Leadership, LeadershipOptions};
use krabka_coordination::transport::kafka::{KafkaConfig, TopicSpec};
use krabka_examples::bench::{cpu_s, quantile};
use krabka_examples::cli::Flags;
use krabka_examples::now_ms;
use serde_json::{json, Value};

const USAGE: &str = "\
usage: cargo bench -p krabka-examples --bench roles -- --bootstrap HOST:PORT [options]

  --roles N,N,...      role counts to hold, one run each (default 1,10,100)
  --hold-s S           how long each run holds its roles (default 120)
  --lease-ms MS        lease duration (default 10000)
  --renew-ms MS        renew interval (default 3000)
  --handovers K        once all are held, hand K roles over to a standby and back, and a
                       control client's role as often (default 0)
  --acquire-within-s S fail the run when its roles are not all acquired within S seconds
                       (default 120)
  --partitions N       partitions of the state topic (default 16)
  --state-topic NAME   the state topic (default: one made for this run, replication
                       factor 3, min.insync.replicas 2, so earlier runs' roles are not in it)
  --json PATH          append the results as one JSON line per run";

struct Args {
    bootstrap: String,
    roles: Vec<usize>,
    hold: Duration,
    lease_ms: u64,
    renew_ms: u64,
    handovers: usize,
    /// How long acquiring all the roles of a run may take before the run
    /// fails, naming how many were not acquired.
    acquire_within: Duration,
    partitions: i32,
    json: Option<std::path::PathBuf>,
    /// The state topic; `None`: one made for this run.
    state_topic: Option<String>,
}

impl Args {
    /// The configuration of every client of the run.
    fn config(&self) -> KafkaConfig {
        let c = KafkaConfig::new(self.bootstrap.clone());
        match &self.state_topic {
            Some(t) => c.with_state_topic(t.clone()),
            None => c,
        }
    }
}

fn parse(mut flags: Flags) -> Result<Args, String> {
    let mut a = Args {
        bootstrap: std::env::var("KRABKA_BOOTSTRAP").unwrap_or_default(),
        roles: vec![1, 10, 100],
        hold: Duration::from_secs(120),
        lease_ms: 10_000,
        renew_ms: 3_000,
        handovers: 0,
        acquire_within: Duration::from_secs(120),
        partitions: 16,
        json: None,
        state_topic: None,
    };
    while let Some(flag) = flags.next_flag() {
        let f = flag.as_str();
        match f {
            "--bootstrap" => a.bootstrap = flags.value(f)?,
            "--roles" => {
                a.roles = flags
                    .value(f)?
                    .split(',')
                    .map(|n| {
                        n.trim()
                            .parse::<usize>()
                            .map_err(|e| format!("--roles {n:?}: {e}"))
                    })
                    .collect::<Result<_, _>>()?
            }
            "--hold-s" => a.hold = Duration::from_secs(flags.number(f)?),
            "--lease-ms" => a.lease_ms = flags.number(f)?,
            "--renew-ms" => a.renew_ms = flags.number(f)?,
            "--handovers" => a.handovers = flags.number(f)?,
            "--acquire-within-s" => a.acquire_within = Duration::from_secs(flags.number(f)?),
            "--partitions" => a.partitions = flags.number(f)?,
            "--json" => a.json = Some(flags.value(f)?.into()),
            "--state-topic" => a.state_topic = Some(flags.value(f)?),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(a)
}

/// One sample of this process.
#[derive(Clone, Copy, Default)]
struct Sample {
    threads: u64,
    fds: u64,
    sockets: u64,
    rss_kib: u64,
}

fn sample() -> Sample {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let (mut fds, mut sockets) = (0, 0);
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        for e in dir.flatten() {
            fds += 1;
            if std::fs::read_link(e.path())
                .map(|p| p.to_string_lossy().starts_with("socket:"))
                .unwrap_or(false)
            {
                sockets += 1;
            }
        }
    }
    Sample {
        threads: field("Threads:"),
        fds,
        sockets,
        rss_kib: field("VmRSS:"),
    }
}

async fn run_one(a: &Args, client: &Client, n: usize) -> Result<Value, String> {
    let base = format!("bench-roles-{}-{n}", now_ms());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let options = client
        .leadership_options()
        .with_lease_duration(Duration::from_millis(a.lease_ms))
        .with_renew_interval(Duration::from_millis(a.renew_ms))
        .with_events(tx);
    let before = sample();
    let cpu0 = cpu_s();
    let t0 = Instant::now();
    let acquires = (0..n).map(|i| {
        let (client, options, role) = (client.clone(), options.clone(), format!("{base}-{i}"));
        tokio::spawn(async move { client.acquire(&role, "holder", options).await })
    });
    // Bounded: a run whose acquires do not all end says so instead of
    // waiting forever (the roles held stop renewing when dropped).
    let until = tokio::time::Instant::now() + a.acquire_within;
    let mut held = Vec::with_capacity(n);
    let mut not_acquired = 0usize;
    let mut first_error = None;
    for mut h in acquires.collect::<Vec<_>>() {
        match tokio::time::timeout_at(until, &mut h).await {
            Ok(Ok(Ok(l))) => held.push(std::sync::Arc::new(l)),
            Ok(Ok(Err(e))) => {
                not_acquired += 1;
                first_error.get_or_insert_with(|| e.to_string());
            }
            Ok(Err(panicked)) => {
                not_acquired += 1;
                first_error.get_or_insert_with(|| panicked.to_string());
            }
            Err(_) => {
                h.abort();
                not_acquired += 1;
            }
        }
    }
    if not_acquired > 0 {
        return Err(format!(
            "{not_acquired} of {n} roles not acquired within {:?}{}",
            a.acquire_within,
            first_error
                .map(|e| format!(" (first error: {e})"))
                .unwrap_or_else(
                    || " (still waiting; RUST_LOG=krabka_coordination=info tells why)".into()
                )
        ));
    }
    let acquired = t0.elapsed();
    let cpu_acquire = cpu_s() - cpu0;
    eprintln!(
        "roles: {n} acquired in {:.2} s, using {cpu_acquire:.1} CPU-seconds of this process",
        acquired.as_secs_f64()
    );
    // Hold: sample every second; read the events as they come.
    let mut peak = Sample::default();
    let mut last_granted: HashMap<String, i64> = HashMap::new();
    let mut lateness = Vec::new();
    let (hold_from, cpu_hold0) = (Instant::now(), cpu_s());
    let hold_until = hold_from + a.hold;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let s = sample();
                peak.threads = peak.threads.max(s.threads);
                peak.fds = peak.fds.max(s.fds);
                peak.sockets = peak.sockets.max(s.sockets);
                peak.rss_kib = peak.rss_kib.max(s.rss_kib);
                if Instant::now() >= hold_until { break; }
            }
            Some(e) = rx.recv() => match e.kind {
                EventKind::Elected { granted_at, .. } => {
                    last_granted.insert(e.role.to_string(), granted_at);
                }
                EventKind::Renewed { deadline } => {
                    let granted = deadline - a.lease_ms as i64;
                    if let Some(prev) = last_granted.insert(e.role.to_string(), granted) {
                        lateness.push((e.at - (prev + a.renew_ms as i64)) as f64);
                    }
                }
                _ => {}
            }
        }
    }
    let cpu_hold = cpu_s() - cpu_hold0;
    let held_for = hold_from.elapsed().as_secs_f64();
    let failures: u32 = held.iter().map(|l| l.renewal_failures()).sum();
    let lost = held.iter().filter(|l| !l.is_held()).count();
    // After the hold: the standby's and control's clients add their threads
    // and connections to the process.
    let handovers = hand_over(a, client, &options, &mut held).await?;
    let t1 = Instant::now();
    let resigns = held.iter().map(|l| {
        let l = std::sync::Arc::clone(l);
        tokio::spawn(async move { l.resign().await })
    });
    let resigned = futures_join(resigns.collect()).await;
    let resign_errors = resigned.iter().filter(|r| !matches!(r, Ok(Ok(())))).count();
    let resign_all = t1.elapsed();
    drop(held);
    let r = json!({
        "roles": n,
        "acquire_all_s": acquired.as_secs_f64(),
        "hold_s": a.hold.as_secs(),
        "before": { "threads": before.threads, "fds": before.fds, "sockets": before.sockets, "rss_mib": before.rss_kib as f64 / 1024.0 },
        "peak": { "threads": peak.threads, "fds": peak.fds, "sockets": peak.sockets, "rss_mib": peak.rss_kib as f64 / 1024.0 },
        "renewals": lateness.len(),
        "renewal_late_ms": { "p50": quantile(&lateness, 0.5), "p99": quantile(&lateness, 0.99), "max": quantile(&lateness, 1.0) },
        "renewal_failures": failures,
        "cpu_s": { "acquire": cpu_acquire, "hold": cpu_hold, "hold_cores": cpu_hold / held_for },
        "roles_lost": lost,
        "resign_all_s": resign_all.as_secs_f64(),
        "resign_errors": resign_errors,
        "handover_ms": {
            "away": summary(&handovers.away),
            "back": summary(&handovers.back),
            "control": summary(&handovers.control),
            "away_resign": summary(&handovers.away_resign),
            "control_resign": summary(&handovers.control_resign),
        },
    });
    println!(
        "{n:>5} roles: acquired in {:>6.2} s | peak {:>5} threads, {:>5} fds, {:>5} sockets, {:>7.1} MiB | {} renewals, late p50 {:.0} ms p99 {:.0} ms max {:.0} ms | {} failures, {} lost | resigned in {:.2} s ({} errors)",
        acquired.as_secs_f64(),
        peak.threads,
        peak.fds,
        peak.sockets,
        peak.rss_kib as f64 / 1024.0,
        lateness.len(),
        quantile(&lateness, 0.5),
        quantile(&lateness, 0.99),
        quantile(&lateness, 1.0),
        failures,
        lost,
        resign_all.as_secs_f64(),
        resign_errors
    );
    println!(
        "{n:>5} roles: this process used {cpu_acquire:.1} CPU-seconds to acquire and {cpu_hold:.1} in the {held_for:.0} s hold ({:.2} cores)",
        cpu_hold / held_for
    );
    if !handovers.away.is_empty() {
        let line = |v: &[f64]| {
            format!(
                "p50 {:.1} ms p99 {:.1} ms max {:.1} ms",
                quantile(v, 0.5),
                quantile(v, 0.99),
                quantile(v, 1.0)
            )
        };
        println!(
            "{n:>5} roles: hand-over of one held role ({} trials): away {}, back {} | between two other clients ({}): {}",
            handovers.away.len(),
            line(&handovers.away),
            line(&handovers.back),
            handovers.control.len(),
            line(&handovers.control),
        );
        println!(
            "{n:>5} roles: of which the resign call: away {} | control {}",
            line(&handovers.away_resign),
            line(&handovers.control_resign),
        );
    }
    Ok(r)
}

/// What `--handovers` measured (ms, from the resign call to the
/// successor's acquire returning).
#[derive(Default)]
struct Handovers {
    /// From the loaded client to the standby.
    away: Vec<f64>,
    /// From the standby back to the loaded client.
    back: Vec<f64>,
    /// Both ways between the standby and a third client that holds nothing
    /// else: the same cluster and machine load, no shared client.
    control: Vec<f64>,
    /// Of `away`: until the loaded client's resign call returned (its
    /// tombstone and deregistration written).
    away_resign: Vec<f64>,
    /// Of `control`, from the control client to the standby: the same.
    control_resign: Vec<f64>,
}

/// `--handovers`: hands `a.handovers` of the held roles, one at a time, to a
/// standby client and back, and as many times a role between the standby
/// and a control client.
async fn hand_over(
    a: &Args,
    client: &Client,
    options: &LeadershipOptions,
    held: &mut Vec<std::sync::Arc<Leadership>>,
) -> Result<Handovers, String> {
    let mut h = Handovers::default();
    if a.handovers == 0 || held.is_empty() {
        return Ok(h);
    }
    let new_client = || {
        let c = Client::new(a.config())
            .and_then(|c| c.with_partitions(a.partitions))
            .map_err(|e| e.to_string())?;
        let o = c
            .leadership_options()
            .with_lease_duration(Duration::from_millis(a.lease_ms))
            .with_renew_interval(Duration::from_millis(a.renew_ms));
        Ok::<_, String>((c, o))
    };
    let (standby, standby_options) = new_client()?;
    let (control, control_options) = new_client()?;
    let control_role = format!("{}-control", held[0].role());
    let mut controlled = control
        .acquire(&control_role, "control", control_options.clone())
        .await
        .map_err(|e| format!("control acquiring {control_role}: {e}"))?;
    for _ in 0..a.handovers {
        // The first of the vector: the one taken back goes to its end.
        let current = held.remove(0);
        let (taken, ms, resigned) =
            one_hand_over(current, &standby, "standby", &standby_options).await?;
        h.away.push(ms);
        h.away_resign.push(resigned);
        let (mine, ms, _) = one_hand_over(taken.into(), client, "holder", options).await?;
        h.back.push(ms);
        held.push(std::sync::Arc::new(mine));
        let (taken, ms, resigned) =
            one_hand_over(controlled.into(), &standby, "standby", &standby_options).await?;
        h.control.push(ms);
        h.control_resign.push(resigned);
        let (back, ms, _) =
            one_hand_over(taken.into(), &control, "control", &control_options).await?;
        h.control.push(ms);
        controlled = back;
    }
    controlled
        .resign()
        .await
        .map_err(|e| format!("resigning {control_role}: {e}"))?;
    Ok(h)
}

/// Hands `current` over to `member` of `to`: the successor waits its turn,
/// `current` resigns. Returns the successor's leadership, the time (ms)
/// from the resign call to its acquire returning, and the time (ms) the
/// resign call took.
async fn one_hand_over(
    current: std::sync::Arc<Leadership>,
    to: &Client,
    member: &str,
    options: &LeadershipOptions,
) -> Result<(Leadership, f64, f64), String> {
    let role = current.role().to_owned();
    let theirs = successor(to, &role, member, options.clone()).await?;
    let t = Instant::now();
    current
        .resign()
        .await
        .map_err(|e| format!("resigning {role}: {e}"))?;
    let resigned = t.elapsed().as_secs_f64() * 1e3;
    drop(current);
    let taken = theirs.await.map_err(|e| e.to_string())??;
    Ok((taken, t.elapsed().as_secs_f64() * 1e3, resigned))
}

/// Starts `member`'s acquire of `role` and returns once it waits its turn
/// (its `waiting` event); the task ends with the acquire.
async fn successor(
    client: &Client,
    role: &str,
    member: &str,
    options: LeadershipOptions,
) -> Result<tokio::task::JoinHandle<Result<Leadership, String>>, String> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let options = options.with_events(tx);
    let (client, role2, member) = (client.clone(), role.to_owned(), member.to_owned());
    let task = tokio::spawn(async move {
        client
            .acquire(&role2, &member, options)
            .await
            .map_err(|e| format!("{member} acquiring {role2}: {e}"))
    });
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        match tokio::time::timeout_at(until.into(), rx.recv()).await {
            Ok(Some(e)) if matches!(e.kind, EventKind::Waiting { .. }) => return Ok(task),
            Ok(Some(_)) => continue,
            Ok(None) => {
                let why = match task.await {
                    Ok(Err(e)) => e,
                    Ok(Ok(_)) => "it was elected at once".into(),
                    Err(e) => e.to_string(),
                };
                return Err(format!(
                    "{role}: the successor never waited its turn ({why})"
                ));
            }
            Err(_) => {
                task.abort();
                return Err(format!(
                    "{role}: the successor did not wait its turn within 30 s"
                ));
            }
        }
    }
}

/// n, p50, p99 and max of `v` as JSON.
fn summary(v: &[f64]) -> Value {
    json!({ "n": v.len(), "p50": quantile(v, 0.5), "p99": quantile(v, 0.99), "max": quantile(v, 1.0) })
}

/// Awaits every future, in order.
async fn futures_join<F: std::future::Future>(fs: Vec<F>) -> Vec<F::Output> {
    let mut out = Vec::with_capacity(fs.len());
    for f in fs {
        out.push(f.await);
    }
    out
}

fn main() {
    let Some(mut args) = krabka_examples::bench::start("roles", USAGE, "ci/bench-roles.sh", parse)
    else {
        return;
    };
    krabka_examples::bench::require_bootstrap("roles", &args.bootstrap, USAGE);
    let rt = krabka_examples::bench::runtime();
    let fresh = args.state_topic.is_none();
    if fresh {
        args.state_topic = Some(format!("krabka-bench-roles-{}", now_ms()));
    }
    let code = rt.block_on(async {
        let client = match Client::new(args.config()).and_then(|c| c.with_partitions(args.partitions))
        {
            Ok(c) => c,
            Err(e) => {
                eprintln!("roles: {e}");
                return 1;
            }
        };
        if fresh {
            let spec = TopicSpec {
                partitions: args.partitions,
                ..TopicSpec::default()
            };
            if let Err(e) = client.ensure_state_topic(spec).await {
                eprintln!("roles: making the run's state topic: {e}");
                return 1;
            }
        }
        println!(
            "roles: state topic {}",
            args.state_topic.as_deref().unwrap_or_default()
        );
        for &n in &args.roles {
            match run_one(&args, &client, n).await {
                Ok(v) => {
                    if let Some(path) = &args.json {
                        let line = json!({ "t_ms": now_ms(), "bootstrap": args.bootstrap, "lease_ms": args.lease_ms, "renew_ms": args.renew_ms, "state_topic": args.state_topic, "result": v });
                        let written = std::fs::OpenOptions::new()
                            .create(true)
                            .append(true)
                            .open(path)
                            .and_then(|mut f| writeln!(f, "{line}"));
                        if let Err(e) = written {
                            eprintln!("roles: writing {}: {e}", path.display());
                            return 1;
                        }
                    }
                }
                Err(e) => {
                    eprintln!("roles: {n} roles: {e}");
                    return 1;
                }
            }
            // Let the resigned roles' producers go before the next run.
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
        0
    });
    rt.shutdown_timeout(Duration::from_secs(5));
    std::process::exit(code);
}
