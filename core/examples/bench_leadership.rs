//! Leadership benchmarks on a real Kafka: hand-over, crash failover and
//! describe. Run through `ci/bench-leadership.sh`, which builds it in release
//! mode and starts the local cluster; the numbers are recorded in
//! `docs/benchmarks-leadership.md`.
//!
//! ```text
//! bench_leadership --bootstrap HOST:PORT [--only handover|crash|describe]...
//!     [--handover-trials 30] [--crash-trials 20] [--describe-requests 5000]
//!     [--describe-concurrency 32] [--lease-ms 2000] [--renew-ms 500] [--stagger-ms 500]
//! ```
//!
//! * **hand-over**: two members in this process, each with its own
//!   `KafkaTransport` (its own producers, consumers and connections). The
//!   leader resigns; the time runs from the call of `resign` to the moment
//!   the standby's `acquire_leadership` returns, which is when its first
//!   lease is committed. Every transport call is timed, so each trial also
//!   says where the time went: the resigner's mint and tombstone, the
//!   standby's wake-up (from the tombstone's commit to the poll that returns
//!   it), its mint and its first lease write.
//! * **crash failover**: two `member` processes (the example) writing guarded
//!   records every 150 ms. The leader is killed with SIGKILL at a random
//!   point of its renew interval; the overhead is the standby's `elected`
//!   instant minus the dead leader's last committed deadline (the standby is
//!   rank 0, so the stagger adds nothing). The killed member restarts and
//!   rejoins at the tail for the next trial.
//! * **describe**: `describe_leadership` through one `DescribeClient`:
//!   latency of sequential calls, then requests per second with
//!   `--describe-concurrency` calls in flight.

#[cfg(not(feature = "kafka"))]
fn main() {
    eprintln!("the benchmark needs the `kafka` feature (on by default)");
    std::process::exit(2);
}

#[cfg(feature = "kafka")]
fn main() {
    std::process::exit(bench::main());
}

#[cfg(feature = "kafka")]
mod bench {
    use std::collections::BTreeMap;
    use std::io::{BufRead, BufReader, Write};
    use std::path::{Path, PathBuf};
    use std::process::{Child, ChildStdin, Command, Stdio};
    use std::sync::{Arc, Condvar, Mutex};
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

    use async_trait::async_trait;
    use krabka_coordination::leadership::{
        acquire_leadership, describe_leadership, describe_role_state, Leadership, LeadershipOptions,
    };
    use krabka_coordination::transport::kafka::{
        ensure_state_topic, DescribeClient, KafkaConfig, KafkaTransport,
    };
    use krabka_coordination::transport::{
        Coordinator, LeaseWriter, OutRecord, ReadBatch, Registrar, StateReader, Transport,
    };
    use krabka_coordination::{FencingToken, Record, Result};
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::ClientConfig;
    use serde_json::{json, Value};

    const USAGE: &str = "\
usage: bench_leadership --bootstrap HOST:PORT [options]

  --only NAME               handover, crash, crash-inproc or describe (repeatable;
                            default: handover, crash, describe)
  --handover-trials N       resign -> next leader trials (default 30)
  --crash-trials N          SIGKILL -> next leader trials (default 20)
  --describe-requests N     sequential describe_leadership calls (default 5000)
  --describe-concurrency N  calls in flight for the throughput run (default 32)
  --lease-ms MS             lease duration (default 2000)
  --renew-ms MS             renew interval (default 500)
  --stagger-ms MS           challenge stagger (default 500)
  --partitions N            partitions of the state topic (default 16)
  --member-bin PATH         the member example (default: next to this binary)
  --json PATH               append the results as one JSON line
  --kafka-setting KEY=VAL   a librdkafka setting for every client (repeatable)
  --verbose                 print every trial";

    #[derive(Clone, Debug)]
    struct Args {
        bootstrap: String,
        only: Vec<String>,
        handover_trials: usize,
        crash_trials: usize,
        describe_requests: usize,
        describe_concurrency: usize,
        lease_ms: u64,
        renew_ms: u64,
        stagger_ms: u64,
        partitions: i32,
        member_bin: Option<PathBuf>,
        json: Option<PathBuf>,
        verbose: bool,
        /// librdkafka settings for every client.
        settings: Vec<(String, String)>,
    }

    fn parse_args() -> std::result::Result<Args, String> {
        let mut a = Args {
            bootstrap: std::env::var("KRABKA_BOOTSTRAP").unwrap_or_default(),
            only: Vec::new(),
            handover_trials: 30,
            crash_trials: 20,
            describe_requests: 5000,
            describe_concurrency: 32,
            lease_ms: 2000,
            renew_ms: 500,
            stagger_ms: 500,
            partitions: 16,
            member_bin: None,
            json: None,
            verbose: false,
            settings: Vec::new(),
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
            let num = |v: String| {
                v.parse::<u64>()
                    .map_err(|_| format!("{flag} takes a whole number, got {v:?}"))
            };
            match flag.as_str() {
                "--bootstrap" => a.bootstrap = value()?,
                "--only" => {
                    let v = value()?;
                    if !["handover", "crash", "crash-inproc", "describe"].contains(&v.as_str()) {
                        return Err(format!(
                            "--only takes handover, crash, crash-inproc or describe, got {v:?}"
                        ));
                    }
                    a.only.push(v);
                }
                "--handover-trials" => a.handover_trials = num(value()?)? as usize,
                "--crash-trials" => a.crash_trials = num(value()?)? as usize,
                "--describe-requests" => a.describe_requests = num(value()?)?.max(1) as usize,
                "--describe-concurrency" => a.describe_concurrency = num(value()?)?.max(1) as usize,
                "--lease-ms" => a.lease_ms = num(value()?)?,
                "--renew-ms" => a.renew_ms = num(value()?)?,
                "--stagger-ms" => a.stagger_ms = num(value()?)?,
                "--partitions" => a.partitions = num(value()?)? as i32,
                "--member-bin" => a.member_bin = Some(value()?.into()),
                "--json" => a.json = Some(value()?.into()),
                "--verbose" => a.verbose = true,
                "--kafka-setting" => {
                    let v = value()?;
                    match v.split_once('=') {
                        Some((k, val)) if !k.is_empty() => {
                            a.settings.push((k.to_owned(), val.to_owned()))
                        }
                        _ => return Err(format!("--kafka-setting takes KEY=VALUE, got {v:?}")),
                    }
                }
                "-h" | "--help" => return Err(String::new()),
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        if a.bootstrap.is_empty() {
            return Err("--bootstrap (or KRABKA_BOOTSTRAP) is required".into());
        }
        if a.only.is_empty() {
            a.only = vec!["handover".into(), "crash".into(), "describe".into()];
        }
        Ok(a)
    }

    fn now_ms() -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }

    fn ms(d: Duration) -> f64 {
        d.as_secs_f64() * 1000.0
    }

    /// The value at quantile `q` (nearest rank) of `v`.
    fn quantile(v: &[f64], q: f64) -> f64 {
        if v.is_empty() {
            return f64::NAN;
        }
        let mut s = v.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
        s[rank - 1]
    }

    fn stats(v: &[f64]) -> Value {
        json!({
            "n": v.len(),
            "p50": quantile(v, 0.5),
            "p99": quantile(v, 0.99),
            "max": quantile(v, 1.0),
            "min": quantile(v, 0.0),
        })
    }

    fn stat_line(name: &str, v: &[f64]) -> String {
        format!(
            "  {name:<34} p50 {:>8.1} ms   p99 {:>8.1} ms   min {:>7.1}   max {:>8.1}   (n={})",
            quantile(v, 0.5),
            quantile(v, 0.99),
            quantile(v, 0.0),
            quantile(v, 1.0),
            v.len()
        )
    }

    // ------------------------------------------------------------ timed transport

    /// One timed transport call.
    #[derive(Debug, Clone)]
    struct Span {
        who: &'static str,
        op: &'static str,
        start: Instant,
        end: Instant,
        /// Records a poll returned.
        records: usize,
        ok: bool,
    }

    type Spans = Arc<Mutex<Vec<Span>>>;

    /// A transport that times every call of the one it wraps.
    struct Timed {
        inner: Arc<dyn Transport>,
        who: &'static str,
        spans: Spans,
    }

    impl Timed {
        fn record(&self, op: &'static str, start: Instant, records: usize, ok: bool) {
            let end = Instant::now();
            self.spans.lock().unwrap().push(Span {
                who: self.who,
                op,
                start,
                end,
                records,
                ok,
            });
        }
    }

    #[async_trait]
    impl Coordinator for Timed {
        async fn acquire_epoch(
            &self,
            role: &str,
            lease_duration: Duration,
        ) -> Result<FencingToken> {
            let t = Instant::now();
            let r = self.inner.acquire_epoch(role, lease_duration).await;
            self.record("acquire_epoch", t, 0, r.is_ok());
            r
        }
        async fn describe_epoch(&self, role: &str) -> Result<FencingToken> {
            let t = Instant::now();
            let r = self.inner.describe_epoch(role).await;
            self.record("describe_epoch", t, 0, r.is_ok());
            r
        }
    }

    #[async_trait]
    impl StateReader for Timed {
        async fn read_partition(&self, partition: i32) -> Result<Vec<Record>> {
            let t = Instant::now();
            let r = self.inner.read_partition(partition).await;
            self.record(
                "read_partition",
                t,
                r.as_ref().map_or(0, Vec::len),
                r.is_ok(),
            );
            r
        }
        async fn poll_partition(
            &self,
            partition: i32,
            from: i64,
            max_wait: Duration,
        ) -> Result<ReadBatch> {
            let t = Instant::now();
            let r = self.inner.poll_partition(partition, from, max_wait).await;
            self.record(
                "poll_partition",
                t,
                r.as_ref().map_or(0, |b| b.records.len()),
                r.is_ok(),
            );
            r
        }
    }

    #[async_trait]
    impl Registrar for Timed {
        async fn append(
            &self,
            partition: i32,
            key: Vec<u8>,
            value: Option<Vec<u8>>,
        ) -> Result<i64> {
            let t = Instant::now();
            let op = if value.is_some() {
                "append(register)"
            } else {
                "append(deregister)"
            };
            let r = self.inner.append(partition, key, value).await;
            self.record(op, t, 0, r.is_ok());
            r
        }
    }

    #[async_trait]
    impl LeaseWriter for Timed {
        async fn write_lease(
            &self,
            role: &str,
            partition: i32,
            key: Vec<u8>,
            value: Option<Vec<u8>>,
        ) -> Result<()> {
            let t = Instant::now();
            let op = if value.is_some() {
                "write_lease(lease)"
            } else {
                "write_lease(tombstone)"
            };
            let r = self.inner.write_lease(role, partition, key, value).await;
            self.record(op, t, 0, r.is_ok());
            r
        }
        async fn write_guarded(&self, role: &str, records: Vec<OutRecord>) -> Result<()> {
            let t = Instant::now();
            let r = self.inner.write_guarded(role, records).await;
            self.record("write_guarded", t, 0, r.is_ok());
            r
        }
        async fn release(&self, role: &str) -> Result<()> {
            let t = Instant::now();
            let r = self.inner.release(role).await;
            self.record("release", t, 0, r.is_ok());
            r
        }
    }

    // ------------------------------------------------------------ hand-over

    fn options(a: &Args) -> LeadershipOptions {
        LeadershipOptions::default()
            .with_partitions(a.partitions)
            .with_lease_duration(Duration::from_millis(a.lease_ms))
            .with_renew_interval(Duration::from_millis(a.renew_ms))
            .with_challenge_stagger(Duration::from_millis(a.stagger_ms))
    }

    type Pending = tokio::sync::oneshot::Receiver<Result<(Leadership, Instant)>>;

    fn standby(
        t: Arc<dyn Transport>,
        role: String,
        member: &'static str,
        o: LeadershipOptions,
    ) -> Pending {
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let r = acquire_leadership(t, &role, member, o)
                .await
                .map(|l| (l, Instant::now()));
            let _ = tx.send(r);
        });
        rx
    }

    /// The parts of one hand-over, in milliseconds.
    #[derive(Default, Debug, Clone)]
    struct Parts {
        total: f64,
        resign_call: f64,
        resign_mint: f64,
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
        if let Some(s) = first(spans, resigner, "acquire_epoch", t0) {
            p.resign_mint = d(s.start, s.end);
        }
        let tomb = first(spans, resigner, "write_lease(tombstone)", t0);
        if let Some(s) = tomb {
            p.resign_tombstone = d(s.start, s.end);
        }
        if let Some(s) = first(spans, resigner, "append(deregister)", t0) {
            p.resign_deregister = d(s.start, s.end);
        }
        let mint = first(spans, standby, "acquire_epoch", t0);
        // The resigner vacates the role with its deregistration (and its
        // tombstone); the standby wakes on whichever it reads first.
        let vacated = [first(spans, resigner, "append(deregister)", t0), tomb]
            .into_iter()
            .flatten()
            .map(|s| (s.start, s.end))
            .min_by_key(|(_, end)| *end);
        if let (Some((v_start, v_end)), Some(mint)) = (vacated, mint) {
            // The poll that delivered it: the first of the standby's polls
            // to end with records after the write started.
            let wake = spans
                .iter()
                .filter(|s| s.who == standby && s.op == "poll_partition" && s.records > 0)
                .filter(|s| s.end >= v_start && s.end <= mint.start)
                .map(|s| s.end)
                .min();
            if let Some(w) = wake {
                p.standby_wake = d(v_end, w);
                p.standby_to_mint = d(w, mint.start);
            }
            p.standby_mint = d(mint.start, mint.end);
        }
        if let Some(s) = first(spans, standby, "write_lease(lease)", t0) {
            p.standby_lease = d(s.start, s.end);
        }
        p
    }

    /// The mint counters of `transports`, summed.
    fn mint_stats(transports: &[Arc<KafkaTransport>]) -> Value {
        let (mut minted, mut spare, mut waited, mut fenced) = (0, 0, 0, 0);
        for t in transports {
            let m = t.mint_stats();
            minted += m.minted;
            spare += m.from_spare;
            waited += m.waited_for_completion;
            fenced += m.fenced_open_transactions;
        }
        json!({
            "minted": minted,
            "from_spare": spare,
            "waited_for_completion": waited,
            "fenced_open_transactions": fenced,
        })
    }

    fn mints_line(m: &Value) -> String {
        format!(
            "mints: {} ({} with a spare lease producer, {} waited for a completing transaction, {} fenced an open one)",
            m["minted"], m["from_spare"], m["waited_for_completion"], m["fenced_open_transactions"]
        )
    }

    async fn handover(a: &Args, config: &KafkaConfig) -> std::result::Result<Value, String> {
        let role = format!("bench-handover-{}", now_ms());
        let spans: Spans = Arc::default();
        let bases: Mutex<Vec<Arc<KafkaTransport>>> = Mutex::default();
        let mk = |who: &'static str| -> std::result::Result<Arc<dyn Transport>, String> {
            let base = Arc::new(
                KafkaTransport::new(config.clone(), Some(who)).map_err(|e| e.to_string())?,
            );
            bases.lock().unwrap().push(base.clone());
            Ok(Arc::new(Timed {
                inner: base,
                who,
                spans: spans.clone(),
            }))
        };
        let ta = mk("a")?;
        let tb = mk("b")?;
        let o = options(a);
        let mut leader: (Leadership, &'static str, Arc<dyn Transport>) = (
            acquire_leadership(ta.clone(), &role, "a", o.clone())
                .await
                .map_err(|e| e.to_string())?,
            "a",
            ta,
        );
        let mut waiting: (Pending, &'static str, Arc<dyn Transport>) =
            (standby(tb.clone(), role.clone(), "b", o.clone()), "b", tb);
        let mut all = Vec::new();
        eprintln!("hand-over: {} trials on role {role}", a.handover_trials);
        for trial in 0..a.handover_trials {
            // Let the standby register and settle into its wait, and vary the
            // point of the renew interval the resign falls on.
            let settle = 400 + (trial as u64 * 137) % a.renew_ms.max(1);
            tokio::time::sleep(Duration::from_millis(settle)).await;
            spans.lock().unwrap().clear();
            let t0 = Instant::now();
            leader
                .0
                .resign()
                .await
                .map_err(|e| format!("resign: {e}"))?;
            let resigned = Instant::now();
            let (next, t1) = tokio::time::timeout(Duration::from_secs(30), &mut waiting.0)
                .await
                .map_err(|_| "the standby did not take over within 30 s".to_string())?
                .map_err(|_| "the standby task ended".to_string())?
                .map_err(|e| format!("the standby's acquire failed: {e}"))?;
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
            let (old, old_who, old_t) =
                std::mem::replace(&mut leader, (next, waiting.1, waiting.2.clone()));
            drop(old);
            waiting = (
                standby(old_t.clone(), role.clone(), old_who, o.clone()),
                old_who,
                old_t,
            );
        }
        let _ = leader.0.resign().await;
        drop(waiting);
        let col = |f: fn(&Parts) -> f64| all.iter().map(f).collect::<Vec<f64>>();
        let cols: Vec<(&str, Vec<f64>)> = vec![
            ("total (resign -> next lease committed)", col(|p| p.total)),
            ("resign call", col(|p| p.resign_call)),
            (
                "  resign: mint (InitProducerId+describe)",
                col(|p| p.resign_mint),
            ),
            ("  resign: tombstone txn", col(|p| p.resign_tombstone)),
            ("  resign: deregister", col(|p| p.resign_deregister)),
            (
                "standby: vacated -> its poll wakes",
                col(|p| p.standby_wake),
            ),
            ("standby: wake -> mint starts", col(|p| p.standby_to_mint)),
            (
                "standby: mint (InitProducerId+describe)",
                col(|p| p.standby_mint),
            ),
            ("standby: first lease txn", col(|p| p.standby_lease)),
        ];
        println!(
            "hand-over ({} trials, lease {} ms, renew {} ms)",
            all.len(),
            a.lease_ms,
            a.renew_ms,
        );
        for (name, v) in &cols {
            println!("{}", stat_line(name, v));
        }
        let mints = mint_stats(&bases.lock().unwrap());
        println!("  {}", mints_line(&mints));
        let mut out = serde_json::Map::new();
        for (name, v) in &cols {
            out.insert(name.trim().to_owned(), stats(v));
        }
        out.insert("mints".into(), mints);
        Ok(Value::Object(out))
    }

    /// Crash failover with both members in this process: the leader
    /// "crashes" by stopping its renewals and dropping its lease producer
    /// (no resign, no deregistration), at a varying point of its renew
    /// interval; the overhead is the standby's elected instant minus the
    /// dead leader's last committed deadline.
    async fn crash_inproc(a: &Args, config: &KafkaConfig) -> std::result::Result<Value, String> {
        let role = format!("bench-crash-inproc-{}", now_ms());
        let bases: Mutex<Vec<Arc<KafkaTransport>>> = Mutex::default();
        let mk = |who: &'static str| -> std::result::Result<Arc<dyn Transport>, String> {
            let base = Arc::new(
                KafkaTransport::new(config.clone(), Some(who)).map_err(|e| e.to_string())?,
            );
            bases.lock().unwrap().push(base.clone());
            Ok(base)
        };
        let o = options(a);
        let ta = mk("a")?;
        let tb = mk("b")?;
        let first = acquire_leadership(ta.clone(), &role, "a", o.clone())
            .await
            .map_err(|e| e.to_string())?;
        let mut leader: Option<(Leadership, &'static str, Arc<dyn Transport>)> =
            Some((first, "a", ta));
        let mut waiting = (standby(tb.clone(), role.clone(), "b", o.clone()), "b", tb);
        let mut beyond = Vec::new();
        eprintln!(
            "crash failover (in-process): {} trials on role {role}",
            a.crash_trials
        );
        for trial in 0..a.crash_trials {
            let pause = 400 + (trial as u64 * 173) % a.renew_ms.max(1);
            tokio::time::sleep(Duration::from_millis(pause)).await;
            // Crash: renewals stop, the producer goes; the registration stays.
            let Some((dead, dead_who, dead_t)) = leader.take() else {
                return Err("no leader".into());
            };
            drop(dead);
            let _ = dead_t.release(&role).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            let s = describe_role_state(&*dead_t, &role, a.partitions)
                .await
                .map_err(|e| e.to_string())?;
            let lease = s.lease.ok_or("no lease after the crash")?;
            let (next, _) = tokio::time::timeout(
                Duration::from_millis(a.lease_ms * 3 + 10_000),
                &mut waiting.0,
            )
            .await
            .map_err(|_| "the standby did not take over".to_string())?
            .map_err(|_| "the standby task ended".to_string())?
            .map_err(|e| format!("the standby's acquire failed: {e}"))?;
            let elected_at = now_ms();
            let over = (elected_at - lease.deadline) as f64;
            if a.verbose {
                eprintln!("  trial {trial:>3}: {over} ms beyond the deadline");
            }
            beyond.push(over);
            leader = Some((next, waiting.1, waiting.2.clone()));
            waiting = (
                standby(dead_t.clone(), role.clone(), dead_who, o.clone()),
                dead_who,
                dead_t,
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
        let mints = mint_stats(&bases.lock().unwrap());
        println!("  {}", mints_line(&mints));
        Ok(json!({ "beyond_deadline": stats(&beyond), "mints": mints }))
    }

    // ------------------------------------------------------------ describe

    async fn describe(a: &Args, config: &KafkaConfig) -> std::result::Result<Value, String> {
        let role = format!("bench-describe-{}", now_ms());
        // Give the role an epoch, so each describe returns a real description.
        let t = KafkaTransport::new(config.clone(), Some("bench-describe"))
            .map_err(|e| e.to_string())?;
        let token = t
            .acquire_epoch(&role, Duration::from_millis(a.lease_ms))
            .await
            .map_err(|e| e.to_string())?;
        let client = DescribeClient::new(config).map_err(|e| e.to_string())?;
        // Warm up: connection, ApiVersions, FindCoordinator.
        for _ in 0..50 {
            let s = describe_leadership(&client_coordinator(&client), &role)
                .await
                .map_err(|e| e.to_string())?;
            if s.token != token {
                return Err(format!(
                    "describe says {} but the minted token is {token}",
                    s.token
                ));
            }
        }
        let coord = client_coordinator(&client);
        let before = client.requests_sent();
        let mut lat = Vec::with_capacity(a.describe_requests);
        let started = Instant::now();
        for _ in 0..a.describe_requests {
            let t0 = Instant::now();
            describe_leadership(&coord, &role)
                .await
                .map_err(|e| e.to_string())?;
            lat.push(ms(t0.elapsed()));
        }
        let seq_elapsed = started.elapsed();
        let per_call = (client.requests_sent() - before) as f64 / a.describe_requests as f64;
        // Throughput with many calls in flight on the same client.
        let total = a.describe_requests.max(a.describe_concurrency * 100);
        let per_task = total / a.describe_concurrency;
        let started = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..a.describe_concurrency {
            let c = client_coordinator(&client);
            let role = role.clone();
            tasks.push(tokio::spawn(async move {
                let mut lat = Vec::with_capacity(per_task);
                for _ in 0..per_task {
                    let t0 = Instant::now();
                    describe_leadership(&c, &role)
                        .await
                        .map_err(|e| e.to_string())?;
                    lat.push(ms(t0.elapsed()));
                }
                Ok::<_, String>(lat)
            }));
        }
        let mut conc_lat = Vec::new();
        for t in tasks {
            conc_lat.extend(t.await.map_err(|e| e.to_string())??);
        }
        let conc_elapsed = started.elapsed();
        let seq_rps = a.describe_requests as f64 / seq_elapsed.as_secs_f64();
        let conc_rps = conc_lat.len() as f64 / conc_elapsed.as_secs_f64();
        println!(
            "describe_leadership ({} sequential, then {} with {} in flight)",
            a.describe_requests,
            conc_lat.len(),
            a.describe_concurrency
        );
        println!("{}", stat_line("sequential latency", &lat));
        println!(
            "  {:<34} {seq_rps:.0} requests/s, {per_call:.2} Kafka requests per call",
            "sequential throughput"
        );
        println!(
            "{}",
            stat_line(
                &format!("latency, {} in flight", a.describe_concurrency),
                &conc_lat
            )
        );
        println!(
            "  {:<34} {conc_rps:.0} requests/s",
            format!("throughput, {} in flight", a.describe_concurrency)
        );
        drop(t);
        Ok(json!({
            "sequential": stats(&lat),
            "sequential_rps": seq_rps,
            "kafka_requests_per_call": per_call,
            "concurrent": stats(&conc_lat),
            "concurrency": a.describe_concurrency,
            "concurrent_rps": conc_rps,
        }))
    }

    /// `describe_leadership` takes a `Coordinator`; this one has only the
    /// describe half (a third party mints nothing).
    struct DescribeOnly(DescribeClient);

    fn client_coordinator(c: &DescribeClient) -> DescribeOnly {
        DescribeOnly(c.clone())
    }

    #[async_trait]
    impl Coordinator for DescribeOnly {
        async fn acquire_epoch(&self, role: &str, _lease: Duration) -> Result<FencingToken> {
            Err(krabka_coordination::Error::InvalidArgument(format!(
                "a describe-only client does not mint epochs (role {role:?})"
            )))
        }
        async fn describe_epoch(&self, role: &str) -> Result<FencingToken> {
            self.0.describe_epoch(role).await
        }
    }

    // ------------------------------------------------------------ crash

    #[derive(Default)]
    struct Log {
        events: Vec<Value>,
        closed: bool,
    }

    struct Proc {
        id: &'static str,
        child: Child,
        _stdin: Option<ChildStdin>,
        log: Arc<(Mutex<Log>, Condvar)>,
    }

    impl Proc {
        fn wait_event(&self, within: Duration, pred: impl Fn(&Value) -> bool) -> Option<Value> {
            let deadline = Instant::now() + within;
            let (m, cv) = &*self.log;
            let mut g = m.lock().unwrap();
            loop {
                if let Some(e) = g.events.iter().find(|e| pred(e)) {
                    return Some(e.clone());
                }
                let now = Instant::now();
                if g.closed || now >= deadline {
                    return None;
                }
                g = cv.wait_timeout(g, deadline - now).unwrap().0;
            }
        }
    }

    impl Drop for Proc {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    fn member_bin(a: &Args) -> std::result::Result<PathBuf, String> {
        if let Some(p) = &a.member_bin {
            return Ok(p.clone());
        }
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let bin = exe
            .parent()
            .map(|d| d.join("member"))
            .ok_or("no directory of this binary")?;
        if bin.exists() {
            Ok(bin)
        } else {
            Err(format!(
                "{} is missing: build the member example (or pass --member-bin)",
                bin.display()
            ))
        }
    }

    fn spawn(
        bin: &Path,
        a: &Args,
        role: &str,
        topic: &str,
        id: &'static str,
        logs: &Path,
    ) -> std::result::Result<Proc, String> {
        let err = std::fs::File::create(logs.join(format!("{id}-{}.log", now_ms())))
            .map_err(|e| e.to_string())?;
        let mut child = Command::new(bin)
            .args(["--bootstrap", &a.bootstrap, "--role", role, "--member", id])
            .args([
                "--partitions",
                &a.partitions.to_string(),
                "--lease-ms",
                &a.lease_ms.to_string(),
            ])
            .args([
                "--renew-ms",
                &a.renew_ms.to_string(),
                "--stagger-ms",
                &a.stagger_ms.to_string(),
            ])
            .args([
                "--data-topic",
                topic,
                "--write-every-ms",
                "150",
                "--exit-on-stdin-eof",
                "--skip-topic-check",
            ])
            .args(
                a.settings
                    .iter()
                    .flat_map(|(k, v)| ["--kafka-setting".to_owned(), format!("{k}={v}")]),
            )
            .env(
                "RUST_LOG",
                std::env::var("BENCH_MEMBER_LOG")
                    .unwrap_or_else(|_| "warn,krabka_coordination=info".into()),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let log: Arc<(Mutex<Log>, Condvar)> = Arc::default();
        let log2 = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    let (m, cv) = &*log2;
                    m.lock().unwrap().events.push(v);
                    cv.notify_all();
                }
            }
            let (m, cv) = &*log2;
            m.lock().unwrap().closed = true;
            cv.notify_all();
        });
        let stdin = child.stdin.take();
        Ok(Proc {
            id,
            child,
            _stdin: stdin,
            log,
        })
    }

    async fn crash(a: &Args, config: &KafkaConfig) -> std::result::Result<Value, String> {
        let bin = member_bin(a)?;
        let role = format!("bench-crash-{}", now_ms());
        let topic = format!("bench-crash-data-{}", now_ms());
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", &a.bootstrap)
            .create()
            .map_err(|e| e.to_string())?;
        for r in admin
            .create_topics(
                [&NewTopic::new(&topic, 1, TopicReplication::Fixed(1))],
                &AdminOptions::new(),
            )
            .await
            .map_err(|e| e.to_string())?
        {
            r.map_err(|(n, e)| format!("creating {n}: {e}"))?;
        }
        let logs = std::env::temp_dir().join("krabka-bench").join(&role);
        std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
        let observer = KafkaTransport::new(config.clone(), Some("bench-observer"))
            .map_err(|e| e.to_string())?;
        let start = Duration::from_secs(30);
        let mut leader = spawn(&bin, a, &role, &topic, "x", &logs)?;
        leader
            .wait_event(start, |e| e["event"] == "elected")
            .ok_or("the first member was not elected")?;
        let mut standby = spawn(&bin, a, &role, &topic, "y", &logs)?;
        standby
            .wait_event(start, |e| e["event"] == "waiting")
            .ok_or("the second member did not wait")?;
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
            let _ = leader.child.kill();
            let _ = leader.child.wait();
            // The dead leader's last committed lease (an open renewal, if it
            // died in one, is never committed).
            tokio::time::sleep(Duration::from_millis(50)).await;
            let s = describe_role_state(&observer, &role, a.partitions)
                .await
                .map_err(|e| e.to_string())?;
            let dead = s.lease.ok_or("no lease after the kill")?;
            if dead.member != leader.id {
                return Err(format!(
                    "the lease names {} but {} was the leader",
                    dead.member, leader.id
                ));
            }
            let elected = standby
                .wait_event(Duration::from_millis(a.lease_ms * 3 + 10_000), |e| {
                    e["event"] == "elected"
                })
                .ok_or("the standby was not elected")?;
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
            let id = leader.id;
            let restarted = spawn(&bin, a, &role, &topic, id, &logs)?;
            restarted
                .wait_event(start, |e| e["event"] == "waiting")
                .ok_or("the restarted member did not wait")?;
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
        drop(leader);
        drop(standby);
        Ok(json!({ "beyond_deadline": stats(&beyond), "kill_to_lease": stats(&total) }))
    }

    // ------------------------------------------------------------ main

    pub fn main() -> i32 {
        let args = match parse_args() {
            Ok(a) => a,
            Err(e) => {
                if !e.is_empty() {
                    eprintln!("bench_leadership: {e}");
                }
                eprintln!("{USAGE}");
                return if e.is_empty() { 0 } else { 2 };
            }
        };
        if std::env::var_os("RUST_LOG").is_some() {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
                .with_writer(std::io::stderr)
                .try_init();
        }
        let rt = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("bench_leadership: {e}");
                return 1;
            }
        };
        let mut config = KafkaConfig::new(args.bootstrap.clone());
        for (k, v) in &args.settings {
            config = config.set(k.clone(), v.clone());
        }
        let code = rt.block_on(async {
            if let Err(e) = ensure_state_topic(&config, args.partitions, 1, 1).await {
                eprintln!("bench_leadership: the state topic: {e}");
                return 1;
            }
            let mut results = BTreeMap::new();
            for what in &args.only {
                let r = match what.as_str() {
                    "handover" => handover(&args, &config).await,
                    "crash" => crash(&args, &config).await,
                    "crash-inproc" => crash_inproc(&args, &config).await,
                    _ => describe(&args, &config).await,
                };
                match r {
                    Ok(v) => {
                        results.insert(what.clone(), v);
                    }
                    Err(e) => {
                        eprintln!("bench_leadership: {what}: {e}");
                        return 1;
                    }
                }
                println!();
            }
            if let Some(path) = &args.json {
                let line = json!({
                    "t_ms": now_ms(),
                    "bootstrap": args.bootstrap,
                    "lease_ms": args.lease_ms,
                    "renew_ms": args.renew_ms,
                    "stagger_ms": args.stagger_ms,
                    "results": results,
                });
                let written = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .and_then(|mut f| writeln!(f, "{line}"));
                if let Err(e) = written {
                    eprintln!("bench_leadership: writing {}: {e}", path.display());
                    return 1;
                }
            }
            0
        });
        rt.shutdown_timeout(Duration::from_secs(3));
        code
    }
}
