//! One member of a role, as a process: the building block of the failover
//! demo, the end-to-end tests and the leadership benchmark.
//!
//! ```text
//! cargo run -p krabka-examples --bin member -- --bootstrap 127.0.0.1:19092 --role billing --member host-a \
//!     [--partitions 16] [--lease-ms 3000] [--renew-ms 1000] [--stagger-ms 1000] \
//!     [--data-topic billing-out] [--write-every-ms 150] [--kafka-setting key=value]... \
//!     [--pipe-from orders --pipe-to billed [--pipe-group billing-pipe] [--pipe-batch 100]]
//! ```
//!
//! The member registers, waits for its turn, takes the role and renews its
//! lease, through a [`krabka_coordination::client::Client`]. While it leads
//! and `--data-topic` is given, it writes one guarded record every
//! `--write-every-ms` to partition 0 of that topic through the epoch-bound
//! producer; the record's value is a JSON object with its member id, its
//! token (`producer_id`, `epoch`) and a sequence number, so a reader of the
//! topic can check that every committed record carries the token of its
//! writer. With `--pipe-from` and `--pipe-to` it runs a pipeline instead:
//! one output per input record, the input offsets committed in the same
//! guarded transaction (the `pipe` module).
//!
//! # Output
//!
//! stdout carries one JSON object per line, each with `event`, `member`,
//! `role` and `t_ms` (epoch milliseconds). The core's events, subscribed with
//! `LeadershipOptions::with_events` and stamped with the member's clock at
//! the step (see `krabka_examples::lines`): `registered` (`partition`,
//! `offset`), `waiting` (`rank`, `challenge_at`), `held_back`, `challenging`,
//! `lost_challenge` (`producer_id`, `epoch`, `token`), `elected`
//! (`producer_id`, `epoch`, `token`, `granted_at`, `deadline`), `renewed`
//! (`deadline`), `renewal_failing` (`failures`, `error`, `kind`), `fenced`
//! (`error`, `kind`), `lease_expired`, `ended` (`error`, `kind`), `resigned` (`cleared`, and
//! `took_ms` from the start of the resign to the lease cleared),
//! `deregistered`. The member's own: `start` (`pid`, `lease_ms`),
//! `guarded_write` (`seq`, `result` = `ok`, `fenced` or `error`),
//! `resigning` (`why`, `token`), `resign_failed`, `status`, `not_leader`,
//! `stopping`, `ended` (an acquire or a setup that failed), `exit` (`code`,
//! always the last line). Errors carry `kind`, the core's stable
//! `ErrorKind` name; readers match it, never the message. Diagnostics go to
//! stderr (`RUST_LOG`, default `warn`).
//!
//! # Control
//!
//! * stdin line `resign`: resign now (and with `--rejoin`, register again at
//!   the tail and wait for another turn); `status`: print a `status` line;
//!   `quit`: like SIGTERM.
//! * SIGTERM or SIGINT: resign if leading (deregister if waiting), then exit 0.
//! * `--exit-on-stdin-eof`: treat the end of stdin (the parent died) like
//!   SIGTERM.
//!
//! # Exit codes
//!
//! 0 stopped cleanly, 1 an error, 2 bad arguments, 3 fenced (a newer epoch
//! took the role; the broker refused this member's renewal or write), 4 the
//! lease expired (no renewal committed within the member's own lease, as
//! when the process was stopped: a standby may have taken over). After 3 or 4
//! the member deregisters before it exits.

mod args;
mod pipe;
mod run;
mod writes;

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use krabka_examples::cli::{usage_exit, Flags};
use krabka_examples::exit;
use krabka_examples::lines::Lines;
use serde_json::json;

fn main() {
    std::process::exit(member());
}

fn member() -> i32 {
    let args = match args::Args::parse(Flags::from_env()) {
        Ok(a) => a,
        Err(e) => return usage_exit("member", &e, args::USAGE),
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let lines = Arc::new(Lines::new(&args.role, &args.member));
    lines.emit(
        "start",
        json!({"pid": std::process::id(), "lease_ms": args.lease.as_millis() as u64}),
    );
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("member: cannot start the runtime: {e}");
            return exit::ERROR;
        }
    };
    let code = rt.block_on(run::run(args, Arc::clone(&lines)));
    // Producers and consumers close on the blocking pool; give them a moment.
    rt.shutdown_timeout(Duration::from_secs(2));
    lines.emit("exit", json!({ "code": code }));
    code
}
