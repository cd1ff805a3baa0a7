//! A read_committed reader's requests: a Fetch (v4 to v12, isolation level
//! read_committed) of assigned partitions from given offsets, at each
//! partition's leader, and the offsets a reset policy starts from
//! (ListOffsets earliest, or latest read_committed: the last stable
//! offset).
//!
//! [`Client::read_committed`] promises:
//!
//! - **only what is committed**: the records of committed transactions and
//!   of producers without transactions, in offset order per partition;
//!   never a record of an aborted transaction, never a control batch (the
//!   `committed` module's rule, Kafka's consumer's);
//! - **never past the last stable offset**: the leader answers nothing at
//!   or past the first offset of a transaction still open;
//! - **where to go on**: each partition's next offset is past every record
//!   returned and past the aborted records and markers read, so the next
//!   call never sees them again;
//! - **a long poll, bounded**: a leader with nothing new waits up to
//!   `max_wait` for records (cut to each attempt's time), so the call
//!   returns once every partition's leader answered, or fails at the
//!   caller's deadline;
//! - **errors by the codes table**: a moved leader (NOT_LEADER_OR_FOLLOWER,
//!   FENCED_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION while metadata is
//!   behind...) is looked up again and the partition read again; an offset
//!   outside a partition's log is [`ReadError::OutOfRange`], for the
//!   caller's reset policy; a topic that does not exist or that the
//!   principal may not read is an error naming it.

use std::collections::HashMap;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse};
use tokio::time::Instant;

use super::committed::committed_records;
use super::*;
use crate::records::{read_batches, BatchRecord, Batches};

/// read_committed, as Fetch and ListOffsets spell it.
const READ_COMMITTED: i8 = 1;

/// One assigned partition and the offset of the next record to read there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadFrom {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset of the next record to read (0 or more).
    pub offset: i64,
}

/// What one read_committed Fetch gave of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRead {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The committed and non-transactional records from the offset asked,
    /// in offset order (offsets may skip: aborted records, markers,
    /// compaction).
    pub records: Vec<BatchRecord>,
    /// The offset to read next: past the records returned and past the
    /// aborted records and markers read; the offset asked when nothing was
    /// read.
    pub next_offset: i64,
    /// The partition's last stable offset when its leader answered: no
    /// read returns a record at or past it until the transaction holding
    /// it ends.
    pub last_stable: i64,
    /// The partition's high watermark when its leader answered.
    pub high_watermark: i64,
}

/// A partition whose offset asked is outside its log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfRange {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset asked.
    pub offset: i64,
}

/// Why [`Client::read_committed`] returned no records.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The offsets asked of these partitions are outside their logs
    /// (OFFSET_OUT_OF_RANGE: records deleted by retention, a topic
    /// recreated): the caller chooses where to start again (a reset
    /// policy: [`Client::reset_offset`]) and reads again.
    #[error("offsets out of range: {}", describe(.0))]
    OutOfRange(Vec<OutOfRange>),
    /// Anything else, as the client's [`Error`] says it (a topic that does
    /// not exist, not authorized, the deadline).
    #[error(transparent)]
    Client(#[from] Error),
}

fn describe(parts: &[OutOfRange]) -> String {
    let each: Vec<String> = parts
        .iter()
        .map(|p| {
            format!(
                "{}/{} at offset {}",
                crate::error::quote(&p.topic),
                p.partition,
                p.offset
            )
        })
        .collect();
    each.join(", ")
}

/// Where a reset policy starts reading a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reset {
    /// The log start offset: the oldest record kept.
    Earliest,
    /// The last stable offset: the first record not yet decided (what a
    /// read_committed consumer calls the end).
    Latest,
}

/// One partition's outcome in one round.
enum Part {
    Read(PartitionRead),
    OutOfRange,
    /// Read again (the reason).
    Again(String),
    Fail(Error),
}

impl Client {
    /// One read_committed Fetch of each of `from` at its leader (the
    /// leaders asked at once), each leader waiting up to `max_wait` for
    /// records when it has none, answering at most about `max_bytes` per
    /// leader (a whole first batch at least). Returns one
    /// [`PartitionRead`] per partition of `from`, in its order (see the
    /// module docs for what they hold).
    ///
    /// Partitions whose leader moved or did not answer are read again
    /// (without waiting at the broker) until `deadline`; then
    /// [`Error::Transient`] naming them. An empty `from`, a partition
    /// named twice, a negative partition or offset are
    /// [`Error::InvalidArgument`] before any request; offsets outside their
    /// logs are [`ReadError::OutOfRange`]; a topic that does not exist, or
    /// one the principal may not READ, is an error naming it.
    pub async fn read_committed(
        &self,
        from: &[ReadFrom],
        max_wait: Duration,
        max_bytes: i32,
        deadline: Instant,
    ) -> Result<Vec<PartitionRead>, ReadError> {
        check_reads(from)?;
        self.check_resolves().await?;
        let started = Instant::now();
        let mut done: Vec<Option<PartitionRead>> = vec![None; from.len()];
        let mut out_of_range = Vec::new();
        let mut wait = max_wait;
        let mut pause = Backoff::LOOKUP.first;
        loop {
            let pending: Vec<usize> = (0..from.len()).filter(|&i| done[i].is_none()).collect();
            let mut again = Vec::new();
            for (i, part) in self.round(from, &pending, wait, max_bytes, deadline).await {
                match part {
                    Part::Read(r) => done[i] = Some(r),
                    Part::OutOfRange => out_of_range.push(from[i].clone()),
                    Part::Again(why) => again.push(why),
                    Part::Fail(e) => return Err(e.into()),
                }
            }
            if !out_of_range.is_empty() {
                let parts = out_of_range.into_iter().map(|r| OutOfRange {
                    topic: r.topic,
                    partition: r.partition,
                    offset: r.offset,
                });
                return Err(ReadError::OutOfRange(parts.collect()));
            }
            if again.is_empty() {
                return Ok(done.into_iter().flatten().collect());
            }
            // What was read stays read; the rest is read again at once.
            wait = Duration::ZERO;
            let left = deadline.saturating_duration_since(Instant::now());
            if left < retry::LAST_TRY {
                let context = format!("reading {} (read_committed)", describe_from(from));
                return Err(self
                    .gave_up(context, started.elapsed(), again.join("; "))
                    .into());
            }
            tokio::time::sleep(pause.min(left / 2)).await;
            pause = (pause * 2).min(Backoff::LOOKUP.max);
        }
    }

    /// One round: the partitions `pending` of `from`, one Fetch per leader,
    /// the leaders asked at once.
    async fn round(
        &self,
        from: &[ReadFrom],
        pending: &[usize],
        wait: Duration,
        max_bytes: i32,
        deadline: Instant,
    ) -> Vec<(usize, Part)> {
        let mut out = Vec::new();
        let mut by_leader: HashMap<String, Vec<usize>> = HashMap::new();
        for &i in pending {
            let r = &from[i];
            match self.partition_leader(&r.topic, r.partition, deadline).await {
                Ok(addr) => by_leader.entry(addr).or_default().push(i),
                Err(Attempt::Fail(e)) => out.push((i, Part::Fail(e))),
                Err(other) => out.push((i, Part::Again(reason(&other)))),
            }
        }
        let mut set = tokio::task::JoinSet::new();
        for (addr, parts) in by_leader {
            let client = self.clone();
            let asked: Vec<ReadFrom> = parts.iter().map(|&i| from[i].clone()).collect();
            set.spawn(async move {
                let got = client
                    .fetch_at(addr, &asked, wait, max_bytes, deadline)
                    .await;
                (parts, got)
            });
        }
        while let Some(joined) = set.join_next().await {
            let Ok((parts, got)) = joined else {
                continue;
            };
            out.extend(parts.into_iter().zip(got));
        }
        out
    }

    /// One Fetch of `asked` at `addr`; one outcome per partition of
    /// `asked`, in its order. A leader that cannot be reached, or says a
    /// partition moved, is forgotten for the partitions concerned.
    async fn fetch_at(
        &self,
        addr: String,
        asked: &[ReadFrom],
        wait: Duration,
        max_bytes: i32,
        deadline: Instant,
    ) -> Vec<Part> {
        let first = &asked[0];
        let answer = self
            .at(
                Target::Leader(&first.topic, first.partition),
                deadline,
                |at| async move {
                    let version = at.version(ApiKey::Fetch, (4, 12), "Kafka 0.11 or newer")?;
                    let wait_ms = i32::try_from(wait.as_millis())
                        .unwrap_or(i32::MAX)
                        .min(at.broker_wait_ms());
                    let req = committed_fetch(asked, wait_ms, max_bytes);
                    let resp: FetchResponse =
                        self.exchange(&at, ApiKey::Fetch, version, &req).await?;
                    if resp.error_code != codes::NONE {
                        let what = format!("Fetch (read_committed) at {}", at.addr);
                        return Err(attempt_for(ApiKey::Fetch, resp.error_code, what));
                    }
                    Ok((resp, at.addr))
                },
            )
            .await;
        match answer {
            Ok((resp, at)) => asked.iter().map(|r| self.part_of(&resp, r, &at)).collect(),
            Err(Attempt::Fail(e)) => asked.iter().map(|_| Part::Fail(clone_error(&e))).collect(),
            Err(other) => {
                for r in asked {
                    self.forget_leader(&r.topic, r.partition);
                }
                let why = format!("{} (the leader asked: {addr})", reason(&other));
                asked.iter().map(|_| Part::Again(why.clone())).collect()
            }
        }
    }

    /// The outcome of partition `r` in the leader's answer `resp`.
    fn part_of(&self, resp: &FetchResponse, r: &ReadFrom, addr: &str) -> Part {
        let what = || {
            format!(
                "reading {}/{} from offset {} (read_committed) at {addr}",
                crate::error::quote(&r.topic),
                r.partition,
                r.offset
            )
        };
        let Some(p) = resp
            .responses
            .iter()
            .filter(|t| t.topic.0.as_str() == r.topic)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == r.partition)
        else {
            return Part::Again(format!("{} answered no partition", what()));
        };
        match codes::meaning(ApiKey::Fetch, p.error_code) {
            Meaning::Ok => {}
            Meaning::OutOfRange => return Part::OutOfRange,
            Meaning::LeaderMoved => {
                self.forget_leader(&r.topic, r.partition);
                return Part::Again(format!("{}: {}", what(), code_name(p.error_code)));
            }
            _ => {
                let acl = "an ACL allowing READ on it is needed";
                return match read_answer(ApiKey::Fetch, p.error_code, what(), acl) {
                    Err(Attempt::Fail(e)) => Part::Fail(e),
                    Err(other) => Part::Again(reason(&other)),
                    Ok(()) => Part::Again(what()),
                };
            }
        }
        match partition_read(p, r) {
            Ok(read) => Part::Read(read),
            Err(e) => Part::Fail(Error::fatal(what(), e.to_string())),
        }
    }

    /// Where `reset` starts reading `topic`/`partition`: its log start
    /// offset ([`Reset::Earliest`]) or its last stable offset
    /// ([`Reset::Latest`]), from one ListOffsets at its leader. Retries a
    /// moved leader and a broken connection until `deadline`; then
    /// [`Error::Transient`]. A topic the principal may not describe is
    /// [`Error::Fatal`].
    pub async fn reset_offset(
        &self,
        topic: &str,
        partition: i32,
        reset: Reset,
        deadline: Instant,
    ) -> Result<i64> {
        match reset {
            Reset::Earliest => self.start_offset(topic, partition, deadline).await,
            Reset::Latest => self.end_offset(topic, partition, true, deadline).await,
        }
    }
}

/// The records and offsets of one partition's answer.
fn partition_read(
    p: &PartitionData,
    r: &ReadFrom,
) -> Result<PartitionRead, crate::records::RecordsError> {
    let batches = match &p.records {
        Some(bytes) => read_batches(bytes)?,
        None => Batches::default(),
    };
    let aborted: Vec<(i64, i64)> = p
        .aborted_transactions
        .iter()
        .flatten()
        .map(|t| (t.producer_id.0, t.first_offset))
        .collect();
    let (records, next_offset) = committed_records(batches, &aborted, r.offset);
    Ok(PartitionRead {
        topic: r.topic.clone(),
        partition: r.partition,
        records,
        next_offset,
        last_stable: p.last_stable_offset,
        high_watermark: p.high_watermark,
    })
}

/// A read_committed Fetch of `asked`, waiting `wait_ms` for a byte.
fn committed_fetch(asked: &[ReadFrom], wait_ms: i32, max_bytes: i32) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for r in asked {
        let mut part = FetchPartition::default();
        part.partition = r.partition;
        part.fetch_offset = r.offset;
        part.partition_max_bytes = max_bytes.max(1);
        part.current_leader_epoch = -1;
        part.last_fetched_epoch = -1;
        part.log_start_offset = -1;
        match topics.iter_mut().find(|t| t.topic.0.as_str() == r.topic) {
            Some(t) => t.partitions.push(part),
            None => {
                let mut t = FetchTopic::default();
                t.topic = TopicName(StrBytes::from_string(r.topic.clone()));
                t.partitions = vec![part];
                topics.push(t);
            }
        }
    }
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(-1);
    req.max_wait_ms = wait_ms.max(0);
    req.min_bytes = 1;
    req.max_bytes = max_bytes.max(1);
    req.isolation_level = READ_COMMITTED;
    req.session_id = 0;
    req.session_epoch = -1;
    req.topics = topics;
    req
}

/// Refuses what no Fetch can ask (see [`Client::read_committed`]).
fn check_reads(from: &[ReadFrom]) -> Result<()> {
    if from.is_empty() {
        return Err(Error::InvalidArgument(
            "a read names no partition: assign at least one".into(),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for r in from {
        let name = format!("{}/{}", crate::error::quote(&r.topic), r.partition);
        if r.topic.is_empty() || r.partition < 0 || r.offset < 0 {
            return Err(Error::InvalidArgument(format!(
                "cannot read {name} from offset {}: the topic must be named, the partition and \
                 the offset 0 or more",
                r.offset
            )));
        }
        if !seen.insert((&r.topic, r.partition)) {
            return Err(Error::InvalidArgument(format!(
                "{name} is named twice in one read"
            )));
        }
    }
    Ok(())
}

fn describe_from(from: &[ReadFrom]) -> String {
    let each: Vec<String> = from
        .iter()
        .map(|r| format!("{}/{}", crate::error::quote(&r.topic), r.partition))
        .collect();
    each.join(", ")
}

/// What an attempt that failed says.
fn reason(a: &Attempt) -> String {
    match a {
        Attempt::Moved(why) | Attempt::NoAnswer(why) | Attempt::Again(why) | Attempt::Busy(why) => {
            why.clone()
        }
        Attempt::Fail(e) => e.to_string(),
    }
}

/// The same error again, for each partition of one failed Fetch.
fn clone_error(e: &Error) -> Error {
    match e {
        Error::InvalidArgument(s) => Error::InvalidArgument(s.clone()),
        Error::Fenced(s) => Error::Fenced(s.clone()),
        Error::Transient { context, source } => Error::transient(context, source.to_string()),
        Error::Fatal { context, source } => Error::fatal(context, source.to_string()),
    }
}

#[cfg(test)]
mod tests;
