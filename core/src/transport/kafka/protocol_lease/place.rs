//! Where a write's records go: the partition of each record, and the
//! check that a guarded write's partitions can take it.

use tokio::time::Instant;

use super::write::Content;
use super::ProtocolLease;
use crate::error::{Error, Result};
use crate::transport::OutRecord;

impl ProtocolLease {
    /// [`ProtocolLease::place`] of `content`'s records, then, for guarded
    /// records ([`Content::checks_writable`]), the check that every
    /// partition placed can take the write, by topic.
    pub(super) async fn place_checked<'r>(
        &mut self,
        content: &'r Content,
        deadline: Instant,
    ) -> Result<Placed<'r>> {
        let placed = self.place(content.records(), deadline).await?;
        if content.checks_writable() {
            for (topic, partitions) in by_topic(placed.iter().map(|(key, _)| key)) {
                self.kafka
                    .check_writable(&topic, &partitions, deadline)
                    .await?;
            }
        }
        Ok(placed)
    }

    /// The partition of each record, in the records' order within a
    /// partition. A record without a partition goes where Kafka's
    /// partitioner puts its key (murmur2), or round robin without a key.
    async fn place<'r>(
        &mut self,
        records: &'r [OutRecord],
        deadline: Instant,
    ) -> Result<Placed<'r>> {
        let mut placed: Placed<'r> = Vec::new();
        for r in records {
            let partitions = self.kafka.topic_partitions(&r.topic, deadline).await?;
            let partition = match r.partition {
                Some(p) if p >= partitions => {
                    return Err(Error::InvalidArgument(format!(
                        "partition {p} of topic {} does not exist (it has {partitions})",
                        crate::error::quote(&r.topic)
                    )))
                }
                Some(p) => p,
                None => match &r.key {
                    Some(k) => crate::partition::partition_of_hash(
                        crate::partition::murmur2(k),
                        partitions,
                    ),
                    None => {
                        self.round_robin = self.round_robin.wrapping_add(1);
                        i32::try_from(self.round_robin % partitions.max(1) as u32).unwrap_or(0)
                    }
                },
            };
            let key = (r.topic.clone(), partition);
            match placed.iter_mut().find(|(k, _)| *k == key) {
                Some((_, group)) => group.push(r),
                None => placed.push((key, vec![r])),
            }
        }
        Ok(placed)
    }
}

/// Records grouped by partition, in first-seen order.
pub(super) type Placed<'r> = Vec<((String, i32), Vec<&'r OutRecord>)>;

/// The partitions of `keys` grouped by topic, in first-seen order, as
/// AddPartitionsToTxn and the writable check take them.
pub(super) fn by_topic<'k>(
    keys: impl IntoIterator<Item = &'k (String, i32)>,
) -> Vec<(String, Vec<i32>)> {
    let mut topics: Vec<(String, Vec<i32>)> = Vec::new();
    for (topic, partition) in keys {
        match topics.iter_mut().find(|(t, _)| t == topic) {
            Some((_, ps)) => ps.push(*partition),
            None => topics.push((topic.clone(), vec![*partition])),
        }
    }
    topics
}
