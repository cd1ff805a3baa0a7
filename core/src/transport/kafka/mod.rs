//! The Kafka transport: the project's own protocol client on the
//! `kafka-protocol` crate (the lease path, DescribeTransactions), and
//! rdkafka's registration producer and state consumer.
//!
//! [`KafkaTransport`] implements the four transport traits against a real
//! Apache Kafka cluster (3.0 or newer; tested on 4.x with transaction version
//! 2). It keeps the spec's four rules:
//!
//! 1. **The epoch binds the lease producer.** On the default lease path
//!    ([`LeasePath::Protocol`], the `protocol_lease` module),
//!    `acquire_epoch(role, lease)` sends one InitProducerId for
//!    `transactional.id = <role>` with the lease as the transaction timeout
//!    through the transport's protocol client, and its answer is the token;
//!    every lease write and guarded write of the term is a transaction of
//!    that producer id and epoch (AddPartitionsToTxn, Produce, EndTxn at
//!    most v4) over the client's few connections per broker, whatever the
//!    number of roles. On [`LeasePath::Librdkafka`], `acquire_epoch`
//!    takes a producer with `transactional.id = <role>` and
//!    `transaction.timeout.ms = <lease>` (a spare built ahead of time, or a
//!    new one: see [Minting](#minting)), calls InitProducerId
//!    (`init_transactions`) on it and keeps that producer; every lease write
//!    and guarded write of the role goes through it. librdkafka has no getter for
//!    the minted producer id and epoch, so the transport asks the
//!    coordinator with DescribeTransactions right after InitProducerId. If
//!    another member minted a newer epoch in between, the answer is theirs,
//!    but then this member's first commit is fenced and its lease record is
//!    aborted. The answer can also be stale (a paused coordinator answering
//!    from its old state), so before the first commit, and the first after
//!    any abort, the producer reads the header of the batch its first record
//!    went into and keeps the producer id and epoch the broker wrote there
//!    (`describe/batch.rs`): every *committed* lease carries the token of
//!    its writer.
//! 2. **Fencing is [`Error::Fenced`].** A write that the broker rejects with
//!    `INVALID_PRODUCER_EPOCH` (47) or `PRODUCER_FENCED` (90), which librdkafka
//!    raises as the fatal `_FENCED` (-144), fails with [`Error::Fenced`] and
//!    the fenced producer is dropped; every later write through that epoch
//!    ([`KafkaEpoch`]) fails with `Fenced` again. Other fatal errors are
//!    [`Error::Fatal`] (the producer is dropped too, and later writes are
//!    `Fatal`); abortable ones abort the transaction and are
//!    [`Error::Transient`].
//! 3. **Reads are read_committed, up to the last stable offset, in offset
//!    order.** Aborted records (a deposed holder's write, a crashed holder's
//!    open transaction once the coordinator aborts it) never appear; an open
//!    transaction holds the last stable offset back, and a read ends promptly
//!    below it.
//! 4. **No partitioner.** The registration producer (a plain idempotent
//!    producer, `acks=all`) and the lease producer both send to the partition
//!    the caller gives, which is [`crate::role_partition`] of the role.
//!
//! # Minting
//!
//! (The librdkafka path; on the protocol path a mint is one InitProducerId,
//! sent again 3 ms after CONCURRENT_TRANSACTIONS.)
//!
//! A mint takes a few milliseconds (InitProducerId and two
//! DescribeTransactions round trips) instead of librdkafka's 55 to 505 ms
//! for a new producer, because the transport:
//!
//! * keeps a **spare lease producer**, created and connected ahead of time,
//!   for each role it minted in, and for each role it is registered in once a
//!   lease record of the role has told it the lease duration (it watches its
//!   own registrations go out and the lease records it reads). A spare has
//!   not called InitProducerId, so the coordinator does not know it; it costs
//!   an idle producer (librdkafka threads and one connection) per role. The
//!   spare of a role goes when the transport deregisters from the role, and
//!   with the transport. A mint without a fitting spare builds a producer and
//!   connects it first, about 15 ms;
//! * **clears the way** for InitProducerId: it waits (bounded by the
//!   operation timeout) while the role's previous transaction completes, and
//!   fences a transaction a crashed holder left open after a grace of 20 ms,
//!   instead of letting InitProducerId meet them (librdkafka retries that
//!   only after 500 ms).
//!
//! [`KafkaTransport::mint_stats`] counts each case. The details are in the
//! source of the `mint` module.
//!
//! # Tuning
//!
//! * **Transaction timeout = lease duration.** The coordinator aborts a
//!   transaction left open longer than `transaction.timeout.ms` and bumps the
//!   epoch, which fences a holder that stalls mid-transaction. librdkafka
//!   accepts 1 s to `i32::MAX` ms; the broker caps it with
//!   `transaction.max.timeout.ms` (15 min by default), and a longer lease is
//!   refused before the member registers (see below) and at `acquire_epoch`.
//!   librdkafka also lowers `socket.timeout.ms` and `message.timeout.ms` of
//!   the lease producer to the lease; a user value above the lease is
//!   refused before the member registers.
//! * **Fetch wait.** A standby's consumer keeps one fetch request waiting at
//!   the broker for at most `fetch.wait.max.ms`
//!   ([`KafkaConfig::with_fetch_wait`], 25 ms by default). The broker answers
//!   early when a commit moves the last stable offset, so the wake-up latency
//!   of `poll_partition` after a commit is a few milliseconds (measured on a
//!   local Kafka 4.1: about 2 ms after the writer's ack, the same with a
//!   25 ms, 500 ms and 2 s wait). The wait mostly sets how many empty fetches
//!   a quiet partition costs: one per wait and member; raise it to cut that
//!   traffic. It is also the longest a read waits at an end it cannot see
//!   early (none was observed in the tests).
//! * **Operation timeout** ([`KafkaConfig::with_operation_timeout`], 30 s):
//!   the budget of a mint (connecting its producer, the wait for a completing
//!   transaction, InitProducerId), commit, abort, a read to the last stable
//!   offset, a describe with its retries.
//! * **Latency defaults** (a user setting overrides them): the lease and
//!   registration producers send at once (`linger.ms = 0` instead of
//!   librdkafka's 5 ms), and the lease producer uses `reconnect.backoff.ms =
//!   22`: librdkafka waits half of it (at least 11 ms) before it connects to
//!   a broker it has just learned of, 50 ms with its default of 100 ms, which
//!   is most of the time a new producer needs to get usable.
//! * **Commit.** Before a commit the transport waits (microseconds, at most
//!   50 ms) until librdkafka has released the transaction's delivered
//!   messages. rust-rdkafka's commit flushes first and, if it finds one still
//!   counted, polls for up to 100 ms for an event that does not come (the
//!   producer's own polling thread takes it); that cost about one commit in
//!   ten 100 ms.
//!
//! # Topic and cluster requirements
//!
//! Before a member registers, [`Coordinator::check_member`] checks what it
//! depends on ([`KafkaTransport::preflight`] reports the same): the state
//! topic exists, has the member's partition count and is compacted; the
//! member's principal has the ACLs a member needs (README, "Secured
//! clusters"); the
//! lease fits the brokers' `transaction.max.timeout.ms`; the user's producer
//! timeouts fit the lease. The cluster is read once per transport, the first
//! request bounded by the connect timeout
//! ([`KafkaConfig::with_connect_timeout`], 10 s): with no broker reachable
//! the acquire fails with [`Error::Transient`] naming the bootstrap address,
//! and nothing is registered. A member that reached the cluster once keeps
//! retrying when it loses it later.
//!
//! **Losing a broker.** When a broker dies, the cluster moves its partitions
//! (the state partition of a role, if it led it) and its transaction
//! coordinators (a role's, if it was there) to other brokers only once it
//! declares the broker dead, after `broker.session.timeout.ms` (9 s by
//! default; `zookeeper.session.timeout.ms`, 18 s, on a ZooKeeper cluster).
//! Until then a leader's renewals cannot commit. Its last renewal may have
//! been sent one renew interval before the broker died, so its lease rides
//! out the loss only if
//!
//! ```text
//! lease >= renew interval + broker.session.timeout.ms + BROKER_LOSS_MARGIN (4 s)
//! ```
//!
//! (the margin covers the controller's election when the dead broker was the
//! active controller, the coordinator's load on its new broker, and the
//! clients finding it: measured up to 4 s past the session timeout here).
//! With the defaults (9 s), a 15 s lease renewed every 3 s falls short
//! (16 s needed; on the local cluster such a leader lost its lease 0.2 s
//! before the coordinator came back), 20 s passes, and the library's default
//! options (30 s, 10 s) pass too.
//! On a cluster of two brokers or more, a member whose options fall short
//! logs a warning once ([`BROKER_LOSS_MARGIN`]); its leader may be replaced
//! by a standby when one broker dies. The value is read from the brokers
//! with DescribeConfigs (the controllers' own value, which is the one that
//! counts on a cluster with separate controllers, is not reachable there:
//! keep the two equal). Reading broker configurations needs
//! DESCRIBE_CONFIGS on the cluster resource; without it the member warns
//! that these checks were skipped (the coordinator still refuses an
//! over-long lease at the first mint).
//!
//! **Authorization.** A member needs DESCRIBE, DESCRIBE_CONFIGS, READ and
//! WRITE on the state topic, WRITE and DESCRIBE on the transactional id of
//! each role it may lead (the role name), and WRITE on the topics of its
//! guarded writes. A missing authorization is [`Error::Fatal`] naming the
//! resource (the topic, the transactional id or the cluster), never retried
//! as transient.
//!
//! # Threads
//!
//! A transport's librdkafka clients are two, whatever the number of roles:
//! the registration producer and the state consumer (one queue per state
//! partition it reads); on the librdkafka lease path, one transactional
//! producer per held role and a spare per role it may mint in come on top.
//! The protocol client needs no thread of its own (a reader task per
//! connection). librdkafka's blocking calls (transactional ones, assign,
//! seek, watermarks) run on tokio's blocking pool (`spawn_blocking`), never
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
use crate::transport::{
    Backlog, Coordinator, Describer, LeaseWriter, ReadBatch, Record, Registrar, StateReader,
    StateRecord,
};

mod config;
mod describe;
mod epoch;
mod lease;
mod librdkafka;
mod mint;
mod oauth;
mod preflight;
mod protocol_lease;
mod reader;
mod sasl;
mod security;
mod seen;
mod topic;
mod wire;

pub use config::{KafkaConfig, LeasePath};
pub use describe::{BumpAnswer, DescribeClient, TransactionDescription};
pub use epoch::KafkaEpoch;
pub use mint::MintStats;
pub use oauth::{OAuthToken, OAuthTokenError, TokenProviderError};
pub use preflight::{PreflightReport, BROKER_LOSS_MARGIN};
pub use reader::READER_GROUP;
pub use topic::{check_state_topic, ensure_state_topic, TopicReport, TopicSpec};

use lease::LeaseProducer;
pub(crate) use librdkafka::{
    drop_off_thread, kafka_error, run_blocking, Producer, TransportContext,
};
use mint::{Counters, Spares};
use protocol_lease::ProtocolLease;
use reader::{PartitionReader, StateConsumer};

/// How long a read of a whole partition waits for the markers of a
/// commit that was acknowledged a moment ago (see
/// `KafkaTransport::wait_for_markers`).
const MARKER_WAIT: Duration = Duration::from_millis(250);

/// Between two looks at the last stable offset while waiting for markers.
const MARKER_POLL: Duration = Duration::from_millis(5);

/// The shortest lease librdkafka accepts as `transaction.timeout.ms`.
pub const MIN_LEASE_DURATION: Duration = Duration::from_secs(1);

/// Serialises the mints of one role on one transport.
type MintLock = Arc<AsyncMutex<()>>;
type ReaderSlot = Arc<AsyncMutex<Option<PartitionReader>>>;
type HwProbe = rdkafka::consumer::BaseConsumer<TransportContext>;

/// The transport on a real Kafka cluster: implements [`Coordinator`],
/// [`StateReader`] and [`Registrar`]; its epochs ([`KafkaEpoch`]) implement
/// [`LeaseWriter`].
///
/// One transport per process (a [`crate::client::Client`] holds one). It
/// holds a plain idempotent producer for registrations, one read_committed
/// consumer for every state partition it reads (each partition on a queue of
/// its own), and a [`DescribeClient`]. On [`LeasePath::Librdkafka`] it also
/// keeps a spare lease producer per role it may mint in, and the
/// transactional producer of a held epoch belongs to its [`KafkaEpoch`]; on
/// [`LeasePath::Protocol`] every epoch writes through the describe client's
/// connections. Every producer and consumer is created with the settings of
/// the [`KafkaConfig`].
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
    describe: DescribeClient,
    mint_locks: StdMutex<HashMap<String, MintLock>>,
    /// Each read partition's reader; a task keeps what they keep current
    /// ([`keep_readers_up`]).
    readers: Arc<StdMutex<HashMap<i32, ReaderSlot>>>,
    /// The consumer every partition reader reads from, made on first use.
    state_consumer: std::sync::OnceLock<StateConsumer>,
    seeks: Arc<AtomicU64>,
    /// A read_uncommitted consumer that only asks for high watermarks, made
    /// on first use (see [`StateReader::held_back`]).
    hw_probe: std::sync::OnceLock<Arc<HwProbe>>,
    /// The check before a member registers, with what it read of the
    /// cluster (see [`KafkaTransport::preflight`]).
    preflight: preflight::Preflight,
    spares: Spares,
    mints: Arc<Counters>,
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
    /// Builds the registration producer and the DescribeTransactions client
    /// at once, so a setting librdkafka rejects, a malformed bootstrap
    /// address or a security setting the describe client cannot honour (or
    /// a certificate file it cannot read) is refused here ([`Error::InvalidArgument`] naming it). Connects lazily.
    pub fn new(config: KafkaConfig, member_id: Option<&str>) -> Result<KafkaTransport> {
        config.validate()?;
        let describe = DescribeClient::new(&config)?;
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
            spares: Spares::new(config.clone(), client_suffix.clone()),
            config,
            client_suffix,
            registrar: Some(registrar),
            describe,
            mint_locks: StdMutex::new(HashMap::new()),
            readers: Arc::new(StdMutex::new(HashMap::new())),
            state_consumer: std::sync::OnceLock::new(),
            seeks: Arc::new(AtomicU64::new(0)),
            hw_probe: std::sync::OnceLock::new(),
            preflight: preflight::Preflight::default(),
            mints: Arc::default(),
        })
    }

    /// The configuration the transport was built with.
    pub fn config(&self) -> &KafkaConfig {
        &self.config
    }

    /// The transport's DescribeTransactions client.
    pub fn describe_client(&self) -> &DescribeClient {
        &self.describe
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

    /// Counters of this transport's epoch mints: how many used a spare lease
    /// producer, waited for a completing transaction, or fenced an open one.
    /// For metrics and tests.
    pub fn mint_stats(&self) -> MintStats {
        self.mints.snapshot()
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
            .report(&self.config, &self.describe, role, options)
            .await
    }

    /// Whether the transport keeps a spare lease producer of `role`, ready or
    /// being built (see the module docs, "Minting"). For tests.
    #[doc(hidden)]
    pub fn has_spare_lease_producer(&self, role: &str) -> bool {
        self.spares.has_spare(role)
    }

    /// The high-watermark probe, made on first use; true when this call
    /// made it.
    fn hw_probe(&self) -> Result<(Arc<HwProbe>, bool)> {
        if let Some(p) = self.hw_probe.get() {
            return Ok((Arc::clone(p), false));
        }
        let mut cc = self
            .config
            .client_config(&format!("{}-hw", self.client_suffix));
        cc.set("isolation.level", "read_uncommitted");
        cc.set("enable.auto.commit", "false");
        cc.set("group.id", reader::reader_group(&self.config));
        let probe: HwProbe = cc
            .create_with_context(TransportContext::new(&self.config))
            .map_err(|e| kafka_error("creating the high-watermark probe", e))?;
        let probe = Arc::new(probe);
        oauth::keep_fresh(&probe);
        match self.hw_probe.set(Arc::clone(&probe)) {
            Ok(()) => Ok((probe, true)),
            // Another call made one first: use that one.
            Err(_) => {
                drop_off_thread(probe);
                Ok((
                    Arc::clone(self.hw_probe.get().expect("set by the other call")),
                    false,
                ))
            }
        }
    }

    fn mint_lock(&self, role: &str) -> MintLock {
        let mut locks = self.mint_locks.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(locks.entry(role.to_owned()).or_default())
    }

    /// Mints the epoch of `role` (InitProducerId with `transactional.id =
    /// role` and the lease as the transaction timeout) and returns it as a
    /// [`KafkaEpoch`] owned by the caller. [`Coordinator::acquire_epoch`] is
    /// this, boxed.
    ///
    /// The mint runs in its own task under the role's mint lock: a caller that
    /// stops waiting neither leaves a half-built producer nor drops one on a
    /// worker thread; the producer it would have received is released.
    pub async fn mint_epoch(&self, role: &str, lease_duration: Duration) -> Result<KafkaEpoch> {
        check_role(role)?;
        let lease_ms = lease_millis(lease_duration)?;
        let lock = self.mint_lock(role);
        let (config, suffix, describe, spares, counters) = (
            self.config.clone(),
            self.client_suffix.clone(),
            self.describe.clone(),
            self.spares.clone(),
            Arc::clone(&self.mints),
        );
        let role = role.to_owned();
        let (tx, rx) = tokio::sync::oneshot::channel::<Result<KafkaEpoch>>();
        tokio::spawn(async move {
            let _serialised = lock.lock().await;
            let deadline = deadline_in(config.operation_timeout());
            if config.lease_path() == LeasePath::Protocol {
                let result = mint_protocol(&describe, &counters, &role, lease_ms, deadline)
                    .await
                    .map(|token| {
                        KafkaEpoch::new(
                            &config,
                            describe.clone(),
                            role.clone(),
                            lease_ms,
                            epoch::Backend::Protocol(ProtocolLease::new(
                                describe.clone(),
                                token,
                                protocol_lease::max_batch_bytes(&config),
                            )),
                        )
                    });
                let _ = tx.send(result);
                return;
            }
            let minted = mint(
                &config, &suffix, &describe, &spares, &counters, &role, lease_ms, deadline,
            )
            .await;
            // The next mint of the role (a resign, a new challenge) finds a
            // spare ready, whether this one worked or not.
            spares.minted(&role, lease_ms);
            let result = minted.map(|(producer, token)| {
                tracing::debug!(role, %token, "epoch minted");
                counters.minted.fetch_add(1, Ordering::Relaxed);
                KafkaEpoch::new(
                    &config,
                    describe.clone(),
                    role.clone(),
                    lease_ms,
                    epoch::Backend::Rdkafka(LeaseProducer::new(producer, token, describe.clone())),
                )
            });
            // A caller that gave up drops the receiver: the epoch it minted
            // is released here (KafkaEpoch's drop), nothing else.
            let _ = tx.send(result);
        });
        rx.await
            .map_err(|e| Error::fatal("an acquire_epoch task", e))?
    }

    /// The partition's reader, locked for one call, created on first use.
    async fn reader(
        &self,
        partition: i32,
    ) -> Result<tokio::sync::OwnedMutexGuard<Option<PartitionReader>>> {
        check_partition(partition)?;
        let slot: ReaderSlot = {
            let mut readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(readers.entry(partition).or_default())
        };
        let mut guard = slot.lock_owned().await;
        if guard.is_none() {
            let shared = match self.state_consumer.get() {
                Some(c) => c,
                None => {
                    let made = StateConsumer::new(&self.config, &self.client_suffix)?;
                    // Another reader may have made one first: keep that one.
                    // The first one made starts the task that keeps the
                    // readers' views current: here, where a runtime runs
                    // (the bindings build transports outside one).
                    if self.state_consumer.set(made).is_ok() {
                        tokio::spawn(keep_readers_up(Arc::downgrade(&self.readers)));
                    }
                    self.state_consumer.get().expect("set above")
                }
            };
            *guard = Some(PartitionReader::new(
                shared,
                &self.config,
                partition,
                Arc::clone(&self.seeks),
            ));
        }
        Ok(guard)
    }
}

/// How often [`keep_readers_up`] takes in what the readers' partitions
/// brought.
const KEEP_UP_EVERY: Duration = Duration::from_secs(1);

/// Every [`KEEP_UP_EVERY`] from the first read of the state topic, takes
/// into each idle reader's kept view what librdkafka fetched of its
/// partition since its last read ([`PartitionReader::keep_up`]), until the
/// transport is dropped. A leader's follower stands where the term began;
/// its resign asks whether another member is registered, and starts from
/// the view ([`StateReader::kept_state`]) rather than reading every
/// renewal of the partition's other roles since. The cost grows with the
/// records written, each taken in once per process.
async fn keep_readers_up(readers: std::sync::Weak<StdMutex<HashMap<i32, ReaderSlot>>>) {
    loop {
        tokio::time::sleep(KEEP_UP_EVERY).await;
        let Some(readers) = readers.upgrade() else {
            return;
        };
        let slots: Vec<ReaderSlot> = readers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        drop(readers);
        for slot in slots {
            // A reader in use is current anyway.
            if let Ok(mut reader) = slot.try_lock() {
                if let Some(r) = reader.as_mut() {
                    r.keep_up().await;
                }
            }
        }
    }
}

/// One mint on the protocol lease path: one InitProducerId of the protocol
/// client, whose answer is the token. No way to clear first: the client
/// sends InitProducerId again 3 ms after CONCURRENT_TRANSACTIONS (a
/// transaction completing, or an open one the request itself fences and
/// aborts), where librdkafka waits 500 ms.
async fn mint_protocol(
    describe: &DescribeClient,
    counters: &Counters,
    role: &str,
    lease_ms: u64,
    deadline: tokio::time::Instant,
) -> Result<FencingToken> {
    let timeout_ms = i32::try_from(lease_ms).unwrap_or(i32::MAX);
    let token = describe
        .init_producer_id(role, timeout_ms, deadline)
        .await?;
    tracing::debug!(role, %token, "epoch minted (protocol lease path)");
    counters.minted.fetch_add(1, Ordering::Relaxed);
    Ok(token)
}

/// One mint (see [`mint`](self::mint) module docs): a spare or fresh lease
/// producer, connected; the way cleared; InitProducerId; the minted token
/// learned with DescribeTransactions.
#[allow(clippy::too_many_arguments)]
async fn mint(
    config: &KafkaConfig,
    client_suffix: &str,
    describe: &DescribeClient,
    spares: &Spares,
    counters: &Counters,
    role: &str,
    lease_ms: u64,
    deadline: tokio::time::Instant,
) -> Result<(Producer, FencingToken)> {
    let topic = config.state_topic().to_owned();
    let started = tokio::time::Instant::now();
    let mut spare = false;
    let producer = match spares.take(role, lease_ms).await {
        Some(p) => {
            spare = true;
            counters.from_spare.fetch_add(1, Ordering::Relaxed);
            // Reconnects a spare whose connection went idle and was closed.
            run_blocking(move || {
                mint::connect(&p, &topic, deadline, 1);
                p
            })
            .await?
        }
        None => {
            let (config, suffix, role) =
                (config.clone(), client_suffix.to_owned(), role.to_owned());
            run_blocking(move || -> Result<Producer> {
                let p = mint::create_lease_producer(&config, &suffix, &role, lease_ms)?;
                mint::connect(&p, &topic, deadline, 2);
                Ok(p)
            })
            .await??
        }
    };
    let connected = started.elapsed();
    mint::clear_the_way(describe, role, lease_ms, deadline, counters).await;
    let cleared = started.elapsed();
    let timeout = deadline
        .saturating_duration_since(tokio::time::Instant::now())
        .max(Duration::from_millis(1));
    let (p, role_owned) = (producer.clone(), role.to_owned());
    let initialised = run_blocking(move || mint::init(&p, &role_owned, lease_ms, timeout)).await;
    if let Err(e) = initialised.and_then(|r| r) {
        drop_off_thread(producer);
        return Err(e);
    }
    let initialised = started.elapsed();
    tracing::debug!(
        role,
        spare,
        ?connected,
        ?cleared,
        ?initialised,
        "mint: producer connected, way cleared, InitProducerId done"
    );
    // No getter for the minted (producer id, epoch): ask the coordinator.
    match describe.describe_transaction(role).await {
        Ok(Some(d)) => Ok((producer, d.token)),
        Ok(None) => {
            drop_off_thread(producer);
            Err(Error::transient(
                format!("acquire_epoch for role {}", crate::error::quote(role)),
                "the coordinator does not know the transactional id right after InitProducerId",
            ))
        }
        Err(e) => {
            drop_off_thread(producer);
            Err(e)
        }
    }
}

impl Drop for KafkaTransport {
    fn drop(&mut self) {
        self.spares.discard_all();
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
        if let Some(p) = self.hw_probe.take() {
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

/// The lease in whole milliseconds, within librdkafka's bounds.
fn lease_millis(lease: Duration) -> Result<u64> {
    let ms = lease.as_millis();
    if lease < MIN_LEASE_DURATION || ms > i32::MAX as u128 {
        return Err(Error::InvalidArgument(format!(
            "lease duration {lease:?} is outside 1 s ..= {} ms (it is the transaction timeout)",
            i32::MAX
        )));
    }
    Ok(ms as u64)
}

#[async_trait]
impl Describer for KafkaTransport {
    async fn describe_epoch(&self, role: &str) -> Result<FencingToken> {
        check_role(role)?;
        self.describe.describe_epoch(role).await
    }
}

#[async_trait]
impl Coordinator for KafkaTransport {
    async fn acquire_epoch(
        &self,
        role: &str,
        lease_duration: Duration,
    ) -> Result<Box<dyn LeaseWriter>> {
        Ok(Box::new(self.mint_epoch(role, lease_duration).await?))
    }

    /// Keeps a pre-connected lease producer of `role` while the member may
    /// mint it, so the mint skips building and connecting one.
    /// On [`LeasePath::Protocol`] a mint needs nothing prepared.
    fn prepare_epoch(&self, role: &str, lease_duration: Option<Duration>) {
        if self.config.lease_path() == LeasePath::Protocol {
            return;
        }
        match lease_duration.map(lease_millis) {
            Some(Ok(ms)) => self.spares.prepare(role, Some(ms)),
            Some(Err(_)) => {}
            None => self.spares.prepare(role, None),
        }
    }

    /// See [`KafkaTransport::preflight`]: the same checks, with each
    /// warning logged once per transport.
    async fn check_member(
        &self,
        role: &str,
        options: &crate::election::ElectionOptions,
    ) -> Result<()> {
        self.preflight
            .check(&self.config, &self.describe, role, options)
            .await
    }
}

#[async_trait]
impl StateReader for KafkaTransport {
    async fn read_partition(&self, partition: i32) -> Result<Vec<Record>> {
        self.wait_for_markers(partition).await;
        let mut reader = self.reader(partition).await?;
        reader
            .as_mut()
            .expect("reader() creates it")
            .read_all()
            .await
    }

    async fn read_state(&self, partition: i32) -> Result<ReadBatch> {
        self.wait_for_markers(partition).await;
        let mut reader = self.reader(partition).await?;
        reader
            .as_mut()
            .expect("reader() creates it")
            .read_state()
            .await
    }

    async fn kept_state(&self, partition: i32) -> Option<ReadBatch> {
        let slot = {
            let readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(readers.get(&partition)?)
        };
        let reader = slot.lock().await;
        reader.as_ref()?.kept_state()
    }

    async fn poll_partition(
        &self,
        partition: i32,
        from: i64,
        max_wait: Duration,
    ) -> Result<ReadBatch> {
        let mut reader = self.reader(partition).await?;
        reader
            .as_mut()
            .expect("reader() creates it")
            .poll(from, max_wait)
            .await
    }

    async fn held_back(&self, partition: i32, position: i64) -> Result<Backlog> {
        self.held_back_now(partition, position).await
    }
}

impl KafkaTransport {
    /// The high watermark of `partition` (the end of the log, records of
    /// open transactions included), read with the read_uncommitted probe,
    /// or with ListOffsets on [`LeasePath::Protocol`].
    async fn high_watermark(&self, partition: i32) -> Result<i64> {
        if self.config.lease_path() == LeasePath::Protocol {
            let deadline = deadline_in(self.config.operation_timeout());
            return self
                .describe
                .end_offset(self.config.state_topic(), partition, false, deadline)
                .await;
        }
        // The call that made the probe asks for the metadata first; calls
        // meanwhile find the leader when that answer fills the cache.
        let (probe, first) = self.hw_probe()?;
        let (topic, timeout) = (
            self.config.state_topic().to_owned(),
            self.config.operation_timeout(),
        );
        let context = format!("reading the high watermark of {topic}/{partition}");
        let (_, high) = run_blocking(move || {
            // Nothing polls the probe: it gets its OAUTHBEARER token here.
            oauth::ensure_token(rdkafka::consumer::Consumer::client(&*probe))?;
            reader::fetch_watermarks_first(&*probe, &topic, partition, timeout, first)
                .map_err(|e| kafka_error(&context, e))
        })
        .await??;
        Ok(high)
    }

    /// Waits, at most [`MARKER_WAIT`], until the last stable offset of
    /// `partition` reaches the high watermark read first.
    ///
    /// The coordinator acknowledges a commit once it has logged it, before
    /// the transaction markers reach the partition; until they do, the last
    /// stable offset stays below the committed records, and a read_committed
    /// read misses them. A read right after a commit (a describe right
    /// after an acquire returned, in this process or another) waits for
    /// them, so it sees what was acknowledged. A transaction really held
    /// open only costs the bound; errors are left to the read that follows.
    async fn wait_for_markers(&self, partition: i32) {
        let Ok(high) = self.high_watermark(partition).await else {
            return;
        };
        let until = tokio::time::Instant::now() + MARKER_WAIT;
        loop {
            let stable = match self.reader(partition).await {
                Ok(reader) => match reader
                    .as_ref()
                    .expect("reader() creates it")
                    .watermarks()
                    .await
                {
                    Ok((_, stable)) => stable,
                    Err(_) => return,
                },
                Err(_) => return,
            };
            if stable >= high || tokio::time::Instant::now() >= until {
                return;
            }
            tokio::time::sleep(MARKER_POLL).await;
        }
    }

    /// One read of the high watermark through the read_uncommitted probe
    /// (the end of the log: records of open transactions and transaction
    /// markers included) decides. A read_committed reader's position after
    /// an end-of-partition event is the last stable offset, markers
    /// included, so with nothing open a reader that has read everything
    /// stands at the high watermark. Only when the high watermark lies past
    /// `position` does the last stable offset (a second read) tell an open
    /// transaction from records not read yet.
    async fn held_back_now(&self, partition: i32, position: i64) -> Result<Backlog> {
        check_partition(partition)?;
        if position < 0 {
            return Err(Error::InvalidArgument(format!(
                "read position must not be negative, got {position}"
            )));
        }
        let high = self.high_watermark(partition).await?;
        if high <= position {
            return Ok(Backlog::CaughtUp);
        }
        if self.config.lease_path() == LeasePath::Protocol {
            // The second read through the protocol client too.
            let deadline = deadline_in(self.config.operation_timeout());
            let stable = self
                .describe
                .end_offset(self.config.state_topic(), partition, true, deadline)
                .await?;
            return Ok(Backlog::of(position, high, stable));
        }
        let reader = self.reader(partition).await?;
        let (_, stable) = reader
            .as_ref()
            .expect("reader() creates it")
            .watermarks()
            .await?;
        Ok(Backlog::of(position, high, stable))
    }
}

#[async_trait]
impl Registrar for KafkaTransport {
    async fn append(&self, record: StateRecord) -> Result<i64> {
        let StateRecord {
            partition,
            key,
            value,
        } = record;
        check_partition(partition)?;
        let producer = self
            .registrar
            .as_ref()
            .expect("the registration producer lives as long as the transport");
        let topic = self.config.state_topic();
        let mut record = FutureRecord::<[u8], [u8]>::to(topic)
            .partition(partition)
            .key(key.as_slice());
        if let Some(v) = &value {
            record = record.payload(v.as_slice());
        }
        let context = format!("append to {topic}/{partition}");
        match producer.send(record, self.config.operation_timeout()).await {
            Ok(delivery) => Ok(delivery.offset),
            Err((e, _)) => {
                if let Some((code, reason)) = producer.client().fatal_error() {
                    return Err(Error::fatal(
                        context,
                        format!("fatal producer error {code:?}: {reason}"),
                    ));
                }
                Err(match e.rdkafka_error_code() {
                    Some(RDKafkaErrorCode::UnknownPartition) => Error::InvalidArgument(format!(
                        "{context}: the topic has no partition {partition}"
                    )),
                    _ => kafka_error(&context, e),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_bounds_are_librdkafkas() {
        assert!(lease_millis(Duration::from_millis(999)).is_err());
        assert_eq!(lease_millis(Duration::from_secs(1)).unwrap(), 1000);
        assert!(lease_millis(Duration::from_millis(i32::MAX as u64 + 1)).is_err());
    }

    #[tokio::test]
    async fn options_with_a_lease_below_the_minimum_are_refused_up_front() {
        // Refused before any broker is contacted; the cluster check that
        // follows fails within the connect timeout, naming the address.
        let config =
            KafkaConfig::new("127.0.0.1:1").with_connect_timeout(Duration::from_millis(300));
        let t = KafkaTransport::new(config, None).unwrap();
        let short = crate::ElectionOptions::default()
            .with_lease_duration(Duration::from_millis(500))
            .with_renew_interval(Duration::from_millis(100));
        let e = t.check_member("r", &short).await.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("500ms"), "{e}");
        let e = t
            .check_member("r", &crate::ElectionOptions::default())
            .await
            .unwrap_err();
        assert!(e.is_transient(), "{e}");
        assert!(format!("{e:?}").contains("127.0.0.1:1"), "{e:?}");
    }

    #[test]
    fn deadlines_of_absurd_timeouts_do_not_overflow() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let far = deadline_in(Duration::MAX);
            assert!(far > tokio::time::Instant::now() + Duration::from_secs(86_400 * 365));
            let near = deadline_in(Duration::from_millis(5));
            assert!(near < far);
        });
    }

    #[test]
    fn new_refuses_bad_settings_by_name() {
        let e = KafkaTransport::new(
            KafkaConfig::new("127.0.0.1:1").set("linger.ms", "not-a-number"),
            None,
        )
        .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("linger.ms"), "{e}");
        let e = KafkaTransport::new(
            KafkaConfig::new("127.0.0.1:1").set("security.protocol", "SASL_GSSAPI"),
            None,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("security.protocol=SASL_GSSAPI"),
            "{e}"
        );
    }
}
