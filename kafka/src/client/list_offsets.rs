//! ListOffsets at a partition's leader (found by the `metadata` module):
//! the start of its log, its high watermark, or its last stable offset.

use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use super::{attempt_for, code_name, Attempt, Backoff, Client, Reached, Target};
use crate::codes::{self, Meaning, Resource};
use crate::error::Error;

/// ListOffsets' timestamp for "the end of the log".
const LATEST: i64 = -1;
/// ListOffsets' timestamp for "the start of the log".
const EARLIEST: i64 = -2;

impl Client {
    /// The end of `topic`/`partition` as its leader reports it with one
    /// ListOffsets: the high watermark (records of open transactions
    /// included) when `committed` is false, the last stable offset when it
    /// is true. Retries a moved leader and a broken connection until
    /// `deadline`; then [`Error::Transient`].
    pub async fn end_offset(
        &self,
        topic: &str,
        partition: i32,
        committed: bool,
        deadline: Instant,
    ) -> crate::error::Result<i64> {
        self.list_offset(topic, partition, (LATEST, committed), deadline)
            .await
    }

    /// The start of `topic`/`partition` (its log start offset: the oldest
    /// record kept) as its leader reports it with one ListOffsets. Retries
    /// a moved leader and a broken connection until `deadline`; then
    /// [`Error::Transient`].
    pub async fn start_offset(
        &self,
        topic: &str,
        partition: i32,
        deadline: Instant,
    ) -> crate::error::Result<i64> {
        self.list_offset(topic, partition, (EARLIEST, false), deadline)
            .await
    }

    /// One ListOffsets of `at` (its timestamp, and read_committed or not),
    /// retried until `deadline`.
    async fn list_offset(
        &self,
        topic: &str,
        partition: i32,
        (timestamp, committed): (i64, bool),
        deadline: Instant,
    ) -> crate::error::Result<i64> {
        let started = Instant::now();
        let context = || {
            format!(
                "reading the {} of {}/{partition}",
                if timestamp == EARLIEST {
                    "start"
                } else {
                    "end"
                },
                crate::error::quote(topic)
            )
        };
        match super::retry::retry(deadline, Backoff::LOOKUP, || {
            self.at(
                Target::Leader(topic, partition),
                deadline,
                |at| async move {
                    self.offset_at(&at, topic, partition, (timestamp, committed))
                        .await
                },
            )
        })
        .await
        {
            super::retry::Tried::Done(offset) => Ok(offset),
            super::retry::Tried::Failed(e) => Err(e),
            super::retry::Tried::OutOfTime(reason) => Err(Error::transient(
                context(),
                format!(
                    "gave up after {}: {reason}",
                    crate::human::duration(started.elapsed())
                ),
            )),
        }
    }

    /// One ListOffsets at the leader reached.
    async fn offset_at(
        &self,
        at: &Reached,
        topic: &str,
        partition: i32,
        (timestamp, committed): (i64, bool),
    ) -> Result<i64, Attempt> {
        use kafka_protocol::messages::list_offsets_request::{
            ListOffsetsPartition, ListOffsetsTopic,
        };
        use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, ListOffsetsResponse};

        let addr = &at.addr;
        // Version 2 brought the isolation level.
        let version = at.version(ApiKey::ListOffsets, (2, 8), "")?;
        let mut p = ListOffsetsPartition::default();
        p.partition_index = partition;
        p.current_leader_epoch = -1;
        p.timestamp = timestamp;
        let mut t = ListOffsetsTopic::default();
        t.name = TopicName(StrBytes::from_string(topic.to_owned()));
        t.partitions = vec![p];
        let mut req = ListOffsetsRequest::default();
        req.replica_id = BrokerId(-1);
        req.isolation_level = i8::from(committed);
        req.topics = vec![t];
        let resp: ListOffsetsResponse = self
            .exchange(at, ApiKey::ListOffsets, version, &req)
            .await?;
        let what = || {
            format!(
                "ListOffsets of {}/{partition} at {addr}",
                crate::error::quote(topic)
            )
        };
        let Some(p) = resp
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == partition)
        else {
            return Err(Attempt::Again(format!("{} answered no partition", what())));
        };
        match codes::meaning(ApiKey::ListOffsets, p.error_code) {
            Meaning::Ok => Ok(p.offset),
            Meaning::Denied(Resource::Topic) => Err(Attempt::Fail(Error::fatal(
                what(),
                "not authorized to read the topic (an ACL allowing READ or DESCRIBE on it is \
                 needed)",
            ))),
            // Anything else may pass (a moved leader, one not caught up).
            Meaning::LeaderMoved => Err(attempt_for(ApiKey::ListOffsets, p.error_code, what())),
            _ => Err(Attempt::Again(format!(
                "{}: {}",
                what(),
                code_name(p.error_code)
            ))),
        }
    }
}
