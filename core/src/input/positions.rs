//! The reader's positions: one next offset per assigned partition, in the
//! order of the assignment.
//!
//! Invariants, kept by every method:
//!
//! - the assignment never changes after [`Positions::new`]: no partition is
//!   added or removed, none is named twice, every topic is named, every
//!   partition and offset is 0 or more;
//! - [`Positions::advance`] only moves a position forward (a read never
//!   hands back an offset before the one asked); only
//!   [`Positions::seek`] and [`Positions::reset`] move one anywhere.

use krabka_kafka::{PartitionRead, ReadFrom};

use super::InputPosition;
use crate::error::{quote, Error, Result};

/// The next offset of each assigned partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Positions {
    each: Vec<InputPosition>,
}

impl Positions {
    /// The positions `assigned`, checked: an empty list, a partition named
    /// twice, an unnamed topic, a negative partition or offset are
    /// [`Error::InvalidArgument`] naming them.
    pub(super) fn new(assigned: Vec<InputPosition>) -> Result<Positions> {
        if assigned.is_empty() {
            return Err(Error::InvalidArgument(
                "an input reader needs at least one assigned partition".into(),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for p in &assigned {
            check(p)?;
            if !seen.insert((p.topic.as_str(), p.partition)) {
                return Err(Error::InvalidArgument(format!(
                    "{} is assigned twice to one input reader",
                    name(&p.topic, p.partition)
                )));
            }
        }
        Ok(Positions { each: assigned })
    }

    /// The positions, in the order of the assignment.
    pub(super) fn all(&self) -> &[InputPosition] {
        &self.each
    }

    /// The positions as the Kafka client's read asks them.
    pub(super) fn to_read(&self) -> Vec<ReadFrom> {
        self.each
            .iter()
            .map(|p| ReadFrom {
                topic: p.topic.clone(),
                partition: p.partition,
                offset: p.offset,
            })
            .collect()
    }

    /// Moves `topic`/`partition` to `offset` (back or forward).
    /// [`Error::InvalidArgument`] naming it for a partition not assigned or
    /// a negative offset; nothing moves then.
    pub(super) fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<()> {
        if offset < 0 {
            return Err(Error::InvalidArgument(format!(
                "cannot seek {} to offset {offset}: offsets are 0 or more",
                name(topic, partition)
            )));
        }
        let p = self.find(topic, partition).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "cannot seek {}: the reader is not assigned that partition",
                name(topic, partition)
            ))
        })?;
        p.offset = offset;
        Ok(())
    }

    /// Moves `topic`/`partition` to `offset`, as a reset policy chose it
    /// (the partition is one the read named, so it is assigned).
    pub(super) fn reset(&mut self, topic: &str, partition: i32, offset: i64) {
        if let Some(p) = self.find(topic, partition) {
            p.offset = offset.max(0);
        }
    }

    /// Moves every partition of `reads` past what it read. A read of a
    /// partition not assigned, or one whose next offset lies before the
    /// position (a broker's answer no read gives), is an
    /// [`Error::Fatal`] naming it, and nothing moves.
    pub(super) fn advance(&mut self, reads: &[PartitionRead]) -> Result<()> {
        let mut moves = Vec::with_capacity(reads.len());
        for r in reads {
            let Some(i) = self
                .each
                .iter()
                .position(|p| p.topic == r.topic && p.partition == r.partition)
            else {
                return Err(Error::fatal(
                    "advancing an input reader",
                    format!(
                        "a read answered {}, which is not assigned",
                        name(&r.topic, r.partition)
                    ),
                ));
            };
            let at = self.each[i].offset;
            let last = r.records.last().map_or(at - 1, |rec| rec.offset);
            if r.next_offset < at || r.next_offset <= last {
                return Err(Error::fatal(
                    "advancing an input reader",
                    format!(
                        "a read of {} from offset {at} ended at offset {}, before what it read",
                        name(&r.topic, r.partition),
                        r.next_offset
                    ),
                ));
            }
            moves.push((i, r.next_offset));
        }
        for (i, next) in moves {
            self.each[i].offset = next;
        }
        Ok(())
    }

    fn find(&mut self, topic: &str, partition: i32) -> Option<&mut InputPosition> {
        self.each
            .iter_mut()
            .find(|p| p.topic == topic && p.partition == partition)
    }
}

/// `"topic"/partition`, as errors name a partition.
pub(super) fn name(topic: &str, partition: i32) -> String {
    format!("{}/{partition}", quote(topic))
}

fn check(p: &InputPosition) -> Result<()> {
    if p.topic.is_empty() || p.partition < 0 || p.offset < 0 {
        return Err(Error::InvalidArgument(format!(
            "cannot read {} from offset {}: the topic must be named, the partition and the \
             offset 0 or more",
            name(&p.topic, p.partition),
            p.offset
        )));
    }
    Ok(())
}
