//! The Kafka the examples run against: the local cluster of `ci/kafka.sh`
//! or the one `KRABKA_BOOTSTRAP` names, data topics, unique names.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientConfig;

/// The repository's root directory (where `ci/` lives).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `ci/kafka.sh start <nodes>` (which reuses a running cluster) and
/// returns the bootstrap address it prints last. Its diagnostics go to this
/// process's stderr.
pub fn start_local_kafka(nodes: u32) -> Result<String, String> {
    let script = repo_root().join("ci/kafka.sh");
    let out = Command::new("bash")
        .arg(&script)
        .args(["start", &nodes.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} start {nodes} failed ({})",
            script.display(),
            out.status
        ));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| {
            format!(
                "{} start {nodes} printed no bootstrap address",
                script.display()
            )
        })
}

/// `KRABKA_BOOTSTRAP` when set, else the local 1-node cluster
/// ([`start_local_kafka`]); then checks that every listed broker accepts a
/// TCP connection within 10 s. The error says which broker cannot be
/// reached.
pub fn bootstrap_from_env() -> Result<String, String> {
    let addr = match std::env::var("KRABKA_BOOTSTRAP") {
        Ok(v) if !v.trim().is_empty() => v.trim().to_owned(),
        _ => start_local_kafka(1)
            .map_err(|e| format!("KRABKA_BOOTSTRAP is unset and the local Kafka: {e}"))?,
    };
    for broker in addr.split(',').map(str::trim) {
        reachable(broker, Duration::from_secs(10))?;
    }
    Ok(addr)
}

fn reachable(broker: &str, within: Duration) -> Result<(), String> {
    let deadline = Instant::now() + within;
    let mut last = String::from("no address");
    while Instant::now() < deadline {
        match std::net::ToSocketAddrs::to_socket_addrs(broker).map(|mut a| a.next()) {
            Ok(Some(sa)) => match std::net::TcpStream::connect_timeout(&sa, Duration::from_secs(2))
            {
                Ok(_) => return Ok(()),
                Err(e) => last = e.to_string(),
            },
            Ok(None) => {}
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(format!("Kafka broker {broker} cannot be reached: {last}"))
}

/// How many brokers the cluster at `bootstrap` has (a metadata request,
/// blocking up to 15 s).
pub fn broker_count(bootstrap: &str) -> Result<usize, String> {
    let client: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .map_err(|e| format!("a metadata client for {bootstrap}: {e}"))?;
    client
        .fetch_metadata(None, Duration::from_secs(15))
        .map(|m| m.brokers().len())
        .map_err(|e| format!("Kafka at {bootstrap} does not answer: {e}"))
}

/// The replication factor and `min.insync.replicas` a cluster of `brokers`
/// allows: 3 and 2 from three brokers on, else `brokers` and 1.
pub fn replication_for(brokers: usize) -> (i32, i32) {
    let rf = i32::try_from(brokers.clamp(1, 3)).unwrap_or(1);
    (rf, if rf >= 3 { 2 } else { 1 })
}

/// Creates `topic` with `partitions` partitions and replication factor
/// `rf`; an existing topic is left alone.
pub async fn create_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    rf: i32,
) -> Result<(), String> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .map_err(|e| format!("an admin client for {bootstrap}: {e}"))?;
    let results = admin
        .create_topics(
            [&NewTopic::new(
                topic,
                partitions,
                TopicReplication::Fixed(rf),
            )],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(20))),
        )
        .await
        .map_err(|e| format!("creating {topic}: {e}"))?;
    for r in results {
        match r {
            Ok(_) => {}
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => return Err(format!("creating {name}: {code}")),
        }
    }
    Ok(())
}

/// A name no other run uses: `prefix-<random hex>`.
pub fn unique(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_i64(crate::now_ms());
    h.write_u32(std::process::id());
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    format!("{prefix}-{:016x}", h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replication_follows_the_broker_count() {
        assert_eq!(replication_for(0), (1, 1));
        assert_eq!(replication_for(1), (1, 1));
        assert_eq!(replication_for(2), (2, 1));
        assert_eq!(replication_for(5), (3, 2));
    }

    #[test]
    fn unique_names_differ() {
        let (a, b) = (unique("r"), unique("r"));
        assert_ne!(a, b);
        assert!(a.starts_with("r-"), "{a}");
    }

    #[test]
    fn the_repo_root_holds_ci() {
        assert!(repo_root().join("ci/kafka.sh").exists());
    }
}
