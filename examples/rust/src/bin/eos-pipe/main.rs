//! The exactly-once read-process-write loop through a role's guarded
//! transactions: the krabka side of `ci/bench-eos.sh`, doing the work of
//! `EosPipe pipe` (examples/java-eos/EosPipe.java) with this library.
//!
//! ```text
//! eos-pipe --bootstrap B --input IN --output OUT --group G --batch K --role R --partitions P
//!     [--timeout-s 600]
//! ```
//!
//! Takes role R (the only member, so at once: one InitProducerId, the
//! term's epoch), reads where consumer group G committed for each of the
//! input's P partitions (the beginning where it has nothing), and the end
//! of each partition when the loop starts (its last stable offset). Then,
//! with the term's input reader (read_committed, assigned partitions, no
//! group membership), per transaction K input records (fewer in the last):
//! one output record each (same key, value "<value>:piped", the input
//! record's partition number), written with the consumed offsets in one
//! guarded write (`Leadership::write_with_offsets`). Stops once every
//! partition is consumed up to that end, resigns, and prints one JSON line
//! with the fields of `EosPipe pipe`'s: records and transactions piped,
//! `setup_ms` (the client, the role taken, the offsets and ends read),
//! `loop_ms` (the first transaction's start to the last one's commit),
//! `records_per_s` over the loop, and the per-transaction times at p50 and
//! p99. Exit 0, 1 on an error (named on stderr), 2 on bad arguments or
//! when `--timeout-s` passes.

mod pipe;

use std::time::Duration;

use krabka_examples::cli::{usage_exit, Flags};

const USAGE: &str = "\
usage: eos-pipe --bootstrap B --input IN --output OUT --group G --batch K --role R --partitions P [--timeout-s S]";

/// The command line.
pub struct Args {
    bootstrap: String,
    input: String,
    output: String,
    group: String,
    batch: usize,
    role: String,
    partitions: i32,
    timeout: Duration,
}

fn parse(mut flags: Flags) -> Result<Args, String> {
    let (mut bootstrap, mut input, mut output, mut group, mut role) =
        (None, None, None, None, None);
    let (mut batch, mut partitions, mut timeout_s) = (None, None, 600u64);
    while let Some(flag) = flags.next_flag() {
        let f = flag.as_str();
        match f {
            "--bootstrap" => bootstrap = Some(flags.value(f)?),
            "--input" => input = Some(flags.value(f)?),
            "--output" => output = Some(flags.value(f)?),
            "--group" => group = Some(flags.value(f)?),
            "--role" => role = Some(flags.value(f)?),
            "--batch" => batch = Some(flags.number::<usize>(f)?),
            "--partitions" => partitions = Some(flags.number::<i32>(f)?),
            "--timeout-s" => timeout_s = flags.number(f)?,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let need = |v: Option<String>, name: &str| v.ok_or_else(|| format!("{name} is required"));
    let batch = batch
        .filter(|b| *b > 0)
        .ok_or("--batch must be above zero")?;
    let partitions = partitions
        .filter(|p| *p > 0)
        .ok_or("--partitions must be above zero")?;
    Ok(Args {
        bootstrap: need(bootstrap, "--bootstrap")?,
        input: need(input, "--input")?,
        output: need(output, "--output")?,
        group: need(group, "--group")?,
        role: need(role, "--role")?,
        batch,
        partitions,
        timeout: Duration::from_secs(timeout_s),
    })
}

fn main() {
    let args = match parse(Flags::from_env()) {
        Ok(a) => a,
        Err(e) => std::process::exit(usage_exit("eos-pipe", &e, USAGE)),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("the runtime");
    let timeout = args.timeout;
    let code = rt.block_on(async {
        match tokio::time::timeout(timeout, pipe::pipe(&args)).await {
            Ok(Ok(line)) => {
                println!("{line}");
                0
            }
            Ok(Err(e)) => {
                eprintln!("eos-pipe: {e}");
                1
            }
            Err(_) => {
                eprintln!(
                    "eos-pipe: piping {} to {} did not end within {timeout:?}",
                    args.input, args.output
                );
                2
            }
        }
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    std::process::exit(code);
}
