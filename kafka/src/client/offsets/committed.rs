//! What a consumer group has committed: OffsetFetch v7 or v8 with
//! `require_stable`.
//!
//! [`Client::committed_offsets`] asks with `require_stable`: a partition
//! whose group offset a pending commit of an open transaction holds is
//! answered UNSTABLE_OFFSET_COMMIT, never with the offset committed before
//! it, so a new leader never resumes from an offset that the previous
//! leader's transaction is about to replace. It waits (within its
//! deadline) until the transaction ends; [`Client::committed_offsets_now`]
//! reports such a partition as [`Committed::Pending`] instead.

use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    ApiKey, GroupId, OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use crate::client::group::group_denied;
use crate::client::*;

/// OffsetFetch with `require_stable` (v7) and one group (v7, or v8's list
/// of one group): the versions every supported Kafka serves.
const OFFSET_FETCH: (i16, i16) = (7, 8);

/// What a consumer group has committed for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    /// Nothing: the group has no offset for the partition.
    Nothing,
    /// The offset of the next record to read, and its metadata.
    At {
        /// The offset.
        offset: i64,
        /// The metadata committed with it.
        metadata: Option<String>,
    },
    /// A pending commit of an open transaction holds the partition's offset
    /// (UNSTABLE_OFFSET_COMMIT): the offset is known once the transaction
    /// commits or aborts (at the latest at its transaction timeout).
    Pending,
}

/// A consumer group's committed offset of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionCommitted {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// What the group has committed for it.
    pub committed: Committed,
}

impl Client {
    /// What consumer group `group` has committed for `partitions` (by
    /// topic), in their order: only offsets of commits that are decided
    /// (`require_stable`). Waits, until `deadline`, while an open
    /// transaction's pending commit holds one of them, so no partition is
    /// [`Committed::Pending`]; retries a moved or loading group coordinator
    /// too. Out of time, [`Error::Transient`] naming the group, the
    /// partitions still pending and why; a principal without DESCRIBE on
    /// the group or the topic is [`Error::Fatal`] naming it.
    pub async fn committed_offsets(
        &self,
        group: &str,
        partitions: &[(String, Vec<i32>)],
        deadline: Instant,
    ) -> Result<Vec<PartitionCommitted>> {
        crate::error::check_group_id(group)?;
        let context = || {
            format!(
                "reading the committed offsets of group {}",
                crate::error::quote(group)
            )
        };
        let budget = deadline.saturating_duration_since(Instant::now());
        self.retrying(context, deadline, budget, Backoff::LOOKUP, || async {
            let answer = self.offset_fetch(group, partitions, deadline).await?;
            let pending: Vec<String> = answer
                .iter()
                .filter(|p| p.committed == Committed::Pending)
                .map(|p| format!("{}/{}", crate::error::quote(&p.topic), p.partition))
                .collect();
            if pending.is_empty() {
                return Ok(answer);
            }
            Err(Attempt::Again(format!(
                "{} of {}: a transaction holding a pending offset commit of the group for it is \
                 open (UNSTABLE_OFFSET_COMMIT); it ends when its producer commits or aborts it, \
                 or at its transaction timeout",
                pending.join(", "),
                crate::error::quote(group)
            )))
        })
        .await
    }

    /// [`Client::committed_offsets`], except that a partition whose offset
    /// an open transaction's pending commit holds is answered at once as
    /// [`Committed::Pending`]. Retries a moved or loading group coordinator
    /// until `deadline`.
    pub async fn committed_offsets_now(
        &self,
        group: &str,
        partitions: &[(String, Vec<i32>)],
        deadline: Instant,
    ) -> Result<Vec<PartitionCommitted>> {
        crate::error::check_group_id(group)?;
        let context = || {
            format!(
                "reading the committed offsets of group {}",
                crate::error::quote(group)
            )
        };
        let budget = deadline.saturating_duration_since(Instant::now());
        self.retrying(context, deadline, budget, Backoff::LOOKUP, || {
            self.offset_fetch(group, partitions, deadline)
        })
        .await
    }

    /// One OffsetFetch (`require_stable`) of `partitions` at the group
    /// coordinator of `group`.
    async fn offset_fetch(
        &self,
        group: &str,
        partitions: &[(String, Vec<i32>)],
        deadline: Instant,
    ) -> Result<Vec<PartitionCommitted>, Attempt> {
        self.at(Target::Group(group), deadline, |at| async move {
            let version = at.version(ApiKey::OffsetFetch, OFFSET_FETCH, "Kafka 2.5 or newer")?;
            let req = offset_fetch_request(group, partitions, version);
            let resp: OffsetFetchResponse = self
                .exchange(&at, ApiKey::OffsetFetch, version, &req)
                .await?;
            let what = || {
                format!(
                    "OffsetFetch of group {} at {}",
                    crate::error::quote(group),
                    at.addr
                )
            };
            let (code, answered) = answered_offsets(resp, version);
            match codes::meaning(ApiKey::OffsetFetch, code) {
                Meaning::Ok => {}
                // A group that does not exist has committed nothing.
                Meaning::Missing(Resource::Group) => {
                    return Ok(nothing_committed(partitions));
                }
                Meaning::Denied(Resource::Group) => {
                    return Err(Attempt::Fail(Error::fatal(what(), group_denied(group))));
                }
                _ => return Err(attempt_for(ApiKey::OffsetFetch, code, what())),
            }
            let mut found = Vec::new();
            for (topic, partition, code, offset, metadata) in answered {
                let committed = match codes::meaning(ApiKey::OffsetFetch, code) {
                    Meaning::Ok if offset < 0 => Committed::Nothing,
                    Meaning::Ok => Committed::At { offset, metadata },
                    _ if code == codes::UNSTABLE_OFFSET_COMMIT => Committed::Pending,
                    meaning => {
                        let what = format!(
                            "{} for {}/{partition}: {}",
                            what(),
                            crate::error::quote(&topic),
                            code_name(code)
                        );
                        return Err(match meaning {
                            Meaning::Denied(Resource::Topic) => Attempt::Fail(Error::fatal(
                                what,
                                "not authorized to read the topic's committed offsets (an ACL \
                                 allowing DESCRIBE on it is needed)",
                            )),
                            _ => attempt_for(ApiKey::OffsetFetch, code, what),
                        });
                    }
                };
                found.push(PartitionCommitted {
                    topic,
                    partition,
                    committed,
                });
            }
            in_order(partitions, found).map_err(|missing| {
                Attempt::Again(format!(
                    "{} answered nothing for {}/{}",
                    what(),
                    crate::error::quote(&missing.0),
                    missing.1
                ))
            })
        })
        .await
    }
}

/// The OffsetFetch (`require_stable`) of `partitions` for `group`, in the
/// layout of `version` (7: one group; 8: a list of groups).
fn offset_fetch_request(
    group: &str,
    partitions: &[(String, Vec<i32>)],
    version: i16,
) -> OffsetFetchRequest {
    let mut req = OffsetFetchRequest::default();
    req.require_stable = true;
    if version >= 8 {
        let mut g = OffsetFetchRequestGroup::default();
        g.group_id = GroupId(StrBytes::from_string(group.to_owned()));
        g.topics = Some(
            partitions
                .iter()
                .map(|(topic, parts)| {
                    let mut t = OffsetFetchRequestTopics::default();
                    t.name = TopicName(StrBytes::from_string(topic.clone()));
                    t.partition_indexes = parts.clone();
                    t
                })
                .collect(),
        );
        req.groups = vec![g];
    } else {
        req.group_id = GroupId(StrBytes::from_string(group.to_owned()));
        req.topics = Some(
            partitions
                .iter()
                .map(|(topic, parts)| {
                    let mut t = OffsetFetchRequestTopic::default();
                    t.name = TopicName(StrBytes::from_string(topic.clone()));
                    t.partition_indexes = parts.clone();
                    t
                })
                .collect(),
        );
    }
    req
}

/// One partition of an OffsetFetch answer: topic, partition, error code,
/// committed offset (-1 for none) and metadata.
type AnsweredOffset = (String, i32, i16, i64, Option<String>);

/// The group's error code and partitions of an OffsetFetch answer of
/// `version`, whichever its layout.
fn answered_offsets(resp: OffsetFetchResponse, version: i16) -> (i16, Vec<AnsweredOffset>) {
    let text = |m: Option<StrBytes>| m.map(|m| m.as_str().to_owned());
    if version >= 8 {
        let Some(g) = resp.groups.into_iter().next() else {
            return (codes::NONE, Vec::new());
        };
        let parts = g
            .topics
            .into_iter()
            .flat_map(|t| {
                let topic = t.name.0.as_str().to_owned();
                t.partitions.into_iter().map(move |p| {
                    (
                        topic.clone(),
                        p.partition_index,
                        p.error_code,
                        p.committed_offset,
                        text(p.metadata),
                    )
                })
            })
            .collect();
        (g.error_code, parts)
    } else {
        let parts = resp
            .topics
            .into_iter()
            .flat_map(|t| {
                let topic = t.name.0.as_str().to_owned();
                t.partitions.into_iter().map(move |p| {
                    (
                        topic.clone(),
                        p.partition_index,
                        p.error_code,
                        p.committed_offset,
                        text(p.metadata),
                    )
                })
            })
            .collect();
        (resp.error_code, parts)
    }
}

/// `found` in the order of `asked`; else the first partition asked and
/// not answered (a broker's answer that leaves one out says nothing of it).
fn in_order(
    asked: &[(String, Vec<i32>)],
    mut found: Vec<PartitionCommitted>,
) -> Result<Vec<PartitionCommitted>, (String, i32)> {
    let mut out = Vec::new();
    for (topic, parts) in asked {
        for &partition in parts {
            match found
                .iter()
                .position(|f| f.topic == *topic && f.partition == partition)
            {
                Some(i) => out.push(found.swap_remove(i)),
                None => return Err((topic.clone(), partition)),
            }
        }
    }
    Ok(out)
}

/// Every partition of `asked` as [`Committed::Nothing`] (a group that does
/// not exist).
fn nothing_committed(asked: &[(String, Vec<i32>)]) -> Vec<PartitionCommitted> {
    asked
        .iter()
        .flat_map(|(topic, parts)| {
            parts.iter().map(move |&partition| PartitionCommitted {
                topic: topic.clone(),
                partition,
                committed: Committed::Nothing,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offset_fetch_requires_stable_offsets_in_both_layouts() {
        let asked = [("in".to_owned(), vec![0, 1])];
        let v7 = offset_fetch_request("g", &asked, 7);
        assert!(v7.require_stable);
        assert_eq!(v7.group_id.0.as_str(), "g");
        let topics = v7.topics.expect("topics");
        assert_eq!(topics[0].name.0.as_str(), "in");
        assert_eq!(topics[0].partition_indexes, vec![0, 1]);
        assert!(v7.groups.is_empty());

        let v8 = offset_fetch_request("g", &asked, 8);
        assert!(v8.require_stable);
        assert_eq!(v8.groups.len(), 1);
        assert_eq!(v8.groups[0].group_id.0.as_str(), "g");
        let topics = v8.groups[0].topics.as_ref().expect("topics");
        assert_eq!(topics[0].name.0.as_str(), "in");
        assert_eq!(topics[0].partition_indexes, vec![0, 1]);
    }

    /// The answer in the order asked; a partition left out is not taken
    /// for one without a commit.
    #[test]
    fn answers_come_in_the_order_asked_and_none_is_left_out() {
        let asked = [("a".to_owned(), vec![1, 0]), ("b".to_owned(), vec![0])];
        let p = |topic: &str, partition, committed| PartitionCommitted {
            topic: topic.to_owned(),
            partition,
            committed,
        };
        let found = vec![
            p("b", 0, Committed::Pending),
            p("a", 0, Committed::Nothing),
            p(
                "a",
                1,
                Committed::At {
                    offset: 4,
                    metadata: None,
                },
            ),
        ];
        let ordered = in_order(&asked, found.clone()).expect("all answered");
        let keys: Vec<(&str, i32)> = ordered
            .iter()
            .map(|p| (p.topic.as_str(), p.partition))
            .collect();
        assert_eq!(keys, vec![("a", 1), ("a", 0), ("b", 0)]);
        assert_eq!(
            in_order(&asked, found[1..].to_vec()),
            Err(("b".to_owned(), 0))
        );
        assert!(nothing_committed(&asked)
            .iter()
            .all(|p| p.committed == Committed::Nothing));
    }
}
