//! Whether a topic's partitions can take a transactional write now, asked
//! before they are added to a transaction ([`Client::check_writable`]).
//!
//! Kafka writes a transaction's markers (its commit or its abort) to every
//! partition the transaction added, with `acks=all` and the partition's
//! `min.insync.replicas` enforced, and its coordinator retries them until
//! they land. A partition with fewer in-sync replicas than its
//! `min.insync.replicas`, or without a leader, therefore holds open any
//! transaction that added it: neither its commit nor its abort completes,
//! and every later request of the transactional id is answered
//! CONCURRENT_TRANSACTIONS until the partition takes writes again. For a
//! role, whose lease renewals are transactions of the same transactional
//! id, one write to such a partition would cost the lease.
//!
//! So before a partition of a data topic joins a transaction, the client
//! asks Metadata (fresh, never cached) for its leader and in-sync replicas,
//! and DescribeConfigs for the topic's `min.insync.replicas` (kept for
//! [`MIN_INSYNC_TTL`], or [`DEGRADED_MAX_AGE`] once a partition is short of
//! in-sync replicas, so a changed value counts at once), and refuses a
//! partition that cannot take the write, with nothing sent. A topic whose
//! `min.insync.replicas` equals its replication factor is warned about once.
//!
//! What it cannot see: a broker that died a moment ago stays among a
//! partition's in-sync replicas until the controller fences it
//! (`broker.session.timeout.ms`, 9 s by default) or the leader drops it
//! (`replica.lag.time.max.ms`, 30 s); a write added in that window waits for
//! it like any `acks=all` write. A principal without DESCRIBE_CONFIGS on the
//! topic gets the leader check only (said once per topic in the log).

use std::time::Duration;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use super::metadata::{Layout, PartitionState};
use super::{code_name, Attempt, Backoff, Client};
use crate::codes::{self, Meaning, Resource};
use crate::error::{quote, Error, Result};

/// How long a topic's `min.insync.replicas` is taken as known while its
/// partitions have all their replicas in sync (any value up to the replica
/// count is then met).
pub const MIN_INSYNC_TTL: Duration = Duration::from_secs(30);

/// How long it is taken as known for a partition short of in-sync
/// replicas: about a fresh answer per write, at most one a second.
pub const DEGRADED_MAX_AGE: Duration = Duration::from_secs(1);

/// DescribeConfigs' resource type of a topic.
const RESOURCE_TOPIC: i8 = 2;

const MIN_INSYNC: &str = "min.insync.replicas";

/// What a partition's state says of an `acks=all` write to it: `None` when
/// its in-sync replicas can take one, else why not.
pub(super) fn refusal(state: &PartitionState, min_insync: Option<usize>) -> Option<String> {
    match min_insync {
        Some(min) if state.in_sync < min => Some(format!(
            "the partition has {} in-sync replicas (of {}), fewer than its {MIN_INSYNC} ({min})",
            state.in_sync, state.replicas
        )),
        _ => None,
    }
}

impl Client {
    /// Refuses, before anything of a write is sent, a partition of
    /// `partitions` of `topic` that cannot take an `acks=all` write now
    /// (module docs): fewer in-sync replicas than the topic's
    /// `min.insync.replicas`, at once; no leader, once none was elected by
    /// `deadline` (a topic created a moment ago gets its leaders within
    /// milliseconds). [`Error::Transient`] naming the partition, what
    /// Metadata showed and why the write is not sent; the lookups' own
    /// failures within `deadline` too.
    pub async fn check_writable(
        &self,
        topic: &str,
        partitions: &[i32],
        deadline: Instant,
    ) -> Result<()> {
        let mut min_insync = self
            .min_insync_replicas(topic, deadline, MIN_INSYNC_TTL)
            .await;
        let context = || format!("checking that topic {} can take a write", quote(topic));
        let budget = deadline.saturating_duration_since(Instant::now());
        let degraded = self
            .retrying(context, deadline, budget, Backoff::LOOKUP, || async {
                // A topic the principal may not describe: its
                // AddPartitionsToTxn is refused with the authorization
                // error, adding nothing.
                let (Layout::Partitions(_, states), broker) =
                    self.load_topic(topic, deadline).await?
                else {
                    return Ok(None);
                };
                let mut degraded = Vec::new();
                for &p in partitions {
                    let Some(state) = states.iter().find(|s| s.partition == p) else {
                        continue;
                    };
                    if state.leader < 0 {
                        return Err(Attempt::Again(format!(
                            "{}/{p} has no leader (Metadata at {broker}): Kafka could neither \
                             commit nor abort a transaction that included it until it has one",
                            quote(topic)
                        )));
                    }
                    if state.in_sync < state.replicas {
                        degraded.push((*state, broker.clone()));
                    }
                }
                let replicas = states.iter().map(|s| s.replicas).max().unwrap_or(0);
                Ok(Some((degraded, replicas)))
            })
            .await?;
        let Some((degraded, replicas)) = degraded else {
            return Ok(());
        };
        self.warn_if_min_insync_is_all(topic, replicas, min_insync);
        if !degraded.is_empty() {
            // A partition short of replicas decides by the topic's
            // min.insync.replicas as it is now: a value kept from before
            // a change would let one write in that holds the role's
            // transactions until the partition recovers.
            min_insync = self
                .min_insync_replicas(topic, deadline, DEGRADED_MAX_AGE)
                .await;
        }
        let refused = degraded.into_iter().find_map(|(state, broker)| {
            refusal(&state, min_insync)
                .map(|why| (state.partition, format!("{why} (Metadata at {broker})")))
        });
        match refused {
            None => Ok(()),
            Some((p, why)) => Err(Error::transient(
                format!("a write to {}/{p}", quote(topic)),
                format!(
                    "{why}: Kafka could neither commit nor abort a transaction that included \
                     it until it takes writes again, and the role's lease renewals would wait \
                     for that"
                ),
            )),
        }
    }

    /// Warns, once per topic, when its `min.insync.replicas` equals its
    /// replica count: every broker's loss then makes it unwritable, and a
    /// write in flight at that moment holds the role's transactions (its
    /// renewals) until the broker is back.
    fn warn_if_min_insync_is_all(&self, topic: &str, replicas: usize, min: Option<usize>) {
        if min.is_some_and(|m| m >= replicas && replicas > 1)
            && self
                .inner
                .warned_min_insync
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(topic.to_owned())
        {
            tracing::warn!(topic, replicas, "the topic's {MIN_INSYNC} equals its replication factor: while any replica is down it takes no write, and a guarded write in flight when a replica dies holds the role's renewals until that replica is back (which can cost the lease); set {MIN_INSYNC} below the replication factor");
        }
    }

    /// The topic's `min.insync.replicas`, as asked at most `max_age` ago;
    /// `None` when the broker does not tell (no DESCRIBE_CONFIGS on the
    /// topic, said once per topic in the log) or does not answer in time.
    async fn min_insync_replicas(
        &self,
        topic: &str,
        deadline: Instant,
        max_age: Duration,
    ) -> Option<usize> {
        let cached = self
            .inner
            .min_insync
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(topic)
            .copied();
        if let Some((at, known)) = cached {
            if at.elapsed() < max_age {
                return known;
            }
        }
        let context = || format!("DescribeConfigs of topic {}", quote(topic));
        let budget = deadline.saturating_duration_since(Instant::now());
        let asked = self
            .retrying(context, deadline, budget, Backoff::LOOKUP, || {
                self.describe_min_insync(topic, deadline)
            })
            .await;
        let known = match asked {
            Ok(n) => n,
            Err(e) if !e.is_transient() => {
                if cached.is_none() {
                    tracing::warn!(topic, error = %e, "the topic's {MIN_INSYNC} is unknown: a write to a partition with too few in-sync replicas is not refused before it is sent, and could hold the role's transactions until the partition recovers");
                }
                None
            }
            Err(e) => {
                tracing::debug!(topic, error = %e, "the topic's {MIN_INSYNC} was not read");
                return cached.and_then(|(_, known)| known);
            }
        };
        self.inner
            .min_insync
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(topic.to_owned(), (Instant::now(), known));
        known
    }

    /// One DescribeConfigs of the topic's `min.insync.replicas` at a
    /// bootstrap broker.
    async fn describe_min_insync(
        &self,
        topic: &str,
        deadline: Instant,
    ) -> Result<Option<usize>, Attempt> {
        self.at_bootstrap(deadline, |at| async move {
            let version = at.version(ApiKey::DescribeConfigs, (1, 4), "")?;
            let mut resource = DescribeConfigsResource::default();
            resource.resource_type = RESOURCE_TOPIC;
            resource.resource_name = StrBytes::from_string(topic.to_owned());
            resource.configuration_keys = Some(vec![StrBytes::from_static_str(MIN_INSYNC)]);
            let mut req = DescribeConfigsRequest::default();
            req.resources = vec![resource];
            let resp: DescribeConfigsResponse = self
                .exchange(&at, ApiKey::DescribeConfigs, version, &req)
                .await?;
            let what = || format!("DescribeConfigs of topic {} at {}", quote(topic), at.addr);
            let Some(result) = resp.results.first() else {
                return Err(Attempt::Again(format!("{} answered nothing", what())));
            };
            match codes::meaning(ApiKey::DescribeConfigs, result.error_code) {
                Meaning::Ok => {}
                Meaning::Denied(Resource::Topic) => {
                    return Err(Attempt::Fail(Error::fatal(
                        what(),
                        "not authorized (an ACL allowing DESCRIBE_CONFIGS on the topic is needed)",
                    )))
                }
                // Anything else is not asked again within this write: the
                // check then rests on the leader alone until the next ask.
                _ => {
                    return Err(Attempt::Fail(Error::fatal(
                        what(),
                        code_name(result.error_code),
                    )))
                }
            }
            Ok(result
                .configs
                .iter()
                .find(|c| c.name.as_str() == MIN_INSYNC)
                .and_then(|c| c.value.as_ref())
                .and_then(|v| v.as_str().parse::<usize>().ok()))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(leader: i32, in_sync: usize) -> PartitionState {
        PartitionState {
            partition: 0,
            leader,
            in_sync,
            replicas: 3,
        }
    }

    #[test]
    fn a_partition_is_refused_below_its_min_insync() {
        assert_eq!(refusal(&state(1, 3), Some(3)), None);
        assert_eq!(refusal(&state(1, 2), Some(2)), None);
        assert_eq!(
            refusal(&state(1, 1), None),
            None,
            "min.insync.replicas unknown"
        );
        let below = refusal(&state(1, 2), Some(3)).expect("refused");
        assert!(
            below.contains("2 in-sync replicas (of 3)")
                && below.contains("min.insync.replicas (3)"),
            "{below}"
        );
    }
}
