//! The benchmarks with both members in this process: the hand-over (timed
//! transport calls) and the in-process crash failover. Each member has its
//! own `KafkaTransport` (its own producers, consumers and connections)
//! behind its own `Client`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use krabka_coordination::client::Client;
use krabka_coordination::leadership::{Leadership, LeadershipOptions};
use krabka_coordination::transport::kafka::{KafkaConfig, KafkaTransport};
use krabka_coordination::transport::Transport;
use krabka_coordination::Result;
use krabka_examples::now_ms;
use serde_json::{json, Value};

use crate::stats::{ms, stat_line, stats};
use crate::timed::{Hints, Span, Spans, Timed};
use crate::Args;

/// The transports of a run, for their mint counters.
#[derive(Default)]
struct Bases(Mutex<Vec<Arc<KafkaTransport>>>);

impl Bases {
    fn new_transport(
        &self,
        config: &KafkaConfig,
        who: &str,
    ) -> std::result::Result<Arc<KafkaTransport>, String> {
        let base =
            Arc::new(KafkaTransport::new(config.clone(), Some(who)).map_err(|e| e.to_string())?);
        self.0.lock().unwrap().push(Arc::clone(&base));
        Ok(base)
    }

    /// The mint counters, summed.
    fn mint_stats(&self) -> Value {
        let minted: u64 = self
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|t| t.mint_stats().minted)
            .sum();
        json!({ "minted": minted })
    }
}

fn mints_line(m: &Value) -> String {
    format!("mints: {}", m["minted"])
}

fn client(transport: Arc<dyn Transport>, a: &Args) -> std::result::Result<Client, String> {
    Client::from_transport(transport)
        .with_partitions(a.partitions)
        .map_err(|e| e.to_string())
}

fn options(client: &Client, a: &Args) -> LeadershipOptions {
    client
        .leadership_options()
        .with_lease_duration(Duration::from_millis(a.lease_ms))
        .with_renew_interval(Duration::from_millis(a.renew_ms))
        .with_challenge_stagger(Duration::from_millis(a.stagger_ms))
}

type Pending = tokio::sync::oneshot::Receiver<Result<(Leadership, Instant)>>;

/// A member of `client` waiting for the role in a task; resolves when its
/// first lease is committed.
fn standby(client: Client, role: String, member: &'static str, o: LeadershipOptions) -> Pending {
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let r = client
            .acquire(&role, member, o)
            .await
            .map(|l| (l, Instant::now()));
        let _ = tx.send(r);
    });
    rx
}

async fn taken(
    pending: &mut Pending,
    within: Duration,
) -> std::result::Result<(Leadership, Instant), String> {
    tokio::time::timeout(within, pending)
        .await
        .map_err(|_| format!("the standby did not take over within {within:?}"))?
        .map_err(|_| "the standby task ended".to_string())?
        .map_err(|e| format!("the standby's acquire failed: {e}"))
}

/// The parts of one hand-over, in milliseconds.
#[derive(Default, Debug, Clone)]
struct Parts {
    total: f64,
    resign_call: f64,
    resign_wait: f64,
    resign_supersede: f64,
    resign_tombstone: f64,
    resign_deregister: f64,
    standby_wake: f64,
    standby_to_mint: f64,
    standby_mint: f64,
    standby_lease: f64,
}

fn first<'a>(spans: &'a [Span], who: &str, op: &str, after: Instant) -> Option<&'a Span> {
    spans
        .iter()
        .filter(|s| s.who == who && s.op == op && s.start >= after)
        .min_by_key(|s| s.start)
}

fn parts(
    spans: &[Span],
    resigner: &str,
    standby: &str,
    t0: Instant,
    resigned: Instant,
    t1: Instant,
) -> Parts {
    let d = |a: Instant, b: Instant| ms(b.saturating_duration_since(a));
    let mut p = Parts {
        total: d(t0, t1),
        resign_call: d(t0, resigned),
        ..Parts::default()
    };
    let span = |who, op| first(spans, who, op, t0).map(|s| d(s.start, s.end));
    p.resign_supersede = span(resigner, "supersede").unwrap_or_default();
    p.resign_tombstone = span(resigner, "write_lease(tombstone)").unwrap_or_default();
    // Before the tombstone is sent, the resign waits for a renewal in
    // flight (the term's writes lock).
    p.resign_wait = first(spans, resigner, "write_lease(tombstone)", t0)
        .map(|s| d(t0, s.start))
        .unwrap_or_default();
    p.resign_deregister = span(resigner, "append(deregister)").unwrap_or_default();
    p.standby_lease = span(standby, "write_lease(lease)").unwrap_or_default();
    let mint = first(spans, standby, "acquire_epoch", t0);
    // The standby challenges once it reads the tombstone. The resigner's
    // deregistration, a single write, is often read first (the tombstone's
    // transaction takes three), so the poll that matters is the last one
    // that brought records before the mint, timed from the tombstone's
    // commit (its markers follow the commit's answer).
    let vacated = first(spans, resigner, "write_lease(tombstone)", t0);
    if let (Some(v), Some(mint)) = (vacated, mint) {
        let wake = spans
            .iter()
            .filter(|s| s.who == standby && s.op == "poll_partition" && s.records > 0)
            .filter(|s| s.end >= v.start && s.end <= mint.start)
            .map(|s| s.end)
            .max();
        if let Some(w) = wake {
            p.standby_wake = d(v.end, w);
            p.standby_to_mint = d(w, mint.start);
        }
        p.standby_mint = d(mint.start, mint.end);
    }
    p
}

/// One role held for `--renewal-trials` renewals: each renewal's lease
/// write (the held term's renewal transaction, as the renew loop sends it)
/// timed at the transport, the first lease not counted.
pub async fn renewal(a: &Args, config: &KafkaConfig) -> std::result::Result<Value, String> {
    let role = format!("bench-renewal-{}", now_ms());
    let spans: Spans = Arc::default();
    let hints: Arc<Hints> = Arc::default();
    let bases = Bases::default();
    let base = bases.new_transport(config, "a")?;
    let c = client(Arc::new(Timed::new(base, "a", spans.clone(), hints)), a)?;
    let held = c
        .acquire(&role, "a", options(&c, a))
        .await
        .map_err(|e| e.to_string())?;
    let first_done = Instant::now();
    let wanted = a.renewal_trials;
    let within = Duration::from_millis(a.renew_ms * (wanted as u64 + 2) + a.lease_ms);
    let renewals = |s: &[Span]| -> Vec<f64> {
        s.iter()
            .filter(|s| s.op == "write_lease(lease)" && s.start > first_done)
            .map(|s| ms(s.end - s.start))
            .collect()
    };
    loop {
        let got = renewals(&spans.lock().unwrap());
        if got.len() >= wanted {
            break;
        }
        if first_done.elapsed() > within {
            return Err(format!(
                "{} of {wanted} renewals within {within:?}",
                got.len()
            ));
        }
        if !held.is_held() {
            return Err(format!("the term ended: {:?}", held.err()));
        }
        tokio::time::sleep(Duration::from_millis(a.renew_ms / 2 + 1)).await;
    }
    let failed = spans
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.op == "write_lease(lease)" && !s.ok)
        .count();
    held.resign().await.map_err(|e| format!("resign: {e}"))?;
    let mut v = renewals(&spans.lock().unwrap());
    v.truncate(wanted);
    println!(
        "renewal ({} renewals, lease {} ms, renew {} ms, {failed} failed)",
        v.len(),
        a.lease_ms,
        a.renew_ms
    );
    println!("{}", stat_line("lease write of a renewal", &v));
    Ok(json!({ "renewal": stats(&v), "failed": failed }))
}

/// A member: its leadership or pending acquire, its id and its client.
type Seat<T> = (T, &'static str, Client);

/// Resign -> the standby's first lease committed, `--handover-trials` times.
pub async fn handover(a: &Args, config: &KafkaConfig) -> std::result::Result<Value, String> {
    let role = format!("bench-handover-{}", now_ms());
    let spans: Spans = Arc::default();
    let hints: Arc<Hints> = Arc::default();
    let bases = Bases::default();
    let mk = |who: &'static str| -> std::result::Result<Client, String> {
        let base = bases.new_transport(config, who)?;
        client(
            Arc::new(Timed::new(base, who, spans.clone(), hints.clone())),
            a,
        )
    };
    let (ca, cb) = (mk("a")?, mk("b")?);
    let o = options(&ca, a);
    let first_term = ca
        .acquire(&role, "a", o.clone())
        .await
        .map_err(|e| e.to_string())?;
    let mut leader: Seat<Leadership> = (first_term, "a", ca);
    let mut waiting: Seat<Pending> = (standby(cb.clone(), role.clone(), "b", o.clone()), "b", cb);
    let mut all = Vec::new();
    eprintln!("hand-over: {} trials on role {role}", a.handover_trials);
    for trial in 0..a.handover_trials {
        // Let the standby register and settle into its wait, and vary the
        // point of the renew interval the resign falls on.
        let settle = 400 + (trial as u64 * 137) % a.renew_ms.max(1);
        tokio::time::sleep(Duration::from_millis(settle)).await;
        if a.resign_in_renewal {
            // The standby writes no lease while it waits: the next lease
            // write to start is the leader's renewal.
            let started = hints.lease_write_started.notified();
            tokio::time::timeout(Duration::from_millis(a.renew_ms * 3), started)
                .await
                .map_err(|_| format!("no renewal started within {} ms", a.renew_ms * 3))?;
        }
        spans.lock().unwrap().clear();
        let t0 = Instant::now();
        leader
            .0
            .resign()
            .await
            .map_err(|e| format!("resign: {e}"))?;
        let resigned = Instant::now();
        let (next, t1) = taken(&mut waiting.0, Duration::from_secs(30)).await?;
        let s = spans.lock().unwrap().clone();
        let p = parts(&s, leader.1, waiting.1, t0, resigned, t1);
        if a.verbose {
            eprintln!(
                "  trial {trial:>3} (ended at {} ms since the epoch): {p:?}",
                now_ms()
            );
            if std::env::var_os("BENCH_SPANS").is_some() {
                for sp in s.iter().filter(|sp| sp.start >= t0) {
                    eprintln!(
                        "      {:>8.2} .. {:>8.2} ms  {} {} records={} ok={}",
                        ms(sp.start - t0),
                        ms(sp.end - t0),
                        sp.who,
                        sp.op,
                        sp.records,
                        sp.ok
                    );
                }
            }
        }
        all.push(p);
        // The resigner rejoins at the tail; roles swap.
        let (old, old_who, old_client) =
            std::mem::replace(&mut leader, (next, waiting.1, waiting.2.clone()));
        drop(old);
        waiting = (
            standby(old_client.clone(), role.clone(), old_who, o.clone()),
            old_who,
            old_client,
        );
    }
    let _ = leader.0.resign().await;
    drop(waiting);
    let col = |f: fn(&Parts) -> f64| all.iter().map(f).collect::<Vec<f64>>();
    let cols: Vec<(&str, Vec<f64>)> = vec![
        ("total (resign -> next lease committed)", col(|p| p.total)),
        ("resign call", col(|p| p.resign_call)),
        (
            "  resign: waiting for a write in flight (a renewal)",
            col(|p| p.resign_wait),
        ),
        (
            "  resign: supersede (InitProducerId of the term's epoch)",
            col(|p| p.resign_supersede),
        ),
        ("  resign: tombstone txn", col(|p| p.resign_tombstone)),
        ("  resign: deregister", col(|p| p.resign_deregister)),
        (
            "standby: tombstone committed -> the poll that read it",
            col(|p| p.standby_wake),
        ),
        (
            "standby: that poll -> mint starts (poll, held_back)",
            col(|p| p.standby_to_mint),
        ),
        (
            "standby: mint (InitProducerId+describe)",
            col(|p| p.standby_mint),
        ),
        ("standby: first lease txn", col(|p| p.standby_lease)),
    ];
    println!(
        "hand-over ({} trials, lease {} ms, renew {} ms{})",
        all.len(),
        a.lease_ms,
        a.renew_ms,
        if a.resign_in_renewal {
            ", each resign as a renewal starts"
        } else {
            ""
        }
    );
    for (name, v) in &cols {
        println!("{}", stat_line(name, v));
    }
    let mints = bases.mint_stats();
    println!("  {}", mints_line(&mints));
    let hints = hints.json();
    println!("  hints delivered through the timing wrapper: {hints}");
    let mut out = serde_json::Map::new();
    for (name, v) in &cols {
        out.insert(name.trim().to_owned(), stats(v));
    }
    out.insert("mints".into(), mints);
    out.insert("hints".into(), hints);
    Ok(Value::Object(out))
}

/// Crash failover with both members in this process: the leader "crashes"
/// by dropping its `Leadership` (its renewals stop and its epoch-bound
/// producer goes; no resign, no deregistration), at a varying point of its
/// renew interval; the overhead is the standby's elected instant minus the
/// dead leader's last committed deadline.
pub async fn crash_inproc(a: &Args, config: &KafkaConfig) -> std::result::Result<Value, String> {
    let role = format!("bench-crash-inproc-{}", now_ms());
    let bases = Bases::default();
    let mk = |who: &'static str| -> std::result::Result<Client, String> {
        client(bases.new_transport(config, who)?, a)
    };
    let (ca, cb) = (mk("a")?, mk("b")?);
    let o = options(&ca, a);
    let first_term = ca
        .acquire(&role, "a", o.clone())
        .await
        .map_err(|e| e.to_string())?;
    let mut leader: Option<Seat<Leadership>> = Some((first_term, "a", ca));
    let mut waiting: Seat<Pending> = (standby(cb.clone(), role.clone(), "b", o.clone()), "b", cb);
    let mut beyond = Vec::new();
    eprintln!(
        "crash failover (in-process): {} trials on role {role}",
        a.crash_trials
    );
    for trial in 0..a.crash_trials {
        let pause = 400 + (trial as u64 * 173) % a.renew_ms.max(1);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let Some((dead, dead_who, dead_client)) = leader.take() else {
            return Err("no leader".into());
        };
        drop(dead);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let s = dead_client
            .describe_role_state(&role)
            .await
            .map_err(|e| e.to_string())?;
        let lease = s.lease.ok_or("no lease after the crash")?;
        let (next, _) = taken(
            &mut waiting.0,
            Duration::from_millis(a.lease_ms * 3 + 10_000),
        )
        .await?;
        let over = (now_ms() - lease.deadline) as f64;
        if a.verbose {
            eprintln!("  trial {trial:>3}: {over} ms beyond the deadline");
        }
        beyond.push(over);
        leader = Some((next, waiting.1, waiting.2.clone()));
        waiting = (
            standby(dead_client.clone(), role.clone(), dead_who, o.clone()),
            dead_who,
            dead_client,
        );
    }
    if let Some((l, _, _)) = leader {
        let _ = l.resign().await;
    }
    println!(
        "crash failover, in-process ({} trials, lease {} ms, renew {} ms, rank 0)",
        beyond.len(),
        a.lease_ms,
        a.renew_ms,
    );
    println!("{}", stat_line("beyond deadline + rank x stagger", &beyond));
    let mints = bases.mint_stats();
    println!("  {}", mints_line(&mints));
    Ok(json!({ "beyond_deadline": stats(&beyond), "mints": mints }))
}
