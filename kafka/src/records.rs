//! Record batches as a Fetch answers them (magic 2, Kafka's
//! `DefaultRecordBatch`), read without trusting a byte of them.
//!
//! [`read_batches`] walks a Fetch answer's `records` bytes batch by batch.
//! It promises:
//!
//! - **bounds before allocation**: every length and count is checked
//!   against the bytes left before anything is read or kept; records are
//!   pushed one by one, never reserved from a count the wire gave, so a
//!   few hostile bytes cannot make it allocate more than their own size;
//! - **the checksum**: a batch whose CRC-32C does not match is an error,
//!   never records;
//! - **a cut last batch is not an error**: a broker may end an answer in
//!   the middle of a batch (its byte limits); the walk stops there and
//!   [`Batches::next_offset`] says where to fetch again;
//! - **compressed batches**: gzip, snappy, lz4 and zstd batches are
//!   decompressed (pure Rust codecs); the bytes one answer decompresses to
//!   are at most [`DECOMPRESSED_MAX`]: a batch that would pass it ends the
//!   walk as a cut batch does, unless it is the first, which is
//!   [`RecordsError::TooLarge`];
//! - **what it does not read**: a codec Kafka does not define and a batch
//!   of another magic are errors, not guesses.
//!
//! A control batch (a transaction marker) is read into
//! [`Batch::marker`]: COMMIT or ABORT of the batch's producer.

use bytes::Bytes;

/// A transaction marker: the end of a producer's transaction on the
/// partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// The transaction's records are committed.
    Commit,
    /// The transaction's records are aborted.
    Abort,
}

/// One record of a data batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchRecord {
    /// The record's offset in its partition.
    pub offset: i64,
    /// The key, or `None` for a null key.
    pub key: Option<Bytes>,
    /// The value, or `None` for a null value (a tombstone).
    pub value: Option<Bytes>,
    /// The record's timestamp (epoch milliseconds): the producer's create
    /// time, or the broker's append time for a topic that sets
    /// `message.timestamp.type=LogAppendTime`; -1 when the producer gave
    /// none.
    pub timestamp: i64,
    /// The record's headers, in their order: each key (never null) and its
    /// value (`None` for a null value).
    pub headers: Vec<(Bytes, Option<Bytes>)>,
}

/// One record batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The offset of the batch's first record.
    pub base_offset: i64,
    /// The offset of the batch's last record (compaction may have removed
    /// records, so it may lie past the last one kept).
    pub last_offset: i64,
    /// The producer id (-1 for a producer without one).
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// Whether the batch is part of a transaction.
    pub transactional: bool,
    /// `Some` for a control batch: the marker it carries.
    pub marker: Option<Marker>,
    /// The records of a data batch (none for a control batch).
    pub records: Vec<BatchRecord>,
}

/// The batches of one Fetch answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Batches {
    /// The whole batches, in offset order.
    pub batches: Vec<Batch>,
    /// The offset after the last whole batch, or `None` when there was
    /// none.
    pub next_offset: Option<i64>,
}

/// Why the bytes are not record batches this reader can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordsError {
    /// The bytes break the format (a length, count or varint out of
    /// bounds, a bad checksum). Names the batch's offset and what broke.
    #[error("malformed record batch at offset {offset}: {what}")]
    Malformed {
        /// The batch's base offset (as far as it could be read).
        offset: i64,
        /// What is wrong.
        what: String,
    },
    /// A compressed batch whose codec Kafka does not define, or whose
    /// compressed bytes its codec cannot read.
    #[error(
        "the record batch at offset {offset} is compressed ({codec}) and cannot be read: {what}"
    )]
    Compressed {
        /// The batch's base offset.
        offset: i64,
        /// The codec's name.
        codec: &'static str,
        /// What the codec said.
        what: String,
    },
    /// A compressed batch that decompresses to more than
    /// [`DECOMPRESSED_MAX`] bytes.
    #[error(
        "the record batch at offset {offset} ({codec}) decompresses to more than {limit} bytes"
    )]
    TooLarge {
        /// The batch's base offset.
        offset: i64,
        /// The codec's name.
        codec: &'static str,
        /// The limit, in bytes.
        limit: usize,
    },
    /// A batch of another format than magic 2.
    #[error("the record batch at offset {offset} has magic {magic}; only magic 2 is read")]
    Magic {
        /// The batch's base offset.
        offset: i64,
        /// Its magic byte.
        magic: i8,
    },
}

/// The bytes of a batch header before its records.
const HEADER: usize = 61;
/// Where the part the checksum covers starts (the attributes).
const CRC_FROM: usize = 21;
/// The smallest record: length, attributes, timestamp and offset deltas,
/// key and value lengths, header count (one byte each).
const MIN_RECORD: usize = 7;

/// The most bytes the compressed batches of one answer decompress to.
pub const DECOMPRESSED_MAX: usize = 64 << 20;

/// The batches in `bytes` (a Fetch answer's `records` of one partition).
pub fn read_batches(bytes: &Bytes) -> Result<Batches, RecordsError> {
    let mut out = Batches::default();
    let mut at = 0usize;
    let mut budget = DECOMPRESSED_MAX;
    while bytes.len() - at >= 12 {
        let base_offset = be_i64(&bytes[at..]);
        let length = be_i32(&bytes[at + 8..]);
        let malformed = |what: String| RecordsError::Malformed {
            offset: base_offset,
            what,
        };
        let Ok(length) = usize::try_from(length) else {
            return Err(malformed(format!("negative batch length {length}")));
        };
        if length < HEADER - 12 {
            return Err(malformed(format!(
                "batch length {length} is shorter than a header"
            )));
        }
        let Some(end) = at.checked_add(12 + length).filter(|&e| e <= bytes.len()) else {
            // Cut by the broker's byte limit: fetch again from here.
            break;
        };
        let batch = match read_batch(&bytes.slice(at..end), base_offset, &mut budget) {
            // Past the answer's budget: fetch again from here.
            Err(RecordsError::TooLarge { .. }) if !out.batches.is_empty() => break,
            other => other?,
        };
        out.next_offset = Some(batch.last_offset + 1);
        out.batches.push(batch);
        at = end;
    }
    Ok(out)
}

/// One whole batch (`b` holds exactly its bytes); what a compressed one
/// decompresses to is taken from `budget`.
fn read_batch(b: &Bytes, base_offset: i64, budget: &mut usize) -> Result<Batch, RecordsError> {
    let malformed = |what: String| RecordsError::Malformed {
        offset: base_offset,
        what,
    };
    let attributes = check_frame(b, base_offset)?;
    let body = records_of(b, attributes, base_offset, budget)?;
    let transactional = attributes & 0x10 != 0;
    let control = attributes & 0x20 != 0;
    let last_delta = be_i32(&b[23..]);
    if last_delta < 0 {
        return Err(malformed(format!(
            "negative last offset delta {last_delta}"
        )));
    }
    let last_offset = base_offset
        .checked_add(i64::from(last_delta))
        .ok_or_else(|| malformed("the last offset overflows".into()))?;
    let producer_id = be_i64(&b[43..]);
    let producer_epoch = be_i16(&b[51..]);
    let count = be_i32(&b[57..]);
    let left = body.len();
    let fits = usize::try_from(count).is_ok_and(|c| c <= left / MIN_RECORD);
    if !fits {
        return Err(malformed(format!(
            "{count} records cannot fit in the {left} bytes left"
        )));
    }
    // The batch's first and largest timestamps: a record's is the first
    // plus its delta, or the largest for a log-append-time batch.
    let first_timestamp = be_i64(&b[27..]);
    let append_time = (attributes & 0x08 != 0).then(|| be_i64(&b[35..]));
    let mut r = Reader {
        b: &body,
        at: 0,
        base_offset,
        first_timestamp,
        append_time,
    };
    let mut records = Vec::new();
    let mut marker = None;
    for _ in 0..count {
        let rec = r.record()?;
        if control {
            marker = Some(control_marker(&rec, base_offset)?);
        } else {
            records.push(rec);
        }
    }
    if r.at != body.len() {
        return Err(malformed(format!(
            "{} bytes after the last record",
            body.len() - r.at
        )));
    }
    if control && marker.is_none() {
        return Err(malformed("a control batch without a record".into()));
    }
    Ok(Batch {
        base_offset,
        last_offset,
        producer_id,
        producer_epoch,
        transactional,
        marker,
        records,
    })
}

/// Checks what a batch's records are read under: the magic byte (2) and
/// the checksum of its bytes. Returns the batch's attributes.
fn check_frame(b: &Bytes, base_offset: i64) -> Result<i16, RecordsError> {
    let magic = b[16] as i8;
    if magic != 2 {
        return Err(RecordsError::Magic {
            offset: base_offset,
            magic,
        });
    }
    let malformed = |what: String| RecordsError::Malformed {
        offset: base_offset,
        what,
    };
    let crc = u32::from_be_bytes([b[17], b[18], b[19], b[20]]);
    let computed = crc32c::crc32c(&b[CRC_FROM..]);
    if crc != computed {
        return Err(malformed(format!(
            "checksum {crc:#010x} but the bytes give {computed:#010x}"
        )));
    }
    let attributes = be_i16(&b[21..]);
    Ok(attributes)
}

/// The record bytes of the batch `b`: after its header, decompressed for a
/// compressed batch (taking what they take from `budget`).
fn records_of(
    b: &Bytes,
    attributes: i16,
    base_offset: i64,
    budget: &mut usize,
) -> Result<Bytes, RecordsError> {
    let codec = match codec::Codec::of(attributes) {
        Ok(None) => return Ok(b.slice(HEADER..)),
        Ok(Some(codec)) => codec,
        Err(n) => {
            return Err(RecordsError::Compressed {
                offset: base_offset,
                codec: "an unknown codec",
                what: format!("codec number {n} is not Kafka's"),
            })
        }
    };
    match codec::decompress(codec, &b[HEADER..], *budget) {
        Ok(body) => {
            *budget -= body.len();
            Ok(Bytes::from(body))
        }
        Err(codec::Failed::TooLarge(limit)) => Err(RecordsError::TooLarge {
            offset: base_offset,
            codec: codec.name(),
            limit,
        }),
        Err(codec::Failed::Broken(what)) => Err(RecordsError::Compressed {
            offset: base_offset,
            codec: codec.name(),
            what,
        }),
    }
}

/// The marker a control record's key names (version 0, type 0 ABORT or
/// 1 COMMIT).
fn control_marker(rec: &BatchRecord, base_offset: i64) -> Result<Marker, RecordsError> {
    let key = rec.key.as_deref().unwrap_or_default();
    if key.len() < 4 {
        return Err(RecordsError::Malformed {
            offset: base_offset,
            what: format!("a control record key of {} bytes", key.len()),
        });
    }
    match be_i16(&key[2..]) {
        0 => Ok(Marker::Abort),
        1 => Ok(Marker::Commit),
        other => Err(RecordsError::Malformed {
            offset: base_offset,
            what: format!("control record type {other}"),
        }),
    }
}

/// A cursor over one batch's records.
struct Reader<'a> {
    b: &'a Bytes,
    at: usize,
    base_offset: i64,
    first_timestamp: i64,
    /// The batch's append time, for a log-append-time batch.
    append_time: Option<i64>,
}

impl Reader<'_> {
    fn malformed(&self, what: impl Into<String>) -> RecordsError {
        RecordsError::Malformed {
            offset: self.base_offset,
            what: what.into(),
        }
    }

    /// A zigzag varint of at most `max_bytes` bytes.
    fn varint(&mut self, max_bytes: usize) -> Result<i64, RecordsError> {
        let mut raw: u64 = 0;
        for i in 0..max_bytes {
            let Some(&byte) = self.b.get(self.at) else {
                return Err(self.malformed("a varint runs past the batch"));
            };
            self.at += 1;
            raw |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok((raw >> 1) as i64 ^ -((raw & 1) as i64));
            }
        }
        Err(self.malformed("a varint is too long"))
    }

    fn int(&mut self) -> Result<i64, RecordsError> {
        self.varint(5)
    }

    /// `n` bytes, checked against what is left of `end`.
    fn bytes(&mut self, n: i64, end: usize) -> Result<Option<Bytes>, RecordsError> {
        if n < 0 {
            return Ok(None);
        }
        let n = usize::try_from(n).map_err(|_| self.malformed("a length overflows"))?;
        if n > end.saturating_sub(self.at) {
            return Err(self.malformed(format!("a field of {n} bytes runs past its record")));
        }
        let out = self.b.slice(self.at..self.at + n);
        self.at += n;
        Ok(Some(out))
    }

    fn record(&mut self) -> Result<BatchRecord, RecordsError> {
        let length = self.int()?;
        let length = usize::try_from(length)
            .map_err(|_| self.malformed(format!("record length {length}")))?;
        if length > self.b.len() - self.at {
            return Err(self.malformed(format!("a record of {length} bytes runs past the batch")));
        }
        let end = self.at + length;
        if end == self.at {
            return Err(self.malformed("an empty record"));
        }
        self.at += 1; // attributes (unused)
        let timestamp_delta = self.varint(10)?;
        let delta = self.int()?;
        let key_len = self.int()?;
        let key = self.bytes(key_len, end)?;
        let value_len = self.int()?;
        let value = self.bytes(value_len, end)?;
        let count = self.int()?;
        let mut headers = Vec::new();
        for _ in 0..count.max(0) {
            let k = self.int()?;
            if k < 0 {
                return Err(self.malformed("a header with a null key"));
            }
            let key = self.bytes(k, end)?.unwrap_or_default();
            let v = self.int()?;
            headers.push((key, self.bytes(v, end)?));
        }
        let timestamp = match self.append_time {
            Some(t) => t,
            None if self.first_timestamp < 0 => -1,
            None => self.first_timestamp.saturating_add(timestamp_delta),
        };
        if self.at != end {
            return Err(self.malformed("a record's length does not match its fields"));
        }
        Ok(BatchRecord {
            offset: self.base_offset.saturating_add(delta),
            key,
            value,
            timestamp,
            headers,
        })
    }
}

fn be_i64(b: &[u8]) -> i64 {
    i64::from_be_bytes(b[..8].try_into().expect("8 bytes"))
}

fn be_i32(b: &[u8]) -> i32 {
    i32::from_be_bytes(b[..4].try_into().expect("4 bytes"))
}

fn be_i16(b: &[u8]) -> i16 {
    i16::from_be_bytes(b[..2].try_into().expect("2 bytes"))
}

mod codec;

#[cfg(test)]
mod tests;
