//! An input reader bound to a leadership: the leader of a role that reads
//! a topic, does its work and writes results through guarded writes reads
//! its input with an [`InputReader`], for users who do not bring their own
//! consumer.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use krabka_coordination::input::{InputOptions, InputPosition, InputReader};
//! # use krabka_coordination::leadership::Leadership;
//! # use krabka_coordination::transport::kafka::KafkaClient;
//! # async fn run(client: KafkaClient, leadership: Arc<Leadership>, committed: Vec<InputPosition>) -> krabka_coordination::Result<()> {
//! // `committed`: the next offset of each input partition, as the last
//! // leader committed it with its outputs.
//! let mut reader = InputReader::new(&client, leadership.clone(), committed, InputOptions::default())?;
//! loop {
//!     let records = reader.next_batch().await?; // fails once the term ended
//!     if records.is_empty() {
//!         continue;
//!     }
//!     // ... work; then write the outputs together with
//!     // `reader.positions()` in one guarded write. If that write fails,
//!     // rewind to the positions last committed (`reader.seek(..)`).
//! }
//! # }
//! ```
//!
//! # Guarantees
//!
//! - **Committed input only**: records of committed transactions and of
//!   producers without transactions (read_committed), in offset order per
//!   partition; never a record of an aborted transaction, never a control
//!   batch, never a record at or past a partition's last stable offset.
//! - **Exact positions**: after [`InputReader::next_batch`] returned
//!   records, [`InputReader::positions`] is, for each partition, the
//!   offset after the last record returned (past aborted records and
//!   markers read with them): exactly the offsets to commit with the
//!   outputs of what was returned. A call that fails moves no position.
//! - **Bound to the term**: once the leadership ended (resigned, lease
//!   expired, fenced, a fatal error), `next_batch` fails with the error a
//!   guarded write gets then ([`crate::Error::Resigned`],
//!   [`crate::Error::LeaseExpired`], [`crate::Error::Fenced`], ...) and
//!   never returns another record; a read in flight when the term ends is
//!   cut short and its records are dropped.
//! - **Bounded**: each call long-polls up to [`InputOptions::max_wait`]
//!   and returns within [`InputOptions::timeout`], or fails with
//!   [`crate::Error::Transient`].
//! - **No surprise skips**: a position outside its partition's log fails
//!   by default, naming the partition and the log's range
//!   ([`InputOutOfRange`]); a reset policy must be chosen to move on.
//!
//! # Non-guarantees
//!
//! - The reader **joins no consumer group**: no group membership, no
//!   rebalances, no heartbeats. It reads the partitions it is given, from
//!   the positions it is given; which partitions a leader reads, and where
//!   it starts (the offsets the last leader committed in its guarded
//!   transaction), is the caller's. It commits nothing itself.
//! - Reading is not fenced: a deposed leader may still read until its
//!   term's end is known here (reads change nothing); what fences it is
//!   the guarded write that commits outputs and offsets. A resign under
//!   way ends the term when it finishes: guarded writes are refused from
//!   the resign's call, reads from its end.
//! - A long poll holds one of the client's connections to each partition
//!   leader for up to [`InputOptions::max_wait`]; the client's other
//!   connections to that broker carry the term's renewals and guarded
//!   writes meanwhile. A read cut short by the term's end closes its
//!   connection (the broker still owes its answer), so the transport's
//!   client ([`crate::client::Client::kafka_client`]) can be shared.
//!
//! # States
//!
//! | From      | Event                                              | To        | `next_batch` returns            |
//! |-----------|----------------------------------------------------|-----------|---------------------------------|
//! | `Reading` | records read, the term still held after the read   | `Reading` | the records; positions advance  |
//! | `Reading` | a read error (out of range, a topic missing, time)  | `Reading` | the error; nothing moves        |
//! | `Reading` | the term ended (seen before, during or after a read)| `Ended`   | the term's error; nothing moves |
//! | `Ended`   | any call                                           | `Ended`   | the term's error                |
//!
//! `Ended` is final: a new term needs a new reader (from the positions
//! the new term's leader finds committed).

mod options;
mod positions;
mod reader;
mod resume;

#[cfg(test)]
mod tests;

pub use krabka_kafka::Reset;
pub use options::{InputOptions, InputOutOfRange, OnOutOfRange};
pub use reader::{start_positions, InputReader, ReaderState};

/// One assigned partition and the offset of the next record to read there:
/// what an [`InputReader`] is given to start from, and what
/// [`InputReader::positions`] reports (the offsets a guarded write commits
/// with the outputs of what was returned).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InputPosition {
    /// The topic.
    pub topic: String,
    /// The partition (0 or more).
    pub partition: i32,
    /// The offset of the next record to read (0 or more).
    pub offset: i64,
}

impl InputPosition {
    /// `topic`/`partition` at `offset`.
    pub fn new(topic: impl Into<String>, partition: i32, offset: i64) -> InputPosition {
        InputPosition {
            topic: topic.into(),
            partition,
            offset,
        }
    }
}

/// One committed input record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputRecord {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The record's offset in its partition.
    pub offset: i64,
    /// The key, or `None` for a null key.
    pub key: Option<Vec<u8>>,
    /// The value, or `None` for a null value (a tombstone).
    pub value: Option<Vec<u8>>,
    /// The record's timestamp (epoch milliseconds): the producer's create
    /// time, or the broker's append time for a topic with
    /// `message.timestamp.type=LogAppendTime`; -1 when the producer gave
    /// none.
    pub timestamp: i64,
    /// The record's headers, in their order: each key and its value
    /// (`None` for a null value).
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}
