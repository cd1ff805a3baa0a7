//! The client: one set of Kafka clients shared by every role a process
//! leads or waits for.
//!
//! ```no_run
//! # async fn f() -> krabka_coordination::Result<()> {
//! use krabka_coordination::client::Client;
//! use krabka_coordination::transport::kafka::KafkaConfig;
//! let client = Client::new(KafkaConfig::new("127.0.0.1:19092"))?;
//! let billing = client.acquire("billing", "host-a", client.leadership_options()).await?;
//! let status = client.describe_leadership("billing").await?;
//! assert!(status.authoritative(&billing.token()));
//! # Ok(()) }
//! ```
//!
//! A [`Client`] owns the clients every role can share: the reader of the
//! state partitions, the registration producer and the DescribeTransactions
//! connections. Only the epoch-bound producer of a held role is per role, and
//! it belongs to that role's [`Leadership`]. Clones are cheap and share
//! everything.
//!
//! One client holds a role at most once: a second [`Client::acquire`] of a
//! role while the first is acquiring or held is refused
//! ([`crate::Error::InvalidArgument`]), because two members of one process
//! in one role would only fence each other.
//!
//! # Before a member registers
//!
//! [`Client::acquire`] refuses, before anything is written:
//!
//! * a role or member id the record layout cannot hold: empty, over 32767
//!   bytes of UTF-8, or with a NUL byte ([`crate::codec::check_role`],
//!   [`crate::codec::check_member_id`]; [`crate::Error::InvalidArgument`],
//!   the value quoted only in part);
//! * what the transport cannot honour
//!   ([`crate::transport::Coordinator::check_member`]). On Kafka: a lease
//!   outside what the transaction timeout allows (librdkafka's 1 s ..=
//!   `i32::MAX` ms, the brokers' `transaction.max.timeout.ms`), producer
//!   timeouts in the settings longer than the lease, a state topic that is
//!   missing, of another partition count or not compacted, and a cluster
//!   that does not answer within the connect timeout
//!   (`KafkaConfig::with_connect_timeout`, 10 s by default;
//!   [`crate::Error::Transient`] naming the bootstrap address).
//!
//! [`Client::describe_leadership`] refuses the same roles, and fails within
//! the connect timeout too when no broker was ever reached.
//!
//! # Closing
//!
//! [`Client::close`] ends everything the client started: it resigns every
//! term it holds (all at once, each bounded by its lease as
//! [`Leadership::resign`] is), cancels the acquires under way (they fail
//! with [`Error::Cancelled`]; one that won in that instant resigns), ends
//! its observers (their `next` yields `None`) and stops its leader loops
//! ([`LeaderLoop::next_term`](crate::leadership::LeaderLoop::next_term)
//! yields `None`). Every clone shares the close: from then on every
//! operation of the client is refused with [`Error::InvalidArgument`]
//! ("the client is closed").

mod open;

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::leadership::{
    acquire_with, describe_leadership, describe_role_state, describe_roles, Leadership,
    LeadershipOptions, LeadershipStatus, RoleListing, RoleStateReport,
};
#[cfg(feature = "kafka")]
use crate::transport::kafka::{KafkaConfig, KafkaTransport, TopicReport, TopicSpec};
use crate::transport::Transport;
use open::Open;
use tokio_util::sync::CancellationToken;

/// A handle on a coordination cluster, shared by every role of a process.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    transport: Arc<dyn Transport>,
    /// The Kafka transport of a client built by [`Client::new`], for the
    /// state topic's helpers (whose warnings it logs once).
    #[cfg(feature = "kafka")]
    kafka: Option<Arc<KafkaTransport>>,
    partitions: i32,
    /// The clock everything the client starts runs on, when not the
    /// system's ([`Client::with_clock`]).
    clock: Option<Arc<dyn Clock>>,
    /// Roles acquiring or held through this client.
    claimed: Arc<Mutex<HashSet<String>>>,
    /// What the client has open, for [`Client::close`].
    open: Open,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("partitions", &self.inner.partitions)
            .field("claimed", &self.claimed_roles())
            .finish_non_exhaustive()
    }
}

/// A role claimed by an acquire of this client, released when dropped.
struct Claim {
    role: String,
    claimed: Arc<Mutex<HashSet<String>>>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.claimed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.role);
    }
}

impl Client {
    /// A client of the Kafka cluster of `config`, for a state topic of the
    /// default 16 partitions ([`Client::with_partitions`] to change it).
    ///
    /// Builds the shared clients at once, so a setting librdkafka rejects or
    /// a malformed bootstrap address is refused here
    /// ([`Error::InvalidArgument`] naming it). Connects lazily.
    #[cfg(feature = "kafka")]
    pub fn new(config: KafkaConfig) -> Result<Client> {
        let transport = Arc::new(KafkaTransport::new(config, None)?);
        let mut client = Client::from_transport(transport.clone());
        Arc::get_mut(&mut client.inner)
            .expect("a new client is not shared yet")
            .kafka = Some(transport);
        Ok(client)
    }

    /// A client over any [`Transport`] (the in-memory one in tests, a
    /// wrapper that measures or injects faults).
    pub fn from_transport(transport: Arc<dyn Transport>) -> Client {
        Client {
            inner: Arc::new(Inner {
                transport,
                #[cfg(feature = "kafka")]
                kafka: None,
                partitions: crate::ElectionOptions::DEFAULT_PARTITIONS,
                clock: None,
                claimed: Arc::default(),
                open: Open::default(),
            }),
        }
    }

    /// The same client for a state topic of `partitions` partitions: the real
    /// count of the topic, the same in every member. Call it before the
    /// client is cloned or used.
    pub fn with_partitions(mut self, partitions: i32) -> Result<Client> {
        if partitions < 1 {
            return Err(Error::InvalidArgument(format!(
                "partitions must be at least 1, got {partitions}"
            )));
        }
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.partitions = partitions,
            None => {
                return Err(Error::InvalidArgument(
                    "with_partitions must be called before the client is cloned".into(),
                ))
            }
        }
        Ok(self)
    }

    /// The same client with every wait, lease instant and timer of what it
    /// starts on `clock` (a test's manual clock, see [`crate::testing`]):
    /// [`Client::leadership_options`] carry it, and [`Client::acquire`],
    /// [`Client::lead`] and [`Client::observe`] use it whatever clock their
    /// options name. Call it before the client is cloned or used; refused
    /// with [`Error::InvalidArgument`] after.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Result<Client> {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.clock = Some(clock),
            None => {
                return Err(Error::InvalidArgument(
                    "with_clock must be called before the client is cloned".into(),
                ))
            }
        }
        Ok(self)
    }

    /// The clock of [`Client::with_clock`], if one was set.
    pub fn clock(&self) -> Option<Arc<dyn Clock>> {
        self.inner.clock.clone()
    }

    /// The partition count of the state topic this client assumes.
    pub fn partitions(&self) -> i32 {
        self.inner.partitions
    }

    /// The transport this client shares between its roles.
    pub fn transport(&self) -> &Arc<dyn Transport> {
        &self.inner.transport
    }

    /// Default leadership options carrying this client's partition count.
    pub fn leadership_options(&self) -> LeadershipOptions {
        let options = LeadershipOptions::default().with_partitions(self.inner.partitions);
        match &self.inner.clock {
            Some(clock) => options.with_clock(Arc::clone(clock)),
            None => options,
        }
    }

    /// The roles this client is acquiring or holds.
    pub fn claimed_roles(&self) -> Vec<String> {
        let mut roles: Vec<String> = self
            .inner
            .claimed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect();
        roles.sort();
        roles
    }

    /// Acquires `role` as `member` (see [`crate::leadership::acquire_leadership`]
    /// for what a member does, cancellation and errors).
    ///
    /// Refused with [`Error::InvalidArgument`] ("the client is closed") once
    /// the client is closed. A close while it waits cancels it
    /// ([`Error::Cancelled`]). Refused with [`Error::InvalidArgument`]
    /// before any I/O when `role` or
    /// `member` cannot be held by the record layout (see the module docs),
    /// when this client is already acquiring or holding `role`, or when the
    /// options' partition count is not the client's. Then the transport
    /// checks the member before it registers (module docs, "Before a member
    /// registers"). The claim on the role ends when the returned
    /// [`Leadership`] ends or is dropped, or when the acquire fails.
    pub async fn acquire(
        &self,
        role: &str,
        member: &str,
        options: LeadershipOptions,
    ) -> Result<Leadership> {
        self.unless_crashed(self.acquire_now(role, member, options))
            .await
    }

    async fn acquire_now(
        &self,
        role: &str,
        member: &str,
        options: LeadershipOptions,
    ) -> Result<Leadership> {
        self.inner.open.check()?;
        crate::codec::check_role(role)?;
        crate::codec::check_member_id(member)?;
        if options.election.partitions != self.inner.partitions {
            return Err(Error::InvalidArgument(format!(
                "the options' partition count ({}) is not the client's ({}); build them with client.leadership_options()",
                options.election.partitions, self.inner.partitions
            )));
        }
        let claim = {
            let mut claimed = self.inner.claimed.lock().unwrap_or_else(|e| e.into_inner());
            if !claimed.insert(role.to_owned()) {
                return Err(Error::InvalidArgument(format!(
                    "role {} is already being acquired or held by this client",
                    crate::error::quote(role)
                )));
            }
            Claim {
                role: role.to_owned(),
                claimed: Arc::clone(&self.inner.claimed),
            }
        };
        let options = match &self.inner.clock {
            Some(clock) => options.with_clock(Arc::clone(clock)),
            None => options,
        };
        // The caller's token still cancels; so does the close.
        let cancel = options.cancel.child_token();
        let lease = options.election.lease_duration;
        let _entry = self.inner.open.acquire(cancel.clone(), lease)?;
        let leadership = acquire_with(
            Arc::clone(&self.inner.transport),
            role,
            member,
            options.with_cancel(cancel),
            Some(Box::new(claim)),
        )
        .await?;
        if let Err(e) = self.inner.open.hold(leadership.weak()) {
            if self.inner.open.abandoned().is_cancelled() {
                // The process crashed: nothing is resigned, the lease runs out.
                return Err(e);
            }
            // Closed after the win was checked against the cancel.
            let _ = leadership.resign().await;
            return Err(Error::Cancelled);
        }
        Ok(leadership)
    }

    /// The role's current token at its transaction coordinator: one
    /// DescribeTransactions request once the coordinator is known.
    ///
    /// A role no member can take is refused at once
    /// ([`Error::InvalidArgument`]). On Kafka, while no broker has ever
    /// answered, the call fails within the connect timeout with an error
    /// naming the bootstrap address.
    pub async fn describe_leadership(&self, role: &str) -> Result<LeadershipStatus> {
        self.inner.open.check()?;
        crate::codec::check_role(role)?;
        self.unless_crashed(describe_leadership(self.inner.transport.as_ref(), role))
            .await
    }

    /// The roster (in rank order) and the lease of `role`, read from its
    /// state partition.
    pub async fn describe_role_state(&self, role: &str) -> Result<RoleStateReport> {
        self.inner.open.check()?;
        crate::codec::check_role(role)?;
        self.unless_crashed(describe_role_state(
            self.inner.transport.as_ref(),
            role,
            self.inner.partitions,
        ))
        .await
    }

    /// Every role in the state topic with a roster or a lease: each
    /// partition read once, all at the same time (see [`describe_roles`]).
    pub async fn describe_roles(&self) -> Result<RoleListing> {
        self.inner.open.check()?;
        self.unless_crashed(describe_roles(
            self.inner.transport.as_ref(),
            self.inner.partitions,
        ))
        .await
    }

    /// Watches `roles` without joining them: a stream of who leads, with
    /// which token and lease, and the roster, read through this client's
    /// state reader (see [`crate::observe`]). Nothing is written.
    pub async fn observe(
        &self,
        roles: &[&str],
        mut options: crate::observe::ObserveOptions,
    ) -> Result<crate::observe::Observer> {
        self.inner.open.check()?;
        if let Some(clock) = &self.inner.clock {
            options.clock = Arc::clone(clock);
        }
        let observer = crate::observe::observe(
            Arc::clone(&self.inner.transport),
            roles,
            self.inner.partitions,
            options,
        )
        .await?;
        self.inner.open.observe(observer.handle())?;
        Ok(observer)
    }

    /// Closes the client (see the module documentation, "Closing"): cancels
    /// its acquires and waits for them to let go of their roles (at most
    /// their longest lease), ends its observers and leader loops, and
    /// resigns every term it holds, all at once (started in the order of
    /// the lease time each has left, least first), each bounded by its lease
    /// ([`Leadership::resign`]). Returns once that is done; a resign that
    /// failed is logged and its term ends all the same. Idempotent: a later
    /// or concurrent call waits for the first one to finish.
    pub async fn close(&self) {
        let open = &self.inner.open;
        let Some(drained) = open.shut() else {
            open.wait_closed().await;
            return;
        };
        for cancel in drained.acquires.iter().chain(&drained.observers) {
            cancel.cancel();
        }
        // The terms with the least lease left go first: when resigns queue
        // (a client of many roles), those are the ones a queue would make
        // miss their lease, leaving a standby to wait it out. Started in
        // that order, their requests reach the connections in it.
        let mut held = drained.held;
        held.sort_by_cached_key(|h| h.left());
        let resigns = held.iter().map(|h| h.resign()).collect();
        let (resigned, acquires) = tokio::join!(
            crate::join::join_all(resigns),
            tokio::time::timeout(drained.acquire_lease, open.acquires_ended()),
        );
        for e in resigned.into_iter().filter_map(Result::err) {
            tracing::warn!(error = %e, "closing the client: a resign failed");
        }
        if acquires.is_err() {
            tracing::warn!("closing the client: an acquire did not end within its lease");
        }
        open.finished();
    }

    /// Marks the client closed without sending anything, for a client
    /// whose process is gone ([`crate::testing::TestProcess::crash`]):
    /// later operations are refused as after [`Client::close`], with the
    /// closed error naming the crash; what was pending ends with that
    /// error (an acquire, a describe, an observer's next view, a guarded
    /// write or a resign) and each term held ends with it as its reason,
    /// without a resign or an event; a `close` returns at once instead of
    /// waiting for resigns that nothing would answer.
    pub(crate) fn abandon(&self) {
        self.inner.open.abandon();
    }

    /// A token cancelled when the client is abandoned ([`Client::abandon`]).
    pub(crate) fn abandoned(&self) -> CancellationToken {
        self.inner.open.abandoned().clone()
    }

    /// `fut`, unless the client is abandoned first: then the closed error
    /// naming the crash, and `fut` is dropped where it waits (a crashed
    /// process's call never reached the cluster and never will).
    async fn unless_crashed<T>(&self, fut: impl Future<Output = Result<T>>) -> Result<T> {
        let abandoned = self.inner.open.abandoned();
        tokio::select! {
            biased;
            _ = abandoned.cancelled() => Err(crate::error::process_crashed()),
            r = fut => r,
        }
    }

    /// `Err` with the error every operation of a closed client returns
    /// ([`Error::InvalidArgument`], "the client is closed"), `Ok` while
    /// it is open: for a binding that starts something on its behalf.
    pub fn check_open(&self) -> Result<()> {
        self.inner.open.check()
    }

    /// True once [`Client::close`] was called (on any clone).
    pub fn is_closed(&self) -> bool {
        self.inner.open.is_closing()
    }

    /// A token cancelled when [`Client::close`] starts: what the client
    /// started, and what a binding starts on its behalf, stops with it.
    pub fn closing(&self) -> CancellationToken {
        self.inner.open.closing().clone()
    }

    /// Creates the state topic with `spec` unless it exists, then checks it
    /// (see [`crate::transport::kafka::ensure_state_topic`]); each warning is
    /// logged, and this client's members do not log it again at acquire.
    #[cfg(feature = "kafka")]
    pub async fn ensure_state_topic(&self, spec: TopicSpec) -> Result<TopicReport> {
        self.inner.open.check()?;
        self.kafka("ensure_state_topic")?
            .ensure_state_topic(spec)
            .await
    }

    /// Checks that the state topic has `spec.partitions` partitions and is
    /// compacted (see [`crate::transport::kafka::check_state_topic`]); each
    /// warning is logged, and this client's members do not log it again.
    #[cfg(feature = "kafka")]
    pub async fn check_state_topic(&self, spec: TopicSpec) -> Result<TopicReport> {
        self.inner.open.check()?;
        self.kafka("check_state_topic")?
            .check_state_topic(spec.partitions)
            .await
    }

    /// The Kafka protocol client of this client's transport (its
    /// connections, shared with every role): for an
    /// [`crate::input::InputReader`] or a query of the cluster.
    /// [`Error::InvalidArgument`] for a client on another transport.
    #[cfg(feature = "kafka")]
    pub fn kafka_client(&self) -> Result<&crate::transport::kafka::KafkaClient> {
        Ok(self.kafka("kafka_client")?.kafka_client())
    }

    #[cfg(feature = "kafka")]
    fn kafka(&self, what: &str) -> Result<&KafkaTransport> {
        self.inner.kafka.as_deref().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{what} needs a client built on Kafka (Client::new), not on another transport"
            ))
        })
    }
}
