//! The member-process harness: start a `member` process, read its JSON event
//! lines on a thread, wait for an event, send stdin commands and signals.
//!
//! ```no_run
//! use std::time::Duration;
//! use krabka_examples::{MemberSpec, Signal};
//! // In an integration test of this crate: env!("CARGO_BIN_EXE_member").
//! let member_bin = "target/release/member";
//! let mut a = MemberSpec::new(member_bin, "127.0.0.1:19092", "billing", "a")
//!     .arg("--lease-ms", "3000")
//!     .spawn()?;
//! let elected = a.wait_named("elected", Duration::from_secs(30))?;
//! a.signal(Signal::Terminate)?;
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! The process is killed (SIGKILL) when its [`MemberProcess`] is dropped
//! while it still runs, so a failing test or an interrupted benchmark
//! leaves no orphan behind.

use std::fmt;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::signal::{self, Signal};

/// How to start one member process: its binary and command line.
#[derive(Debug, Clone)]
pub struct MemberSpec {
    bin: PathBuf,
    member: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    stderr: Option<PathBuf>,
    own_process_group: bool,
}

impl MemberSpec {
    /// `bin --bootstrap <bootstrap> --role <role> --member <member>`, with
    /// `RUST_LOG=warn,krabka_coordination=info` unless [`MemberSpec::env`]
    /// sets another.
    pub fn new(bin: impl Into<PathBuf>, bootstrap: &str, role: &str, member: &str) -> MemberSpec {
        MemberSpec {
            bin: bin.into(),
            member: member.to_owned(),
            args: ["--bootstrap", bootstrap, "--role", role, "--member", member]
                .map(String::from)
                .to_vec(),
            env: vec![("RUST_LOG".into(), "warn,krabka_coordination=info".into())],
            stderr: None,
            own_process_group: false,
        }
    }

    /// Adds `flag value`.
    pub fn arg(mut self, flag: &str, value: impl ToString) -> MemberSpec {
        self.args.push(flag.to_owned());
        self.args.push(value.to_string());
        self
    }

    /// Adds a flag without a value (`--rejoin`, `--exit-on-stdin-eof`).
    pub fn flag(mut self, flag: &str) -> MemberSpec {
        self.args.push(flag.to_owned());
        self
    }

    /// Adds `--kafka-setting key=value` for each setting.
    pub fn kafka_settings<'a>(
        mut self,
        settings: impl IntoIterator<Item = &'a (String, String)>,
    ) -> MemberSpec {
        for (k, v) in settings {
            self = self.arg("--kafka-setting", format!("{k}={v}"));
        }
        self
    }

    /// Sets an environment variable of the process.
    pub fn env(mut self, key: &str, value: &str) -> MemberSpec {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Appends the process's stderr to `path` (by default it goes nowhere).
    pub fn stderr_to(mut self, path: impl Into<PathBuf>) -> MemberSpec {
        self.stderr = Some(path.into());
        self
    }

    /// Starts the process in its own process group, so a ctrl-c in the
    /// terminal reaches the parent only (which then stops it in order).
    pub fn own_process_group(mut self) -> MemberSpec {
        self.own_process_group = true;
        self
    }

    /// Starts the process with piped stdin and stdout, and a thread that
    /// collects its event lines. The error names the binary.
    pub fn spawn(&self) -> std::io::Result<MemberProcess> {
        let named = |what: &str, e: std::io::Error| {
            std::io::Error::new(e.kind(), format!("{what} {}: {e}", self.bin.display()))
        };
        let stderr = match &self.stderr {
            Some(path) => Stdio::from(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| named("opening the stderr file of", e))?,
            ),
            None => Stdio::null(),
        };
        let mut cmd = Command::new(&self.bin);
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        if self.own_process_group {
            cmd.process_group(0);
        }
        let mut child = cmd.spawn().map_err(|e| named("starting", e))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let log: Arc<Log> = Arc::default();
        let reader = Arc::clone(&log);
        std::thread::spawn(move || reader.collect(stdout));
        Ok(MemberProcess {
            member: self.member.clone(),
            stdin: child.stdin.take(),
            child,
            log,
            stderr: self.stderr.clone(),
            status: None,
        })
    }
}

/// The lines a process printed, and whether its stdout closed.
#[derive(Default)]
struct Log {
    state: Mutex<LogState>,
    changed: Condvar,
}

#[derive(Default)]
struct LogState {
    events: Vec<Value>,
    /// When this process read each line (same index as `events`): the
    /// outside observer's clock, for timings taken the way a user meets them.
    arrivals: Vec<Instant>,
    closed: bool,
}

impl Log {
    fn lock(&self) -> std::sync::MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads `stdout` to its end: each JSON line is an event, any other line
    /// is kept as `{"raw": line}`.
    fn collect(&self, stdout: impl Read) {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let v = serde_json::from_str::<Value>(&line)
                .unwrap_or_else(|_| serde_json::json!({ "raw": line }));
            let at = Instant::now();
            let mut g = self.lock();
            g.events.push(v);
            g.arrivals.push(at);
            drop(g);
            self.changed.notify_all();
        }
        self.lock().closed = true;
        self.changed.notify_all();
    }
}

/// Why [`MemberProcess::wait_event`] found no event: the time ran out or the
/// process closed its stdout (it exited). The message lists what the process
/// printed and the end of its stderr.
#[derive(Debug, Clone)]
pub struct WaitError {
    /// True when the process closed its stdout before the event came.
    pub closed: bool,
    /// What happened, with the process's lines and stderr.
    pub message: String,
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for WaitError {}

/// A running (or ended) member process and the event lines it printed.
pub struct MemberProcess {
    member: String,
    child: Child,
    stdin: Option<ChildStdin>,
    log: Arc<Log>,
    stderr: Option<PathBuf>,
    status: Option<ExitStatus>,
}

impl fmt::Debug for MemberProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemberProcess")
            .field("member", &self.member)
            .field("pid", &self.child.id())
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl MemberProcess {
    /// The member id.
    pub fn member(&self) -> &str {
        &self.member
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Every line printed so far.
    pub fn events(&self) -> Vec<Value> {
        self.log.lock().events.clone()
    }

    /// The lines printed so far from index `from` on (a reader that keeps
    /// its place reads each line once).
    pub fn events_from(&self, from: usize) -> Vec<Value> {
        self.log.lock().events.iter().skip(from).cloned().collect()
    }

    /// When the line at `index` was read from the process's stdout (the
    /// observer's clock); `None` if there is no such line yet.
    pub fn arrived_at(&self, index: usize) -> Option<Instant> {
        self.log.lock().arrivals.get(index).copied()
    }

    /// How many lines were printed so far.
    pub fn event_count(&self) -> usize {
        self.log.lock().events.len()
    }

    /// Waits up to `within` for the first line from index `from` on that
    /// `pred` accepts; returns its index and the line. `what` names the
    /// awaited line in the error.
    pub fn wait_event(
        &self,
        from: usize,
        within: Duration,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> Result<(usize, Value), WaitError> {
        let deadline = Instant::now() + within;
        let mut g = self.log.lock();
        loop {
            if let Some((i, e)) = g
                .events
                .iter()
                .enumerate()
                .skip(from)
                .find(|(_, e)| pred(e))
            {
                return Ok((i, e.clone()));
            }
            let now = Instant::now();
            if g.closed || now >= deadline {
                let lines: Vec<String> = g.events.iter().map(Value::to_string).collect();
                let closed = g.closed;
                drop(g);
                return Err(WaitError {
                    closed,
                    message: format!(
                        "member {} printed no {what} within {within:?} ({}); its lines:\n{}\n{}",
                        self.member,
                        if closed {
                            "its stdout closed"
                        } else {
                            "timed out"
                        },
                        lines.join("\n"),
                        self.stderr_tail(30)
                    ),
                });
            }
            g = self
                .log
                .changed
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Waits up to `within` for the first line whose `event` is `name`.
    pub fn wait_named(&self, name: &str, within: Duration) -> Result<Value, WaitError> {
        self.wait_event(0, within, name, |e| e["event"] == name)
            .map(|(_, e)| e)
    }

    /// Writes a command line (`resign`, `status`, `quit`) to the process's
    /// stdin.
    pub fn send(&mut self, command: &str) -> std::io::Result<()> {
        let stdin = self.stdin.as_mut().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stdin was closed")
        })?;
        writeln!(stdin, "{command}")?;
        stdin.flush()
    }

    /// Closes the process's stdin (a member run with `--exit-on-stdin-eof`
    /// stops as on SIGTERM).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Sends `signal` to the process.
    pub fn signal(&self, signal: Signal) -> std::io::Result<()> {
        signal::send(self.child.id(), signal)
    }

    /// Kills the process with SIGKILL (no clean-up runs in it) and reaps it.
    pub fn kill(&mut self) -> std::io::Result<ExitStatus> {
        if let Some(s) = self.status {
            return Ok(s);
        }
        self.child.kill()?;
        let s = self.child.wait()?;
        self.status = Some(s);
        Ok(s)
    }

    /// The exit status if the process has ended.
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// Waits up to `within` for the process to exit; `None` if it still
    /// runs.
    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(s) = self.try_status() {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The last `lines` lines of the process's stderr file, with its path.
    pub fn stderr_tail(&self, lines: usize) -> String {
        match &self.stderr {
            Some(path) => tail(path, lines),
            None => "(its stderr was not kept)".to_owned(),
        }
    }
}

impl Drop for MemberProcess {
    fn drop(&mut self) {
        if self.try_status().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    let from = all.len().saturating_sub(lines);
    format!(
        "its stderr {} (last lines):\n{}",
        path.display(),
        all[from..].join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for a member: a shell that prints lines and reads stdin.
    fn shell(script: &str) -> MemberProcess {
        let mut spec = MemberSpec::new("sh", "-", "-", "fake");
        spec.args = vec!["-c".into(), script.into()];
        spec.spawn().expect("sh")
    }

    #[test]
    fn events_are_read_and_awaited_in_order() {
        let mut p = shell(
            r#"echo '{"event":"start"}'; echo 'not json'; read cmd; echo "{\"event\":\"got\",\"cmd\":\"$cmd\"}"; exit 3"#,
        );
        p.wait_named("start", Duration::from_secs(10))
            .expect("start");
        p.send("resign").expect("stdin");
        let (i, got) = p
            .wait_event(1, Duration::from_secs(10), "got", |e| e["event"] == "got")
            .expect("got");
        assert_eq!((i, got["cmd"].as_str()), (2, Some("resign")));
        assert_eq!(p.events()[1]["raw"], "not json");
        assert_eq!(
            p.wait_exit(Duration::from_secs(10)).and_then(|s| s.code()),
            Some(3)
        );
        let e = p
            .wait_named("elected", Duration::from_secs(10))
            .expect_err("the process ended");
        assert!(e.closed, "{e}");
        assert!(
            e.message.contains("printed no elected") && e.message.contains("resign"),
            "{e}"
        );
    }

    #[test]
    fn a_wait_times_out_and_signals_reach_the_process() {
        let mut p = shell("trap 'exit 7' TERM; while true; do sleep 0.05; done");
        let e = p
            .wait_named("elected", Duration::from_millis(100))
            .expect_err("nothing is printed");
        assert!(!e.closed && e.message.contains("timed out"), "{e}");
        p.signal(Signal::Terminate).expect("SIGTERM");
        assert_eq!(
            p.wait_exit(Duration::from_secs(10)).and_then(|s| s.code()),
            Some(7)
        );
    }

    #[test]
    fn a_missing_binary_is_named() {
        let e = MemberSpec::new("/nonexistent/member", "b", "r", "m")
            .spawn()
            .expect_err("no such binary");
        assert!(e.to_string().contains("/nonexistent/member"), "{e}");
    }
}
