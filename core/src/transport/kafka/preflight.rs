//! What a member checks before it registers
//! ([`crate::transport::Coordinator::check_member`]).
//!
//! Without I/O, in this order: the role (not empty, at most 32767 bytes, no
//! NUL byte), the lease (1 s to `i32::MAX` ms: it is the transaction
//! timeout), and the user's producer timeouts against the lease. Then, once
//! per transport, from the cluster (the first request bounded by the connect
//! timeout, so an unreachable cluster is reported promptly with its bootstrap
//! address):
//!
//! * the request versions a bootstrap broker speaks: a broker without a
//!   request a member sends (Kafka before 3.0) is [`Error::Fatal`] naming
//!   the broker and each request with the version and release it needs
//!   (`krabka_kafka::Client::check_versions`);
//! * the state topic: it exists, has the member's partition count and
//!   `cleanup.policy=compact` ([`Error::Fatal`] naming the topic and the
//!   numbers otherwise; a missing topic says how to create it);
//! * the member's ACLs, asked of the authorizer with requests that change
//!   nothing (the protocol client's `access` module): WRITE and DESCRIBE on
//!   TransactionalId `<role>`, DESCRIBE on the state readers' consumer
//!   group, READ on the state topic; a denial is [`Error::Fatal`] naming the
//!   resource and the ACL, before anything is registered. Asked for every
//!   member (ACLs change), not remembered;
//! * the brokers' configuration (DescribeConfigs of every broker, each
//!   bounded by the connect timeout): a lease over the lowest
//!   `transaction.max.timeout.ms` is refused ([`Error::InvalidArgument`]),
//!   and a lease that cannot ride out the loss of one broker is warned about
//!   (see [`BROKER_LOSS_MARGIN`]);
//! * broker-side transaction verification (KIP-890): a bootstrap broker
//!   that does not advertise it (Kafka before 3.6) or any broker whose
//!   configuration shows `transaction.partition.verification.enable=false`
//!   is [`Error::Fatal`] naming the broker, the setting and the risk
//!   (hanging transactions), unless the configuration sets
//!   [`KafkaConfig::ALLOW_HANGING_TRANSACTIONS_SETTING`], which turns it
//!   into a warning. A broker whose configuration could not be read is not
//!   refused for it (its verification is unknown; the warning about unread
//!   configurations says so).
//!
//! A check that passed is remembered by the transport: later members of any
//! role compare their options with what was read, without a request. A
//! refused check is not remembered, so a fixed topic passes the next time.
//! Warnings are logged (`tracing::warn!`) once per transport.

use std::collections::HashSet;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use rdkafka::admin::{AdminOptions, ConfigResource, ResourceSpecifier};
use rdkafka::error::{KafkaResult, RDKafkaErrorCode};
use tokio::sync::Mutex as AsyncMutex;

use super::client::KafkaClient;
use super::config::KafkaConfig;
use super::topic::{self, Admin, TopicFacts, TopicReport};
use super::{drop_off_thread, lease_millis};
use crate::election::ElectionOptions;
use crate::error::{Error, Result};
use crate::join::join_all;
use krabka_kafka::client::Versions;

/// The time given, beyond the cluster's failure detection, for the dead
/// broker's coordinators to load elsewhere and for the clients to find them:
/// 7 s. A role's coordinator moves a few seconds after the broker session
/// timeout ends (longest when the lost broker was also the active
/// controller, whose successor starts every broker's session afresh), and a
/// renewal then spends up to 1 s on its attempt at the stalled broker before
/// it asks the new coordinator; 7 s covers both with about 2 s to spare on
/// the moves docs/operations.md records (`core/tests/kafka_broker_loss.rs`
/// holds a lease sized this way through a broker's loss).
///
/// A leader's lease rides out the loss of one broker only if
/// `lease >= renew interval + broker.session.timeout.ms + BROKER_LOSS_MARGIN`:
/// its last renewal may have been sent a renew interval before the broker
/// died, and the cluster moves the dead broker's partitions and coordinators
/// only after `broker.session.timeout.ms` (9 s by default). A member whose
/// options fall short is warned about it once, on a cluster of two brokers
/// or more.
pub const BROKER_LOSS_MARGIN: Duration = Duration::from_secs(7);

/// What a member's check before registering found
/// ([`super::KafkaTransport::preflight`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PreflightReport {
    /// The state topic: it exists, has the member's partition count and is
    /// compacted.
    pub topic: TopicReport,
    /// How many brokers the cluster's metadata lists.
    pub brokers: usize,
    /// The lowest `transaction.max.timeout.ms` of the brokers whose
    /// configuration could be read (`None` when none could): the longest
    /// lease the role's transaction coordinator, wherever it moves, accepts.
    pub transaction_max_timeout: Option<Duration>,
    /// How long the cluster takes to notice a dead broker: the highest
    /// `broker.session.timeout.ms` (`zookeeper.session.timeout.ms` on a
    /// ZooKeeper cluster) of the brokers whose configuration could be read.
    pub broker_failure_detection: Option<Duration>,
    /// Advice, logged once per transport by
    /// [`crate::transport::Coordinator::check_member`]: a lease that cannot
    /// ride out one broker's loss, brokers whose configuration could not be
    /// read, a `min.insync.replicas` below 2.
    pub warnings: Vec<String>,
}

/// The brokers' settings that bound a lease.
#[derive(Debug, Clone, Default)]
struct BrokerFacts {
    /// The lowest `transaction.max.timeout.ms` (ms) and its broker.
    transaction_max_timeout: Option<(u64, i32)>,
    /// The highest failure detection time (ms), its broker and its key.
    failure_detection: Option<(u64, i32, &'static str)>,
    /// Why the configuration of a broker could not be read.
    unread: Vec<String>,
    /// The brokers whose configuration turns broker-side transaction
    /// verification off.
    unverified: Vec<i32>,
}

/// What one read of the cluster found.
#[derive(Debug, Clone)]
struct Facts {
    topic: TopicFacts,
    brokers: usize,
    broker: BrokerFacts,
}

/// The pre-registration check of one transport, with its cache.
#[derive(Default)]
pub(super) struct Preflight {
    /// One read of the cluster at a time: a thousand concurrent first
    /// acquires make one.
    serial: AsyncMutex<()>,
    /// The facts of the last read whose topic check passed.
    facts: StdMutex<Option<Arc<Facts>>>,
    /// Warnings already logged.
    warned: StdMutex<HashSet<String>>,
}

impl Preflight {
    /// Checks a member of `role` with `options` (module docs), and returns
    /// what was found.
    pub(super) async fn report(
        &self,
        config: &KafkaConfig,
        client: &KafkaClient,
        role: &str,
        options: &ElectionOptions,
    ) -> Result<PreflightReport> {
        crate::codec::check_role(role)?;
        options.validate()?;
        let lease_ms = lease_millis(options.lease_duration)?;
        check_settings(config, options.lease_duration, lease_ms)?;
        // On a secured cluster, a refused password or an untrusted
        // certificate fails here at once, named, instead of as librdkafka's
        // timeout below.
        client.kafka().check_access().await?;
        // A broker too old for a member is refused here, naming what it
        // lacks, not at the first resign or describe.
        let versions = client.kafka().check_versions().await?;
        let facts = self.facts(config, options.partitions).await?;
        facts.topic.check(options.partitions)?;
        // The ACLs a member needs, while nothing is registered yet.
        let partition = crate::partition::role_partition(role, options.partitions)?;
        client
            .kafka()
            .check_member_access(
                role,
                config.state_topic(),
                partition,
                super::reader::reader_group(config),
            )
            .await?;
        if let Some((max, broker)) = facts.broker.transaction_max_timeout {
            if lease_ms > max {
                return Err(Error::InvalidArgument(format!(
                    "the lease duration {} ({lease_ms} ms) is over the cluster's transaction.max.timeout.ms of {max} \
                     ms (broker {broker}): the lease is the transaction timeout, and the coordinator refuses a longer \
                     one; shorten the lease or raise transaction.max.timeout.ms on every broker",
                    crate::human::duration(options.lease_duration)
                )));
            }
        }
        let topic = facts.topic.report();
        let mut warnings = topic.warnings.clone();
        if let Some(unverified) = unverified(&versions, &facts.broker.unverified) {
            if !config.allows_hanging_transactions() {
                return Err(Error::fatal("the cluster", unverified));
            }
            warnings.push(format!(
                "{unverified} (running anyway: {}=true)",
                KafkaConfig::ALLOW_HANGING_TRANSACTIONS_SETTING
            ));
        }
        if !facts.broker.unread.is_empty() {
            warnings.push(format!(
                "could not read the configuration of {}: the lease is not checked against \
                 transaction.max.timeout.ms before registering (the coordinator still refuses a longer one at the \
                 first mint) nor against broker.session.timeout.ms",
                facts.broker.unread.join("; ")
            ));
        }
        if let Some((detect, broker, key)) = facts.broker.failure_detection {
            if facts.brokers >= 2 {
                warnings.extend(broker_loss_warning(options, detect, broker, key));
            }
        }
        Ok(PreflightReport {
            topic,
            brokers: facts.brokers,
            transaction_max_timeout: facts
                .broker
                .transaction_max_timeout
                .map(|(ms, _)| Duration::from_millis(ms)),
            broker_failure_detection: facts
                .broker
                .failure_detection
                .map(|(ms, _, _)| Duration::from_millis(ms)),
            warnings,
        })
    }

    /// [`Preflight::report`], with each warning logged once per transport.
    pub(super) async fn check(
        &self,
        config: &KafkaConfig,
        client: &KafkaClient,
        role: &str,
        options: &ElectionOptions,
    ) -> Result<()> {
        let report = self.report(config, client, role, options).await?;
        for w in &report.warnings {
            self.warn_once(w);
        }
        Ok(())
    }

    /// Logs `warning` unless this transport logged it before: each piece of
    /// advice about the cluster (a state topic's `min.insync.replicas`, a
    /// lease too short for it) comes once per client from its members'
    /// checks, and not at all when the client's own `ensure_state_topic`
    /// or `check_state_topic` logged it ([`Preflight::logged`]).
    fn warn_once(&self, warning: &str) {
        if self.logged(warning) {
            tracing::warn!("{warning}");
        }
    }

    /// Records that `warning` was logged for this transport; true when it
    /// had not been before.
    pub(super) fn logged(&self, warning: &str) -> bool {
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        warned.insert(warning.to_owned())
    }

    fn cached(&self) -> Option<Arc<Facts>> {
        self.facts.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The cached facts, or a new read of the cluster, cached when its topic
    /// fits `partitions`.
    async fn facts(&self, config: &KafkaConfig, partitions: i32) -> Result<Arc<Facts>> {
        if let Some(f) = self.cached() {
            return Ok(f);
        }
        let _serial = self.serial.lock().await;
        if let Some(f) = self.cached() {
            return Ok(f);
        }
        let admin = topic::admin(config)?;
        let read = read_facts(config, &admin, partitions).await;
        drop_off_thread(admin);
        let facts = Arc::new(read?);
        if facts.topic.check(partitions).is_ok() {
            *self.facts.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::clone(&facts));
        }
        Ok(facts)
    }
}

/// Refuses the user's producer timeouts that the lease producer cannot have
/// with a transaction timeout of `lease` (librdkafka would refuse the
/// producer at the first mint, long after the member registered).
fn check_settings(config: &KafkaConfig, lease: Duration, lease_ms: u64) -> Result<()> {
    let millis = |key: &str| {
        config
            .get(key)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|v| (key.to_owned(), v))
    };
    for key in ["message.timeout.ms", "delivery.timeout.ms"] {
        if let Some((key, v)) = millis(key) {
            // 0 is librdkafka's "no timeout".
            if v == 0 || v > lease_ms {
                return Err(Error::InvalidArgument(format!(
                    "the setting {key}={v}{} is longer than the lease duration {}: the lease producer's \
                     transaction timeout is the lease ({lease_ms} ms), and librdkafka refuses a {key} above it; \
                     set it to at most {lease_ms} or lengthen the lease",
                    if v == 0 { " (no timeout)" } else { "" },
                    crate::human::duration(lease)
                )));
            }
        }
    }
    if let Some((key, v)) = millis("socket.timeout.ms") {
        if v > lease_ms.saturating_add(100) {
            return Err(Error::InvalidArgument(format!(
                "the setting {key}={v} is longer than the lease duration {}: librdkafka refuses a \
                 socket.timeout.ms above the transaction timeout (the lease, {lease_ms} ms) + 100 ms",
                crate::human::duration(lease)
            )));
        }
    }
    if let Some(v) = config.get("transaction.timeout.ms") {
        let parsed = v.trim().parse::<u64>().ok();
        if parsed != Some(lease_ms) {
            let shown = match parsed {
                Some(n) => n.to_string(),
                None => crate::error::quote(v),
            };
            return Err(Error::InvalidArgument(format!(
                "the setting transaction.timeout.ms={shown} is not the lease duration {} ({lease_ms} ms): \
                 the transport sets each role's transaction timeout to its lease; remove the setting",
                crate::human::duration(lease)
            )));
        }
    }
    Ok(())
}

/// Where the lease sizing rule is explained, named by the warning that a
/// lease is below it.
pub(super) const LEASE_SIZING_DOC: &str = "docs/operations.md#lease-sizing";

/// The warning for options whose lease cannot ride out the loss of one
/// broker, naming the lease, renew interval, detection time and the lease
/// needed, and [`LEASE_SIZING_DOC`]; or none.
fn broker_loss_warning(
    options: &ElectionOptions,
    detect_ms: u64,
    broker: i32,
    key: &str,
) -> Option<String> {
    let detect = Duration::from_millis(detect_ms);
    let needed = options
        .renew_interval
        .saturating_add(detect)
        .saturating_add(BROKER_LOSS_MARGIN);
    (options.lease_duration < needed).then(|| {
        format!(
            "a lease of {} renewed every {} cannot ride out the loss of one broker: the cluster moves a dead \
             broker's partitions and transaction coordinators only after {key} ({detect_ms} ms, broker {broker}), \
             so a standby may take over from a healthy leader; use a lease of at least {} (renew interval \
             + {key} + {}; {LEASE_SIZING_DOC})",
            crate::human::duration(options.lease_duration),
            crate::human::duration(options.renew_interval),
            crate::human::duration(needed),
            crate::human::duration(BROKER_LOSS_MARGIN)
        )
    })
}

/// Reads the state topic and the brokers' configuration.
async fn read_facts(config: &KafkaConfig, admin: &Arc<Admin>, partitions: i32) -> Result<Facts> {
    let (topic, broker_ids) = topic::read_topic(config, admin, partitions).await?;
    let broker = read_brokers(config, admin, &broker_ids).await;
    Ok(Facts {
        topic,
        brokers: broker_ids.len(),
        broker,
    })
}

/// Reads the configuration of every broker at once, each bounded by the
/// connect timeout (librdkafka takes one broker per DescribeConfigs).
async fn read_brokers(config: &KafkaConfig, admin: &Admin, ids: &[i32]) -> BrokerFacts {
    let opts = AdminOptions::new().request_timeout(Some(config.connect_timeout()));
    let reads = ids.iter().map(|&id| {
        let opts = &opts;
        async move {
            let spec = ResourceSpecifier::Broker(id);
            (id, admin.describe_configs([&spec], opts).await)
        }
    });
    let mut facts = BrokerFacts::default();
    for (id, answer) in join_all(reads.collect()).await {
        match one_broker(id, answer) {
            Ok(resource) => facts.add(id, &resource),
            Err(why) => facts.unread.push(why),
        }
    }
    facts
}

/// The configuration of broker `id`, or why it could not be read.
fn one_broker(
    id: i32,
    answer: KafkaResult<Vec<std::result::Result<ConfigResource, RDKafkaErrorCode>>>,
) -> std::result::Result<ConfigResource, String> {
    match answer {
        Ok(mut v) => match v.pop() {
            Some(Ok(r)) => Ok(r),
            Some(Err(RDKafkaErrorCode::ClusterAuthorizationFailed)) => Err(format!(
                "broker {id} (not authorized: DESCRIBE_CONFIGS on the cluster resource is needed)"
            )),
            Some(Err(code)) => Err(format!("broker {id} ({code})")),
            None => Err(format!("broker {id} (no answer)")),
        },
        Err(e) => Err(format!("broker {id} ({e})")),
    }
}

impl BrokerFacts {
    fn add(&mut self, id: i32, r: &ConfigResource) {
        let value = |key: &str| r.get(key).and_then(|e| e.value.as_deref());
        let millis = |key: &str| value(key).and_then(|v| v.trim().parse::<u64>().ok());
        if let Some(ms) = millis("transaction.max.timeout.ms") {
            if self.transaction_max_timeout.is_none_or(|(min, _)| ms < min) {
                self.transaction_max_timeout = Some((ms, id));
            }
        }
        let zookeeper = value("zookeeper.connect").is_some_and(|v| !v.trim().is_empty());
        let key = if zookeeper {
            "zookeeper.session.timeout.ms"
        } else {
            "broker.session.timeout.ms"
        };
        if let Some(ms) = millis(key) {
            if self.failure_detection.is_none_or(|(max, _, _)| ms > max) {
                self.failure_detection = Some((ms, id, key));
            }
        }
        if value(VERIFICATION_SETTING).is_some_and(|v| v.trim().eq_ignore_ascii_case("false")) {
            self.unverified.push(id);
        }
    }
}

/// The broker setting that turns broker-side transaction verification
/// (KIP-890, Kafka 3.6) on, by default, or off.
const VERIFICATION_SETTING: &str = "transaction.partition.verification.enable";

/// Why the cluster lacks broker-side transaction verification, naming the
/// brokers, the setting and the risk; `None` when nothing shows it lacks it.
fn unverified(versions: &Versions, off: &[i32]) -> Option<String> {
    let mut why = Vec::new();
    if !versions.verification {
        why.push(format!(
            "the broker at {} does not advertise broker-side transaction verification \
             (AddPartitionsToTxn v4: Kafka before 3.6)",
            versions.broker
        ));
    }
    if !off.is_empty() {
        let brokers: Vec<String> = off.iter().map(|id| format!("broker {id}")).collect();
        why.push(format!(
            "{} set {VERIFICATION_SETTING}=false",
            brokers.join(", ")
        ));
    }
    if why.is_empty() {
        return None;
    }
    Some(format!(
        "{}: without broker-side transaction verification a guarded write delayed in the network \
         can land after its transaction ended, as a transaction nothing ever ends (a hanging \
         transaction) that holds its partition's read_committed readers back until an operator \
         aborts it; run Kafka 3.6 or newer with {VERIFICATION_SETTING}=true (Kafka's default), or \
         set {}=true to run anyway",
        why.join("; "),
        KafkaConfig::ALLOW_HANGING_TRANSACTIONS_SETTING
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(lease_s: u64, renew_s: u64) -> ElectionOptions {
        ElectionOptions::default()
            .with_lease_duration(Duration::from_secs(lease_s))
            .with_renew_interval(Duration::from_secs(renew_s))
    }

    #[test]
    fn producer_timeouts_longer_than_the_lease_are_refused_by_name() {
        let lease = Duration::from_secs(10);
        for (key, value) in [
            ("message.timeout.ms", "10001"),
            ("delivery.timeout.ms", "0"),
            ("socket.timeout.ms", "10101"),
            ("transaction.timeout.ms", "60000"),
            ("transaction.timeout.ms", "5000"),
        ] {
            let c = KafkaConfig::new("h:1").set(key, value);
            let e = check_settings(&c, lease, 10_000).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
            let msg = e.to_string();
            assert!(msg.contains(key) && msg.contains(value), "{msg}");
            assert!(msg.contains("10 s"), "names the lease: {msg}");
        }
        for (key, value) in [
            ("message.timeout.ms", "10000"),
            ("delivery.timeout.ms", "500"),
            ("socket.timeout.ms", "10100"),
            ("transaction.timeout.ms", "10000"),
        ] {
            let c = KafkaConfig::new("h:1").set(key, value);
            assert!(check_settings(&c, lease, 10_000).is_ok(), "{key}={value}");
        }
    }

    #[test]
    fn a_cluster_without_verification_is_named_with_the_setting_and_the_way_out() {
        let versions = |verification| Versions {
            broker: "127.0.0.1:9092".into(),
            verification,
        };
        assert_eq!(unverified(&versions(true), &[]), None);
        let old = unverified(&versions(false), &[]).unwrap();
        for part in ["127.0.0.1:9092", "Kafka before 3.6", "hanging transaction"] {
            assert!(old.contains(part), "{part}: {old}");
        }
        let off = unverified(&versions(true), &[2, 3]).unwrap();
        for part in [
            "broker 2, broker 3 set transaction.partition.verification.enable=false",
            "krabka.allow.hanging.transactions=true",
        ] {
            assert!(off.contains(part), "{part}: {off}");
        }
    }

    #[test]
    fn the_broker_loss_rule_is_renew_interval_plus_detection_plus_margin() {
        // 3 s + 9 s + 7 s = 19 s.
        assert!(
            broker_loss_warning(&options(20, 3), 9_000, 1, "broker.session.timeout.ms").is_none()
        );
        assert!(
            broker_loss_warning(&options(19, 3), 9_000, 1, "broker.session.timeout.ms").is_none()
        );
        let w =
            broker_loss_warning(&options(18, 3), 9_000, 2, "broker.session.timeout.ms").unwrap();
        for part in [
            "18 s",
            "3 s",
            "broker.session.timeout.ms",
            "9000 ms",
            "broker 2",
            "19 s",
            "docs/operations.md#lease-sizing",
        ] {
            assert!(w.contains(part), "{part}: {w}");
        }
        // Absurd options never overflow.
        let huge = ElectionOptions::default()
            .with_lease_duration(Duration::MAX)
            .with_renew_interval(Duration::MAX);
        assert!(broker_loss_warning(&huge, u64::MAX, 1, "k").is_none());
    }
}
