//! A cluster without broker-side transaction verification, on a real Kafka:
//! a one-node cluster of its own, started with
//! `transaction.partition.verification.enable=false` (the setting this
//! test is about; every other setting is Kafka's default) and with its
//! client listener advertised at a proxy this test runs, which can hold a
//! guarded write's Produce back as a slow network would. With
//! `KAFKA_VERSION` set (by hand: `KAFKA_VERSION=3.5.2`), the cluster runs
//! that release.
//!
//! * A member refuses the cluster before it registers, naming the broker,
//!   the setting and the way out; with `krabka.allow.hanging.transactions`
//!   it runs.
//! * A deposed leader's Produce that lands late is never committed by its
//!   successor, and leaves no transaction nobody ends: the leader's epoch
//!   is released with the Produce unanswered, so its transaction is left to
//!   the coordinator (a successor's mint aborts it with a bumped epoch)
//!   instead of being aborted with the leader's own epoch, after which the
//!   late copy would open a transaction the successor's commit marker
//!   commits.
#![cfg(feature = "kafka")]

mod support;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use krabka_coordination::client::Client;
use krabka_coordination::transport::kafka::{KafkaConfig, TopicSpec};
use krabka_coordination::transport::OutRecord;
use krabka_coordination::ErrorKind;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The cluster's client port; its INTERNAL and CONTROLLER listeners take
/// this + 50 and + 100 (ci/kafka.sh).
const PORT: u16 = 26092;
/// Where the broker advertises its client listener: the proxy.
const PROXY_PORT: u16 = 26093;
/// How long the proxy holds back a Produce to the held topic: past the
/// leader's release (its resend of the batch is held too, and the release
/// gives up after 5 s), so that a copy lands after whatever the release
/// did, and past the leader's lease, so that the successor mints before it
/// lands.
const HOLD: Duration = Duration::from_secs(20);

/// The environment of `ci/kafka.sh` for this test's cluster.
fn env() -> Vec<(&'static str, String)> {
    vec![
        ("KAFKA_PORT_1", PORT.to_string()),
        (
            "KAFKA_STATE_DIR",
            repo_root().join(".kafka-unverified").display().to_string(),
        ),
        (
            "KAFKA_EXTRA_PROPERTIES",
            format!(
                "transaction.partition.verification.enable=false\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{PROXY_PORT},INTERNAL://127.0.0.1:{}",
                PORT + 50
            ),
        ),
    ]
}

/// Runs `ci/kafka.sh args` for this test's cluster; its last stdout line.
fn kafka_sh_here(args: &[&str]) -> String {
    let out = Command::new("bash")
        .arg(repo_root().join("ci/kafka.sh"))
        .args(args)
        .envs(env())
        .stdin(Stdio::null())
        .output()
        .expect("running ci/kafka.sh");
    assert!(
        out.status.success(),
        "ci/kafka.sh {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned()
}

/// Stops this test's cluster and deletes its data when dropped, so every
/// run starts on a new cluster.
struct Cluster;

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo_root().join("ci/kafka.sh"))
            .args(["stop", "1"])
            .envs(env())
            .stdin(Stdio::null())
            .output();
        let _ = std::fs::remove_dir_all(repo_root().join(".kafka-unverified"));
    }
}

/// A TCP proxy to the broker that forwards everything, except that while
/// `hold` is set a Produce whose frame names `topic` is held for [`HOLD`]
/// before it goes on (and everything after it on that connection behind
/// it, as on a slow link). A held frame is delivered even when the client
/// has closed its side meanwhile: the late copy a broker receives after
/// the client gave up.
struct Proxy {
    hold: Arc<AtomicBool>,
}

impl Proxy {
    async fn start(topic: &'static str) -> Proxy {
        let listener = TcpListener::bind(("127.0.0.1", PROXY_PORT))
            .await
            .expect("binding the proxy's port");
        let hold = Arc::new(AtomicBool::new(false));
        let holding = Arc::clone(&hold);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let hold = Arc::clone(&holding);
                tokio::spawn(async move {
                    if let Ok(broker) = TcpStream::connect(("127.0.0.1", PORT)).await {
                        forward(client, broker, topic, hold).await;
                    }
                });
            }
        });
        Proxy { hold }
    }
}

async fn forward(client: TcpStream, broker: TcpStream, topic: &str, hold: Arc<AtomicBool>) {
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_broker, mut to_broker) = broker.into_split();
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut from_broker, &mut to_client).await;
    });
    loop {
        let mut size = [0u8; 4];
        if from_client.read_exact(&mut size).await.is_err() {
            break;
        }
        let mut frame = vec![0u8; u32::from_be_bytes(size) as usize];
        if from_client.read_exact(&mut frame).await.is_err() {
            break;
        }
        let produce = frame.len() >= 2 && frame[..2] == [0, 0];
        let names_topic = frame.windows(topic.len()).any(|w| w == topic.as_bytes());
        if produce && names_topic && hold.load(Ordering::SeqCst) {
            tokio::time::sleep(HOLD).await;
        }
        if to_broker.write_all(&size).await.is_err() || to_broker.write_all(&frame).await.is_err() {
            break;
        }
    }
    // Let the broker read what was delivered last before the connection
    // goes.
    tokio::time::sleep(Duration::from_secs(2)).await;
}

/// The values of `topic`/0 a `read_committed` reader sees, read up to the
/// high watermark or for at most 20 s (a partition held back by an open
/// transaction shows nothing past it).
async fn read_committed(bootstrap: &str, topic: &str) -> Vec<Vec<u8>> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Message;
    let (bootstrap, topic) = (bootstrap.to_owned(), topic.to_owned());
    tokio::task::spawn_blocking(move || {
        let c: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", "krabka-test-committed")
            .set("isolation.level", "read_committed")
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
        let mut tpl = rdkafka::TopicPartitionList::new();
        tpl.add_partition_offset(&topic, 0, rdkafka::Offset::Beginning)
            .unwrap();
        c.assign(&tpl).expect("assign");
        let mut values = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            match c.poll(Duration::from_millis(200)) {
                Some(Ok(m)) => values.push(m.payload().map(<[u8]>::to_vec).unwrap_or_default()),
                Some(Err(e)) => panic!("read_committed: {e}"),
                None if values.len() >= 2 => break,
                None => {}
            }
        }
        values
    })
    .await
    .unwrap()
}

fn record(topic: &str, value: &[u8]) -> OutRecord {
    OutRecord {
        topic: topic.to_owned(),
        partition: Some(0),
        key: None,
        value: Some(value.to_vec()),
        headers: vec![],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_verification_is_refused_and_a_late_write_is_never_committed() {
    init_tracing();
    const DATA: &str = "unverified-data";
    let proxy = Proxy::start(DATA).await;
    let _cluster = Cluster;
    let bootstrap = kafka_sh_here(&["start", "1"]);
    kafka_sh_here(&[
        "tool",
        "topics",
        "--bootstrap-server",
        &bootstrap,
        "--create",
        "--if-not-exists",
        "--topic",
        DATA,
        "--partitions",
        "1",
        "--replication-factor",
        "1",
    ]);
    let config = KafkaConfig::new(bootstrap.clone());
    let refused = Client::new(config.clone()).unwrap();
    refused
        .ensure_state_topic(TopicSpec::development())
        .await
        .unwrap();
    let role = unique("unverified");

    // 1. Refused before anything is registered, naming what is wrong.
    let e = refused
        .acquire(&role, "a", refused.leadership_options())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Fatal, "{e}");
    let text = e.to_string();
    // Run by hand on a Kafka before 3.6 (KAFKA_VERSION=3.5.2): the broker
    // has no verification to turn off, and says so by what it speaks.
    let before_3_6 = std::env::var("KAFKA_VERSION").is_ok_and(|v| {
        let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        (major, minor) < (3, 6)
    });
    let named = if before_3_6 {
        "does not advertise broker-side transaction verification"
    } else {
        "broker 1 set transaction.partition.verification.enable=false"
    };
    for part in [
        named,
        "hanging transaction",
        "krabka.allow.hanging.transactions=true",
    ] {
        assert!(text.contains(part), "{part}: {text}");
    }

    // 2. With the setting, members run. A leads and writes once.
    let allowed = config.allow_hanging_transactions(true);
    let (a_client, b_client) = (
        Client::new(allowed.clone()).unwrap(),
        Client::new(allowed).unwrap(),
    );
    let options = |c: &Client| {
        c.leadership_options()
            .with_lease_duration(Duration::from_secs(10))
            .with_renew_interval(Duration::from_secs(2))
            .with_challenge_stagger(Duration::from_millis(500))
    };
    let a = a_client
        .acquire(&role, "a", options(&a_client))
        .await
        .unwrap();
    a.write(vec![record(DATA, b"a-before")]).await.unwrap();

    // 3. A's next write is held back past its bound: it fails, its Produce
    // unanswered. A is then dropped (a crash: no resign), and its epoch is
    // released while the Produce and the release's own resend are held.
    proxy.hold.store(true, Ordering::SeqCst);
    let e = a.write(vec![record(DATA, b"a-late")]).await.unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Transient | ErrorKind::OutcomeUnknown),
        "{e}"
    );
    drop(a);
    drop(a_client);
    // 4. B takes over once A's lease ran out (before any held copy of A's
    // Produce is delivered), and writes to the same partition once every
    // held copy was delivered.
    let b = b_client
        .acquire(&role, "b", options(&b_client))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(8)).await;
    proxy.hold.store(false, Ordering::SeqCst);
    tokio::time::sleep(HOLD).await;
    b.write(vec![record(DATA, b"b")]).await.unwrap();
    b.resign().await.unwrap();

    // 5. What a read_committed reader sees: A's committed write and B's,
    // never A's late one, and nothing holds the partition back.
    let values = read_committed(&bootstrap, DATA).await;
    let shown: Vec<String> = values
        .iter()
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    assert_eq!(shown, ["a-before", "b"], "read_committed shows {shown:?}");
}
