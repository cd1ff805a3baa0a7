//! The read commands (`describe`, `state`, `roles`, `watch`) and `topic`.
//! Every fact comes from the core (`Client` and `RoleState`); this module
//! only prints it.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::{Args, Subcommand};
use krabka_coordination::client::Client;
use krabka_coordination::leadership::RoleStateReport;
use krabka_coordination::observe::{ObserveOptions, RoleView};
use krabka_coordination::transport::kafka::{TopicReport, TopicSpec};
use krabka_coordination::{rfc3339, FencingToken, Lease, Rfc3339, NO_EPOCH};
use serde_json::{json, Value};

use crate::settings::KafkaArgs;
use crate::Failure;

/// `describe ROLE [--token PID/EPOCH]`.
#[derive(Debug, Args)]
pub struct DescribeArgs {
    /// The role.
    pub role: String,
    /// A token to check, as PRODUCER_ID/EPOCH (as `state` prints it):
    /// exit code 0 when it is the role's current token, 1 otherwise.
    #[arg(long, value_name = "PID/EPOCH")]
    pub token: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `state ROLE`.
#[derive(Debug, Args)]
pub struct StateArgs {
    /// The role.
    pub role: String,
    /// Print JSON (`watch`: one JSON object per line).
    #[arg(long)]
    pub json: bool,
}

/// `watch ROLE [--renewals]`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The role.
    pub role: String,
    /// Print one JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Print each renewal too (by default only a new leader, a cleared or
    /// lapsed lease, and roster changes are printed).
    #[arg(long)]
    pub renewals: bool,
}

/// `roles`.
#[derive(Debug, Args)]
pub struct RolesArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `topic ensure` / `topic check`.
#[derive(Debug, Subcommand)]
pub enum TopicCommand {
    /// Create the state topic unless it exists (production defaults:
    /// replication factor 3, min.insync.replicas 2), then check it.
    Ensure {
        /// The replication factor of a topic this creates.
        #[arg(long, default_value_t = TopicSpec::default().replication_factor)]
        replication_factor: i32,
        /// min.insync.replicas of a topic this creates.
        #[arg(long, default_value_t = TopicSpec::default().min_insync_replicas)]
        min_insync_replicas: i32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check that the state topic exists with --partitions partitions and is
    /// compacted.
    Check {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// A token as `PID/EPOCH`.
pub fn parse_token(s: &str) -> Result<FencingToken, Failure> {
    s.parse()
        .map_err(|e| Failure::usage(format!("--token: {e}")))
}

fn token_json(t: &FencingToken) -> Value {
    if t.is_no_epoch() {
        Value::Null
    } else {
        json!({ "producer_id": t.producer_id, "producer_epoch": t.producer_epoch })
    }
}

/// Milliseconds since the epoch on this machine's wall clock (the clock of
/// lease deadlines).
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn lease_json(l: &Lease, now: i64) -> Value {
    json!({
        "member": l.member,
        "token": token_json(&l.token),
        "granted_at": l.granted_at,
        "granted_at_rfc3339": rfc3339(l.granted_at),
        "deadline": l.deadline,
        "deadline_rfc3339": rfc3339(l.deadline),
        "left_ms": (l.deadline - now).max(0),
    })
}

/// The time left on a lease at `now`, or the time since it expired.
fn time_left(l: &Lease, now: i64) -> String {
    let left = l.deadline - now;
    if left > 0 {
        format!("{:.1} s left", left as f64 / 1000.0)
    } else {
        format!("expired {:.1} s ago", -left as f64 / 1000.0)
    }
}

fn lease_line(l: &Lease, now: i64) -> String {
    format!(
        "lease: {} holds token {} (granted at {}, deadline {}, {})",
        l.member,
        l.token,
        Rfc3339(l.granted_at),
        Rfc3339(l.deadline),
        time_left(l, now)
    )
}

/// One line of `watch` for `v`, taken at `now`: the view's time, the
/// change, the leader (or the lapsed lease) and the roster in rank order.
fn watch_line(v: &RoleView, now: i64) -> String {
    let lease = match (&v.leader, &v.lapsed) {
        (Some(l), _) => format!(
            "{} leads with token {} until {} ({})",
            l.member,
            l.token,
            Rfc3339(l.deadline),
            time_left(l, now)
        ),
        (None, Some(l)) => format!(
            "no leader: the lease of {} (token {}) lapsed at {}",
            l.member,
            l.token,
            Rfc3339(l.deadline)
        ),
        (None, None) => "no leader".to_owned(),
    };
    let roster: Vec<&str> = v.roster.iter().map(|e| e.member.as_str()).collect();
    let roster = if roster.is_empty() {
        "empty".to_owned()
    } else {
        roster.join(", ")
    };
    format!(
        "{} {} {}: {lease}; roster: {roster}",
        Rfc3339(v.at),
        v.change.name(),
        v.role
    )
}

fn report_json(r: &RoleStateReport, now: i64) -> Value {
    json!({
        "role": r.role,
        "partition": r.partition,
        "roster": r.roster.iter().enumerate().map(|(rank, e)| json!({
            "rank": rank,
            "member": e.member,
            "offset": e.offset,
            "registered_at": e.registered_at,
            "registered_at_rfc3339": rfc3339(e.registered_at),
        })).collect::<Vec<_>>(),
        "lease": r.lease.as_ref().map(|l| lease_json(l, now)),
    })
}

fn print_report(r: &RoleStateReport, now: i64) {
    println!("role {} (partition {})", r.role, r.partition);
    if r.roster.is_empty() {
        println!("roster: empty");
    }
    for (rank, e) in r.roster.iter().enumerate() {
        println!(
            "  {rank}. {} (registered at offset {}, time {})",
            e.member,
            e.offset,
            Rfc3339(e.registered_at)
        );
    }
    match &r.lease {
        Some(l) => println!("{}", lease_line(l, now)),
        None => println!("lease: none"),
    }
}

/// Writes `v` and a newline to stdout in one buffered write, not through
/// stdout's line buffer (`println!("{v}")`), which makes a write(2) per
/// 1 KiB: a listing of many roles is megabytes (`docs/benchmarks/cli.md`).
fn print_json(v: &Value) -> Result<(), Failure> {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    serde_json::to_writer(&mut out, v)
        .map_err(std::io::Error::from)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
        .map_err(output_failure)
}

/// A failed write to stdout (a full disk; a closed pipe is SIGPIPE's).
fn output_failure(e: std::io::Error) -> Failure {
    Failure {
        code: 4,
        message: format!("writing the output: {e}"),
    }
}

/// `read`, with the state topic checked beside it as `topic check` checks
/// it (its error wins).
///
/// Without the check, a read of an unreachable cluster failed only after
/// the operation timeout of two librdkafka calls (60 s); the check gives up
/// after the connect timeout (10 s), exit code 3. A read of a missing topic
/// failed as "no partition N", an invalid argument (exit code 2), and one
/// with the wrong `--partitions` read the wrong partitions without a word;
/// the check names the missing topic or the partition count, a refusal
/// (exit code 4). Both run at once, so the check costs no time unless the
/// read is quicker than it.
async fn checked<T>(
    client: &Client,
    partitions: i32,
    read: impl std::future::Future<Output = krabka_coordination::Result<T>>,
) -> Result<T, Failure> {
    let check = client.check_state_topic(TopicSpec::default().with_partitions(partitions));
    tokio::pin!(read, check);
    tokio::select! {
        c = &mut check => {
            c?;
            read.await.map_err(Failure::from)
        }
        r = &mut read => {
            check.await?;
            r.map_err(Failure::from)
        }
    }
}

/// `describe`.
pub async fn describe(kafka: &KafkaArgs, a: DescribeArgs) -> Result<u8, Failure> {
    let asked = a.token.as_deref().map(parse_token).transpose()?;
    let client = kafka.client()?;
    let status = client.describe_leadership(&a.role).await?;
    let authoritative = asked.map(|t| status.authoritative(&t));
    if a.json {
        let mut v = json!({ "role": a.role, "token": token_json(&status.token) });
        if let (Some(t), Some(yes)) = (asked, authoritative) {
            v["asked"] = json!(t.to_string());
            v["authoritative"] = json!(yes);
        }
        print_json(&v)?;
    } else {
        if status.token == NO_EPOCH {
            println!("role {}: no epoch (no member has taken it)", a.role);
        } else {
            println!("role {}: token {}", a.role, status.token);
        }
        if let (Some(t), Some(yes)) = (asked, authoritative) {
            println!(
                "token {t} is {}",
                if yes {
                    "authoritative"
                } else {
                    "not authoritative"
                }
            );
        }
    }
    Ok(if authoritative == Some(false) { 1 } else { 0 })
}

/// `state`.
pub async fn state(kafka: &KafkaArgs, a: StateArgs) -> Result<u8, Failure> {
    let client = kafka.client()?;
    let report = checked(
        &client,
        kafka.partitions,
        client.describe_role_state(&a.role),
    )
    .await?;
    let now = now_ms();
    if a.json {
        print_json(&report_json(&report, now))?;
    } else {
        print_report(&report, now);
    }
    Ok(0)
}

/// `roles`.
pub async fn roles(kafka: &KafkaArgs, a: RolesArgs) -> Result<u8, Failure> {
    let client = kafka.client()?;
    let listing = checked(&client, kafka.partitions, client.describe_roles()).await?;
    let now = now_ms();
    if a.json {
        // The object of `json!({...})`, keys in the same (sorted) order,
        // written role by role: no tree of every role's Values is built and
        // freed for one write (a large share of the time on many roles).
        let unreadable: Vec<Value> = listing
            .unreadable
            .iter()
            .map(|(role, p, e)| json!({ "role": role, "partition": p, "error": e.to_string() }))
            .collect();
        let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
        let written: std::io::Result<()> = (|| {
            write!(
                out,
                "{{\"malformed_keys\":{},\"roles\":[",
                listing.malformed_keys
            )?;
            for (i, r) in listing.roles.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                serde_json::to_writer(&mut out, &report_json(r, now))?;
            }
            out.write_all(b"],\"unreadable\":")?;
            serde_json::to_writer(&mut out, &unreadable)?;
            out.write_all(b"}\n")?;
            out.flush()
        })();
        written.map_err(output_failure)?;
        return Ok(0);
    }
    // One buffered write for the lot, not a write(2) per line.
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    if listing.roles.is_empty() && listing.unreadable.is_empty() {
        writeln!(out, "no roles").map_err(output_failure)?;
    }
    for r in &listing.roles {
        let holder = match &r.lease {
            Some(l) => {
                let left = l.deadline - now;
                if left > 0 {
                    format!(
                        "{} token {} {:.1} s left",
                        l.member,
                        l.token,
                        left as f64 / 1000.0
                    )
                } else {
                    format!("{} token {} (lease expired)", l.member, l.token)
                }
            }
            None => "no lease".to_owned(),
        };
        writeln!(
            out,
            "{}\tpartition {}\t{}\t{} member(s)",
            r.role,
            r.partition,
            holder,
            r.roster.len()
        )
        .map_err(output_failure)?;
    }
    for (role, p, e) in &listing.unreadable {
        writeln!(out, "{role}\tpartition {p}\tunreadable: {e}").map_err(output_failure)?;
    }
    if listing.malformed_keys > 0 {
        writeln!(
            out,
            "{} record(s) with a key that does not decode",
            listing.malformed_keys
        )
        .map_err(output_failure)?;
    }
    out.flush().map_err(output_failure)?;
    Ok(0)
}

/// `watch`: prints the role once caught up, then each change the core's
/// observer reports ([`krabka_coordination::observe`]), until SIGINT or
/// SIGTERM: one line per view ([`watch_line`]) beginning with its time, or
/// one JSON object per view. A lapsed lease is printed as the lease it was,
/// with `change` saying it lapsed.
pub async fn watch(kafka: &KafkaArgs, a: WatchArgs) -> Result<u8, Failure> {
    let client = kafka.client()?;
    let options = ObserveOptions::default().with_renewals(a.renewals);
    let mut observer = client.observe(&[a.role.as_str()], options).await?;
    let mut stop = Box::pin(crate::run::stop_signal());
    let first = async { observer.next().await };
    let mut view = tokio::select! {
        v = checked(&client, kafka.partitions, first) => v?,
        _ = &mut stop => return Ok(0),
    };
    loop {
        let Some(v) = view else { return Ok(0) };
        let now = now_ms();
        if a.json {
            let report = RoleStateReport {
                role: v.role.to_string(),
                partition: v.partition,
                roster: v.roster,
                lease: v.leader.or(v.lapsed),
            };
            let mut line = report_json(&report, now);
            line["change"] = json!(v.change.name());
            line["at"] = json!(v.at);
            line["at_rfc3339"] = json!(rfc3339(v.at));
            print_json(&line)?;
        } else {
            println!("{}", watch_line(&v, now));
        }
        view = tokio::select! {
            v = observer.next() => v?,
            _ = &mut stop => return Ok(0),
        };
    }
}

fn topic_json(r: &TopicReport) -> Value {
    json!({
        "topic": r.topic,
        "created": r.created,
        "partitions": r.partitions,
        "replication_factor": r.replication_factor,
        "cleanup_policy": r.cleanup_policy,
        "min_insync_replicas": r.min_insync_replicas,
        "warnings": r.warnings,
    })
}

/// `topic ensure` / `topic check`.
pub async fn topic(kafka: &KafkaArgs, t: TopicCommand) -> Result<u8, Failure> {
    let client = kafka.client()?;
    let spec = TopicSpec::default().with_partitions(kafka.partitions);
    let (report, json) = match t {
        TopicCommand::Ensure {
            replication_factor,
            min_insync_replicas,
            json,
        } => {
            let spec = TopicSpec {
                replication_factor,
                min_insync_replicas,
                ..spec
            };
            (client.ensure_state_topic(spec).await?, json)
        }
        TopicCommand::Check { json } => (client.check_state_topic(spec).await?, json),
    };
    if json {
        print_json(&topic_json(&report))?;
    } else {
        println!(
            "topic {}: {}{} partitions, replication factor {}, cleanup.policy={}, min.insync.replicas={}",
            report.topic,
            if report.created { "created, " } else { "" },
            report.partitions,
            report.replication_factor,
            report.cleanup_policy,
            report
                .min_insync_replicas
                .map(|n| n.to_string())
                .unwrap_or_else(|| "unknown".to_owned()),
        );
        for w in &report.warnings {
            println!("warning: {w}");
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_parse_as_state_prints_them() {
        let t = FencingToken::new(4001, 3);
        assert_eq!(parse_token(&t.to_string()).unwrap(), t);
        for bad in ["4001", "x/1", "1/x", "1/70000", ""] {
            let e = parse_token(bad).unwrap_err();
            assert_eq!(e.code, 2);
            assert!(e.message.contains("PRODUCER_ID/EPOCH"), "{}", e.message);
        }
    }

    #[test]
    fn a_lease_line_says_the_time_left_or_since_expiry() {
        let l = Lease {
            member: "a".into(),
            token: FencingToken::new(1, 2),
            granted_at: 1_000,
            deadline: 11_000,
        };
        assert!(lease_line(&l, 6_000).contains("5.0 s left"));
        assert!(lease_line(&l, 13_500).contains("expired 2.5 s ago"));
        assert_eq!(lease_json(&l, 13_500)["left_ms"], 0);
        assert!(
            lease_line(&l, 6_000).contains("deadline 1970-01-01T00:00:11.000Z"),
            "{}",
            lease_line(&l, 6_000)
        );
        assert_eq!(lease_json(&l, 0)["deadline"], 11_000);
        assert_eq!(
            lease_json(&l, 0)["deadline_rfc3339"],
            "1970-01-01T00:00:11.000Z"
        );
    }

    #[test]
    fn a_watch_line_is_one_line_with_the_time_leader_and_roster() {
        use krabka_coordination::observe::Change;
        let lease = Lease {
            member: "a".into(),
            token: FencingToken::new(1, 2),
            granted_at: 1_000,
            deadline: 11_000,
        };
        let roster = ["a", "b"]
            .iter()
            .enumerate()
            .map(|(i, m)| krabka_coordination::RosterEntry {
                member: (*m).into(),
                offset: i as i64,
                registered_at: 0,
            })
            .collect();
        let mut v = RoleView {
            role: "r".into(),
            partition: 0,
            change: Change::Elected,
            leader: Some(lease.clone()),
            lapsed: None,
            roster,
            position: 2,
            at: 1_500,
        };
        assert_eq!(
            watch_line(&v, 6_000),
            "1970-01-01T00:00:01.500Z elected r: a leads with token 1/2 until \
             1970-01-01T00:00:11.000Z (5.0 s left); roster: a, b"
        );
        v.change = Change::Lapsed;
        v.leader = None;
        v.lapsed = Some(lease);
        v.roster.clear();
        let line = watch_line(&v, 12_000);
        assert!(!line.contains('\n'));
        assert!(
            line.ends_with("lapsed r: no leader: the lease of a (token 1/2) lapsed at 1970-01-01T00:00:11.000Z; roster: empty"),
            "{line}"
        );
    }
}
