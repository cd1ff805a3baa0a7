//! Shared helpers of the Kafka integration tests (`core/tests/kafka_*.rs`).
//!
//! The tests run against a REAL Apache Kafka (never librdkafka's mock
//! cluster, which neither fences nor has a last stable offset):
//!
//! * `KRABKA_BOOTSTRAP` names the single-node cluster; when it is unset the
//!   helpers run `ci/kafka.sh start 1` (which reuses a running cluster) and
//!   use the address it prints last;
//! * `KRABKA_BOOTSTRAP_3` names the three-node cluster (RF 3, min ISR 2);
//!   when unset, `ci/kafka.sh start 3`.
//! * the secured cluster (SASL_SSL, ACLs) is always `ci/kafka.sh start
//!   secured` (which reuses a running one): the tests need its certificates
//!   and users, which `ci/kafka.sh settings secured` names.
//!
//! A cluster that cannot be reached FAILS the test, with a message saying so.
#![allow(dead_code)]

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use krabka_coordination::transport::kafka::{
    ensure_state_topic, KafkaClient, KafkaConfig, KafkaTransport, TopicReport,
};
use krabka_coordination::transport::{OutRecord, StateReader, StateRecord};
use krabka_coordination::Record;

/// The partition count of the shared state topic in the tests.
pub const STATE_PARTITIONS: i32 = 16;

/// The env var a parent test sets to make a re-executed child act.
pub const CHILD_ENV: &str = "KRABKA_TEST_CHILD";

/// Logs of the code under test go to the test output (`RUST_LOG` filters).
pub fn init_tracing() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
            )
            .with_test_writer()
            .try_init();
    });
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `ci/kafka.sh` with `args` and returns its last non-empty stdout
/// line (empty when it printed nothing).
pub fn kafka_sh(args: &[&str]) -> Result<String, String> {
    let stdout = kafka_sh_stdout(args)?;
    Ok(stdout
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default()
        .to_owned())
}

/// Runs `ci/kafka.sh` with `args` and returns all it printed on stdout.
pub fn kafka_sh_stdout(args: &[&str]) -> Result<String, String> {
    let script = repo_root().join("ci/kafka.sh");
    if !script.exists() {
        return Err(format!("{} does not exist", script.display()));
    }
    let out = Command::new("bash")
        .arg(&script)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {} {}: {e}", script.display(), args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "ci/kafka.sh {} failed ({}):\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn resolve(env: &str, size: &str) -> Result<String, String> {
    let addr = match std::env::var(env) {
        Ok(v) if !v.trim().is_empty() => v.trim().to_owned(),
        _ => kafka_sh(&["start", size])
            .map_err(|e| format!("{env} is unset and ci/kafka.sh start {size} failed: {e}"))?,
    };
    if addr.is_empty() {
        return Err(format!(
            "{env} is unset and ci/kafka.sh start {size} printed no bootstrap address"
        ));
    }
    // Reachable at all? Every listed broker must accept a TCP connection.
    for broker in addr.split(',') {
        let broker = broker.trim();
        let mut ok = false;
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last = String::new();
        while Instant::now() < deadline {
            match std::net::ToSocketAddrs::to_socket_addrs(broker) {
                Ok(mut addrs) => match addrs.next() {
                    Some(sa) => {
                        match std::net::TcpStream::connect_timeout(&sa, Duration::from_secs(2)) {
                            Ok(_) => {
                                ok = true;
                                break;
                            }
                            Err(e) => last = e.to_string(),
                        }
                    }
                    None => last = "no address".into(),
                },
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        if !ok {
            return Err(format!(
                "Kafka broker {broker} (from {env} / ci/kafka.sh) cannot be reached: {last}"
            ));
        }
    }
    Ok(addr)
}

/// The bootstrap address of the single-node cluster. Panics (fails the
/// test) when Kafka cannot be reached.
pub fn bootstrap() -> String {
    static ADDR: OnceLock<Result<String, String>> = OnceLock::new();
    match ADDR.get_or_init(|| resolve("KRABKA_BOOTSTRAP", "1")) {
        Ok(a) => a.clone(),
        Err(e) => panic!("a real Kafka is needed for this test and is not available: {e}"),
    }
}

/// The bootstrap address of the three-node cluster. Panics (fails the test)
/// when Kafka cannot be reached.
pub fn bootstrap3() -> String {
    static ADDR: OnceLock<Result<String, String>> = OnceLock::new();
    match ADDR.get_or_init(|| resolve("KRABKA_BOOTSTRAP_3", "3")) {
        Ok(a) => a.clone(),
        Err(e) => {
            panic!("a real three-node Kafka is needed for this test and is not available: {e}")
        }
    }
}

/// The secured cluster of `ci/kafka.sh start secured`: one broker whose
/// client listener is SASL_SSL on `localhost` (its certificate names
/// `localhost` only), SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN users
/// `admin` (super user), `alice` and `bob` (no ACLs) with the password
/// `<user>-secret`, and KRaft's StandardAuthorizer.
#[derive(Debug, Clone)]
pub struct Secured {
    /// `localhost:<port>`.
    pub bootstrap: String,
    /// The SASL_SSL port.
    pub port: u16,
    /// The CA that signed the broker's certificate.
    pub ca: String,
    /// A CA that signed nothing.
    pub other_ca: String,
    /// A client certificate the CA signed (the broker requests client
    /// certificates and checks them).
    pub client_cert: String,
    /// Its key, PKCS#8 encrypted with [`Secured::CLIENT_KEY_PASSWORD`].
    pub client_key: String,
}

impl Secured {
    /// The password of the client key.
    pub const CLIENT_KEY_PASSWORD: &'static str = "client-key-secret";

    /// The password of `user` (`admin`, `alice`, `bob`).
    pub fn password(user: &str) -> String {
        format!("{user}-secret")
    }

    /// Settings for `user` with `mechanism` over SASL_SSL, trusting the CA.
    pub fn config(
        &self,
        mechanism: &str,
        user: &str,
    ) -> krabka_coordination::transport::kafka::KafkaConfig {
        config(&self.bootstrap)
            .set("security.protocol", "SASL_SSL")
            .set("sasl.mechanism", mechanism)
            .set("sasl.username", user)
            .set("sasl.password", Self::password(user))
            .set("ssl.ca.location", &self.ca)
    }
}

/// The secured cluster, started if needed. Panics (fails the test) when it
/// cannot be started.
pub fn secured() -> Secured {
    static CLUSTER: OnceLock<Result<Secured, String>> = OnceLock::new();
    let resolved = CLUSTER.get_or_init(|| {
        let bootstrap = kafka_sh(&["start", "secured"])?;
        let settings = kafka_sh_stdout(&["settings", "secured"])?;
        let get = |key: &str| {
            settings
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{key}=")))
                .map(str::to_owned)
                .ok_or_else(|| {
                    format!("ci/kafka.sh settings secured printed no {key}:\n{settings}")
                })
        };
        let ca = get("ssl.ca.location")?;
        if get("bootstrap.servers")? != bootstrap {
            return Err(format!(
                "ci/kafka.sh start secured printed {bootstrap}, settings another"
            ));
        }
        let port = bootstrap
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .ok_or_else(|| format!("no port in {bootstrap:?}"))?;
        let beside = |name: &str| {
            std::path::Path::new(&ca)
                .with_file_name(name)
                .to_string_lossy()
                .into_owned()
        };
        Ok(Secured {
            other_ca: beside("other-ca.pem"),
            client_cert: beside("client.pem"),
            client_key: beside("client.key"),
            bootstrap,
            port,
            ca,
        })
    });
    match resolved {
        Ok(s) => s.clone(),
        Err(e) => panic!("the secured Kafka (ci/kafka.sh start secured) is needed for this test and is not available: {e}"),
    }
}

/// A name no other test run uses: `prefix-<random hex>`.
pub fn unique(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    format!("{prefix}-{:016x}", h.finish())
}

/// A configuration with short timeouts, for tests.
pub fn config(bootstrap: &str) -> KafkaConfig {
    KafkaConfig::new(bootstrap).with_operation_timeout(Duration::from_secs(20))
}

/// Makes sure the shared state topic exists with [`STATE_PARTITIONS`]
/// partitions (replication factor `rf`, min ISR `min_isr`).
pub async fn ensure_shared_topic(config: &KafkaConfig, rf: i32, min_isr: i32) -> TopicReport {
    ensure_state_topic(config, STATE_PARTITIONS, rf, min_isr)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "ensuring {} on {}: {e}",
                config.state_topic(),
                config.bootstrap()
            )
        })
}

/// A transport on the single-node cluster with the shared state topic in place.
pub async fn transport(member: &str) -> KafkaTransport {
    init_tracing();
    let cfg = config(&bootstrap());
    ensure_shared_topic(&cfg, 1, 1).await;
    KafkaTransport::new(cfg, Some(member)).expect("transport")
}

/// Reads `partition` until `pred` holds for its records or `within` passes;
/// returns the last read.
pub async fn read_until(
    t: &KafkaTransport,
    partition: i32,
    within: Duration,
    pred: impl Fn(&[Record]) -> bool,
) -> Vec<Record> {
    let deadline = Instant::now() + within;
    loop {
        let records = t.read_partition(partition).await.expect("read_partition");
        if pred(&records) || Instant::now() >= deadline {
            return records;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// True when some record of `records` has exactly this key and value.
pub fn has_record(records: &[Record], key: &[u8], value: &[u8]) -> bool {
    records
        .iter()
        .any(|r| r.key == key && r.value.as_deref() == Some(value))
}

/// True when some record of `records` has exactly this value (use values
/// unique to the test run, such as lease values with a fresh token).
pub fn has_value(records: &[Record], value: &[u8]) -> bool {
    records.iter().any(|r| r.value.as_deref() == Some(value))
}

/// A child process that is killed when the guard goes (a failing parent
/// leaves no orphan behind).
pub struct ChildGuard(pub std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Re-executes this test binary running only `test_name`, with the given
/// variables (e.g. [`CHILD_ENV`]); stdout is piped.
pub fn spawn_child(test_name: &str, envs: &[(&str, String)]) -> ChildGuard {
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", test_name, "--nocapture", "--test-threads=1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    ChildGuard(cmd.spawn().expect("spawning the child test process"))
}

/// Reads the child's stdout until a line starting with `marker`; returns the
/// rest of that line. Panics if the child ends first or `within` passes.
pub fn wait_for_line(child: &mut ChildGuard, marker: &str, within: Duration) -> String {
    use std::io::{BufRead, BufReader};
    let stdout = child.0.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    let marker_owned = marker.to_owned();
    std::thread::spawn(move || {
        let reader = BufReader::new(stdout);
        for line in reader.lines() {
            let Ok(line) = line else { break };
            // libtest may print "test <name> ... " on the same line first.
            if let Some(at) = line.find(&marker_owned) {
                let _ = tx.send(line[at + marker_owned.len()..].trim().to_owned());
                // Keep draining so the child never blocks on a full pipe.
            }
        }
    });
    rx.recv_timeout(within).unwrap_or_else(|_| {
        panic!("the child process printed no {marker:?} line within {within:?}")
    })
}

/// Kills the child with SIGKILL (no clean-up runs in it) and reaps it.
pub fn sigkill(child: &mut ChildGuard) {
    // std's Child::kill sends SIGKILL on Unix.
    child.0.kill().expect("SIGKILL the child");
    let status = child.0.wait().expect("reap the child");
    assert!(
        !status.success(),
        "the killed child should not exit successfully: {status}"
    );
}

/// The lease key of `role`.
pub fn lease_key(role: &str) -> Vec<u8> {
    krabka_coordination::encode_key(&krabka_coordination::Key::lease(role)).expect("lease key")
}

/// A lease value of `member` with `token`; `granted_at` doubles as a marker
/// that tells test records apart.
pub fn lease_value(
    member: &str,
    token: krabka_coordination::FencingToken,
    granted_at: i64,
) -> Vec<u8> {
    krabka_coordination::encode_lease(&krabka_coordination::Lease {
        member: member.to_owned(),
        token,
        granted_at,
        deadline: granted_at + 10_000,
    })
    .expect("lease value")
}

/// The registration key of `member` in `role`.
pub fn reg_key(role: &str, member: &str) -> Vec<u8> {
    krabka_coordination::encode_key(&krabka_coordination::Key::registration(role, member))
        .expect("registration key")
}

/// A registration value of `member`.
pub fn reg_value(member: &str, registered_at: i64) -> Vec<u8> {
    krabka_coordination::encode_registration(&krabka_coordination::Registration {
        member: member.to_owned(),
        registered_at,
    })
    .expect("registration value")
}

/// The lease record of `role` with `value` (`None`: a tombstone), to its
/// partition of the shared state topic.
pub fn lease_record(role: &str, value: Option<Vec<u8>>) -> StateRecord {
    StateRecord {
        partition: partition_of(role),
        key: lease_key(role),
        value,
    }
}

/// A record of `key` and `value` to `partition` of the state topic.
pub fn state_record(partition: i32, key: Vec<u8>, value: Option<Vec<u8>>) -> StateRecord {
    StateRecord {
        partition,
        key,
        value,
    }
}

/// A topic for guarded writes (never the state topic, which guarded writes
/// may not touch), with one partition, and a transport whose "state topic"
/// it is: its `read_partition(0)` reads the topic read_committed.
pub async fn data_topic(prefix: &str) -> (String, KafkaTransport) {
    init_tracing();
    let topic = unique(prefix);
    let cfg = config(&bootstrap()).with_state_topic(&topic);
    ensure_state_topic(&cfg, 1, 1, 1)
        .await
        .unwrap_or_else(|e| panic!("creating the data topic {topic}: {e}"));
    let reader = KafkaTransport::new(cfg, Some("data-reader")).expect("data reader");
    (topic, reader)
}

/// A guarded record of `topic`, partition `partition`, whose key and value
/// are `value`.
pub fn data_record(topic: &str, partition: i32, value: &[u8]) -> OutRecord {
    OutRecord {
        topic: topic.to_owned(),
        partition: Some(partition),
        key: Some(value.to_vec()),
        value: Some(value.to_vec()),
        headers: vec![("h".into(), b"v".to_vec())],
    }
}

/// The partition of `role` in the shared state topic.
pub fn partition_of(role: &str) -> i32 {
    krabka_coordination::role_partition(role, STATE_PARTITIONS).expect("role partition")
}

/// Every record of `topic`/`partition` up to the high watermark, read with
/// `isolation.level = read_uncommitted`: aborted and open records included.
/// The tests use it to show that a record the transport never returns is
/// really in the log.
pub async fn read_uncommitted(bootstrap: &str, topic: &str, partition: i32) -> Vec<Record> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Message;
    let (bootstrap, topic) = (bootstrap.to_owned(), topic.to_owned());
    tokio::task::spawn_blocking(move || {
        let c: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", "krabka-test-uncommitted")
            .set("isolation.level", "read_uncommitted")
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
        let (low, high) = c
            .fetch_watermarks(&topic, partition, Duration::from_secs(10))
            .expect("watermarks");
        let mut tpl = rdkafka::TopicPartitionList::new();
        tpl.add_partition_offset(&topic, partition, rdkafka::Offset::Offset(low))
            .unwrap();
        c.assign(&tpl).expect("assign");
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut next = low;
        while next < high && Instant::now() < deadline {
            match c.poll(Duration::from_millis(200)) {
                Some(Ok(m)) => {
                    next = m.offset() + 1;
                    out.push(Record {
                        offset: m.offset(),
                        key: m.key().map(<[u8]>::to_vec).unwrap_or_default(),
                        value: m.payload().map(<[u8]>::to_vec),
                    });
                }
                Some(Err(e)) => panic!("read_uncommitted: {e}"),
                None => {
                    // Only markers may be left below the high watermark.
                    if let Ok(pos) = c.position() {
                        if let Some(rdkafka::Offset::Offset(o)) =
                            pos.find_partition(&topic, partition).map(|e| e.offset())
                        {
                            next = next.max(o);
                        }
                    }
                }
            }
        }
        out
    })
    .await
    .expect("read_uncommitted task")
}

/// A node of the three-node cluster taken down by a test (stopped with
/// SIGTERM or killed with SIGKILL); started again by [`DownNode::restart`],
/// or when dropped, so a failing test leaves the cluster whole.
pub struct DownNode(Option<String>);

impl DownNode {
    /// Stops node `node` (1..=3) gracefully (`ci/kafka.sh node stop 3 N`).
    pub async fn stop(node: String) -> DownNode {
        let n = node.clone();
        tokio::task::spawn_blocking(move || kafka_sh(&["node", "stop", "3", &n]))
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("stopping node {node}: {e}"));
        DownNode(Some(node))
    }

    /// Kills node `node` (1..=3) with SIGKILL, as a crash would.
    pub fn kill(node: &str) -> DownNode {
        signal_node(node, "KILL");
        DownNode(Some(node.to_owned()))
    }

    /// Pauses node `node` (1..=3) with SIGSTOP: it keeps its connections
    /// and answers nothing. [`DownNode::kill`]'s SIGKILL or the guard's
    /// restart ends the pause.
    pub fn pause(node: &str) -> DownNode {
        signal_node(node, "STOP");
        DownNode(Some(node.to_owned()))
    }

    /// Kills the node this guard holds down (paused or not) with SIGKILL.
    pub fn kill_now(&self) {
        signal_node(self.0.as_deref().expect("held down"), "KILL");
    }

    /// Resumes the paused node (SIGCONT), as a stalled process comes back:
    /// it rejoins the cluster on its own.
    pub fn resume(mut self) {
        let node = self.0.take().expect("held down");
        signal_node(&node, "CONT");
    }

    /// Starts the node again and waits until it is back in the metadata.
    pub async fn restart(mut self) {
        let node = self.0.take().unwrap();
        // A paused node is still running: end it first.
        if try_signal_node(&node, "KILL").is_ok() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let n = node.clone();
        tokio::task::spawn_blocking(move || kafka_sh(&["node", "start", "3", &n]))
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("restarting node {node}: {e}"));
    }
}

impl Drop for DownNode {
    fn drop(&mut self) {
        if let Some(node) = self.0.take() {
            if try_signal_node(&node, "KILL").is_ok() {
                std::thread::sleep(Duration::from_millis(500));
            }
            if let Err(e) = kafka_sh(&["node", "start", "3", &node]) {
                eprintln!("restarting node {node} after a failure: {e}");
            }
        }
    }
}

/// Sends `signal` (`KILL`, `STOP`, ...) to node `node` (1..=3) of the
/// three-node cluster.
fn signal_node(node: &str, signal: &str) {
    if let Err(e) = try_signal_node(node, signal) {
        panic!("{e}");
    }
}

/// [`signal_node`], or why not (the node is not running).
fn try_signal_node(node: &str, signal: &str) -> Result<(), String> {
    let pid = node_pid(node)?;
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("kill");
    if sent.success() {
        Ok(())
    } else {
        Err(format!("kill -{signal} {pid} failed"))
    }
}

/// The process id of node `node` (1..=3) of the three-node cluster, or
/// why not (the node is not running).
pub fn node_pid(node: &str) -> Result<i32, String> {
    let out = Command::new("bash")
        .arg(repo_root().join("ci/kafka.sh"))
        .args(["status", "3"])
        .output()
        .expect("ci/kafka.sh status 3");
    let status = String::from_utf8_lossy(&out.stdout);
    status
        .lines()
        .find_map(|l| {
            let rest = l
                .trim()
                .strip_prefix(&format!("node {node}: running (pid "))?;
            rest.split(')').next()?.parse::<i32>().ok()
        })
        .ok_or_else(|| format!("no pid of node {node} in:\n{status}"))
}

/// The node index (1..=3) of a broker address of the three-node cluster.
pub fn node_of(addr: &str, bootstrap: &str) -> String {
    let i = bootstrap
        .split(',')
        .position(|b| b.trim() == addr)
        .unwrap_or_else(|| panic!("{addr} is not one of {bootstrap}"));
    (i + 1).to_string()
}

/// The bootstrap address of the secured cluster's second SASL_SSL listener,
/// whose SASL sessions end after a few seconds (KIP-368
/// `connections.max.reauth.ms`, see `ci/kafka/secured.properties.in`).
/// Starts the cluster if needed.
pub fn secured_reauth_bootstrap() -> String {
    let _ = secured();
    let settings = kafka_sh_stdout(&["settings", "secured", "reauth"])
        .unwrap_or_else(|e| panic!("ci/kafka.sh settings secured reauth: {e}"));
    settings
        .lines()
        .find_map(|l| l.strip_prefix("bootstrap.servers="))
        .map(str::to_owned)
        .unwrap_or_else(|| {
            panic!("ci/kafka.sh settings secured reauth printed no bootstrap.servers:\n{settings}")
        })
}

/// An unsigned JWT (`{"alg":"none"}`, no signature) with the claims `sub`
/// and `exp` (and `iat`, now): what the secured cluster's OAUTHBEARER
/// validator (Kafka's unsecured one) takes, the principal being `sub`.
pub fn unsigned_jwt(sub: &str, exp: SystemTime) -> String {
    fn b64url(bytes: &[u8]) -> String {
        const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
            for i in 0..=chunk.len() {
                out.push(char::from(ABC[(n >> (18 - 6 * i) & 63) as usize]));
            }
        }
        out
    }
    let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let claims = format!(
        r#"{{"sub":{},"iat":{},"exp":{}}}"#,
        serde_json::to_string(sub).expect("a JSON string"),
        secs(SystemTime::now()),
        secs(exp)
    );
    format!(
        "{}.{}.",
        b64url(br#"{"alg":"none"}"#),
        b64url(claims.as_bytes())
    )
}

/// Everything queued on a leader's and a standby's event streams: fails on
/// the end of the leader's term (fenced, lease expired, ended) or a
/// standby's election; counts the leader's renewals. For the tests where a
/// fault must not move the leader.
pub fn leader_stays(
    leader: &mut krabka_coordination::events::EventReceiver,
    standby: &mut krabka_coordination::events::EventReceiver,
) -> usize {
    use krabka_coordination::events::EventKind;
    let mut renewed = 0;
    while let Ok(e) = leader.try_recv() {
        match e.kind {
            EventKind::Fenced { .. } | EventKind::LeaseExpired | EventKind::Ended { .. } => {
                panic!("the leader's term ended: {e:?}")
            }
            EventKind::Renewed { .. } => renewed += 1,
            _ => {}
        }
    }
    while let Ok(e) = standby.try_recv() {
        assert!(
            !matches!(e.kind, EventKind::Elected { .. }),
            "a standby took over: {e:?}"
        );
    }
    renewed
}

/// What Metadata shows of `topic`/`partition` on the cluster at
/// `bootstrap`, asked through librdkafka (not the client under test): its
/// leader's node id (-1 for none) and how many replicas are in sync.
pub fn partition_metadata(bootstrap: &str, topic: &str, partition: i32) -> (i32, usize) {
    let md = topic_metadata(bootstrap, topic);
    let p = md.topics()[0]
        .partitions()
        .iter()
        .find(|p| p.id() == partition)
        .unwrap_or_else(|| panic!("{topic}/{partition} is not in the metadata"));
    (p.leader(), p.isr().len())
}

/// The cluster's metadata of `topic` (librdkafka's Metadata request).
pub fn topic_metadata(bootstrap: &str, topic: &str) -> rdkafka::metadata::Metadata {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap()
}

/// The node (1..=3 in `ci/kafka.sh`) leading `partition` of `topic`.
pub fn partition_leader(bootstrap: &str, topic: &str, partition: i32) -> String {
    partition_metadata(bootstrap, topic, partition)
        .0
        .to_string()
}

/// Waits until no partition of the cluster is under-replicated: the
/// restarted node is back in every ISR.
pub async fn until_fully_replicated(boot: &str, within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let boot = boot.to_owned();
        let out = tokio::task::spawn_blocking(move || {
            kafka_sh_stdout(&[
                "tool",
                "topics",
                "--bootstrap-server",
                &boot,
                "--describe",
                "--under-replicated-partitions",
            ])
        })
        .await
        .unwrap();
        match out {
            Ok(listed) if listed.trim().is_empty() => return started.elapsed(),
            Ok(listed) => assert!(
                started.elapsed() < within,
                "partitions still under-replicated after {within:?}:\n{listed}"
            ),
            Err(e) => assert!(
                started.elapsed() < within,
                "kafka-topics --describe failed for {within:?}: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// What a broker-fault suite of the three-node cluster starts from: the
/// cluster's address and configuration, a fresh one-partition data topic
/// (replication factor 3, the given `min.insync.replicas`), a client, and
/// the leadership options (`lease`, `renew`, a 1 s stagger).
pub struct FaultSetup {
    /// The three brokers' bootstrap address.
    pub boot: String,
    /// Their configuration, with the suite's operation timeout.
    pub cfg: KafkaConfig,
    /// The data topic.
    pub data: String,
    /// The leader's client.
    pub client: krabka_coordination::client::Client,
    /// The options every member of the suite uses.
    pub options: krabka_coordination::leadership::LeadershipOptions,
}

impl FaultSetup {
    /// The set-up: the shared state topic, the data topic `<prefix>-data-*`,
    /// a client and the options.
    pub async fn new(
        prefix: &str,
        operation_timeout: Duration,
        data_min_isr: i32,
        lease: Duration,
        renew: Duration,
    ) -> FaultSetup {
        let boot = bootstrap3();
        let cfg = config(&boot).with_operation_timeout(operation_timeout);
        ensure_shared_topic(&cfg, 3, 2).await;
        let data = unique(&format!("{prefix}-data"));
        ensure_state_topic(&cfg.clone().with_state_topic(&data), 1, 3, data_min_isr)
            .await
            .unwrap();
        let client = FaultSetup::client_of(&cfg);
        let options = client
            .leadership_options()
            .with_lease_duration(lease)
            .with_renew_interval(renew)
            .with_challenge_stagger(Duration::from_secs(1));
        FaultSetup {
            boot,
            cfg,
            data,
            client,
            options,
        }
    }

    /// Another client of the cluster (a standby's).
    pub fn client(&self) -> krabka_coordination::client::Client {
        FaultSetup::client_of(&self.cfg)
    }

    fn client_of(cfg: &KafkaConfig) -> krabka_coordination::client::Client {
        krabka_coordination::client::Client::new(cfg.clone())
            .unwrap()
            .with_partitions(STATE_PARTITIONS)
            .unwrap()
    }

    /// A standby of `role` in `client`, waiting in a task; its events go to
    /// `events`.
    pub fn standby(
        &self,
        client: &krabka_coordination::client::Client,
        role: &str,
        events: krabka_coordination::events::EventSender,
    ) -> tokio::task::JoinHandle<
        krabka_coordination::Result<krabka_coordination::leadership::Leadership>,
    > {
        let (client, role, options) = (
            client.clone(),
            role.to_owned(),
            self.options.clone().with_events(events),
        );
        tokio::spawn(async move { client.acquire(&role, "standby", options).await })
    }
}

/// Waits (10 s at most) until the coordinator has written the markers of
/// `role`'s last transaction: its state is no longer `PrepareCommit` or
/// `PrepareAbort`. Until then the coordinator answers
/// CONCURRENT_TRANSACTIONS to every next transaction of the role, and a
/// partition leader that stops answering with those markers on their way to
/// it holds the role's transactions for up to the brokers'
/// `request.timeout.ms` (30 s), which the lease-sizing rule for a paused
/// broker covers and a test of a shorter lease must not run into.
pub async fn wait_markers_written(describe: &KafkaClient, role: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let d = describe.describe_transaction(role).await.unwrap();
        let pending = d
            .as_ref()
            .is_some_and(|d| d.state == "PrepareCommit" || d.state == "PrepareAbort");
        if !pending {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the markers of {role}'s last transaction were not written: {d:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (5 s at most) until the coordinator shows `role`'s transaction
/// opened ahead after a lease: `Ongoing`, with only `topic`/`partition`
/// added.
pub async fn wait_opened_ahead(t: &KafkaTransport, role: &str, topic: &str, partition: i32) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let d = t.kafka_client().describe_transaction(role).await.unwrap();
        let open = d.as_ref().is_some_and(|d| {
            d.state == "Ongoing" && d.topics == [(topic.to_owned(), vec![partition])]
        });
        if open {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no transaction opened ahead on {topic}/{partition}: {d:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
