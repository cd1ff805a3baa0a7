//! The in-memory group coordinator: consumer groups' offsets, committed
//! with a guarded write's records in its transaction.
//!
//! Kept per group, topic and partition: the committed offset, and a
//! pending one of a transaction not decided yet (a write whose commit went
//! unconfirmed, [`MemoryCluster::set_next_commit_unknown`]). A pending
//! offset is decided with its transaction's records: committed by the
//! epoch's next write, dropped by a newer mint of the role (which aborts
//! what the previous epoch left open). A read of the committed offsets
//! waits while one it asks for is pending, as OffsetFetch with
//! `require_stable` does; a fenced write moves nothing.

use super::*;
use crate::transport::{check_query, CommittedOffset, ConsumedOffsets};

/// A group's position on one partition, with its metadata.
type Position = (i64, Option<String>);

/// One partition's offsets of one group.
#[derive(Debug, Default)]
pub(super) struct GroupOffset {
    /// What the group has committed.
    committed: Option<Position>,
    /// A commit of the open transaction of this role's epoch.
    pending: Option<(String, Position)>,
}

/// Group, topic, partition.
pub(super) type GroupKey = (String, String, i32);

impl MemoryCluster {
    /// Stages `offsets` in the transaction of `role` that writes them:
    /// committed at once when it commits now (`committed`), else pending
    /// until the role's transaction is decided.
    pub(super) fn stage_offsets(
        inner: &mut Inner,
        role: &str,
        offsets: ConsumedOffsets,
        committed: bool,
    ) {
        for o in offsets.offsets {
            let key = (offsets.group.clone(), o.topic, o.partition);
            let entry = inner.group_offsets.entry(key).or_default();
            let position = (o.offset, o.metadata);
            if committed {
                entry.committed = Some(position);
            } else {
                entry.pending = Some((role.to_owned(), position));
            }
        }
    }

    /// Decides the offsets a transaction of `role` left pending: committed
    /// (`commit`) or dropped.
    pub(super) fn decide_offsets(inner: &mut Inner, role: &str, commit: bool) {
        for entry in inner.group_offsets.values_mut() {
            if entry.pending.as_ref().is_some_and(|(r, _)| r == role) {
                let (_, position) = entry.pending.take().expect("checked above");
                if commit {
                    entry.committed = Some(position);
                }
            }
        }
    }

    /// What `group` has committed for `partitions`, or the partitions a
    /// pending commit holds (`Err`).
    fn read_offsets(
        inner: &Inner,
        group: &str,
        partitions: &[(String, Vec<i32>)],
    ) -> std::result::Result<Vec<CommittedOffset>, Vec<String>> {
        let mut out = Vec::new();
        let mut pending = Vec::new();
        for (topic, parts) in partitions {
            for &partition in parts {
                let key = (group.to_owned(), topic.clone(), partition);
                let entry = inner.group_offsets.get(&key);
                if entry.is_some_and(|e| e.pending.is_some()) {
                    pending.push(format!("{}/{partition}", crate::error::quote(topic)));
                }
                let committed = entry.and_then(|e| e.committed.clone());
                out.push(CommittedOffset {
                    topic: topic.clone(),
                    partition,
                    offset: committed.as_ref().map(|c| c.0),
                    metadata: committed.and_then(|c| c.1).filter(|m| !m.is_empty()),
                });
            }
        }
        if pending.is_empty() {
            Ok(out)
        } else {
            Err(pending)
        }
    }

    /// What `group` has committed for `topic`/`partition` now (the offset
    /// of the next record to read), `None` when nothing; a pending commit
    /// does not count. For tests.
    pub fn committed_offset(&self, group: &str, topic: &str, partition: i32) -> Option<i64> {
        let key = (group.to_owned(), topic.to_owned(), partition);
        self.lock()
            .group_offsets
            .get(&key)
            .and_then(|e| e.committed.as_ref().map(|c| c.0))
    }

    /// [`crate::transport::LeaseWriter::committed_offsets`] on the cluster:
    /// waits, at most `within` on the cluster's clock, while a pending
    /// commit holds a partition asked.
    pub(super) async fn committed_offsets(
        &self,
        group: &str,
        partitions: &[(String, Vec<i32>)],
        within: Duration,
    ) -> Result<Vec<CommittedOffset>> {
        check_query(group, partitions)?;
        let deadline = self.clock.sleep(within);
        tokio::pin!(deadline);
        loop {
            let decided = self.decided.notified();
            tokio::pin!(decided);
            decided.as_mut().enable();
            let pending = {
                let inner = self.enter("committed_offsets")?;
                match MemoryCluster::read_offsets(&inner, group, partitions) {
                    Ok(found) => return Ok(found),
                    Err(pending) => pending,
                }
            };
            tokio::select! {
                _ = &mut decided => {}
                _ = &mut deadline => return Err(Error::transient(
                    format!(
                        "reading the committed offsets of group {}",
                        crate::error::quote(group)
                    ),
                    format!(
                        "{}: a transaction holding a pending offset commit of the group for \
                         them is still open after {}",
                        pending.join(", "),
                        crate::human::duration(within)
                    ),
                )),
            }
        }
    }
}
