//! `krabka` as a user runs it, against the real local Kafka
//! (`KRABKA_BOOTSTRAP`, or `ci/kafka.sh start 1` is run): separate `krabka`
//! processes, children that are shell commands, signals from outside.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use krabka_coordination::client::Client;
use krabka_coordination::leadership::RoleStateReport;
use krabka_coordination::transport::kafka::KafkaConfig;
use krabka_coordination::FencingToken;
use serde_json::{json, Value};

mod fenced_psql;

const KRABKA: &str = env!("CARGO_BIN_EXE_krabka");

/// The bootstrap address of the single-node cluster; panics (fails the
/// test) when Kafka cannot be had.
fn bootstrap() -> String {
    static ADDR: OnceLock<String> = OnceLock::new();
    ADDR.get_or_init(|| {
        if let Ok(b) = std::env::var("KRABKA_BOOTSTRAP") {
            if !b.trim().is_empty() {
                return b.trim().to_owned();
            }
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/kafka.sh");
        let out = Command::new("bash")
            .arg(&script)
            .args(["start", "1"])
            .stdin(Stdio::null())
            .output()
            .expect("running ci/kafka.sh");
        assert!(
            out.status.success(),
            "a real Kafka is needed and ci/kafka.sh start 1 failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .expect("ci/kafka.sh printed the bootstrap address")
            .trim()
            .to_owned()
    })
    .clone()
}

fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{nanos:x}", std::process::id())
}

/// `krabka -b <bootstrap> <args>`, waited for.
fn krabka(args: &[&str]) -> Output {
    Command::new(KRABKA)
        .arg("-b")
        .arg(bootstrap())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("running krabka")
}

fn stdout_json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "krabka failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// A `krabka run` whose child appends `<member> <token>` to `log` when it
/// starts, then runs `then` (a shell snippet).
struct Runner {
    child: Child,
    member: String,
    /// What krabka printed on stderr, read by a thread (the child's own
    /// children may hold the pipe open after krabka exits).
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Runner {
    fn start(role: &str, member: &str, log: &Path, then: &str) -> Runner {
        Runner::start_with(role, member, log, then, &[])
    }

    /// [`Runner::start`] with more `run` options.
    fn start_with(role: &str, member: &str, log: &Path, then: &str, extra: &[&str]) -> Runner {
        Runner::start_as(role, member, log, then, extra, None)
    }

    /// [`Runner::start_with`], as user id `uid` when given (the test runs
    /// as root for that).
    fn start_as(
        role: &str,
        member: &str,
        log: &Path,
        then: &str,
        extra: &[&str],
        uid: Option<u32>,
    ) -> Runner {
        let script = format!(
            "echo \"$KRABKA_MEMBER $KRABKA_TOKEN $KRABKA_PRODUCER_ID $KRABKA_EPOCH\" >> '{}'; {then}",
            log.display()
        );
        let mut command = Command::new(KRABKA);
        if let Some(uid) = uid {
            use std::os::unix::process::CommandExt;
            command.uid(uid).gid(uid);
        }
        let child = command
            .arg("-b")
            .arg(bootstrap())
            .args([
                "run",
                "--role",
                role,
                "--member",
                member,
                "--lease",
                "6s",
                "--renew",
                "1s",
                "--stagger",
                "500ms",
                "--grace",
                "3s",
            ])
            .args(extra)
            .args(["--", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting krabka run");
        let mut child = child;
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let pipe = child.stderr.take().unwrap();
        let sink = std::sync::Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                eprintln!("[krabka] {line}");
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        Runner {
            child,
            member: member.to_owned(),
            stderr,
        }
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on a child this test spawned and has not reaped.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, sig);
        }
    }

    /// Waits for the exit; returns the code and what it printed on stderr.
    fn wait(mut self, within: Duration) -> (Option<i32>, String) {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // The reader thread takes the last lines.
                std::thread::sleep(Duration::from_millis(200));
                let err = self.stderr.lock().unwrap().clone();
                return (status.code(), err);
            }
            if started.elapsed() > within {
                let _ = self.child.kill();
                panic!(
                    "krabka run of {} did not exit within {within:?}",
                    self.member
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The lines of `log`.
fn lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Waits until `log` has `n` lines; returns them.
fn until_lines(log: &Path, n: usize, within: Duration) -> Vec<String> {
    let started = Instant::now();
    loop {
        let l = lines(log);
        if l.len() >= n {
            return l;
        }
        assert!(
            started.elapsed() < within,
            "{} line(s) in {} after {within:?}, wanted {n}: {l:?}",
            l.len(),
            log.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn temp_log(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(unique(name));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("children.log")
}

fn ensure_topic() {
    let out = krabka(&[
        "topic",
        "ensure",
        "--replication-factor",
        "1",
        "--min-insync-replicas",
        "1",
        "--json",
    ]);
    let v = stdout_json(&out);
    assert_eq!(v["partitions"], 16);
}

#[test]
fn run_starts_the_child_only_on_the_leader_and_hands_over_when_it_exits() {
    ensure_topic();
    let role = unique("cli-run");
    let log = temp_log("run");
    // a's child runs until a file appears, then exits 7.
    let release = log.with_file_name("release");
    let a = Runner::start(
        &role,
        "a",
        &log,
        &format!(
            "while [ ! -e '{}' ]; do sleep 0.1; done; exit 7",
            release.display()
        ),
    );
    let first = until_lines(&log, 1, Duration::from_secs(30));
    let b = Runner::start(&role, "b", &log, "sleep 600");
    // b waits: only a's child runs.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(lines(&log).len(), 1, "{:?}", lines(&log));
    let fields: Vec<&str> = first[0].split(' ').collect();
    assert_eq!(fields[0], "a");
    let token = fields[1];
    assert_eq!(token, format!("{}/{}", fields[2], fields[3]));
    // b said who leads, once: not again at each of a's renewals (every 1 s).
    let said = b.stderr.lock().unwrap().clone();
    let waiting =
        format!("a leads {role} with token {token}; b waits at rank 0 and challenges at ");
    assert_eq!(said.matches(&waiting).count(), 1, "{said}");

    // The token the child got is the role's, by describe's exit code.
    let out = krabka(&["describe", &role, "--token", token]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = krabka(&["describe", &role, "--token", "1/0", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["authoritative"], false);
    assert_eq!(v["token"]["producer_id"].to_string(), fields[2]);

    // state agrees: a holds the lease with that token, b is ranked second.
    let v = stdout_json(&krabka(&["state", &role, "--json"]));
    assert_eq!(v["lease"]["member"], "a");
    assert_eq!(v["roster"][0]["member"], "a");
    assert_eq!(v["roster"][1]["member"], "b");
    let roles = stdout_json(&krabka(&["roles", "--json"]));
    let listed = roles["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == role.as_str())
        .expect("the role is listed");
    assert_eq!(listed["lease"]["member"], "a");
    assert_eq!(listed["partition"], v["partition"]);

    // a's child exits 7: a resigns and exits 7, b's child starts at once.
    std::fs::write(&release, b"").unwrap();
    let handed = Instant::now();
    let (code, err) = a.wait(Duration::from_secs(30));
    assert_eq!(code, Some(7), "{err}");
    let both = until_lines(&log, 2, Duration::from_secs(10));
    eprintln!("b's child started {:?} after a's exited", handed.elapsed());
    assert!(both[1].starts_with("b "), "{both:?}");
    assert!(
        handed.elapsed() < Duration::from_secs(5),
        "the hand-over waited for the lease ({:?})",
        handed.elapsed()
    );

    // SIGTERM to b: its child is stopped (sleep dies of SIGTERM: 143), b
    // resigns, and the role is free.
    b.signal(libc::SIGTERM);
    let (code, err) = b.wait(Duration::from_secs(30));
    assert_eq!(code, Some(143), "{err}");
    let v = stdout_json(&krabka(&["state", &role, "--json"]));
    assert_eq!(v["roster"].as_array().unwrap().len(), 0, "{v}");
    assert!(v["lease"].is_null(), "{v}");
}

#[test]
fn a_paused_leader_stops_its_child_when_it_resumes_and_exits_5() {
    ensure_topic();
    let role = unique("cli-fenced");
    let log = temp_log("fenced");
    let a = Runner::start(&role, "a", &log, "sleep 600");
    until_lines(&log, 1, Duration::from_secs(30));
    let b = Runner::start(&role, "b", &log, "sleep 600");
    std::thread::sleep(Duration::from_secs(2));
    // a is paused past its lease: b takes over meanwhile.
    a.signal(libc::SIGSTOP);
    let l = until_lines(&log, 2, Duration::from_secs(30));
    assert!(l[1].starts_with("b "), "{l:?}");
    a.signal(libc::SIGCONT);
    let resumed = Instant::now();
    let (code, err) = a.wait(Duration::from_secs(30));
    assert_eq!(code, Some(5), "{err}");
    assert!(
        resumed.elapsed() < Duration::from_secs(10),
        "{:?}",
        resumed.elapsed()
    );
    assert!(err.contains("ended"), "{err}");
    // The role is b's.
    let v = stdout_json(&krabka(&["state", &role, "--json"]));
    assert_eq!(v["lease"]["member"], "b");
    b.signal(libc::SIGTERM);
    b.wait(Duration::from_secs(30));
}

/// A child's shell snippet that appends `<member> <nanoseconds>` to `ticks`
/// every 20 ms, first writing its shell's pid and a background sleep's pid
/// to `<ticks>.<member>.pids`; on SIGTERM it keeps ticking for
/// `after_term` (seconds; "forever" ignores SIGTERM).
fn ticking(ticks: &Path, after_term: &str) -> String {
    let t = ticks.display();
    let on_term = if after_term == "forever" {
        "trap '' TERM".to_owned()
    } else {
        format!("trap 'end=$(( $(date +%s%N) + {after_term} * 1000000000 ))' TERM")
    };
    format!(
        "sleep 600 & echo \"$$ $!\" > '{t}.'\"$KRABKA_MEMBER\"'.pids'; end=0; {on_term}; \
         while :; do now=$(date +%s%N); echo \"$KRABKA_MEMBER $now\" >> '{t}'; \
         if [ $end -ne 0 ] && [ $now -ge $end ]; then exit 0; fi; sleep 0.02; done"
    )
}

/// Each member's (first, last) tick in `ticks`, in nanoseconds.
fn tick_spans(ticks: &Path) -> std::collections::BTreeMap<String, (u128, u128)> {
    let mut spans = std::collections::BTreeMap::new();
    for line in lines(ticks) {
        let mut f = line.split_whitespace();
        let (Some(m), Some(Ok(t))) = (f.next(), f.next().map(str::parse::<u128>)) else {
            continue; // a line cut short by a kill
        };
        let e = spans.entry(m.to_owned()).or_insert((t, t));
        e.0 = e.0.min(t);
        e.1 = e.1.max(t);
    }
    spans
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // "pid (comm) S ...": the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// The pids a [`ticking`] child of `member` wrote: its shell and its
/// background sleep.
fn child_pids(ticks: &Path, member: &str) -> Vec<i32> {
    let file = format!("{}.{member}.pids", ticks.display());
    let started = Instant::now();
    loop {
        let pids: Vec<i32> = std::fs::read_to_string(&file)
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if pids.len() == 2 {
            return pids;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no pids in {file}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `member` has ticked in `ticks`.
fn until_ticking(ticks: &Path, member: &str, within: Duration) {
    let started = Instant::now();
    while !tick_spans(ticks).contains_key(member) {
        assert!(
            started.elapsed() < within,
            "{member}'s child did not tick within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asserts that a's ticks all precede b's.
fn assert_no_overlap(ticks: &Path) {
    let spans = tick_spans(ticks);
    let (a, b) = (spans["a"], spans["b"]);
    let gap_ms = (b.0 as i128 - a.1 as i128) / 1_000_000;
    eprintln!("a ticked until {gap_ms} ms before b's first tick");
    assert!(
        a.1 < b.0,
        "a's child ran {} ms beside b's",
        (a.1 - b.0) / 1_000_000
    );
}

#[test]
fn a_sigkill_of_krabka_ends_its_child_and_what_the_child_started_at_once() {
    ensure_topic();
    let role = unique("cli-sigkill");
    let log = temp_log("sigkill");
    let ticks = log.with_file_name("ticks");
    let a = Runner::start(&role, "a", &log, &ticking(&ticks, "forever"));
    until_ticking(&ticks, "a", Duration::from_secs(30));
    let a_pids = child_pids(&ticks, "a");
    let b = Runner::start(&role, "b", &log, &ticking(&ticks, "0"));
    std::thread::sleep(Duration::from_secs(1));
    a.signal(libc::SIGKILL);
    let killed = Instant::now();
    // The child (its shell) and what it started (a background sleep) die
    // with krabka, not when the lease runs out.
    while !a_pids.iter().all(|&p| gone(p)) {
        assert!(
            killed.elapsed() < Duration::from_secs(2),
            "a's child's processes {a_pids:?} outlived krabka by {:?}",
            killed.elapsed()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!(
        "a's child and its sleep were gone {:?} after the SIGKILL",
        killed.elapsed()
    );
    until_ticking(&ticks, "b", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(300));
    assert_no_overlap(&ticks);
    b.signal(libc::SIGTERM);
    let (code, err) = b.wait(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{err}");
    drop(a);
}

/// An iptables rule that drops the TCP packets user `uid` sends to `port`;
/// removed on drop.
struct CutOff {
    rule: Vec<String>,
}

impl CutOff {
    fn new(uid: u32, port: &str) -> CutOff {
        let rule: Vec<String> = [
            "OUTPUT",
            "-m",
            "owner",
            "--uid-owner",
            &uid.to_string(),
            "-p",
            "tcp",
            "--dport",
            port,
            "-m",
            "comment",
            "--comment",
            "krabka-cli-test",
            "-j",
            "DROP",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let out = Command::new("iptables")
            .args(["-w", "-I"])
            .args(&rule)
            .output()
            .expect(
                "this test cuts a krabka off with iptables, run as root (CI is): iptables \
                 could not be run",
            );
        assert!(
            out.status.success(),
            "this test cuts a krabka off with iptables, run as root (CI is): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        CutOff { rule }
    }
}

impl Drop for CutOff {
    fn drop(&mut self) {
        let _ = Command::new("iptables")
            .args(["-w", "-D"])
            .args(&self.rule)
            .output();
    }
}

#[test]
fn a_cut_off_krabka_kills_a_stubborn_child_before_its_successor_starts() {
    // SAFETY: getuid(2) cannot fail.
    assert_eq!(
        unsafe { libc::getuid() },
        0,
        "this test runs krabka as another user and cuts it off with iptables: run it as root \
         (CI is)"
    );
    ensure_topic();
    let role = unique("cli-cutoff");
    let log = temp_log("cutoff");
    let dir = log.parent().unwrap().to_owned();
    // The child of a runs as another user: it must write there.
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let ticks = dir.join("ticks");
    let uid = 64_000 + (std::process::id() % 1_000);
    // A child that ignores SIGTERM: only the SIGKILL before the lease's end
    // can keep it from running beside b's (lease 6 s, renewals every 1 s,
    // grace 3 s: SIGTERM with 3.3 s of the lease left, SIGKILL with 0.3 s).
    let a = Runner::start_as(
        &role,
        "a",
        &log,
        &ticking(&ticks, "forever"),
        &[],
        Some(uid),
    );
    until_ticking(&ticks, "a", Duration::from_secs(30));
    let b = Runner::start(&role, "b", &log, &ticking(&ticks, "0"));
    std::thread::sleep(Duration::from_secs(2));
    let port = bootstrap().rsplit_once(':').unwrap().1.to_owned();
    let cut = CutOff::new(uid, &port);
    let cut_at = Instant::now();
    let (code, err) = a.wait(Duration::from_secs(30));
    eprintln!("a's krabka exited {:?} after the cut", cut_at.elapsed());
    assert_eq!(code, Some(5), "{err}");
    assert!(err.contains("could not renew its lease"), "{err}");
    assert!(err.contains("sending SIGKILL"), "{err}");
    until_ticking(&ticks, "b", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(300));
    drop(cut);
    assert_no_overlap(&ticks);
    b.signal(libc::SIGTERM);
    let (code, err) = b.wait(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{err}");
}

/// A command that cannot run is refused before `run` contends: no
/// registration, no epoch minted.
#[test]
fn run_checks_its_command_before_contending() {
    ensure_topic();
    let role = unique("cli-no-binary");
    let out = krabka(&[
        "run",
        "--role",
        &role,
        "--member",
        "m",
        "--",
        "/no/such/binary",
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"/no/such/binary\": does not exist") && err.lines().count() == 1,
        "{err}"
    );
    let v = stdout_json(&krabka(&["describe", &role, "--json"]));
    assert!(v["token"].is_null(), "no epoch was minted: {v}");
    let v = stdout_json(&krabka(&["state", &role, "--json"]));
    assert!(v["roster"].as_array().unwrap().is_empty(), "{v}");
}

/// `--help` names the default of every option that has one.
#[test]
fn run_help_prints_every_default() {
    let out = Command::new(KRABKA)
        .args(["run", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for (option, default) in [
        ("--lease", "[default: 30s]"),
        ("--renew", "[default: 10s]"),
        ("--stagger", "[default: 5s]"),
        ("--partitions", "[default: 16]"),
        ("--state-topic", "[default: __coordination_state]"),
    ] {
        let line = help
            .lines()
            .position(|l| l.trim_start().starts_with(option))
            .unwrap_or_else(|| panic!("{option} in {help}"));
        // clap prints the help beside the option or on the lines below.
        let text = help
            .lines()
            .skip(line)
            .take(4)
            .collect::<Vec<_>>()
            .join(" ");
        assert!(text.contains(default), "{option}: {text}");
    }
}

#[test]
fn watch_prints_each_change_of_the_role() {
    ensure_topic();
    let role = unique("cli-watch");
    let mut watch = Command::new(KRABKA)
        .arg("-b")
        .arg(bootstrap())
        .args(["watch", &role, "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(serde_json::from_str(&line).unwrap()).is_err() {
                break;
            }
        }
    });
    let next = |what: &str| {
        rx.recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no line for {what}"))
    };
    // The same watch for people: one line per change, beginning with its
    // time.
    let mut text = Command::new(KRABKA)
        .arg("-b")
        .arg(bootstrap())
        .args(["watch", &role])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let v = next("the empty role");
    assert!(v["roster"].as_array().unwrap().is_empty(), "{v}");
    assert_eq!(v["change"], "initial", "{v}");
    assert!(v["at"].as_i64().unwrap() > 0, "{v}");
    assert!(v["at_rfc3339"].as_str().unwrap().ends_with('Z'), "{v}");
    let log = temp_log("watch");
    let a = Runner::start(&role, "a", &log, "sleep 600");
    // Registered, then leading: one line each, in that order.
    let v = next("a's registration");
    assert_eq!(
        (&v["change"], &v["roster"][0]["member"]),
        (&json!("roster"), &json!("a")),
        "{v}"
    );
    assert!(v["lease"].is_null(), "{v}");
    let v = next("a's lease");
    assert_eq!(v["change"], "elected", "{v}");
    assert_eq!(v["lease"]["member"], "a");
    assert_eq!(v["roster"][0]["member"], "a");
    // Renewals are not changes: the next line is the resign's.
    a.signal(libc::SIGTERM);
    a.wait(Duration::from_secs(30));
    let v = next("a's resign");
    assert_eq!(v["change"], "cleared", "{v}");
    assert!(v["lease"].is_null(), "{v}");
    let v = next("a's deregistration");
    assert_eq!(v["change"], "roster", "{v}");
    assert!(v["roster"].as_array().unwrap().is_empty(), "{v}");
    // SIGTERM ends the watch with 0.
    // SAFETY: kill(2) on a child this test spawned.
    unsafe {
        libc::kill(watch.id() as libc::pid_t, libc::SIGTERM);
    }
    let status = watch.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    // The text watch saw the same five changes.
    // Read on a thread, each line bounded, so that a missing line fails the
    // test instead of hanging it.
    let (text_tx, text_rx) = std::sync::mpsc::channel::<String>();
    let text_out = text.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(text_out).lines().map_while(Result::ok) {
            if text_tx.send(line).is_err() {
                break;
            }
        }
    });
    let out: Vec<String> = (0..5)
        .map(|i| {
            text_rx
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("the text watch printed {i} lines, not 5"))
        })
        .collect();
    let _ = text.kill();
    let _ = text.wait();
    let out = out.join("\n");
    let changes: Vec<&str> = out
        .lines()
        .map(|l| {
            let (time, rest) = l.split_once(' ').unwrap();
            // 2026-12-07T12:50:00.123Z
            assert!(
                time.len() == 24 && time.as_bytes()[10] == b'T' && time.ends_with('Z'),
                "{l}"
            );
            rest.split(' ').next().unwrap()
        })
        .collect();
    assert_eq!(
        changes,
        ["initial", "roster", "elected", "cleared", "roster"],
        "{out}"
    );
    assert!(
        out.contains(&format!("elected {role}: a leads with token ")),
        "{out}"
    );
}

#[test]
fn bad_arguments_and_an_unreachable_cluster_get_one_line_and_their_code() {
    // An unreachable cluster: exit code 3 within the connect timeout (10 s),
    // for a describe and for a read of the state topic alike.
    let started = Instant::now();
    let unreachable: Vec<_> = [&["describe", "r"][..], &["roles"], &["state", "r"]]
        .into_iter()
        .map(|args| {
            let child = Command::new(KRABKA)
                .args(["-b", "127.0.0.1:1"])
                .args(args)
                .env("RUST_BACKTRACE", "1")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (args, child)
        })
        .collect();
    for (args, child) in unreachable {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(3), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("127.0.0.1:1") && err.lines().count() == 1,
            "{args:?}: {err}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let cases: [&[&str]; 4] = [
        &["describe", ""],
        &["describe", "r", "--token", "x"],
        &["-X", "no-equals", "state", "r"],
        &[
            "run", "--role", "r", "--member", "m", "--lease", "3 weeks", "--", "true",
        ],
    ];
    for args in cases {
        let out = krabka(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // A missing state topic: refused, named, by every command that reads it.
    let missing = unique("no-such-topic");
    let cases: [&[&str]; 4] = [
        &["topic", "check"],
        &["state", "r"],
        &["roles"],
        &["watch", "r"],
    ];
    for args in cases {
        let out = krabka(&[&["--state-topic", &missing][..], args].concat());
        assert_eq!(out.status.code(), Some(4), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&missing) && err.lines().count() == 1,
            "{args:?}: {err}"
        );
        // The remedy is the CLI's own command, not the Rust call.
        assert!(
            err.contains("with krabka topic ensure") && !err.contains("::"),
            "{args:?}: {err}"
        );
    }
    // A --partitions that is not the topic's: refused, not a read of the
    // wrong partitions.
    ensure_topic();
    let out = krabka(&["--partitions", "8", "state", "r"]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("16 partitions"));
}

/// GET /metrics from the `krabka run` of `runner` (its address is on its
/// stderr); the value of each `name{labels} value` line.
fn scrape(runner: &Runner) -> std::collections::HashMap<String, f64> {
    use std::io::{Read, Write};
    let started = Instant::now();
    let addr = loop {
        let err = runner.stderr.lock().unwrap().clone();
        if let Some(rest) = err.split("metrics on http://").nth(1) {
            break rest.split('/').next().unwrap().to_owned();
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no metrics address: {err}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    let body = text.split("\r\n\r\n").nth(1).unwrap();
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(k, v)| (k.to_owned(), v.parse().unwrap()))
        .collect()
}

/// The status line of `GET path` from the `krabka run` of `runner`.
fn probe(runner: &Runner, path: &str) -> String {
    use std::io::{Read, Write};
    let err = runner.stderr.lock().unwrap().clone();
    let addr = err
        .split("metrics on http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no metrics address: {err}"))
        .to_owned();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.lines().next().unwrap_or("").to_owned()
}

/// The value of the series `name` whose labels include `member="<m>"`
/// (0 when absent).
fn series(m: &std::collections::HashMap<String, f64>, name: &str, member: &str) -> f64 {
    m.iter()
        .filter(|(k, _)| {
            k.split('{').next() == Some(name)
                && (member.is_empty() || k.contains(&format!("member=\"{member}\"")))
        })
        .map(|(_, v)| *v)
        .sum()
}

#[test]
fn metrics_follow_a_failover() {
    ensure_topic();
    let role = unique("cli-metrics");
    let log = temp_log("metrics");
    let metrics = ["--metrics-addr", "127.0.0.1:0", "--keep-going"];
    let a = Runner::start_with(&role, "a", &log, "sleep 600", &metrics);
    until_lines(&log, 1, Duration::from_secs(30));
    let m = scrape(&a);
    assert_eq!(series(&m, "krabka_role_held", "a"), 1.0, "{m:?}");
    assert_eq!(series(&m, "krabka_elections_total", "a"), 1.0, "{m:?}");
    assert_eq!(series(&m, "krabka_acquire_seconds_count", ""), 1.0, "{m:?}");
    // Durations are histograms: the +Inf bucket is the count.
    let inf: f64 = m
        .iter()
        .filter(|(k, _)| {
            k.starts_with("krabka_acquire_seconds_bucket{") && k.contains("le=\"+Inf\"")
        })
        .map(|(_, v)| *v)
        .sum();
    assert_eq!(inf, 1.0, "{m:?}");
    assert_eq!(probe(&a, "/readyz"), "HTTP/1.1 200 OK", "a leads: ready");
    assert_eq!(probe(&a, "/healthz"), "HTTP/1.1 200 OK");
    let renewed = series(&m, "krabka_renewals_total", "a");
    std::thread::sleep(Duration::from_millis(2500));
    let m = scrape(&a);
    assert!(
        series(&m, "krabka_renewals_total", "a") >= renewed + 1.0,
        "{m:?}"
    );
    assert!(series(&m, "krabka_lease_left_seconds", "a") > 0.0, "{m:?}");
    // KrabkaTermLost of docs/metrics.md, `increase(krabka_fences_total[15m])
    // + increase(krabka_lease_expirations_total[15m]) > 0`, fires at a's
    // first end only if both series are in a scrape before it: at 0.
    let ends = |m: &std::collections::HashMap<String, f64>, member: &str| {
        ["krabka_fences_total", "krabka_lease_expirations_total"].map(|name| {
            m.get(&format!("{name}{{role=\"{role}\",member=\"{member}\"}}"))
                .copied()
        })
    };
    assert_eq!(ends(&m, "a"), [Some(0.0), Some(0.0)], "{m:?}");

    // a is paused past its lease; b takes over; a, resumed, counts the end.
    let b = Runner::start_with(&role, "b", &log, "sleep 600", &metrics[..2]);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        probe(&b, "/readyz"),
        "HTTP/1.1 503 Service Unavailable",
        "b waits: not ready"
    );
    assert_eq!(probe(&b, "/healthz"), "HTTP/1.1 200 OK");
    // The standby's series are there from its registration: not holding,
    // its counters at 0 (KrabkaRoleWithoutLeader sums the 0).
    let standby = |name: &str| format!("{name}{{role=\"{role}\",member=\"b\"}}");
    let waited = Instant::now();
    let m = loop {
        let m = scrape(&b);
        if m.contains_key(&standby("krabka_role_held"))
            || waited.elapsed() > Duration::from_secs(10)
        {
            break m;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(m.get(&standby("krabka_role_held")), Some(&0.0), "{m:?}");
    assert_eq!(ends(&m, "b"), [Some(0.0), Some(0.0)], "{m:?}");
    a.signal(libc::SIGSTOP);
    until_lines(&log, 2, Duration::from_secs(30));
    a.signal(libc::SIGCONT);
    let started = Instant::now();
    loop {
        let m = scrape(&a);
        let ended = series(&m, "krabka_lease_expirations_total", "a")
            + series(&m, "krabka_fences_total", "a");
        if series(&m, "krabka_role_held", "a") == 0.0 && ended >= 1.0 {
            // The alert over the scrape before and this one: it fires.
            let [fences, expired] = ends(&m, "a").map(|v| v.expect("a's series stay"));
            assert!(fences + expired > 0.0, "{m:?}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "{m:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        probe(&a, "/readyz"),
        "HTTP/1.1 503 Service Unavailable",
        "a lost the role: not ready"
    );
    // b leads (its child started); under load its probe may answer a
    // moment later than a's end was scraped.
    let asked = Instant::now();
    while probe(&b, "/readyz") != "HTTP/1.1 200 OK" && asked.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(probe(&b, "/readyz"), "HTTP/1.1 200 OK", "b leads: ready");
    let m = scrape(&b);
    assert_eq!(series(&m, "krabka_role_held", "b"), 1.0, "{m:?}");
    assert_eq!(series(&m, "krabka_elections_total", "b"), 1.0, "{m:?}");
    assert_eq!(
        series(&m, "krabka_handover_seconds_count", ""),
        1.0,
        "{m:?}"
    );
    a.signal(libc::SIGTERM);
    b.signal(libc::SIGTERM);
    a.wait(Duration::from_secs(30));
    b.wait(Duration::from_secs(30));
}

/// The library's view of a role: what `describe_role_state`,
/// `describe_roles` and `describe_leadership` of the core's `Client` say.
struct LibraryView {
    state: RoleStateReport,
    listed: RoleStateReport,
    token: FencingToken,
}

fn library_view(role: &str) -> LibraryView {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = Client::new(KafkaConfig::new(bootstrap())).unwrap();
        let state = client.describe_role_state(role).await.unwrap();
        let listing = client.describe_roles().await.unwrap();
        let listed = listing
            .roles
            .into_iter()
            .find(|r| r.role == role)
            .expect("describe_roles lists the role");
        let token = client.describe_leadership(role).await.unwrap().token;
        LibraryView {
            state,
            listed,
            token,
        }
    })
}

/// Asserts that the JSON of `state`, of an entry of `roles` or of a line of
/// `watch` says what the library's `report` says: partition, roster (rank
/// order, members, registration offsets and times), holder and token. The
/// lease's times move with each renewal; the JSON, read after the library,
/// has a deadline no earlier.
fn assert_same(what: &str, json: &Value, report: &RoleStateReport) {
    assert_eq!(json["role"], report.role.as_str(), "{what}: {json}");
    assert_eq!(json["partition"], report.partition, "{what}: {json}");
    let roster = json["roster"].as_array().unwrap();
    assert_eq!(roster.len(), report.roster.len(), "{what}: {json}");
    for (rank, (j, e)) in roster.iter().zip(&report.roster).enumerate() {
        assert_eq!(j["rank"], rank, "{what}: {json}");
        assert_eq!(j["member"], e.member.as_str(), "{what}: {json}");
        assert_eq!(j["offset"], e.offset, "{what}: {json}");
        assert_eq!(j["registered_at"], e.registered_at, "{what}: {json}");
    }
    let lease = report.lease.as_ref().expect("the library sees a lease");
    let j = &json["lease"];
    assert_eq!(j["member"], lease.member.as_str(), "{what}: {json}");
    assert_eq!(
        j["token"]["producer_id"], lease.token.producer_id,
        "{what}: {json}"
    );
    assert_eq!(
        j["token"]["producer_epoch"], lease.token.producer_epoch,
        "{what}: {json}"
    );
    assert!(
        j["deadline"].as_i64().unwrap() >= lease.deadline,
        "{what}: {json} vs {lease:?}"
    );
}

#[test]
fn state_roles_and_watch_agree_with_the_library() {
    ensure_topic();
    let role = unique("cli-agree");
    let log = temp_log("agree");
    let a = Runner::start(&role, "a", &log, "sleep 600");
    let first = until_lines(&log, 1, Duration::from_secs(30));
    // Until the library sees `n` members registered.
    let registered = |n: usize| {
        let started = Instant::now();
        loop {
            let lib = library_view(&role);
            if lib.state.roster.len() == n {
                return lib;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{:?}",
                lib.state
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    // b, then c: the rank order is the order of registration.
    let b = Runner::start(&role, "b", &log, "sleep 600");
    registered(2);
    let c = Runner::start(&role, "c", &log, "sleep 600");
    let lib = registered(3);

    // The library agrees with itself and with what a's child was given.
    let members: Vec<&str> = lib.state.roster.iter().map(|e| e.member.as_str()).collect();
    assert_eq!(members, ["a", "b", "c"]);
    assert!(lib
        .state
        .roster
        .windows(2)
        .all(|w| w[0].offset < w[1].offset));
    let lease = lib.state.lease.clone().expect("a holds the lease");
    assert_eq!(lease.member, "a");
    assert_eq!(
        lease.token, lib.token,
        "the coordinator's token is the lease's"
    );
    assert_eq!(
        first[0].split(' ').nth(1),
        Some(lib.token.to_string().as_str())
    );
    assert_eq!(lib.listed.roster, lib.state.roster);
    assert_eq!(lib.listed.partition, lib.state.partition);

    // state, roles and watch, read after it, say the same.
    let state = stdout_json(&krabka(&["state", &role, "--json"]));
    assert_same("state", &state, &lib.state);
    let roles = stdout_json(&krabka(&["roles", "--json"]));
    let listed = roles["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == role.as_str())
        .expect("roles lists the role");
    assert_same("roles", listed, &lib.listed);
    let describe = stdout_json(&krabka(&["describe", &role, "--json"]));
    assert_eq!(describe["token"]["producer_id"], lib.token.producer_id);
    assert_eq!(
        describe["token"]["producer_epoch"],
        lib.token.producer_epoch
    );

    // watch's first line is the state once caught up (not a replay of the
    // partition's history).
    let mut watch = Command::new(KRABKA)
        .arg("-b")
        .arg(bootstrap())
        .args(["watch", &role, "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(watch.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = watch.kill();
    let _ = watch.wait();
    let watched: Value = serde_json::from_str(&line).expect("a JSON line from watch");
    assert_same("watch", &watched, &lib.state);

    for r in [&a, &b, &c] {
        r.signal(libc::SIGTERM);
    }
    for r in [a, b, c] {
        r.wait(Duration::from_secs(30));
    }
}
