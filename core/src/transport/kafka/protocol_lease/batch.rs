//! The record batches the writer sends: one transactional batch (magic 2)
//! per partition and write, uncompressed, its sequence continuing the
//! epoch's sequence of the partition; and the largest batch sent.
//!
//! [`encode_batch_at`] is byte-exact with Kafka's `DefaultRecordBatch`
//! (the tests decode what it writes with kafka-protocol's record decoder).

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::token::FencingToken;
use crate::transport::OutRecord;

/// librdkafka's default `message.max.bytes`.
pub(crate) const DEFAULT_MAX_BATCH: usize = 1_000_000;

/// The largest record batch the writer sends: the configuration's
/// `message.max.bytes`, as librdkafka's producers honour it (1,000,000
/// unless set). A larger one is refused before it is sent, naming its size.
pub(crate) fn max_batch_bytes(config: &super::super::KafkaConfig) -> usize {
    config
        .get("message.max.bytes")
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_MAX_BATCH)
}

/// The milliseconds since the Unix epoch, for record timestamps.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Encodes `records` as one transactional record batch of `token` whose
/// first record has sequence `sequence`, stamped now.
pub(crate) fn encode_batch(
    token: FencingToken,
    sequence: i32,
    records: &[&OutRecord],
) -> Result<Bytes> {
    encode_batch_at(token, sequence, records, now_ms())
}

/// Appends `v` as Kafka's zigzag varint (records of magic 2).
fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Appends a length-prefixed byte string, or -1 for none.
fn put_bytes(out: &mut Vec<u8>, what: &str, b: Option<&[u8]>) -> Result<()> {
    match b {
        None => put_varint(out, -1),
        Some(b) => {
            let len = i32::try_from(b.len()).map_err(|_| {
                Error::InvalidArgument(format!(
                    "a guarded record's {what} of {} bytes is over 2^31",
                    b.len()
                ))
            })?;
            put_varint(out, i64::from(len));
            out.extend_from_slice(b);
        }
    }
    Ok(())
}

/// [`encode_batch`] with the timestamp given: a record batch of magic 2
/// (Kafka's `DefaultRecordBatch`), uncompressed, transactional, every record
/// at `timestamp`. Headers go out as given, a key repeated included (the
/// `kafka-protocol` encoder keeps headers in a map, which would drop one;
/// the test below shows the two encoders write the same bytes otherwise).
pub(crate) fn encode_batch_at(
    token: FencingToken,
    sequence: i32,
    records: &[&OutRecord],
    timestamp: i64,
) -> Result<Bytes> {
    let count = i32::try_from(records.len())
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "a record batch of {} records (1 to 2^31 - 1 allowed)",
                records.len()
            ))
        })?;
    let mut body = Vec::new();
    let mut rec = Vec::new();
    for (i, r) in records.iter().enumerate() {
        rec.clear();
        rec.push(0); // attributes
        put_varint(&mut rec, 0); // timestamp delta
        put_varint(&mut rec, i as i64); // offset delta
        put_bytes(&mut rec, "key", r.key.as_deref())?;
        put_bytes(&mut rec, "value", r.value.as_deref())?;
        put_varint(&mut rec, r.headers.len() as i64);
        for (k, v) in &r.headers {
            put_bytes(&mut rec, "header key", Some(k.as_bytes()))?;
            put_bytes(&mut rec, "header value", Some(v))?;
        }
        put_varint(&mut body, rec.len() as i64);
        body.extend_from_slice(&rec);
    }
    // After the length field: leader epoch 4, magic 1, CRC 4, attributes 2,
    // last offset delta 4, timestamps 8 + 8, producer id 8, epoch 2, base
    // sequence 4, record count 4.
    let length = i32::try_from(49 + body.len()).map_err(|_| {
        Error::InvalidArgument(format!("a record batch of {} bytes", 61 + body.len()))
    })?;
    let mut out = Vec::with_capacity(61 + body.len());
    out.extend_from_slice(&0i64.to_be_bytes()); // base offset
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    out.push(2); // magic
    let crc_at = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&0x10i16.to_be_bytes()); // transactional, no compression
    out.extend_from_slice(&(count - 1).to_be_bytes());
    out.extend_from_slice(&timestamp.to_be_bytes());
    out.extend_from_slice(&timestamp.to_be_bytes());
    out.extend_from_slice(&token.producer_id.to_be_bytes());
    out.extend_from_slice(&token.producer_epoch.to_be_bytes());
    out.extend_from_slice(&sequence.to_be_bytes());
    out.extend_from_slice(&count.to_be_bytes());
    out.extend_from_slice(&body);
    let crc = crc32c::crc32c(&out[crc_at + 4..]);
    out[crc_at..crc_at + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(Bytes::from(out))
}

/// The sequence after `count` records from `base`: Kafka's sequences run
/// from 0 to `i32::MAX` and wrap to 0 (`DefaultRecordBatch.incrementSequence`).
pub(crate) fn next_sequence(base: i32, count: i32) -> i32 {
    base.wrapping_add(count) & i32::MAX
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use kafka_protocol::records::RecordBatchDecoder;

    pub(crate) fn rec(key: &str, value: Option<&str>, headers: &[(&str, &str)]) -> OutRecord {
        OutRecord {
            topic: "t".into(),
            partition: Some(0),
            key: Some(key.as_bytes().to_vec()),
            value: value.map(|v| v.as_bytes().to_vec()),
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
                .collect(),
        }
    }

    #[test]
    fn a_batch_carries_the_epoch_the_sequence_and_the_transactional_flag() {
        let token = FencingToken::new(4005, 7);
        let (a, b) = (rec("k1", Some("v1"), &[("h", "x")]), rec("k2", None, &[]));
        let bytes = encode_batch(token, 41, &[&a, &b]).unwrap();
        let mut buf = bytes.clone();
        let set = RecordBatchDecoder::decode(&mut buf).unwrap();
        assert_eq!(set.records.len(), 2);
        for (i, r) in set.records.iter().enumerate() {
            assert!(r.transactional && !r.control);
            assert_eq!((r.producer_id, r.producer_epoch), (4005, 7));
            assert_eq!(r.sequence, 41 + i as i32);
            assert_eq!(r.offset, i as i64);
        }
        assert_eq!(set.records[0].key.as_deref(), Some(&b"k1"[..]));
        assert_eq!(set.records[0].value.as_deref(), Some(&b"v1"[..]));
        assert_eq!(set.records[1].value, None, "a tombstone is a null value");
        let mut raw = bytes;
        let info = RecordBatchDecoder::decode_batch_info(&mut raw).unwrap();
        assert_eq!(info.len(), 1, "one batch");
        assert_eq!(info[0].base_sequence, 41);
        assert!(info[0].transactional);
    }

    #[test]
    fn sequences_wrap_to_zero_as_kafkas_do() {
        // Kafka's incrementSequence: base > MAX - n wraps to n - (MAX - base) - 1.
        let kafka = |base: i32, n: i32| {
            if base > i32::MAX - n {
                n - (i32::MAX - base) - 1
            } else {
                base + n
            }
        };
        for (base, n) in [
            (0, 1),
            (5, 3),
            (i32::MAX - 1, 1),
            (i32::MAX, 1),
            (i32::MAX, 2),
            (i32::MAX - 3, 10),
        ] {
            assert_eq!(next_sequence(base, n), kafka(base, n), "{base} + {n}");
        }
        // A batch that crosses the end is still one batch.
        let (a, b) = (rec("a", Some("1"), &[]), rec("b", Some("2"), &[]));
        let mut raw = encode_batch(FencingToken::new(1, 0), i32::MAX, &[&a, &b]).unwrap();
        let info = RecordBatchDecoder::decode_batch_info(&mut raw).unwrap();
        assert_eq!(
            (info.len(), info[0].base_sequence, info[0].record_count),
            (1, i32::MAX, 2)
        );
    }

    /// The same records through `kafka-protocol`'s encoder (which keeps
    /// headers in a map: no repeated key here).
    fn their_batch(token: FencingToken, sequence: i32, records: &[&OutRecord], ts: i64) -> Bytes {
        use kafka_protocol::protocol::StrBytes;
        use kafka_protocol::records::{
            Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
        };
        let recs: Vec<Record> = records
            .iter()
            .enumerate()
            .map(|(i, r)| Record {
                transactional: true,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: token.producer_id,
                producer_epoch: token.producer_epoch,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: sequence.wrapping_add(i as i32),
                timestamp: ts,
                key: r.key.as_deref().map(Bytes::copy_from_slice),
                value: r.value.as_deref().map(Bytes::copy_from_slice),
                headers: r
                    .headers
                    .iter()
                    .map(|(k, v)| {
                        (
                            StrBytes::from_string(k.clone()),
                            Some(Bytes::copy_from_slice(v)),
                        )
                    })
                    .collect(),
            })
            .collect();
        let mut buf = bytes::BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            recs.iter(),
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .unwrap();
        buf.freeze()
    }

    #[test]
    fn the_batch_is_byte_for_byte_what_kafka_protocol_encodes() {
        let token = FencingToken::new(4005, 7);
        let long = "x".repeat(300);
        let cases: Vec<Vec<OutRecord>> = vec![
            vec![rec("k", Some("v"), &[])],
            vec![
                rec("k1", Some("v1"), &[("h", "x"), ("trace", "abc")]),
                rec("k2", None, &[]),
            ],
            vec![
                rec(&long, Some(&long), &[(&long, &long)]),
                rec("", Some(""), &[("", "")]),
            ],
        ];
        for (n, case) in cases.iter().enumerate() {
            let refs: Vec<&OutRecord> = case.iter().collect();
            for sequence in [0, 41, i32::MAX] {
                let ours = encode_batch_at(token, sequence, &refs, 1_796_000_000_123).unwrap();
                let theirs = their_batch(token, sequence, &refs, 1_796_000_000_123);
                assert_eq!(ours, theirs, "case {n}, sequence {sequence}");
            }
        }
    }

    #[test]
    fn a_repeated_header_key_is_kept() {
        let a = rec("k", Some("v"), &[("trace", "1"), ("trace", "2")]);
        let bytes = encode_batch(FencingToken::new(1, 0), 0, &[&a]).unwrap();
        // The record's tail: 2 headers, each "trace" then its value.
        let tail: Vec<u8> = [
            &[4u8][..],
            &[10],
            b"trace",
            &[2],
            b"1",
            &[10],
            b"trace",
            &[2],
            b"2",
        ]
        .concat();
        assert!(bytes.ends_with(&tail), "{bytes:?}");
        let mut raw = bytes;
        let info = RecordBatchDecoder::decode_batch_info(&mut raw).unwrap();
        assert_eq!(info[0].record_count, 1);
    }
}
