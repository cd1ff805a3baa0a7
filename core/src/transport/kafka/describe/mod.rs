//! A small DescribeTransactions client on the `kafka-protocol` codec.
//!
//! librdkafka has no DescribeTransactions API, so this module speaks the
//! Kafka protocol itself over tokio TCP streams. [`DescribeClient`] needs no
//! producer and no consumer: a third party that only checks who is
//! authoritative for a role uses it directly.
//!
//! # Requests
//!
//! 1. On every new connection: ApiVersions (v3, falling back to v0), to pick
//!    the FindCoordinator version and to check that the broker knows
//!    DescribeTransactions (Kafka 3.0+).
//! 2. FindCoordinator (key type 1 = transaction) on any bootstrap broker: the
//!    transaction coordinator of the transactional id.
//! 3. DescribeTransactions (API key 65, v0) on the coordinator.
//!
//! The transport also sends one InitProducerId through it to fence a
//! transaction a crashed holder left open (see the `mint` module), the
//! request `Admin.fenceProducers` sends, and, before a member registers,
//! three requests that ask the authorizer what the member may do and change
//! nothing (the `access` module).
//!
//! The coordinator of each transactional id and the connection to each broker
//! are cached, so once the coordinator is known a describe costs exactly one
//! request. The client finds the coordinator again on `NOT_COORDINATOR`,
//! `COORDINATOR_NOT_AVAILABLE` and on a connection error, and waits and
//! retries on `COORDINATOR_LOAD_IN_PROGRESS`, all within the operation
//! timeout of the [`KafkaConfig`]. Until a broker has answered once, a
//! request gets the connect timeout
//! ([`KafkaConfig::with_connect_timeout`]) instead, and an unreachable
//! cluster fails with [`Error::Transient`] naming the bootstrap address.
//!
//! A connection carries concurrent requests (the `wire` module), but a
//! broker reads a connection's next request only once it has answered the
//! one before: the client keeps up to
//! [`DescribeClient::CONNECTIONS_PER_BROKER`] connections to a broker and
//! opens a second one only while requests overlap.
//!
//! # Security
//!
//! The client reads the same librdkafka keys the librdkafka clients get
//! (`security.protocol`, `sasl.*`, `ssl.*`; the `security` module lists what
//! it honours): TLS through rustls (hostname verification on unless
//! `ssl.endpoint.identification.algorithm=none`), SASL PLAIN, SCRAM-SHA-256,
//! SCRAM-SHA-512 and OAUTHBEARER (tokens from the configuration's token
//! provider, [`KafkaConfig::with_oauth_token_provider`]). A setting it cannot
//! honour is refused by [`DescribeClient::new`] naming it. A failed
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
//! `TRANSACTIONAL_ID_NOT_FOUND` (a role no member has taken, or whose id the
//! coordinator expired after `transactional.id.expiration.ms`) is
//! [`NO_EPOCH`]. Authorization failures are [`Error::Fatal`] naming the
//! resource (the transactional id, or the cluster) and never retried;
//! everything that may pass is [`Error::Transient`]. A transactional id the
//! protocol cannot carry (empty, over 32767 bytes, a NUL byte) is refused
//! before any request ([`Error::InvalidArgument`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeTransactionsRequest, DescribeTransactionsResponse, FetchRequest,
    FindCoordinatorRequest, FindCoordinatorResponse, InitProducerIdRequest, TopicName,
    TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tokio::sync::Mutex as AsyncMutex;
use tokio::time::Instant;

use super::config::KafkaConfig;

mod access;
mod batch;
mod metadata;
mod producer_id;
mod txn;
use super::deadline_in;
use super::security::{Credentials, SaslSettings, Security};
use super::wire::{Connection, OpenError};
pub(crate) use batch::Writer;
pub use producer_id::BumpAnswer;
pub(crate) use producer_id::FenceAnswer;
pub(crate) use txn::{busy_pause, TxnError};

/// The connection to one broker address, once made.
type ConnectionSlot = Arc<AsyncMutex<Option<Arc<Connection>>>>;
use crate::error::{Error, Result};
use crate::token::{FencingToken, NO_EPOCH};

/// FindCoordinator's key type of a transactional id.
const KEY_TYPE_TRANSACTION: i8 = 1;
/// FindCoordinator's key type of a consumer group.
const KEY_TYPE_GROUP: i8 = 0;
/// The first pause between retries; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(20);
const MAX_BACKOFF: Duration = Duration::from_millis(500);

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
    /// The current producer id and epoch: the role's fencing token.
    pub token: FencingToken,
    /// The partitions of the open transaction, by topic.
    pub topics: Vec<(String, Vec<i32>)>,
}

/// A DescribeTransactions client: who holds the newest epoch of a role.
///
/// Cheap to clone; clones share the cached coordinators and connections.
/// Needs a tokio runtime.
///
/// ```no_run
/// # async fn f() -> krabka_coordination::Result<()> {
/// use krabka_coordination::transport::kafka::{DescribeClient, KafkaConfig};
/// let client = DescribeClient::new(&KafkaConfig::new("127.0.0.1:9092"))?;
/// let token = client.describe_epoch("billing").await?;
/// println!("billing is led by epoch {token}");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct DescribeClient {
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
    /// True once a connection to any broker was made.
    reached: AtomicBool,
    /// Transactional id → the address of its coordinator.
    coordinators: StdMutex<HashMap<String, String>>,
    /// (topic, partition) → the address of its leader.
    leaders: StdMutex<HashMap<(String, i32), String>>,
    /// Topic → its partition count (guarded writes that leave the
    /// partition open).
    partition_counts: StdMutex<HashMap<String, i32>>,
    /// The member access questions answered "allowed" (`access.rs`).
    allowed: StdMutex<std::collections::HashSet<String>>,
    /// Held by the check asking the questions every role shares.
    asking: tokio::sync::Mutex<()>,
    /// Broker address → its connection slot. The map's lock is held only to
    /// find a slot; a slot's lock is held across its connect, so one address
    /// gets one connection and an unreachable broker stalls only the requests
    /// that need it.
    connections: StdMutex<HashMap<String, Arc<Vec<ConnectionSlot>>>>,
    requests: Arc<AtomicU64>,
    /// Connections made (each with its handshakes).
    connects: AtomicU64,
    /// The SASL session lifetime of the last connection made, in ms (0:
    /// none).
    session_lifetime_ms: AtomicU64,
    /// TLS and SASL of every connection.
    security: Security,
}

impl std::fmt::Debug for DescribeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DescribeClient")
            .field("bootstrap", &self.inner.bootstrap)
            .field("timeout", &self.inner.timeout)
            .field("requests_sent", &self.requests_sent())
            .finish_non_exhaustive()
    }
}

/// A FindCoordinator's answer.
enum Found {
    /// The coordinator's address.
    At(String),
    /// An error code, and the request and answer in words.
    Refused { code: i16, what: String },
}

/// Why one attempt failed, and what to do about it.
enum Attempt {
    /// Find the coordinator again, then retry.
    Refind(String),
    /// Wait a little, then retry with the same coordinator.
    Backoff(String),
    /// Give up.
    Fail(Error),
}

impl DescribeClient {
    /// The most connections the client keeps to one broker (see the module
    /// docs): one while requests come one at a time, more while they
    /// overlap.
    pub const CONNECTIONS_PER_BROKER: usize = 6;

    /// A client for the cluster of `config`. Connects lazily.
    ///
    /// Refuses, naming them, security settings the client cannot honour
    /// (see [`KafkaConfig::check_security`]) and a malformed bootstrap
    /// address. Reads the certificate and key files the settings name.
    pub fn new(config: &KafkaConfig) -> Result<Self> {
        config.validate()?;
        let security = Security::from_config(config)?;
        let bootstrap = parse_bootstrap(config.bootstrap(), security.protocol.name())?;
        let client_id = config
            .get("client.id")
            .map(str::to_owned)
            .unwrap_or_else(|| "krabka-describe".to_owned());
        Ok(DescribeClient {
            inner: Arc::new(Inner {
                bootstrap,
                bootstrap_text: config.bootstrap().to_owned(),
                client_id: StrBytes::from_string(client_id),
                timeout: config.operation_timeout(),
                connect_timeout: config.connect_timeout(),
                reached: AtomicBool::new(false),
                coordinators: StdMutex::new(HashMap::new()),
                leaders: StdMutex::new(HashMap::new()),
                partition_counts: StdMutex::new(HashMap::new()),
                allowed: StdMutex::new(std::collections::HashSet::new()),
                asking: tokio::sync::Mutex::new(()),
                connections: StdMutex::new(HashMap::new()),
                requests: Arc::new(AtomicU64::new(0)),
                connects: AtomicU64::new(0),
                session_lifetime_ms: AtomicU64::new(0),
                security,
            }),
        })
    }

    /// The current fencing token of `transactional_id` (a role), or
    /// [`NO_EPOCH`] when the coordinator does not know the id.
    pub async fn describe_epoch(&self, transactional_id: &str) -> Result<FencingToken> {
        Ok(self
            .describe_transaction(transactional_id)
            .await?
            .map(|d| d.token)
            .unwrap_or(NO_EPOCH))
    }

    /// Everything the coordinator reports about `transactional_id`, or
    /// `None` when it does not know the id (`TRANSACTIONAL_ID_NOT_FOUND`).
    pub async fn describe_transaction(
        &self,
        transactional_id: &str,
    ) -> Result<Option<TransactionDescription>> {
        crate::codec::check_role(transactional_id)?;
        let context = || {
            format!(
                "DescribeTransactions for {}",
                crate::error::quote(transactional_id)
            )
        };
        let (deadline, budget) = self.deadline(self.inner.timeout);
        retry_until(
            deadline,
            || async {
                let addr = self.coordinator(transactional_id, deadline).await?;
                self.describe_at(&addr, transactional_id, deadline).await
            },
            || self.forget_coordinator(transactional_id),
            |reason| self.gave_up(context(), budget, reason),
        )
        .await
    }

    /// The address (`host:port`) of the transaction coordinator of
    /// `transactional_id`, from the cache or from FindCoordinator.
    pub async fn coordinator_address(&self, transactional_id: &str) -> Result<String> {
        crate::codec::check_role(transactional_id)?;
        let (deadline, budget) = self.deadline(self.inner.timeout);
        retry_until(
            deadline,
            || self.coordinator(transactional_id, deadline),
            || {},
            |reason| {
                let context = format!(
                    "FindCoordinator for {}",
                    crate::error::quote(transactional_id)
                );
                self.gave_up(context, budget, reason)
            },
        )
        .await
    }

    /// On a secured cluster (TLS or SASL), connects to a bootstrap broker
    /// once, so that what no retry mends (a refused password, an untrusted
    /// or misnamed certificate) fails at once as [`Error::Fatal`] naming
    /// it, before the librdkafka clients, which only report it in their
    /// logs and then time out. Retries a broker that does not answer until
    /// the connect timeout, then fails with [`Error::Transient`] naming the
    /// bootstrap address. Does nothing on PLAINTEXT, or once a broker has
    /// answered this client. The connection made stays for later requests.
    ///
    /// With OAUTHBEARER it also makes sure the configuration's token cache
    /// holds a fresh token (asking the provider on tokio's blocking pool if
    /// not), so that the librdkafka clients made next take it from there.
    pub(crate) async fn check_access(&self) -> Result<()> {
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
                            "the provider did not answer within {within:?} (the connect timeout)"
                        ),
                    )
                })?
                .map_err(|e| Error::fatal(context, e.to_string()))??;
        }
        if self.inner.reached.load(Ordering::Relaxed) {
            return Ok(());
        }
        let (deadline, budget) = self.deadline(self.inner.connect_timeout);
        retry_until(
            deadline,
            || async {
                let mut last = String::from("no bootstrap broker answered");
                for broker in &self.inner.bootstrap {
                    match self.connection(broker, deadline).await {
                        Ok(_) => return Ok(()),
                        Err(Attempt::Fail(e)) => return Err(Attempt::Fail(e)),
                        Err(Attempt::Refind(r) | Attempt::Backoff(r)) => last = r,
                    }
                }
                Err(Attempt::Backoff(last))
            },
            || {},
            |last| self.gave_up("connecting to the cluster".to_owned(), budget, last),
        )
        .await
    }

    /// How many Kafka requests (ApiVersions, SaslHandshake,
    /// SaslAuthenticate, FindCoordinator, DescribeTransactions,
    /// InitProducerId, the EndTxn and Fetch of a member's ACL check, and the
    /// Metadata and Fetch that read a batch's writer)
    /// this client and its clones have sent.
    pub fn requests_sent(&self) -> u64 {
        self.inner.requests.load(Ordering::Relaxed)
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
            Error::transient(context, format!("gave up after {budget:?}: {reason}"))
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
                    "no broker of the bootstrap address {} answered within {budget:?} (the {which} \
                     timeout): {reason}",
                    self.inner.bootstrap_text
                ),
            )
        }
    }

    fn forget_coordinator(&self, transactional_id: &str) {
        self.inner
            .coordinators
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(transactional_id);
    }

    /// The address of the coordinator of `transactional_id`, cached or found.
    async fn coordinator(
        &self,
        transactional_id: &str,
        deadline: Instant,
    ) -> Result<String, Attempt> {
        if let Some(addr) = self
            .inner
            .coordinators
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(transactional_id)
        {
            return Ok(addr.clone());
        }
        let mut last = String::from("no bootstrap broker answered");
        for broker in &self.inner.bootstrap {
            match self
                .find_coordinator_at(broker, transactional_id, KEY_TYPE_TRANSACTION, deadline)
                .await
            {
                Ok(addr) => {
                    self.inner
                        .coordinators
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(transactional_id.to_owned(), addr.clone());
                    return Ok(addr);
                }
                Err(Attempt::Fail(e)) => return Err(Attempt::Fail(e)),
                Err(Attempt::Refind(r) | Attempt::Backoff(r)) => last = r,
            }
        }
        Err(Attempt::Backoff(last))
    }

    /// One FindCoordinator at `broker` for `key` of `key_type` (a
    /// transactional id, or a group): the coordinator's address.
    async fn find_coordinator_at(
        &self,
        broker: &str,
        key: &str,
        key_type: i8,
        deadline: Instant,
    ) -> Result<String, Attempt> {
        match self
            .find_coordinator_answer(broker, key, key_type, deadline)
            .await?
        {
            Found::At(addr) => Ok(addr),
            Found::Refused { code, what } => Err(classify_code(code, what)),
        }
    }

    /// One FindCoordinator at `broker`: the broker's answer, error codes
    /// included; only a failure to get an answer is an `Attempt`.
    async fn find_coordinator_answer(
        &self,
        broker: &str,
        key: &str,
        key_type: i8,
        deadline: Instant,
    ) -> Result<Found, Attempt> {
        let conn = self.connection(broker, deadline).await?;
        let version = conn
            .version_for(
                ApiKey::FindCoordinator,
                FindCoordinatorRequest::VERSIONS_RANGE,
            )
            .ok_or_else(|| {
                Attempt::Fail(Error::fatal(
                    format!("FindCoordinator at {broker}"),
                    "the broker supports no FindCoordinator version this client speaks",
                ))
            })?;
        let mut req = FindCoordinatorRequest::default();
        req.key_type = key_type;
        if version >= 4 {
            req.coordinator_keys = vec![StrBytes::from_string(key.to_owned())];
        } else {
            req.key = StrBytes::from_string(key.to_owned());
        }
        let resp: FindCoordinatorResponse = self
            .call(&conn, ApiKey::FindCoordinator, version, &req, deadline)
            .await?;
        let (code, message, host, port) = if version >= 4 {
            match resp.coordinators.first() {
                Some(c) => (
                    c.error_code,
                    c.error_message.clone(),
                    c.host.clone(),
                    c.port,
                ),
                None => {
                    return Err(Attempt::Backoff(format!(
                        "FindCoordinator at {broker} answered no coordinator"
                    )))
                }
            }
        } else {
            (
                resp.error_code,
                resp.error_message.clone(),
                resp.host.clone(),
                resp.port,
            )
        };
        if code != 0 {
            let what = format!(
                "FindCoordinator for {} at {broker}: {}{}",
                crate::error::quote(key),
                code_name(code),
                message
                    .map(|m| format!(" ({})", m.as_str()))
                    .unwrap_or_default()
            );
            return Ok(Found::Refused { code, what });
        }
        Ok(Found::At(format_addr(host.as_str(), port)))
    }

    /// One DescribeTransactions request to the coordinator at `addr`.
    async fn describe_at(
        &self,
        addr: &str,
        transactional_id: &str,
        deadline: Instant,
    ) -> Result<Option<TransactionDescription>, Attempt> {
        let conn = self.connection(addr, deadline).await.map_err(|a| match a {
            Attempt::Backoff(r) => Attempt::Refind(r),
            other => other,
        })?;
        if conn
            .version_for(
                ApiKey::DescribeTransactions,
                DescribeTransactionsRequest::VERSIONS_RANGE,
            )
            .is_none()
        {
            return Err(Attempt::Fail(Error::fatal(
                format!("DescribeTransactions at {addr}"),
                "the broker does not support DescribeTransactions v0 (Kafka 3.0 or newer is needed)",
            )));
        }
        let mut req = DescribeTransactionsRequest::default();
        req.transactional_ids = vec![TransactionalId(StrBytes::from_string(
            transactional_id.to_owned(),
        ))];
        let resp: DescribeTransactionsResponse = self
            .call(&conn, ApiKey::DescribeTransactions, 0, &req, deadline)
            .await
            .map_err(|a| match a {
                // A broken connection to the coordinator: find it again.
                Attempt::Backoff(r) => Attempt::Refind(r),
                other => other,
            })?;
        let Some(state) = resp
            .transaction_states
            .into_iter()
            .find(|s| s.transactional_id.0.as_str() == transactional_id)
        else {
            return Err(Attempt::Backoff(format!(
                "DescribeTransactions at {addr} answered nothing for {}",
                crate::error::quote(transactional_id)
            )));
        };
        match state.error_code {
            0 => {}
            105 => return Ok(None), // TRANSACTIONAL_ID_NOT_FOUND
            code => {
                return Err(classify_code(
                    code,
                    format!(
                        "DescribeTransactions for {} at {addr}: {}",
                        crate::error::quote(transactional_id),
                        code_name(code)
                    ),
                ))
            }
        }
        if state.producer_id.0 < 0 {
            return Ok(None);
        }
        Ok(Some(TransactionDescription {
            transactional_id: transactional_id.to_owned(),
            state: state.transaction_state.as_str().to_owned(),
            timeout_ms: state.transaction_timeout_ms,
            start_time_ms: state.transaction_start_time_ms,
            token: FencingToken::new(state.producer_id.0, state.producer_epoch),
            topics: state
                .topics
                .into_iter()
                .map(|t| (t.topic.0.as_str().to_owned(), t.partitions))
                .collect(),
        }))
    }

    /// A live connection to `addr`, connecting (and handshaking) if needed.
    ///
    /// A broker gets up to [`DescribeClient::CONNECTIONS_PER_BROKER`]
    /// connections. A broker handles one request of a connection at a time
    /// (it reads the next once it has answered), and a Produce with
    /// acks=all holds its connection until the replicas have the records,
    /// so one connection would queue every role's request behind the
    /// others. A request takes an idle connection, else opens another while
    /// the broker has fewer than the bound (only once one connection to it
    /// is up: an unreachable broker gets one attempt at a time), else takes
    /// the connection with the fewest requests in flight.
    async fn connection(&self, addr: &str, deadline: Instant) -> Result<Arc<Connection>, Attempt> {
        let pool = Arc::clone(
            self.inner
                .connections
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(addr.to_owned())
                .or_insert_with(|| {
                    Arc::new(
                        (0..Self::CONNECTIONS_PER_BROKER)
                            .map(|_| ConnectionSlot::default())
                            .collect(),
                    )
                }),
        );
        let mut least: Option<(usize, Arc<Connection>)> = None;
        let mut free: Option<&ConnectionSlot> = None;
        for slot in pool.iter() {
            // A slot being connected is busy: skip it.
            let Ok(guard) = slot.try_lock() else { continue };
            match guard.as_ref() {
                Some(c) if !c.is_closed() && !c.is_expiring() => {
                    let load = c.in_flight();
                    if load == 0 {
                        return Ok(Arc::clone(c));
                    }
                    if least.as_ref().is_none_or(|(l, _)| load < *l) {
                        least = Some((load, Arc::clone(c)));
                    }
                }
                _ => {
                    free.get_or_insert(slot);
                }
            }
        }
        let slot = match (least, free) {
            (Some(_), Some(slot)) => slot,
            (Some((_, c)), None) => return Ok(c),
            // Nothing up: connect through the first slot, one attempt at
            // a time.
            (None, _) => &pool[0],
        };
        let mut slot = slot.lock().await;
        if let Some(c) = slot.as_ref() {
            if !c.is_closed() && !c.is_expiring() {
                return Ok(Arc::clone(c));
            }
            *slot = None;
        }
        // One unreachable broker must not use up the whole budget.
        let connect_deadline = deadline.min(deadline_in(self.inner.connect_timeout));
        let conn = Connection::open(
            addr,
            self.inner.client_id.clone(),
            Arc::clone(&self.inner.requests),
            connect_deadline,
            &self.inner.security,
        )
        .await
        .map_err(|e| match e {
            OpenError::Fail(e) => Attempt::Fail(e),
            OpenError::Retry(e) => Attempt::Backoff(format!("connecting to {addr}: {e}")),
        })?;
        self.inner.reached.store(true, Ordering::Relaxed);
        self.inner.connects.fetch_add(1, Ordering::Relaxed);
        self.inner.session_lifetime_ms.store(
            conn.session_lifetime
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            Ordering::Relaxed,
        );
        let conn = Arc::new(conn);
        *slot = Some(Arc::clone(&conn));
        Ok(conn)
    }

    /// Sends one request and maps a transport failure to a retry; drops a
    /// broken connection from the cache.
    async fn call<Req: Encodable, Resp: Decodable + HeaderVersion>(
        &self,
        conn: &Arc<Connection>,
        key: ApiKey,
        version: i16,
        req: &Req,
        deadline: Instant,
    ) -> Result<Resp, Attempt> {
        match conn.request::<Req, Resp>(key, version, req, deadline).await {
            Ok(r) => Ok(r),
            Err(e) => {
                // A closed connection is replaced by the next `connection`
                // call for its address.
                Err(Attempt::Backoff(format!(
                    "{key:?} v{version} to {}: {e}",
                    conn.addr
                )))
            }
        }
    }
}

/// A Fetch of one partition from `offset` that waits for nothing and
/// returns at most the first batch (the broker returns a whole first batch,
/// whatever the byte limits); `isolation_level` 0 is read_uncommitted, 1
/// read_committed. For versions 4 to 12, which name the topic.
fn one_batch_fetch(topic: &str, partition: i32, offset: i64, isolation_level: i8) -> FetchRequest {
    let mut part = FetchPartition::default();
    part.partition = partition;
    part.fetch_offset = offset;
    part.partition_max_bytes = 1;
    part.current_leader_epoch = -1;
    part.last_fetched_epoch = -1;
    part.log_start_offset = -1;
    let mut t = FetchTopic::default();
    t.topic = TopicName(StrBytes::from_string(topic.to_owned()));
    t.partitions = vec![part];
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(-1);
    req.max_wait_ms = 0;
    req.min_bytes = 0;
    req.max_bytes = 1;
    req.isolation_level = isolation_level;
    req.session_id = 0;
    req.session_epoch = -1;
    req.topics = vec![t];
    req
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

pub(super) fn code_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        Some(e) => format!("{e} (code {code})"),
        None => "no error".to_owned(),
    }
}

/// What to do about a broker error code of FindCoordinator or DescribeTransactions.
fn classify_code(code: i16, what: String) -> Attempt {
    match code {
        // NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE: the coordinator moved.
        15 | 16 => Attempt::Refind(what),
        // COORDINATOR_LOAD_IN_PROGRESS: same coordinator, later.
        14 => Attempt::Backoff(what),
        // TRANSACTIONAL_ID_AUTHORIZATION_FAILED: the resource is the role.
        53 => Attempt::Fail(Error::fatal(
            what,
            "not authorized on the transactional id (the role): an ACL allowing DESCRIBE on \
             TransactionalId <role> is needed (and WRITE to lead it)",
        )),
        // CLUSTER_AUTHORIZATION_FAILED.
        31 => Attempt::Fail(Error::fatal(
            what,
            "not authorized on the cluster resource (kafka-cluster)",
        )),
        _ => match ResponseError::try_from_code(code) {
            Some(e) if e.is_retriable() => Attempt::Backoff(what),
            _ => Attempt::Fail(Error::fatal(what, "the broker refused the request")),
        },
    }
}

/// True when a pause of `backoff` would reach `deadline`.
fn no_time_for(backoff: Duration, deadline: Instant) -> bool {
    deadline.saturating_duration_since(Instant::now()) <= backoff
}

/// Runs `attempt` until it answers or fails for good ([`Attempt::Fail`]),
/// pausing between tries (from [`FIRST_BACKOFF`], doubling up to
/// [`MAX_BACKOFF`]); after an [`Attempt::Refind`], `refind` first forgets
/// what the attempt looked up (a coordinator, a partition's leader). When
/// `deadline` leaves no time for the next pause, `give_up` turns the last
/// reason into the error.
async fn retry_until<T, F, Fut>(
    deadline: Instant,
    mut attempt: F,
    mut refind: impl FnMut(),
    give_up: impl FnOnce(String) -> Error,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Attempt>>,
{
    let mut backoff = FIRST_BACKOFF;
    loop {
        let reason = match attempt().await {
            Ok(v) => return Ok(v),
            Err(Attempt::Fail(e)) => return Err(e),
            Err(Attempt::Refind(r)) => {
                refind();
                r
            }
            Err(Attempt::Backoff(r)) => r,
        };
        if no_time_for(backoff, deadline) {
            return Err(give_up(reason));
        }
        tracing::debug!(%reason, retry_in = ?backoff, "describe client request retried");
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

fn format_addr(host: &str, port: i32) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Splits `host:port[,host:port...]`, dropping a `<protocol>://` prefix that
/// names the configured `security.protocol` (librdkafka refuses another one
/// too).
fn parse_bootstrap(bootstrap: &str, protocol: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for raw in bootstrap.split(',') {
        let entry = raw.trim();
        if entry.is_empty() {
            continue;
        }
        let entry = match entry.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case(protocol) => rest,
            Some((scheme, _)) => {
                return Err(Error::InvalidArgument(format!(
                    "bootstrap address {entry:?} names the protocol {scheme}, but security.protocol is {protocol}"
                )))
            }
            None => entry,
        };
        let port_ok = entry
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
        if !port_ok {
            return Err(Error::InvalidArgument(format!(
                "bootstrap address {entry:?} is not host:port"
            )));
        }
        out.push(entry.to_owned());
    }
    if out.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "bootstrap address {bootstrap:?} names no broker"
        )));
    }
    Ok(out)
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
    fn refuses_security_settings_it_cannot_honour_by_name() {
        let e = DescribeClient::new(&KafkaConfig::new("a:1").set("security.protocol", "SSL_X"))
            .unwrap_err();
        assert!(e.to_string().contains("security.protocol=SSL_X"), "{e}");
        let e = DescribeClient::new(&KafkaConfig::new("a:1").set("sasl.kerberos.keytab", "/k"))
            .unwrap_err();
        assert!(e.to_string().contains("sasl.kerberos.keytab"), "{e}");
        let e = DescribeClient::new(
            &KafkaConfig::new("a:1")
                .set("security.protocol", "SASL_PLAINTEXT")
                .set("sasl.mechanism", "OAUTHBEARER"),
        )
        .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("OAUTHBEARER"), "{e}");
        // What it honours is accepted (SASL_PLAINTEXT reads no file).
        DescribeClient::new(
            &KafkaConfig::new("a:1")
                .set("security.protocol", "SASL_PLAINTEXT")
                .set("sasl.mechanism", "SCRAM-SHA-512")
                .set("sasl.username", "u")
                .set("sasl.password", "p"),
        )
        .unwrap();
    }

    #[test]
    fn classifies_coordinator_errors() {
        assert!(matches!(
            classify_code(16, String::new()),
            Attempt::Refind(_)
        ));
        assert!(matches!(
            classify_code(15, String::new()),
            Attempt::Refind(_)
        ));
        assert!(matches!(
            classify_code(14, String::new()),
            Attempt::Backoff(_)
        ));
        assert!(matches!(
            classify_code(53, String::new()),
            Attempt::Fail(Error::Fatal { .. })
        ));
        assert!(matches!(
            classify_code(7, String::new()),
            Attempt::Backoff(_)
        )); // REQUEST_TIMED_OUT
        assert!(matches!(classify_code(42, String::new()), Attempt::Fail(_))); // INVALID_REQUEST
    }

    #[test]
    fn formats_ipv6_coordinator_addresses() {
        assert_eq!(format_addr("::1", 9092), "[::1]:9092");
        assert_eq!(format_addr("h", 1), "h:1");
    }
}
