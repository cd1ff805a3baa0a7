//! Leadership benchmarks on a real Kafka: hand-over, crash failover and
//! describe. Run through `ci/bench-leadership.sh`, which starts the local
//! cluster and runs
//!
//! ```text
//! cargo bench -p krabka-examples --bench leadership -- --bootstrap HOST:PORT \
//!     [--only handover|crash|crash-inproc|describe]... [--handover-trials 30] [--crash-trials 20] \
//!     [--describe-requests 5000] [--describe-concurrency 32] [--lease-ms 2000] [--renew-ms 500] \
//!     [--stagger-ms 500] [--json PATH]
//! ```
//!
//! The numbers are recorded in `docs/benchmarks/leadership.md`.
//!
//! * **hand-over** (`inproc.rs`): two members in this process, each with
//!   its own `KafkaTransport` behind its own `Client`. The leader resigns;
//!   the time runs from the call of `resign` to the moment the standby's
//!   acquire returns, which is when its first lease is committed. Every
//!   transport call is timed by a wrapper (`timed.rs`) that forwards every
//!   method of the seam, the spare-producer hint and the option check
//!   included, so each trial also says where the time went.
//! * **crash failover** (`crash.rs`): two `member` processes started with
//!   the shared harness, the leader killed with SIGKILL.
//! * **crash-inproc** (`inproc.rs`): the same with both members in this
//!   process.
//! * **describe** (`describe.rs`): `describe_leadership` through one
//!   `KafkaClient`.
//!
//! Under `cargo test` (no `--bench` argument) it only checks its command
//! line: the benchmark needs a real Kafka and minutes.

mod crash;
mod describe;
mod etcd;
mod inproc;
mod procs;
mod stats;
mod timed;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use krabka_coordination::client::Client;
use krabka_coordination::transport::kafka::{KafkaConfig, TopicSpec};
use krabka_examples::cli::{usage_exit, Flags};
use krabka_examples::{kafka, now_ms};
use serde_json::json;

const USAGE: &str = "\
usage: cargo bench -p krabka-examples --bench leadership -- --bootstrap HOST:PORT [options]

  --only NAME               handover, handover-procs, etcd, first-election, crash,
                            crash-inproc, renewal or describe (repeatable; default:
                            handover-procs, etcd, handover, first-election, crash, describe)
  --handover-trials N       resign -> next leader trials (default 30)
  --crash-trials N          SIGKILL -> next leader trials (default 20)
  --first-trials N          first elections of new roles (default 20)
  --renewal-trials N        renewals of one held role timed (default 40)
  --etcd-port PORT          first client port of the local 3-member etcd (default 23790;
                            peers at PORT+10..PORT+12)
  --describe-requests N     sequential describe_leadership calls (default 5000)
  --describe-concurrency N  calls in flight for the throughput run (default 32)
  --lease-ms MS             lease duration (default 2000)
  --renew-ms MS             renew interval (default 500)
  --stagger-ms MS           challenge stagger (default 500)
  --members N               members of handover-procs and electors of etcd, the leader
                            included (default 2)
  --partitions N            partitions of the state topic (default 16)
  --member-bin PATH         the member binary (default: the one cargo built with this bench)
  --json PATH               append the results as one JSON line
  --kafka-setting KEY=VAL   a librdkafka setting for every client (repeatable)
  --resign-in-renewal       handover: resign as the leader's renewal starts, not at a
                            varying point of the renew interval (the worst case of a
                            renewal on the hand-over's path)
  --verbose                 print every trial";

/// The benchmarks `--only` takes.
const KINDS: [&str; 8] = [
    "handover",
    "handover-procs",
    "etcd",
    "first-election",
    "crash",
    "crash-inproc",
    "renewal",
    "describe",
];

/// The parsed command line.
#[derive(Clone, Debug)]
pub struct Args {
    /// The cluster.
    pub bootstrap: String,
    /// The benchmarks to run, in order.
    pub only: Vec<String>,
    /// Hand-over trials.
    pub handover_trials: usize,
    /// Crash failover trials.
    pub crash_trials: usize,
    /// First elections of new roles.
    pub first_trials: usize,
    /// Renewals of one held role timed.
    pub renewal_trials: usize,
    /// The first client port of the local etcd cluster.
    pub etcd_port: u16,
    /// Sequential describe calls.
    pub describe_requests: usize,
    /// Describe calls in flight for the throughput run.
    pub describe_concurrency: usize,
    /// Lease duration (ms).
    pub lease_ms: u64,
    /// Renew interval (ms).
    pub renew_ms: u64,
    /// Challenge stagger (ms).
    pub stagger_ms: u64,
    /// Members of `handover-procs` and electors of `etcd`, the leader
    /// included.
    pub members: usize,
    /// Partitions of the state topic.
    pub partitions: i32,
    /// The member binary.
    pub member_bin: PathBuf,
    /// Where to append the JSON line of results.
    pub json: Option<PathBuf>,
    /// `handover`: resign as the leader's renewal starts.
    pub resign_in_renewal: bool,
    /// Print every trial.
    pub verbose: bool,
    /// librdkafka settings for every client.
    pub settings: Vec<(String, String)>,
}

impl Args {
    /// Parses `flags`; `Err("")` asks for the usage text.
    fn parse(mut flags: Flags) -> Result<Args, String> {
        let mut a = Args {
            bootstrap: std::env::var("KRABKA_BOOTSTRAP").unwrap_or_default(),
            only: Vec::new(),
            handover_trials: 30,
            crash_trials: 20,
            first_trials: 20,
            renewal_trials: 40,
            etcd_port: 23790,
            describe_requests: 5000,
            describe_concurrency: 32,
            lease_ms: 2000,
            renew_ms: 500,
            stagger_ms: 500,
            members: 2,
            partitions: 16,
            member_bin: PathBuf::from(env!("CARGO_BIN_EXE_member")),
            json: None,
            resign_in_renewal: false,
            verbose: false,
            settings: Vec::new(),
        };
        while let Some(flag) = flags.next_flag() {
            let f = flag.as_str();
            match f {
                "--bootstrap" => a.bootstrap = flags.value(f)?,
                "--only" => {
                    let v = flags.value(f)?;
                    if !KINDS.contains(&v.as_str()) {
                        return Err(format!("--only takes {}, got {v:?}", KINDS.join(", ")));
                    }
                    a.only.push(v);
                }
                "--handover-trials" => a.handover_trials = flags.number(f)?,
                "--crash-trials" => a.crash_trials = flags.number(f)?,
                "--first-trials" => a.first_trials = flags.number(f)?,
                "--renewal-trials" => a.renewal_trials = flags.number::<usize>(f)?.max(1),
                "--etcd-port" => a.etcd_port = flags.number(f)?,
                "--describe-requests" => a.describe_requests = flags.number::<usize>(f)?.max(1),
                "--describe-concurrency" => {
                    a.describe_concurrency = flags.number::<usize>(f)?.max(1)
                }
                "--lease-ms" => a.lease_ms = flags.number(f)?,
                "--renew-ms" => a.renew_ms = flags.number(f)?,
                "--stagger-ms" => a.stagger_ms = flags.number(f)?,
                "--members" => a.members = flags.number::<usize>(f)?.max(2),
                "--partitions" => a.partitions = flags.number(f)?,
                "--member-bin" => a.member_bin = flags.value(f)?.into(),
                "--json" => a.json = Some(flags.value(f)?.into()),
                "--resign-in-renewal" => a.resign_in_renewal = true,
                "--verbose" => a.verbose = true,
                "--kafka-setting" => a.settings.push(flags.setting(f)?),
                "-h" | "--help" => return Err(String::new()),
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        if a.only.is_empty() {
            a.only = [
                "handover-procs",
                "etcd",
                "handover",
                "first-election",
                "crash",
                "describe",
            ]
            .map(String::from)
            .to_vec();
        }
        Ok(a)
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` does not.
    let (bench, rest): (Vec<String>, Vec<String>) =
        std::env::args().skip(1).partition(|a| a == "--bench");
    let args = match Args::parse(Flags::new(rest)) {
        Ok(a) => a,
        Err(e) => std::process::exit(usage_exit("leadership", &e, USAGE)),
    };
    if bench.is_empty() {
        println!("leadership: a benchmark on a real Kafka; run it with cargo bench (ci/bench-leadership.sh)");
        return;
    }
    if args.bootstrap.is_empty() {
        std::process::exit(usage_exit(
            "leadership",
            "--bootstrap (or KRABKA_BOOTSTRAP) is required",
            USAGE,
        ));
    }
    std::process::exit(run(&args));
}

fn run(args: &Args) -> i32 {
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
            eprintln!("leadership: {e}");
            return 1;
        }
    };
    let mut config = KafkaConfig::new(args.bootstrap.clone());
    for (k, v) in &args.settings {
        config = config.set(k.clone(), v.clone());
    }
    let code = rt.block_on(async {
        // The state topic as production has it where the cluster allows:
        // replication factor 3, min.insync.replicas 2 on three brokers.
        let brokers = match kafka::broker_count(&args.bootstrap) {
            Ok(n) => n,
            Err(e) => {
                eprintln!("leadership: {e}");
                return 1;
            }
        };
        let (rf, min_isr) = kafka::replication_for(brokers);
        eprintln!(
            "leadership: {brokers} broker(s); state topic replication factor {rf}, min.insync.replicas {min_isr}"
        );
        let spec = TopicSpec::development()
            .with_partitions(args.partitions)
            .with_replication(rf, min_isr);
        let ensured =
            match Client::new(config.clone()).and_then(|c| c.with_partitions(args.partitions)) {
                Ok(c) => c.ensure_state_topic(spec).await,
                Err(e) => Err(e),
            };
        if let Err(e) = ensured {
            eprintln!("leadership: the state topic: {e}");
            return 1;
        }
        let mut results = BTreeMap::new();
        for what in &args.only {
            let r = match what.as_str() {
                "handover" => inproc::handover(args, &config).await,
                "handover-procs" => procs::handover(args).await,
                "etcd" => etcd::handover(args).await,
                "first-election" => procs::first_election(args).await,
                "crash" => crash::crash(args, &config).await,
                "crash-inproc" => inproc::crash_inproc(args, &config).await,
                "renewal" => inproc::renewal(args, &config).await,
                _ => describe::describe(args, &config).await,
            };
            match r {
                Ok(v) => {
                    results.insert(what.clone(), v);
                }
                Err(e) => {
                    eprintln!("leadership: {what}: {e}");
                    return 1;
                }
            }
            println!();
        }
        if let (Some(ours), Some(theirs)) = (results.get("handover-procs"), results.get("etcd")) {
            println!("hand-over, ours / etcd's (both between processes, timed from outside):");
            for q in ["p50", "p99"] {
                let (o, t) = (
                    ours["total"][q].as_f64().unwrap_or(f64::NAN),
                    theirs["total"][q].as_f64().unwrap_or(f64::NAN),
                );
                println!("  {q}: {o:.1} ms / {t:.1} ms = {:.1}x", o / t);
            }
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
                eprintln!("leadership: writing {}: {e}", path.display());
                return 1;
            }
        }
        0
    });
    rt.shutdown_timeout(Duration::from_secs(3));
    code
}
