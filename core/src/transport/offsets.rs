//! A consumer group's input offsets in a guarded write: what a leader that
//! reads topics and writes results commits with its output, in the same
//! transaction of its term's epoch ([`ConsumedOffsets`]), and what the
//! group has committed ([`CommittedOffset`]).
//!
//! The offsets are committed for the group without group membership: no
//! member id, no generation; the epoch fences a deposed leader's commit as
//! it fences its records. A group that consumers joined with `subscribe`
//! refuses such a commit: the group is the role's own, its input read with
//! `assign` + `seek` from the committed offsets.

use std::collections::HashSet;

use crate::error::{Error, Result};

/// The input a guarded write consumed: the offsets to commit for consumer
/// group `group` with the write's records, in its transaction. Records
/// and offsets commit together or not at all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsumedOffsets {
    /// The consumer group whose offsets are committed (not empty). The
    /// leader commits without joining it: a group with members of its own
    /// (consumers that `subscribe`d) refuses the commit.
    pub group: String,
    /// One entry per input partition (each topic-partition at most once).
    pub offsets: Vec<InputOffset>,
}

/// One input partition's position: the offset of the next record to read
/// there (the last one processed, plus one), as a Kafka consumer commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputOffset {
    /// The topic read (not empty).
    pub topic: String,
    /// Its partition (0 or more).
    pub partition: i32,
    /// The offset of the next record to read (0 or more).
    pub offset: i64,
    /// Kept with the offset and returned with it; at most the brokers'
    /// `offset.metadata.max.bytes` (4096 by default), or the commit is
    /// refused.
    pub metadata: Option<String>,
}

/// What a consumer group has committed for one partition, as
/// [`crate::leadership::Leadership::committed_offsets`] returns it: only
/// offsets of decided transactions (read_committed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset of the next record to read; `None` when the group has
    /// committed nothing for the partition (start where your reset policy
    /// says).
    pub offset: Option<i64>,
    /// The metadata committed with the offset; `None` when it had none or
    /// an empty one (Kafka keeps no metadata as an empty string, so the two
    /// cannot be told apart).
    pub metadata: Option<String>,
}

impl ConsumedOffsets {
    /// Offsets of `group`.
    pub fn new(group: impl Into<String>, offsets: Vec<InputOffset>) -> ConsumedOffsets {
        ConsumedOffsets {
            group: group.into(),
            offsets,
        }
    }
}

impl InputOffset {
    /// The position `offset` (the next record to read) of `topic`/`partition`,
    /// without metadata.
    pub fn new(topic: impl Into<String>, partition: i32, offset: i64) -> InputOffset {
        InputOffset {
            topic: topic.into(),
            partition,
            offset,
            metadata: None,
        }
    }
}

/// Refuses a group id that is empty, naming the use.
fn check_group(group: &str) -> Result<()> {
    if group.is_empty() {
        return Err(Error::InvalidArgument(
            "the consumer group of the input offsets is empty: name the group whose offsets \
             the write commits"
                .into(),
        ));
    }
    Ok(())
}

/// Refuses a topic-partition that is empty, negative or named twice
/// (`seen` holds those before it), naming it and the group.
fn check_partition(
    group: &str,
    topic: &str,
    partition: i32,
    seen: &mut HashSet<(String, i32)>,
) -> Result<()> {
    if topic.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "an input offset of group {} has an empty topic",
            crate::error::quote(group)
        )));
    }
    if partition < 0 {
        return Err(Error::InvalidArgument(format!(
            "input partition {partition} of {} (group {}) is negative",
            crate::error::quote(topic),
            crate::error::quote(group)
        )));
    }
    if !seen.insert((topic.to_owned(), partition)) {
        return Err(Error::InvalidArgument(format!(
            "input partition {}/{partition} is named twice for group {}: each partition has \
             one position",
            crate::error::quote(topic),
            crate::error::quote(group)
        )));
    }
    Ok(())
}

/// Refuses offsets a guarded write must not commit, before anything is
/// sent ([`Error::InvalidArgument`] naming the bad value): an empty group
/// id, an empty topic, a negative partition or offset, a topic-partition
/// named twice.
pub fn check_offsets(offsets: &ConsumedOffsets) -> Result<()> {
    check_group(&offsets.group)?;
    let mut seen = HashSet::new();
    for o in &offsets.offsets {
        check_partition(&offsets.group, &o.topic, o.partition, &mut seen)?;
        if o.offset < 0 {
            return Err(Error::InvalidArgument(format!(
                "offset {} of input partition {}/{} (group {}) is negative: an offset to \
                 commit is the next one to read, 0 or more",
                o.offset,
                crate::error::quote(&o.topic),
                o.partition,
                crate::error::quote(&offsets.group)
            )));
        }
    }
    Ok(())
}

/// Refuses a committed-offsets query that names an empty group, an empty
/// topic, a negative partition or a topic-partition twice
/// ([`Error::InvalidArgument`] naming it).
pub fn check_query(group: &str, partitions: &[(String, Vec<i32>)]) -> Result<()> {
    check_group(group)?;
    let mut seen = HashSet::new();
    for (topic, parts) in partitions {
        for &p in parts {
            check_partition(group, topic, p, &mut seen)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(group: &str, list: &[(&str, i32, i64)]) -> ConsumedOffsets {
        ConsumedOffsets::new(
            group,
            list.iter()
                .map(|(t, p, o)| InputOffset::new(*t, *p, *o))
                .collect(),
        )
    }

    fn refusal(r: Result<()>) -> String {
        match r {
            Err(Error::InvalidArgument(why)) => why,
            other => panic!("not refused as an invalid argument: {other:?}"),
        }
    }

    #[test]
    fn bad_offsets_are_refused_naming_the_value() {
        assert!(check_offsets(&offsets("g", &[("in", 0, 0), ("in", 1, 5)])).is_ok());
        assert!(check_offsets(&offsets("g", &[])).is_ok());
        assert!(refusal(check_offsets(&offsets("", &[("in", 0, 1)]))).contains("group"));
        let why = refusal(check_offsets(&offsets("g", &[("in", 0, -3)])));
        assert!(
            why.contains("offset -3") && why.contains("\"in\"/0"),
            "{why}"
        );
        let why = refusal(check_offsets(&offsets("g", &[("in", -2, 1)])));
        assert!(why.contains("partition -2"), "{why}");
        let why = refusal(check_offsets(&offsets("g", &[("in", 1, 1), ("in", 1, 2)])));
        assert!(why.contains("\"in\"/1 is named twice"), "{why}");
        assert!(refusal(check_offsets(&offsets("g", &[("", 0, 1)]))).contains("empty topic"));
    }

    #[test]
    fn bad_queries_are_refused_naming_the_value() {
        assert!(check_query("g", &[("in".into(), vec![0, 1])]).is_ok());
        assert!(refusal(check_query("", &[])).contains("group"));
        let why = refusal(check_query("g", &[("in".into(), vec![0, -1])]));
        assert!(why.contains("partition -1"), "{why}");
        let why = refusal(check_query(
            "g",
            &[("in".into(), vec![2]), ("in".into(), vec![2])],
        ));
        assert!(why.contains("named twice"), "{why}");
    }
}
