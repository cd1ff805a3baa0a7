//! `krabka`: see who leads a role, and run any program as a fenced leader.
//!
//! Read commands (`describe`, `state`, `roles`, `watch`) print a line per
//! fact for people, or JSON with `--json`. `run` runs a command only while
//! this process leads a role. Exit codes (also in `krabka --help`):
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done (`describe --token`: the token is authoritative) |
//! | 1 | `describe --token`: the token is not authoritative |
//! | 2 | bad arguments or settings |
//! | 3 | the cluster did not answer in time (unreachable, retry later) |
//! | 4 | refused: a missing or misconfigured topic, an ACL, a bad value |
//! | 5 | `run`: the term ended (fenced, lease expired) and the child was stopped |
//! | other | `run`: the child's own exit code (128 + signal when a signal ended it) |

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use krabka_coordination::{Error, ErrorKind};
use krabka_coordination_bindings::errors::Caller;

mod child;
mod prometheus;
mod properties;
mod read;
mod run;
mod settings;

use settings::KafkaArgs;

const AFTER_HELP: &str = "\
Exit codes: 0 done (describe --token: authoritative); 1 describe --token: not authoritative;
2 bad arguments or settings; 3 the cluster did not answer in time; 4 refused (topic, ACL, bad
value); 5 run: the term ended (fenced, lease expired) and the child was stopped; run: otherwise
the child's exit code (128 + signal number when a signal ended it).

Kafka settings: --bootstrap (or KRABKA_BOOTSTRAP), -X key=value (librdkafka's keys, including
security.protocol, sasl.*, ssl.*), --config FILE (key=value lines).";

/// See who leads a role, and run any program as a fenced leader, on Apache
/// Kafka.
#[derive(Debug, Parser)]
#[command(name = "krabka", version, after_help = AFTER_HELP)]
struct Cli {
    #[command(flatten)]
    kafka: KafkaArgs,

    /// Log the library's steps to stderr (RUST_LOG filters them too).
    #[arg(long, short = 'v', global = true)]
    verbose: bool,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The coordinator's current token for ROLE; with --token, whether that
    /// token is authoritative (exit code 0 or 1).
    Describe(read::DescribeArgs),
    /// The roster of ROLE in rank order and its lease.
    State(read::StateArgs),
    /// Every role in the state topic with its holder, token and time left.
    Roles(read::RolesArgs),
    /// Watch ROLE without joining it: print one line per change (a new
    /// leader, a cleared or lapsed lease, the roster) with its time, leader,
    /// lease and roster.
    Watch(read::WatchArgs),
    /// Run COMMAND only while this process leads ROLE.
    Run(run::RunArgs),
    /// Create or check the state topic.
    #[command(subcommand)]
    Topic(read::TopicCommand),
}

/// Why a command failed, with its exit code.
#[derive(Debug)]
pub struct Failure {
    /// The exit code.
    pub code: u8,
    /// One line for stderr.
    pub message: String,
}

impl Failure {
    /// Bad arguments or settings (exit code 2).
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure {
            code: 2,
            message: message.into(),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        let code = match e.kind() {
            ErrorKind::InvalidArgument => 2,
            ErrorKind::Transient | ErrorKind::OutcomeUnknown => 3,
            ErrorKind::Fenced | ErrorKind::LeaseExpired => 5,
            _ => 4,
        };
        Failure {
            code,
            message: krabka_coordination_bindings::errors::message(&e, Caller::Cli),
        }
    }
}

fn main() -> ExitCode {
    // A closed stdout (`krabka roles | head`) ends the process quietly, as it
    // does other command-line tools, instead of failing a print.
    // SAFETY: restoring the default action of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    init_logging(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("krabka: cannot start the runtime: {e}");
            return ExitCode::from(4);
        }
    };
    let one_shot = !matches!(cli.command, Command::Run(_));
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Describe(a) => read::describe(&cli.kafka, a).await,
            Command::State(a) => read::state(&cli.kafka, a).await,
            Command::Roles(a) => read::roles(&cli.kafka, a).await,
            Command::Watch(a) => read::watch(&cli.kafka, a).await,
            Command::Run(a) => run::run(&cli.kafka, a).await,
            Command::Topic(t) => read::topic(&cli.kafka, t).await,
        }
    });
    let code = match outcome {
        Ok(code) => code,
        Err(f) => {
            eprintln!("krabka: {}", f.message);
            f.code
        }
    };
    if one_shot {
        // A read or topic command has written what it had to say (stdout is
        // flushed: `_exit` does not), and its Kafka clients hold nothing to
        // deliver. Closing them (a librdkafka destroy each, on the blocking
        // pool) costs as much as a short command's own work; `_exit` also
        // runs no atexit handler while their threads still run.
        let _ = std::io::Write::flush(&mut std::io::stdout());
        // SAFETY: ends the process; nothing after this runs.
        unsafe { libc::_exit(i32::from(code)) }
    }
    // `run`: Kafka clients close on their own threads; do not wait for
    // stragglers.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    ExitCode::from(code)
}

fn init_logging(verbose: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var("RUST_LOG") {
        Ok(f) if !f.is_empty() => EnvFilter::new(f),
        _ if verbose => EnvFilter::new("info"),
        // librdkafka's own complaints (a broker down) are noise for a
        // one-shot command; errors reach the user as the command's error.
        _ => EnvFilter::new("error,librdkafka=off"),
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
