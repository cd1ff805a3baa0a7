//! Creating and checking the state topic.
//!
//! `__coordination_state` must be compacted (`cleanup.policy=compact`: a
//! registration lives until its tombstone, never until a retention time), and
//! every member must use its real partition count (two counts put one role on
//! two partitions and break the total order). An operator should give it
//! `min.insync.replicas >= 2`; the library writes with `acks=all`, and the
//! durability of a lease rests on the two together.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::error::RDKafkaErrorCode;

use super::config::KafkaConfig;
use super::{drop_off_thread, kafka_error, run_blocking, TransportContext};
use crate::error::{Error, Result};
use crate::remedy::{Remedied, Remedy};

mod facts;

pub(super) use facts::{read_topic, TopicFacts};

/// What [`ensure_state_topic`] or [`check_state_topic`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicReport {
    /// The topic's name.
    pub topic: String,
    /// True when [`ensure_state_topic`] created the topic (false when it
    /// existed, and always false for [`check_state_topic`]).
    pub created: bool,
    /// The partition count.
    pub partitions: i32,
    /// The replica count of partition 0.
    pub replication_factor: i32,
    /// The topic's `cleanup.policy` (always `compact` in a report).
    pub cleanup_policy: String,
    /// The topic's `min.insync.replicas`, when the broker reports it.
    pub min_insync_replicas: Option<i32>,
    /// Advice for the operator (also logged with `tracing::warn!`), such as a
    /// `min.insync.replicas` below 2.
    pub warnings: Vec<String>,
}

pub(super) type Admin = AdminClient<TransportContext>;

/// `segment.ms` of a state topic this crate creates: one hour.
const SEGMENT_MS: &str = "3600000";

/// The shape of the state topic that [`ensure_state_topic`] creates and
/// [`check_state_topic`] expects.
///
/// The default is what a production cluster needs: 16 partitions,
/// replication factor 3 and `min.insync.replicas` 2. A single-broker
/// development cluster needs [`TopicSpec::development`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicSpec {
    /// The partition count; every member must be configured with the same.
    pub partitions: i32,
    /// The replication factor of a topic this crate creates.
    pub replication_factor: i32,
    /// `min.insync.replicas` of a topic this crate creates.
    pub min_insync_replicas: i32,
}

impl Default for TopicSpec {
    fn default() -> Self {
        TopicSpec {
            partitions: crate::ElectionOptions::DEFAULT_PARTITIONS,
            replication_factor: 3,
            min_insync_replicas: 2,
        }
    }
}

impl TopicSpec {
    /// A single-broker development cluster: replication factor 1 and
    /// `min.insync.replicas` 1 (no durability beyond one disk).
    pub fn development() -> Self {
        TopicSpec {
            replication_factor: 1,
            min_insync_replicas: 1,
            ..TopicSpec::default()
        }
    }

    /// The same spec with `partitions` partitions.
    pub fn with_partitions(mut self, partitions: i32) -> Self {
        self.partitions = partitions;
        self
    }

    /// The same spec with another replication factor and min ISR.
    pub fn with_replication(mut self, replication_factor: i32, min_insync_replicas: i32) -> Self {
        self.replication_factor = replication_factor;
        self.min_insync_replicas = min_insync_replicas;
        self
    }
}

pub(super) fn admin(config: &KafkaConfig) -> Result<Arc<Admin>> {
    config.validate()?;
    let mut cc = config.client_config("admin");
    // A metadata request must never create the topic with broker defaults.
    cc.set("allow.auto.create.topics", "false");
    let admin: Admin = cc
        .create_with_context(TransportContext::new(config))
        .map_err(|e| kafka_error("creating an admin client", e))?;
    // Nothing polls an admin client's main queue, where librdkafka asks for
    // an OAUTHBEARER token: it gets one now (an admin client lives for one
    // helper call, shorter than a token). The callers made the protocol
    // client connect first, which fetched the token: this takes it from the
    // configuration's cache without calling the provider.
    if let Err(e) = super::oauth::ensure_token(admin.inner()) {
        drop_off_thread(admin);
        return Err(e);
    }
    Ok(Arc::new(admin))
}

pub(super) fn admin_options(config: &KafkaConfig) -> AdminOptions {
    AdminOptions::new()
        .request_timeout(Some(config.operation_timeout()))
        .operation_timeout(Some(config.operation_timeout()))
}

/// Creates the state topic of `config` ([`KafkaConfig::state_topic`], by
/// default [`crate::STATE_TOPIC`]) with `cleanup.policy=compact`, the given
/// partition count, replication factor and `min.insync.replicas`, and then
/// checks it like [`check_state_topic`].
///
/// Idempotent: an existing topic is left alone (its settings are not
/// changed) and checked; a topic of another partition count or not
/// compacted is refused. An existing topic whose replication factor or
/// `min.insync.replicas` is not what was asked is accepted with a warning
/// naming both values and how to change the topic (in
/// [`TopicReport::warnings`], and logged): it may be the operator's
/// deliberate choice, and refusing it would stop every member's start.
///
/// Each warning is logged (`tracing::warn!`) at every call.
pub async fn ensure_state_topic(
    config: &KafkaConfig,
    partitions: i32,
    replication_factor: i32,
    min_insync_replicas: i32,
) -> Result<TopicReport> {
    if partitions < 1 {
        return Err(Error::InvalidArgument(format!(
            "partitions must be at least 1, got {partitions}"
        )));
    }
    if replication_factor < 1 {
        return Err(Error::InvalidArgument(format!(
            "replication factor must be at least 1, got {replication_factor}"
        )));
    }
    if min_insync_replicas < 1 || min_insync_replicas > replication_factor {
        return Err(Error::InvalidArgument(format!(
            "min.insync.replicas must be between 1 and the replication factor {replication_factor}, got {min_insync_replicas}"
        )));
    }
    reach(config).await?;
    let admin = admin(config)?;
    let result = create(
        config,
        &admin,
        partitions,
        replication_factor,
        min_insync_replicas,
    )
    .await;
    drop_off_thread(admin);
    let created = result?;
    let facts = check_until_visible(config, partitions).await?;
    let asked = (!created).then_some((replication_factor, min_insync_replicas));
    let mut report = facts.report_against(asked);
    report.created = created;
    for w in &report.warnings {
        tracing::warn!("{w}");
    }
    Ok(report)
}

/// Connects to the cluster once with the protocol client, within the
/// connect timeout, before an admin call of librdkafka (which waits the
/// whole operation timeout on a cluster it cannot reach and then names no
/// address): an unreachable cluster is [`Error::Transient`] naming the
/// bootstrap address and the connect timeout, a host that does not resolve
/// or a refused password or certificate fails at once, named.
async fn reach(config: &KafkaConfig) -> Result<()> {
    let client = super::KafkaClient::new(config)?;
    let kafka = client.kafka();
    kafka.check_access().await?;
    kafka.ensure_reached().await?;
    Ok(())
}

async fn create(
    config: &KafkaConfig,
    admin: &Admin,
    partitions: i32,
    rf: i32,
    min_isr: i32,
) -> Result<bool> {
    let topic = config.state_topic();
    let min_isr = min_isr.to_string();
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(rf))
        .set("cleanup.policy", "compact")
        .set("min.insync.replicas", &min_isr)
        // Renewals roll the active segment within the hour, so compaction
        // keeps the topic small (Kafka's default is 7 days or 1 GiB).
        .set("segment.ms", SEGMENT_MS);
    let results = admin
        .create_topics([&new], &admin_options(config))
        .await
        .map_err(|e| kafka_error(&format!("creating topic {topic}"), e))?;
    match results.into_iter().next() {
        Some(Ok(_)) => Ok(true),
        Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) => Ok(false),
        Some(Err((_, code))) => {
            let context = format!(
                "creating topic {topic} ({partitions} partitions, replication factor {rf})"
            );
            Err(match code {
                RDKafkaErrorCode::InvalidReplicationFactor
                | RDKafkaErrorCode::InvalidPartitions
                | RDKafkaErrorCode::InvalidConfig
                | RDKafkaErrorCode::InvalidTopic
                | RDKafkaErrorCode::PolicyViolation => {
                    Error::InvalidArgument(format!("{context}: {code:?} ({code})"))
                }
                RDKafkaErrorCode::TopicAuthorizationFailed
                | RDKafkaErrorCode::ClusterAuthorizationFailed => {
                    Error::fatal(context, format!("{code:?} ({code})"))
                }
                _ => Error::transient(context, format!("{code:?} ({code})")),
            })
        }
        None => Err(Error::transient(
            format!("creating topic {topic}"),
            "the broker answered nothing",
        )),
    }
}

/// Checks a just-created topic, waiting briefly until its metadata and its
/// configuration show up.
///
/// Each round judges the facts of one read: a second read may reach another
/// broker, and a broker that has the new topic's metadata may not have its
/// configuration yet (it answers `cleanup.policy` empty; seen on the
/// three-node cluster right after another test restarted a broker).
async fn check_until_visible(config: &KafkaConfig, partitions: i32) -> Result<TopicFacts> {
    let deadline = super::deadline_in(config.operation_timeout());
    loop {
        let admin = admin(config)?;
        let read = read_topic(config, &admin, partitions).await;
        drop_off_thread(admin);
        let waiting = tokio::time::Instant::now() < deadline;
        match read {
            Ok((facts, _)) if waiting && facts.cleanup_policy.trim().is_empty() => {
                tracing::debug!(topic = %facts.topic, "waiting for the new topic's configuration");
            }
            Ok((facts, _)) => {
                facts.check(partitions)?;
                return Ok(facts);
            }
            Err(Error::Fatal { context, source })
                if waiting && context.contains("does not exist") =>
            {
                tracing::debug!(%context, %source, "waiting for the new topic's metadata");
            }
            Err(e) => return Err(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Checks that the state topic of `config` exists, has `expected_partitions`
/// partitions and `cleanup.policy=compact`; refuses it otherwise with
/// [`Error::Fatal`] naming the topic and the values found. Warns (and
/// reports) when `min.insync.replicas` is below 2, at every call.
///
/// The metadata request is bounded by the connect timeout
/// ([`KafkaConfig::with_connect_timeout`]): a cluster that does not answer
/// is [`Error::Transient`] naming the bootstrap address. A missing
/// authorization (DESCRIBE or DESCRIBE_CONFIGS on the topic) is
/// [`Error::Fatal`] naming the topic.
pub async fn check_state_topic(
    config: &KafkaConfig,
    expected_partitions: i32,
) -> Result<TopicReport> {
    if expected_partitions < 1 {
        return Err(Error::InvalidArgument(format!(
            "expected partitions must be at least 1, got {expected_partitions}"
        )));
    }
    reach(config).await?;
    let admin = admin(config)?;
    let result = read_topic(config, &admin, expected_partitions).await;
    drop_off_thread(admin);
    let (facts, _) = result?;
    facts.check(expected_partitions)?;
    let report = facts.report();
    for w in &report.warnings {
        tracing::warn!("{w}");
    }
    Ok(report)
}

/// The error of a first request that found no broker: [`Error::Transient`]
/// naming the bootstrap address and the connect timeout; an authorization
/// failure is [`Error::Fatal`] as always.
pub(super) fn unreachable_or(
    config: &KafkaConfig,
    context: &str,
    e: rdkafka::error::KafkaError,
) -> Error {
    let mapped = kafka_error(context, e.clone());
    if !mapped.is_transient() {
        return mapped;
    }
    // librdkafka's own words follow, not the mapped error's text: that
    // would say the context a second time.
    Error::transient(context.to_owned(), unanswered(config, e))
}

/// Why a first request found no broker: the bootstrap address and the
/// connect timeout, then librdkafka's error (the context is the caller's).
fn unanswered(config: &KafkaConfig, e: rdkafka::error::KafkaError) -> String {
    format!(
        "no broker of the bootstrap address {} answered within {} (the connect timeout): {e}",
        config.bootstrap(),
        crate::human::duration(config.connect_timeout())
    )
}

fn not_authorized(topic: &str, operation: &str, doing: &str) -> Error {
    Error::fatal(
        format!("state topic {topic}: not authorized ({doing})"),
        format!(
            "the principal lacks {operation} on topic {topic}: a member needs DESCRIBE, DESCRIBE_CONFIGS, READ \
             and WRITE on it"
        ),
    )
}

fn missing(topic: &str, partitions: i32) -> Error {
    missing_state_topic(topic, Some(partitions))
}

/// [`Error::Fatal`]: the state topic `topic` does not exist, with the
/// remedy (`partitions`: the client's count, when known).
pub(super) fn missing_state_topic(topic: &str, partitions: Option<i32>) -> Error {
    Error::fatal(
        format!("state topic {topic} does not exist"),
        Remedied(Remedy::EnsureStateTopic {
            topic: topic.to_owned(),
            partitions,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(rf: i32, min_isr: Option<i32>) -> TopicFacts {
        TopicFacts {
            topic: "t".into(),
            partitions: 16,
            replication_factor: rf,
            cleanup_policy: "compact".into(),
            min_insync_replicas: min_isr,
        }
    }

    #[test]
    fn an_existing_topic_of_another_shape_than_asked_is_named_with_both_values() {
        let w = facts(1, Some(1)).report_against(Some((3, 2))).warnings;
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].contains("replication factor 1, not the 3 asked for"),
            "{w:?}"
        );
        assert!(
            w[1].contains("min.insync.replicas=1, not the 2 asked for")
                && w[1].contains("--add-config min.insync.replicas=2")
                && w[1].contains("durable in a quorum"),
            "{w:?}"
        );
        // What was asked, or nothing asked: the generic advice only.
        assert!(facts(3, Some(2))
            .report_against(Some((3, 2)))
            .warnings
            .is_empty());
        assert!(facts(3, Some(2)).report().warnings.is_empty());
        let w = facts(1, Some(1)).report().warnings;
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("min.insync.replicas=1;"), "{w:?}");
        // A higher min ISR than asked is named, without the durability note.
        let w = facts(3, Some(3)).report_against(Some((3, 2))).warnings;
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("min.insync.replicas=3, not the 2 asked for")
                && !w[0].contains("durable"),
            "{w:?}"
        );
        // An unknown min ISR cannot be compared: the generic advice.
        let w = facts(3, None).report_against(Some((3, 2))).warnings;
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("min.insync.replicas=unknown"), "{w:?}");
    }
}

#[cfg(test)]
mod message_tests {
    use super::*;
    use rdkafka::error::KafkaError;

    #[test]
    fn an_unreached_cluster_says_its_context_once() {
        let config = KafkaConfig::new("127.0.0.1:1");
        let context = "reading the metadata of topic t";
        let e = unreachable_or(
            &config,
            context,
            KafkaError::MetadataFetch(RDKafkaErrorCode::BrokerTransportFailure),
        );
        assert!(e.is_transient(), "{e}");
        let m = e.to_string();
        assert_eq!(m.matches(context).count(), 1, "{m}");
        assert_eq!(m.matches("transient").count(), 1, "{m}");
        assert!(
            m.contains("127.0.0.1:1") && m.contains("(the connect timeout)"),
            "{m}"
        );
    }
}
