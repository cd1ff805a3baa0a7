//! A read_uncommitted Fetch of one partition at its leader (Fetch v4 to
//! v12, the versions that name the topic and report the last stable
//! offset): the records of open transactions and the transaction markers
//! as they are in the log, read with [`crate::records`].
//!
//! It never waits at the broker (`max_wait_ms` 0): it answers what the log
//! holds from the offset asked, up to a byte limit, with the partition's
//! high watermark and last stable offset as that same answer saw them.

use kafka_protocol::messages::{ApiKey, FetchResponse};
use tokio::time::Instant;

use super::*;
use crate::records::{read_batches, Batches};

/// What one Fetch of a partition answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The partition's high watermark (the end of the log, records of open
    /// transactions included) when the leader answered.
    pub high_watermark: i64,
    /// The partition's last stable offset when the leader answered: every
    /// record below it is decided.
    pub last_stable: i64,
    /// The whole batches from the offset asked on (the batch holding that
    /// offset may start before it).
    pub batches: Batches,
}

impl Client {
    /// One read_uncommitted Fetch of `topic`/`partition` from `offset`, of
    /// at most about `max_bytes` (a broker always answers a whole first
    /// batch, whatever the limit). Retries a moved leader and a broken
    /// connection until `deadline`; then [`Error::Transient`]. A topic the
    /// principal may not READ is [`Error::Fatal`]; an offset outside the
    /// log (a topic recreated, records deleted) and batches this client
    /// cannot read (malformed, a codec Kafka does not define, or more than
    /// [`crate::records::DECOMPRESSED_MAX`] decompressed) are refused
    /// ([`Error::Fatal`] naming the offset or the codec). Compressed
    /// batches are read as [`crate::records`] says.
    pub async fn fetch_uncommitted(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: i32,
        deadline: Instant,
    ) -> Result<Fetched> {
        let context = || {
            format!(
                "reading {}/{partition} from offset {offset} (read_uncommitted)",
                crate::error::quote(topic)
            )
        };
        let budget = deadline.saturating_duration_since(Instant::now());
        self.retrying(context, deadline, budget, Backoff::LOOKUP, || {
            self.at(
                Target::Leader(topic, partition),
                deadline,
                |at| async move {
                    let version = at.version(ApiKey::Fetch, (4, 12), "Kafka 0.11 or newer")?;
                    let mut req = one_batch_fetch(topic, partition, offset, 0);
                    req.max_bytes = max_bytes.max(1);
                    req.topics[0].partitions[0].partition_max_bytes = max_bytes.max(1);
                    let resp: FetchResponse =
                        self.exchange(&at, ApiKey::Fetch, version, &req).await?;
                    let what = || format!("{} at {}", context(), at.addr);
                    if resp.error_code != codes::NONE {
                        return Err(attempt_for(ApiKey::Fetch, resp.error_code, what()));
                    }
                    let Some(p) = resp
                        .responses
                        .iter()
                        .flat_map(|t| t.partitions.iter())
                        .find(|p| p.partition_index == partition)
                    else {
                        return Err(Attempt::Again(format!("{} answered no partition", what())));
                    };
                    read_answer(
                        ApiKey::Fetch,
                        p.error_code,
                        what(),
                        "an ACL allowing READ on it is needed",
                    )?;
                    let batches = match &p.records {
                        Some(bytes) => read_batches(bytes)
                            .map_err(|e| Attempt::Fail(Error::fatal(what(), e.to_string())))?,
                        None => Batches::default(),
                    };
                    Ok(Fetched {
                        high_watermark: p.high_watermark,
                        last_stable: p.last_stable_offset,
                        batches,
                    })
                },
            )
        })
        .await
    }
}

/// A Fetch of one partition from `offset` that waits for nothing and
/// returns at most the first batch (the broker returns a whole first batch,
/// whatever the byte limits); `isolation_level` 0 is read_uncommitted, 1
/// read_committed. For versions 4 to 12, which name the topic.
pub(super) fn one_batch_fetch(
    topic: &str,
    partition: i32,
    offset: i64,
    isolation_level: i8,
) -> FetchRequest {
    let mut part = FetchPartition::default();
    part.partition = partition;
    part.fetch_offset = offset;
    part.partition_max_bytes = 1;
    part.current_leader_epoch = -1;
    part.last_fetched_epoch = -1;
    part.log_start_offset = -1;
    let mut t = FetchTopic::default();
    t.topic = TopicName(StrBytes::from_string(topic.to_owned()));
    t.partitions = vec![part];
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(-1);
    req.max_wait_ms = 0;
    req.min_bytes = 0;
    req.max_bytes = 1;
    req.isolation_level = isolation_level;
    req.session_id = 0;
    req.session_epoch = -1;
    req.topics = vec![t];
    req
}
