//! The client: connections to every broker of a cluster, the coordinator
//! and partition leader of each key found and cached, and the requests that
//! travel through them.
//!
//! # Requests
//!
//! On every new connection: ApiVersions (v3, falling back to v0), then
//! SaslHandshake v1 and SaslAuthenticate when SASL is on (the `wire`
//! module). Then, by what the caller asks: FindCoordinator (transaction or
//! group key) at a bootstrap broker, DescribeTransactions v0 and
//! InitProducerId (v0 to v4) at the transaction coordinator,
//! AddPartitionsToTxn (v0 to v3), EndTxn (v0 to v4) at the coordinator and a
//! transactional Produce (v3 to v11) at the partition leader (the `txn`
//! module), Metadata and ListOffsets (the `metadata` module), Metadata and
//! DescribeConfigs before a data partition joins a transaction (the
//! `writable` module),
//! DescribeProducers at a partition's leader (the `producers` module), a
//! read_uncommitted Fetch at a partition's leader (the `fetch` module), a
//! read_committed Fetch of assigned partitions at their leaders and
//! ListOffsets earliest or latest for a reset policy (the `read` module),
//! AddOffsetsToTxn (v0 to v4) at the transaction coordinator and
//! TxnOffsetCommit (v0 to v4) and OffsetFetch (v7 or v8, `require_stable`)
//! at a consumer group's coordinator (the `offsets` and `group` modules), and
//! the three authorizer questions that change nothing (the `access`
//! module). Every one goes through the request layer (the `request`
//! module) and, when retried, its one retry loop (the [`retry`] module).
//!
//! The coordinator of each transactional id and of each consumer group, the
//! leader of each partition and the connections to each broker are cached, so once they are known a
//! request costs exactly one round trip. The client finds the coordinator
//! again on `NOT_COORDINATOR`, `COORDINATOR_NOT_AVAILABLE`, on a
//! connection error and once it is [`COORDINATOR_MAX_AGE`] old, and waits and retries on
//! `COORDINATOR_LOAD_IN_PROGRESS`, all within the operation timeout of the
//! [`Settings`]. Until a broker has answered once, a request gets the
//! connect timeout instead, and an unreachable cluster fails with
//! [`Error::Transient`] naming the bootstrap address.
//!
//! A broker reads a connection's next request only once it has answered the
//! one before: the client keeps up to [`Client::CONNECTIONS_PER_BROKER`]
//! connections to a broker, opens a second one only while requests
//! overlap, and sends one request at a time on each. A request that finds
//! them all busy waits in the client, in turn, and its attempt's request
//! timeout starts once it is sent, so a broker that answers a load slowly
//! but surely is never taken for a stalled one.
//!
//! # Security
//!
//! TLS and SASL as the [`Settings`]' [`Security`] says. A failed
//! authentication (naming the mechanism and the user, or the token
//! provider), an untrusted or misnamed broker certificate and a mechanism
//! the broker does not enable are [`Error::Fatal`] at once, never retried;
//! a token provider that fails ends the request at once with its error.
//!
//! A broker that sets a SASL session lifetime (KIP-368,
//! `connections.max.reauth.ms`) ends each connection's session then: the
//! client stops sending new requests on a connection at 85 % of its
//! lifetime and makes a new one (requests in flight finish on the old one),
//! so no request meets the end of a session.
//!
//! # Answers
//!
//! `TRANSACTIONAL_ID_NOT_FOUND` (an id no producer has used, or whose id the
//! coordinator expired after `transactional.id.expiration.ms`) is `None`.
//! Authorization failures are [`Error::Fatal`] naming the resource (the
//! transactional id, the topic, the group or the cluster) and never retried;
//! everything that may pass is [`Error::Transient`]. A transactional id the
//! protocol cannot carry (empty, over 32767 bytes, a NUL byte) is refused
//! before any request ([`Error::InvalidArgument`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeTransactionsRequest, DescribeTransactionsResponse, FetchRequest,
    FindCoordinatorRequest, FindCoordinatorResponse, InitProducerIdRequest, TopicName,
    TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tokio::sync::Mutex as AsyncMutex;
use tokio::time::Instant;

mod access;
mod address;
use address::{format_addr, parse_bootstrap};
mod committed;
mod confirm;
mod coordinator;
mod fetch;
use fetch::one_batch_fetch;
mod group;
mod list_offsets;
mod metadata;
pub use metadata::LEADER_MAX_AGE;
mod offsets;
pub use offsets::{Committed, OffsetToCommit, PartitionCommitted};
mod pool;
mod producer_id;
mod producers;
mod read;
pub use read::{OutOfRange, PartitionRead, ReadError, ReadFrom, Reset};
mod request;
mod resolve;
pub mod retry;
mod routes;
mod txn;
mod versions;
mod writable;
use crate::deadline_in;
use crate::security::{Credentials, SaslSettings, Security};
use crate::settings::Settings;
use crate::wire::{Connection, OpenError};
pub use confirm::BROKERS_MAX_AGE;
pub use fetch::Fetched;
pub use producer_id::BumpAnswer;
pub use producers::ActiveProducer;
pub(crate) use request::Attempt;
use request::{attempt_for, denied, read_answer, Reached, Target, GROUP_HAS_MEMBERS};
pub use retry::busy_pause;
use retry::Backoff;
pub use routes::{COORDINATOR_MAX_AGE, FORGET_AFTER};
pub use txn::TxnError;
pub use versions::Versions;
pub use writable::{DEGRADED_MAX_AGE, MIN_INSYNC_TTL};

/// One of a broker's connections, once made.
type ConnectionSlot = Arc<AsyncMutex<Option<Arc<Connection>>>>;
use crate::codes::{self, Meaning, Resource};
use crate::error::{Error, ProducerEpoch, Result};

/// FindCoordinator's key type of a transactional id.
const KEY_TYPE_TRANSACTION: i8 = 1;
/// FindCoordinator's key type of a consumer group.
const KEY_TYPE_GROUP: i8 = 0;

/// What the transaction coordinator reports about one transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionDescription {
    /// The transactional id (the role).
    pub transactional_id: String,
    /// The coordinator's state of the id: `Empty`, `Ongoing`, `PrepareCommit`,
    /// `PrepareAbort`, `CompleteCommit`, `CompleteAbort`, `PrepareEpochFence`
    /// or `Dead`.
    pub state: String,
    /// The transaction timeout the last InitProducerId gave (the lease
    /// duration), in milliseconds.
    pub timeout_ms: i32,
    /// When the open transaction started (epoch milliseconds), or -1.
    pub start_time_ms: i64,
    /// The current producer id and epoch.
    pub producer: ProducerEpoch,
    /// The partitions of the open transaction, by topic.
    pub topics: Vec<(String, Vec<i32>)>,
}

/// A Kafka protocol client of one cluster.
///
/// Cheap to clone; clones share the cached coordinators, leaders and
/// connections. Needs a tokio runtime.
///
/// ```no_run
/// # async fn f() -> krabka_kafka::Result<()> {
/// use krabka_kafka::{Client, Settings};
/// let client = Client::new(&Settings::new("127.0.0.1:9092"))?;
/// if let Some(d) = client.describe_transaction("billing").await? {
///     println!("billing: producer {} in state {}", d.producer, d.state);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    bootstrap: Vec<String>,
    /// The bootstrap address as configured, for error messages.
    bootstrap_text: String,
    client_id: StrBytes,
    timeout: Duration,
    /// The longest a connect and its ApiVersions handshake may take, and
    /// the whole budget of a request while no broker has answered yet.
    connect_timeout: Duration,
    /// The longest one attempt waits for its answer.
    request_timeout: Duration,
    /// True once a connection to any broker was made.
    reached: AtomicBool,
    /// Transactional id → its coordinator, the broker that named it and
    /// when (aged and swept as the `routes` module says).
    coordinators: StdMutex<routes::Aged<routes::Route>>,
    /// Consumer group → its group coordinator, aged as `coordinators` (the
    /// `group` module).
    group_coordinators: StdMutex<routes::Aged<routes::Route>>,
    /// Consumer group → a group coordinator forgotten for saying it moved
    /// or for not answering: its next lookup asks it last.
    group_suspect: StdMutex<routes::Aged<routes::Suspect>>,
    /// Transactional id → the coordinator answering CONCURRENT_TRANSACTIONS
    /// and since when (the `request` module's `note_busy`).
    busy_since: StdMutex<HashMap<String, (String, Instant)>>,
    /// Transactional id → a coordinator forgotten for answering
    /// CONCURRENT_TRANSACTIONS too long, for saying it moved, or for not
    /// answering, and the broker that named it: its next lookup asks it
    /// last and begins after the one that named it (aged and swept as the
    /// `routes` module says).
    suspect: StdMutex<routes::Aged<routes::Suspect>>,
    /// The cluster's brokers and broker count as Metadata named them (the
    /// `confirm` module).
    brokers: StdMutex<confirm::BrokerList>,
    /// (topic, partition) → its leader, and when Metadata named it (see
    /// [`metadata::LEADER_MAX_AGE`]).
    leaders: StdMutex<HashMap<(String, i32), metadata::Leader>>,
    /// (topic, partition) → the newest leader epoch Metadata named, and the
    /// topic's id: an answer naming an older epoch of the same topic comes
    /// from a broker behind the controller, and is not taken (see the
    /// `metadata` module).
    leader_epochs: StdMutex<HashMap<(String, i32), (u128, i32)>>,
    /// Topic → a leader of it that did not answer or said it moved, or a
    /// broker behind the controller: the topic's next Metadata asks it
    /// last, and begins after the broker that named it.
    suspect_leader: StdMutex<HashMap<String, routes::Suspect>>,
    /// Topic → its partition count (guarded writes that leave the
    /// partition open).
    partition_counts: StdMutex<HashMap<String, i32>>,
    /// Topic → when Metadata first said it does not exist (the `metadata`
    /// module's grace for a topic created a moment ago).
    missing_since: StdMutex<HashMap<String, Instant>>,
    /// Topic → when its `min.insync.replicas` was asked, and the answer
    /// (the `writable` module).
    min_insync: StdMutex<HashMap<String, (Instant, Option<usize>)>>,
    /// The topics whose `min.insync.replicas` equal to their replication
    /// factor was warned about (the `writable` module).
    warned_min_insync: StdMutex<std::collections::HashSet<String>>,
    /// The member access questions answered "allowed" (`access.rs`).
    allowed: StdMutex<std::collections::HashSet<String>>,
    /// Held by the check asking the questions every role shares.
    asking: tokio::sync::Mutex<()>,
    /// Broker address → when it began to let connects or requests run out
    /// of time, until it next answers (see the `pool` module).
    stalled: StdMutex<HashMap<String, Instant>>,
    /// Broker address → its connections (see the `pool` module). The map's
    /// lock is held only to find them.
    connections: StdMutex<HashMap<String, Arc<pool::BrokerConnections>>>,
    requests: Arc<crate::wire::Sent>,
    /// Connections made (each with its handshakes).
    connects: AtomicU64,
    /// The SASL session lifetime of the last connection made, in ms (0:
    /// none).
    session_lifetime_ms: AtomicU64,
    /// TLS and SASL of every connection.
    security: Security,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("bootstrap", &self.inner.bootstrap)
            .field("timeout", &self.inner.timeout)
            .field("requests_sent", &self.requests_sent())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// The most connections the client keeps to one broker, each carrying
    /// one request at a time (see the module docs): one while requests come
    /// one at a time, more while they overlap.
    pub const CONNECTIONS_PER_BROKER: usize = 16;

    /// A client for the cluster of `settings`. Connects lazily.
    ///
    /// Refuses a malformed bootstrap address and a zero timeout
    /// ([`Error::InvalidArgument`] naming it).
    pub fn new(settings: &Settings) -> Result<Self> {
        settings.validate()?;
        let security = settings.security.clone();
        let bootstrap = parse_bootstrap(&settings.bootstrap, security.protocol.name())?;
        Ok(Client {
            inner: Arc::new(Inner {
                bootstrap,
                bootstrap_text: settings.bootstrap.clone(),
                client_id: StrBytes::from_string(settings.client_id.clone()),
                timeout: settings.operation_timeout,
                connect_timeout: settings.connect_timeout,
                request_timeout: settings.request_timeout,
                reached: AtomicBool::new(false),
                coordinators: StdMutex::new(routes::Aged::new()),
                group_coordinators: StdMutex::new(routes::Aged::new()),
                group_suspect: StdMutex::new(routes::Aged::new()),
                busy_since: StdMutex::new(HashMap::new()),
                suspect: StdMutex::new(routes::Aged::new()),
                leaders: StdMutex::new(HashMap::new()),
                leader_epochs: StdMutex::new(HashMap::new()),
                suspect_leader: StdMutex::new(HashMap::new()),
                brokers: StdMutex::default(),
                partition_counts: StdMutex::new(HashMap::new()),
                missing_since: StdMutex::new(HashMap::new()),
                min_insync: StdMutex::new(HashMap::new()),
                warned_min_insync: StdMutex::new(std::collections::HashSet::new()),
                allowed: StdMutex::new(std::collections::HashSet::new()),
                asking: tokio::sync::Mutex::new(()),
                connections: StdMutex::new(HashMap::new()),
                stalled: StdMutex::new(HashMap::new()),
                requests: Arc::default(),
                connects: AtomicU64::new(0),
                session_lifetime_ms: AtomicU64::new(0),
                security,
            }),
        })
    }

    /// The operation timeout of the settings: the budget of a request with
    /// its retries.
    pub fn operation_timeout(&self) -> Duration {
        self.inner.timeout
    }

    /// On a secured cluster (TLS or SASL), connects to a bootstrap broker
    /// once, so that what no retry mends (a refused password, an untrusted
    /// or misnamed certificate) fails at once as [`Error::Fatal`] naming
    /// it, before the caller's other clients (librdkafka's only report it
    /// in their logs, then time out). Retries a broker that does not answer until
    /// the connect timeout, then fails with [`Error::Transient`] naming the
    /// bootstrap address. Does nothing on PLAINTEXT, or once a broker has
    /// answered this client. The connection made stays for later requests.
    ///
    /// With OAUTHBEARER it also makes sure the configuration's token cache
    /// holds a fresh token (asking the provider on tokio's blocking pool if
    /// not), so that the caller's other clients made next take it from
    /// there.
    pub async fn check_access(&self) -> Result<()> {
        if self.inner.security.tls.is_none() && self.inner.security.sasl.is_none() {
            return Ok(());
        }
        if let Some(SaslSettings {
            credentials: Credentials::Token(source),
            ..
        }) = &self.inner.security.sasl
        {
            let source = Arc::clone(source);
            let context = "getting an OAUTHBEARER token from the token provider";
            let within = self.inner.connect_timeout;
            tokio::time::timeout(within, tokio::task::spawn_blocking(move || source.token()))
                .await
                .map_err(|_| {
                    Error::transient(
                        context,
                        format!(
                            "the provider did not answer within {} (the connect timeout)",
                            crate::human::duration(within)
                        ),
                    )
                })?
                .map_err(|e| Error::fatal(context, e.to_string()))??;
        }
        self.ensure_reached().await
    }

    /// Until a broker has answered this client, connects to a bootstrap
    /// broker, retrying one that does not answer until the connect timeout,
    /// then fails with [`Error::Transient`] naming the bootstrap address.
    /// Once one has answered, returns at once. For callers whose own
    /// clients (librdkafka's) would wait their whole operation timeout on
    /// an unreachable cluster.
    pub async fn ensure_reached(&self) -> Result<()> {
        if self.inner.reached.load(Ordering::Relaxed) {
            return Ok(());
        }
        let (deadline, budget) = self.deadline(self.inner.connect_timeout);
        self.retrying(
            || "connecting to the cluster".to_owned(),
            deadline,
            budget,
            Backoff::LOOKUP,
            || self.at_bootstrap(deadline, |_| async { Ok(()) }),
        )
        .await
    }

    /// How many Kafka requests (ApiVersions, SaslHandshake,
    /// SaslAuthenticate, FindCoordinator, DescribeTransactions,
    /// InitProducerId, the EndTxn and Fetch of a member's ACL check, and the
    /// Metadata and Fetch that read a batch's writer)
    /// this client and its clones have sent.
    pub fn requests_sent(&self) -> u64 {
        self.inner.requests.all.load(Ordering::Relaxed)
    }

    /// How many of [`Client::requests_sent`] were DescribeTransactions: a
    /// reader's cost, apart from the requests of the leases and epochs
    /// that share this client.
    pub fn describes_sent(&self) -> u64 {
        self.inner.requests.describes.load(Ordering::Relaxed)
    }

    /// How many connections this client and its clones made. For tests.
    #[doc(hidden)]
    pub fn connections_made(&self) -> u64 {
        self.inner.connects.load(Ordering::Relaxed)
    }

    /// The SASL session lifetime (KIP-368) the broker gave the last
    /// connection made, if it gave one. For tests.
    #[doc(hidden)]
    pub fn sasl_session_lifetime(&self) -> Option<Duration> {
        match self.inner.session_lifetime_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    /// The deadline of a request with `budget`, and the budget it really
    /// got: while no broker has ever answered, at most the connect timeout,
    /// so an unreachable cluster is reported promptly.
    fn deadline(&self, budget: Duration) -> (Instant, Duration) {
        let budget = if self.inner.reached.load(Ordering::Relaxed) {
            budget
        } else {
            budget.min(self.inner.connect_timeout)
        };
        (deadline_in(budget), budget)
    }

    /// The error of a request that ran out of time, naming the bootstrap
    /// address when no broker ever answered.
    fn gave_up(&self, context: String, budget: Duration, reason: String) -> Error {
        if self.inner.reached.load(Ordering::Relaxed) {
            Error::transient(
                context,
                format!("gave up after {}: {reason}", crate::human::duration(budget)),
            )
        } else {
            // The budget is the smaller of the operation and the connect
            // timeouts: name the one that ran out.
            let which = if budget < self.inner.connect_timeout {
                "operation"
            } else {
                "connect"
            };
            Error::transient(
                context,
                format!(
                    "no broker of the bootstrap address {} answered within {} (the {which} \
                     timeout): {reason}",
                    self.inner.bootstrap_text,
                    crate::human::duration(budget)
                ),
            )
        }
    }
}

/// A request's version range as the codec knows it.
trait VersionsRange {
    const VERSIONS_RANGE: (i16, i16);
}
impl VersionsRange for FindCoordinatorRequest {
    const VERSIONS_RANGE: (i16, i16) = (
        <FindCoordinatorRequest as kafka_protocol::protocol::Message>::VERSIONS.min,
        <FindCoordinatorRequest as kafka_protocol::protocol::Message>::VERSIONS.max,
    );
}
impl VersionsRange for InitProducerIdRequest {
    // Up to version 4: the two-phase-commit fields of version 5 stay unused.
    const VERSIONS_RANGE: (i16, i16) = (0, 4);
}
impl VersionsRange for DescribeTransactionsRequest {
    // Version 0 only: the layout this client decodes.
    const VERSIONS_RANGE: (i16, i16) = (0, 0);
}

/// `code` in words (see [`codes::name`]).
pub(super) fn code_name(code: i16) -> String {
    codes::name(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bootstrap_lists() {
        let p = "PLAINTEXT";
        assert_eq!(parse_bootstrap("a:1, b:2", p).unwrap(), vec!["a:1", "b:2"]);
        assert_eq!(parse_bootstrap("PLAINTEXT://a:1", p).unwrap(), vec!["a:1"]);
        assert_eq!(
            parse_bootstrap("sasl_ssl://a:1", "SASL_SSL").unwrap(),
            vec!["a:1"]
        );
        assert_eq!(
            parse_bootstrap("[::1]:9092", p).unwrap(),
            vec!["[::1]:9092"]
        );
        for bad in ["", " , ", "a", "a:x", ":9", "SSL://a:1"] {
            let e = parse_bootstrap(bad, p).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{bad:?}: {e}");
        }
    }

    #[test]
    fn new_refuses_bad_settings_by_name() {
        let e = Client::new(&Settings::new("a")).unwrap_err();
        assert!(e.to_string().contains("\"a\" is not host:port"), "{e}");
        let mut zero = Settings::new("a:1");
        zero.operation_timeout = Duration::ZERO;
        let e = Client::new(&zero).unwrap_err();
        assert!(e.to_string().contains("operation timeout"), "{e}");
        Client::new(&Settings::new("a:1")).unwrap();
    }

    #[test]
    fn formats_ipv6_coordinator_addresses() {
        assert_eq!(format_addr("::1", 9092), "[::1]:9092");
        assert_eq!(format_addr("h", 1), "h:1");
    }
}
