//! The look past the last stable offset of a state partition
//! ([`StateReader::read_past_stable`](crate::transport::StateReader::read_past_stable)):
//! read_uncommitted Fetches through the protocol client, from the reader's
//! position to the high watermark the first Fetch reported, with each
//! record sorted by the transaction markers below that high watermark.
//!
//! Contract:
//!
//! - **one high watermark bounds the read**: the first Fetch's; records
//!   and markers at or past it are left out, so the answer is the
//!   partition as it stood then, like [`super::state_reader`]'s check;
//! - **committed means a marker was read**: a transactional record counts
//!   as committed only once its producer's COMMIT marker (below the high
//!   watermark) has been read after it; with no marker it is open; after
//!   an ABORT marker it is in neither list. A record outside any
//!   transaction is committed once written (below the high watermark);
//! - **only past the last stable offset**: a reader below it has decided
//!   records to read first (`None`), so what is sorted here lies wholly at
//!   or past the first open transaction, which Kafka's log cleaner never
//!   reaches: no marker of it has been compacted away;
//! - **bounded**: at most [`MAX_BYTES`] are read (compressed batches
//!   decompressed, within the records decoder's own bound); past that, and
//!   on a batch this client cannot read (a codec Kafka does not define,
//!   broken bytes), the answer is `None` and the caller waits as for any
//!   open transaction.

use std::collections::HashMap;

use krabka_kafka::records::{Batch, Marker};

use super::{check_partition, deadline_in, KafkaTransport};
use crate::error::{Error, Result};
use crate::transport::{PastStable, Record};

/// What one Fetch asks for at most.
const FETCH_BYTES: i32 = 1 << 20;

/// What a batch costs besides its keys and values, about.
const BATCH_HEADER: usize = 61;

/// The most one look past the last stable offset reads: far more than the
/// renewals of a partition's roles over a transaction timeout.
pub(super) const MAX_BYTES: usize = 32 << 20;

impl KafkaTransport {
    /// See [`crate::transport::StateReader::read_past_stable`].
    pub(super) async fn read_past_stable_now(
        &self,
        partition: i32,
        position: i64,
    ) -> Result<Option<PastStable>> {
        check_partition(partition)?;
        if position < 0 {
            return Err(Error::InvalidArgument(format!(
                "read position must not be negative, got {position}"
            )));
        }
        let topic = self.config.state_topic();
        let kafka = self.client.kafka();
        let deadline = deadline_in(self.config.operation_timeout());
        let mut fetched = kafka
            .fetch_uncommitted(topic, partition, position, FETCH_BYTES, deadline)
            .await?;
        let end = fetched.high_watermark;
        if fetched.last_stable >= end || fetched.last_stable > position {
            // Nothing open, or decided records not read yet.
            return Ok(None);
        }
        let mut sorted = Sorter::new(position, end);
        let mut next = position;
        let mut read = 0usize;
        loop {
            let Some(after) = fetched.batches.next_offset else {
                // No whole batch below the high watermark: nothing this
                // look can decide from.
                tracing::debug!(
                    partition,
                    next,
                    end,
                    "no whole batch past the last stable offset"
                );
                return Ok(None);
            };
            for batch in fetched.batches.batches {
                read += BATCH_HEADER + batch.records.iter().map(record_size).sum::<usize>();
                sorted.add(batch);
            }
            next = next.max(after);
            if next >= end {
                return Ok(Some(sorted.finish()));
            }
            if read > MAX_BYTES {
                tracing::warn!(partition, read, "more than {MAX_BYTES} bytes past the last stable offset; waiting for the open transaction instead");
                return Ok(None);
            }
            fetched = kafka
                .fetch_uncommitted(topic, partition, next, FETCH_BYTES, deadline)
                .await?;
        }
    }
}

fn record_size(r: &krabka_kafka::records::BatchRecord) -> usize {
    r.key.as_ref().map_or(0, |k| k.len()) + r.value.as_ref().map_or(0, |v| v.len())
}

/// Sorts the records of `[from, end)` by what the markers say of them.
pub(super) struct Sorter {
    from: i64,
    end: i64,
    committed: Vec<Record>,
    /// Producer id → its records with no marker read yet.
    pending: HashMap<i64, Vec<Record>>,
}

impl Sorter {
    pub(super) fn new(from: i64, end: i64) -> Self {
        Sorter {
            from,
            end,
            committed: Vec::new(),
            pending: HashMap::new(),
        }
    }

    /// One batch, in the log's order.
    pub(super) fn add(&mut self, batch: Batch) {
        if batch.base_offset >= self.end {
            return;
        }
        if let Some(marker) = batch.marker {
            let records = self.pending.remove(&batch.producer_id).unwrap_or_default();
            if marker == Marker::Commit {
                self.committed.extend(records);
            }
            return;
        }
        let (from, end) = (self.from, self.end);
        let records = batch
            .records
            .into_iter()
            .filter(|r| (from..end).contains(&r.offset))
            .map(|r| Record {
                offset: r.offset,
                key: r.key.map(|k| k.to_vec()).unwrap_or_default(),
                value: r.value.map(|v| v.to_vec()),
            });
        if batch.transactional {
            self.pending
                .entry(batch.producer_id)
                .or_default()
                .extend(records);
        } else {
            self.committed.extend(records);
        }
    }

    /// The records sorted, each list in offset order.
    pub(super) fn finish(self) -> PastStable {
        let mut committed = self.committed;
        committed.sort_by_key(|r| r.offset);
        let mut open: Vec<Record> = self.pending.into_values().flatten().collect();
        open.sort_by_key(|r| r.offset);
        PastStable {
            committed,
            open,
            end: self.end,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_kafka::records::BatchRecord;

    fn batch(offset: i64, producer: i64, transactional: bool, marker: Option<Marker>) -> Batch {
        Batch {
            base_offset: offset,
            last_offset: offset,
            producer_id: producer,
            producer_epoch: 0,
            transactional,
            marker,
            records: if marker.is_some() {
                Vec::new()
            } else {
                vec![BatchRecord {
                    offset,
                    key: Some(bytes::Bytes::from(format!("k{offset}"))),
                    value: Some(bytes::Bytes::from_static(b"v")),
                    timestamp: -1,
                    headers: Vec::new(),
                }]
            },
        }
    }

    fn offsets(records: &[Record]) -> Vec<i64> {
        records.iter().map(|r| r.offset).collect()
    }

    #[test]
    fn markers_decide_their_producers_records_and_nothing_else() {
        // 10: producer 1 (the open neighbour), 11: plain, 12-13: producer
        // 2 then its commit, 14-15: producer 3 then its abort, 16: producer
        // 2 again (a new transaction, open), 17: producer 1's marker at the
        // high watermark (not read).
        let mut s = Sorter::new(10, 17);
        s.add(batch(10, 1, true, None));
        s.add(batch(11, -1, false, None));
        s.add(batch(12, 2, true, None));
        s.add(batch(13, 2, true, Some(Marker::Commit)));
        s.add(batch(14, 3, true, None));
        s.add(batch(15, 3, true, Some(Marker::Abort)));
        s.add(batch(16, 2, true, None));
        s.add(batch(17, 1, true, Some(Marker::Commit)));
        let out = s.finish();
        assert_eq!(offsets(&out.committed), [11, 12]);
        assert_eq!(offsets(&out.open), [10, 16]);
        assert_eq!(out.end, 17);
        assert_eq!(out.committed[0].key, b"k11");
    }

    #[test]
    fn records_before_the_position_are_left_out() {
        // A batch that starts before the position (a Fetch answers the
        // whole batch holding the offset asked for).
        let mut s = Sorter::new(11, 20);
        let mut b = batch(10, -1, false, None);
        b.records.push(BatchRecord {
            offset: 11,
            key: None,
            value: None,
            timestamp: -1,
            headers: Vec::new(),
        });
        s.add(b);
        let out = s.finish();
        assert_eq!(offsets(&out.committed), [11]);
        assert!(out.committed[0].key.is_empty(), "a null key reads as empty");
        assert_eq!(out.committed[0].value, None);
    }
}
