//! What the cluster says the state topic is ([`TopicFacts`]: its
//! partitions, replicas and settings, read with Metadata and
//! DescribeConfigs), and the check of those facts against what a member
//! needs.

use super::*;

/// The shape of the state topic as the cluster reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::transport::kafka) struct TopicFacts {
    pub(in crate::transport::kafka) topic: String,
    pub(in crate::transport::kafka) partitions: i32,
    pub(in crate::transport::kafka) replication_factor: i32,
    pub(in crate::transport::kafka) cleanup_policy: String,
    pub(in crate::transport::kafka) min_insync_replicas: Option<i32>,
}

impl TopicFacts {
    /// Refuses a topic of another partition count than `expected`, or not
    /// compacted ([`Error::Fatal`] naming the topic and the values).
    pub(in crate::transport::kafka) fn check(&self, expected: i32) -> Result<()> {
        let topic = &self.topic;
        let partitions = self.partitions;
        if partitions != expected {
            return Err(Error::fatal(
                format!("state topic {topic} check"),
                format!(
                    "the topic has {partitions} partitions but the member was configured with {expected}; every \
                     member must use the topic's real partition count ({partitions}), or one role lands on two \
                     partitions"
                ),
            ));
        }
        if self.cleanup_policy.trim() != "compact" {
            return Err(Error::fatal(
                format!("state topic {topic} check"),
                format!(
                    "cleanup.policy is {:?} but must be \"compact\": registrations must live until their \
                     tombstone, not until a retention time",
                    self.cleanup_policy
                ),
            ));
        }
        Ok(())
    }

    /// The report of a checked topic, with its warnings (for the caller to
    /// log).
    pub(in crate::transport::kafka) fn report(&self) -> TopicReport {
        self.report_against(None)
    }

    /// [`TopicFacts::report`], with a warning for each of the replication
    /// factor and `min.insync.replicas` of `asked` (the shape
    /// [`ensure_state_topic`] was asked for a topic that already existed)
    /// that the topic does not have, naming both values.
    pub(in crate::transport::kafka) fn report_against(
        &self,
        asked: Option<(i32, i32)>,
    ) -> TopicReport {
        let topic = &self.topic;
        let mut warnings = Vec::new();
        if let Some((rf, _)) = asked {
            if rf != self.replication_factor {
                warnings.push(format!(
                    "state topic {topic} exists with replication factor {}, not the {rf} asked for: an existing \
                     topic is left as it is (kafka-reassign-partitions.sh changes its replicas)",
                    self.replication_factor
                ));
            }
        }
        let isr_asked = asked
            .map(|(_, isr)| isr)
            .filter(|isr| self.min_insync_replicas.is_some_and(|n| n != *isr));
        match (self.min_insync_replicas, isr_asked) {
            (Some(n), Some(isr)) => {
                let durable = if n < 2 {
                    "; with acks=all a lease is durable in a quorum only with min.insync.replicas >= 2"
                } else {
                    ""
                };
                warnings.push(format!(
                    "state topic {topic} exists with min.insync.replicas={n}, not the {isr} asked for: an existing \
                     topic is left as it is (kafka-configs.sh --alter --entity-type topics --entity-name {topic} \
                     --add-config min.insync.replicas={isr} changes it){durable}"
                ));
            }
            (Some(n), None) if n >= 2 => {}
            (other, _) => {
                let shown = other
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "unknown".into());
                let w = format!(
                    "topic {topic} has min.insync.replicas={shown}; with acks=all a lease is durable in a quorum \
                     only with min.insync.replicas >= 2"
                );
                warnings.push(w);
            }
        }
        TopicReport {
            topic: topic.clone(),
            created: false,
            partitions: self.partitions,
            replication_factor: self.replication_factor,
            cleanup_policy: self.cleanup_policy.clone(),
            min_insync_replicas: self.min_insync_replicas,
            warnings,
        }
    }
}

/// Reads the state topic's metadata (bounded by the connect timeout) and
/// configuration: its shape, and the ids of the cluster's brokers.
/// `expected_partitions` only goes into the advice of a missing topic.
pub(in crate::transport::kafka) async fn read_topic(
    config: &KafkaConfig,
    admin: &Arc<Admin>,
    expected_partitions: i32,
) -> Result<(TopicFacts, Vec<i32>)> {
    let topic = config.state_topic().to_owned();
    let (partitions, replication_factor, brokers) = {
        let md = fetch_metadata(config, admin, &topic).await?;
        let brokers: Vec<i32> = md.brokers().iter().map(|b| b.id()).collect();
        let Some(t) = md.topics().iter().find(|t| t.name() == topic) else {
            return Err(missing(&topic, expected_partitions));
        };
        match t.error().map(RDKafkaErrorCode::from) {
            None => {}
            Some(RDKafkaErrorCode::TopicAuthorizationFailed) => {
                return Err(not_authorized(&topic, "DESCRIBE", "reading its metadata"))
            }
            Some(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic) => {
                return Err(missing(&topic, expected_partitions))
            }
            Some(code) => {
                return Err(Error::transient(
                    format!("reading the metadata of topic {topic}"),
                    format!("{code:?} ({code})"),
                ))
            }
        }
        if t.partitions().is_empty() {
            return Err(missing(&topic, expected_partitions));
        }
        let rf = t
            .partitions()
            .iter()
            .find(|p| p.id() == 0)
            .map(|p| p.replicas().len() as i32)
            .unwrap_or(0);
        (t.partitions().len() as i32, rf, brokers)
    };
    let context = format!("describing the configuration of topic {topic}");
    let resources = admin
        .describe_configs([&ResourceSpecifier::Topic(&topic)], &admin_options(config))
        .await
        .map_err(|e| kafka_error(&context, e))?;
    let resource = match resources.into_iter().next() {
        Some(Ok(r)) => r,
        Some(Err(RDKafkaErrorCode::TopicAuthorizationFailed)) => {
            return Err(not_authorized(
                &topic,
                "DESCRIBE_CONFIGS",
                "checking that it is compacted",
            ))
        }
        Some(Err(code)) => return Err(Error::transient(context, format!("{code:?} ({code})"))),
        None => return Err(Error::transient(context, "the broker answered nothing")),
    };
    let cleanup_policy = resource
        .get("cleanup.policy")
        .and_then(|e| e.value.clone())
        .unwrap_or_default();
    let min_insync_replicas = resource
        .get("min.insync.replicas")
        .and_then(|e| e.value.as_deref())
        .and_then(|v| v.trim().parse::<i32>().ok());
    Ok((
        TopicFacts {
            topic,
            partitions,
            replication_factor,
            cleanup_policy,
            min_insync_replicas,
        },
        brokers,
    ))
}

/// The longest one librdkafka Metadata request of [`read_topic`] waits. It
/// goes to one broker librdkafka picks; a broker that died a moment ago
/// (its connection not yet seen down) would hold it for the whole connect
/// timeout, failing a member's start on a cluster that has brokers to spare
/// (seen in `core/tests/kafka_unwritable.rs`: a standby starting as a broker
/// was killed). The next attempt goes to a broker that answers.
const METADATA_ATTEMPT: Duration = Duration::from_secs(2);

/// The state topic's metadata, in attempts of at most
/// [`METADATA_ATTEMPT`] within the connect timeout; a failure that is not
/// transient ends it at once.
async fn fetch_metadata(
    config: &KafkaConfig,
    admin: &Arc<Admin>,
    topic: &str,
) -> Result<rdkafka::metadata::Metadata> {
    let deadline = std::time::Instant::now() + config.connect_timeout();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let (a, t) = (Arc::clone(admin), topic.to_owned());
        let attempt = left.min(METADATA_ATTEMPT);
        match run_blocking(move || a.inner().fetch_metadata(Some(&t), attempt)).await? {
            Ok(md) => return Ok(md),
            Err(e) => {
                let context = format!("reading the metadata of topic {topic}");
                let transient = kafka_error(&context, e.clone()).is_transient();
                if !transient || left <= attempt {
                    return Err(unreachable_or(config, &context, e));
                }
                tracing::debug!(topic, error = %e, "a Metadata request of the state topic failed; asking again");
                // A failure that came at once (every broker down) is not
                // asked again in a tight loop.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}
