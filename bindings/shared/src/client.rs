//! The client a binding builds once from the host's settings: the core
//! [`Client`] on a Kafka transport, shared by every role, with each
//! operation's arguments checked before any I/O. The same type holds the
//! client of a process of the core's test kit
//! ([`krabka_coordination::testing`]), so a binding's client class works
//! unchanged on an in-memory cluster; what only Kafka has is answered as
//! each method documents.
//!
//! Every operation returns a `'static` future (it owns clones of what it
//! needs), so a binding can run it on its runtime from any host thread, as a
//! blocking call or as the host's promise/awaitable.

use std::future::Future;
use std::sync::Arc;

use krabka_coordination::client::Client;
use krabka_coordination::events::EventSender;
use krabka_coordination::leadership::{Leadership, LeadershipStatus, RoleStateReport};
use krabka_coordination::testing::TestProcess;
use krabka_coordination::transport::kafka::{KafkaConfig, KafkaTransport, TopicReport, TopicSpec};
use krabka_coordination::{Error, Result};
use tokio_util::sync::CancellationToken;

use crate::events::AcquireFeed;
use crate::options::{LeadershipArgs, TopicArgs};

/// A core [`Client`] on Kafka and what it was built from, or the client of
/// a test-kit process ([`KafkaClient::on_test_process`]).
#[derive(Debug, Clone)]
pub struct KafkaClient {
    client: Client,
    /// `None` for a test-kit process's client.
    kafka: Option<KafkaParts>,
}

/// What only a client on Kafka has.
#[derive(Debug, Clone)]
struct KafkaParts {
    transport: Arc<KafkaTransport>,
    config: KafkaConfig,
}

impl KafkaClient {
    /// Builds the shared Kafka clients for `config` and a state topic of
    /// `partitions` partitions. The core refuses a setting librdkafka rejects
    /// or a bootstrap address it cannot parse ([`Error::InvalidArgument`]
    /// naming it); nothing connects yet.
    pub fn new(config: KafkaConfig, partitions: i32) -> Result<KafkaClient> {
        let transport = Arc::new(
            KafkaTransport::new(config.clone(), None).map_err(|e| unknown_setting(&config, e))?,
        );
        let client = Client::from_transport(transport.clone()).with_partitions(partitions)?;
        Ok(KafkaClient {
            client,
            kafka: Some(KafkaParts { transport, config }),
        })
    }

    /// The client of `process`, a process of a test cluster: every
    /// operation is the core's on the in-memory cluster and its manual
    /// clock. The state topic needs no creation there:
    /// [`KafkaClient::ensure_state_topic`] and
    /// [`KafkaClient::check_state_topic`] report it as it is (existing,
    /// compacted, the cluster's partition count, one replica);
    /// [`KafkaClient::config`] is `None` and
    /// [`KafkaClient::describe_requests`] 0.
    pub fn on_test_process(process: &TestProcess) -> KafkaClient {
        KafkaClient {
            client: process.client().clone(),
            kafka: None,
        }
    }

    /// The core client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The partition count of the state topic.
    pub fn partitions(&self) -> i32 {
        self.client.partitions()
    }

    /// The Kafka configuration; `None` for a test-kit process's client.
    pub fn config(&self) -> Option<&KafkaConfig> {
        self.kafka.as_ref().map(|k| &k.config)
    }

    /// The name of the state topic (the core's default name for a
    /// test-kit process's client).
    pub fn state_topic(&self) -> &str {
        self.config()
            .map_or(krabka_coordination::STATE_TOPIC, |c| c.state_topic())
    }

    /// DescribeTransactions requests sent so far by the shared describe
    /// client (for tests of the request cost); 0 for a test-kit process's
    /// client, which has no such client.
    pub fn describe_requests(&self) -> u64 {
        self.kafka
            .as_ref()
            .map_or(0, |k| k.transport.kafka_client().describes_sent())
    }

    /// Acquires `role` as `member` (the core's [`Client::acquire`]): the
    /// timings are checked now; the future registers, waits and wins. Firing
    /// `cancel` stops a waiting acquire (the core deregisters the member, and
    /// resigns a role won in the instant of the cancel). `events` receives the
    /// member's events from its registration on.
    pub fn acquire(
        &self,
        role: String,
        member: String,
        args: &LeadershipArgs,
        cancel: CancellationToken,
        events: Option<EventSender>,
    ) -> Result<impl Future<Output = Result<Leadership>> + Send + 'static> {
        let mut options = args
            .apply(self.client.leadership_options())?
            .with_cancel(cancel);
        if let Some(tx) = events {
            options = options.with_events(tx);
        }
        let client = self.client.clone();
        Ok(async move { client.acquire(&role, &member, options).await })
    }

    /// [`KafkaClient::acquire`] followed by an
    /// [`crate::AcquireEventStream`]: `feed`'s sender receives the member's
    /// events, and the acquire's outcome is attached to the stream as it
    /// settles (before the future returns it), so the stream goes on with
    /// the term or ends after a failed acquire.
    pub fn acquire_with_feed(
        &self,
        role: String,
        member: String,
        args: &LeadershipArgs,
        cancel: CancellationToken,
        feed: Option<AcquireFeed>,
    ) -> Result<impl Future<Output = Result<Arc<Leadership>>> + Send + 'static> {
        let (events, outcome) = match feed {
            Some(f) => (Some(f.events), Some(f.outcome)),
            None => (None, None),
        };
        let acquire = self.acquire(role, member, args, cancel, events)?;
        Ok(async move {
            let won = acquire.await.map(Arc::new);
            if let Some(outcome) = outcome {
                outcome.settle(&won);
            }
            won
        })
    }

    /// Closes the core client (see [`Client::close`]): resigns every role
    /// it holds (all at once, each bounded by its lease), cancels its
    /// acquires, ends its observers and leader loops; every later operation
    /// fails with "the client is closed". Idempotent; the future resolves
    /// once it is done.
    pub fn close(&self) -> impl Future<Output = ()> + Send + 'static {
        let client = self.client.clone();
        async move { client.close().await }
    }

    /// True once [`KafkaClient::close`] was called (on any clone).
    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// The role's current token at its transaction coordinator.
    pub fn describe_leadership(
        &self,
        role: String,
    ) -> impl Future<Output = Result<LeadershipStatus>> + Send + 'static {
        let client = self.client.clone();
        async move { client.describe_leadership(&role).await }
    }

    /// The roster and the lease of `role`.
    pub fn describe_role_state(
        &self,
        role: String,
    ) -> impl Future<Output = Result<RoleStateReport>> + Send + 'static {
        let client = self.client.clone();
        async move { client.describe_role_state(&role).await }
    }

    /// Creates the state topic (this client's partition count, the shape of
    /// `args`) unless it exists, then checks it. The shape is checked now.
    /// Each warning (an existing topic of another shape than asked, a
    /// `min.insync.replicas` below 2) is logged, and this client's members
    /// do not log it again at acquire.
    pub fn ensure_state_topic(
        &self,
        args: &TopicArgs,
    ) -> Result<impl Future<Output = Result<TopicReport>> + Send + 'static> {
        self.client.check_open()?;
        let spec: TopicSpec = args.spec(self.partitions()).map_err(Error::from)?;
        let kafka = self.kafka.as_ref().map(|k| Arc::clone(&k.transport));
        let in_memory = self.in_memory_topic();
        Ok(async move {
            match kafka {
                Some(transport) => transport.ensure_state_topic(spec).await,
                None => Ok(in_memory),
            }
        })
    }

    /// Checks that the state topic exists, is compacted and has this
    /// client's partition count. Each warning is logged as by
    /// [`KafkaClient::ensure_state_topic`].
    pub fn check_state_topic(&self) -> impl Future<Output = Result<TopicReport>> + Send + 'static {
        let kafka = self.kafka.as_ref().map(|k| Arc::clone(&k.transport));
        let in_memory = self.in_memory_topic();
        let partitions = self.partitions();
        let open = self.client.check_open();
        async move {
            open?;
            match kafka {
                Some(transport) => transport.check_state_topic(partitions).await,
                None => Ok(in_memory),
            }
        }
    }

    /// The report of a test cluster's state topic, which always exists:
    /// compacted, this client's partition count, one replica, no warning.
    fn in_memory_topic(&self) -> TopicReport {
        TopicReport {
            topic: self.state_topic().to_owned(),
            created: false,
            partitions: self.partitions(),
            replication_factor: 1,
            cleanup_policy: "compact".to_owned(),
            min_insync_replicas: None,
            warnings: Vec::new(),
        }
    }
}

/// librdkafka settings a misspelt key is most likely meant to be: what a
/// client of this library sets (the connection, security and timeouts).
const COMMON_SETTINGS: &[&str] = &[
    "bootstrap.servers",
    "client.id",
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "sasl.oauthbearer.config",
    "sasl.oauthbearer.method",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.scope",
    "sasl.kerberos.service.name",
    "sasl.kerberos.principal",
    "sasl.kerberos.keytab",
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.key.pem",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "enable.ssl.certificate.verification",
    "socket.timeout.ms",
    "socket.connection.setup.timeout.ms",
    "socket.keepalive.enable",
    "request.timeout.ms",
    "message.timeout.ms",
    "delivery.timeout.ms",
    "transaction.timeout.ms",
    "metadata.max.age.ms",
    "topic.metadata.refresh.interval.ms",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "retry.backoff.ms",
    "client.dns.lookup",
    "client.rack",
    "broker.address.family",
    "debug",
    "log_level",
    "statistics.interval.ms",
    "fetch.wait.max.ms",
    "queue.buffering.max.ms",
    "linger.ms",
    "compression.type",
    "acks",
];

/// `e` with the nearest known key named when it comes from a setting
/// librdkafka does not know (or from an empty bootstrap address when a
/// misspelt `bootstrap.servers` was given): `unknown setting
/// "bootstrap.server"; did you mean "bootstrap.servers"?`. Other errors
/// are returned as they are.
fn unknown_setting(config: &KafkaConfig, e: Error) -> Error {
    let Error::InvalidArgument(m) = &e else {
        return e;
    };
    let suggest = |key: &str| {
        crate::suggest::nearest(key, COMMON_SETTINGS)
            .filter(|k| *k != key)
            .map(|k| format!("; did you mean {k:?}?"))
    };
    if config.bootstrap().trim().is_empty() {
        let near = config
            .settings()
            .find_map(|(k, _)| crate::suggest::nearest(k, &["bootstrap.servers"]).map(|_| k));
        return match near {
            Some(k) => Error::InvalidArgument(format!(
                "the bootstrap address is empty: unknown setting {k:?}; did you mean \
                 \"bootstrap.servers\"?"
            )),
            None => Error::InvalidArgument(format!(
                "{m}: set \"bootstrap.servers\" to the brokers' host:port list"
            )),
        };
    }
    // A key librdkafka does not know, or a security key the protocol
    // client does not (each says so in its words).
    let unknown = config.settings().map(|(k, _)| k).find(|k| {
        (m.contains("No such configuration property")
            && m.contains(&format!("refused the setting {k}=")))
            || m.contains(&format!("{k} is not supported"))
    });
    match unknown.and_then(|k| suggest(k).map(|hint| (k, hint))) {
        Some((k, hint)) => Error::InvalidArgument(format!("unknown setting {k:?}{hint} ({m})")),
        None => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::kafka_config;

    #[test]
    fn an_unknown_setting_is_named_with_the_nearest_known_one() {
        let e = KafkaClient::new(kafka_config([("bootstrap.server", "h:1")]), 16).unwrap_err();
        assert_eq!(e.kind(), krabka_coordination::ErrorKind::InvalidArgument);
        let m = e.to_string();
        assert!(
            m.contains("unknown setting \"bootstrap.server\"; did you mean \"bootstrap.servers\"?"),
            "{m}"
        );
        let e = KafkaClient::new(
            kafka_config([("bootstrap.servers", "h:1"), ("sasl.usernme", "u")]),
            16,
        )
        .unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("unknown setting \"sasl.usernme\"; did you mean \"sasl.username\"?"),
            "{m}"
        );
        let e = KafkaClient::new(
            kafka_config([("bootstrap.servers", "h:1"), ("socket.timeout", "5000")]),
            16,
        )
        .unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("unknown setting \"socket.timeout\"; did you mean \"socket.timeout.ms\"?"),
            "{m}"
        );
        let e = KafkaClient::new(kafka_config([("client.id", "c")]), 16).unwrap_err();
        assert!(e.to_string().contains("set \"bootstrap.servers\""), "{e}");
    }

    #[test]
    fn settings_are_checked_when_the_client_is_built() {
        let e = KafkaClient::new(kafka_config(Vec::<(String, String)>::new()), 16).unwrap_err();
        assert_eq!(e.kind(), krabka_coordination::ErrorKind::InvalidArgument);
        let e = KafkaClient::new(
            kafka_config([("bootstrap.servers", "h:1"), ("no.such.setting", "1")]),
            16,
        )
        .unwrap_err();
        assert!(e.to_string().contains("no.such.setting"), "{e}");
        let e = KafkaClient::new(kafka_config([("bootstrap.servers", "h:1")]), 0).unwrap_err();
        assert!(
            e.to_string().contains("partitions must be at least 1"),
            "{e}"
        );
    }

    #[test]
    fn arguments_are_checked_before_any_io() {
        let c = KafkaClient::new(kafka_config([("bootstrap.servers", "127.0.0.1:1")]), 4).unwrap();
        assert_eq!(c.partitions(), 4);
        assert_eq!(c.config().map(|c| c.bootstrap()), Some("127.0.0.1:1"));
        assert_eq!(c.state_topic(), krabka_coordination::STATE_TOPIC);
        assert_eq!(c.describe_requests(), 0);
        let bad = LeadershipArgs {
            renew_interval: Some(f64::NAN),
            ..Default::default()
        };
        let e = c
            .acquire("r".into(), "m".into(), &bad, CancellationToken::new(), None)
            .err()
            .expect("refused");
        assert!(
            e.to_string()
                .contains("renew_interval must be a positive number of seconds, got NaN"),
            "{e}"
        );
        let e = c
            .ensure_state_topic(&TopicArgs {
                min_insync_replicas: Some(0),
                ..Default::default()
            })
            .err()
            .expect("refused");
        assert!(
            e.to_string()
                .contains("min_insync_replicas must be an integer from 1 to 3, got 0"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_test_process_client_runs_on_the_in_memory_cluster() {
        let cluster = krabka_coordination::testing::TestCluster::with_partitions(4).unwrap();
        let c = KafkaClient::on_test_process(&cluster.process("a"));
        assert!(c.config().is_none());
        assert_eq!(c.partitions(), 4);
        assert_eq!(c.state_topic(), krabka_coordination::STATE_TOPIC);
        let won = c
            .acquire(
                "r".into(),
                "a".into(),
                &LeadershipArgs::default(),
                CancellationToken::new(),
                None,
            )
            .unwrap()
            .await
            .unwrap();
        let status = c.describe_leadership("r".into()).await.unwrap();
        assert!(status.authoritative(&won.token()));
        let report = c
            .ensure_state_topic(&TopicArgs::default())
            .unwrap()
            .await
            .unwrap();
        assert_eq!(
            (
                report.partitions,
                report.created,
                report.cleanup_policy.as_str()
            ),
            (4, false, "compact")
        );
        assert_eq!(c.check_state_topic().await.unwrap().partitions, 4);
        assert_eq!(c.describe_requests(), 0);
        c.close().await;
        assert!(c.ensure_state_topic(&TopicArgs::default()).is_err());
    }
}
