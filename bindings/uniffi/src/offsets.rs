//! Exactly-once input for a leader that consumes and produces: a guarded
//! write that commits the consumer group's input offsets in its own
//! transaction ([`Leadership::write_with_offsets`]), and the offsets a new
//! leader resumes from ([`Leadership::committed_offsets`]). The values are
//! the core's (`krabka_coordination::transport`), translated field by
//! field; every check is the core's.

use std::sync::Arc;

use krabka_coordination::transport as core;

use crate::error::KrabkaError;
use crate::leadership::{Leadership, OutRecord};
use crate::runtime::run;

/// The input a guarded write consumed: the offsets to commit for consumer
/// group `group` with the write's records, in its transaction.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ConsumedOffsets {
    /// The consumer group whose offsets are committed (not empty). The
    /// leader commits without joining it: a group that consumers joined
    /// with `subscribe` refuses the commit.
    pub group: String,
    /// One entry per input partition (each topic-partition at most once).
    pub offsets: Vec<InputOffset>,
}

/// One input partition's position: the offset of the next record to read
/// there (the last one processed, plus one), as a Kafka consumer commits.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
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
    #[uniffi(default = None)]
    pub metadata: Option<String>,
}

/// Input partitions asked about: `partitions` of `topic`.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct InputPartitions {
    /// The topic (not empty).
    pub topic: String,
    /// Its partitions (each 0 or more, each named once).
    pub partitions: Vec<i32>,
}

/// What a consumer group has committed for one partition: only offsets of
/// decided transactions (read_committed).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct CommittedOffset {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset of the next record to read; absent when the group has
    /// committed nothing for the partition (start where your reset policy
    /// says).
    pub offset: Option<i64>,
    /// The metadata committed with the offset.
    pub metadata: Option<String>,
}

impl From<ConsumedOffsets> for core::ConsumedOffsets {
    fn from(o: ConsumedOffsets) -> Self {
        core::ConsumedOffsets {
            group: o.group,
            offsets: o.offsets.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<InputOffset> for core::InputOffset {
    fn from(o: InputOffset) -> Self {
        core::InputOffset {
            topic: o.topic,
            partition: o.partition,
            offset: o.offset,
            metadata: o.metadata,
        }
    }
}

impl From<core::CommittedOffset> for CommittedOffset {
    fn from(o: core::CommittedOffset) -> Self {
        CommittedOffset {
            topic: o.topic,
            partition: o.partition,
            offset: o.offset,
            metadata: o.metadata,
        }
    }
}

#[uniffi::export]
impl Leadership {
    /// Writes `records` and commits `offsets` (the input they were made
    /// from, as the positions of the next records to read) in one
    /// transaction of this term's epoch: the records become visible to
    /// read_committed readers and the group's offsets move together, or
    /// neither happens. A deposed leader's write fails with
    /// `KrabkaException.Fenced`, none of its records become visible, the
    /// group's offsets do not move and the term ends. Everything `write`
    /// says holds (`Resigned` after a resign, `OutcomeUnknown` when the
    /// commit was sent but not confirmed). `records` may be empty.
    ///
    /// Refused at the call with `KrabkaException.InvalidArgument` naming the
    /// value, nothing sent: an empty group, an empty topic, a negative
    /// partition or offset, a topic-partition named twice. A group that
    /// consumers joined with `subscribe` refuses the commit (`Fatal`).
    pub async fn write_with_offsets(
        &self,
        records: Vec<OutRecord>,
        offsets: ConsumedOffsets,
    ) -> Result<(), KrabkaError> {
        let l = Arc::clone(self.core()?);
        let records = records.into_iter().map(Into::into).collect();
        run(l.write_with_offsets_owned(records, offsets.into())).await
    }

    /// What consumer group `group` has committed for `partitions`, one
    /// entry per partition in the order asked: where this leader resumes
    /// reading its input. Only offsets of decided transactions count
    /// (read_committed); a pending commit is waited for, at most one lease,
    /// then `Transient` naming the group and the partitions. An empty
    /// group or topic, a negative partition or a partition named twice is
    /// `InvalidArgument`, nothing sent.
    pub async fn committed_offsets(
        &self,
        group: String,
        partitions: Vec<InputPartitions>,
    ) -> Result<Vec<CommittedOffset>, KrabkaError> {
        let l = Arc::clone(self.core()?);
        let partitions: Vec<(String, Vec<i32>)> = partitions
            .into_iter()
            .map(|p| (p.topic, p.partitions))
            .collect();
        let read = async move { l.committed_offsets(&group, &partitions).await };
        let offsets = run(read).await?;
        Ok(offsets.into_iter().map(Into::into).collect())
    }
}
