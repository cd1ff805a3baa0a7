//! [`Client`]: the core client, built once from Kafka settings, shared by
//! every role it acquires or describes.
//!
//! The settings are librdkafka's, passed through as they are
//! (`bootstrap.servers`, `security.protocol`, ...); the core refuses one
//! librdkafka rejects, naming it. Every operation checks its arguments when
//! called, before any I/O, and runs on the binding's runtime.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use krabka_coordination::transport::kafka;
use krabka_coordination::ElectionOptions;
use krabka_coordination_bindings::{
    options, KafkaClient, LeadershipArgs, ProcessBound, TimeoutArgs, TopicArgs,
};
use tokio_util::sync::CancellationToken;

use crate::error::KrabkaError;
use crate::events::AcquireEvents;
use crate::lead::LeaderLoop;
use crate::leadership::{Leadership, LeadershipStatus, RoleState};
use crate::oauth::OAuthTokenProvider;
use crate::observe::Observer;
use crate::runtime::{run, runtime, CancelOnDrop};

/// The options of a client; every one left out keeps the core's default.
#[derive(Clone, Default, uniffi::Record)]
pub struct ClientOptions {
    /// The partition count of the state topic (default 16).
    #[uniffi(default = None)]
    pub partitions: Option<i32>,
    /// The name of the state topic (default `__coordination_state`).
    #[uniffi(default = None)]
    pub state_topic: Option<String>,
    /// How long the first contact with the cluster may take, in seconds
    /// (default 10).
    #[uniffi(default = None)]
    pub connect_timeout: Option<f64>,
    /// The budget of one blocking client operation, in seconds (default 30).
    #[uniffi(default = None)]
    pub operation_timeout: Option<f64>,
    /// Supplies the OAUTHBEARER tokens (with `sasl.mechanism`
    /// `OAUTHBEARER`; see [`OAuthTokenProvider`]).
    #[uniffi(default = None)]
    pub oauth_token_provider: Option<Arc<dyn OAuthTokenProvider>>,
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientOptions")
            .field("partitions", &self.partitions)
            .field("state_topic", &self.state_topic)
            .field("connect_timeout", &self.connect_timeout)
            .field("operation_timeout", &self.operation_timeout)
            .field("oauth_token_provider", &self.oauth_token_provider.is_some())
            .finish()
    }
}

/// The timings of an acquire, in seconds; left out: the core's defaults
/// (30 s lease, 10 s renew interval, 5 s stagger).
#[derive(Debug, Clone, Default, PartialEq, uniffi::Record)]
pub struct AcquireOptions {
    /// How long a lease lasts.
    #[uniffi(default = None)]
    pub lease_duration: Option<f64>,
    /// How often the holder renews (below the lease duration).
    #[uniffi(default = None)]
    pub renew_interval: Option<f64>,
    /// The delay between ranks of challengers.
    #[uniffi(default = None)]
    pub challenge_stagger: Option<f64>,
}

/// The shape of the state topic to create. The defaults are a production
/// cluster's (replication factor 3, `min.insync.replicas` 2); `development`
/// makes them 1 and 1 for a single broker. Explicit values win.
#[derive(Debug, Clone, Default, PartialEq, Eq, uniffi::Record)]
pub struct TopicOptions {
    /// A single-broker development cluster.
    #[uniffi(default = false)]
    pub development: bool,
    /// The replication factor.
    #[uniffi(default = None)]
    pub replication_factor: Option<i32>,
    /// `min.insync.replicas`.
    #[uniffi(default = None)]
    pub min_insync_replicas: Option<i32>,
}

/// The state topic as the cluster reports it.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct TopicReport {
    /// The topic's name.
    pub topic: String,
    /// True when this call created it.
    pub created: bool,
    /// The partition count.
    pub partitions: i32,
    /// The replica count of partition 0.
    pub replication_factor: i32,
    /// The topic's `cleanup.policy` (`compact`).
    pub cleanup_policy: String,
    /// The topic's `min.insync.replicas`, when the broker reports it.
    pub min_insync_replicas: Option<i32>,
    /// Advice for the operator.
    pub warnings: Vec<String>,
}

impl From<kafka::TopicReport> for TopicReport {
    fn from(r: kafka::TopicReport) -> Self {
        TopicReport {
            topic: r.topic,
            created: r.created,
            partitions: r.partitions,
            replication_factor: r.replication_factor,
            cleanup_policy: r.cleanup_policy,
            min_insync_replicas: r.min_insync_replicas,
            warnings: r.warnings,
        }
    }
}

/// The core client of one set of Kafka settings (see the module
/// documentation). `close` ends everything it started (see `Client.close`).
#[derive(uniffi::Object)]
pub struct Client {
    /// `None` once closed.
    inner: Mutex<Option<ProcessBound<KafkaClient>>>,
    partitions: i32,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("partitions", &self.partitions)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// The client of a test-kit process (see [`crate::testing`]): the
    /// binding's client over the core's on the in-memory cluster.
    pub(crate) fn on_test_process(
        process: &krabka_coordination::testing::TestProcess,
        partitions: i32,
    ) -> Result<Arc<Client>, KrabkaError> {
        crate::metrics::registry();
        let handle = runtime()?.handle().clone();
        let client = KafkaClient::on_test_process(process);
        Ok(Arc::new(Client {
            inner: Mutex::new(Some(ProcessBound::new("Client", client, Some(handle)))),
            partitions,
        }))
    }

    /// The core client (a cheap clone), or an error once closed.
    fn client(&self) -> Result<KafkaClient, KrabkaError> {
        let guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match guard.as_ref() {
            Some(bound) => Ok(bound.get().cloned()?),
            None => Err(KrabkaError::InvalidArgument {
                detail: "the client is closed".into(),
            }),
        }
    }
}

#[uniffi::export]
impl Client {
    /// Builds the shared Kafka clients from `kafka` (librdkafka settings,
    /// `bootstrap.servers` at least) and `options`. Nothing connects yet.
    #[uniffi::constructor(default(options = None))]
    pub fn new(
        kafka: HashMap<String, String>,
        options: Option<ClientOptions>,
    ) -> Result<Arc<Self>, KrabkaError> {
        // The core's metrics count from the first client on.
        crate::metrics::registry();
        let o = options.unwrap_or_default();
        let partitions = match o.partitions {
            Some(p) => options::partitions(p.into())?,
            None => ElectionOptions::DEFAULT_PARTITIONS,
        };
        let timeouts = TimeoutArgs {
            connect_timeout: o.connect_timeout,
            operation_timeout: o.operation_timeout,
        };
        // Sorted: the same settings always make the same configuration.
        let mut settings: Vec<(String, String)> = kafka.into_iter().collect();
        settings.sort();
        let mut config = options::kafka_config(settings);
        if let Some(topic) = o.state_topic {
            config = config.with_state_topic(topic);
        }
        if let Some(provider) = o.oauth_token_provider {
            config = config.with_oauth_token_provider(crate::oauth::token_provider(provider));
        }
        let config = timeouts.apply(config)?;
        let handle = runtime()?.handle().clone();
        let client = {
            // librdkafka's clients are made inside the runtime.
            let _entered = handle.enter();
            KafkaClient::new(config, partitions)?
        };
        Ok(Arc::new(Client {
            inner: Mutex::new(Some(ProcessBound::new("Client", client, Some(handle)))),
            partitions,
        }))
    }

    /// The partition count of the state topic.
    pub fn partitions(&self) -> i32 {
        self.partitions
    }

    /// The name of the state topic.
    pub fn state_topic(&self) -> Result<String, KrabkaError> {
        Ok(self.client()?.state_topic().to_owned())
    }

    /// Acquires `role` as `member`: registers, waits for the turn, mints the
    /// epoch and writes the first lease. Cancelling the caller (a Kotlin
    /// coroutine, a Swift task) stops a waiting acquire: the core
    /// deregisters the member; a role won in the instant of the cancel is
    /// resigned (by the core, or here when the win came first), never left
    /// held until its lease runs out.
    ///
    /// `events`, when given, receives the member's events from its
    /// registration on (`registered`, `waiting` with the holder it waits
    /// behind, ...), then the term's (see [`AcquireEvents`]).
    #[uniffi::method(default(options = None, events = None))]
    pub async fn acquire(
        &self,
        role: String,
        member: String,
        options: Option<AcquireOptions>,
        events: Option<Arc<AcquireEvents>>,
    ) -> Result<Arc<Leadership>, KrabkaError> {
        let o = options.unwrap_or_default();
        let args = LeadershipArgs {
            lease_duration: o.lease_duration,
            renew_interval: o.renew_interval,
            challenge_stagger: o.challenge_stagger,
        };
        let feed = match events {
            Some(e) => Some(e.take().ok_or_else(|| KrabkaError::InvalidArgument {
                detail: "this AcquireEvents was given to an acquire already".into(),
            })?),
            None => None,
        };
        let cancel = CancellationToken::new();
        let fut = self
            .client()?
            .acquire_with_feed(role, member, &args, cancel.clone(), feed)?;
        let guard = CancelOnDrop::new(cancel);
        let (tx, rx) = tokio::sync::oneshot::channel();
        runtime()?.spawn(async move {
            let won = fut.await;
            if let Err(Ok(won)) = tx.send(won) {
                // The caller stopped waiting as the role was won.
                if let Err(e) = won.resign().await {
                    tracing::warn!(error = %e, "resigning a leadership won after its acquire was given up");
                }
            }
        });
        let won = rx.await.map_err(|_| KrabkaError::Fatal {
            detail: "the acquire task ended without an answer (it panicked)".into(),
        })?;
        guard.disarm();
        let won = won.map_err(|e| KrabkaError::from(&e))?;
        Ok(Arc::new(Leadership::new(won)?))
    }

    /// A leader loop of `member` in `role` (see [`LeaderLoop`]; Kotlin's
    /// `Client.lead` drives one): the role, the member and the timings
    /// are checked now, before any I/O; nothing starts until the first
    /// `nextTerm()`.
    #[uniffi::method(default(options = None))]
    pub fn leader_loop(
        &self,
        role: String,
        member: String,
        options: Option<AcquireOptions>,
    ) -> Result<Arc<LeaderLoop>, KrabkaError> {
        let o = options.unwrap_or_default();
        let args = LeadershipArgs {
            lease_duration: o.lease_duration,
            renew_interval: o.renew_interval,
            challenge_stagger: o.challenge_stagger,
        };
        let handle = self.client()?.leader_loop(&role, &member, &args, None)?;
        Ok(Arc::new(LeaderLoop::new(handle)?))
    }

    /// Watches `roles` without joining them (see [`Observer`]); `renewals`
    /// reports each renewal too. Refused before any read: no role, an empty
    /// role, one with a NUL byte or one too long.
    #[uniffi::method(default(renewals = false))]
    pub async fn observe(
        &self,
        roles: Vec<String>,
        renewals: bool,
    ) -> Result<Arc<Observer>, KrabkaError> {
        let handle = run(self.client()?.observe(roles, renewals)).await?;
        Ok(Arc::new(Observer::new(handle)?))
    }

    /// The role's current token at its transaction coordinator (one
    /// DescribeTransactions request once the coordinator is known).
    pub async fn describe_leadership(
        &self,
        role: String,
    ) -> Result<Arc<LeadershipStatus>, KrabkaError> {
        let status = run(self.client()?.describe_leadership(role)).await?;
        Ok(Arc::new(LeadershipStatus::from(status)))
    }

    /// The roster (in rank order) and the lease of `role`, read from its
    /// partition of the state topic.
    pub async fn describe_role_state(&self, role: String) -> Result<RoleState, KrabkaError> {
        Ok(run(self.client()?.describe_role_state(role)).await?.into())
    }

    /// Creates the state topic (this client's partition count, the shape of
    /// `options`) unless it exists, then checks it.
    #[uniffi::method(default(options = None))]
    pub async fn ensure_state_topic(
        &self,
        options: Option<TopicOptions>,
    ) -> Result<TopicReport, KrabkaError> {
        let o = options.unwrap_or_default();
        let args = TopicArgs {
            development: o.development,
            replication_factor: o.replication_factor.map(i64::from),
            min_insync_replicas: o.min_insync_replicas.map(i64::from),
        };
        let fut = self.client()?.ensure_state_topic(&args)?;
        Ok(run(fut).await?.into())
    }

    /// Checks that the state topic exists, is compacted and has this
    /// client's partition count.
    pub async fn check_state_topic(&self) -> Result<TopicReport, KrabkaError> {
        Ok(run(self.client()?.check_state_topic()).await?.into())
    }

    /// Closes the client: resigns every leadership it holds (all at once,
    /// each bounded by its lease), cancels its pending acquires (they fail
    /// with the cancelled error), stops its leader loops and observers, then
    /// lets go of the shared Kafka clients. Every later operation fails at
    /// once with `InvalidArgument` ("the client is closed"). Idempotent;
    /// never fails. Kotlin names it `closeClient` (Kotlin's `close()` and
    /// `use { }` run it, then free the object; garbage collection never
    /// does); Swift `close()`.
    pub async fn close(&self) {
        let taken = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
        let client = taken.as_ref().and_then(|bound| bound.get().ok().cloned());
        drop(taken);
        if let Some(client) = client {
            // On the runtime: the close goes on when the caller stops waiting.
            let closing = run(async move {
                client.close().await;
                Ok(())
            });
            if let Err(e) = closing.await {
                tracing::warn!(error = %e, "closing the client");
            }
        }
    }

    /// `Client.close` for a caller that cannot await (Kotlin's `close()`
    /// and `use { }`): waits until it is done (bounded by the leases), except
    /// on a thread of an async runtime (a coroutine resumed by this
    /// binding's runtime), where waiting would block that runtime: there it
    /// starts the close and returns at once. Idempotent; never fails.
    pub fn close_blocking(&self) {
        let taken = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
        let client = taken.as_ref().and_then(|bound| bound.get().ok().cloned());
        drop(taken);
        let (Some(client), Ok(rt)) = (client, runtime()) else {
            return;
        };
        let (tx, rx) = std::sync::mpsc::channel();
        rt.spawn(async move {
            client.close().await;
            let _ = tx.send(());
        });
        if tokio::runtime::Handle::try_current().is_ok() {
            return;
        }
        let _ = rx.recv();
    }

    /// True once closed.
    pub fn is_closed(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }
}
