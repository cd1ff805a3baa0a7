//! One role on the real Kafka, its member processes (the `member` binary,
//! through the shared harness) and a third party's view of it.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use krabka_coordination::client::Client;
use krabka_coordination::leadership::RoleStateReport;
use krabka_coordination::transport::kafka::{KafkaConfig, TopicSpec};
use krabka_coordination::{FencingToken, Lease};
use krabka_examples::{kafka, now_ms, MemberProcess, MemberSpec};
use serde_json::Value;

/// The lease of the members.
pub const LEASE_MS: i64 = 3_000;
/// Their renew interval.
pub const RENEW_MS: i64 = 1_000;
/// Their challenge stagger.
pub const STAGGER_MS: i64 = 1_000;
/// The partition count of the shared state topic.
pub const STATE_PARTITIONS: i32 = 16;
/// How long a member may take to start and reach its first step.
pub const START: Duration = Duration::from_secs(30);

/// One test at a time: the bounds asserted here are about Kafka and the
/// members, not about how many member processes share two cores. The guard
/// prints how long the test held the cluster.
pub fn serial() -> Serial {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    Serial {
        _guard: guard,
        started: Instant::now(),
    }
}

/// Held while a test uses the cluster.
pub struct Serial {
    _guard: MutexGuard<'static, ()>,
    started: Instant,
}

impl Drop for Serial {
    fn drop(&mut self) {
        let name = std::thread::current().name().unwrap_or("a test").to_owned();
        println!("{name}: {:.1} s", self.started.elapsed().as_secs_f64());
    }
}

/// The token a line names with `producer_id` and `epoch`.
pub fn token_of(e: &Value) -> FencingToken {
    FencingToken::new(
        e["producer_id"]
            .as_i64()
            .unwrap_or_else(|| panic!("no producer_id in {e}")),
        e["epoch"]
            .as_i64()
            .and_then(|v| i16::try_from(v).ok())
            .unwrap_or_else(|| panic!("no epoch in {e}")),
    )
}

/// A member process, with the test's panicking waits.
pub struct Member {
    /// The member id.
    pub id: String,
    /// The process.
    pub process: MemberProcess,
}

impl Member {
    /// Every line printed so far.
    pub fn events(&self) -> Vec<Value> {
        self.process.events()
    }

    /// Waits for the first line from index `from` on that `pred` accepts;
    /// fails the test with the member's lines and stderr otherwise.
    pub fn wait_event_from(
        &self,
        from: usize,
        within: Duration,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> (usize, Value) {
        self.process
            .wait_event(from, within, what, pred)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Waits for the first line named `name`.
    pub fn wait_event(&self, name: &str, within: Duration) -> Value {
        self.wait_event_from(0, within, name, |e| e["event"] == name)
            .1
    }

    /// Waits for the `elected` line; returns its token and the line.
    pub fn elected(&self, within: Duration) -> (FencingToken, Value) {
        let e = self.wait_event("elected", within);
        (token_of(&e), e)
    }

    /// Writes a command to the member's stdin.
    pub fn send(&mut self, command: &str) {
        self.process
            .send(command)
            .unwrap_or_else(|e| panic!("writing {command:?} to {}'s stdin: {e}", self.id));
    }

    /// Sends a signal to the member.
    pub fn signal(&self, signal: krabka_examples::Signal) {
        self.process
            .signal(signal)
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// SIGKILL and reap.
    pub fn sigkill(&mut self) {
        self.process
            .kill()
            .unwrap_or_else(|e| panic!("killing {}: {e}", self.id));
    }

    /// Waits for the member to exit.
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        match self.process.wait_exit(within) {
            Some(s) => s,
            None => panic!(
                "member {} did not exit within {within:?}; its lines: {:?}\n{}",
                self.id,
                self.events(),
                self.process.stderr_tail(30)
            ),
        }
    }
}

/// A role, its data topic, and a third party that reads the role's state.
pub struct Scene {
    /// The cluster.
    pub bootstrap: String,
    /// A role no other test uses.
    pub role: String,
    /// The topic the leaders write guarded records to, if any.
    pub data_topic: Option<String>,
    rt: tokio::runtime::Runtime,
    observer: Client,
    /// Where the members' stderr goes.
    pub logs: PathBuf,
}

impl Scene {
    /// A new role (and a data topic with `with_data`) on the cluster of
    /// `KRABKA_BOOTSTRAP` (else the local one).
    pub fn new(name: &str, with_data: bool) -> Scene {
        let bootstrap = kafka::bootstrap_from_env().unwrap_or_else(|e| {
            panic!("a real Kafka is needed for this test and is not available: {e}")
        });
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let config = KafkaConfig::new(bootstrap.clone())
            .with_operation_timeout(Duration::from_secs(20))
            .set("client.id", "krabka-e2e-observer");
        let observer = Client::new(config)
            .and_then(|c| c.with_partitions(STATE_PARTITIONS))
            .expect("the observer's client");
        let spec = TopicSpec::development().with_partitions(STATE_PARTITIONS);
        rt.block_on(observer.ensure_state_topic(spec))
            .unwrap_or_else(|e| panic!("ensuring the state topic on {bootstrap}: {e}"));
        let role = kafka::unique(&format!("e2e-{name}"));
        let data_topic = with_data.then(|| {
            let t = kafka::unique(&format!("e2e-data-{name}"));
            rt.block_on(kafka::create_topic(&bootstrap, &t, 1, 1))
                .unwrap_or_else(|e| panic!("{e}"));
            t
        });
        let logs = std::env::temp_dir().join("krabka-e2e").join(&role);
        std::fs::create_dir_all(&logs).expect("log dir");
        Scene {
            bootstrap,
            role,
            data_topic,
            rt,
            observer,
            logs,
        }
    }

    /// Starts member `id` (the `member` binary cargo built for this test).
    pub fn spawn(&self, id: &str) -> Member {
        let mut spec = MemberSpec::new(
            env!("CARGO_BIN_EXE_member"),
            &self.bootstrap,
            &self.role,
            id,
        )
        .arg("--partitions", STATE_PARTITIONS)
        .arg("--lease-ms", LEASE_MS)
        .arg("--renew-ms", RENEW_MS)
        .arg("--stagger-ms", STAGGER_MS)
        .arg("--write-every-ms", 150)
        .flag("--exit-on-stdin-eof")
        .stderr_to(self.logs.join(format!("{id}-{}.stderr", now_ms())));
        if let Some(t) = &self.data_topic {
            spec = spec.arg("--data-topic", t);
        }
        let process = spec.spawn().unwrap_or_else(|e| panic!("{e}"));
        Member {
            id: id.to_owned(),
            process,
        }
    }

    /// The role's roster and lease, read from its partition.
    pub fn state(&self) -> RoleStateReport {
        self.rt
            .block_on(self.observer.describe_role_state(&self.role))
            .expect("describe_role_state")
    }

    /// The roster's member ids in rank order.
    pub fn roster(&self) -> Vec<String> {
        self.state().roster.into_iter().map(|e| e.member).collect()
    }

    /// Reads the roster until it is `expected` (in rank order); fails the
    /// test if it is not within `within`.
    pub fn wait_roster(&self, expected: &[&str], within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let roster = self.roster();
            if roster == expected {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the roster is {roster:?}, not {expected:?}, after {within:?} (member logs in {})",
                self.logs.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The role's token at its transaction coordinator.
    pub fn described(&self) -> FencingToken {
        self.rt
            .block_on(self.observer.describe_leadership(&self.role))
            .expect("describe_leadership")
            .token
    }

    /// Reads the role's partition until its lease is `member`'s with a token
    /// newer than `after`; returns the lease and when it was first seen.
    pub fn wait_lease(&self, member: &str, after: FencingToken, within: Duration) -> (Lease, i64) {
        let deadline = Instant::now() + within;
        loop {
            if let Some(l) = self.state().lease {
                if l.member == member && l.token > after {
                    return (l, now_ms());
                }
            }
            assert!(
                Instant::now() < deadline,
                "no committed lease of {member} newer than {after} within {within:?}; state: {:?} (member logs in {})",
                self.state(),
                self.logs.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The third party's view must be the leader's own token, and the lease
    /// in the partition must carry it too.
    pub fn assert_describe_agrees(&self, leader: &Member, token: FencingToken) {
        let described = self.described();
        let lease = self.state().lease.map(|l| (l.member, l.token));
        assert_eq!(
            described, token,
            "describe_leadership disagrees with {}'s token",
            leader.id
        );
        assert_eq!(
            lease,
            Some((leader.id.clone(), token)),
            "the partition's lease disagrees with {}'s token",
            leader.id
        );
    }

    /// The first member takes the role; the others register behind it in
    /// order.
    pub fn start_members(&self, ids: &[&str]) -> (Vec<Member>, FencingToken) {
        let mut members = Vec::new();
        let first = self.spawn(ids[0]);
        let (token, _) = first.elected(START);
        members.push(first);
        for id in &ids[1..] {
            let m = self.spawn(id);
            m.wait_event("waiting", START);
            members.push(m);
        }
        assert_eq!(self.roster(), ids, "the roster is in registration order");
        (members, token)
    }
}
