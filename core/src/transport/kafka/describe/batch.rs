//! Who wrote a record, as the partition's log says: the producer id and
//! epoch in the header of the record batch at an offset.
//!
//! The lease producer learns its token from DescribeTransactions (librdkafka
//! has no getter), and that answer can be stale: a coordinator that was
//! paused, and lost the transaction log's partition meanwhile, answers from
//! its old state until it learns that it lost it. In the fault campaign one
//! such answer gave a new leader the token of its killed predecessor, and
//! its records were written with a newer epoch than the one their values
//! named. The batch header cannot be stale that way: the partition leader
//! wrote it with the epoch of the producer that sent the batch, and a
//! read_uncommitted Fetch returns only what is below the high watermark,
//! which every replica holds the same. So the lease producer checks its
//! token against the header of its own first record after a mint and after
//! every abort, before it commits (see `lease.rs`).

use kafka_protocol::messages::{ApiKey, FetchResponse};
use tokio::time::Instant;

use super::{code_name, one_batch_fetch, retry_until, Attempt, DescribeClient};
use crate::error::{Error, Result};
use crate::token::FencingToken;

use super::metadata::TOPIC_DENIED;

/// Where the producer id and epoch sit in a record batch (magic 2): base
/// offset (8), batch length (4), partition leader epoch (4), magic (1), CRC
/// (4), attributes (2), last offset delta (4), base and max timestamps
/// (8 + 8), then the producer id (8) and epoch (2).
const MAGIC_AT: usize = 16;
const LAST_OFFSET_DELTA_AT: usize = 23;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
/// The header of a batch ends with the base sequence (4) and record count (4).
const BATCH_HEADER_LEN: usize = 61;

/// What the log says about the batch holding an offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writer {
    /// The batch's producer id and epoch.
    Batch(FencingToken),
    /// The principal may not read the topic.
    Denied,
}

impl DescribeClient {
    /// The producer id and epoch of the batch that holds `offset` of
    /// `topic`/`partition`, read (uncommitted) from the partition's leader.
    /// Retries a moved leader, an offset not yet readable and a broken
    /// connection until `deadline`; then [`Error::Transient`].
    pub(crate) async fn batch_writer(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        deadline: Instant,
    ) -> Result<Writer> {
        let context = || {
            format!(
                "reading the writer of offset {offset} of {}/{partition}",
                crate::error::quote(topic)
            )
        };
        let started = Instant::now();
        retry_until(
            deadline,
            || async {
                let addr = self.partition_leader(topic, partition, deadline).await?;
                self.fetch_batch(&addr, topic, partition, offset, deadline)
                    .await
            },
            || self.forget_leader(topic, partition),
            |reason| {
                Error::transient(
                    context(),
                    format!("gave up after {:?}: {reason}", started.elapsed()),
                )
            },
        )
        .await
    }

    /// One read_uncommitted Fetch of `offset` at `addr`, which returns the
    /// batch holding it (the broker returns a whole first batch, whatever
    /// the byte limits).
    async fn fetch_batch(
        &self,
        addr: &str,
        topic: &str,
        partition: i32,
        offset: i64,
        deadline: Instant,
    ) -> Result<Writer, Attempt> {
        let conn = self.connection(addr, deadline).await.map_err(|a| match a {
            Attempt::Backoff(r) => Attempt::Refind(r),
            other => other,
        })?;
        // Versions 4 to 12 name the topic (13 and later give its id).
        let Some(version) = conn.version_for(ApiKey::Fetch, (4, 12)) else {
            return Err(Attempt::Fail(Error::fatal(
                format!("Fetch at {addr}"),
                "the broker supports no Fetch version 4 to 12",
            )));
        };
        // read_uncommitted: the transaction is open.
        let req = one_batch_fetch(topic, partition, offset, 0);
        let resp: FetchResponse = self
            .call(&conn, ApiKey::Fetch, version, &req, deadline)
            .await
            .map_err(|a| match a {
                Attempt::Backoff(r) => Attempt::Refind(r),
                other => other,
            })?;
        let what = || format!("Fetch of offset {offset} at {addr}");
        if resp.error_code == TOPIC_DENIED {
            return Ok(Writer::Denied);
        }
        let Some(p) = resp
            .responses
            .iter()
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == partition)
        else {
            return Err(Attempt::Backoff(format!(
                "{} answered no partition",
                what()
            )));
        };
        match p.error_code {
            0 => {}
            TOPIC_DENIED => return Ok(Writer::Denied),
            // NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
            // LEADER_NOT_AVAILABLE, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
            // OFFSET_OUT_OF_RANGE (a leader not yet caught up): ask Metadata
            // again.
            6 | 3 | 5 | 74 | 75 | 1 => {
                return Err(Attempt::Refind(format!(
                    "{}: {}",
                    what(),
                    code_name(p.error_code)
                )))
            }
            code => {
                return Err(Attempt::Backoff(format!("{}: {}", what(), code_name(code))));
            }
        }
        let records = p.records.as_deref().unwrap_or(&[]);
        match writer_of(records, offset) {
            Ok(Some(t)) => Ok(Writer::Batch(t)),
            // Below the high watermark every acknowledged record is
            // readable; a replica behind it shows nothing yet.
            Ok(None) => Err(Attempt::Refind(format!(
                "{} returned no batch holding it (high watermark {})",
                what(),
                p.high_watermark
            ))),
            Err(why) => Err(Attempt::Fail(Error::fatal(what(), why))),
        }
    }
}

/// The producer id and epoch of the batch in `records` that holds `offset`:
/// `None` when none does (the bytes end first); an error for a batch that is
/// not magic 2.
pub(crate) fn writer_of(mut records: &[u8], offset: i64) -> Result<Option<FencingToken>, String> {
    while records.len() >= BATCH_HEADER_LEN {
        let base = i64::from_be_bytes(records[0..8].try_into().expect("8 bytes"));
        let length = i32::from_be_bytes(records[8..12].try_into().expect("4 bytes"));
        let magic = records[MAGIC_AT];
        if magic != 2 {
            return Err(format!(
                "a record batch of magic {magic} (2 expected) at offset {base}"
            ));
        }
        let delta = i32::from_be_bytes(
            records[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4]
                .try_into()
                .expect("4 bytes"),
        );
        let last = base.saturating_add(i64::from(delta));
        if base <= offset && offset <= last {
            let pid = i64::from_be_bytes(
                records[PRODUCER_ID_AT..PRODUCER_ID_AT + 8]
                    .try_into()
                    .expect("8 bytes"),
            );
            let epoch = i16::from_be_bytes(
                records[PRODUCER_EPOCH_AT..PRODUCER_EPOCH_AT + 2]
                    .try_into()
                    .expect("2 bytes"),
            );
            return Ok(Some(FencingToken::new(pid, epoch)));
        }
        if base > offset {
            return Ok(None);
        }
        // The batch length counts the bytes after the length field.
        let Some(next) = usize::try_from(length)
            .ok()
            .and_then(|l| l.checked_add(12))
            .filter(|n| *n >= BATCH_HEADER_LEN)
        else {
            return Err(format!(
                "a record batch of length {length} at offset {base}"
            ));
        };
        if next > records.len() {
            return Ok(None);
        }
        records = &records[next..];
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch header (and `body` more bytes) as the broker writes it.
    fn batch(base: i64, delta: i32, pid: i64, epoch: i16, magic: u8, body: usize) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&base.to_be_bytes());
        b.extend_from_slice(&((BATCH_HEADER_LEN - 12 + body) as i32).to_be_bytes());
        b.extend_from_slice(&7i32.to_be_bytes()); // partition leader epoch
        b.push(magic);
        b.extend_from_slice(&0u32.to_be_bytes()); // crc
        b.extend_from_slice(&0x10i16.to_be_bytes()); // attributes: transactional
        b.extend_from_slice(&delta.to_be_bytes());
        b.extend_from_slice(&1i64.to_be_bytes());
        b.extend_from_slice(&2i64.to_be_bytes());
        b.extend_from_slice(&pid.to_be_bytes());
        b.extend_from_slice(&epoch.to_be_bytes());
        b.extend_from_slice(&0i32.to_be_bytes()); // base sequence
        b.extend_from_slice(&(delta + 1).to_be_bytes()); // record count
        assert_eq!(b.len(), BATCH_HEADER_LEN);
        b.extend(std::iter::repeat_n(0xAB, body));
        b
    }

    #[test]
    fn finds_the_batch_holding_the_offset() {
        let mut log = batch(10, 2, 4005, 12, 2, 30);
        log.extend(batch(13, 0, 4005, 13, 2, 5));
        for (offset, want) in [
            (10, Some(FencingToken::new(4005, 12))),
            (12, Some(FencingToken::new(4005, 12))),
            (13, Some(FencingToken::new(4005, 13))),
            (14, None),
            (9, None),
        ] {
            assert_eq!(writer_of(&log, offset).unwrap(), want, "offset {offset}");
        }
    }

    #[test]
    fn a_cut_batch_or_bytes_shorter_than_a_header_hold_nothing() {
        let mut log = batch(10, 0, 1, 1, 2, 30);
        log.extend(&batch(11, 0, 1, 2, 2, 30)[..40]);
        assert_eq!(writer_of(&log, 11).unwrap(), None);
        assert_eq!(writer_of(&[], 0).unwrap(), None);
        // The header of a cut batch still names its writer.
        let cut = &batch(11, 0, 9, 3, 2, 30)[..BATCH_HEADER_LEN];
        assert_eq!(writer_of(cut, 11).unwrap(), Some(FencingToken::new(9, 3)));
    }

    #[test]
    fn refuses_other_magics_and_impossible_lengths() {
        let e = writer_of(&batch(0, 0, 1, 1, 1, 0), 5).unwrap_err();
        assert!(e.contains("magic 1"), "{e}");
        let mut bad = batch(0, 0, 1, 1, 2, 0);
        bad[8..12].copy_from_slice(&(-5i32).to_be_bytes());
        let e = writer_of(&bad, 5).unwrap_err();
        assert!(e.contains("length -5"), "{e}");
    }
}
