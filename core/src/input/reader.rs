//! [`InputReader`]: the read loop, its term check and its out-of-range
//! policy (the module docs of `input` state what it promises).

use std::sync::Arc;
use std::time::Duration;

use krabka_kafka::{deadline_in, PartitionRead, ReadError, Reset};
use tokio::time::Instant;

use super::options::{InputOptions, InputOutOfRange, OnOutOfRange};
use super::positions::{name, Positions};
use super::{InputPosition, InputRecord};
use crate::error::{Error, Result};
use crate::leadership::{ended_error, EndReason, Leadership};
use crate::transport::kafka::KafkaClient;

/// Where an [`InputReader`] is (see the table of the module docs).
#[derive(Debug, Clone)]
pub enum ReaderState {
    /// The term is held as far as the reader knows: calls read.
    Reading,
    /// The term ended, for this reason: every call fails. Final.
    Ended(EndReason),
}

/// A read_committed reader of assigned partitions, bound to one term of a
/// leadership: see the module docs for what it guarantees and what not.
///
/// Joins no consumer group: the partitions and the offsets it starts from
/// are the caller's (the offsets the last leader committed with its
/// outputs). One call at a time (`&mut self`); needs a tokio runtime.
pub struct InputReader {
    client: KafkaClient,
    leadership: Arc<Leadership>,
    positions: Positions,
    options: InputOptions,
    state: ReaderState,
}

impl std::fmt::Debug for InputReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InputReader")
            .field("role", &self.leadership.role())
            .field("token", &self.leadership.token())
            .field("positions", &self.positions.all())
            .field("state", &self.state)
            .finish()
    }
}

impl InputReader {
    /// A reader of `assigned` (each partition with the offset of the next
    /// record to read) through `client`, for the term of `leadership`.
    ///
    /// [`Error::InvalidArgument`] naming the value for an empty assignment,
    /// a partition named twice, an unnamed topic, a negative partition or
    /// offset, or options [`InputOptions`] refuses; the term's error (as a
    /// guarded write gets it) when the leadership already ended. Sends
    /// nothing: a missing topic is named by the first
    /// [`InputReader::next_batch`].
    pub fn new(
        client: &KafkaClient,
        leadership: Arc<Leadership>,
        assigned: Vec<InputPosition>,
        options: InputOptions,
    ) -> Result<InputReader> {
        options.check()?;
        let positions = Positions::new(assigned)?;
        if let Some(reason) = leadership.err() {
            return Err(ended_error(&reason));
        }
        Ok(InputReader {
            client: client.clone(),
            leadership,
            positions,
            options,
            state: ReaderState::Reading,
        })
    }

    /// The next committed records of the assigned partitions: in offset
    /// order per partition, partitions in the order of the assignment;
    /// empty when no partition had a new committed record within
    /// [`InputOptions::max_wait`]. The positions move past what is
    /// returned (and past aborted records and markers read with it).
    ///
    /// Errors, each leaving every position where it was:
    /// - the term's error once the leadership ended (as a guarded write
    ///   gets it: [`Error::Resigned`], [`Error::LeaseExpired`],
    ///   [`Error::Fenced`], ...), then at every later call;
    /// - [`Error::Fatal`] with an [`InputOutOfRange`] source for a
    ///   position outside its log under [`OnOutOfRange::Fail`];
    /// - [`Error::Fatal`] naming a topic that does not exist or that the
    ///   principal may not read;
    /// - [`Error::Transient`] when the partitions' leaders did not answer
    ///   within [`InputOptions::timeout`].
    pub async fn next_batch(&mut self) -> Result<Vec<InputRecord>> {
        self.check_term()?;
        let deadline = deadline_in(self.options.timeout);
        let done = self.leadership.done();
        let read = tokio::select! {
            biased;
            () = done => None,
            r = self.read(deadline) => Some(r),
        };
        // A term that ended during the read: what was read is dropped.
        self.check_term()?;
        let Some(reads) = read else {
            return Err(self.ended_anyway());
        };
        let reads = reads?;
        self.positions.advance(&reads)?;
        Ok(records_of(reads))
    }

    /// The next offset of each assigned partition, in the order of the
    /// assignment: past every record returned so far. Committed with the
    /// outputs of those records (in the same guarded write), they are
    /// where the next leader resumes.
    pub fn positions(&self) -> &[InputPosition] {
        self.positions.all()
    }

    /// Moves `topic`/`partition` to `offset`: the next call reads from
    /// there. After a guarded write of outputs and positions failed, rewind
    /// every partition to the positions last committed, so the records
    /// whose outputs were not committed are read again.
    ///
    /// [`Error::InvalidArgument`] naming it for a partition not assigned
    /// or a negative offset (nothing moves); the term's error once the
    /// term ended.
    pub fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<()> {
        self.check_term()?;
        self.positions.seek(topic, partition, offset)
    }

    /// Where the reader is: [`ReaderState::Ended`] once a call saw the
    /// term end.
    pub fn state(&self) -> &ReaderState {
        &self.state
    }

    /// The leadership whose term the reader is bound to.
    pub fn leadership(&self) -> &Arc<Leadership> {
        &self.leadership
    }

    /// `Ok` while the term is held; else moves to `Ended` and returns the
    /// term's error.
    fn check_term(&mut self) -> Result<()> {
        if let ReaderState::Reading = self.state {
            if let Some(reason) = self.leadership.err() {
                self.state = ReaderState::Ended(reason);
            }
        }
        match &self.state {
            ReaderState::Reading => Ok(()),
            ReaderState::Ended(reason) => Err(ended_error(reason)),
        }
    }

    /// The error of a read cut short by the term's end that `check_term`
    /// did not see (the leadership reports its end before `done`
    /// resolves, so this is a safety net, never a silent success).
    fn ended_anyway(&mut self) -> Error {
        match self.check_term() {
            Err(e) => e,
            Ok(()) => Error::fatal(
                format!("reading the input of role {}", self.leadership.role()),
                "the term's end was signalled without a reason; nothing was returned",
            ),
        }
    }

    /// One read of every position, by the out-of-range policy, until
    /// `deadline`.
    async fn read(&mut self, deadline: Instant) -> Result<Vec<PartitionRead>> {
        let kafka = self.client.kafka().clone();
        loop {
            let from = self.positions.to_read();
            let o = &self.options;
            let parts = match kafka
                .read_committed(&from, o.max_wait, o.max_bytes, deadline)
                .await
            {
                Ok(reads) => return Ok(reads),
                Err(ReadError::Client(e)) => return Err(e.into()),
                Err(ReadError::OutOfRange(parts)) => parts,
            };
            let OnOutOfRange::Reset(reset) = self.options.on_out_of_range else {
                let p = &parts[0];
                return Err(out_of_range(&kafka, &p.topic, p.partition, p.offset, deadline).await);
            };
            for p in parts {
                let to = kafka
                    .reset_offset(&p.topic, p.partition, reset, deadline)
                    .await?;
                tracing::warn!(
                    partition = %name(&p.topic, p.partition),
                    from = p.offset,
                    to,
                    ?reset,
                    "an input position was outside its log; the reset policy moved it"
                );
                self.positions.reset(&p.topic, p.partition, to);
            }
            if Instant::now() >= deadline {
                return Err(Error::transient(
                    format!("reading the input of role {}", self.leadership.role()),
                    "positions were reset and the call's timeout passed before the read again",
                ));
            }
        }
    }
}

/// The error of `topic`/`partition` at `offset` outside its log, with the
/// log's range when its leader tells it before `deadline`.
async fn out_of_range(
    kafka: &krabka_kafka::Client,
    topic: &str,
    partition: i32,
    offset: i64,
    deadline: Instant,
) -> Error {
    let start = kafka.reset_offset(topic, partition, Reset::Earliest, deadline);
    let end = kafka.reset_offset(topic, partition, Reset::Latest, deadline);
    let (start, end) = tokio::join!(start, end);
    Error::fatal(
        format!("reading {} from offset {offset}", name(topic, partition)),
        InputOutOfRange {
            topic: topic.to_owned(),
            partition,
            offset,
            log_start: start.ok(),
            last_stable: end.ok(),
        },
    )
}

/// The records of `reads`, partition after partition.
fn records_of(reads: Vec<PartitionRead>) -> Vec<InputRecord> {
    let mut out = Vec::with_capacity(reads.iter().map(|r| r.records.len()).sum());
    for r in reads {
        for rec in r.records {
            out.push(InputRecord {
                topic: r.topic.clone(),
                partition: r.partition,
                offset: rec.offset,
                key: rec.key.map(|b| b.to_vec()),
                value: rec.value.map(|b| b.to_vec()),
                timestamp: rec.timestamp,
                headers: rec
                    .headers
                    .into_iter()
                    .map(|(k, v)| (k.to_vec(), v.map(|v| v.to_vec())))
                    .collect(),
            });
        }
    }
    out
}

/// The start of each of `assigned` (topic, partition, and the offset the
/// last leader committed, if any): the committed offset where there is
/// one, else where `otherwise` starts ([`Reset::Earliest`]: the oldest
/// record kept; [`Reset::Latest`]: the last stable offset), asked of the
/// partition's leader. Each ListOffsets is retried until `within`; then
/// [`Error::Transient`]. A topic that does not exist or may not be read is
/// an error naming it.
pub async fn start_positions(
    client: &KafkaClient,
    assigned: &[(String, i32, Option<i64>)],
    otherwise: Reset,
    within: Duration,
) -> Result<Vec<InputPosition>> {
    let deadline = deadline_in(within);
    let mut out = Vec::with_capacity(assigned.len());
    for (topic, partition, committed) in assigned {
        let offset = match committed {
            Some(offset) => *offset,
            None => {
                client
                    .kafka()
                    .reset_offset(topic, *partition, otherwise, deadline)
                    .await?
            }
        };
        out.push(InputPosition::new(topic.clone(), *partition, offset));
    }
    Ok(out)
}
