//! `krabka run`: a command that runs only while this process leads a role.
//!
//! 1. Waits for its turn (the core's `Client::acquire`: registration, rank,
//!    challenge, epoch); SIGTERM or SIGINT while waiting cancels the wait
//!    and deregisters.
//! 2. Starts COMMAND with the term's token in its environment
//!    (`KRABKA_ROLE`, `KRABKA_MEMBER`, `KRABKA_PRODUCER_ID`, `KRABKA_EPOCH`,
//!    `KRABKA_TOKEN` = `PID/EPOCH`), so the child can carry it into its own
//!    writes or checks (`krabka describe ROLE --token $KRABKA_TOKEN`).
//! 3. Then whichever comes first:
//!    * the child exits: SIGTERM to what it left running in its process
//!      group, resign (a standby takes over at once) and exit with
//!      the child's code (128 + signal number when a signal ended it), or,
//!      with `--keep-going`, wait for another turn;
//!    * the term ends (fenced, lease expired): SIGTERM to the child's process
//!      group (the child runs in a group of its own), SIGKILL
//!      after `--grace`, exit code 5 (or, with `--keep-going`, wait for
//!      another turn);
//!    * SIGTERM or SIGINT to `krabka`: the same stop of the child, then
//!      resign, and exit with the child's code.
//!
//! What this cannot do: while `krabka` itself is paused (SIGSTOP, a VM
//! freeze) the child runs on unsupervised; when `krabka` resumes past its
//! lease it stops the child at once. Work that must never overlap a
//! successor's carries the token into the resource it writes (a guarded
//! write, a fencing check), as the spec says: the lease is a timer, the
//! epoch is the fence.

use std::process::ExitStatus;
use std::time::Duration;

use clap::Args;
use krabka_coordination::leadership::Leadership;
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

use crate::settings::KafkaArgs;
use crate::Failure;

/// `run --role ROLE --member ID [options] -- COMMAND [ARGS...]`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The role.
    #[arg(long)]
    pub role: String,
    /// This member's id (unique among the role's members, stable across
    /// restarts of this process).
    #[arg(long)]
    pub member: String,
    /// The lease duration, e.g. 15s (default: the library's).
    #[arg(long, value_parser = parse_duration)]
    pub lease: Option<Duration>,
    /// The renew interval, e.g. 3s (default: the library's).
    #[arg(long, value_parser = parse_duration)]
    pub renew: Option<Duration>,
    /// The challenge stagger per rank, e.g. 1s (default: the library's).
    #[arg(long, value_parser = parse_duration)]
    pub stagger: Option<Duration>,
    /// How long the child gets between SIGTERM and SIGKILL.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub grace: Duration,
    /// After the child exits or the term ends, wait for another turn instead
    /// of exiting.
    #[arg(long)]
    pub keep_going: bool,
    /// Serve the member's metrics in the Prometheus text format on
    /// http://HOST:PORT/metrics (port 0: any free port, printed on stderr).
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// A duration: a number with `ms`, `s`, `m` or `h` (`1.5s`, `500ms`); a bare
/// number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (number, unit) = match t.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let n: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 15s, 500ms, 2m)"))?;
    let scale = match unit.trim() {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        u => return Err(format!("{s:?}: unknown unit {u:?} (ms, s, m, h)")),
    };
    let secs = n * scale;
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Resolves with the number of the first SIGTERM or SIGINT.
pub async fn stop_signal() -> i32 {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // No handler could be installed: never resolve (the default action
        // of the signal then ends the process).
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => libc::SIGTERM,
        _ = int.recv() => libc::SIGINT,
    }
}

/// The shell's exit code of a status: the code, or 128 + the signal.
fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => c.clamp(0, 255) as u8,
        (None, Some(sig)) => (128 + sig).clamp(0, 255) as u8,
        _ => 1,
    }
}

/// Sends `sig` to the child's process group (the child and whatever it
/// started).
fn signal_group(child: &Child, sig: i32) {
    if let Some(pid) = child.id() {
        // SAFETY: kill(2) on the process group this process made for the
        // child (the child is its leader and has not been reaped).
        unsafe {
            libc::kill(-(pid as libc::pid_t), sig);
        }
    }
}

/// SIGTERM to the child's process group, then SIGKILL after `grace`; the
/// child's status.
async fn stop_child(child: &mut Child, grace: Duration) -> Option<ExitStatus> {
    if let Ok(Some(status)) = child.try_wait() {
        return Some(status);
    }
    signal_group(child, libc::SIGTERM);
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => status.ok(),
        Err(_) => {
            eprintln!(
                "krabka: the child did not stop within {grace:?} of SIGTERM; sending SIGKILL"
            );
            signal_group(child, libc::SIGKILL);
            let _ = child.kill().await;
            child.wait().await.ok()
        }
    }
}

/// Starts the command with the term's token in its environment.
fn start(a: &RunArgs, leadership: &Leadership) -> Result<Child, Failure> {
    let token = leadership.token();
    Command::new(&a.command[0])
        .args(&a.command[1..])
        .env("KRABKA_ROLE", &a.role)
        .env("KRABKA_MEMBER", &a.member)
        .env("KRABKA_PRODUCER_ID", token.producer_id.to_string())
        .env("KRABKA_EPOCH", token.producer_epoch.to_string())
        .env("KRABKA_TOKEN", token.to_string())
        // Its own process group: a stop reaches what the child started too
        // (`sh -c 'a; b'` forks), and the terminal's ^C reaches krabka
        // alone, which then stops the group.
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Failure {
            code: 4,
            message: format!("cannot start {:?}: {e}", a.command[0]),
        })
}

/// Installs the Prometheus recorder and serves it at `addr`.
async fn serve_metrics(addr: &str) -> Result<(), Failure> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Failure::usage(format!("--metrics-addr {addr}: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Failure::usage(format!("--metrics-addr {addr}: {e}")))?;
    let registry = krabka_coordination_bindings::metrics::install_global().ok_or_else(|| {
        Failure::usage("--metrics-addr: another metrics recorder is installed".to_owned())
    })?;
    tokio::spawn(crate::prometheus::serve(listener, registry.clone()));
    eprintln!("krabka: metrics on http://{bound}/metrics");
    Ok(())
}

/// `run`.
pub async fn run(kafka: &KafkaArgs, a: RunArgs) -> Result<u8, Failure> {
    if a.command.is_empty() || a.command[0].is_empty() {
        return Err(Failure::usage("no COMMAND after --"));
    }
    if let Some(addr) = &a.metrics_addr {
        serve_metrics(addr).await?;
    }
    let client = kafka.client()?;
    let mut options = client.leadership_options();
    if let Some(d) = a.lease {
        options = options.with_lease_duration(d);
    }
    if let Some(d) = a.renew {
        options = options.with_renew_interval(d);
    }
    if let Some(d) = a.stagger {
        options = options.with_challenge_stagger(d);
    }
    let mut stop = Box::pin(stop_signal());
    loop {
        // 1. Wait for the turn.
        let cancel = CancellationToken::new();
        let acquire = client.acquire(
            &a.role,
            &a.member,
            options.clone().with_cancel(cancel.clone()),
        );
        tokio::pin!(acquire);
        let leadership = tokio::select! {
            l = &mut acquire => l?,
            sig = &mut stop => {
                cancel.cancel();
                // Let the cancelled acquire deregister (or resign a role won
                // in the same instant) before exiting.
                let _ = acquire.await;
                return Ok((128 + sig) as u8);
            }
        };
        eprintln!(
            "krabka: {} leads {} with token {}; starting {:?}",
            a.member,
            a.role,
            leadership.token(),
            a.command
        );
        // 2. Run the child while the term lasts.
        let mut child = match start(&a, &leadership) {
            Ok(c) => c,
            Err(f) => {
                let _ = leadership.resign().await;
                return Err(f);
            }
        };
        let ended = leadership.done();
        tokio::select! {
            status = child.wait() => {
                let code = status.map(exit_code).unwrap_or(1);
                // What the child left running stops with the term.
                signal_group(&child, libc::SIGTERM);
                if let Err(e) = leadership.resign().await {
                    eprintln!("krabka: resigning: {e}");
                }
                eprintln!("krabka: the child exited with {code}; resigned {}", a.role);
                if !a.keep_going {
                    return Ok(code);
                }
            }
            _ = ended => {
                let why = leadership
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_else(|| "ended".to_owned());
                eprintln!("krabka: the term of {} ended ({why}); stopping the child", a.role);
                let status = stop_child(&mut child, a.grace).await;
                eprintln!(
                    "krabka: the child stopped ({})",
                    status.map(|s| exit_code(s).to_string()).unwrap_or_else(|| "status unknown".into())
                );
                if !a.keep_going {
                    return Ok(5);
                }
            }
            sig = &mut stop => {
                eprintln!("krabka: signal {sig}: stopping the child, then resigning {}", a.role);
                let status = stop_child(&mut child, a.grace).await;
                if let Err(e) = leadership.resign().await {
                    eprintln!("krabka: resigning: {e}");
                }
                return Ok(status.map(exit_code).unwrap_or((128 + sig) as u8));
            }
        }
        eprintln!("krabka: waiting for another turn of {}", a.role);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_a_unit_or_seconds() {
        assert_eq!(parse_duration("15s").unwrap(), Duration::from_secs(15));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        for bad in ["", "s", "-1s", "3 weeks", "1e300h", "nan"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn exit_codes_follow_the_shell() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGKILL)), 137);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGTERM)), 143);
    }
}
