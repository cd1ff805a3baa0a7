//! The start the real-Kafka benchmarks of `benches/` share (`roles`,
//! `churn`): logging, cargo's `--bench` flag, the arguments, the runtime.

use crate::cli::{usage_exit, Flags};

/// Starts the benchmark `program`: warnings (or what `RUST_LOG` asks) to
/// stderr, then the command line without cargo's `--bench` parsed by
/// `parse`, exiting with `usage` on a bad argument. Returns `None`, after
/// saying to run it through `script`, when cargo runs the target without
/// `--bench` (`cargo test --all-targets` does).
pub fn start<A>(
    program: &str,
    usage: &str,
    script: &str,
    parse: impl FnOnce(Flags) -> Result<A, String>,
) -> Option<A> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let (bench, rest): (Vec<String>, Vec<String>) =
        std::env::args().skip(1).partition(|a| a == "--bench");
    let args = match parse(Flags::new(rest)) {
        Ok(a) => a,
        Err(e) => std::process::exit(usage_exit(program, &e, usage)),
    };
    if bench.is_empty() {
        println!("{program}: a benchmark on a real Kafka; run it with cargo bench ({script})");
        return None;
    }
    Some(args)
}

/// Exits with `usage` unless `bootstrap` names a cluster.
pub fn require_bootstrap(program: &str, bootstrap: &str, usage: &str) {
    if bootstrap.is_empty() {
        std::process::exit(usage_exit(
            program,
            "--bootstrap (or KRABKA_BOOTSTRAP) is required",
            usage,
        ));
    }
}

/// The benchmarks' runtime: two workers, and the blocking pool bounded as
/// the bindings' runtime bounds it (`BLOCKING_THREADS` of the bindings'
/// shared crate): librdkafka's blocking calls of a thousand acquires at
/// once would otherwise start a thread each, up to tokio's default of 512
/// (docs/operations.md).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(32)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// The CPU time this process has used (user and system), in seconds:
/// `/proc/self/stat` counts it in USER_HZ ticks, 100 a second on Linux.
pub fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name, which may hold spaces: utime and
    // stime are the 14th and 15th of the whole line.
    let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    (f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)) as f64 / 100.0
}

/// The `q` quantile of `v` (nearest rank), NaN for none.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1]
}
