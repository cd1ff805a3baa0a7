//! Exactly-once input for a leader that consumes and produces: guarded
//! writes that commit the input offsets they consumed in their own
//! transaction ([`Leadership::write_with_offsets`]), and the offsets a
//! new leader resumes from ([`Leadership::committed_offsets`]).
//!
//! A write with offsets is a guarded write (the `writes` module: the same
//! refusal after a resign, producer, bounds and mapping of the answer);
//! only what it sends differs. Its records and offsets commit together in
//! one transaction of the term's epoch, or neither does: a deposed
//! leader's write is fenced and the group's offsets stay as they were.

use std::future::Future;
use std::sync::Arc;

use super::writes::Payload;
use super::Leadership;
use crate::error::{Error, Result};
use crate::transport::{check_offsets, check_query, CommittedOffset, ConsumedOffsets, OutRecord};

impl Leadership {
    /// Writes `records` and commits `offsets` (the input they were made
    /// from, as the positions of the next records to read) for the
    /// consumer group `offsets.group`, in one transaction of this term's
    /// epoch: the records become visible to `read_committed` readers and
    /// the group's offsets move together, or neither happens. This is the
    /// read-process-write loop of Kafka's exactly-once processing, with the
    /// term's epoch as the transactional producer: a deposed leader's write
    /// fails with [`Error::Fenced`], none of its records become visible and
    /// the group's offsets do not move, so its successor resumes from the
    /// last offsets a leader committed with its output.
    ///
    /// Everything [`Leadership::write`] says holds: the bounds, the refusal
    /// after a resign ([`Error::Resigned`], checked at the call), the
    /// fence ending the term, [`Error::OutcomeUnknown`] when the commit was
    /// sent but not confirmed (the offsets then moved exactly when the
    /// records became visible). `records` may be empty: only the offsets
    /// commit. With no offsets, this is [`Leadership::write`].
    ///
    /// Refused at the call with [`Error::InvalidArgument`] naming the value,
    /// sending nothing: an empty group id, an input offset with an empty
    /// topic, a negative partition or offset, a topic-partition named
    /// twice. The group is committed to without membership (Kafka's
    /// TxnOffsetCommit with no member id and generation -1): a group that
    /// consumers joined with `subscribe` refuses it ([`Error::Fatal`]);
    /// read the input with `assign` and `seek`. The principal needs READ
    /// on the group and on the input topics.
    pub fn write_with_offsets(
        &self,
        records: Vec<OutRecord>,
        offsets: ConsumedOffsets,
    ) -> impl Future<Output = Result<()>> + Send + '_ {
        let refused = self.refused_with_offsets(&offsets);
        async move {
            match refused {
                Some(e) => Err(e),
                None => {
                    let payload = Payload::of(records, offsets);
                    self.held.unless_crashed(self.write_now(payload)).await
                }
            }
        }
    }

    /// [`Leadership::write_with_offsets`] on a shared handle: the same
    /// checks at the call, a future that owns the handle (for bindings,
    /// which run it on a runtime while the caller goes on).
    pub fn write_with_offsets_owned(
        self: Arc<Self>,
        records: Vec<OutRecord>,
        offsets: ConsumedOffsets,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let refused = self.refused_with_offsets(&offsets);
        async move {
            match refused {
                Some(e) => Err(e),
                None => {
                    let payload = Payload::of(records, offsets);
                    self.held.unless_crashed(self.write_now(payload)).await
                }
            }
        }
    }

    /// The error of a write with `offsets` called now, else `None`: after
    /// a resign, [`Error::Resigned`]; offsets that cannot be committed,
    /// [`Error::InvalidArgument`].
    fn refused_with_offsets(&self, offsets: &ConsumedOffsets) -> Option<Error> {
        self.refused_after_resign()
            .or_else(|| check_offsets(offsets).err())
    }

    /// What consumer group `group` has committed for `partitions` (topic,
    /// partitions), in the order asked: where the new leader resumes
    /// reading its input. Only offsets of decided transactions are
    /// returned (read_committed semantics): an offset that a pending
    /// commit of an open transaction holds is waited for, so the answer is
    /// never an offset such a transaction is about to replace.
    /// [`CommittedOffset::offset`] is `None` for a partition the group
    /// committed nothing for.
    ///
    /// On the leadership, not the client, because of when it may run: a
    /// leadership exists only after this term's mint, which fenced the
    /// previous leader's epoch and aborted its open transaction. So no
    /// commit pending now is a predecessor's that could still land later
    /// and move the offsets under the new leader: a pending commit is the
    /// abort's markers on their way, or this term's own write. Offsets
    /// read before the mint (through a plain client) carry no such promise.
    ///
    /// Bounded by the lease duration: a partition still pending then fails
    /// with [`Error::Transient`] naming the group and the partitions. An
    /// empty group id, an empty topic, a negative partition or a
    /// topic-partition named twice is [`Error::InvalidArgument`], nothing
    /// sent; a principal without DESCRIBE on the group or the topic is
    /// [`Error::Fatal`].
    pub async fn committed_offsets(
        &self,
        group: &str,
        partitions: &[(String, Vec<i32>)],
    ) -> Result<Vec<CommittedOffset>> {
        check_query(group, partitions)?;
        let within = self.held.member.options.election.lease_duration;
        let read = self.held.epoch.committed_offsets(group, partitions, within);
        self.held.unless_crashed(read).await
    }
}
