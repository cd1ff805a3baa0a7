//! A soak of one process whose roles come and go: a week of a job-per-role
//! service's churn in an hour. One `Client` holds a steady set of roles
//! (renewing) for the whole run while it acquires a fresh role name every
//! few hundred milliseconds, holds each a few seconds and resigns it,
//! several in flight at once. Every `--sample-s` it samples the process
//! (resident memory, open descriptors, threads, tokio's live tasks, CPU)
//! and the per-role maps that must not grow with the roles ever touched:
//! the Kafka client's coordinator cache, the transport's mint locks, and the
//! keys of the state readers' compacted views. After the warm-up it reports
//! each series' median over the first and the last window, its maximum and
//! its least-squares slope, and counts failures: acquires that failed or
//! timed out, churned roles lost before their resign, steady roles whose
//! leadership ended other than by resign.
//!
//! ```text
//! cargo bench -p krabka-examples --bench churn -- --bootstrap HOST:PORT \
//!     [--duration-s 3600] [--steady 64] [--churn-every-ms 150] [--churn-hold-ms 3000] \
//!     [--max-in-flight 64] [--lease-ms 10000] [--renew-ms 3000] [--sample-s 10] \
//!     [--warmup-s 300] [--window-s 600] [--samples PATH] [--json PATH]
//! ```
//!
//! Run through `ci/bench-churn.sh`; the results are in
//! `docs/benchmarks/churn.md`. Under `cargo test` it only checks its command
//! line.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use krabka_coordination::client::Client;
use krabka_coordination::events::{Event, EventKind};
use krabka_coordination::leadership::Leadership;
use krabka_coordination::transport::kafka::{
    ensure_state_topic, KafkaConfig, KafkaTransport, TopicSpec,
};
use krabka_examples::bench::{cpu_s, quantile};
use krabka_examples::cli::Flags;
use krabka_examples::now_ms;
use serde_json::{json, Value};

const USAGE: &str = "\
usage: cargo bench -p krabka-examples --bench churn -- --bootstrap HOST:PORT [options]

  --duration-s S        how long the churn runs (default 3600)
  --steady N            roles held (renewing) for the whole run (default 64)
  --churn-every-ms MS   a new role name is acquired every MS (default 150)
  --churn-hold-ms MS    each churned role is held MS, then resigned (default 3000)
  --max-in-flight N     churned roles acquiring or held at once at most; a tick that
                        finds N in flight starts none and is counted (default 64)
  --acquire-timeout-s S a churned role not acquired within S counts as failed (default 30)
  --lease-ms MS         lease duration (default 10000)
  --renew-ms MS         renew interval (default 3000)
  --sample-s S          sample the process every S (default 10)
  --warmup-s S          left out of the statistics (default a quarter of the
                        duration, at most 300)
  --window-s S          the first and last windows compared (default 600; at most
                        half of what follows the warm-up)
  --partitions N        partitions of the state topic (default 16)
  --state-topic NAME    the state topic (default: one made for this run, replication
                        factor 3, min.insync.replicas 2)
  --samples PATH        write every sample as a CSV line
  --json PATH           append the results as one JSON line";

struct Args {
    bootstrap: String,
    duration: Duration,
    steady: usize,
    churn_every: Duration,
    churn_hold: Duration,
    max_in_flight: usize,
    acquire_timeout: Duration,
    lease_ms: u64,
    renew_ms: u64,
    sample: Duration,
    /// `None`: a quarter of the duration, at most 300 s.
    warmup: Option<Duration>,
    window: Duration,
    partitions: i32,
    state_topic: Option<String>,
    samples: Option<std::path::PathBuf>,
    json: Option<std::path::PathBuf>,
}

impl Args {
    /// The warm-up in seconds (set by [`parse`]).
    fn warmup_s(&self) -> f64 {
        self.warmup.unwrap_or_default().as_secs_f64()
    }
}

fn parse(mut flags: Flags) -> Result<Args, String> {
    let mut a = Args {
        bootstrap: std::env::var("KRABKA_BOOTSTRAP").unwrap_or_default(),
        duration: Duration::from_secs(3600),
        steady: 64,
        churn_every: Duration::from_millis(150),
        churn_hold: Duration::from_millis(3000),
        max_in_flight: 64,
        acquire_timeout: Duration::from_secs(30),
        lease_ms: 10_000,
        renew_ms: 3_000,
        sample: Duration::from_secs(10),
        warmup: None,
        window: Duration::from_secs(600),
        partitions: 16,
        state_topic: None,
        samples: None,
        json: None,
    };
    while let Some(flag) = flags.next_flag() {
        let f = flag.as_str();
        match f {
            "--bootstrap" => a.bootstrap = flags.value(f)?,
            "--duration-s" => a.duration = Duration::from_secs(flags.number(f)?),
            "--steady" => a.steady = flags.number(f)?,
            "--churn-every-ms" => a.churn_every = flags.millis(f)?,
            "--churn-hold-ms" => a.churn_hold = flags.millis(f)?,
            "--max-in-flight" => a.max_in_flight = flags.number(f)?,
            "--acquire-timeout-s" => a.acquire_timeout = Duration::from_secs(flags.number(f)?),
            "--lease-ms" => a.lease_ms = flags.number(f)?,
            "--renew-ms" => a.renew_ms = flags.number(f)?,
            "--sample-s" => a.sample = Duration::from_secs(flags.number(f)?),
            "--warmup-s" => a.warmup = Some(Duration::from_secs(flags.number(f)?)),
            "--window-s" => a.window = Duration::from_secs(flags.number(f)?),
            "--partitions" => a.partitions = flags.number(f)?,
            "--state-topic" => a.state_topic = Some(flags.value(f)?),
            "--samples" => a.samples = Some(flags.value(f)?.into()),
            "--json" => a.json = Some(flags.value(f)?.into()),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if a.churn_every.is_zero() || a.sample.is_zero() || a.max_in_flight == 0 {
        return Err("--churn-every-ms, --sample-s and --max-in-flight must be above 0".into());
    }
    let warmup = a
        .warmup
        .unwrap_or_else(|| (a.duration / 4).min(Duration::from_secs(300)));
    a.warmup = Some(warmup);
    if warmup >= a.duration {
        return Err("--warmup-s must be shorter than --duration-s".into());
    }
    Ok(a)
}

/// The series sampled, in the order of the CSV columns.
const SERIES: [&str; 9] = [
    "rss_kib",
    "fds",
    "threads",
    "tasks",
    "coordinators_cached",
    "mint_locks",
    "view_keys",
    "churn_in_flight",
    "cpu_cores",
];

/// Reads `/proc/self`: (VmRSS in KiB, open descriptors, threads).
fn proc_self() -> (u64, u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64);
    (field("VmRSS:"), fds, field("Threads:"))
}

/// The least-squares slope of `ys` over `xs`, per unit of `xs`.
fn slope(xs: &[f64], ys: &[f64]) -> f64 {
    let n = xs.len() as f64;
    if xs.len() < 2 {
        return f64::NAN;
    }
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (x, y) in xs.iter().zip(ys) {
        sxy += (x - mx) * (y - my);
        sxx += (x - mx) * (x - mx);
    }
    if sxx == 0.0 {
        0.0
    } else {
        sxy / sxx
    }
}

/// Counters shared with the churn tasks. Nothing here grows with the roles
/// churned: the latencies are kept only for the first and the last window.
#[derive(Default)]
struct Churn {
    started: AtomicU64,
    acquired: AtomicU64,
    acquire_failed: AtomicU64,
    acquire_timed_out: AtomicU64,
    /// Ticks that found `--max-in-flight` roles in flight and started none.
    skipped: AtomicU64,
    /// Held roles whose leadership ended before their resign.
    lost: AtomicU64,
    /// Resigned roles whose term ended otherwise while the resign ran (the
    /// lease ran out before the resign finished).
    ended_in_resign: AtomicU64,
    resigned: AtomicU64,
    resign_failed: AtomicU64,
    in_flight: AtomicU64,
    /// The first few errors, for the report.
    errors: Mutex<Vec<String>>,
    /// Acquire times (ms) of roles started in the first and the last window.
    acquire_ms_first: Mutex<Vec<f64>>,
    acquire_ms_last: Mutex<Vec<f64>>,
}

impl Churn {
    fn note_error(&self, e: String) {
        let mut errors = self.errors.lock().unwrap_or_else(|e| e.into_inner());
        if errors.len() < 10 {
            eprintln!("churn: {e}");
            errors.push(e);
        }
    }
}

/// Which window, if any, a moment `t` (seconds from the start) falls in.
#[derive(Clone, Copy)]
struct Windows {
    first: (f64, f64),
    last: (f64, f64),
}

impl Windows {
    fn new(a: &Args) -> Windows {
        let (w, d) = (a.warmup_s(), a.duration.as_secs_f64());
        let len = a.window.as_secs_f64().min((d - w) / 2.0);
        Windows {
            first: (w, w + len),
            last: (d - len, d),
        }
    }
    fn in_first(&self, t: f64) -> bool {
        t >= self.first.0 && t < self.first.1
    }
    fn in_last(&self, t: f64) -> bool {
        t >= self.last.0 && t <= self.last.1
    }
}

/// One churned role: acquired, held `hold`, resigned.
async fn churn_one(
    client: Client,
    role: String,
    options: krabka_coordination::leadership::LeadershipOptions,
    a: (Duration, Duration),
    churn: Arc<Churn>,
    at_s: f64,
    windows: Windows,
) {
    let (hold, acquire_timeout) = a;
    let t0 = Instant::now();
    let acquired = tokio::time::timeout(acquire_timeout, client.acquire(&role, "churn", options));
    let l = match acquired.await {
        Ok(Ok(l)) => l,
        Ok(Err(e)) => {
            churn.acquire_failed.fetch_add(1, Ordering::Relaxed);
            churn.note_error(format!("acquiring {role}: {e}"));
            return;
        }
        Err(_) => {
            churn.acquire_timed_out.fetch_add(1, Ordering::Relaxed);
            churn.note_error(format!("acquiring {role}: not within {acquire_timeout:?}"));
            return;
        }
    };
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    churn.acquired.fetch_add(1, Ordering::Relaxed);
    if windows.in_first(at_s) {
        lock(&churn.acquire_ms_first).push(ms);
    } else if windows.in_last(at_s) {
        lock(&churn.acquire_ms_last).push(ms);
    }
    tokio::time::sleep(hold).await;
    if !l.is_held() {
        churn.lost.fetch_add(1, Ordering::Relaxed);
        churn.note_error(format!("{role} lost before its resign: {:?}", l.err()));
        return;
    }
    match l.resign().await {
        Ok(()) => churn.resigned.fetch_add(1, Ordering::Relaxed),
        Err(e) => {
            churn.note_error(format!("resigning {role}: {e}"));
            churn.resign_failed.fetch_add(1, Ordering::Relaxed)
        }
    };
    match l.err().as_deref() {
        None | Some(krabka_coordination::Error::Resigned) => {}
        Some(e) => {
            churn.ended_in_resign.fetch_add(1, Ordering::Relaxed);
            churn.note_error(format!("{role} ended while resigning: {e}"));
        }
    }
}

/// A churned role in flight: counted out when its task ends, even by a
/// panic.
struct InFlight(Arc<Churn>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One sample: seconds from the start, then the [`SERIES`].
type Row = (f64, [f64; SERIES.len()]);

/// Each series after the warm-up: first and last windows' medians, maximum,
/// slope per hour; and the maximum over the whole run.
fn statistics(rows: &[Row], windows: Windows, warmup: f64) -> BTreeMap<&'static str, Value> {
    let mut out = BTreeMap::new();
    for (i, name) in SERIES.iter().enumerate() {
        let after: Vec<&Row> = rows.iter().filter(|r| r.0 >= warmup).collect();
        let pick = |f: &dyn Fn(f64) -> bool| -> Vec<f64> {
            after.iter().filter(|r| f(r.0)).map(|r| r.1[i]).collect()
        };
        let first = pick(&|t| windows.in_first(t));
        let last = pick(&|t| windows.in_last(t));
        let xs: Vec<f64> = after.iter().map(|r| r.0 / 3600.0).collect();
        let ys: Vec<f64> = after.iter().map(|r| r.1[i]).collect();
        let all: Vec<f64> = rows.iter().map(|r| r.1[i]).collect();
        out.insert(
            *name,
            json!({
                "first_median": quantile(&first, 0.5),
                "last_median": quantile(&last, 0.5),
                "max_after_warmup": quantile(&ys, 1.0),
                "max": quantile(&all, 1.0),
                "slope_per_hour": slope(&xs, &ys),
            }),
        );
    }
    out
}

async fn run(a: &Args, transport: Arc<KafkaTransport>, client: Client) -> Result<Value, String> {
    let run_id = now_ms();
    let windows = Windows::new(a);
    let (steady_tx, mut steady_rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let base = client
        .leadership_options()
        .with_lease_duration(Duration::from_millis(a.lease_ms))
        .with_renew_interval(Duration::from_millis(a.renew_ms));
    let steady_options = base.clone().with_events(steady_tx);

    // The steady set, acquired at once.
    let t0 = Instant::now();
    let acquires = (0..a.steady).map(|i| {
        let (client, options) = (client.clone(), steady_options.clone());
        let role = format!("steady-{run_id}-{i}");
        tokio::spawn(async move { client.acquire(&role, "steady", options).await })
    });
    let mut steady: Vec<Arc<Leadership>> = Vec::with_capacity(a.steady);
    for h in acquires.collect::<Vec<_>>() {
        match h.await {
            Ok(Ok(l)) => steady.push(Arc::new(l)),
            Ok(Err(e)) => return Err(format!("acquiring the steady set: {e}")),
            Err(e) => return Err(format!("acquiring the steady set: {e}")),
        }
    }
    eprintln!(
        "churn: {} steady roles acquired in {:.2} s",
        a.steady,
        t0.elapsed().as_secs_f64()
    );
    // A steady role that ends before the run resigns it is lost.
    let (lost_tx, mut lost_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    for l in &steady {
        let (l, lost_tx) = (Arc::clone(l), lost_tx.clone());
        tokio::spawn(async move {
            l.done().await;
            let _ = lost_tx.send(format!("{}: {:?}", l.role(), l.err()));
        });
    }

    // The churned roles' events are only counted, by kind.
    let (churn_tx, mut churn_rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let churn_options = base.with_events(churn_tx);
    let churn = Arc::new(Churn::default());
    let mut churn_events: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut steady_events: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut steady_lost: Vec<String> = Vec::new();
    let mut last_granted: HashMap<String, i64> = HashMap::new();
    let (mut late_first, mut late_last) = (Vec::new(), Vec::new());

    let mut sample_out = match &a.samples {
        Some(p) => {
            let mut f = std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?;
            writeln!(f, "t_s,{}", SERIES.join(",")).map_err(|e| e.to_string())?;
            Some(f)
        }
        None => None,
    };
    let mut rows: Vec<Row> = Vec::new();
    let start = Instant::now();
    let until = start + a.duration;
    let (mut cpu_prev, mut at_prev) = (cpu_s(), start);
    let mut next_role = 0u64;
    let mut churn_tick = tokio::time::interval(a.churn_every);
    churn_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut sample_tick = tokio::time::interval(a.sample);
    sample_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let hold_and_timeout = (a.churn_hold, a.acquire_timeout);
    loop {
        tokio::select! {
            _ = churn_tick.tick() => {
                if Instant::now() >= until { break; }
                if churn.in_flight.load(Ordering::Relaxed) >= a.max_in_flight as u64 {
                    churn.skipped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let role = format!("churn-{run_id}-{next_role}");
                next_role += 1;
                churn.started.fetch_add(1, Ordering::Relaxed);
                churn.in_flight.fetch_add(1, Ordering::Relaxed);
                let (client, options, c) = (client.clone(), churn_options.clone(), Arc::clone(&churn));
                let at_s = start.elapsed().as_secs_f64();
                tokio::spawn(async move {
                    let _counted = InFlight(Arc::clone(&c));
                    churn_one(client, role, options, hold_and_timeout, c, at_s, windows).await;
                });
            }
            _ = sample_tick.tick() => {
                let now = Instant::now();
                let t = now.duration_since(start).as_secs_f64();
                let (rss, fds, threads) = proc_self();
                let cpu = cpu_s();
                let cores = (cpu - cpu_prev) / now.duration_since(at_prev).as_secs_f64().max(1e-3);
                (cpu_prev, at_prev) = (cpu, now);
                let row: Row = (t, [
                    rss as f64,
                    fds as f64,
                    threads as f64,
                    tokio::runtime::Handle::current().metrics().num_alive_tasks() as f64,
                    transport.kafka_client().kafka().coordinators_cached() as f64,
                    transport.mint_locks_held() as f64,
                    transport.state_view_keys().await as f64,
                    churn.in_flight.load(Ordering::Relaxed) as f64,
                    if rows.is_empty() { f64::NAN } else { cores },
                ]);
                if let Some(f) = sample_out.as_mut() {
                    let cols: Vec<String> = row.1.iter().map(|v| format!("{v:.3}")).collect();
                    let _ = writeln!(f, "{t:.1},{}", cols.join(","));
                }
                if (rows.len() as u64) % (60 / a.sample.as_secs().clamp(1, 60)) == 0 {
                    eprintln!(
                        "churn: {:>5.0} s | {:.1} MiB, {fds} fds, {threads} threads, {:.0} tasks | coordinators {:.0}, mint locks {:.0}, view keys {:.0} | churned {} ({} in flight), failed {}, lost {}, steady lost {}, load {}",
                        t, rss as f64 / 1024.0, row.1[3], row.1[4], row.1[5], row.1[6],
                        churn.resigned.load(Ordering::Relaxed), churn.in_flight.load(Ordering::Relaxed),
                        churn.acquire_failed.load(Ordering::Relaxed) + churn.acquire_timed_out.load(Ordering::Relaxed),
                        churn.lost.load(Ordering::Relaxed) + churn.ended_in_resign.load(Ordering::Relaxed), steady_lost.len(),
                        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split_whitespace().next().unwrap_or("?"),
                    );
                }
                rows.push(row);
            }
            Some(e) = steady_rx.recv() => {
                *steady_events.entry(e.kind.name()).or_default() += 1;
                match e.kind {
                    EventKind::Elected { granted_at, .. } => {
                        last_granted.insert(e.role.to_string(), granted_at);
                    }
                    EventKind::Renewed { deadline } => {
                        let granted = deadline - a.lease_ms as i64;
                        if let Some(prev) = last_granted.insert(e.role.to_string(), granted) {
                            let late = (e.at - (prev + a.renew_ms as i64)) as f64;
                            let t = start.elapsed().as_secs_f64();
                            if windows.in_first(t) { late_first.push(late) }
                            else if windows.in_last(t) { late_last.push(late) }
                        }
                    }
                    _ => {}
                }
            }
            Some(e) = churn_rx.recv() => {
                *churn_events.entry(e.kind.name()).or_default() += 1;
            }
            Some(why) = lost_rx.recv() => {
                eprintln!("churn: steady role lost: {why}");
                steady_lost.push(why);
            }
        }
    }
    let churned_for = start.elapsed().as_secs_f64();
    // The roles in flight end (acquire, hold, resign), then the steady set
    // is resigned.
    let drain_until = Instant::now() + a.churn_hold + a.acquire_timeout + Duration::from_secs(30);
    while churn.in_flight.load(Ordering::Relaxed) > 0 && Instant::now() < drain_until {
        tokio::time::sleep(Duration::from_millis(100)).await;
        while let Ok(e) = churn_rx.try_recv() {
            *churn_events.entry(e.kind.name()).or_default() += 1;
        }
    }
    while let Ok(e) = churn_rx.try_recv() {
        *churn_events.entry(e.kind.name()).or_default() += 1;
    }
    let left_in_flight = churn.in_flight.load(Ordering::Relaxed);
    while let Ok(why) = lost_rx.try_recv() {
        steady_lost.push(why);
    }
    let steady_renewal_failures: u32 = steady.iter().map(|l| l.renewal_failures()).sum();
    let mut steady_resign_errors = 0;
    for l in &steady {
        if l.resign().await.is_err() {
            steady_resign_errors += 1;
        }
    }
    drop(steady);

    let stats = statistics(&rows, windows, a.warmup_s());
    let c = &churn;
    let n = |x: &AtomicU64| x.load(Ordering::Relaxed);
    let failed = n(&c.acquire_failed) + n(&c.acquire_timed_out);
    let (acq_first, acq_last) = (
        lock(&c.acquire_ms_first).clone(),
        lock(&c.acquire_ms_last).clone(),
    );
    let pcts = |v: &[f64]| json!({ "n": v.len(), "p50": quantile(v, 0.5), "p99": quantile(v, 0.99), "max": quantile(v, 1.0) });
    let result = json!({
        "duration_s": churned_for,
        "steady": a.steady,
        "churn_every_ms": a.churn_every.as_millis() as u64,
        "churn_hold_ms": a.churn_hold.as_millis() as u64,
        "max_in_flight": a.max_in_flight,
        "lease_ms": a.lease_ms,
        "renew_ms": a.renew_ms,
        "sample_s": a.sample.as_secs(),
        "warmup_s": a.warmup_s(),
        "windows_s": { "first": [windows.first.0, windows.first.1], "last": [windows.last.0, windows.last.1] },
        "samples": rows.len(),
        "series": stats,
        "churn": {
            "started": n(&c.started),
            "acquired": n(&c.acquired),
            "acquire_failed": n(&c.acquire_failed),
            "acquire_timed_out": n(&c.acquire_timed_out),
            "lost_before_resign": n(&c.lost),
            "ended_while_resigning": n(&c.ended_in_resign),
            "resigned": n(&c.resigned),
            "resign_failed": n(&c.resign_failed),
            "ticks_skipped_full": n(&c.skipped),
            "left_in_flight": left_in_flight,
            "per_hour": n(&c.started) as f64 * 3600.0 / churned_for,
            "acquire_ms_first_window": pcts(&acq_first),
            "acquire_ms_last_window": pcts(&acq_last),
            "events": churn_events,
            "first_errors": lock(&c.errors).clone(),
        },
        "steady_roles": {
            "lost": steady_lost.len(),
            "lost_why": steady_lost,
            "renewal_failures_at_end": steady_renewal_failures,
            "resign_errors": steady_resign_errors,
            "renewal_late_ms_first_window": pcts(&late_first),
            "renewal_late_ms_last_window": pcts(&late_last),
            "events": steady_events,
        },
        "failures": failed + n(&c.lost) + n(&c.ended_in_resign) + steady_lost.len() as u64,
    });
    print_report(&result, &stats);
    Ok(result)
}

fn print_report(r: &Value, stats: &BTreeMap<&'static str, Value>) {
    println!(
        "churn: {:.0} s, {} steady roles, a role every {} ms held {} ms; windows {} and {} s",
        r["duration_s"].as_f64().unwrap_or(0.0),
        r["steady"],
        r["churn_every_ms"],
        r["churn_hold_ms"],
        r["windows_s"]["first"],
        r["windows_s"]["last"]
    );
    println!(
        "{:<20} {:>14} {:>14} {:>14} {:>10} {:>16}",
        "series", "first median", "last median", "max (warm)", "max", "slope per hour"
    );
    for (name, s) in stats {
        let f = |k: &str| s[k].as_f64().unwrap_or(f64::NAN);
        println!(
            "{:<20} {:>14.1} {:>14.1} {:>14.1} {:>10.1} {:>16.2}",
            name,
            f("first_median"),
            f("last_median"),
            f("max_after_warmup"),
            f("max"),
            f("slope_per_hour")
        );
    }
    let c = &r["churn"];
    println!(
        "churned roles: {} started ({:.0} an hour), {} acquired, {} failed, {} timed out, {} lost before resign, {} resigned ({} ended by their lease while resigning), {} resign errors, {} ticks skipped (in flight full), {} left in flight",
        c["started"], c["per_hour"].as_f64().unwrap_or(0.0), c["acquired"], c["acquire_failed"], c["acquire_timed_out"],
        c["lost_before_resign"], c["resigned"], c["ended_while_resigning"], c["resign_failed"], c["ticks_skipped_full"], c["left_in_flight"]
    );
    println!(
        "churned acquire ms, first window: {}; last window: {}",
        c["acquire_ms_first_window"], c["acquire_ms_last_window"]
    );
    let s = &r["steady_roles"];
    println!(
        "steady roles: {} lost, {} resign errors; renewals late ms, first window: {}; last window: {}",
        s["lost"],
        s["resign_errors"],
        s["renewal_late_ms_first_window"],
        s["renewal_late_ms_last_window"]
    );
    println!("events: steady {}; churned {}", s["events"], c["events"]);
    println!("failures in all: {}", r["failures"]);
}

fn main() {
    let Some(mut args) = krabka_examples::bench::start("churn", USAGE, "ci/bench-churn.sh", parse)
    else {
        return;
    };
    krabka_examples::bench::require_bootstrap("churn", &args.bootstrap, USAGE);
    let rt = krabka_examples::bench::runtime();
    let fresh = args.state_topic.is_none();
    if fresh {
        args.state_topic = Some(format!("krabka-bench-churn-{}", now_ms()));
    }
    let code = rt.block_on(async {
        let config = KafkaConfig::new(args.bootstrap.clone())
            .with_state_topic(args.state_topic.clone().unwrap_or_default());
        if fresh {
            let spec = TopicSpec::default();
            if let Err(e) = ensure_state_topic(
                &config,
                args.partitions,
                spec.replication_factor,
                spec.min_insync_replicas,
            )
            .await
            {
                eprintln!("churn: making the run's state topic: {e}");
                return 1;
            }
        }
        // The transport kept apart from the client, so that its per-role
        // maps can be read: `Client::new` builds the same one.
        let transport = match KafkaTransport::new(config, None) {
            Ok(t) => Arc::new(t),
            Err(e) => {
                eprintln!("churn: {e}");
                return 1;
            }
        };
        let client = match Client::from_transport(Arc::clone(&transport) as _)
            .with_partitions(args.partitions)
        {
            Ok(c) => c,
            Err(e) => {
                eprintln!("churn: {e}");
                return 1;
            }
        };
        println!(
            "churn: state topic {}",
            args.state_topic.as_deref().unwrap_or_default()
        );
        match run(&args, transport, client).await {
            Ok(v) => {
                if let Some(path) = &args.json {
                    let line = json!({ "t_ms": now_ms(), "bootstrap": args.bootstrap, "state_topic": args.state_topic, "result": v });
                    let written = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(path)
                        .and_then(|mut f| writeln!(f, "{line}"));
                    if let Err(e) = written {
                        eprintln!("churn: writing {}: {e}", path.display());
                        return 1;
                    }
                }
                0
            }
            Err(e) => {
                eprintln!("churn: {e}");
                1
            }
        }
    });
    rt.shutdown_timeout(Duration::from_secs(5));
    std::process::exit(code);
}
