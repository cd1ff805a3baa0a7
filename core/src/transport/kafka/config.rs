//! The configuration of the Kafka transport.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use rdkafka::ClientConfig;

use crate::error::{Error, Result};

/// The connection settings of a [`super::KafkaTransport`] and of the helpers
/// around it.
///
/// A `KafkaConfig` is the bootstrap address plus any librdkafka client
/// settings (`security.protocol`, `sasl.*`, `ssl.*`, `client.id`, socket and
/// retry tuning, ...). Every setting given with [`KafkaConfig::set`] is passed
/// unchanged to every rdkafka client the transport builds (producers,
/// consumers, the admin client). A few settings are the transport's own and
/// always win over a user value, because the four rules depend on them:
///
/// | client                   | forced settings |
/// |--------------------------|-----------------|
/// | lease producer           | `transactional.id = <role>`, `transaction.timeout.ms = <lease>`, `enable.idempotence = true`, `acks = all`, `allow.auto.create.topics = false` |
/// | registration producer    | `enable.idempotence = true`, `acks = all`, `allow.auto.create.topics = false` |
/// | state consumers          | `isolation.level = read_committed`, `enable.partition.eof = true`, `enable.auto.commit = false`, `auto.offset.reset = error` |
/// | admin client             | `allow.auto.create.topics = false` |
///
/// Defaults that a user value overrides: `fetch.wait.max.ms` (from
/// [`KafkaConfig::with_fetch_wait`]), `message.timeout.ms` of the
/// registration producer (from [`KafkaConfig::with_operation_timeout`]),
/// `linger.ms = 0` of the lease and registration producers (unless
/// `linger.ms` or its alias `queue.buffering.max.ms` is set),
/// `reconnect.backoff.ms = 22` of the lease producer (a new producer gets
/// usable sooner), `partitioner = murmur2_random` (Kafka's Java
/// partitioner, used only for guarded writes that leave the partition open)
/// and `client.id`.
///
/// The DescribeTransactions client ([`super::DescribeClient`]) speaks
/// PLAINTEXT only; a configuration with any other `security.protocol`, or
/// with `sasl.*` / `ssl.*` settings, is refused by
/// [`KafkaConfig::check_plaintext`] with an error that names them.
///
/// ```
/// # use krabka_coordination::transport::kafka::KafkaConfig;
/// # use std::time::Duration;
/// let config = KafkaConfig::new("127.0.0.1:9092")
///     .set("client.id", "billing")
///     .set("socket.keepalive.enable", "true")
///     .with_fetch_wait(Duration::from_millis(20));
/// assert_eq!(config.get("client.id"), Some("billing"));
/// ```
#[derive(Clone)]
pub struct KafkaConfig {
    bootstrap: String,
    settings: BTreeMap<String, String>,
    state_topic: String,
    fetch_wait: Duration,
    operation_timeout: Duration,
}

impl KafkaConfig {
    /// The default [`KafkaConfig::fetch_wait`]: 25 ms.
    pub const DEFAULT_FETCH_WAIT: Duration = Duration::from_millis(25);
    /// The default [`KafkaConfig::operation_timeout`]: 30 s.
    pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(30);

    /// A configuration for the cluster at `bootstrap` (`host:port[,host:port...]`),
    /// with the state topic [`crate::STATE_TOPIC`] and no other settings.
    pub fn new(bootstrap: impl Into<String>) -> Self {
        KafkaConfig {
            bootstrap: bootstrap.into(),
            settings: BTreeMap::new(),
            state_topic: crate::STATE_TOPIC.to_owned(),
            fetch_wait: Self::DEFAULT_FETCH_WAIT,
            operation_timeout: Self::DEFAULT_OPERATION_TIMEOUT,
        }
    }

    /// Adds a librdkafka client setting, passed unchanged to every rdkafka
    /// client the transport builds. Setting `bootstrap.servers` replaces the
    /// bootstrap address.
    pub fn set(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let key = key.into();
        let value = value.into();
        if key == "bootstrap.servers" {
            self.bootstrap = value;
        } else {
            self.settings.insert(key, value);
        }
        self
    }

    /// Uses `topic` instead of [`crate::STATE_TOPIC`] as the state topic (for
    /// tests and for clusters that keep several independent coordination
    /// domains).
    pub fn with_state_topic(mut self, topic: impl Into<String>) -> Self {
        self.state_topic = topic.into();
        self
    }

    /// Sets how long a state consumer's fetch request waits at the broker for
    /// new records (`fetch.wait.max.ms`, default 25 ms). The broker answers a
    /// waiting fetch as soon as a commit moves the last stable offset, so a
    /// standby polling with [`crate::transport::StateReader::poll_partition`]
    /// learns of a commit within milliseconds whatever the wait; the wait
    /// sets the cost of a quiet partition, one fetch request per wait. A
    /// `fetch.wait.max.ms` given with [`KafkaConfig::set`] overrides it.
    pub fn with_fetch_wait(mut self, wait: Duration) -> Self {
        self.fetch_wait = wait;
        self
    }

    /// Sets the budget of one blocking client operation: InitProducerId,
    /// commit and abort, a read to the last stable offset, a
    /// DescribeTransactions round trip with its retries, an admin request
    /// (default 30 s). On expiry the operation fails with
    /// [`Error::Transient`].
    pub fn with_operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = timeout;
        self
    }

    /// The bootstrap address.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// The value of a setting given with [`KafkaConfig::set`].
    pub fn get(&self, key: &str) -> Option<&str> {
        self.settings.get(key).map(String::as_str)
    }

    /// Every setting given with [`KafkaConfig::set`], in key order.
    pub fn settings(&self) -> impl Iterator<Item = (&str, &str)> {
        self.settings.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The state topic ([`crate::STATE_TOPIC`] unless changed).
    pub fn state_topic(&self) -> &str {
        &self.state_topic
    }

    /// The fetch wait of the state consumers.
    pub fn fetch_wait(&self) -> Duration {
        self.fetch_wait
    }

    /// The budget of one blocking client operation.
    pub fn operation_timeout(&self) -> Duration {
        self.operation_timeout
    }

    /// Checks the values the transport relies on: a non-empty bootstrap
    /// address and state topic, a fetch wait within librdkafka's bounds and a
    /// positive operation timeout.
    pub fn validate(&self) -> Result<()> {
        if self.bootstrap.trim().is_empty() {
            return Err(Error::InvalidArgument(
                "the bootstrap address is empty".into(),
            ));
        }
        if self.state_topic.is_empty() {
            return Err(Error::InvalidArgument(
                "the state topic name is empty".into(),
            ));
        }
        let wait = self.fetch_wait.as_millis();
        if wait > 300_000 {
            return Err(Error::InvalidArgument(format!(
                "fetch wait {:?} is over librdkafka's limit of 300 s (fetch.wait.max.ms)",
                self.fetch_wait
            )));
        }
        if self.operation_timeout.is_zero() {
            return Err(Error::InvalidArgument(
                "the operation timeout must be positive, got 0".into(),
            ));
        }
        Ok(())
    }

    /// Refuses every setting the DescribeTransactions client cannot honour: a
    /// `security.protocol` other than `plaintext`, and any `sasl.*` or
    /// `ssl.*` setting. The error names each of them.
    pub fn check_plaintext(&self) -> Result<()> {
        let mut refused = Vec::new();
        for (k, v) in &self.settings {
            let lower = k.to_ascii_lowercase();
            if lower == "security.protocol" {
                if !v.eq_ignore_ascii_case("plaintext") {
                    refused.push(format!("security.protocol={v}"));
                }
            } else if lower.starts_with("sasl.") || lower.starts_with("ssl.") {
                refused.push(k.clone());
            }
        }
        if refused.is_empty() {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "the DescribeTransactions client supports PLAINTEXT only; unsupported security settings: {}",
                refused.join(", ")
            )))
        }
    }

    /// The timeout in whole milliseconds, at least 1, for librdkafka.
    pub(crate) fn operation_timeout_ms(&self) -> u64 {
        (self.operation_timeout.as_millis() as u64).max(1)
    }

    /// An rdkafka configuration with the bootstrap address, the transport's
    /// overridable defaults and then every user setting.
    pub(crate) fn client_config(&self, client_id_suffix: &str) -> ClientConfig {
        let mut cc = ClientConfig::new();
        cc.set("bootstrap.servers", &self.bootstrap);
        cc.set("client.id", format!("krabka-{client_id_suffix}"));
        for (k, v) in &self.settings {
            cc.set(k, v);
        }
        cc
    }
}

impl fmt::Debug for KafkaConfig {
    /// Prints every setting, with the values of secrets (any key naming a
    /// password, secret, token or key material) replaced by `***`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let settings: BTreeMap<&str, &str> = self
            .settings
            .iter()
            .map(|(k, v)| (k.as_str(), if is_secret(k) { "***" } else { v.as_str() }))
            .collect();
        f.debug_struct("KafkaConfig")
            .field("bootstrap", &self.bootstrap)
            .field("settings", &settings)
            .field("state_topic", &self.state_topic)
            .field("fetch_wait", &self.fetch_wait)
            .field("operation_timeout", &self.operation_timeout)
            .finish()
    }
}

fn is_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    [
        "password",
        "secret",
        "token",
        ".key.pem",
        "sasl.jaas",
        "private",
    ]
    .iter()
    .any(|s| k.contains(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_pass_through_unchanged() {
        let c = KafkaConfig::new("h:1")
            .set("socket.timeout.ms", "1234")
            .set("client.id", "x");
        let cc = c.client_config("reg");
        assert_eq!(cc.get("bootstrap.servers"), Some("h:1"));
        assert_eq!(cc.get("socket.timeout.ms"), Some("1234"));
        // A user client.id wins over the default.
        assert_eq!(cc.get("client.id"), Some("x"));
        let c = KafkaConfig::new("h:1").set("bootstrap.servers", "h:2");
        assert_eq!(c.bootstrap(), "h:2");
        assert_eq!(c.get("bootstrap.servers"), None);
    }

    #[test]
    fn refuses_security_the_describe_client_lacks() {
        assert!(KafkaConfig::new("h:1").check_plaintext().is_ok());
        assert!(KafkaConfig::new("h:1")
            .set("security.protocol", "PLAINTEXT")
            .check_plaintext()
            .is_ok());
        let e = KafkaConfig::new("h:1")
            .set("security.protocol", "SASL_SSL")
            .set("sasl.mechanism", "PLAIN")
            .set("ssl.ca.location", "/x")
            .check_plaintext()
            .unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::InvalidArgument(_)), "{msg}");
        for name in [
            "security.protocol=SASL_SSL",
            "sasl.mechanism",
            "ssl.ca.location",
        ] {
            assert!(msg.contains(name), "{msg} should name {name}");
        }
    }

    #[test]
    fn debug_hides_secrets() {
        let c = KafkaConfig::new("h:1")
            .set("sasl.password", "hunter2")
            .set("linger.ms", "5");
        let s = format!("{c:?}");
        assert!(!s.contains("hunter2"), "{s}");
        assert!(s.contains("linger.ms"), "{s}");
    }

    #[test]
    fn validate_names_bad_values() {
        assert!(KafkaConfig::new(" ")
            .validate()
            .unwrap_err()
            .to_string()
            .contains("bootstrap"));
        assert!(KafkaConfig::new("h:1")
            .with_state_topic("")
            .validate()
            .is_err());
        assert!(KafkaConfig::new("h:1")
            .with_operation_timeout(Duration::ZERO)
            .validate()
            .is_err());
        assert!(KafkaConfig::new("h:1")
            .with_fetch_wait(Duration::from_secs(301))
            .validate()
            .is_err());
        assert!(KafkaConfig::new("h:1").validate().is_ok());
    }
}
