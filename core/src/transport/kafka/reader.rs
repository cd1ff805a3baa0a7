//! Reading `__coordination_state` with read_committed: rule 3.
//!
//! One long-lived consumer per transport ([`StateConsumer`]), assigned the
//! partitions it reads by hand, one at a time as they are first read
//! (incremental assign; no group membership, no offset commits; librdkafka
//! needs a `group.id` for `assign`, `krabka-coordination-reader` unless set),
//! with `isolation.level = read_committed` and `enable.partition.eof = true`.
//! Each partition's records come on a queue of its own (librdkafka's
//! partition queues), which that partition's [`PartitionReader`] reads and
//! positions; the consumer fetches every assigned partition of a broker
//! with one request, so a process's threads and connections do not grow
//! with the partitions it follows.
//! librdkafka then delivers only committed records, skips aborted ones and
//! transaction markers, and reports the end of the partition at the last
//! stable offset (LSO).
//!
//! * `read_partition` takes the LSO (`fetch_watermarks` under read_committed
//!   answers it as "high"), assigns the consumer at the first offset and
//!   reads until it reaches the LSO: a record at LSO - 1 or the end-of-
//!   partition event. An open transaction holds the LSO back, so the read
//!   ends promptly below it instead of waiting for the transaction.
//! * `read_state` (a new follower's first read) reads only what was written
//!   since the partition was last read to its end, and answers from what the
//!   reader kept of it ([`super::seen`]): the latest record of each key.
//!   Followers of many roles in one partition read it once, not once each.
//! * `poll_partition` keeps the consumer where the last call ended. A call
//!   whose `from` lies within the last records kept answers from them; one
//!   whose `from` continues there reads on without a seek, so a standby's
//!   steady-state cost grows with new records only; any other `from` re-
//!   assigns the consumer there. It waits up to `max_wait` for a first
//!   record, then takes what is already fetched and returns; an end-of-
//!   partition event that moved the position past transaction markers or
//!   aborted records ends the wait too. The `next_offset` it returns is the
//!   consumer's position (past the markers it met), so a reader that has
//!   read everything decided stands at the last stable offset, and with
//!   nothing open at the high watermark (what `held_back` compares).
//!
//! The consumer keeps a fetch request waiting at the broker
//! (`fetch.wait.max.ms`, [`KafkaConfig::with_fetch_wait`]), and the broker
//! answers it as soon as a commit moves the LSO: that is how a standby learns
//! of a commit promptly.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::stream_consumer::StreamPartitionQueue;
use rdkafka::consumer::{Consumer, ConsumerContext, StreamConsumer};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::Offset;

use super::config::KafkaConfig;
use super::seen::Seen;
use super::{drop_off_thread, kafka_error, oauth, TransportContext};
use crate::error::{Error, Result};
use crate::transport::ReadBatch;
use crate::transport::Record;

mod assign;
mod consumer;

pub(crate) use consumer::StateConsumer;

/// The consumer group the state readers name when the user's settings name
/// none (`group.id`).
pub const READER_GROUP: &str = "krabka-coordination-reader";

/// The consumer group of the state readers: the user's `group.id`, or
/// [`READER_GROUP`]. They never join it nor commit to it, but librdkafka's
/// consumers look up its coordinator, so a member needs an ACL on it.
pub(super) fn reader_group(config: &KafkaConfig) -> &str {
    config.get("group.id").unwrap_or(READER_GROUP)
}

/// `fetch_watermarks` of `topic`/`partition`, after a metadata request of
/// `topic` when `first` (the consumer's first request).
///
/// librdkafka's offsets request first looks the partition's leader up in
/// its metadata cache, asking for metadata at growing intervals (100, 200,
/// 300 ms, ...: `rd_kafka_topic_partition_list_query_leaders`) until the
/// leader is there. On a new client whose connection was not up at the
/// first ask, the leader then comes only at a later ask, hundreds of
/// milliseconds on (often so when many readers start at once,
/// `docs/benchmarks/cli.md`). A metadata request waits for the connection
/// and fills the cache, so the offsets request finds the leader at once. A
/// failed metadata request is the call's error: it is what the offsets
/// request would have met.
pub(super) fn fetch_watermarks_first<C, X>(
    consumer: &C,
    topic: &str,
    partition: i32,
    timeout: Duration,
    first: bool,
) -> KafkaResult<(i64, i64)>
where
    C: Consumer<X>,
    X: ConsumerContext,
{
    if first {
        consumer.fetch_metadata(Some(topic), timeout)?;
    }
    consumer.fetch_watermarks(topic, partition, timeout)
}

/// The most records one poll returns.
const POLL_MAX_RECORDS: usize = 10_000;

/// How many turns of the scheduler a look at the queue without waiting
/// takes before the queue counts as empty (see `PartitionReader::try_recv`).
const TRY_RECV_TURNS: usize = 4;

/// One partition of the transport's [`StateConsumer`] and where it stands.
///
/// Dropping it may drop the consumer, which blocks (librdkafka joins its
/// threads): the transport hands a reader it lets go of to
/// `drop_off_thread`.
pub(crate) struct PartitionReader {
    consumer: Arc<StreamConsumer<TransportContext>>,
    /// This partition's records and events, once it is assigned.
    queue: Option<StreamPartitionQueue<TransportContext>>,
    topic: String,
    partition: i32,
    /// The offset the consumer continues from, when it is positioned.
    next: Option<i64>,
    /// The offset of the last assign (for error messages).
    assigned: i64,
    /// True once an assign succeeded: later positions are seeks.
    assigned_once: bool,
    /// Counts assigns, shared with the transport.
    seeks: Arc<AtomicU64>,
    timeout: Duration,
    /// Whether the consumer has asked for the topic's metadata (see
    /// [`fetch_watermarks_first`]).
    asked_metadata: AtomicBool,
    /// What was read, for every follower of the partition (`None` until
    /// the first whole read).
    seen: Option<Seen>,
}

fn message_record<M: Message>(m: &M) -> Record {
    Record {
        offset: m.offset(),
        key: m.key().map(<[u8]>::to_vec).unwrap_or_default(),
        value: m.payload().map(<[u8]>::to_vec),
    }
}

/// What one receive brought.
enum Got {
    Record(Record),
    /// The consumer reached the last stable offset.
    Eof,
}

impl PartitionReader {
    /// A reader of `partition` of the state topic on the transport's
    /// consumer.
    pub(crate) fn new(
        shared: &StateConsumer,
        config: &KafkaConfig,
        partition: i32,
        seeks: Arc<AtomicU64>,
    ) -> Self {
        PartitionReader {
            consumer: Arc::clone(&shared.consumer),
            queue: None,
            topic: config.state_topic().to_owned(),
            partition,
            next: None,
            assigned: -1,
            assigned_once: false,
            seeks,
            timeout: config.operation_timeout(),
            asked_metadata: AtomicBool::new(false),
            seen: None,
        }
    }

    /// The error of a topic the principal may not describe.
    fn denied(&self, context: &str) -> Error {
        Error::fatal(
            context.to_owned(),
            format!(
                "not authorized to read the state topic {}: reading a role's state needs READ and \
                 DESCRIBE on Topic {} (and DESCRIBE on the readers' consumer group)",
                crate::error::quote(&self.topic),
                crate::error::quote(&self.topic)
            ),
        )
    }

    fn read_error(&self, context: String, e: KafkaError) -> Error {
        match e.rdkafka_error_code() {
            Some(RDKafkaErrorCode::UnknownPartition) => Error::InvalidArgument(format!(
                "{context}: topic {} has no partition {}",
                self.topic, self.partition
            )),
            Some(RDKafkaErrorCode::AutoOffsetReset | RDKafkaErrorCode::OffsetOutOfRange) => {
                Error::InvalidArgument(format!(
                    "{context}: offset {} is outside partition {}/{}",
                    self.assigned, self.topic, self.partition
                ))
            }
            _ => kafka_error(&context, e),
        }
    }

    /// The next message or end event if librdkafka has one queued,
    /// without waiting. Not a zero-length `tokio::time::timeout`: tokio
    /// rounds a timer's deadline up to its next millisecond tick, so each
    /// such look waited about a millisecond when the queue was empty, as it
    /// is at the end of every poll (twice on a hand-over's path: the
    /// standby's poll that reads the tombstone, and its catch-up before the
    /// challenge).
    ///
    /// A look that consumed an event other than a message answers pending
    /// and wakes itself (rdkafka's stream): the queue is looked at again
    /// after a turn of the scheduler, a few times, before it counts as
    /// empty.
    async fn try_recv(&mut self) -> Option<Result<Got>> {
        let recv = self.recv();
        tokio::pin!(recv);
        for _ in 0..TRY_RECV_TURNS {
            tokio::select! {
                biased;
                r = &mut recv => return Some(r),
                () = tokio::task::yield_now() => {}
            }
        }
        None
    }

    /// The next record or end-of-partition event; errors that librdkafka
    /// retries by itself (a broker connection lost) are logged and skipped.
    async fn recv(&mut self) -> Result<Got> {
        let Some(queue) = self.queue.as_ref() else {
            return Err(Error::fatal(
                format!("reading {}/{}", self.topic, self.partition),
                "the partition is not assigned",
            ));
        };
        loop {
            match queue.recv().await {
                Ok(m) => {
                    if m.partition() != self.partition || m.topic() != self.topic {
                        continue;
                    }
                    return Ok(Got::Record(message_record(&m)));
                }
                Err(KafkaError::PartitionEOF(p)) if p == self.partition => return Ok(Got::Eof),
                Err(KafkaError::PartitionEOF(_)) => continue,
                Err(e) => {
                    let code = e.rdkafka_error_code();
                    let fatal = matches!(e, KafkaError::MessageConsumptionFatal(_))
                        || matches!(
                            code,
                            Some(
                                RDKafkaErrorCode::AutoOffsetReset
                                    | RDKafkaErrorCode::OffsetOutOfRange
                                    | RDKafkaErrorCode::UnknownPartition
                                    | RDKafkaErrorCode::UnknownTopicOrPartition
                                    | RDKafkaErrorCode::UnknownTopic
                                    | RDKafkaErrorCode::TopicAuthorizationFailed
                            )
                        )
                        // Never retried: an authorization failure of any resource.
                        || code.is_some_and(|c| super::librdkafka::denied(c).is_some());
                    if fatal {
                        let err = self
                            .read_error(format!("reading {}/{}", self.topic, self.partition), e);
                        self.next = None;
                        return Err(err);
                    }
                    tracing::debug!(topic = %self.topic, partition = self.partition, error = %e, "state consumer error (retried by librdkafka)");
                }
            }
        }
    }

    /// The consumer's position: the offset after the last record it handed
    /// out or skipped (transaction markers, aborted records). Read after an
    /// end-of-partition event, it is the last stable offset of that fetch.
    fn position(&self) -> Option<i64> {
        let tpl = self.consumer.position().ok()?;
        match tpl.find_partition(&self.topic, self.partition)?.offset() {
            Offset::Offset(o) if o >= 0 => Some(o),
            _ => None,
        }
    }

    /// Every committed record from the first offset to the last stable
    /// offset. What it read is kept for [`PartitionReader::read_state`] and
    /// [`PartitionReader::poll`].
    pub(crate) async fn read_all(&mut self) -> Result<Vec<Record>> {
        let (low, high) = self.watermarks().await?;
        let (records, next) = self.read_range(low, high).await?;
        self.seen = Some(Seen::new(&records, next));
        Ok(records)
    }

    /// The partition compacted to the latest record of each key (a
    /// tombstone with the value it cleared), to the last stable offset, and
    /// the offset to read on from ([`Seen`]): what a new follower of a role
    /// starts from. Only what was written since the last such read (or
    /// [`PartitionReader::poll`] that continued it) is fetched.
    pub(crate) async fn read_state(&mut self) -> Result<ReadBatch> {
        let (low, high) = self.watermarks().await?;
        match self.seen.as_ref().map(Seen::next) {
            // A log truncated below what was read, or whose start moved past
            // it (records deleted), is read again from its start.
            Some(from) if from >= low && from <= high => {
                let (records, next) = self.read_range(from, high).await?;
                if let Some(seen) = self.seen.as_mut() {
                    seen.extend(from, &records, next);
                }
            }
            _ => {
                self.seen = None;
                let (records, next) = self.read_range(low, high).await?;
                self.seen = Some(Seen::new(&records, next));
            }
        }
        Ok(self.seen.as_ref().expect("set above").view())
    }

    /// Every committed record from `from` to `high` (the last stable offset
    /// read just before), and the offset after them (past transaction
    /// markers). Continues without a seek when the consumer stands at `from`.
    async fn read_range(&mut self, from: i64, high: i64) -> Result<(Vec<Record>, i64)> {
        if high <= from {
            return Ok((Vec::new(), from));
        }
        if self.next.take() != Some(from) {
            self.assign(from).await?;
        }
        let deadline = super::deadline_in(self.timeout);
        let mut records = Vec::new();
        let mut next = from;
        loop {
            let got = match tokio::time::timeout_at(deadline, self.recv()).await {
                Ok(r) => r?,
                Err(_) => {
                    return Err(Error::transient(
                        format!(
                            "reading {}/{} to its last stable offset {high}",
                            self.topic, self.partition
                        ),
                        format!(
                            "not done after {} (at offset {next})",
                            crate::human::duration(self.timeout)
                        ),
                    ));
                }
            };
            match got {
                Got::Record(r) if r.offset < from => continue,
                Got::Record(r) => {
                    next = r.offset + 1;
                    records.push(r);
                    if next >= high {
                        break;
                    }
                }
                // The end of the partition where the consumer stands. An
                // end event of an earlier read may still wait in the queue
                // when this read continues without a seek: it leaves the
                // position below `high`, and the read goes on.
                Got::Eof => match self.position() {
                    Some(p) => {
                        next = next.max(p);
                        if next >= high {
                            break;
                        }
                    }
                    None => {
                        next = next.max(high);
                        break;
                    }
                },
            }
        }
        self.next = Some(next);
        Ok((records, next))
    }

    /// The compacted partition as far as it was read ([`Seen::view`]),
    /// without reading; `None` before the first whole read.
    pub(crate) fn kept_state(&self) -> Option<ReadBatch> {
        self.seen.as_ref().map(Seen::view)
    }

    /// How many keys the kept view holds (0 before the first whole read).
    pub(crate) fn kept_keys(&self) -> usize {
        self.seen.as_ref().map_or(0, Seen::keys)
    }

    /// Takes into what is kept the records librdkafka fetched since the
    /// last read, without waiting. While a partition stays assigned,
    /// librdkafka goes on fetching it; a leader's follower, still where its
    /// term began, finds the view current then
    /// ([`PartitionReader::kept_state`]). When a follower's read moved the
    /// consumer away from where the kept stretch ends, the consumer is
    /// sought back there, and the next call takes in what it fetched.
    pub(crate) async fn keep_up(&mut self) {
        let Some(end) = self.seen.as_ref().map(Seen::next) else {
            return;
        };
        if let Err(e) = self.poll(end, Duration::ZERO).await {
            tracing::debug!(error = %e, partition = self.partition, "keeping the state partition's view current failed");
        }
    }

    /// New committed records from `from`, waiting up to `max_wait` for the first.
    pub(crate) async fn poll(&mut self, from: i64, max_wait: Duration) -> Result<ReadBatch> {
        if from < 0 {
            return Err(Error::InvalidArgument(format!(
                "poll offset must not be negative, got {from}"
            )));
        }
        // A follower behind what was read reads on from what was kept.
        if let Some(batch) = self.seen.as_ref().and_then(|s| s.since(from)) {
            return Ok(batch);
        }
        // Where the consumer stands is unknown until this call ends (it may
        // be cancelled half way): the next call then seeks.
        let continuing = self.next.take() == Some(from);
        if !continuing {
            self.assign(from).await?;
        }
        let mut records = Vec::new();
        let mut next = from;
        let deadline = super::deadline_in(max_wait);
        // Wait for the first record; an end-of-partition event says that no
        // record is there yet, and ends the wait only when the position
        // moved past transaction markers and aborted records (the caller
        // then knows more of the partition than before).
        loop {
            let got = if max_wait.is_zero() {
                self.try_recv().await
            } else {
                tokio::time::timeout_at(deadline, self.recv()).await.ok()
            };
            let Some(got) = got else { break };
            match got? {
                Got::Record(r) if r.offset < from => continue,
                Got::Record(r) => {
                    next = r.offset + 1;
                    records.push(r);
                    break;
                }
                Got::Eof => {
                    next = next.max(self.position().unwrap_or(next));
                    if next > from {
                        break;
                    }
                }
            }
        }
        if !records.is_empty() {
            // Take what is already fetched, without waiting. An end event
            // does not end it: while the partition stays assigned,
            // librdkafka goes on fetching, and a queue filled meanwhile
            // holds an end event after every fetch that reached the end
            // then (a follower behind by a held term's renewals met one
            // every two or three records, and needed hundreds of polls).
            // Bounded, so a partition written faster than it is read
            // still ends the poll.
            while records.len() < POLL_MAX_RECORDS {
                let Some(r) = self.try_recv().await else {
                    break;
                };
                if let Got::Record(r) = r? {
                    next = r.offset + 1;
                    records.push(r);
                }
            }
            // Past the transaction markers that came with the records
            // (librdkafka hands them to no one but moves the position past
            // them when it meets them): a reader that read a committed
            // transaction to its end stands after its marker, not on it.
            next = next.max(self.position().unwrap_or(next));
        }
        self.next = Some(next);
        if let Some(seen) = self.seen.as_mut() {
            // Kept when it continues what was read.
            seen.extend(from, &records, next);
        }
        Ok(ReadBatch {
            records,
            next_offset: next,
        })
    }
}
