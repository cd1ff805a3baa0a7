//! End to end, exactly-once: a pipeline role on the REAL three-node Kafka
//! (`KRABKA_BOOTSTRAP_3`, else `ci/kafka.sh start 3`). Member processes (the
//! `member` binary with `--pipe-from`/`--pipe-to`) take turns leading; the
//! leader reads a topic of numbered records with its term's input reader
//! and writes one output per input, the input offsets committed in the
//! same guarded transaction. While a feeder writes the input, the leader
//! is killed (SIGKILL), stopped past its lease (SIGSTOP, then SIGCONT), and
//! told to resign, each while it is writing, and deposed behind its back (a
//! newer epoch minted with Kafka's admin tool, as a successor that took over
//! from a cut-off leader would).
//!
//! At the end a read_committed read of the output must hold each input
//! exactly once, in input order, each written under a token not older than
//! the one before it, and the group's committed offset must be the input's
//! end: no hand-over replayed or skipped input, and no deposed leader's
//! commit moved the group's offsets (a deposed write's offsets landing
//! would show as a replay or a gap). The deposed leader ends fenced (exit
//! 3), and the next term resumes exactly at the position its last
//! successful write committed.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use krabka_coordination::client::Client;
use krabka_coordination::transport::kafka::{KafkaConfig, TopicSpec};
use krabka_examples::{kafka, now_ms, MemberProcess, MemberSpec, Signal};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde_json::Value;

/// The feeder writes an input every [`FEED_EVERY`] until the faults are
/// done (at most [`MAX_INPUTS`]), so every term has input to pipe.
const FEED_EVERY: Duration = Duration::from_millis(40);
const MAX_INPUTS: i64 = 5_000;
/// The members' timings (lease, renew, stagger), as in `e2e_failover`.
const LEASE_MS: u64 = 3_000;
const STATE_PARTITIONS: i32 = 16;

fn bootstrap3() -> String {
    match std::env::var("KRABKA_BOOTSTRAP_3") {
        Ok(b) if !b.is_empty() => b,
        _ => kafka::start_local_kafka(3).unwrap_or_else(|e| {
            panic!("a real three-node Kafka is needed for this test and is not available: {e}")
        }),
    }
}

struct Pipeline {
    bootstrap: String,
    role: String,
    input: String,
    output: String,
    group: String,
    logs: std::path::PathBuf,
}

impl Pipeline {
    fn new() -> Pipeline {
        let bootstrap = bootstrap3();
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let config = KafkaConfig::new(bootstrap.clone()).set("client.id", "krabka-e2e-pipeline");
        let client = Client::new(config)
            .and_then(|c| c.with_partitions(STATE_PARTITIONS))
            .expect("client");
        rt.block_on(
            client.ensure_state_topic(TopicSpec::default().with_partitions(STATE_PARTITIONS)),
        )
        .unwrap_or_else(|e| panic!("ensuring the state topic on {bootstrap}: {e}"));
        let (rf, _) = kafka::replication_for(3);
        let role = kafka::unique("e2e-pipe");
        let (input, output) = (kafka::unique("e2e-pipe-in"), kafka::unique("e2e-pipe-out"));
        for t in [&input, &output] {
            rt.block_on(kafka::create_topic(&bootstrap, t, 1, rf))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let logs = std::env::temp_dir().join("krabka-e2e").join(&role);
        std::fs::create_dir_all(&logs).expect("log dir");
        let group = format!("{role}-group");
        Pipeline {
            bootstrap,
            role,
            input,
            output,
            group,
            logs,
        }
    }

    fn spawn(&self, id: &str) -> MemberProcess {
        MemberSpec::new(
            env!("CARGO_BIN_EXE_member"),
            &self.bootstrap,
            &self.role,
            id,
        )
        .arg("--partitions", STATE_PARTITIONS)
        .arg("--lease-ms", LEASE_MS)
        .arg("--renew-ms", 1_000)
        .arg("--stagger-ms", 1_000)
        .arg("--pipe-from", &self.input)
        .arg("--pipe-to", &self.output)
        .arg("--pipe-group", &self.group)
        .arg("--pipe-batch", 10)
        .flag("--rejoin")
        .flag("--exit-on-stdin-eof")
        .stderr_to(self.logs.join(format!("{id}-{}.stderr", now_ms())))
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Writes the inputs `0, 1, ...` (value: the number) on a thread, one
    /// every [`FEED_EVERY`], idempotent and acks=all, until `stop` (or
    /// [`MAX_INPUTS`]); the thread returns how many it wrote.
    fn feed(&self, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<i64> {
        let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("enable.idempotence", "true")
            .create()
            .expect("the feeder's producer");
        let topic = self.input.clone();
        std::thread::spawn(move || {
            let mut n = 0;
            while n < MAX_INPUTS && !stop.load(Ordering::SeqCst) {
                let value = n.to_string();
                let record = BaseRecord::<(), String>::to(&topic)
                    .partition(0)
                    .payload(&value);
                producer
                    .send(record)
                    .map_err(|(e, _)| e)
                    .expect("feeding an input");
                n += 1;
                std::thread::sleep(FEED_EVERY);
            }
            producer
                .flush(Duration::from_secs(30))
                .expect("flushing the feeder");
            n
        })
    }

    /// The output, read_committed from the start, until `n` records came
    /// or `within` passed.
    fn read_output(&self, n: i64, within: Duration) -> Vec<Value> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("group.id", format!("{}-reader", self.role))
            .set("isolation.level", "read_committed")
            .set("enable.auto.commit", "false")
            .create()
            .expect("the output's reader");
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&self.output, 0, Offset::Beginning)
            .expect("assign");
        consumer.assign(&tpl).expect("assign");
        let deadline = Instant::now() + within;
        let mut out = Vec::new();
        while (out.len() as i64) < n && Instant::now() < deadline {
            if let Some(m) = consumer.poll(Duration::from_millis(200)) {
                let m = m.expect("reading the output");
                let v: Value = serde_json::from_slice(m.payload().expect("a value")).expect("JSON");
                out.push(v);
            }
        }
        out
    }

    /// Mints a newer epoch of the role with Kafka's admin tool
    /// (`kafka-transactions forceTerminateTransaction`): the leader's next
    /// write or renewal is fenced.
    fn mint_newer_epoch(&self) {
        let script = kafka::repo_root().join("ci/kafka.sh");
        let out = std::process::Command::new("bash")
            .arg(&script)
            .args([
                "tool",
                "transactions",
                "--bootstrap-server",
                &self.bootstrap,
            ])
            .args(["forceTerminateTransaction", "--transactionalId", &self.role])
            .stdin(std::process::Stdio::null())
            .output()
            .expect("running ci/kafka.sh tool transactions");
        assert!(
            out.status.success(),
            "forceTerminateTransaction failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The pipeline group's committed offset of the input's partition 0.
    fn committed(&self) -> Option<i64> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("group.id", &self.group)
            .set("isolation.level", "read_committed")
            .set("enable.auto.commit", "false")
            .create()
            .expect("an offsets client");
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(&self.input, 0);
        let got = consumer
            .committed_offsets(tpl, Duration::from_secs(20))
            .expect("OffsetFetch");
        match got.elements()[0].offset() {
            Offset::Offset(o) => Some(o),
            _ => None,
        }
    }
}

/// The member that wrote outputs under a token none of `seen` has, and that
/// token: the leader of a new term, once it is piping.
fn next_writer(
    members: &[MemberProcess],
    seen: &HashSet<String>,
    within: Duration,
) -> (usize, String) {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        for (i, m) in members.iter().enumerate() {
            for e in m.events() {
                let token = e["token"].as_str().unwrap_or_default();
                if e["event"] == "pipe_write" && e["result"] == "ok" && !seen.contains(token) {
                    return (i, token.to_owned());
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("no member wrote outputs under a new token within {within:?}");
}

/// The input position the last `ok` write under `token` committed.
fn last_committed(member: &MemberProcess, token: &str) -> i64 {
    member
        .events()
        .iter()
        .filter(|e| e["event"] == "pipe_write" && e["result"] == "ok" && e["token"] == token)
        .filter_map(|e| e["next"].as_i64())
        .next_back()
        .unwrap_or_else(|| panic!("no write of {} committed under {token}", member.member()))
}

/// Where the term of `token` resumed reading.
fn resumed_at(member: &MemberProcess, token: &str) -> i64 {
    member
        .events()
        .iter()
        .find(|e| e["event"] == "pipe_resumed" && e["token"] == token)
        .and_then(|e| e["offset"].as_i64())
        .unwrap_or_else(|| {
            panic!(
                "{} did not say where the term of {token} resumed",
                member.member()
            )
        })
}

#[test]
fn each_input_once_in_order_through_kills_pauses_and_resigns() {
    let p = Pipeline::new();
    let ids = ["a", "b", "c"];
    let mut members: Vec<MemberProcess> = ids.iter().map(|id| p.spawn(id)).collect();
    let stop_feeding = Arc::new(AtomicBool::new(false));
    let feeder = p.feed(Arc::clone(&stop_feeding));
    let mut seen = HashSet::new();
    let handover = Duration::from_millis(LEASE_MS * 3 + 10_000);

    // Each fault hits the member writing outputs under the newest token.
    for fault in ["kill", "stop", "resign", "fence", "kill", "resign"] {
        let (i, token) = next_writer(&members, &seen, handover);
        seen.insert(token.clone());
        println!("{fault} {} (token {token})", ids[i]);
        match fault {
            "kill" => {
                members[i].kill().expect("SIGKILL");
                members[i] = p.spawn(ids[i]);
            }
            "stop" => {
                members[i].signal(Signal::Stop).expect("SIGSTOP");
                // Past its lease: another member takes over and writes.
                let (_, next) = next_writer(&members, &seen, handover);
                members[i].signal(Signal::Continue).expect("SIGCONT");
                println!("  {next} took over while it was stopped");
                let status = members[i].wait_exit(Duration::from_secs(20));
                assert!(
                    status.is_some(),
                    "the stopped leader did not end its term after SIGCONT"
                );
                members[i] = p.spawn(ids[i]);
            }
            "fence" => {
                p.mint_newer_epoch();
                let status = members[i].wait_exit(handover);
                assert_eq!(
                    status.and_then(|s| s.code()),
                    Some(krabka_examples::exit::FENCED),
                    "the deposed leader must end fenced"
                );
                let committed = last_committed(&members[i], &token);
                members[i] = p.spawn(ids[i]);
                let (j, next) = next_writer(&members, &seen, handover);
                let resumed = resumed_at(&members[j], &next);
                println!(
                    "  {next} resumed at {resumed}; the deposed term committed up to {committed}"
                );
                assert_eq!(
                    resumed, committed,
                    "the next term must resume where the deposed leader's last successful write left the group's offset"
                );
            }
            _ => members[i].send("resign").expect("resign command"),
        }
    }
    // The term after the last fault pipes too, before the feeding stops.
    let (_, last) = next_writer(&members, &seen, handover);
    println!("{last} leads at the end");
    stop_feeding.store(true, Ordering::SeqCst);
    let inputs = feeder.join().expect("the feeder");
    println!("{inputs} inputs fed");

    let out = p.read_output(inputs, Duration::from_secs(60));
    let offsets: Vec<i64> = out
        .iter()
        .map(|v| v["in_offset"].as_i64().unwrap())
        .collect();
    if let Some(at) = (0..inputs)
        .zip(&offsets)
        .position(|(want, got)| want != *got)
    {
        let near = &offsets[at.saturating_sub(3)..(at + 3).min(offsets.len())];
        panic!(
            "the output must hold each input exactly once, in input order: output {at} is input {} (around it: {near:?})",
            offsets[at]
        );
    }
    assert_eq!(
        offsets.len() as i64,
        inputs,
        "outputs read of {inputs} inputs"
    );
    for v in &out {
        assert_eq!(
            v["in_value"].as_str(),
            Some(v["in_offset"].to_string().as_str()),
            "{v}"
        );
    }
    let tokens: Vec<(i64, i64)> = out
        .iter()
        .map(|v| {
            (
                v["producer_id"].as_i64().unwrap(),
                v["epoch"].as_i64().unwrap(),
            )
        })
        .collect();
    for w in tokens.windows(2) {
        let ((p0, e0), (p1, e1)) = (w[0], w[1]);
        assert!(
            p0 != p1 || e1 >= e0,
            "an output under {p1}/{e1} follows one under {p0}/{e0}"
        );
    }
    let terms: HashSet<_> = tokens.iter().collect();
    assert!(
        terms.len() >= 7,
        "expected outputs of seven terms or more, got {}",
        terms.len()
    );
    assert_eq!(
        p.committed(),
        Some(inputs),
        "the group's committed offset is the input's end"
    );
    for m in &mut members {
        m.close_stdin();
        let _ = m.wait_exit(Duration::from_secs(20));
    }
}
