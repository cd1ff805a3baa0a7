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
//!      group (SIGKILL once the role is resigned), resign (a standby takes
//!      over at once) and exit with the child's code (128 + signal number
//!      when a signal ended it), or, with `--keep-going`, wait for another
//!      turn;
//!    * renewals fail: once the lease is down to `--grace` plus a margin
//!      ([`StopTimes`]), SIGTERM to the child's process group, SIGKILL when
//!      the grace is over or the lease is down to the margin, so the child
//!      is gone before the lease runs out; then resign and exit 5 (or, with
//!      `--keep-going`, wait for another turn);
//!    * the term ends (fenced, lease expired after a pause): SIGTERM, then
//!      SIGKILL at once, exit code 5 (or, with `--keep-going`, wait);
//!    * SIGTERM, SIGINT, SIGHUP or SIGQUIT to `krabka`: the child's stop
//!      (SIGKILL after the grace, or earlier if the lease runs low), then
//!      resign, and exit with the child's code.
//!
//! A SIGKILL of `krabka` ends the child and its group at once (the
//! parent-death signal and a guard process, see [`crate::child`]).
//!
//! What this cannot do: while `krabka` itself is paused (SIGSTOP, a VM
//! freeze) the child runs on unsupervised; when `krabka` resumes past its
//! lease it stops the child at once. Work that must never overlap a
//! successor's carries the token into the resource it writes (a guarded
//! write, a fencing check): the lease is a timer, the epoch is the fence
//! (docs/guarantees.md).

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use krabka_coordination::events::{self, EventKind, EventReceiver};
use krabka_coordination::leadership::Leadership;
use krabka_coordination::{ElectionOptions, FencingToken, Rfc3339};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use crate::child::{exit_code, Supervised};
use crate::prometheus::Readiness;
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
    // The help of the three timings names the library's default, which
    // applies when the option is not given.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION",
          help = with_default("The lease duration, e.g. 15s", ElectionOptions::DEFAULT_LEASE_DURATION))]
    pub lease: Option<Duration>,
    #[arg(long, value_parser = parse_duration, value_name = "DURATION",
          help = with_default("The renew interval, e.g. 3s", ElectionOptions::DEFAULT_RENEW_INTERVAL))]
    pub renew: Option<Duration>,
    #[arg(long, value_parser = parse_duration, value_name = "DURATION",
          help = with_default("The challenge stagger per rank, e.g. 1s", ElectionOptions::DEFAULT_CHALLENGE_STAGGER))]
    pub stagger: Option<Duration>,
    /// How long the child gets between SIGTERM and SIGKILL (default: a
    /// third of the lease, at most 10 s, and at most half the time from a
    /// renewal's due time to the kill margin). The child is killed before the
    /// lease can run out whatever the grace: when renewals fail, its stop
    /// begins once the lease is down to the grace plus a small margin.
    #[arg(long, value_parser = parse_duration)]
    pub grace: Option<Duration>,
    /// After the child exits or the term ends, wait for another turn instead
    /// of exiting.
    #[arg(long)]
    pub keep_going: bool,
    /// Serve the member's metrics in the Prometheus text format on
    /// http://HOST:PORT/metrics (port 0: any free port, printed on stderr),
    /// and the probes: /healthz (200 while krabka runs) and /readyz (200 only
    /// while this member leads, 503 otherwise).
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `text` followed by clap's `[default: ...]` with `d` as `--lease` takes it.
fn with_default(text: &str, d: Duration) -> String {
    format!("{text} [default: {}]", show_duration(d))
}

/// `d` in the form [`parse_duration`] reads: whole seconds as `30s`,
/// anything else in milliseconds (`1500ms`).
pub fn show_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
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

/// Resolves with the number of the first SIGTERM, SIGINT, SIGHUP or SIGQUIT
/// (each a request to stop: the child is stopped, then the role resigned).
pub async fn stop_signal() -> i32 {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int), Ok(mut hup), Ok(mut quit)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
        signal(SignalKind::quit()),
    ) else {
        // No handler could be installed: never resolve (the default action
        // of the signal then ends the process).
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => libc::SIGTERM,
        _ = int.recv() => libc::SIGINT,
        _ = hup.recv() => libc::SIGHUP,
        _ = quit.recv() => libc::SIGQUIT,
    }
}

/// When the child of a term must be stopped, from the lease (all on this
/// member's monotonic clock, as the lease's own deadline is).
///
/// A healthy leader renews every renew interval, so its lease never has
/// less than `lease - renew` left but for a renewal's latency. Once the
/// lease is down to `grace + margin` (renewals have been failing), the
/// child gets SIGTERM; once it is down to `margin`, SIGKILL: the child is
/// gone before the local deadline, and a standby's deadline, measured from
/// when it read the renewal, is later still. Like client-go's renew
/// deadline: the leader steps down before its lease can run out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopTimes {
    /// How long the child gets between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// The lease left at the SIGKILL, for the kill to land and the child to
    /// be reaped.
    pub margin: Duration,
}

impl StopTimes {
    /// The times for `lease` and `renew`, with `grace` when given (checked)
    /// or the default: a third of the lease, at most 10 s, and at most half
    /// of what the renew interval leaves.
    pub fn new(lease: Duration, renew: Duration, grace: Option<Duration>) -> Result<Self, String> {
        let margin = (lease / 20).clamp(Duration::from_millis(100), Duration::from_secs(1));
        let room = lease.saturating_sub(renew).saturating_sub(margin);
        let h = krabka_coordination::human::duration;
        let grace = match grace {
            Some(g) if g >= room => {
                return Err(format!(
                    "--grace {} is too long for a lease of {} renewed every {}: \
                     the child's stop begins when the lease is down to the grace plus {}, \
                     which must be less than the {} a healthy renewal leaves; use a grace \
                     under {}, a longer --lease or a shorter --renew",
                    h(g),
                    h(lease),
                    h(renew),
                    h(margin),
                    h(lease.saturating_sub(renew)),
                    h(room)
                ))
            }
            Some(g) => g,
            None => (lease / 3).min(Duration::from_secs(10)).min(room / 2),
        };
        if room.is_zero() {
            return Err(format!(
                "a lease of {} renewed every {} leaves no time to stop the child \
                 before the lease runs out; use a shorter --renew",
                h(lease),
                h(renew)
            ));
        }
        Ok(StopTimes { grace, margin })
    }
}

/// Resolves once the lease has at most `left` to run (renewals push that
/// moment back; an ended term has none left).
async fn lease_down_to(leadership: &Leadership, left: Duration) {
    loop {
        let now = leadership.lease_left();
        if now <= left {
            return;
        }
        tokio::time::sleep(now - left).await;
    }
}

/// Stops the child: SIGTERM, then SIGKILL after the grace or as soon as the
/// lease is down to the margin, whichever comes first.
async fn stop_child(
    child: &mut Supervised,
    leadership: &Leadership,
    times: StopTimes,
) -> Option<std::process::ExitStatus> {
    let grace_end = tokio::time::Instant::now() + times.grace;
    let kill = async {
        tokio::select! {
            _ = tokio::time::sleep_until(grace_end) => {
                eprintln!(
                    "krabka: the child did not stop within {} of SIGTERM; sending SIGKILL",
                    krabka_coordination::human::duration(times.grace)
                );
            }
            _ = lease_down_to(leadership, times.margin) => {
                eprintln!(
                    "krabka: the lease is down to {} and the child has not stopped; sending SIGKILL",
                    krabka_coordination::human::duration(leadership.lease_left())
                );
            }
        }
    };
    child.stop(kill).await.0
}

/// The command with the term's token in its environment.
fn command(a: &RunArgs, leadership: &Leadership) -> Command {
    let token = leadership.token();
    let mut c = Command::new(&a.command[0]);
    c.args(&a.command[1..])
        .env("KRABKA_ROLE", &a.role)
        .env("KRABKA_MEMBER", &a.member)
        .env("KRABKA_PRODUCER_ID", token.producer_id.to_string())
        .env("KRABKA_EPOCH", token.producer_epoch.to_string())
        .env("KRABKA_TOKEN", token.to_string());
    c
}

/// Installs the Prometheus recorder and serves it, with the probes that
/// `readiness` answers, at `addr`.
async fn serve_metrics(addr: &str, readiness: Readiness) -> Result<(), Failure> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Failure::usage(format!("--metrics-addr {addr}: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Failure::usage(format!("--metrics-addr {addr}: {e}")))?;
    let registry = krabka_coordination_bindings::metrics::install_global().ok_or_else(|| {
        Failure::usage("--metrics-addr: another metrics recorder is installed".to_owned())
    })?;
    tokio::spawn(crate::prometheus::serve(
        listener,
        registry.clone(),
        readiness,
    ));
    eprintln!("krabka: metrics on http://{bound}/metrics (probes: /healthz, /readyz)");
    Ok(())
}

/// Prints a line on stderr each time this member's wait changes in a way a
/// person watching wants to know: another holder (or none), or another
/// rank; not at each of the holder's renewals. Ends with the member's
/// events (when its term ends or it stops waiting).
async fn say_who_leads(member: String, role: String, mut events: EventReceiver) {
    let mut last: Option<(usize, Option<FencingToken>)> = None;
    while let Some(e) = events.recv().await {
        let EventKind::Waiting {
            rank,
            challenge_at,
            holder,
            holder_token,
        } = e.kind
        else {
            continue;
        };
        if last == Some((rank, holder_token)) {
            continue;
        }
        last = Some((rank, holder_token));
        eprintln!(
            "krabka: {}",
            waiting_line(
                &member,
                &role,
                rank,
                challenge_at,
                holder.as_deref(),
                holder_token
            )
        );
    }
}

/// The line [`say_who_leads`] prints for a wait.
fn waiting_line(
    member: &str,
    role: &str,
    rank: usize,
    challenge_at: i64,
    holder: Option<&str>,
    holder_token: Option<FencingToken>,
) -> String {
    let at = Rfc3339(challenge_at);
    match (holder, holder_token) {
        (Some(h), Some(t)) => format!(
            "{h} leads {role} with token {t}; {member} waits at rank {rank} and challenges at {at} \
             unless {h} renews"
        ),
        (Some(h), None) => format!(
            "{h} leads {role}; {member} waits at rank {rank} and challenges at {at} unless {h} renews"
        ),
        (None, _) => {
            format!("nobody leads {role}; {member} waits at rank {rank} and challenges at {at}")
        }
    }
}

/// `run`.
pub async fn run(kafka: &KafkaArgs, a: RunArgs) -> Result<u8, Failure> {
    if a.command.is_empty() || a.command[0].is_empty() {
        return Err(Failure::usage("no COMMAND after --"));
    }
    // A command that cannot start must not cost the role an epoch.
    crate::child::check_command(&a.command[0]).map_err(Failure::usage)?;
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
    // Every option is checked before anything starts.
    options
        .election
        .validate()
        .map_err(|e| Failure::usage(e.to_string()))?;
    let times = StopTimes::new(
        options.election.lease_duration,
        options.election.renew_interval,
        a.grace,
    )
    .map_err(Failure::usage)?;
    let readiness = Readiness::default();
    if let Some(addr) = &a.metrics_addr {
        serve_metrics(addr, readiness.clone()).await?;
    }
    let mut stop = Box::pin(stop_signal());
    loop {
        // 1. Wait for the turn.
        let cancel = CancellationToken::new();
        let (events, waits) = events::channel();
        tokio::spawn(say_who_leads(a.member.clone(), a.role.clone(), waits));
        let acquire = client.acquire(
            &a.role,
            &a.member,
            options
                .clone()
                .with_cancel(cancel.clone())
                .with_events(events),
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
        let leadership = Arc::new(leadership);
        let mut child = match Supervised::start(command(&a, &leadership)) {
            Ok(c) => c,
            Err(e) => {
                let _ = leadership.resign().await;
                return Err(Failure {
                    // Checked before contending: it went between then and now.
                    code: 4,
                    message: format!("cannot start {:?}: {e}", a.command[0]),
                });
            }
        };
        readiness.leading(&leadership);
        let ended = leadership.done();
        let renew_deadline = lease_down_to(&leadership, times.grace + times.margin);
        let outcome = tokio::select! {
            // An ended term first: it is what a resumed, paused krabka meets.
            biased;
            _ = ended => Ending::Ended,
            status = child.wait() => Ending::ChildExited(status),
            _ = renew_deadline => Ending::NotRenewed,
            sig = &mut stop => Ending::Signal(sig),
        };
        // Not ready from the moment the term starts to end.
        readiness.not_leading();
        match outcome {
            Ending::Ended => {
                let why = leadership
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_else(|| "ended".to_owned());
                eprintln!(
                    "krabka: the term of {} ended ({why}); stopping the child",
                    a.role
                );
                // No lease is left: SIGTERM, then SIGKILL at once.
                let status = stop_child(&mut child, &leadership, times).await;
                report(status);
                drop(child);
                if !a.keep_going {
                    return Ok(5);
                }
            }
            Ending::ChildExited(status) => {
                let code = status.map(exit_code).unwrap_or(1);
                // What the child left running stops with the term.
                child.signal(libc::SIGTERM);
                if let Err(e) = leadership.resign().await {
                    eprintln!("krabka: resigning: {e}");
                }
                eprintln!("krabka: the child exited with {code}; resigned {}", a.role);
                drop(child);
                if !a.keep_going {
                    return Ok(code);
                }
            }
            Ending::NotRenewed => {
                let left = leadership.lease_left();
                if left.is_zero() {
                    eprintln!(
                        "krabka: the term of {} ended (its lease ran out: krabka was paused or \
                         starved); stopping the child",
                        a.role
                    );
                } else {
                    eprintln!(
                        "krabka: {} could not renew its lease of {} (the last renewal committed \
                         {:?} ago, {} failed since; {left:?} left): stopping the child before the \
                         lease runs out",
                        a.member,
                        a.role,
                        options.election.lease_duration.saturating_sub(left),
                        leadership.renewal_failures(),
                    );
                }
                let status = stop_child(&mut child, &leadership, times).await;
                report(status);
                drop(child);
                // The child is gone: give the term up. A resign that cannot
                // reach the brokers ends at the local deadline.
                let bound = leadership.lease_left() + times.margin;
                match tokio::time::timeout(bound, leadership.resign()).await {
                    Ok(Ok(())) => eprintln!("krabka: resigned {}", a.role),
                    Ok(Err(e)) => eprintln!("krabka: the term of {} ended ({e})", a.role),
                    Err(_) => eprintln!("krabka: the term of {} ran out", a.role),
                }
                if !a.keep_going {
                    return Ok(5);
                }
            }
            Ending::Signal(sig) => {
                eprintln!(
                    "krabka: signal {sig}: stopping the child, then resigning {}",
                    a.role
                );
                let status = stop_child(&mut child, &leadership, times).await;
                drop(child);
                if let Err(e) = leadership.resign().await {
                    eprintln!("krabka: resigning: {e}");
                }
                return Ok(status.map(exit_code).unwrap_or((128 + sig) as u8));
            }
        }
        eprintln!("krabka: waiting for another turn of {}", a.role);
    }
}

/// Why a term of `krabka run` comes to an end.
enum Ending {
    /// The term ended (fenced, lease expired, ...).
    Ended,
    /// The child exited by itself.
    ChildExited(Option<std::process::ExitStatus>),
    /// Renewals failed until the lease was down to the child's grace.
    NotRenewed,
    /// krabka got this signal.
    Signal(i32),
}

/// Prints how the stopped child ended.
fn report(status: Option<std::process::ExitStatus>) {
    eprintln!(
        "krabka: the child stopped ({})",
        status
            .map(|s| exit_code(s).to_string())
            .unwrap_or_else(|| "status unknown".into())
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_names_the_holder_rank_and_challenge_time() {
        let t = FencingToken::new(1004, 9);
        assert_eq!(
            waiting_line("b", "r", 1, 1_000, Some("a"), Some(t)),
            "a leads r with token 1004/9; b waits at rank 1 and challenges at \
             1970-01-01T00:00:01.000Z unless a renews"
        );
        assert_eq!(
            waiting_line("b", "r", 0, 0, None, None),
            "nobody leads r; b waits at rank 0 and challenges at 1970-01-01T00:00:00.000Z"
        );
        assert_eq!(show_duration(Duration::from_secs(30)), "30s");
        assert_eq!(show_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(
            parse_duration(&show_duration(Duration::from_millis(1500))),
            Ok(Duration::from_millis(1500))
        );
    }

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

    fn s(secs: f64) -> Duration {
        Duration::from_secs_f64(secs)
    }

    #[test]
    fn the_child_is_gone_before_the_lease_and_a_healthy_renewal_never_stops_it() {
        for (lease, renew, grace) in [
            (30.0, 10.0, None),
            (15.0, 3.0, None),
            (6.0, 1.0, None),
            (6.0, 1.0, Some(3.0)),
            (6.0, 5.0, None),
            (1.0, 0.2, None),
            (3600.0, 60.0, None),
        ] {
            let t = StopTimes::new(s(lease), s(renew), grace.map(s)).unwrap();
            let case = format!("lease {lease} renew {renew} grace {grace:?}: {t:?}");
            // SIGKILL before the deadline.
            assert!(!t.margin.is_zero() && t.margin < s(lease), "{case}");
            // The stop begins only after a renewal is overdue.
            assert!(t.grace + t.margin < s(lease) - s(renew), "{case}");
            if let Some(g) = grace {
                assert_eq!(t.grace, s(g), "{case}");
            } else {
                assert!(t.grace <= Duration::from_secs(10), "{case}");
                assert!(!t.grace.is_zero(), "{case}");
            }
        }
        // Library defaults: 30 s lease, 10 s renewals: half of the 19 s
        // between a renewal's due time and the margin; SIGTERM at 10.5 s
        // left (19.5 s without a renewal), SIGKILL at 1 s left.
        assert_eq!(
            StopTimes::new(s(30.0), s(10.0), None).unwrap(),
            StopTimes {
                grace: s(9.5),
                margin: s(1.0)
            }
        );
        // 15 s renewed every 3 s: a third of the lease.
        assert_eq!(StopTimes::new(s(15.0), s(3.0), None).unwrap().grace, s(5.0));
    }

    #[test]
    fn a_grace_that_outlasts_the_renewals_room_is_refused_with_the_values() {
        let e = StopTimes::new(s(6.0), s(1.0), Some(s(10.0))).unwrap_err();
        assert!(e.contains("--grace 10 s"), "{e}");
        assert!(e.contains("6 s") && e.contains("1 s"), "{e}");
        assert!(e.contains("under 4.7 s"), "{e}");
        let e = StopTimes::new(s(1.0), s(0.95), None).unwrap_err();
        assert!(e.contains("leaves no time"), "{e}");
    }
}
