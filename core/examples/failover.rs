//! The failover demo: three members of one role on a real Kafka.
//!
//! ```text
//! ci/demo.sh                                   # builds, starts a local Kafka, runs this
//! cargo run --release -p krabka-coordination --example failover [-- --bootstrap HOST:PORT]
//! ```
//!
//! Without `--bootstrap` it starts the local 1-node cluster with
//! `ci/kafka.sh start 1` (reusing a running one). It makes sure the state
//! topic exists, runs three `member` processes of one role, and shows live
//! who leads, with which token, the ranks and the lease remaining (read from
//! the role's partition with `describe_role_state` and from the transaction
//! coordinator with `describe_leadership`, like any third party would). Then:
//!
//! 1. it kills the leader with SIGKILL and shows the failover: the next member
//!    in rank waits for the dead leader's lease to run out, mints a newer
//!    epoch and takes over;
//! 2. it restarts the killed member, which registers again and lands at the
//!    tail of the roster (no failback);
//! 3. it asks the new leader to resign and shows the hand-over, which needs
//!    no lease expiry;
//! 4. it prints the measured failover and hand-over times.
//!
//! Every leader writes a guarded record every 150 ms to a data topic; the
//! demo shows how many each member got committed. The children are stopped
//! (they resign) when the demo ends or on ctrl-c.

#[cfg(feature = "kafka")]
#[path = "support/signals.rs"]
mod signals;

#[cfg(not(feature = "kafka"))]
fn main() {
    eprintln!("the failover demo needs the `kafka` feature (on by default)");
    std::process::exit(2);
}

#[cfg(feature = "kafka")]
fn main() {
    std::process::exit(demo::main());
}

#[cfg(feature = "kafka")]
mod demo {
    use std::collections::BTreeMap;
    use std::io::{BufRead, BufReader, IsTerminal, Write};
    use std::os::unix::process::CommandExt;
    use std::path::{Path, PathBuf};
    use std::process::{Child, ChildStdin, Command, Stdio};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

    use krabka_coordination::leadership::{
        describe_leadership, describe_role_state, RoleStateReport,
    };
    use krabka_coordination::transport::kafka::{ensure_state_topic, KafkaConfig, KafkaTransport};
    use krabka_coordination::{FencingToken, NO_EPOCH};
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::ClientConfig;
    use serde_json::Value;

    use super::signals;

    const USAGE: &str = "\
usage: failover [--bootstrap HOST:PORT] [options]

  --bootstrap HOST:PORT     an existing cluster (default: start the local one with ci/kafka.sh)
  --partitions N            partitions of the state topic (default 16)
  --lease-ms MS             lease duration (default 3000)
  --renew-ms MS             renew interval (default 1000)
  --stagger-ms MS           challenge stagger (default 1000)
  --refresh-ms MS           how often the view refreshes (default 250)
  --kafka-setting KEY=VAL   a librdkafka setting for every client (repeatable)
  --member-bin PATH         the member example binary (default: next to this one)
  --plain                   no terminal redrawing (one snapshot per change)";

    const MEMBERS: [&str; 3] = ["node-a", "node-b", "node-c"];
    const DATA_TOPIC: &str = "krabka-demo-writes";

    #[derive(Clone)]
    struct Args {
        bootstrap: Option<String>,
        partitions: i32,
        lease_ms: u64,
        renew_ms: u64,
        stagger_ms: u64,
        refresh: Duration,
        settings: Vec<(String, String)>,
        member_bin: Option<PathBuf>,
        plain: bool,
    }

    fn parse_args() -> Result<Args, String> {
        let mut a = Args {
            bootstrap: None,
            partitions: 16,
            lease_ms: 3000,
            renew_ms: 1000,
            stagger_ms: 1000,
            refresh: Duration::from_millis(250),
            settings: Vec::new(),
            member_bin: None,
            plain: false,
        };
        let mut it = std::env::args().skip(1);
        let num = |flag: &str, v: Option<String>| -> Result<u64, String> {
            let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
            v.parse()
                .map_err(|_| format!("{flag} takes a whole number, got {v:?}"))
        };
        while let Some(flag) = it.next() {
            match flag.as_str() {
                "--bootstrap" => a.bootstrap = Some(it.next().ok_or("--bootstrap needs a value")?),
                "--partitions" => {
                    a.partitions = i32::try_from(num(&flag, it.next())?)
                        .map_err(|_| "--partitions is too large")?
                }
                "--lease-ms" => a.lease_ms = num(&flag, it.next())?,
                "--renew-ms" => a.renew_ms = num(&flag, it.next())?,
                "--stagger-ms" => a.stagger_ms = num(&flag, it.next())?,
                "--refresh-ms" => a.refresh = Duration::from_millis(num(&flag, it.next())?.max(50)),
                "--kafka-setting" => {
                    let v = it.next().ok_or("--kafka-setting needs KEY=VALUE")?;
                    match v.split_once('=') {
                        Some((k, val)) if !k.is_empty() => a.settings.push((k.into(), val.into())),
                        _ => return Err(format!("--kafka-setting takes KEY=VALUE, got {v:?}")),
                    }
                }
                "--member-bin" => {
                    a.member_bin =
                        Some(PathBuf::from(it.next().ok_or("--member-bin needs a path")?))
                }
                "--plain" => a.plain = true,
                "-h" | "--help" => return Err(String::new()),
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        Ok(a)
    }

    fn now_ms() -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }

    fn repo_root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    /// `ci/kafka.sh start 1`: its last stdout line is the bootstrap address.
    fn start_local_kafka() -> Result<String, String> {
        let script = repo_root().join("ci/kafka.sh");
        eprintln!(
            "starting the local Kafka with {} (reuses a running one) ...",
            script.display()
        );
        let out = Command::new("bash")
            .arg(&script)
            .args(["start", "1"])
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("running {}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!("ci/kafka.sh start 1 failed ({})", out.status));
        }
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| "ci/kafka.sh start 1 printed no bootstrap address".into())
    }

    /// The member binary next to this one, built when missing.
    fn member_binary(args: &Args) -> Result<PathBuf, String> {
        if let Some(p) = &args.member_bin {
            return Ok(p.clone());
        }
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let dir = exe.parent().ok_or("no parent directory of this binary")?;
        let bin = dir.join("member");
        if bin.exists() {
            return Ok(bin);
        }
        eprintln!("building the member example ...");
        let release = dir
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|n| n == "release");
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.current_dir(repo_root()).args([
            "build",
            "-p",
            "krabka-coordination",
            "--example",
            "member",
        ]);
        if release {
            cmd.arg("--release");
        }
        let status = cmd.status().map_err(|e| format!("running cargo: {e}"))?;
        if !status.success() || !bin.exists() {
            return Err(format!(
                "could not build the member example ({status}); pass --member-bin"
            ));
        }
        Ok(bin)
    }

    // ------------------------------------------------------------ the members

    #[derive(Debug, Clone, Default)]
    struct MemberView {
        pid: Option<u32>,
        /// starting, waiting, challenging, LEADER, resigned, killed, fenced, exited
        state: String,
        token: Option<FencingToken>,
        writes_ok: u64,
        elected_at: Option<i64>,
        terms: u32,
    }

    struct Proc {
        id: &'static str,
        child: Child,
        stdin: Option<ChildStdin>,
    }

    /// What every member printed, and the demo's own event log.
    #[derive(Default)]
    struct Board {
        members: BTreeMap<&'static str, MemberView>,
        log: Vec<(i64, String)>,
        started: i64,
    }

    type Shared = Arc<Mutex<Board>>;

    fn note(board: &Shared, line: String) {
        board.lock().unwrap().log.push((now_ms(), line));
    }

    fn on_event(board: &Shared, id: &'static str, e: &Value) {
        let mut b = board.lock().unwrap();
        let event = e["event"].as_str().unwrap_or_default().to_owned();
        let t = e["t_ms"].as_i64().unwrap_or_else(now_ms);
        let mut line = None;
        {
            let m = b.members.entry(id).or_default();
            match event.as_str() {
                "registered" => {
                    m.state = "registered".into();
                    line = Some(format!("{id} registered at offset {}", e["offset"]));
                }
                "waiting" => m.state = "standby".into(),
                "challenging" => {
                    m.state = "challenging".into();
                    line = Some(format!("{id} challenges (mints an epoch)"));
                }
                "lost_challenge" => {
                    line = Some(format!("{id} lost the challenge to a newer epoch"))
                }
                "elected" => {
                    let token = FencingToken::new(
                        e["producer_id"].as_i64().unwrap_or(-1),
                        e["epoch"].as_i64().unwrap_or(-1) as i16,
                    );
                    m.state = "LEADER".into();
                    m.token = Some(token);
                    m.elected_at = Some(t);
                    m.terms += 1;
                    line = Some(format!(
                        "{id} elected with token {token}; its first lease is committed"
                    ));
                }
                "guarded_write" if e["result"] == "ok" => m.writes_ok += 1,
                "guarded_write" if e["result"] == "fenced" => {
                    line = Some(format!("{id}: guarded write FENCED by the broker"));
                }
                "fenced" => {
                    m.state = "fenced".into();
                    line = Some(format!(
                        "{id} FENCED: {}",
                        e["error"].as_str().unwrap_or_default()
                    ));
                }
                "resigning" => line = Some(format!("{id} resigns")),
                "resigned" => {
                    m.state = "resigned".into();
                    m.token = None;
                    line = Some(format!(
                        "{id} resigned in {:.1} ms (new epoch minted, lease cleared)",
                        e["took_ms"].as_f64().unwrap_or(0.0)
                    ));
                }
                "exit" if m.state != "killed" => m.state = format!("exited ({})", e["code"]),
                _ => {}
            }
        }
        if let Some(l) = line {
            b.log.push((t, l));
        }
    }

    fn spawn_member(
        bin: &Path,
        args: &Args,
        bootstrap: &str,
        role: &str,
        id: &'static str,
        board: &Shared,
        logs: &Path,
    ) -> Result<Proc, String> {
        let log = logs.join(format!("{id}.log"));
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| format!("opening {}: {e}", log.display()))?;
        let mut cmd = Command::new(bin);
        cmd.args(["--bootstrap", bootstrap, "--role", role, "--member", id])
            .args(["--partitions", &args.partitions.to_string()])
            .args([
                "--lease-ms",
                &args.lease_ms.to_string(),
                "--renew-ms",
                &args.renew_ms.to_string(),
            ])
            .args(["--stagger-ms", &args.stagger_ms.to_string()])
            .args([
                "--data-topic",
                DATA_TOPIC,
                "--write-every-ms",
                "150",
                "--rejoin",
                "--exit-on-stdin-eof",
            ])
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG")
                    .unwrap_or_else(|_| "warn,krabka_coordination=info".into()),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            // Its own process group: a ctrl-c in the terminal reaches the demo
            // only, and the demo stops the members in order.
            .process_group(0);
        for (k, v) in &args.settings {
            cmd.args(["--kafka-setting", &format!("{k}={v}")]);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        {
            let mut b = board.lock().unwrap();
            let m = b.members.entry(id).or_default();
            m.pid = Some(child.id());
            m.state = "starting".into();
            m.token = None;
        }
        let board2 = board.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    on_event(&board2, id, &v);
                }
            }
        });
        let stdin = child.stdin.take();
        Ok(Proc { id, child, stdin })
    }

    fn stop_all(procs: &mut Vec<Proc>) {
        for p in procs.iter_mut() {
            if let Ok(None) = p.child.try_wait() {
                // SIGTERM: the member resigns (or deregisters) and exits.
                kill(p.child.id(), signals::SIGTERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for p in procs.iter_mut() {
            loop {
                match p.child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() >= deadline => {
                        let _ = p.child.kill();
                        let _ = p.child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
            p.stdin = None;
        }
        procs.clear();
    }

    extern "C" {
        #[link_name = "kill"]
        fn c_kill(pid: i32, sig: i32) -> i32;
    }

    fn kill(pid: u32, sig: i32) -> bool {
        // SAFETY: kill(2) on a child's pid.
        unsafe { c_kill(pid as i32, sig) == 0 }
    }

    const SIGKILL: i32 = 9;

    // ------------------------------------------------------------ the view

    struct View {
        role: String,
        partition: i32,
        args: Args,
        tty: bool,
        drawn_lines: usize,
        last_plain: String,
        phase: String,
    }

    fn bold(tty: bool, s: &str) -> String {
        if tty {
            format!("\x1b[1m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }

    fn color(tty: bool, code: &str, s: &str) -> String {
        if tty {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }

    impl View {
        fn render(
            &mut self,
            board: &Board,
            state: Option<&RoleStateReport>,
            described: Option<FencingToken>,
        ) {
            let tty = self.tty;
            let now = now_ms();
            let mut lines = Vec::new();
            lines.push(format!(
                "{}  role {}  partition {}  lease {:.1} s  renew {:.1} s  stagger {:.1} s",
                bold(tty, "krabka-coordination failover demo"),
                self.role,
                self.partition,
                self.args.lease_ms as f64 / 1000.0,
                self.args.renew_ms as f64 / 1000.0,
                self.args.stagger_ms as f64 / 1000.0
            ));
            lines.push(format!("{} {}", bold(tty, "now:"), self.phase));
            lines.push(String::new());
            lines.push(format!(
                "  {:<6} {:<8} {:<7} {:<12} {:<11} {:<12} {:>7}",
                "rank", "member", "pid", "state", "token", "lease left", "writes"
            ));
            let lease = state.and_then(|s| s.lease.clone());
            let mut order: Vec<(String, &'static str)> = Vec::new();
            if let Some(s) = state {
                let holder = lease.as_ref().map(|l| l.member.clone());
                let mut rank = 0;
                for e in &s.roster {
                    let label = if Some(&e.member) == holder.as_ref() {
                        "lead".to_owned()
                    } else {
                        rank += 1;
                        format!("{}", rank - 1)
                    };
                    if let Some(id) = MEMBERS.iter().find(|m| **m == e.member) {
                        order.push((label, id));
                    }
                }
            }
            for id in MEMBERS {
                if !order.iter().any(|(_, m)| *m == id) {
                    order.push(("-".into(), id));
                }
            }
            order.sort_by_key(|(label, _)| match label.as_str() {
                "lead" => -1,
                "-" => 1000,
                n => n.parse::<i32>().unwrap_or(999),
            });
            for (label, id) in order {
                let m = board.members.get(id).cloned().unwrap_or_default();
                let holds = lease.as_ref().is_some_and(|l| l.member == id);
                let token = if holds {
                    lease.as_ref().map(|l| l.token.to_string())
                } else {
                    None
                };
                let left = if holds {
                    lease.as_ref().map(|l| {
                        let left = (l.deadline - now) as f64 / 1000.0;
                        if left >= 0.0 {
                            format!("{left:.1} s")
                        } else {
                            format!("expired {:.1} s", -left)
                        }
                    })
                } else {
                    None
                };
                let state_text = if holds && m.state != "LEADER" && m.state != "resigned" {
                    format!("{} (lease)", m.state)
                } else {
                    m.state.clone()
                };
                let state_cell = match m.state.as_str() {
                    "LEADER" => color(tty, "1;32", &format!("{state_text:<12}")),
                    "killed" | "fenced" => color(tty, "1;31", &format!("{state_text:<12}")),
                    _ => format!("{state_text:<12}"),
                };
                lines.push(format!(
                    "  {:<6} {:<8} {:<7} {} {:<11} {:<12} {:>7}",
                    label,
                    id,
                    m.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
                    state_cell,
                    token.unwrap_or_default(),
                    left.unwrap_or_default(),
                    m.writes_ok
                ));
            }
            lines.push(String::new());
            let holder = lease.as_ref().map(|l| (l.member.clone(), l.token));
            let authority = match (described, &holder) {
                (Some(t), _) if t == NO_EPOCH => "no member has taken the role yet".to_owned(),
                (Some(t), Some((m, lt))) if *lt == t => format!("{t}: {m} is authoritative"),
                (Some(t), _) => {
                    format!("{t}: no live member holds it (a resign or a challenge minted it)")
                }
                (None, _) => "(no answer yet)".to_owned(),
            };
            lines.push(format!("  describe_leadership (third party): {authority}"));
            lines.push(String::new());
            let start = board.log.len().saturating_sub(9);
            for (t, l) in &board.log[start..] {
                lines.push(format!(
                    "  {:>6.1} s  {l}",
                    (t - board.started) as f64 / 1000.0
                ));
            }
            if tty {
                // Redraw from the top left corner: each line cleared to its
                // end, then everything below the block cleared.
                let mut out = std::io::stdout().lock();
                let mut frame = String::from(if self.drawn_lines == 0 {
                    "\x1b[2J\x1b[H"
                } else {
                    "\x1b[H"
                });
                for l in &lines {
                    frame.push_str(l);
                    frame.push_str("\x1b[K\n");
                }
                frame.push_str("\x1b[J");
                let _ = out.write_all(frame.as_bytes());
                let _ = out.flush();
                self.drawn_lines = lines.len();
            } else {
                // No terminal: print the new event lines, and one status
                // line whenever the phase, the leader or the ranks change.
                let mut out = std::io::stdout().lock();
                for (t, l) in &board.log[self.drawn_lines.min(board.log.len())..] {
                    let _ = writeln!(out, "  {:>6.1} s  {l}", (t - board.started) as f64 / 1000.0);
                }
                self.drawn_lines = board.log.len();
                let ranks: Vec<String> = state
                    .map(|s| s.roster.iter().map(|e| e.member.clone()).collect())
                    .unwrap_or_default();
                let status = format!(
                    "  [{}] leader {} | roster in rank order: {} | describe_leadership: {authority}",
                    self.phase,
                    holder.map(|(m, t)| format!("{m} ({t})")).unwrap_or_else(|| "none".into()),
                    if ranks.is_empty() { "empty".to_owned() } else { ranks.join(", ") },
                );
                if status != self.last_plain {
                    let _ = writeln!(out, "{status}");
                    self.last_plain = status;
                }
                let _ = out.flush();
            }
        }
    }

    // ------------------------------------------------------------ the script

    struct Demo {
        args: Args,
        bootstrap: String,
        role: String,
        bin: PathBuf,
        board: Shared,
        procs: Vec<Proc>,
        observer: KafkaTransport,
        view: View,
        rt: tokio::runtime::Runtime,
        /// Where the members' stderr goes.
        logs: PathBuf,
    }

    /// Why the demo stopped early.
    struct Interrupted;

    impl Demo {
        fn observe(&self) -> (Option<RoleStateReport>, Option<FencingToken>) {
            self.rt.block_on(async {
                let s = describe_role_state(&self.observer, &self.role, self.args.partitions)
                    .await
                    .ok();
                let d = describe_leadership(&self.observer, &self.role)
                    .await
                    .ok()
                    .map(|s| s.token);
                (s, d)
            })
        }

        /// Refreshes the view until `until` holds for the role state (or `max` passes).
        fn show_until(
            &mut self,
            max: Duration,
            until: impl Fn(&RoleStateReport, &Board) -> bool,
        ) -> Result<Option<(RoleStateReport, i64)>, Interrupted> {
            let deadline = Instant::now() + max;
            loop {
                if signals::pending().is_some() {
                    return Err(Interrupted);
                }
                let (state, described) = self.observe();
                let seen = now_ms();
                {
                    let board = self.board.lock().unwrap();
                    self.view.render(&board, state.as_ref(), described);
                    if let Some(s) = &state {
                        if until(s, &board) {
                            return Ok(Some((s.clone(), seen)));
                        }
                    }
                }
                if Instant::now() >= deadline {
                    return Ok(None);
                }
                std::thread::sleep(
                    self.args
                        .refresh
                        .min(Duration::from_millis(100))
                        .max(Duration::from_millis(20)),
                );
            }
        }

        /// Refreshes the view for `d`.
        fn show_for(&mut self, d: Duration) -> Result<(), Interrupted> {
            let deadline = Instant::now() + d;
            while Instant::now() < deadline {
                if signals::pending().is_some() {
                    return Err(Interrupted);
                }
                let (state, described) = self.observe();
                self.view
                    .render(&self.board.lock().unwrap(), state.as_ref(), described);
                std::thread::sleep(self.args.refresh);
            }
            Ok(())
        }

        fn spawn(&mut self, id: &'static str) -> Result<(), String> {
            let p = spawn_member(
                &self.bin,
                &self.args,
                &self.bootstrap,
                &self.role,
                id,
                &self.board,
                &self.logs,
            )?;
            self.procs.push(p);
            Ok(())
        }

        fn proc_of(&mut self, id: &str) -> Option<&mut Proc> {
            self.procs.iter_mut().find(|p| p.id == id)
        }

        fn run(&mut self) -> Result<Summary, Interrupted> {
            let lease_ms = self.args.lease_ms as i64;
            let stagger_ms = self.args.stagger_ms as i64;
            let long = Duration::from_millis((lease_ms + 3 * stagger_ms) as u64 + 15_000);

            // 1. three members; the first one takes the role.
            self.view.phase = "starting three members of one role".into();
            for id in MEMBERS {
                if let Err(e) = self.spawn(id) {
                    note(&self.board, format!("could not start {id}: {e}"));
                }
                // Registration order is rank order: give each a head start.
                let _ = self.show_until(Duration::from_secs(20), |s, _| {
                    s.roster.iter().any(|e| e.member == id)
                })?;
            }
            let Some((s, _)) = self.show_until(long, |s, _| {
                s.lease.is_some() && s.roster.len() == MEMBERS.len()
            })?
            else {
                note(&self.board, "no member took the role in time".into());
                return Ok(Summary::default());
            };
            let first = s.lease.clone().map(|l| l.member).unwrap_or_default();
            self.view.phase = format!(
                "{first} leads and renews its lease every {:.1} s",
                self.args.renew_ms as f64 / 1000.0
            );
            self.show_for(Duration::from_millis(self.args.renew_ms * 3))?;

            // 2. SIGKILL the leader.
            let (s, _) = self.observe();
            let old = s.and_then(|s| s.lease).expect("a lease was read");
            let killed = old.member.clone();
            let rank0 = self
                .observe()
                .0
                .map(|s| {
                    s.roster
                        .iter()
                        .filter(|e| e.member != killed)
                        .map(|e| e.member.clone())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            let kill_at = now_ms();
            if let Some(p) = self.proc_of(&killed) {
                kill(p.child.id(), SIGKILL);
                let _ = p.child.wait();
            }
            {
                let mut b = self.board.lock().unwrap();
                if let Some(m) = b.members.get_mut(killed.as_str()) {
                    m.state = "killed".into();
                    m.pid = None;
                }
                b.log.push((
                    kill_at,
                    format!(
                        "demo: SIGKILL {killed} (lease deadline in {} ms)",
                        old.deadline - kill_at
                    ),
                ));
            }
            self.view.phase = format!(
                "{killed} was killed: {} waits for its lease to run out, then challenges",
                rank0.first().cloned().unwrap_or_default()
            );
            let old_token = old.token;
            let killed2 = killed.clone();
            let Some((s, seen)) = self.show_until(long, move |s, _| {
                s.lease
                    .as_ref()
                    .is_some_and(|l| l.member != killed2 && l.token > old_token)
            })?
            else {
                note(&self.board, "no failover in time".into());
                return Ok(Summary::default());
            };
            let new = s.lease.clone().expect("lease");
            let rank = rank0.iter().position(|m| *m == new.member).unwrap_or(0) as i64;
            let failover = Failover {
                total_ms: seen - kill_at,
                lease_left_ms: old.deadline - kill_at,
                beyond_ms: new.granted_at - (old.deadline + rank * stagger_ms),
                new_leader: new.member.clone(),
                token: new.token,
            };
            note(
                &self.board,
                format!(
                    "demo: failover {} -> {} in {} ms ({} ms were lease left; {} ms beyond deadline + rank x stagger)",
                    killed, new.member, failover.total_ms, failover.lease_left_ms, failover.beyond_ms
                ),
            );
            self.view.phase = format!(
                "{} took over with token {}; {killed} restarts",
                new.member, new.token
            );
            self.show_for(Duration::from_millis(self.args.renew_ms * 2))?;

            // 3. restart the killed member: it lands at the tail.
            let killed_id = MEMBERS
                .iter()
                .copied()
                .find(|m| *m == killed)
                .unwrap_or(MEMBERS[0]);
            self.procs.retain(|p| p.id != killed_id);
            if let Err(e) = self.spawn(killed_id) {
                note(&self.board, format!("could not restart {killed_id}: {e}"));
            }
            note(
                &self.board,
                format!("demo: restarted {killed_id}; it registers again and goes to the tail"),
            );
            let _ = self.show_until(Duration::from_secs(20), move |s, _| {
                s.roster.last().is_some_and(|e| e.member == killed_id)
                    && s.roster.len() == MEMBERS.len()
            })?;
            self.view.phase = format!("{killed_id} is back at the tail of the roster: no failback");
            self.show_for(Duration::from_millis(self.args.renew_ms * 2))?;

            // 4. the leader resigns.
            let (s, _) = self.observe();
            let held = s.and_then(|s| s.lease).expect("a lease");
            let resigner = held.member.clone();
            let resign_at = now_ms();
            if let Some(p) = self.proc_of(&resigner) {
                if let Some(stdin) = p.stdin.as_mut() {
                    let _ = writeln!(stdin, "resign");
                    let _ = stdin.flush();
                }
            }
            note(&self.board, format!("demo: asked {resigner} to resign"));
            self.view.phase = format!(
                "{resigner} resigns: the next in rank takes over without waiting for the lease"
            );
            let resigner2 = resigner.clone();
            let held_token = held.token;
            let Some((s, seen)) = self.show_until(Duration::from_secs(15), move |s, _| {
                s.lease
                    .as_ref()
                    .is_some_and(|l| l.member != resigner2 && l.token > held_token)
            })?
            else {
                note(&self.board, "no hand-over in time".into());
                return Ok(Summary {
                    failover: Some(failover),
                    handover: None,
                });
            };
            let next = s.lease.clone().expect("lease");
            let elected_at = self
                .board
                .lock()
                .unwrap()
                .members
                .get(next.member.as_str())
                .and_then(|m| m.elected_at);
            let handover = Handover {
                seen_ms: seen - resign_at,
                elected_ms: elected_at.map(|t| t - resign_at),
                from: resigner.clone(),
                to: next.member.clone(),
                token: next.token,
            };
            note(
                &self.board,
                format!(
                    "demo: hand-over {} -> {}: elected {} ms after the resign command, read back at {} ms",
                    handover.from,
                    handover.to,
                    handover.elected_ms.map(|v| v.to_string()).unwrap_or_else(|| "?".into()),
                    handover.seen_ms
                ),
            );
            self.view.phase = format!(
                "{} leads with token {}; {resigner} rejoined at the tail",
                next.member, next.token
            );
            self.show_for(Duration::from_millis(self.args.renew_ms * 3))?;
            Ok(Summary {
                failover: Some(failover),
                handover: Some(handover),
            })
        }
    }

    struct Failover {
        total_ms: i64,
        lease_left_ms: i64,
        beyond_ms: i64,
        new_leader: String,
        token: FencingToken,
    }

    struct Handover {
        seen_ms: i64,
        elected_ms: Option<i64>,
        from: String,
        to: String,
        token: FencingToken,
    }

    #[derive(Default)]
    struct Summary {
        failover: Option<Failover>,
        handover: Option<Handover>,
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime")
    }

    async fn ensure_topics(
        config: &KafkaConfig,
        bootstrap: &str,
        partitions: i32,
    ) -> Result<(), String> {
        // Replicate like the cluster allows: 3 with min ISR 2 on three or more brokers.
        let md_client: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .create()
            .map_err(|e| format!("a metadata client: {e}"))?;
        let brokers = tokio::task::spawn_blocking(move || {
            md_client
                .fetch_metadata(None, Duration::from_secs(15))
                .map(|m| m.brokers().len())
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("Kafka at {bootstrap} does not answer: {e}"))?;
        let rf = brokers.clamp(1, 3) as i32;
        let min_isr = if rf >= 3 { 2 } else { 1 };
        let report = ensure_state_topic(config, partitions, rf, min_isr)
            .await
            .map_err(|e| format!("ensuring the state topic: {e}"))?;
        eprintln!(
            "state topic {}: {} partitions, replication factor {}{}",
            report.topic,
            report.partitions,
            report.replication_factor,
            if report.created { " (created)" } else { "" }
        );
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .create()
            .map_err(|e| format!("an admin client: {e}"))?;
        let r = admin
            .create_topics(
                [&NewTopic::new(DATA_TOPIC, 1, TopicReplication::Fixed(rf))],
                &AdminOptions::new(),
            )
            .await
            .map_err(|e| format!("creating {DATA_TOPIC}: {e}"))?;
        for t in r {
            if let Err((name, code)) = t {
                if code != rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists {
                    return Err(format!("creating {name}: {code}"));
                }
            }
        }
        Ok(())
    }

    pub fn main() -> i32 {
        let args = match parse_args() {
            Ok(a) => a,
            Err(e) => {
                if !e.is_empty() {
                    eprintln!("failover: {e}");
                }
                eprintln!("{USAGE}");
                return if e.is_empty() { 0 } else { 2 };
            }
        };
        if std::env::var_os("RUST_LOG").is_some() {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
                .with_writer(std::io::stderr)
                .try_init();
        }
        signals::install();
        let bootstrap = match &args.bootstrap {
            Some(b) => b.clone(),
            None => match start_local_kafka() {
                Ok(b) => b,
                Err(e) => {
                    eprintln!("failover: {e}");
                    return 1;
                }
            },
        };
        let bin = match member_binary(&args) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("failover: {e}");
                return 1;
            }
        };
        let mut config = KafkaConfig::new(bootstrap.clone());
        for (k, v) in &args.settings {
            config = config.set(k.clone(), v.clone());
        }
        let rt = runtime();
        if let Err(e) = rt.block_on(ensure_topics(&config, &bootstrap, args.partitions)) {
            eprintln!("failover: {e}");
            return 1;
        }
        let observer = match rt
            .block_on(async { KafkaTransport::new(config.clone(), Some("failover-demo")) })
        {
            Ok(t) => t,
            Err(e) => {
                eprintln!("failover: {e}");
                return 1;
            }
        };
        let role = format!("demo-{}", now_ms() / 1000 % 1_000_000);
        let partition = krabka_coordination::role_partition(&role, args.partitions).unwrap_or(-1);
        let tty = std::io::stdout().is_terminal() && !args.plain;
        let board: Shared = Arc::new(Mutex::new(Board {
            started: now_ms(),
            ..Board::default()
        }));
        note(
            &board,
            format!("demo: Kafka at {bootstrap}; role {role} lives in partition {partition}"),
        );
        let view = View {
            role: role.clone(),
            partition,
            args: args.clone(),
            tty,
            drawn_lines: 0,
            last_plain: String::new(),
            phase: String::new(),
        };
        let logs = std::env::temp_dir().join("krabka-demo").join(&role);
        if let Err(e) = std::fs::create_dir_all(&logs) {
            eprintln!("failover: creating {}: {e}", logs.display());
            return 1;
        }
        let mut demo = Demo {
            args,
            bootstrap,
            role,
            bin,
            board,
            procs: Vec::new(),
            observer,
            view,
            rt,
            logs,
        };
        let started = Instant::now();
        let outcome = demo.run();
        demo.view.phase = "stopping the members (they resign)".into();
        stop_all(&mut demo.procs);
        let (state, described) = demo.observe();
        demo.view
            .render(&demo.board.lock().unwrap(), state.as_ref(), described);
        let took = started.elapsed();
        match outcome {
            Err(Interrupted) => {
                println!("\ninterrupted; the members were stopped");
                130
            }
            Ok(s) => {
                println!();
                println!("{}", bold(tty, "measured"));
                match &s.failover {
                    Some(f) => println!(
                        "  failover  (SIGKILL of the leader -> {} holds a committed lease, token {}): {} ms\n            of which {} ms were the dead leader's lease still running; {} ms beyond deadline + rank x stagger",
                        f.new_leader, f.token, f.total_ms, f.lease_left_ms, f.beyond_ms
                    ),
                    None => println!("  failover: not observed"),
                }
                match &s.handover {
                    Some(h) => println!(
                        "  hand-over (resign of {} -> {} holds a committed lease, token {}): {} ms (read back by the demo at {} ms)",
                        h.from,
                        h.to,
                        h.token,
                        h.elected_ms.map(|v| v.to_string()).unwrap_or_else(|| "?".into()),
                        h.seen_ms
                    ),
                    None => println!("  hand-over: not observed"),
                }
                println!(
                    "  demo ran {:.1} s; member logs in {}",
                    took.as_secs_f64(),
                    demo.logs.display()
                );
                if s.failover.is_some() && s.handover.is_some() {
                    0
                } else {
                    1
                }
            }
        }
    }
}
