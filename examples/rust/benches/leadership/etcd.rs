//! The peer measured in the same run: etcd's election (`etcdctl elect`,
//! Debian's `etcd-server` and `etcd-client`), on a local three-member etcd
//! cluster on loopback (replicated like the 3-broker Kafka), timed exactly
//! as `procs.rs` times ours: from the leader's resign (SIGINT: `etcdctl
//! elect` resigns its key and exits) to the moment this process reads the
//! standby's first line (it prints its key once elected).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use krabka_examples::now_ms;
use krabka_examples::signal::{self, Signal};
use serde_json::{json, Value};

use crate::stats::{ms, stat_line, stats};
use crate::Args;

/// Client and peer ports of member `i` (0, 1, 2).
fn ports(base: u16, i: u16) -> (u16, u16) {
    (base + i, base + 10 + i)
}

/// A running etcd member; killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A local three-member etcd cluster in a temporary directory.
struct Cluster {
    members: Vec<Proc>,
    endpoints: String,
    dir: PathBuf,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.members.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start_cluster(etcd: &str, base: u16) -> Result<Cluster, String> {
    let dir = std::env::temp_dir().join(format!("krabka-bench-etcd-{}", now_ms()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let initial: Vec<String> = (0..3)
        .map(|i| format!("e{i}=http://127.0.0.1:{}", ports(base, i).1))
        .collect();
    let mut members = Vec::new();
    for i in 0..3u16 {
        let (client, peer) = ports(base, i);
        let log = std::fs::File::create(dir.join(format!("e{i}.log")))
            .map_err(|e| format!("creating the etcd log: {e}"))?;
        let child = Command::new(etcd)
            .args(["--name", &format!("e{i}")])
            .arg("--data-dir")
            .arg(dir.join(format!("e{i}")))
            .args([
                "--listen-client-urls",
                &format!("http://127.0.0.1:{client}"),
            ])
            .args([
                "--advertise-client-urls",
                &format!("http://127.0.0.1:{client}"),
            ])
            .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
            .args([
                "--initial-advertise-peer-urls",
                &format!("http://127.0.0.1:{peer}"),
            ])
            .args(["--initial-cluster", &initial.join(",")])
            .args(["--initial-cluster-state", "new"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("starting {etcd}: {e} (apt-get install etcd-server)"))?;
        members.push(Proc(child));
    }
    let endpoints = (0..3)
        .map(|i| format!("127.0.0.1:{}", ports(base, i).0))
        .collect::<Vec<_>>()
        .join(",");
    Ok(Cluster {
        members,
        endpoints,
        dir,
    })
}

/// One `etcdctl elect` process and the instants of its stdout lines.
struct Elector {
    child: Proc,
    lines: mpsc::Receiver<Instant>,
}

fn elect(etcdctl: &str, endpoints: &str, name: &str, proposal: &str) -> Result<Elector, String> {
    let mut child = Command::new(etcdctl)
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", endpoints, "elect", name, proposal])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting {etcdctl}: {e} (apt-get install etcd-client)"))?;
    let stdout = child.stdout.take().ok_or("etcdctl without stdout")?;
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if line.is_err() || tx.send(Instant::now()).is_err() {
                break;
            }
        }
    });
    Ok(Elector {
        child: Proc(child),
        lines,
    })
}

impl Elector {
    /// When it printed its first line (its key: it is elected).
    fn elected(&self, within: Duration) -> Result<Instant, String> {
        let at = self
            .lines
            .recv_timeout(within)
            .map_err(|_| format!("etcdctl elect printed nothing within {within:?}"))?;
        Ok(at)
    }

    fn resign(&self) -> Result<(), String> {
        signal::send(self.child.0.id(), Signal::Interrupt)
            .map_err(|e| format!("SIGINT to etcdctl: {e}"))
    }
}

/// Waits until `n` campaign keys of election `name` exist.
async fn campaigned(etcdctl: &str, endpoints: &str, name: &str, n: usize) -> Result<(), String> {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let out = Command::new(etcdctl)
            .env("ETCDCTL_API", "3")
            .args([
                "--endpoints",
                endpoints,
                "get",
                "--prefix",
                "--keys-only",
                name,
            ])
            .stderr(Stdio::null())
            .output()
            .map_err(|e| format!("running {etcdctl} get: {e}"))?;
        let keys = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .count();
        if keys >= n {
            return Ok(());
        }
        if Instant::now() > until {
            return Err(format!("{keys} of {n} campaign keys of {name} within 30 s"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn which(name: &str) -> Option<String> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| Path::new(p).is_file())
            .map(|p| p.display().to_string())
    })
}

/// etcd's hand-over, `--handover-trials` times.
pub async fn handover(a: &Args) -> Result<Value, String> {
    let etcd = which("etcd").ok_or("etcd is not on the PATH (apt-get install etcd-server)")?;
    let etcdctl =
        which("etcdctl").ok_or("etcdctl is not on the PATH (apt-get install etcd-client)")?;
    let cluster = start_cluster(&etcd, a.etcd_port)?;
    let ready = Instant::now() + Duration::from_secs(30);
    loop {
        let ok = Command::new(&etcdctl)
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &cluster.endpoints, "endpoint", "health"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if ok {
            break;
        }
        if Instant::now() > ready {
            return Err(format!(
                "etcd on {} not healthy within 30 s (logs in {})",
                cluster.endpoints,
                cluster.dir.display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let name = format!("bench-{}", now_ms());
    let within = Duration::from_secs(30);
    let first = elect(&etcdctl, &cluster.endpoints, &name, "x")?;
    first.elected(within)?;
    // In campaign order: the leader, then the standbys (`--members` in all).
    let count = a.members.max(2);
    let mut ranked = std::collections::VecDeque::from([first]);
    for i in 1..count {
        ranked.push_back(elect(
            &etcdctl,
            &cluster.endpoints,
            &name,
            &format!("m{i}"),
        )?);
        // The next one campaigns only once this one's key exists: the
        // rank is the key's creation, not the process's start.
        campaigned(&etcdctl, &cluster.endpoints, &name, i + 1).await?;
    }
    eprintln!(
        "etcd hand-over: {} trials, {count} electors, etcdctl elect on the 3-member cluster {}",
        a.handover_trials, cluster.endpoints
    );
    let mut total = Vec::new();
    for trial in 0..a.handover_trials {
        // The standbys' campaign keys must exist before the resign.
        let pause = 300 + (trial as u64 * 137) % a.renew_ms.max(1);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let t0 = Instant::now();
        ranked[0].resign()?;
        let at = ranked[1].elected(within)?;
        total.push(ms(at - t0));
        if a.verbose {
            eprintln!(
                "  trial {trial:>3}: elected {:.1} ms after the resign",
                ms(at - t0)
            );
        }
        // The resigned process exits; a new one campaigns at the tail.
        ranked.pop_front();
        ranked.push_back(elect(
            &etcdctl,
            &cluster.endpoints,
            &name,
            &format!("t{trial}"),
        )?);
    }
    drop(ranked);
    println!(
        "etcd hand-over ({} trials, {count} electors, etcdctl elect, 3 etcd members on loopback, timed from outside)",
        total.len()
    );
    println!("{}", stat_line("SIGINT to leader -> elected line", &total));
    Ok(json!({ "total": stats(&total), "electors": count, "endpoints": cluster.endpoints }))
}
