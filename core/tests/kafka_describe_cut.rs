//! A transaction coordinator cut off from its peers and from the
//! controllers, while clients still reach it, never gets a deposed token
//! called authoritative once a successor has minted elsewhere.
//!
//! The cut-off broker answers DescribeTransactions from memory for as long
//! as the cut lasts, and its own FindCoordinator names itself, so before
//! the describes were confirmed at another broker a third party asking
//! there (a fresh client whose lookup lands on it, or one that knows only
//! that broker) was told the deposed token was current, and a deposed
//! epoch's empty write (`check_current`) trusts the same answer. The bound this test
//! holds the client to (docs/guarantees.md): no answer given after the
//! successor's mint calls the deposed token authoritative (an error is
//! allowed), and the deposed epoch's empty write fails.
//!
//! The leader and its successor mint through the transport directly (the
//! step an election ends with), so the test waits for the cluster to fence
//! the cut-off broker, not for a lease. The successor's client knows only
//! the other two brokers: it must reach the new coordinator.
//!
//! Needs the real three-node cluster (`KRABKA_BOOTSTRAP_3`, or `ci/kafka.sh
//! start 3` is run), root, iptables and a cgroup v2 hierarchy, as the fault
//! campaign's `broker_isolate` (ci/faults/isolation.py): the broker's JVM
//! is moved into a cgroup of its own, one rule drops every packet to its
//! inter-broker and controller ports (the client port + 50 and + 100), one
//! drops its JVM's packets to its peers' ones, and its connections to them
//! are ended with `ss -K`. The cut is healed when the guard drops, panic or
//! not.
#![cfg(feature = "kafka")]

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use krabka_coordination::leadership::{describe_leadership, LeadershipStatus};
use krabka_coordination::transport::kafka::{KafkaClient, KafkaTransport};
use krabka_coordination::transport::LeaseWriter;
use krabka_coordination::{ErrorKind, FencingToken};
use support::*;

/// Long enough that no lease or transaction runs out during the test.
const LEASE: Duration = Duration::from_secs(60);
/// How long the describes are checked after the successor's mint: past the
/// client's coordinator cache age limit (5 s), so the long-lived client's
/// cached coordinator ages during it.
const CHECKED_FOR: Duration = Duration::from_secs(6);
/// The comment on the test's iptables rules.
const COMMENT: &str = "krabka-describe-cut";

/// The client port + 50 (inter-broker) and + 100 (controller) of a broker
/// address (`ci/kafka/server.properties.in`).
fn peer_ports(addr: &str) -> [u16; 2] {
    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
    [port + 50, port + 100]
}

/// Where the cgroup v2 hierarchy is mounted.
fn cgroup2_root() -> String {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    mounts
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|p| p.len() > 2 && p[2] == "cgroup2")
        .map(|p| p[1].to_owned())
        .expect("this test cuts a broker off by its cgroup: no cgroup v2 hierarchy is mounted")
}

/// Runs iptables with `args`; its error output when it fails.
fn iptables(args: &[&str]) -> Result<(), String> {
    let out = Command::new("iptables")
        .arg("-w")
        .args(args)
        .output()
        .map_err(|e| format!("iptables could not be run: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// A broker cut off from its peers and the controllers while clients still
/// reach it; healed (rules deleted, the JVM moved back to the root cgroup)
/// on drop.
struct BrokerCut {
    rules: Vec<Vec<String>>,
    group: String,
}

impl BrokerCut {
    /// Cuts the broker at `addr` (JVM `pid`) off from `peers`.
    fn new(addr: &str, pid: i32, peers: &[&str]) -> BrokerCut {
        let name = format!("{COMMENT}-{}", addr.rsplit(':').next().unwrap());
        let group = format!("{}/{name}", cgroup2_root());
        std::fs::create_dir_all(&group).unwrap();
        let mut cut = BrokerCut {
            rules: Vec::new(),
            group,
        };
        std::fs::write(format!("{}/cgroup.procs", cut.group), pid.to_string())
            .expect("moving the broker into its cgroup (this test needs root)");
        let list = |ports: Vec<u16>| {
            ports
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        let own = list(peer_ports(addr).to_vec());
        let theirs = list(peers.iter().flat_map(|p| peer_ports(p)).collect());
        let base = ["OUTPUT", "-o", "lo", "-p", "tcp"];
        let tail = ["-m", "comment", "--comment", COMMENT, "-j", "DROP"];
        let own_rule = [&base[..], &["-m", "multiport", "--dports", &own], &tail].concat();
        let group_rule = [
            &base[..],
            &[
                "-m",
                "cgroup",
                "--path",
                &name,
                "-m",
                "multiport",
                "--dports",
                &theirs,
            ],
            &tail,
        ]
        .concat();
        for rule in [own_rule, group_rule] {
            let rule: Vec<String> = rule.iter().map(|s| s.to_string()).collect();
            let args: Vec<&str> = rule.iter().map(String::as_str).collect();
            let inserted = iptables(&[&["-I"], &args[..]].concat());
            assert!(
                inserted.is_ok(),
                "this test cuts a broker off with iptables, run it as root with iptables \
                 installed (CI is): {inserted:?}"
            );
            cut.rules.push(rule);
        }
        // A socket keeps the cgroup it was made in: the broker's
        // connections to its peers made before the move are ended.
        for port in peers.iter().flat_map(|p| peer_ports(p)) {
            let _ = Command::new("ss")
                .args(["-K", "dport", "=", &format!(":{port}")])
                .output();
        }
        cut
    }
}

impl Drop for BrokerCut {
    fn drop(&mut self) {
        for rule in &self.rules {
            let args: Vec<&str> = rule.iter().map(String::as_str).collect();
            if let Err(e) = iptables(&[&["-D"], &args[..]].concat()) {
                eprintln!("deleting the rule {rule:?} failed: {e}");
            }
        }
        let root = cgroup2_root();
        if let Ok(pids) = std::fs::read_to_string(format!("{}/cgroup.procs", self.group)) {
            for pid in pids.split_whitespace() {
                let _ = std::fs::write(format!("{root}/cgroup.procs"), pid);
            }
        }
        let _ = std::fs::remove_dir(&self.group);
    }
}

/// One describe's outcome: the token named, or the error's kind and text.
type Described = Result<LeadershipStatus, (ErrorKind, String)>;

/// A fresh client of `boot` describes `role`, as a gatekeeper that starts
/// a process per check does.
async fn describe_fresh(boot: &str, role: &str) -> Described {
    let cfg = config(boot).with_operation_timeout(Duration::from_secs(3));
    let client = KafkaClient::new(&cfg).unwrap();
    match client.describe_epoch(role).await {
        Ok(token) => Ok(LeadershipStatus { token }),
        Err(e) => Err((e.kind(), e.to_string())),
    }
}

/// Whether `got` calls `deposed` authoritative (or fails other than
/// transiently): what is wrong, said, or `None`.
fn wrong(who: &str, got: &Described, deposed: &FencingToken, since: Duration) -> Option<String> {
    match got {
        Ok(status) if status.authoritative(deposed) => Some(format!(
            "{who}, {since:?} after the successor's mint: the deposed token {deposed} was \
             called authoritative"
        )),
        Err((kind, text)) if *kind != ErrorKind::Transient => Some(format!("{who}: {text}")),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_coordinator_never_calls_a_deposed_token_authoritative() {
    init_tracing();
    let boot = bootstrap3();
    let cfg = config(&boot).with_operation_timeout(Duration::from_secs(30));
    let role = unique("describe-cut");
    // The third party, which caches the role's coordinator X.
    let third = KafkaTransport::new(
        cfg.clone().with_operation_timeout(Duration::from_secs(3)),
        Some("describe-cut-third"),
    )
    .unwrap();
    let x = third
        .kafka_client()
        .coordinator_address(&role)
        .await
        .unwrap();
    let leader = KafkaTransport::new(cfg.clone(), Some("describe-cut-leader")).unwrap();
    let deposed = leader.mint_epoch(&role, LEASE).await.unwrap();
    let old = deposed.token();
    let before = describe_leadership(&third, &role).await.unwrap();
    assert!(before.authoritative(&old), "{before:?} vs {old}");
    let brokers: Vec<&str> = boot.split(',').map(str::trim).collect();
    let others: Vec<&str> = brokers.iter().copied().filter(|b| *b != x).collect();
    let x_first = [vec![x.as_str()], others.clone()].concat().join(",");
    let pid = node_pid(&node_of(&x, &boot)).unwrap();

    let cut = BrokerCut::new(&x, pid, &others);
    let cut_at = Instant::now();
    eprintln!("coordinator {x} cut off from {others:?}");

    // The successor knows only the other brokers: it mints once the
    // cluster has fenced the cut-off broker and moved its partitions.
    let successor_cfg = config(&others.join(",")).with_operation_timeout(Duration::from_secs(40));
    let successor = KafkaTransport::new(successor_cfg, Some("describe-cut-successor")).unwrap();
    let new = successor.mint_epoch(&role, LEASE).await.unwrap().token();
    let minted_at = Instant::now();
    let now_at = successor
        .kafka_client()
        .coordinator_address(&role)
        .await
        .unwrap();
    eprintln!(
        "successor minted {new} at {now_at}, {:?} after the cut",
        cut_at.elapsed()
    );
    assert!(new > old, "{new} vs {old}");
    assert_ne!(
        now_at, x,
        "the coordinator did not move off the cut-off broker"
    );

    // From the successor's mint on, no describe calls the old token
    // authoritative: the long-lived third party (which cached the cut-off
    // coordinator), a fresh client asking the cut-off broker first, and
    // one that knows only the cut-off broker.
    let mut wrongs = Vec::new();
    let mut named_new = 0;
    while minted_at.elapsed() < CHECKED_FOR {
        let since = minted_at.elapsed();
        let cached = describe_leadership(&third, &role)
            .await
            .map_err(|e| (e.kind(), e.to_string()));
        let fresh = describe_fresh(&x_first, &role).await;
        let only_x = describe_fresh(&x, &role).await;
        eprintln!("{since:?}: {cached:?} / {fresh:?} / {only_x:?}");
        wrongs.extend(wrong("the long-lived third party", &cached, &old, since));
        wrongs.extend(wrong("a fresh client asking it first", &fresh, &old, since));
        wrongs.extend(wrong("a client of it alone", &only_x, &old, since));
        named_new += [&cached, &fresh]
            .iter()
            .filter(|d| matches!(d, Ok(s) if s.authoritative(&new)))
            .count();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if named_new == 0 {
        wrongs.push(format!("no describe named the successor's token {new}"));
    }

    // The deposed epoch's own check, a write of no records, is refused too.
    match deposed
        .write_guarded(Vec::new(), Duration::from_secs(4))
        .await
    {
        Ok(()) => wrongs.push("the deposed epoch's empty write succeeded".to_owned()),
        Err(e) if !matches!(e.kind(), ErrorKind::Fenced | ErrorKind::Transient) => {
            wrongs.push(format!("the deposed epoch's empty write: {e}"))
        }
        Err(e) => eprintln!("the deposed epoch's empty write: {e}"),
    }

    drop(cut);
    until_fully_replicated(&boot, Duration::from_secs(60)).await;
    assert!(wrongs.is_empty(), "{}", wrongs.join("\n"));
}
