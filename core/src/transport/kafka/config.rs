//! The configuration of the Kafka transport.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::ClientConfig;

use super::oauth::{OAuthToken, OAuthTokenError, TokenSource};
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
/// partitioner, used only for guarded writes that leave the partition open),
/// `topic.metadata.refresh.interval.ms = 3000` of the state consumers (a
/// partition leader cut off from the controller is left within seconds of
/// the move; librdkafka's default is 5 minutes) and `client.id`.
///
/// Two settings are refused ([`KafkaConfig::validate`]):
/// `transactional.id` (the transport sets it to each role: the role *is*
/// the transactional id) and a `client.id` longer than a Kafka request
/// header holds (32767 bytes). Producer timeouts longer than a member's
/// lease (`message.timeout.ms`, its alias `delivery.timeout.ms`,
/// `socket.timeout.ms`) and a `transaction.timeout.ms` other than the lease
/// are refused when the member starts, before it registers (see
/// [`crate::transport::Coordinator::check_member`]).
///
/// # Timeouts
///
/// * The **connect timeout** ([`KafkaConfig::with_connect_timeout`], 10 s)
///   bounds the first contact with the cluster: when no broker of the
///   bootstrap address answers within it, a member's acquire and a describe
///   fail with [`Error::Transient`] naming the bootstrap address, instead of
///   waiting. It also bounds each connect of the protocol client.
///   Once a broker has answered, a member that loses the cluster keeps
///   retrying (and reports each retry as an event).
/// * The **operation timeout** ([`KafkaConfig::with_operation_timeout`],
///   30 s) bounds each blocking client operation once the cluster answered.
///
/// Both are at most `i32::MAX` milliseconds (librdkafka's limit).
///
/// The project's own protocol client ([`super::KafkaClient`]: the
/// DescribeTransactions requests and the epoch bump) reads the same
/// security settings: TLS (rustls) and SASL PLAIN, SCRAM-SHA-256,
/// SCRAM-SHA-512 and OAUTHBEARER (with a token provider:
/// [`KafkaConfig::with_oauth_token_provider`]). A security setting it cannot
/// honour is refused by [`KafkaConfig::check_security`] with an error that
/// names it.
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
    connect_timeout: Duration,
    /// The value given for the removed [`KafkaConfig::REMOVED_LEASE_PATH_SETTING`],
    /// refused by [`KafkaConfig::validate`].
    removed_lease_path: Option<String>,
    /// The value given for [`KafkaConfig::ALLOW_HANGING_TRANSACTIONS_SETTING`],
    /// checked by [`KafkaConfig::validate`].
    hanging_transactions: Option<String>,
    /// The OAUTHBEARER token provider and its last token, shared by clones.
    oauth: Option<Arc<TokenSource>>,
}

impl KafkaConfig {
    /// The default [`KafkaConfig::fetch_wait`]: 25 ms.
    pub const DEFAULT_FETCH_WAIT: Duration = Duration::from_millis(25);
    /// The default [`KafkaConfig::operation_timeout`]: 30 s.
    pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(30);
    /// The default [`KafkaConfig::connect_timeout`]: 10 s.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
    /// The longest timeout librdkafka takes: `i32::MAX` milliseconds (about
    /// 24.8 days).
    pub const MAX_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);
    /// `krabka.lease.path`, the setting that chose between the librdkafka
    /// lease path and the protocol client's before 0.2. The librdkafka lease
    /// path is gone: a configuration that sets it, to any value, is refused
    /// by [`KafkaConfig::validate`] naming it as removed, so no member runs
    /// on a path other than the one its operator asked for.
    pub const REMOVED_LEASE_PATH_SETTING: &'static str = "krabka.lease.path";
    /// `krabka.allow.hanging.transactions`: `true` lets members run on a
    /// cluster without broker-side transaction verification (Kafka 3.0 to
    /// 3.5, or any broker with
    /// `transaction.partition.verification.enable=false`), which a member
    /// otherwise refuses before it registers. The risk the name states: on
    /// such a cluster a guarded write delayed in the network can land after
    /// its transaction ended, as a transaction no coordinator knows and
    /// nothing ever ends (a hanging transaction), which holds its
    /// partition's `read_committed` readers back until an operator aborts
    /// it (`kafka-transactions.sh abort`). The lease writer never aborts
    /// while a batch of its own is unanswered, which closes the path the
    /// project knows of; the setting accepts what the broker no longer
    /// checks. `true` or `false` (the default); another value is refused.
    /// Also [`KafkaConfig::allow_hanging_transactions`].
    pub const ALLOW_HANGING_TRANSACTIONS_SETTING: &'static str =
        "krabka.allow.hanging.transactions";
    /// The longest `client.id` a Kafka request header holds, in bytes.
    pub const MAX_CLIENT_ID_LEN: usize = i16::MAX as usize;

    /// A configuration for the cluster at `bootstrap` (`host:port[,host:port...]`),
    /// with the state topic [`crate::STATE_TOPIC`] and no other settings.
    pub fn new(bootstrap: impl Into<String>) -> Self {
        KafkaConfig {
            bootstrap: bootstrap.into(),
            settings: BTreeMap::new(),
            state_topic: crate::STATE_TOPIC.to_owned(),
            fetch_wait: Self::DEFAULT_FETCH_WAIT,
            operation_timeout: Self::DEFAULT_OPERATION_TIMEOUT,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            removed_lease_path: None,
            hanging_transactions: None,
            oauth: None,
        }
    }

    /// Adds a librdkafka client setting, passed unchanged to every rdkafka
    /// client the transport builds. Setting `bootstrap.servers` replaces the
    /// bootstrap address. The removed
    /// [`KafkaConfig::REMOVED_LEASE_PATH_SETTING`] is kept aside, for
    /// [`KafkaConfig::validate`] to refuse, and
    /// [`KafkaConfig::ALLOW_HANGING_TRANSACTIONS_SETTING`] is the
    /// transport's own, never passed to librdkafka.
    pub fn set(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let key = key.into();
        let value = value.into();
        if key == "bootstrap.servers" {
            self.bootstrap = value;
        } else if key == Self::REMOVED_LEASE_PATH_SETTING {
            self.removed_lease_path = Some(value);
        } else if key == Self::ALLOW_HANGING_TRANSACTIONS_SETTING {
            self.hanging_transactions = Some(value);
        } else {
            self.settings.insert(key, value);
        }
        self
    }

    /// Sets [`KafkaConfig::ALLOW_HANGING_TRANSACTIONS_SETTING`]: with `true`,
    /// members run on a cluster without broker-side transaction
    /// verification, accepting the risk that setting describes.
    pub fn allow_hanging_transactions(self, allow: bool) -> Self {
        self.set(Self::ALLOW_HANGING_TRANSACTIONS_SETTING, allow.to_string())
    }

    /// Whether [`KafkaConfig::ALLOW_HANGING_TRANSACTIONS_SETTING`] is `true`
    /// (any value but `true` is `false` here; [`KafkaConfig::validate`]
    /// refuses one that is neither).
    pub fn allows_hanging_transactions(&self) -> bool {
        self.hanging_transactions
            .as_deref()
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
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

    /// Sets how long the first contact with the cluster may take (default
    /// 10 s): when no broker of the bootstrap address answers within it, a
    /// member's acquire ([`crate::client::Client::acquire`]) and a describe
    /// ([`crate::client::Client::describe_leadership`]) fail with
    /// [`Error::Transient`] naming the bootstrap address, and nothing is
    /// registered. It also bounds each connect of the DescribeTransactions
    /// client. A member that reached the cluster once and loses it later
    /// keeps retrying instead (see [`crate::events::EventKind::Retrying`]).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Supplies the OAUTHBEARER tokens of every client built from this
    /// configuration (with `security.protocol` `SASL_SSL` or
    /// `SASL_PLAINTEXT` and `sasl.mechanism` `OAUTHBEARER`): the librdkafka
    /// clients and the project's own protocol client alike.
    ///
    /// `provider` returns a valid token: its value (often a JWT; printable
    /// ASCII without spaces), when it expires, and optionally the principal
    /// it names (for the clients' logs; the broker reads the principal from
    /// the token). It is called when a client first needs a token and then,
    /// on a thread of its own, half-way through each token's life; the
    /// clients of one configuration (and of its clones) share the token it
    /// returned and take the next one at 80 % of theirs, so it is called
    /// about twice per token lifetime, and a client with a token never waits
    /// for it. It may block (an HTTP request to an identity provider) but
    /// should answer well within the connect timeout; it runs on that
    /// thread, librdkafka's threads and tokio's blocking pool. Tokens should
    /// live minutes, as usual: librdkafka looks at its refresh time once a
    /// second, so tokens of a few seconds can expire before it asks.
    ///
    /// A failing provider is an error naming the token provider with its
    /// message: [`Error::Transient`], or [`Error::Fatal`] when it returned
    /// this crate's fatal error (e.g. `Error::fatal("fetching a token",
    /// "the client credentials were revoked")`), which no retry mends, or
    /// [`Error::InvalidArgument`] when it returned that. A panic is a fatal
    /// error too. Once a token was given, a failing
    /// refresh keeps the last token in use until it expires. A token
    /// already expired, empty or with spaces or control characters is
    /// [`Error::InvalidArgument`]. SASL extensions are not supported.
    ///
    /// librdkafka's own token retrieval (`sasl.oauthbearer.method=oidc`,
    /// `sasl.oauthbearer.config`, `enable.sasl.oauthbearer.unsecure.jwt`,
    /// ...) is refused ([`KafkaConfig::check_security`]): the protocol
    /// client could not use it.
    ///
    /// ```
    /// # use krabka_coordination::transport::kafka::{KafkaConfig, OAuthToken};
    /// # use std::time::{Duration, SystemTime};
    /// # fn fetch_from_identity_provider() -> std::io::Result<(String, u64)> { Ok(("eyJ...".into(), 3600)) }
    /// let config = KafkaConfig::new("broker-1.example:9093")
    ///     .set("security.protocol", "SASL_SSL")
    ///     .set("sasl.mechanism", "OAUTHBEARER")
    ///     .with_oauth_token_provider(|| {
    ///         let (jwt, expires_in) = fetch_from_identity_provider()?;
    ///         let expires_at = SystemTime::now() + Duration::from_secs(expires_in);
    ///         Ok(OAuthToken::new(jwt, expires_at).with_principal("billing"))
    ///     });
    /// assert!(config.has_oauth_token_provider());
    /// assert!(config.check_security().is_ok());
    /// ```
    pub fn with_oauth_token_provider<F>(mut self, provider: F) -> Self
    where
        F: Fn() -> std::result::Result<OAuthToken, OAuthTokenError> + Send + Sync + 'static,
    {
        self.oauth = Some(Arc::new(TokenSource::new(move || {
            provider().map_err(as_client_error)
        })));
        self
    }

    /// True when an OAUTHBEARER token provider was given
    /// ([`KafkaConfig::with_oauth_token_provider`]).
    pub fn has_oauth_token_provider(&self) -> bool {
        self.oauth.is_some()
    }

    /// The token provider and its cache, shared by every client.
    pub(crate) fn token_source(&self) -> Option<Arc<TokenSource>> {
        self.oauth.clone()
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

    /// The bound of the first contact with the cluster (see
    /// [`KafkaConfig::with_connect_timeout`]).
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// The timeout in whole milliseconds, at least 1, for librdkafka.
    pub(crate) fn operation_timeout_ms(&self) -> u64 {
        (self.operation_timeout.as_millis() as u64).max(1)
    }

    /// An rdkafka configuration with the bootstrap address, the transport's
    /// overridable defaults and then every user setting.
    ///
    /// `client_id_suffix` must come from [`client_id_part`] (plus a fixed
    /// client name), so the default `client.id` stays short.
    pub(crate) fn client_config(&self, client_id_suffix: &str) -> ClientConfig {
        let mut cc = ClientConfig::new();
        cc.set("bootstrap.servers", &self.bootstrap);
        cc.set("client.id", format!("krabka-{client_id_suffix}"));
        // An OpenSSL built with the crate (the `vendored` feature) looks for
        // CA certificates under its own build-time directory, which the
        // machines running it do not have: librdkafka then probes the usual
        // CA locations of Linux distributions instead, unless the user names
        // the CAs. The system OpenSSL of a default build knows its own.
        if cfg!(feature = "vendored")
            && !self.settings.contains_key("ssl.ca.location")
            && !self.settings.contains_key("ssl.ca.pem")
        {
            cc.set("ssl.ca.location", "probe");
        }
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
            .field("connect_timeout", &self.connect_timeout)
            .field(
                "oauth_token_provider",
                &self.oauth.as_ref().map(|_| "(a function)"),
            )
            .finish()
    }
}

/// The longest member id used verbatim in a default `client.id`.
const CLIENT_ID_PART_MAX: usize = 48;

/// A member id as it goes into the default `client.id`
/// (`krabka-<part>-<client>`): the id itself when it is short and plain
/// (ASCII letters, digits, `.`, `_`, `-`), otherwise its first characters
/// (others replaced by `_`) and a hash of the whole id. A member id may be
/// 32767 bytes long; a request header's `client.id` must stay far below
/// that, and librdkafka takes no NUL byte.
pub(crate) fn client_id_part(member: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if member.len() <= CLIENT_ID_PART_MAX && member.chars().all(plain) {
        return member.to_owned();
    }
    // FNV-1a, 64 bits: stable across runs and platforms.
    let hash = member.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let head: String = member
        .chars()
        .take(32)
        .map(|c| if plain(c) { c } else { '_' })
        .collect();
    format!("{head}-{hash:016x}")
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

/// A provider's error for the Kafka client's token source, which keeps a
/// fatal error fatal and an invalid argument invalid only when they are its
/// own kinds: the crate's [`Error::Fatal`] and [`Error::InvalidArgument`]
/// (what a binding's provider returns) become the client's
/// ([`Error::into_kafka_client`], the one mapping between the two); any
/// other error stays as it is (a retry may mend it).
fn as_client_error(e: OAuthTokenError) -> OAuthTokenError {
    match e.downcast::<Error>() {
        Ok(core) => match core.into_kafka_client() {
            Ok(client) => Box::new(client),
            Err(other) => Box::new(other),
        },
        Err(e) => e,
    }
}

mod checks;

#[cfg(test)]
mod tests;
