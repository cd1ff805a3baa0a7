//! End to end: leadership on a REAL local Kafka with member PROCESSES (the
//! `member` example), short leases (3 s lease, 1 s renew, 1 s stagger).
//!
//! * `sigkill_leader_then_the_next_member_holds_a_committed_lease_within_lease_plus_stagger`
//! * `sigstop_leader_past_its_lease_is_fenced_after_sigcont_and_exits`
//! * `resign_hands_over_to_the_next_member_within_one_second`
//! * `restarted_member_rejoins_at_the_tail`
//! * `third_party_describe_agrees_with_the_leader_at_each_step` and
//!   `committed_guarded_writes_carry_their_writers_token_in_log_order`: one
//!   scenario (kill, restart, stop and continue, resign, quit) run once and
//!   checked by both.
//!
//! Each test measures from the event it caused (the kill, the resign command)
//! to the next leader's lease as read back from the role's partition, and a
//! third party (its own transport) checks `describe_leadership` against the
//! token the leader reports. The data-topic check reads partition 0 with
//! read_committed (rdkafka) and, for every committed record, the producer id
//! and epoch of its batch straight from a Fetch response (kafka-protocol):
//! the token in the value must be the batch's, and tokens never decrease in
//! log order.
//!
//! The tests share one cluster (`KRABKA_BOOTSTRAP`, else `ci/kafka.sh start
//! 1`) and run one at a time (timing bounds are asserted); a Kafka that
//! cannot be reached fails them with a message saying so.
#![cfg(feature = "kafka")]

mod support;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{
    encode_request_header_into_buffer, Decodable, Encodable, HeaderVersion, StrBytes,
};
use kafka_protocol::records::RecordBatchDecoder;
use krabka_coordination::leadership::{describe_leadership, describe_role_state, RoleStateReport};
use krabka_coordination::transport::kafka::{KafkaConfig, KafkaTransport};
use krabka_coordination::FencingToken;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde_json::Value;

const LEASE_MS: i64 = 3_000;
const RENEW_MS: i64 = 1_000;
const STAGGER_MS: i64 = 1_000;
/// The member's exit code when fenced.
const EXIT_FENCED: i32 = 3;

// Linux signal numbers (x86-64 and aarch64 agree on these).
const SIGCONT: i32 = 18;
const SIGSTOP: i32 = 19;
const SIGTERM: i32 = 15;

extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// One test at a time: the bounds asserted here are about Kafka and the
/// members, not about how many member processes share two cores. The guard
/// prints how long the test held the cluster.
fn serial() -> Serial {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    Serial {
        _guard: guard,
        started: Instant::now(),
    }
}

struct Serial {
    _guard: MutexGuard<'static, ()>,
    started: Instant,
}

impl Drop for Serial {
    fn drop(&mut self) {
        let name = std::thread::current().name().unwrap_or("a test").to_owned();
        println!("{name}: {:.1} s", self.started.elapsed().as_secs_f64());
    }
}

// ------------------------------------------------------------ the binary

/// Builds the `member` example (same profile and target dir as this test)
/// and returns its path. Runs once per test binary.
fn member_binary() -> PathBuf {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(build_member)
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn build_member() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    // <target>/<profile>/deps/e2e_failover-<hash>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| format!("unexpected test binary path {}", exe.display()))?;
    let target_dir = profile_dir
        .parent()
        .ok_or_else(|| format!("unexpected test binary path {}", exe.display()))?;
    let profile = profile_dir
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or("debug")
        .to_owned();
    let bin = profile_dir.join("examples").join("member");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "build",
            "--quiet",
            "-p",
            "krabka-coordination",
            "--example",
            "member",
            "--target-dir",
        ])
        .arg(target_dir);
    match profile.as_str() {
        "debug" => {}
        "release" => {
            cmd.arg("--release");
        }
        other => {
            cmd.args(["--profile", other]);
        }
    }
    let status = cmd
        .status()
        .map_err(|e| format!("running cargo to build the member example: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build --example member failed: {status}"));
    }
    if !bin.exists() {
        return Err(format!(
            "the member example is not at {} after the build",
            bin.display()
        ));
    }
    Ok(bin)
}

// ------------------------------------------------------------ a member process

#[derive(Default)]
struct EventLog {
    events: Vec<Value>,
    closed: bool,
}

/// A running `member` process and the events it printed.
struct Member {
    id: String,
    child: Child,
    stdin: Option<ChildStdin>,
    log: Arc<(Mutex<EventLog>, Condvar)>,
    stderr: PathBuf,
    status: Option<ExitStatus>,
}

struct Scene {
    bootstrap: String,
    role: String,
    data_topic: Option<String>,
    rt: tokio::runtime::Runtime,
    observer: KafkaTransport,
    logs: PathBuf,
}

/// Client settings every client of the tests and members gets.
fn extra_settings() -> Vec<(&'static str, &'static str)> {
    Vec::new()
}

fn config(bootstrap: &str) -> KafkaConfig {
    let mut c = support::config(bootstrap);
    for (k, v) in extra_settings() {
        c = c.set(k, v);
    }
    c
}

impl Scene {
    fn new(name: &str, with_data: bool) -> Scene {
        let bootstrap = support::bootstrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let cfg = config(&bootstrap);
        rt.block_on(support::ensure_shared_topic(&cfg, 1, 1));
        let role = support::unique(&format!("e2e-{name}"));
        let data_topic = with_data.then(|| {
            let t = support::unique(&format!("e2e-data-{name}"));
            rt.block_on(create_topic(&bootstrap, &t));
            t
        });
        let observer = rt
            .block_on(async { KafkaTransport::new(cfg, Some("e2e-observer")) })
            .expect("observer transport");
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

    fn spawn(&self, id: &str) -> Member {
        let stderr = self.logs.join(format!("{id}-{}.stderr", now_ms()));
        let err_file = std::fs::File::create(&stderr).expect("stderr file");
        let mut cmd = Command::new(member_binary());
        cmd.args([
            "--bootstrap",
            &self.bootstrap,
            "--role",
            &self.role,
            "--member",
            id,
        ])
        .args(["--partitions", &support::STATE_PARTITIONS.to_string()])
        .args([
            "--lease-ms",
            &LEASE_MS.to_string(),
            "--renew-ms",
            &RENEW_MS.to_string(),
        ])
        .args([
            "--stagger-ms",
            &STAGGER_MS.to_string(),
            "--write-every-ms",
            "150",
            "--exit-on-stdin-eof",
        ])
        .env("RUST_LOG", "warn,krabka_coordination=info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(err_file);
        for (k, v) in extra_settings() {
            cmd.args(["--kafka-setting", &format!("{k}={v}")]);
        }
        if let Some(t) = &self.data_topic {
            cmd.args(["--data-topic", t]);
        }
        let mut child = cmd.spawn().expect("spawning the member example");
        let stdout = child.stdout.take().expect("piped stdout");
        let stdin = child.stdin.take();
        let log: Arc<(Mutex<EventLog>, Condvar)> = Arc::default();
        let log2 = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v = serde_json::from_str::<Value>(&line)
                    .unwrap_or_else(|_| serde_json::json!({ "raw": line }));
                let (m, cv) = &*log2;
                m.lock().unwrap().events.push(v);
                cv.notify_all();
            }
            let (m, cv) = &*log2;
            m.lock().unwrap().closed = true;
            cv.notify_all();
        });
        Member {
            id: id.to_owned(),
            child,
            stdin,
            log,
            stderr,
            status: None,
        }
    }

    fn state(&self) -> RoleStateReport {
        self.rt
            .block_on(describe_role_state(
                &self.observer,
                &self.role,
                support::STATE_PARTITIONS,
            ))
            .expect("describe_role_state")
    }

    fn roster(&self) -> Vec<String> {
        self.state().roster.into_iter().map(|e| e.member).collect()
    }

    fn described(&self) -> FencingToken {
        self.rt
            .block_on(describe_leadership(&self.observer, &self.role))
            .expect("describe_leadership")
            .token
    }

    /// Reads the role's partition until its lease is `member`'s with a token
    /// newer than `after`; returns the lease and when it was first seen.
    fn wait_lease(
        &self,
        member: &str,
        after: FencingToken,
        within: Duration,
    ) -> (krabka_coordination::Lease, i64) {
        let deadline = Instant::now() + within;
        loop {
            let s = self.state();
            if let Some(l) = s.lease {
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
    fn assert_describe_agrees(
        &self,
        leader: &Member,
        token: FencingToken,
    ) -> (FencingToken, FencingToken) {
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
        (described, token)
    }
}

impl Member {
    fn events(&self) -> Vec<Value> {
        self.log.0.lock().unwrap().events.clone()
    }

    /// Waits for the first event (from index `from`) that `pred` accepts.
    fn wait_event_from(
        &self,
        from: usize,
        within: Duration,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> (usize, Value) {
        let deadline = Instant::now() + within;
        let (m, cv) = &*self.log;
        let mut g = m.lock().unwrap();
        loop {
            if let Some((i, e)) = g
                .events
                .iter()
                .enumerate()
                .skip(from)
                .find(|(_, e)| pred(e))
            {
                return (i, e.clone());
            }
            let now = Instant::now();
            if g.closed || now >= deadline {
                let events: Vec<String> = g.events.iter().map(Value::to_string).collect();
                drop(g);
                panic!(
                    "member {} printed no {what} within {within:?} ({}); its events:\n{}\nits stderr: {}",
                    self.id,
                    if now >= deadline { "timed out" } else { "stdout closed" },
                    events.join("\n"),
                    tail(&self.stderr)
                );
            }
            g = cv.wait_timeout(g, deadline - now).unwrap().0;
        }
    }

    fn wait_event(&self, name: &str, within: Duration) -> Value {
        self.wait_event_from(0, within, name, |e| e["event"] == name)
            .1
    }

    fn elected(&self, within: Duration) -> (FencingToken, Value) {
        let e = self.wait_event("elected", within);
        (token_of(&e), e)
    }

    fn send(&mut self, command: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{command}").expect("writing to the member's stdin");
        stdin.flush().expect("flush");
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        let r = unsafe { kill(self.child.id() as i32, sig) };
        assert_eq!(r, 0, "kill({}, {sig}) failed", self.child.id());
    }

    fn sigkill(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.status = Some(self.child.wait().expect("reap"));
    }

    fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        if let Some(s) = self.status {
            return s;
        }
        let deadline = Instant::now() + within;
        loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                self.status = Some(s);
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "member {} did not exit within {within:?}; events: {:?}; stderr: {}",
                self.id,
                self.events(),
                tail(&self.stderr)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        if self.status.is_none() && matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn tail(path: &Path) -> String {
    let mut s = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut s);
    }
    let lines: Vec<&str> = s.lines().collect();
    let from = lines.len().saturating_sub(30);
    format!(
        "{} (last lines):\n{}",
        path.display(),
        lines[from..].join("\n")
    )
}

fn token_of(e: &Value) -> FencingToken {
    FencingToken::new(
        e["producer_id"]
            .as_i64()
            .unwrap_or_else(|| panic!("no producer_id in {e}")),
        e["epoch"]
            .as_i64()
            .unwrap_or_else(|| panic!("no epoch in {e}")) as i16,
    )
}

const START: Duration = Duration::from_secs(30);

/// The first member takes the role; the others register behind it in order.
fn start_members(scene: &Scene, ids: &[&str]) -> (Vec<Member>, FencingToken) {
    let mut members = Vec::new();
    let first = scene.spawn(ids[0]);
    let (token, _) = first.elected(START);
    members.push(first);
    for id in &ids[1..] {
        let m = scene.spawn(id);
        m.wait_event("waiting", START);
        members.push(m);
    }
    assert_eq!(scene.roster(), ids, "the roster is in registration order");
    (members, token)
}

// ------------------------------------------------------------ the data topic

async fn create_topic(bootstrap: &str, topic: &str) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client");
    let r = admin
        .create_topics(
            [&NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .expect("create_topics");
    for t in r {
        t.unwrap_or_else(|(name, e)| panic!("creating {name}: {e}"));
    }
}

/// Every committed record of partition 0 of `topic` (read_committed, up to the
/// last stable offset): offset and value.
fn committed_records(bootstrap: &str, topic: &str) -> Vec<(i64, Value)> {
    let mut cc = ClientConfig::new();
    cc.set("bootstrap.servers", bootstrap)
        .set("group.id", "krabka-e2e-check")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest");
    let consumer: BaseConsumer = cc.create().expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .expect("tpl");
    consumer.assign(&tpl).expect("assign");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut out = Vec::new();
    loop {
        assert!(
            Instant::now() < deadline,
            "reading {topic} to its last stable offset took over 30 s"
        );
        match consumer.poll(Duration::from_millis(200)) {
            None => continue,
            Some(Err(KafkaError::PartitionEOF(_))) => break,
            Some(Err(e)) => panic!("reading {topic}: {e}"),
            Some(Ok(m)) => {
                let v: Value = serde_json::from_slice(m.payload().unwrap_or_default())
                    .unwrap_or_else(|e| {
                        panic!("record {} of {topic} is not JSON: {e}", m.offset())
                    });
                out.push((m.offset(), v));
            }
        }
    }
    out
}

/// The (producer id, epoch) of the batch of every offset of partition 0 of
/// `topic`, control batches included, straight from Fetch responses.
fn batch_producers(bootstrap: &str, topic: &str) -> BTreeMap<i64, (i64, i16, bool)> {
    // The partition leader's address (the 1-node cluster: the bootstrap broker).
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("metadata client");
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("metadata");
    let leader = md.topics()[0]
        .partitions()
        .iter()
        .find(|p| p.id() == 0)
        .expect("partition 0")
        .leader();
    let broker = md
        .brokers()
        .iter()
        .find(|b| b.id() == leader)
        .expect("leader broker");
    let addr = format!("{}:{}", broker.host(), broker.port());
    let mut stream =
        std::net::TcpStream::connect(&addr).unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut out = BTreeMap::new();
    let mut offset = 0i64;
    let version = 12i16;
    for correlation_id in 1.. {
        let mut req = FetchRequest::default();
        req.replica_id = BrokerId(-1);
        req.max_wait_ms = 0;
        req.min_bytes = 0;
        req.max_bytes = 64 << 20;
        req.isolation_level = 0;
        req.session_epoch = -1;
        let mut p = FetchPartition::default();
        p.partition = 0;
        p.fetch_offset = offset;
        p.partition_max_bytes = 32 << 20;
        p.current_leader_epoch = -1;
        p.last_fetched_epoch = -1;
        p.log_start_offset = -1;
        let mut t = FetchTopic::default();
        t.topic = TopicName(StrBytes::from_string(topic.to_owned()));
        t.partitions = vec![p];
        req.topics = vec![t];
        let mut header = RequestHeader::default();
        header.request_api_key = ApiKey::Fetch as i16;
        header.request_api_version = version;
        header.correlation_id = correlation_id;
        header.client_id = Some(StrBytes::from_static_str("krabka-e2e"));
        let mut frame = BytesMut::new();
        frame.put_i32(0);
        encode_request_header_into_buffer(&mut frame, &header).expect("header");
        req.encode(&mut frame, version).expect("fetch request");
        let size = (frame.len() - 4) as i32;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        stream.write_all(&frame).expect("send fetch");
        let mut len = [0u8; 4];
        stream.read_exact(&mut len).expect("response size");
        let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
        stream.read_exact(&mut body).expect("response body");
        let mut body = Bytes::from(body);
        let h = ResponseHeader::decode(&mut body, FetchResponse::header_version(version))
            .expect("response header");
        assert_eq!(h.correlation_id, correlation_id);
        let resp = FetchResponse::decode(&mut body, version).expect("fetch response");
        assert_eq!(resp.error_code, 0, "fetch error");
        let part = &resp.responses[0].partitions[0];
        assert_eq!(
            part.error_code, 0,
            "fetch of {topic}/0 failed with code {}",
            part.error_code
        );
        let high = part.high_watermark;
        let mut records = part.records.clone().unwrap_or_default();
        let before = offset;
        while records.has_remaining() {
            // A fetch may end in a partial batch; the next fetch starts at it.
            let Ok(set) = RecordBatchDecoder::decode(&mut records) else {
                break;
            };
            for r in set.records {
                out.insert(r.offset, (r.producer_id, r.producer_epoch, r.control));
                offset = offset.max(r.offset + 1);
            }
        }
        if offset >= high {
            break;
        }
        assert!(
            offset > before,
            "the fetch of {topic}/0 at offset {before} made no progress (high watermark {high})"
        );
    }
    out
}

/// The data log check: every committed record carries the token of the
/// batch that wrote it, tokens never decrease in log order, each token is one
/// that its member was elected with, and sequence numbers grow within a term.
fn check_data_log(
    bootstrap: &str,
    topic: &str,
    elected: &HashMap<FencingToken, String>,
) -> DataLog {
    let committed = committed_records(bootstrap, topic);
    let batches = batch_producers(bootstrap, topic);
    let mut last: Option<(FencingToken, u64)> = None;
    let mut per_token: BTreeMap<FencingToken, usize> = BTreeMap::new();
    let mut problems = Vec::new();
    for (offset, v) in &committed {
        let claimed = token_of(v);
        let member = v["member"].as_str().unwrap_or_default();
        let seq = v["seq"].as_u64().unwrap_or(0);
        match batches.get(offset) {
            Some(&(pid, epoch, control)) => {
                if control || FencingToken::new(pid, epoch) != claimed {
                    problems.push(format!(
                        "offset {offset}: value claims {claimed} but its batch was written by {pid}/{epoch} (control {control})"
                    ));
                }
            }
            None => problems.push(format!("offset {offset}: no batch found in the raw fetch")),
        }
        match elected.get(&claimed) {
            Some(m) if m == member => {}
            other => problems.push(format!(
                "offset {offset}: token {claimed} of {member} was elected for {other:?}"
            )),
        }
        if let Some((t, s)) = last {
            if claimed < t {
                problems.push(format!(
                    "offset {offset}: token {claimed} after {t}: tokens decreased in log order"
                ));
            }
            if claimed == t && seq <= s {
                problems.push(format!(
                    "offset {offset}: seq {seq} after {s} within token {t}"
                ));
            }
        }
        last = Some((claimed, seq));
        *per_token.entry(claimed).or_default() += 1;
    }
    let aborted_or_control = batches.len() - committed.len();
    DataLog {
        committed: committed.len(),
        per_token,
        aborted_or_control,
        problems,
    }
}

#[derive(Debug)]
struct DataLog {
    committed: usize,
    per_token: BTreeMap<FencingToken, usize>,
    /// Offsets in the log that read_committed does not return: transaction
    /// markers and aborted (fenced) writes.
    aborted_or_control: usize,
    problems: Vec<String>,
}

// ------------------------------------------------------------ the tests

#[test]
fn sigkill_leader_then_the_next_member_holds_a_committed_lease_within_lease_plus_stagger() {
    let _serial = serial();
    let scene = Scene::new("kill", false);
    let (mut m, a_token) = start_members(&scene, &["a", "b", "c"]);
    scene.assert_describe_agrees(&m[0], a_token);

    let killed_at = now_ms();
    m[0].sigkill();
    let (lease, seen_at) = scene.wait_lease(
        "b",
        a_token,
        Duration::from_millis((LEASE_MS + STAGGER_MS + 5_000) as u64),
    );
    let failover = seen_at - killed_at;
    let (b_token, b_elected) = m[1].elected(Duration::from_secs(1));
    println!(
        "kill -> b's committed lease read back: {failover} ms (b elected at +{} ms; bound {} ms)",
        b_elected["t_ms"].as_i64().unwrap() - killed_at,
        LEASE_MS + STAGGER_MS + 2_000
    );
    assert!(
        failover <= LEASE_MS + STAGGER_MS + 2_000,
        "the new leader's lease was committed {failover} ms after the kill (bound: lease + stagger + 2 s)"
    );
    assert_eq!(lease.token, b_token);
    assert!(
        b_token > a_token,
        "the new token {b_token} must be newer than the dead leader's {a_token}"
    );
    scene.assert_describe_agrees(&m[1], b_token);
    assert!(
        m[2].events().iter().all(|e| e["event"] != "elected"),
        "c must not be elected while b leads"
    );
}

#[test]
fn sigstop_leader_past_its_lease_is_fenced_after_sigcont_and_exits() {
    let _serial = serial();
    let scene = Scene::new("stop", true);
    let (mut m, a_token) = start_members(&scene, &["a", "b"]);
    m[0].wait_event_from(0, START, "an ok guarded write", |e| {
        e["event"] == "guarded_write" && e["result"] == "ok"
    });
    scene.assert_describe_agrees(&m[0], a_token);

    let stopped_at = now_ms();
    m[0].signal(SIGSTOP);
    let (_, seen_at) = scene.wait_lease(
        "b",
        a_token,
        Duration::from_millis((LEASE_MS + STAGGER_MS + 5_000) as u64),
    );
    let (b_token, _) = m[1].elected(Duration::from_secs(1));
    println!("stop -> b's committed lease: {} ms", seen_at - stopped_at);
    scene.assert_describe_agrees(&m[1], b_token);
    // Let b write under its term before the old leader wakes up.
    m[1].wait_event_from(0, Duration::from_secs(5), "b's ok guarded write", |e| {
        e["event"] == "guarded_write" && e["result"] == "ok"
    });

    let before = m[0].events().len();
    let continued_at = Instant::now();
    m[0].signal(SIGCONT);
    let (_, fenced) = m[0].wait_event_from(before, Duration::from_secs(10), "fenced", |e| {
        e["event"] == "fenced"
    });
    let status = m[0].wait_exit(Duration::from_secs(10));
    println!(
        "cont -> a fenced and exited in {:?}: {fenced}",
        continued_at.elapsed()
    );
    assert_eq!(
        status.code(),
        Some(EXIT_FENCED),
        "the deposed leader must exit with the fenced code: {status}"
    );
    let after_cont = &m[0].events()[before..];
    assert!(
        after_cont.iter().all(|e| !(e["event"] == "renewed")),
        "the deposed leader renewed after SIGCONT: {after_cont:?}"
    );
    scene.assert_describe_agrees(&m[1], b_token);
    assert!(
        m[0].events().iter().any(|e| e["event"] == "deregistered"),
        "the fenced member deregisters before it exits"
    );
    assert_eq!(scene.roster(), ["b"], "the fenced member left the roster");

    let elected: HashMap<FencingToken, String> =
        [(a_token, "a".to_owned()), (b_token, "b".to_owned())].into();
    m[1].send("quit");
    m[1].wait_exit(Duration::from_secs(10));
    let log = check_data_log(
        &scene.bootstrap,
        scene.data_topic.as_deref().unwrap(),
        &elected,
    );
    println!("data log: {log:?}");
    assert!(
        log.problems.is_empty(),
        "data log problems: {:#?}",
        log.problems
    );
    assert!(
        log.per_token.get(&a_token).copied().unwrap_or(0) > 0
            && log.per_token.get(&b_token).copied().unwrap_or(0) > 0
    );
}

#[test]
fn resign_hands_over_to_the_next_member_within_one_second() {
    let _serial = serial();
    let scene = Scene::new("resign", false);
    let (mut m, a_token) = start_members(&scene, &["a", "b", "c"]);
    scene.assert_describe_agrees(&m[0], a_token);

    let asked_at = now_ms();
    m[0].send("resign");
    let (lease, seen_at) = scene.wait_lease("b", a_token, Duration::from_secs(5));
    let (b_token, b_elected) = m[1].elected(Duration::from_secs(1));
    let resigned = m[0].wait_event("resigned", Duration::from_secs(5));
    let handover = b_elected["t_ms"].as_i64().unwrap() - asked_at;
    println!(
        "resign -> b elected (its lease committed): {handover} ms; read back by a third party at +{} ms; a's resign took {} ms",
        seen_at - asked_at,
        resigned["took_ms"]
    );
    let challenged = m[1].wait_event("challenging", Duration::from_secs(1));
    let standby_mint_and_lease =
        b_elected["t_ms"].as_i64().unwrap() - challenged["t_ms"].as_i64().unwrap();
    assert!(
        handover < 1_000,
        "hand-over took {handover} ms (bound 1 s): a's resign (mint + tombstone + deregister) took {} ms, \
         b's challenge (mint + first lease) {standby_mint_and_lease} ms (where a hand-over's time goes: \
         docs/benchmarks-leadership.md)",
        resigned["took_ms"]
    );
    assert!(
        seen_at - asked_at < 1_000 + 200,
        "the third party read b's lease {} ms after the resign",
        seen_at - asked_at
    );
    assert_eq!(lease.token, b_token);
    assert!(b_token > a_token);
    assert_eq!(
        m[0].wait_exit(Duration::from_secs(10)).code(),
        Some(0),
        "a resigned cleanly"
    );
    scene.assert_describe_agrees(&m[1], b_token);
    assert_eq!(
        scene.roster(),
        ["b", "c"],
        "a deregistered when it resigned"
    );
}

#[test]
fn restarted_member_rejoins_at_the_tail() {
    let _serial = serial();
    let scene = Scene::new("rejoin", false);
    let (mut m, a_token) = start_members(&scene, &["a", "b", "c"]);
    m[0].sigkill();
    let (_, _) = scene.wait_lease(
        "b",
        a_token,
        Duration::from_millis((LEASE_MS + STAGGER_MS + 5_000) as u64),
    );
    let (b_token, _) = m[1].elected(Duration::from_secs(1));
    assert_eq!(
        scene.roster(),
        ["a", "b", "c"],
        "a's registration outlives its process"
    );

    let a2 = scene.spawn("a");
    let reg = a2.wait_event("registered", START);
    a2.wait_event("waiting", Duration::from_secs(10));
    let state = scene.state();
    let ranks: Vec<(String, i64)> = state
        .roster
        .iter()
        .map(|e| (e.member.clone(), e.offset))
        .collect();
    println!("after the restart: {ranks:?}");
    assert_eq!(
        scene.roster(),
        ["b", "c", "a"],
        "the recovered member goes to the tail"
    );
    assert_eq!(
        state.roster[2].offset,
        reg["offset"].as_i64().unwrap(),
        "its rank is its new registration's offset"
    );
    // No failback: the restarted member does not take the role back.
    std::thread::sleep(Duration::from_millis((RENEW_MS * 2) as u64));
    assert!(
        a2.events().iter().all(|e| e["event"] != "elected"),
        "the recovered member must not take the role back"
    );
    scene.assert_describe_agrees(&m[1], b_token);
}

// ------------------------------------------------------------ the scenario

/// What the full scenario observed.
#[derive(Debug)]
struct Scenario {
    /// (step, the leader's token as it printed it, describe_leadership's
    /// token, the partition's lease token) at each step.
    checks: Vec<(String, FencingToken, FencingToken, Option<FencingToken>)>,
    /// The last resigned token and what describe said afterwards.
    after_resign: (FencingToken, FencingToken),
    data: DataLog,
    tokens: Vec<FencingToken>,
}

fn scenario() -> &'static Scenario {
    static S: OnceLock<Scenario> = OnceLock::new();
    S.get_or_init(run_scenario)
}

/// a leads and writes; SIGKILL a -> b; a restarts at the tail; SIGSTOP b ->
/// c; SIGCONT b -> b fenced, exits 3; c resigns -> a; a quits (resigns).
fn run_scenario() -> Scenario {
    let _serial = serial();
    let scene = Scene::new("scenario", true);
    let mut checks = Vec::new();
    let mut elected = HashMap::new();
    let mut check = |scene: &Scene, step: &str, leader: &Member, token: FencingToken| {
        let described = scene.described();
        let lease = scene
            .state()
            .lease
            .filter(|l| l.member == leader.id)
            .map(|l| l.token);
        checks.push((step.to_owned(), token, described, lease));
    };
    let long = Duration::from_millis((LEASE_MS + 2 * STAGGER_MS + 5_000) as u64);

    let (mut m, a_token) = start_members(&scene, &["a", "b", "c"]);
    elected.insert(a_token, "a".to_owned());
    m[0].wait_event_from(0, START, "a write", |e| {
        e["event"] == "guarded_write" && e["result"] == "ok"
    });
    check(&scene, "a elected", &m[0], a_token);

    m[0].sigkill();
    scene.wait_lease("b", a_token, long);
    let (b_token, _) = m[1].elected(Duration::from_secs(1));
    elected.insert(b_token, "b".to_owned());
    check(&scene, "a killed, b elected", &m[1], b_token);

    let a2 = scene.spawn("a");
    a2.wait_event("waiting", START);
    assert_eq!(scene.roster(), ["b", "c", "a"]);
    check(&scene, "a restarted at the tail", &m[1], b_token);

    m[1].wait_event_from(0, START, "b write", |e| {
        e["event"] == "guarded_write" && e["result"] == "ok"
    });
    m[1].signal(SIGSTOP);
    scene.wait_lease("c", b_token, long);
    let (c_token, _) = m[2].elected(Duration::from_secs(1));
    elected.insert(c_token, "c".to_owned());
    check(&scene, "b stopped, c elected", &m[2], c_token);
    m[2].wait_event_from(0, START, "c write", |e| {
        e["event"] == "guarded_write" && e["result"] == "ok"
    });

    m[1].signal(SIGCONT);
    let b_status = m[1].wait_exit(Duration::from_secs(15));
    assert_eq!(
        b_status.code(),
        Some(EXIT_FENCED),
        "b must be fenced after SIGCONT"
    );
    assert_eq!(scene.roster(), ["c", "a"], "the fenced b deregistered");
    check(&scene, "b continued and fenced", &m[2], c_token);

    m[2].send("resign");
    scene.wait_lease("a", c_token, Duration::from_secs(5));
    let (a2_token, _) = a2.elected(Duration::from_secs(1));
    elected.insert(a2_token, "a".to_owned());
    check(&scene, "c resigned, a elected", &a2, a2_token);
    a2.wait_event_from(0, START, "a write", |e| {
        e["event"] == "guarded_write" && e["result"] == "ok"
    });
    assert_eq!(m[2].wait_exit(Duration::from_secs(10)).code(), Some(0));

    a2.signal(SIGTERM);
    let mut a2 = a2;
    assert_eq!(
        a2.wait_exit(Duration::from_secs(10)).code(),
        Some(0),
        "a resigns on SIGTERM"
    );
    let after_resign = (a2_token, scene.described());

    let data = check_data_log(
        &scene.bootstrap,
        scene.data_topic.as_deref().unwrap(),
        &elected,
    );
    let s = Scenario {
        checks,
        after_resign,
        data,
        tokens: vec![a_token, b_token, c_token, a2_token],
    };
    println!("scenario: {s:#?}");
    s
}

#[test]
fn third_party_describe_agrees_with_the_leader_at_each_step() {
    let s = scenario();
    assert_eq!(s.checks.len(), 6);
    for (step, leader, described, lease) in &s.checks {
        assert_eq!(
            described, leader,
            "{step}: describe_leadership says {described}, the leader holds {leader}"
        );
        assert_eq!(
            lease.as_ref(),
            Some(leader),
            "{step}: the partition's lease is {lease:?}, the leader holds {leader}"
        );
    }
    assert!(
        s.tokens.windows(2).all(|w| w[0] < w[1]),
        "each new leader's token is newer: {:?}",
        s.tokens
    );
    let (resigned, described) = s.after_resign;
    assert!(described > resigned, "after the last resign describe reports {described}, not newer than the resigned {resigned}");
}

#[test]
fn committed_guarded_writes_carry_their_writers_token_in_log_order() {
    let s = scenario();
    assert!(
        s.data.problems.is_empty(),
        "data log problems: {:#?}",
        s.data.problems
    );
    for t in &s.tokens {
        assert!(
            s.data.per_token.get(t).copied().unwrap_or(0) > 0,
            "no committed record of term {t}: {:?}",
            s.data.per_token
        );
    }
    assert!(s.data.committed >= 4, "{:?}", s.data);
    // Every guarded write is its own transaction: one commit marker per
    // record at least, plus the records of aborted (fenced) transactions.
    assert!(
        s.data.aborted_or_control >= s.data.committed,
        "{:?}",
        s.data
    );
}
