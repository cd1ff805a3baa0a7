//! The failover demo: three members of one role on a real Kafka.
//!
//! ```text
//! ci/demo.sh                                   # builds, starts a local Kafka, runs this
//! cargo run --release -p krabka-examples --bin failover [-- --bootstrap HOST:PORT]
//! ```
//!
//! Without `--bootstrap` it starts the local 1-node cluster with
//! `ci/kafka.sh start 1` (reusing a running one). It makes sure the state
//! topic exists, runs three `member` processes of one role (through the
//! harness of `krabka_examples::process`), and shows live who leads, with
//! which token, the ranks and the lease remaining (read from the role's
//! partition with `describe_role_state` and from the transaction coordinator
//! with `describe_leadership`, like any third party would). Then:
//!
//! 1. it kills the leader with SIGKILL and shows the failover: the next member
//!    in rank waits for the dead leader's lease to run out, mints a newer
//!    epoch and takes over;
//! 2. it restarts the killed member, which registers again and lands at the
//!    tail of the roster (no failback);
//! 3. it asks the new leader to resign and shows the hand-over, which needs
//!    no lease expiry;
//! 4. it prints the measured failover and hand-over times.
//!
//! Every leader writes a guarded record every 150 ms to a data topic; the
//! demo shows how many each member got committed. The members are stopped
//! (they resign) when the demo ends or on ctrl-c.

mod args;
mod board;
mod script;
mod view;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use krabka_coordination::client::Client;
use krabka_coordination::transport::kafka::{KafkaConfig, TopicSpec};
use krabka_examples::cli::{usage_exit, Flags};
use krabka_examples::{kafka, now_ms};

use args::Args;
use board::Board;
use script::{Demo, Interrupted, Summary};
use view::{bold, View};

/// The members of the demo.
pub const MEMBERS: [&str; 3] = ["node-a", "node-b", "node-c"];
/// The topic the leaders write guarded records to.
pub const DATA_TOPIC: &str = "krabka-demo-writes";

fn main() {
    std::process::exit(demo());
}

/// The member binary: `--member-bin`, else the one next to this binary
/// (built with cargo when missing).
fn member_binary(args: &Args) -> Result<PathBuf, String> {
    if let Some(p) = &args.member_bin {
        return Ok(p.clone());
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let dir = exe.parent().ok_or("no parent directory of this binary")?;
    let bin = dir.join("member");
    if bin.exists() {
        return Ok(bin);
    }
    eprintln!("building the member binary ...");
    let release = dir.file_name().is_some_and(|n| n == "release");
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(kafka::repo_root())
        .args(["build", "-p", "krabka-examples", "--bin", "member"]);
    if release {
        cmd.arg("--release");
    }
    let status = cmd.status().map_err(|e| format!("running cargo: {e}"))?;
    if !status.success() || !bin.exists() {
        return Err(format!(
            "could not build the member binary ({status}); pass --member-bin"
        ));
    }
    Ok(bin)
}

/// Makes sure the state topic and the data topic exist, replicated as the
/// cluster allows; returns the observer's client.
async fn prepare(config: KafkaConfig, bootstrap: &str, partitions: i32) -> Result<Client, String> {
    let b = bootstrap.to_owned();
    let brokers = tokio::task::spawn_blocking(move || kafka::broker_count(&b))
        .await
        .map_err(|e| e.to_string())??;
    let (rf, min_isr) = kafka::replication_for(brokers);
    let client = Client::new(config)
        .and_then(|c| c.with_partitions(partitions))
        .map_err(|e| e.to_string())?;
    let spec = TopicSpec::default()
        .with_partitions(partitions)
        .with_replication(rf, min_isr);
    let report = client
        .ensure_state_topic(spec)
        .await
        .map_err(|e| format!("ensuring the state topic: {e}"))?;
    eprintln!(
        "state topic {}: {} partitions, replication factor {}{}",
        report.topic,
        report.partitions,
        report.replication_factor,
        if report.created { " (created)" } else { "" }
    );
    kafka::create_topic(bootstrap, DATA_TOPIC, 1, rf).await?;
    Ok(client)
}

/// Sets `flag` on ctrl-c or SIGTERM.
fn watch_interrupts(rt: &tokio::runtime::Runtime, flag: Arc<AtomicBool>) -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let _entered = rt.enter();
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    rt.spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        flag.store(true, Ordering::SeqCst);
    });
    Ok(())
}

fn demo() -> i32 {
    let args = match Args::parse(Flags::from_env()) {
        Ok(a) => a,
        Err(e) => return usage_exit("failover", &e, args::USAGE),
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
            eprintln!("failover: cannot start the runtime: {e}");
            return 1;
        }
    };
    let interrupted = Arc::new(AtomicBool::new(false));
    if let Err(e) = watch_interrupts(&rt, Arc::clone(&interrupted)) {
        eprintln!("failover: cannot watch for ctrl-c: {e}");
        return 1;
    }
    let bootstrap = match &args.bootstrap {
        Some(b) => b.clone(),
        None => {
            eprintln!("starting the local Kafka with ci/kafka.sh (reuses a running one) ...");
            match kafka::start_local_kafka(1) {
                Ok(b) => b,
                Err(e) => {
                    eprintln!("failover: {e}");
                    return 1;
                }
            }
        }
    };
    let bin = match member_binary(&args) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("failover: {e}");
            return 1;
        }
    };
    let mut config = KafkaConfig::new(bootstrap.clone()).set("client.id", "krabka-failover-demo");
    for (k, v) in &args.settings {
        config = config.set(k.clone(), v.clone());
    }
    let observer = match rt.block_on(prepare(config, &bootstrap, args.partitions)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("failover: {e}");
            return 1;
        }
    };
    let role = format!("demo-{}", now_ms() / 1000 % 1_000_000);
    let partition = krabka_coordination::role_partition(&role, args.partitions).unwrap_or(-1);
    let tty = std::io::stdout().is_terminal() && !args.plain;
    let mut board = Board {
        started: now_ms(),
        ..Board::default()
    };
    board.note(format!(
        "demo: Kafka at {bootstrap}; role {role} lives in partition {partition}"
    ));
    let logs = std::env::temp_dir().join("krabka-demo").join(&role);
    if let Err(e) = std::fs::create_dir_all(&logs) {
        eprintln!("failover: creating {}: {e}", logs.display());
        return 1;
    }
    let view = View {
        role: role.clone(),
        partition,
        args: args.clone(),
        tty,
        drawn_lines: 0,
        last_plain: String::new(),
        phase: String::new(),
    };
    let mut demo = Demo {
        args,
        bootstrap,
        role,
        bin,
        board,
        procs: Vec::new(),
        observer,
        view,
        rt,
        logs,
        interrupted,
    };
    let started = Instant::now();
    let outcome = demo.run();
    demo.view.phase = "stopping the members (they resign)".into();
    demo.stop_all();
    let (state, described) = demo.observe();
    demo.view.render(&demo.board, state.as_ref(), described);
    match outcome {
        Err(Interrupted) => {
            println!("\ninterrupted; the members were stopped");
            130
        }
        Ok(s) => report(&s, tty, started.elapsed(), &demo.logs),
    }
}

/// Prints the measured times; 0 when both were observed.
fn report(s: &Summary, tty: bool, took: Duration, logs: &Path) -> i32 {
    println!();
    println!("{}", bold(tty, "measured"));
    match &s.failover {
        Some(f) => println!(
            "  failover  (SIGKILL of the leader -> {} holds a committed lease, token {}): {} ms\n            of which {} ms were the dead leader's lease still running; {} ms beyond deadline + rank x stagger",
            f.new_leader, f.token, f.total_ms, f.lease_left_ms, f.beyond_ms
        ),
        None => println!("  failover: not observed"),
    }
    match &s.handover {
        Some(h) => println!(
            "  hand-over (resign of {} -> {} holds a committed lease, token {}): {} ms (read back by the demo at {} ms)",
            h.from,
            h.to,
            h.token,
            h.elected_ms.map(|v| v.to_string()).unwrap_or_else(|| "?".into()),
            h.seen_ms
        ),
        None => println!("  hand-over: not observed"),
    }
    println!(
        "  demo ran {:.1} s; member logs in {}",
        took.as_secs_f64(),
        logs.display()
    );
    if s.failover.is_some() && s.handover.is_some() {
        0
    } else {
        1
    }
}
