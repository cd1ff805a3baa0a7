//! What a read_committed consumer takes from one partition's Fetch answer:
//! the records of committed transactions and of producers without
//! transactions, never those of aborted transactions, never a control
//! batch (a transaction marker), as Kafka's own consumer does.
//!
//! A read_committed Fetch answers only batches below the last stable
//! offset, so every transaction whose records it holds is decided, and
//! lists the aborted ones among them (producer id, first offset). A
//! producer's batches are aborted from its aborted transaction's first
//! offset up to its ABORT marker; every other transactional batch is
//! committed.

use std::collections::{BTreeSet, HashSet};

use crate::records::{BatchRecord, Batches, Marker};

/// The committed records of `batches` at or after `from`, in offset order,
/// and the offset to read next: after the last whole batch (past its
/// aborted records and markers too), or `from` when there was none.
/// `aborted` lists the aborted transactions (producer id, first offset) of
/// the answer, in any order.
pub(super) fn committed_records(
    batches: Batches,
    aborted: &[(i64, i64)],
    from: i64,
) -> (Vec<BatchRecord>, i64) {
    // By first offset: a transaction joins the aborted producers once the
    // walk reaches its first offset.
    let mut to_come: BTreeSet<(i64, i64)> = aborted.iter().map(|&(p, o)| (o, p)).collect();
    let mut aborting: HashSet<i64> = HashSet::new();
    let mut out = Vec::new();
    let next = batches.next_offset.map_or(from, |n| n.max(from));
    for batch in batches.batches {
        while let Some(&(first, producer)) = to_come.first() {
            if first > batch.last_offset {
                break;
            }
            to_come.pop_first();
            aborting.insert(producer);
        }
        if batch.marker == Some(Marker::Abort) {
            aborting.remove(&batch.producer_id);
            continue;
        }
        if batch.marker.is_some() {
            continue;
        }
        if batch.transactional && aborting.contains(&batch.producer_id) {
            continue;
        }
        out.extend(batch.records.into_iter().filter(|r| r.offset >= from));
    }
    (out, next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Batch;
    use bytes::Bytes;

    fn data(producer: i64, transactional: bool, offsets: std::ops::RangeInclusive<i64>) -> Batch {
        Batch {
            base_offset: *offsets.start(),
            last_offset: *offsets.end(),
            producer_id: producer,
            producer_epoch: 0,
            transactional,
            marker: None,
            records: offsets
                .map(|offset| BatchRecord {
                    offset,
                    key: None,
                    value: Some(Bytes::from(format!("{producer}@{offset}"))),
                    timestamp: -1,
                    headers: Vec::new(),
                })
                .collect(),
        }
    }

    fn marker(producer: i64, offset: i64, m: Marker) -> Batch {
        Batch {
            base_offset: offset,
            last_offset: offset,
            producer_id: producer,
            producer_epoch: 0,
            transactional: true,
            marker: Some(m),
            records: Vec::new(),
        }
    }

    fn offsets(records: &[BatchRecord]) -> Vec<i64> {
        records.iter().map(|r| r.offset).collect()
    }

    /// Two producers' transactions interleaved, one aborted, one
    /// committed, then the aborted producer's next transaction committed;
    /// a plain producer in between.
    #[test]
    fn aborted_records_and_markers_are_dropped() {
        let batches = Batches {
            batches: vec![
                data(1, true, 0..=1),  // aborted
                data(2, true, 2..=2),  // committed
                data(9, false, 3..=3), // no transaction
                data(1, true, 4..=4),  // aborted
                marker(1, 5, Marker::Abort),
                marker(2, 6, Marker::Commit),
                data(1, true, 7..=8), // committed: a new transaction
                marker(1, 9, Marker::Commit),
            ],
            next_offset: Some(10),
        };
        let (records, next) = committed_records(batches.clone(), &[(1, 0)], 0);
        assert_eq!(offsets(&records), [2, 3, 7, 8]);
        assert_eq!(next, 10);
        // Read from the middle of a batch: the records before it are not
        // returned again.
        let (records, _) = committed_records(batches.clone(), &[(1, 0)], 8);
        assert_eq!(offsets(&records), [8]);
        // Without the answer's aborted list every transaction would be
        // taken as committed.
        let (records, _) = committed_records(batches, &[], 0);
        assert_eq!(offsets(&records), [0, 1, 2, 3, 4, 7, 8]);
    }

    #[test]
    fn nothing_read_leaves_the_offset_asked() {
        let (records, next) = committed_records(Batches::default(), &[], 42);
        assert!(records.is_empty());
        assert_eq!(next, 42);
        let only_markers = Batches {
            batches: vec![marker(3, 42, Marker::Commit)],
            next_offset: Some(43),
        };
        let (records, next) = committed_records(only_markers, &[], 42);
        assert!(records.is_empty());
        assert_eq!(next, 43);
    }
}
