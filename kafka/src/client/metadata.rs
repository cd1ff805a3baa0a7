//! Where a topic's partitions are: one Metadata request per topic, cached
//! until a request to a partition's leader says the leader moved, or for
//! [`LEADER_MAX_AGE`].
//!
//! A transactional Produce (`txn.rs`) needs the leader of each partition it
//! writes to and, for a record whose caller leaves the partition open, the
//! topic's partition count. (ListOffsets, at the leaders found here, is
//! the `list_offsets` module.)
//!
//! # A leader that is no longer the leader, and does not know it
//!
//! A broker cut off from its peers and from the controller goes on
//! answering its clients as the leader it was: its reads come back without
//! an error (its log as it stood when it was cut off, its last stable offset
//! stuck below any transaction whose markers it never got), and nothing
//! tells the client that the controller moved the partition elsewhere. Two
//! rules route around it:
//!
//! - **a cached leader is asked about again**: once it is older than
//!   [`LEADER_MAX_AGE`], the next request first asks Metadata again, at the
//!   other brokers first (on failure, the cached leader is used);
//! - **an older leader epoch is not taken**: a Metadata answer that names
//!   an older leader epoch of a partition (of the same topic id) than one
//!   already seen comes from a broker behind the controller; its leader is
//!   not cached, and that broker is asked last next time (KIP-320's rule).

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::{MetadataResponseBroker, MetadataResponseTopic};
use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::time::Duration;
use tokio::time::Instant;

use super::routes::Suspect;
use super::{code_name, format_addr, Attempt, Client};
use crate::codes::{self, Meaning, Resource};
use crate::error::Error;

/// What Metadata said of a topic.
pub(super) enum Layout {
    /// The partition count; the leaders are cached.
    Partitions(i32, Vec<PartitionState>),
    /// The principal may not describe the topic.
    Denied,
}

/// What Metadata said of one partition: whether it can take an `acks=all`
/// write (see the `writable` module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PartitionState {
    pub(super) partition: i32,
    /// The leader's node id, or -1 while the partition has none.
    pub(super) leader: i32,
    /// How many replicas are in sync.
    pub(super) in_sync: usize,
    /// How many replicas it has.
    pub(super) replicas: usize,
}

/// How long a partition's leader named by Metadata is used before the next
/// request asks Metadata again, at the other brokers first (see the module
/// docs): a reader of a broker cut off from the controller gets off it
/// within this much of the controller moving the partition, which it does
/// only after the broker session (9 s by default).
pub const LEADER_MAX_AGE: Duration = Duration::from_secs(5);

/// The longest a look at Metadata for a cached leader that has aged takes
/// before the request goes to the cached leader all the same.
const RELOOK_BOUND: Duration = Duration::from_secs(1);

/// How long a topic that Metadata says does not exist is asked about again
/// before it is taken as missing: long enough for a topic created a moment
/// ago to reach every broker's metadata.
pub const MISSING_TOPIC_GRACE: Duration = Duration::from_millis(500);

/// A partition's leader as Metadata named it.
#[derive(Debug, Clone)]
pub(super) struct Leader {
    /// Its address.
    pub(super) addr: String,
    /// When Metadata named it, or it was last asked about.
    pub(super) learned: Instant,
    /// The bootstrap broker whose Metadata named it.
    pub(super) named_by: String,
}

impl Client {
    /// Forgets the leader of the partition; returns what was cached.
    pub(super) fn forget_leader(&self, topic: &str, partition: i32) -> Option<Leader> {
        self.inner
            .leaders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(topic.to_owned(), partition))
    }

    fn cached_leader(&self, topic: &str, partition: i32) -> Option<String> {
        self.inner
            .leaders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(topic.to_owned(), partition))
            .map(|l| l.addr.clone())
    }

    /// The cached leader of the partition and whether it is older than
    /// [`LEADER_MAX_AGE`]; an aged one is marked asked about now, so only
    /// one request of many asks Metadata again.
    fn cached_leader_aged(&self, topic: &str, partition: i32) -> Option<(String, bool)> {
        let mut leaders = self.inner.leaders.lock().unwrap_or_else(|e| e.into_inner());
        let l = leaders.get_mut(&(topic.to_owned(), partition))?;
        let aged = l.learned.elapsed() >= LEADER_MAX_AGE;
        if aged {
            l.learned = Instant::now();
        }
        Some((l.addr.clone(), aged))
    }

    /// The address of the partition's leader, cached or from Metadata. For
    /// a topic the principal may not describe, a bootstrap broker's address:
    /// the request sent there is refused with the same authorization error,
    /// which tells the caller.
    pub(super) async fn partition_leader(
        &self,
        topic: &str,
        partition: i32,
        deadline: Instant,
    ) -> Result<String, Attempt> {
        match self.cached_leader_aged(topic, partition) {
            Some((addr, false)) => return Ok(addr),
            Some((addr, true)) => {
                // Asked about again, at the other brokers first; whatever
                // the look brings (nothing, in the worst case), the cache
                // has the answer.
                let avoid = Suspect {
                    addr: addr.clone(),
                    named_by: None,
                };
                self.distrust_for_topic(topic, avoid);
                let bound = deadline.min(crate::deadline_in(RELOOK_BOUND));
                if let Err(e) = self.load_topic(topic, bound).await {
                    tracing::debug!(topic, error = ?e, "asking Metadata again about a leader failed; the cached leader is used");
                }
                return Ok(self.cached_leader(topic, partition).unwrap_or(addr));
            }
            None => {}
        }
        match self.load_topic(topic, deadline).await? {
            (Layout::Denied, broker) => Ok(broker),
            (Layout::Partitions(count, _), _) if partition >= count => {
                Err(Attempt::Fail(Error::InvalidArgument(format!(
                    "topic {} has no partition {partition} (it has {count})",
                    crate::error::quote(topic)
                ))))
            }
            (Layout::Partitions(count, _), broker) => {
                self.cached_leader(topic, partition).ok_or_else(|| {
                    Attempt::Again(format!(
                        "Metadata at {broker} shows no leader of {}/{partition} (the topic has \
                         {count} partitions)",
                        crate::error::quote(topic)
                    ))
                })
            }
        }
    }

    /// The number of partitions of `topic`, cached or from Metadata;
    /// [`Error::Fatal`] for a topic the principal may not describe, or one
    /// that does not exist past [`MISSING_TOPIC_GRACE`].
    pub(super) async fn partition_count(
        &self,
        topic: &str,
        deadline: Instant,
    ) -> Result<i32, Attempt> {
        if let Some(n) = self
            .inner
            .partition_counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(topic)
        {
            return Ok(*n);
        }
        match self.load_topic(topic, deadline).await? {
            (Layout::Partitions(n, _), _) => Ok(n),
            (Layout::Denied, broker) => Err(Attempt::Fail(Error::fatal(
                format!(
                    "Metadata for topic {} at {broker}",
                    crate::error::quote(topic)
                ),
                "not authorized to describe the topic (an ACL allowing DESCRIBE or WRITE on it \
                 is needed)",
            ))),
        }
    }

    /// What to do about a topic Metadata says does not exist: a topic
    /// created a moment ago may not be known to every broker yet, so it is
    /// asked about again for [`MISSING_TOPIC_GRACE`] from the first such
    /// answer; after that the topic is taken as missing, [`Error::Fatal`]
    /// naming it (no retry creates it).
    fn topic_missing(&self, topic: &str, broker: &str) -> Attempt {
        let mut since = self
            .inner
            .missing_since
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let first = since.entry(topic.to_owned()).or_insert(now);
        // An answer from long ago says nothing of a topic made since.
        if now.duration_since(*first) > 10 * MISSING_TOPIC_GRACE {
            *first = now;
        }
        if now.duration_since(*first) < MISSING_TOPIC_GRACE {
            return Attempt::Again(format!(
                "topic {} does not exist (Metadata at {broker})",
                crate::error::quote(topic)
            ));
        }
        Attempt::Fail(Error::fatal(
            format!("topic {}", crate::error::quote(topic)),
            format!("it does not exist (Metadata at {broker}): create it, or correct its name"),
        ))
    }

    /// Forgets that `topic` was missing.
    fn topic_found(&self, topic: &str) {
        let mut since = self
            .inner
            .missing_since
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if !since.is_empty() {
            since.remove(topic);
        }
    }

    /// Caches the leaders `t` (an answer of `broker`, whose broker list is
    /// `brokers`) names for `topic`, except where it names an older leader
    /// epoch than one seen before (same topic id): those partitions, with
    /// the epoch named and the one seen, are returned and not cached.
    fn learn_leaders(
        &self,
        topic: &str,
        t: &MetadataResponseTopic,
        brokers: &[MetadataResponseBroker],
        broker: &str,
    ) -> Vec<(i32, i32, i32)> {
        let mut leaders = self.inner.leaders.lock().unwrap_or_else(|e| e.into_inner());
        let mut epochs = self
            .inner
            .leader_epochs
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let topic_id = t.topic_id.as_u128();
        let mut behind = Vec::new();
        for p in &t.partitions {
            if p.leader_id.0 < 0 {
                continue;
            }
            let key = (topic.to_owned(), p.partition_index);
            // -1: a broker too old to say (Metadata before v7).
            if p.leader_epoch >= 0 {
                match epochs.get(&key) {
                    Some(&(id, seen)) if id == topic_id && p.leader_epoch < seen => {
                        behind.push((p.partition_index, p.leader_epoch, seen));
                        continue;
                    }
                    _ => {
                        epochs.insert(key.clone(), (topic_id, p.leader_epoch));
                    }
                }
            }
            if let Some(b) = brokers.iter().find(|b| b.node_id == p.leader_id) {
                leaders.insert(
                    key,
                    Leader {
                        addr: format_addr(b.host.as_str(), b.port),
                        learned: Instant::now(),
                        named_by: broker.to_owned(),
                    },
                );
            }
        }
        behind
    }

    /// Asks a bootstrap broker for the topic's partitions and caches their
    /// leaders and their count; returns the layout and the broker that
    /// answered.
    pub(super) async fn load_topic(
        &self,
        topic: &str,
        deadline: Instant,
    ) -> Result<(Layout, String), Attempt> {
        let suspect = self
            .inner
            .suspect_leader
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(topic);
        self.at_bootstrap_avoiding(deadline, suspect.as_ref(), |at| async move {
            let broker = &at.addr;
            let version = at.version(ApiKey::Metadata, (1, 12), "")?;
            let mut t = MetadataRequestTopic::default();
            t.name = Some(TopicName(StrBytes::from_string(topic.to_owned())));
            let mut req = MetadataRequest::default();
            req.topics = Some(vec![t]);
            req.allow_auto_topic_creation = false;
            let resp: MetadataResponse =
                self.exchange(&at, ApiKey::Metadata, version, &req).await?;
            let found = resp
                .topics
                .iter()
                .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic));
            let Some(t) = found else {
                return Err(Attempt::Again(format!(
                    "Metadata at {broker} answered nothing for the topic"
                )));
            };
            match codes::meaning(ApiKey::Metadata, t.error_code) {
                Meaning::Ok => self.topic_found(topic),
                Meaning::Denied(Resource::Topic) => return Ok((Layout::Denied, broker.clone())),
                Meaning::Missing(Resource::Topic) => return Err(self.topic_missing(topic, broker)),
                // Whatever else a broker says of one topic, another may
                // answer better.
                _ => {
                    return Err(Attempt::Again(format!(
                        "Metadata at {broker}: {}",
                        code_name(t.error_code)
                    )));
                }
            }
            let count = i32::try_from(t.partitions.len()).unwrap_or(i32::MAX);
            let states = t
                .partitions
                .iter()
                .map(|p| PartitionState {
                    partition: p.partition_index,
                    leader: p.leader_id.0,
                    in_sync: p.isr_nodes.len(),
                    replicas: p.replica_nodes.len(),
                })
                .collect();
            let behind = self.learn_leaders(topic, t, &resp.brokers, broker);
            if !behind.is_empty() {
                tracing::debug!(
                    topic,
                    broker = %broker,
                    partitions = ?behind,
                    "Metadata named older leader epochs (partition, named, seen) than seen before; the broker is behind the controller and is asked last next time"
                );
                let behind = Suspect {
                    addr: broker.clone(),
                    named_by: None,
                };
                self.distrust_for_topic(topic, behind);
            }
            self.inner
                .partition_counts
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(topic.to_owned(), count);
            Ok((Layout::Partitions(count, states), broker.clone()))
        })
        .await
    }
}
