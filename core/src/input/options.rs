//! What an [`super::InputReader`] is given: its options, and what it says
//! when an offset lies outside a partition's log.

use std::time::Duration;

use krabka_kafka::Reset;

use crate::error::{Error, Result};

/// What [`super::InputReader::next_batch`] does when a position lies
/// outside its partition's log (records deleted by retention, a topic
/// deleted and created again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnOutOfRange {
    /// Fail with [`Error::Fatal`] whose source is an [`InputOutOfRange`]
    /// naming the partition, the offset and the log's range; nothing moves.
    /// The default: skipping input silently breaks exactly-once, so the
    /// caller decides (with [`super::InputReader::seek`]).
    #[default]
    Fail,
    /// Move the partition to where this policy starts ([`Reset::Earliest`]:
    /// the oldest record kept, re-reading what is there; [`Reset::Latest`]:
    /// the last stable offset, skipping what lies before it), log a warning
    /// naming the partition and both offsets, and read on.
    Reset(Reset),
}

/// The options of an [`super::InputReader`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputOptions {
    /// How long a partition's leader with no new committed record waits
    /// for one before answering empty (the long poll). Default 500 ms. The
    /// broker's wait is also cut to nine tenths of the client's request
    /// timeout (`request.timeout.ms`, 5 s by default), so a longer
    /// `max_wait` needs a longer request timeout. A read cut short (the
    /// term ended) leaves its connection busy at the broker until the
    /// broker answers, up to `max_wait`: give the reader a
    /// [`crate::transport::kafka::KafkaClient`] of its own, not the
    /// transport's, so no lease request waits behind it.
    pub max_wait: Duration,
    /// About the most bytes one leader answers per call (a whole first
    /// batch at least). Default 1 MiB.
    pub max_bytes: i32,
    /// The longest one [`super::InputReader::next_batch`] takes, the long
    /// poll included, before it fails with [`Error::Transient`]; it must
    /// exceed `max_wait`. Default 30 s.
    pub timeout: Duration,
    /// What to do with a position outside its partition's log. Default
    /// [`OnOutOfRange::Fail`].
    pub on_out_of_range: OnOutOfRange,
}

impl Default for InputOptions {
    fn default() -> Self {
        InputOptions {
            max_wait: Duration::from_millis(500),
            max_bytes: 1 << 20,
            timeout: Duration::from_secs(30),
            on_out_of_range: OnOutOfRange::Fail,
        }
    }
}

impl InputOptions {
    /// These options with the long poll `max_wait`.
    pub fn with_max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    /// These options with `max_bytes` per leader and call.
    pub fn with_max_bytes(mut self, max_bytes: i32) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// These options with the bound `timeout` of one call.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// These options with the out-of-range policy `policy`.
    pub fn with_on_out_of_range(mut self, policy: OnOutOfRange) -> Self {
        self.on_out_of_range = policy;
        self
    }

    /// [`Error::InvalidArgument`] naming the value for a `max_bytes` under
    /// 1 or a `timeout` not longer than `max_wait`.
    pub(super) fn check(&self) -> Result<()> {
        if self.max_bytes < 1 {
            return Err(Error::InvalidArgument(format!(
                "an input reader's max_bytes is {}: it must be 1 or more",
                self.max_bytes
            )));
        }
        if self.timeout <= self.max_wait {
            return Err(Error::InvalidArgument(format!(
                "an input reader's timeout ({}) must exceed its max_wait ({}): every call waits \
                 up to max_wait for records",
                crate::human::duration(self.timeout),
                crate::human::duration(self.max_wait)
            )));
        }
        Ok(())
    }
}

/// A position outside its partition's log: the source of the
/// [`Error::Fatal`] that [`super::InputReader::next_batch`] returns under
/// [`OnOutOfRange::Fail`] (find it with `std::error::Error::source` and
/// `downcast_ref`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "offset {offset} of {} is outside its log{}; seek to a committed offset, or choose a reset \
     policy (OnOutOfRange::Reset) knowing it skips or re-reads input",
    super::positions::name(topic, *partition),
    range(*log_start, *last_stable)
)]
pub struct InputOutOfRange {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset asked.
    pub offset: i64,
    /// The oldest offset the log keeps, when the leader told it.
    pub log_start: Option<i64>,
    /// The log's last stable offset (the end a read_committed reader sees),
    /// when the leader told it.
    pub last_stable: Option<i64>,
}

fn range(start: Option<i64>, end: Option<i64>) -> String {
    match (start, end) {
        (Some(s), Some(e)) => format!(", which holds offsets {s} up to {e} (last stable)"),
        _ => " (its range could not be read)".into(),
    }
}
