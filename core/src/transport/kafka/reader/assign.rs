//! Positioning a [`PartitionReader`]: assigning the state consumer its
//! partition at an offset (incrementally, one assign at a time per
//! consumer), splitting the partition onto its own queue, seeking, and
//! what the metadata says of a partition that cannot be assigned.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::stream_consumer::StreamPartitionQueue;
use rdkafka::consumer::Consumer;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use super::super::{kafka_error, oauth, run_blocking, TransportContext};
use super::{fetch_watermarks_first, PartitionReader};
use crate::error::{Error, Result};

/// What the metadata says of a reader's partition.
enum Shown {
    /// The partition exists.
    Present,
    /// The topic does not exist.
    Missing,
    /// The topic has no such partition.
    Absent,
    /// The principal may not describe the topic.
    Denied,
}
/// How long a seek right after an assign is tried again.
const SEEK_SETTLE: Duration = Duration::from_millis(500);
/// Between two tries of such a seek.
const SEEK_PAUSE: Duration = Duration::from_millis(5);

/// What an assign did to a reader's partition.
enum Change {
    /// Nothing changed.
    None,
    /// Assigned, with its queue split off.
    Assigned(StreamPartitionQueue<TransportContext>),
    /// No longer assigned.
    Unassigned,
}

impl PartitionReader {
    /// Points the consumer's partition at `offset`: the first time by
    /// adding the partition to the consumer's assignment (incremental
    /// assign) and splitting its queue off, after that by a seek. librdkafka's
    /// assign and seek wait for its threads, so they run on the blocking
    /// pool.
    ///
    /// The assign forwards the partition's records to the consumer's main
    /// queue until the split takes them, so the first position is taken
    /// twice: the seek after the split drops whatever was fetched before it
    /// (the main queue's task discards what reached it).
    ///
    /// Never a second assign of one partition: librdkafka 2.12 stops a
    /// replaced assignment asynchronously, and a second assign before that
    /// stop completed trips an assertion that aborts the process
    /// (`rd_kafka_assignment_partition_stopped: rktp->rktp_started`,
    /// <https://github.com/confluentinc/librdkafka/issues/5573>), which a
    /// process that acquires many roles at once would hit.
    pub(super) async fn assign(&mut self, offset: i64) -> Result<()> {
        let context = format!("assigning {}/{}", self.topic, self.partition);
        let c = Arc::clone(&self.consumer);
        let first = !self.assigned_once;
        self.assigned = offset;
        self.seeks.fetch_add(1, Ordering::Relaxed);
        let (topic, partition, timeout) = (self.topic.clone(), self.partition, self.timeout);
        let (change, sought) = run_blocking(move || {
            if let Err(e) = oauth::ensure_token(c.client()) {
                return (Change::None, Err(e));
            }
            let mut tpl = TopicPartitionList::with_capacity(1);
            if let Err(e) = tpl.add_partition_offset(&topic, partition, Offset::Offset(offset)) {
                return (Change::None, Err(kafka_error(&context, e)));
            }
            // Assigns the partition and splits its queue off; on failure
            // the partition is left unassigned.
            let assign = |tpl: &TopicPartitionList| -> Result<_> {
                c.incremental_assign(tpl)
                    .map_err(|e| kafka_error(&context, e))?;
                c.split_partition_queue(&topic, partition).ok_or_else(|| {
                    let _ = c.incremental_unassign(tpl);
                    Error::fatal(
                        context.clone(),
                        "librdkafka gave no queue for the partition",
                    )
                })
            };
            // Right after an assign librdkafka may not have started the
            // partition yet and answers the seek "Erroneous state": try
            // again for a moment.
            let seek = || {
                let started = std::time::Instant::now();
                loop {
                    match c.seek(&topic, partition, Offset::Offset(offset), timeout) {
                        Ok(()) => return Ok(()),
                        Err(e) if started.elapsed() < SEEK_SETTLE => {
                            tracing::debug!(error = %e, "the seek failed; trying again");
                            std::thread::sleep(SEEK_PAUSE);
                        }
                        Err(e) => {
                            return Err(kafka_error(&format!("{context}: seek to {offset}"), e))
                        }
                    }
                }
            };
            if first {
                return match assign(&tpl) {
                    Ok(queue) => (Change::Assigned(queue), seek()),
                    Err(e) => (Change::None, Err(e)),
                };
            }
            match c.seek(&topic, partition, Offset::Offset(offset), timeout) {
                Ok(()) => (Change::None, Ok(())),
                // A partition in an error state (an offset outside the log
                // was asked for) takes no seek: assign it afresh.
                Err(e) => {
                    tracing::debug!(error = %e, "the seek failed; assigning the partition again");
                    if let Err(e) = c.incremental_unassign(&tpl) {
                        return (Change::None, Err(kafka_error(&context, e)));
                    }
                    match assign(&tpl) {
                        Ok(queue) => (Change::Assigned(queue), seek()),
                        Err(e) => (Change::Unassigned, Err(e)),
                    }
                }
            }
        })
        .await?;
        // Whatever the seek said, the reader knows whether the partition is
        // assigned: a failed first seek is retried as a seek, not as a
        // second assign.
        match change {
            Change::None => {}
            Change::Assigned(queue) => {
                self.queue = Some(queue);
                self.assigned_once = true;
            }
            Change::Unassigned => {
                self.queue = None;
                self.assigned_once = false;
            }
        }
        sought
    }

    /// The (first offset, last stable offset) of the partition.
    pub(crate) async fn watermarks(&self) -> Result<(i64, i64)> {
        let context = format!("reading the offsets of {}/{}", self.topic, self.partition);
        let mut asked = false;
        loop {
            let c = Arc::clone(&self.consumer);
            let (topic, partition, timeout) = (self.topic.clone(), self.partition, self.timeout);
            let first = !self.asked_metadata.swap(true, Ordering::Relaxed);
            // Before its first receive nothing polls the consumer: it gets
            // its OAUTHBEARER token here.
            let fetched = run_blocking(move || {
                oauth::ensure_token(c.client())
                    .map(|()| fetch_watermarks_first(&*c, &topic, partition, timeout, first))
            })
            .await??;
            match fetched {
                Ok(w) => return Ok(w),
                // librdkafka says "unknown partition" of a partition beyond
                // the topic's count, of a topic the principal may not see,
                // and of a topic its metadata has not caught up with yet
                // (just created): ask the metadata which it is, once.
                Err(e)
                    if !asked
                        && e.rdkafka_error_code() == Some(RDKafkaErrorCode::UnknownPartition) =>
                {
                    asked = true;
                    match self.partition_metadata().await {
                        Some(Shown::Denied) => return Err(self.denied(&context)),
                        Some(Shown::Missing) => {
                            return Err(super::super::topic::missing_state_topic(&self.topic, None))
                        }
                        Some(Shown::Present) => continue,
                        _ => return Err(self.read_error(context, e)),
                    }
                }
                Err(e) => return Err(self.read_error(context, e)),
            }
        }
    }

    /// What a fresh metadata request says of this reader's partition; `None`
    /// when the request failed.
    async fn partition_metadata(&self) -> Option<Shown> {
        let c = Arc::clone(&self.consumer);
        let (topic, partition, timeout) = (self.topic.clone(), self.partition, self.timeout);
        run_blocking(move || {
            let md = c.fetch_metadata(Some(&topic), timeout).ok()?;
            let t = md.topics().first()?;
            Some(match t.error().map(RDKafkaErrorCode::from) {
                Some(RDKafkaErrorCode::TopicAuthorizationFailed) => Shown::Denied,
                Some(
                    RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic,
                ) => Shown::Missing,
                Some(_) => Shown::Absent,
                None if t.partitions().iter().any(|p| p.id() == partition) => Shown::Present,
                None => Shown::Absent,
            })
        })
        .await
        .ok()
        .flatten()
    }
}
