//! What one transaction of a [`super::KafkaEpoch`] is asked to do, and the
//! writer's [`Write`] for it.

use crate::transport::kafka::protocol_lease::{Content, End, Write};
use crate::transport::{ConsumedOffsets, OutRecord};

/// What one transaction of the epoch was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ask {
    /// A lease: its commit opens the next transaction ahead.
    Lease,
    /// A lease tombstone (a resign): nothing follows it.
    Tombstone,
    /// A guarded write, to data topics.
    Guarded,
    /// Fault injection: the transaction stays open.
    LeftOpen,
}

impl Ask {
    /// The writer's write of `records` (with `offsets`, for a guarded
    /// write) for this ask.
    pub(super) fn write(self, records: Vec<OutRecord>, offsets: Option<ConsumedOffsets>) -> Write {
        match self {
            Ask::Lease | Ask::Tombstone => Write::commit(Content::Lease(records)),
            Ask::Guarded => Write::commit(match offsets {
                Some(offsets) => Content::GuardedWithOffsets(records, offsets),
                None => Content::Guarded(records),
            }),
            Ask::LeftOpen => Write {
                content: Content::Lease(records),
                end: End::LeaveOpen,
            },
        }
    }
}
