//! The Kafka transport, on two clients:
//!
//! * the project's own protocol client, the crate `krabka-kafka`
//!   ([`krabka_kafka::Client`], reached through [`KafkaClient`]): every
//!   mint, lease record and guarded write (`protocol_lease`), the describes,
//!   the conditional bump of a resign, the standby's look at the last stable
//!   offset, the member's access check. Its settings come from the same
//!   librdkafka keys (`client_settings`);
//! * librdkafka through rdkafka (`librdkafka`, `reader`, `topic`,
//!   `preflight`): the registration producer, the state consumer and the
//!   admin requests (topic set-up, broker configurations).
//!
//! [`KafkaTransport`] implements the four transport traits against a real
//! Apache Kafka cluster (3.6 or newer, tested from 3.6 to 4.4:
//! docs/compatibility.md says why 3.6). It keeps four rules:
//!
//! 1. **The epoch binds the lease writer.** `acquire_epoch(role, lease)`
//!    sends one InitProducerId for `transactional.id = <role>` with the
//!    lease as the transaction timeout through the transport's protocol
//!    client, and its answer is the token; every lease write and guarded
//!    write of the term is a transaction of that producer id and epoch
//!    (AddPartitionsToTxn, Produce, EndTxn at most v4; the `protocol_lease`
//!    module) over the client's few connections per broker, whatever the
//!    number of roles.
//! 2. **Fencing is [`Error::Fenced`].** A write that the broker rejects with
//!    `INVALID_PRODUCER_EPOCH`, `PRODUCER_FENCED` or
//!    `INVALID_PRODUCER_ID_MAPPING` fails with [`Error::Fenced`]; every later
//!    write through that epoch ([`KafkaEpoch`]) fails with `Fenced` again.
//!    Other errors that leave the epoch unusable are [`Error::Fatal`] (later
//!    writes are `Fatal` too); the others abort the transaction and are
//!    [`Error::Transient`].
//! 3. **Reads are read_committed, up to the last stable offset, in offset
//!    order.** Aborted records (a deposed holder's write, a crashed holder's
//!    open transaction once the coordinator aborts it) never appear; an open
//!    transaction holds the last stable offset back, and a read ends promptly
//!    below it.
//! 4. **No partitioner.** The registration producer (a plain idempotent
//!    producer, `acks=all`) and the lease writer both send to the partition
//!    the caller gives, which is [`crate::role_partition`] of the role.
//!
//! # Minting
//!
//! A mint is one InitProducerId of the protocol client, tried again after
//! CONCURRENT_TRANSACTIONS (a transaction of the role completing, or an
//! open one the request itself fences and aborts) with the client's short
//! pauses for it, milliseconds at first.
//!
//! # Tuning
//!
//! * **Transaction timeout = lease duration.** The coordinator aborts a
//!   transaction left open longer than `transaction.timeout.ms` and bumps the
//!   epoch, which fences a holder that stalls mid-transaction. A lease
//!   outside 1 s ..= `i32::MAX` ms is refused; the broker caps it with
//!   `transaction.max.timeout.ms` (15 min by default), and a longer lease is
//!   refused before the member registers and at `acquire_epoch`.
//! * **Fetch wait.** A standby's consumer keeps one fetch request waiting at
//!   the broker for at most `fetch.wait.max.ms`
//!   ([`KafkaConfig::with_fetch_wait`], 25 ms by default). The broker answers
//!   early when a commit moves the last stable offset, so the wait does not
//!   set the wake-up latency of `poll_partition` after a commit (measured in
//!   `docs/kafka-transport.md`); it sets how many empty fetches a quiet
//!   partition costs, one per wait and member, and the longest a read waits
//!   at an end it cannot see early.
//! * **Operation timeout** ([`KafkaConfig::with_operation_timeout`], 30 s):
//!   the budget of a mint (InitProducerId with its retries), commit, abort,
//!   a read to the last stable offset, a describe with its retries. One
//!   attempt of a protocol-client request waits at most
//!   `request.timeout.ms` (5 s unless set) within it.
//! * **Latency default** (a user setting overrides it): the registration
//!   producer sends at once (`linger.ms = 0` instead of librdkafka's 5 ms).
//!
//! # Topic and cluster requirements
//!
//! Before a member registers, [`Coordinator::check_member`] checks what it
//! depends on (the state topic, the member's ACLs, the brokers'
//! transaction and session timeouts against the lease: the `preflight`
//! module, and [`KafkaTransport::preflight`] reports the same). With no
//! broker reachable within the connect timeout
//! ([`KafkaConfig::with_connect_timeout`], 10 s) the acquire fails with
//! [`Error::Transient`] naming the bootstrap address, and nothing is
//! registered. A member that reached the cluster once keeps retrying when
//! it loses it later. A missing authorization is [`Error::Fatal`] naming
//! the resource (the topic, the transactional id or the cluster), never
//! retried as transient.
//!
//! # Threads
//!
//! A transport's librdkafka clients are two, whatever the number of roles:
//! the registration producer and the state consumer (one queue per state
//! partition it reads). The protocol client needs no thread of its own (a reader task per
//! connection). librdkafka's blocking calls (assign, seek, watermarks) run on tokio's blocking pool (`spawn_blocking`), never
//! on a worker thread. So does dropping a producer or consumer, which
//! flushes and joins librdkafka's threads. The transport needs a
//! multi-threaded or current-thread tokio runtime with the blocking pool
//! available.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use async_trait::async_trait;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{FutureRecord, Producer as _};
use tokio::sync::Mutex as AsyncMutex;

use crate::error::{Error, Result};
use crate::token::FencingToken;
use crate::transport::{Coordinator, Describer, LeaseWriter, Registrar, StateRecord};

mod client;
mod client_settings;
mod config;
mod epoch;
mod librdkafka;
mod mint;
mod oauth;
mod past_stable;
mod preflight;
mod protocol_lease;
mod reader;
mod registrar;
mod role_locks;
mod seen;
mod state_reader;
mod topic;

#[allow(deprecated)]
pub use client::DescribeClient;
pub use client::{BumpAnswer, KafkaClient, TransactionDescription};
pub use config::KafkaConfig;
pub use epoch::KafkaEpoch;
pub use oauth::{OAuthToken, OAuthTokenError, TokenProviderError};
pub use preflight::{PreflightReport, BROKER_LOSS_MARGIN};
pub use reader::READER_GROUP;
pub use topic::{check_state_topic, ensure_state_topic, TopicReport, TopicSpec};

pub use librdkafka::background_drops;
pub(crate) use librdkafka::{
    drop_off_thread, kafka_error, run_blocking, Producer, TransportContext,
};
use protocol_lease::ProtocolLease;
use reader::{PartitionReader, StateConsumer};

/// The shortest lease librdkafka accepts as `transaction.timeout.ms`.
pub const MIN_LEASE_DURATION: Duration = Duration::from_secs(1);

/// Counters of the epoch mints of a [`KafkaTransport`], for metrics and
/// tests ([`KafkaTransport::mint_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MintStats {
    /// Successful `acquire_epoch` calls.
    pub minted: u64,
}

type ReaderSlot = Arc<AsyncMutex<Option<PartitionReader>>>;

/// The transport on a real Kafka cluster: implements [`Coordinator`],
/// [`StateReader`](crate::transport::StateReader) and [`Registrar`]; its epochs ([`KafkaEpoch`]) implement
/// [`LeaseWriter`].
///
/// One transport per process (a [`crate::client::Client`] holds one). It
/// holds a plain idempotent producer for registrations, one read_committed
/// consumer for every state partition it reads (each partition on a queue of
/// its own), and a [`KafkaClient`], the protocol client through whose
/// connections every held epoch writes. Every producer and consumer is
/// created with the settings of the [`KafkaConfig`].
///
/// ```no_run
/// # async fn f() -> krabka_coordination::Result<()> {
/// use std::time::Duration;
/// use krabka_coordination::transport::kafka::{KafkaConfig, KafkaTransport};
/// use krabka_coordination::transport::LeaseWriter;
/// let transport = KafkaTransport::new(KafkaConfig::new("127.0.0.1:9092"), Some("node-1"))?;
/// let epoch = transport.mint_epoch("billing", Duration::from_secs(30)).await?;
/// println!("billing is ours with token {}", epoch.token());
/// # Ok(()) }
/// ```
pub struct KafkaTransport {
    config: KafkaConfig,
    client_suffix: String,
    registrar: Option<Producer>,
    client: KafkaClient,
    /// Serialises the mints of one role on this transport; a role's entry
    /// lasts while a mint of it runs or waits.
    mint_locks: role_locks::RoleLocks,
    /// Each read partition's reader; a task keeps what they keep current
    /// ([`keep_readers_up`]).
    readers: Arc<StdMutex<HashMap<i32, ReaderSlot>>>,
    /// The consumer every partition reader reads from, made on first use.
    state_consumer: std::sync::OnceLock<StateConsumer>,
    seeks: Arc<AtomicU64>,
    /// The check before a member registers, with what it read of the
    /// cluster (see [`KafkaTransport::preflight`]).
    preflight: preflight::Preflight,
    /// Epochs minted (see [`KafkaTransport::mint_stats`]).
    minted: Arc<AtomicU64>,
}

impl std::fmt::Debug for KafkaTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaTransport")
            .field("config", &self.config)
            .field("client", &self.client_suffix)
            .finish_non_exhaustive()
    }
}

impl KafkaTransport {
    /// A transport for the cluster of `config`. `member_id`, when given,
    /// names the member in the clients' default `client.id`
    /// (`krabka-<member>-<client>`), which shows in broker logs and quotas;
    /// an id over 48 bytes or with other characters than ASCII letters,
    /// digits, `.`, `_` and `-` goes in shortened and hashed, so that it
    /// never overflows a request header.
    ///
    /// Builds the registration producer and the protocol client
    /// at once, so a setting librdkafka rejects, a malformed bootstrap
    /// address or a security setting the protocol client cannot honour (or
    /// a certificate file it cannot read) is refused here ([`Error::InvalidArgument`] naming it). Connects lazily.
    pub fn new(config: KafkaConfig, member_id: Option<&str>) -> Result<KafkaTransport> {
        config.validate()?;
        let client = KafkaClient::new(&config)?;
        let client_suffix = match member_id {
            Some(m) if !m.is_empty() => config::client_id_part(m),
            _ => "member".to_owned(),
        };
        let mut cc = config.client_config(&format!("{client_suffix}-registrar"));
        if config.get("message.timeout.ms").is_none() && config.get("delivery.timeout.ms").is_none()
        {
            cc.set(
                "message.timeout.ms",
                config.operation_timeout_ms().to_string(),
            );
        }
        // A registration is sent as soon as it is appended.
        if config.get("linger.ms").is_none() && config.get("queue.buffering.max.ms").is_none() {
            cc.set("linger.ms", "0");
        }
        cc.set("enable.idempotence", "true");
        cc.set("acks", "all");
        cc.set("allow.auto.create.topics", "false");
        let registrar: Producer = cc
            .create_with_context(TransportContext::new(&config))
            .map_err(|e| kafka_error("creating the registration producer", e))?;
        Ok(KafkaTransport {
            config,
            client_suffix,
            registrar: Some(registrar),
            client,
            mint_locks: role_locks::RoleLocks::default(),
            readers: Arc::new(StdMutex::new(HashMap::new())),
            state_consumer: std::sync::OnceLock::new(),
            seeks: Arc::new(AtomicU64::new(0)),
            preflight: preflight::Preflight::default(),
            minted: Arc::default(),
        })
    }

    /// The configuration the transport was built with.
    pub fn config(&self) -> &KafkaConfig {
        &self.config
    }

    /// The transport's protocol client: the one every held epoch writes
    /// through, and that describes, bumps and checks access.
    pub fn kafka_client(&self) -> &KafkaClient {
        &self.client
    }

    /// The transport's protocol client ([`KafkaTransport::kafka_client`]).
    #[deprecated(note = "named for one of its uses: use `kafka_client`")]
    pub fn describe_client(&self) -> &KafkaClient {
        &self.client
    }

    /// How many times the state consumers of this transport were positioned:
    /// once per `read_partition`, and once per `poll_partition` whose `from`
    /// does not continue where the previous call on that partition ended. A
    /// standby that polls on from each batch's `next_offset` adds none, so
    /// its steady-state cost grows with new records only. For metrics and
    /// tests.
    pub fn state_seeks(&self) -> u64 {
        self.seeks.load(Ordering::Relaxed)
    }

    /// Counters of this transport's epoch mints. For metrics and tests.
    pub fn mint_stats(&self) -> MintStats {
        MintStats {
            minted: self.minted.load(Ordering::Relaxed),
        }
    }

    /// How many roles have a mint lock entry now: those whose mint runs or
    /// waits. For benchmarks and tests (the entries of a process that
    /// touches new roles all the time must not pile up).
    #[doc(hidden)]
    pub fn mint_locks_held(&self) -> usize {
        self.mint_locks.len()
    }

    /// How many keys the state readers' compacted views hold, summed over
    /// the partitions read (see the `seen` module), waiting for readers in
    /// use. For benchmarks and tests.
    #[doc(hidden)]
    pub async fn state_view_keys(&self) -> usize {
        let slots: Vec<ReaderSlot> = self
            .readers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        let mut keys = 0;
        for slot in slots {
            if let Some(r) = slot.lock().await.as_ref() {
                keys += r.kept_keys();
            }
        }
        keys
    }

    /// Checks what a member of `role` with `options` depends on, as
    /// [`Coordinator::check_member`] does before the member registers, and
    /// reports what it found, warnings included (which `check_member` logs
    /// once per transport instead). See [`PreflightReport`] and the module
    /// docs, "Topic and cluster requirements".
    ///
    /// Refuses, without a request: a role that cannot be a transactional id
    /// (empty, over 32767 bytes, a NUL byte), a lease outside 1 s ..=
    /// `i32::MAX` ms, a `message.timeout.ms` / `delivery.timeout.ms` longer
    /// than the lease, a `socket.timeout.ms` over the lease + 100 ms, a
    /// `transaction.timeout.ms` other than the lease (all
    /// [`Error::InvalidArgument`] naming the value). Then, from the cluster
    /// (read once per transport; the first request bounded by
    /// [`KafkaConfig::connect_timeout`], [`Error::Transient`] naming the
    /// bootstrap address when no broker answers): a missing state topic, one
    /// of another partition count than `options.partitions` or not compacted
    /// ([`Error::Fatal`] naming the topic and the numbers), a lease over the
    /// brokers' `transaction.max.timeout.ms` ([`Error::InvalidArgument`]),
    /// and an ACL the member lacks: WRITE or DESCRIBE on TransactionalId
    /// `role`, DESCRIBE on the state readers' consumer group (`group.id`,
    /// [`READER_GROUP`] unless set), READ on the state topic
    /// ([`Error::Fatal`] naming the resource; the requests that ask change
    /// nothing).
    pub async fn preflight(
        &self,
        role: &str,
        options: &crate::election::ElectionOptions,
    ) -> Result<PreflightReport> {
        self.preflight
            .report(&self.config, &self.client, role, options)
            .await
    }

    /// [`ensure_state_topic`] with this transport's configuration and
    /// `spec`: its warnings are logged (the caller asked for the check),
    /// and a member's check of this transport does not log them again.
    /// Returns the same report and errors.
    pub async fn ensure_state_topic(&self, spec: TopicSpec) -> Result<TopicReport> {
        let report = ensure_state_topic(
            &self.config,
            spec.partitions,
            spec.replication_factor,
            spec.min_insync_replicas,
        )
        .await?;
        for w in &report.warnings {
            self.preflight.logged(w);
        }
        Ok(report)
    }

    /// [`check_state_topic`] with this transport's configuration, its
    /// warnings logged as by [`KafkaTransport::ensure_state_topic`].
    /// Returns the same report and errors.
    pub async fn check_state_topic(&self, expected_partitions: i32) -> Result<TopicReport> {
        let report = check_state_topic(&self.config, expected_partitions).await?;
        for w in &report.warnings {
            self.preflight.logged(w);
        }
        Ok(report)
    }
}

impl Drop for KafkaTransport {
    fn drop(&mut self) {
        // Producers and consumers block while they shut down: hand them to
        // the blocking pool.
        let readers = std::mem::take(&mut *self.readers.lock().unwrap_or_else(|e| e.into_inner()));
        for (_, slot) in readers {
            if let Ok(mut guard) = slot.try_lock() {
                if let Some(r) = guard.take() {
                    drop_off_thread(r);
                }
            }
        }
        if let Some(p) = self.registrar.take() {
            drop_off_thread(p);
        }
    }
}

pub(super) fn check_partition(partition: i32) -> Result<()> {
    if partition < 0 {
        return Err(Error::InvalidArgument(format!(
            "partition must not be negative, got {partition}"
        )));
    }
    Ok(())
}

fn check_role(role: &str) -> Result<()> {
    crate::codec::check_role(role)
}

/// The instant `d` from now, or a far future one for a `d` too large to
/// add: an absurd timeout never panics.
pub(crate) fn deadline_in(d: Duration) -> tokio::time::Instant {
    /// About 30 years, as tokio's own far future.
    const FAR: Duration = Duration::from_secs(86_400 * 365 * 30);
    let now = tokio::time::Instant::now();
    now.checked_add(d.min(FAR))
        .unwrap_or_else(|| now + Duration::from_secs(86_400))
}

/// The lease in whole milliseconds, within the bounds of a transaction
/// timeout.
fn lease_millis(lease: Duration) -> Result<u64> {
    let ms = lease.as_millis();
    if lease < MIN_LEASE_DURATION || ms > i32::MAX as u128 {
        return Err(Error::InvalidArgument(format!(
            "the lease duration must be from {} to {} ms ({}; it is the transaction timeout), got {}",
            crate::human::duration(MIN_LEASE_DURATION),
            i32::MAX,
            crate::human::duration(Duration::from_millis(i32::MAX as u64)),
            crate::human::duration(lease)
        )));
    }
    Ok(ms as u64)
}

#[cfg(test)]
mod tests;
