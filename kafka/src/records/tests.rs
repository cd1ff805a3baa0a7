use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use proptest::prelude::*;

use super::*;

/// A record of one batch as kafka-protocol's encoder takes it.
fn theirs(
    offset: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    producer: (i64, i16),
    transactional: bool,
    control: bool,
) -> Record {
    let mut headers = IndexMap::new();
    if !control {
        headers.insert(
            StrBytes::from_static_str("h"),
            Some(Bytes::from_static(b"x")),
        );
    }
    Record {
        transactional,
        control,
        delete_horizon: false,
        partition_leader_epoch: 3,
        producer_id: producer.0,
        producer_epoch: producer.1,
        timestamp_type: TimestampType::Creation,
        offset,
        sequence: if producer.0 < 0 { -1 } else { offset as i32 },
        timestamp: 1_700_000_000_000 + offset,
        key: key.map(Bytes::copy_from_slice),
        value: value.map(Bytes::copy_from_slice),
        headers,
    }
}

/// The bytes of one batch of `records` (same producer and flags).
fn encode(records: &[Record]) -> BytesMut {
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf
}

/// A control record's key: version 0, then the type (0 abort, 1 commit).
fn control_key(commit: bool) -> [u8; 4] {
    [0, 0, 0, u8::from(commit)]
}

fn a_transaction_then_its_commit() -> Bytes {
    let p = (4005, 2);
    let mut buf = encode(&[
        theirs(10, Some(b"k1"), Some(b"v1"), p, true, false),
        theirs(11, Some(b"k2"), None, p, true, false),
    ]);
    buf.extend_from_slice(&encode(&[theirs(
        12,
        Some(&control_key(true)),
        Some(&[0, 0, 0, 0, 0, 0]),
        p,
        true,
        true,
    )]));
    buf.extend_from_slice(&encode(&[theirs(
        13,
        Some(b"plain"),
        Some(b"v"),
        (-1, -1),
        false,
        false,
    )]));
    buf.freeze()
}

#[test]
fn reads_data_batches_and_markers_as_kafka_protocol_does() {
    let bytes = a_transaction_then_its_commit();
    let read = read_batches(&bytes).unwrap();
    assert_eq!(read.batches.len(), 3);
    assert_eq!(read.next_offset, Some(14));
    let txn = &read.batches[0];
    assert_eq!((txn.base_offset, txn.last_offset), (10, 11));
    assert_eq!((txn.producer_id, txn.producer_epoch), (4005, 2));
    assert!(txn.transactional);
    assert_eq!(txn.marker, None);
    assert_eq!(
        txn.records,
        vec![
            BatchRecord {
                offset: 10,
                key: Some(Bytes::from_static(b"k1")),
                value: Some(Bytes::from_static(b"v1")),
                timestamp: 1_700_000_000_010,
                headers: vec![(Bytes::from_static(b"h"), Some(Bytes::from_static(b"x")))],
            },
            BatchRecord {
                offset: 11,
                key: Some(Bytes::from_static(b"k2")),
                value: None,
                timestamp: 1_700_000_000_011,
                headers: vec![(Bytes::from_static(b"h"), Some(Bytes::from_static(b"x")))],
            },
        ]
    );
    let marker = &read.batches[1];
    assert_eq!(marker.marker, Some(Marker::Commit));
    assert!(marker.records.is_empty());
    assert_eq!(marker.base_offset, 12);
    let plain = &read.batches[2];
    assert!(!plain.transactional);
    assert_eq!(plain.producer_id, -1);

    // The same records as kafka-protocol's decoder reads them.
    let mut buf = bytes.clone();
    let mut theirs = Vec::new();
    while !buf.is_empty() {
        theirs.extend(RecordBatchDecoder::decode(&mut buf).unwrap().records);
    }
    let ours: Vec<(i64, Option<Bytes>)> = read
        .batches
        .iter()
        .flat_map(|b| b.records.iter().map(|r| (r.offset, r.key.clone())))
        .collect();
    let reference: Vec<(i64, Option<Bytes>)> = theirs
        .iter()
        .filter(|r| !r.control)
        .map(|r| (r.offset, r.key.clone()))
        .collect();
    assert_eq!(ours, reference);
}

#[test]
fn an_abort_marker_is_read_as_such() {
    let bytes = encode(&[theirs(
        0,
        Some(&control_key(false)),
        Some(&[0, 0, 0, 0, 0, 0]),
        (9, 1),
        true,
        true,
    )])
    .freeze();
    let read = read_batches(&bytes).unwrap();
    assert_eq!(read.batches[0].marker, Some(Marker::Abort));
}

#[test]
fn a_cut_last_batch_ends_the_walk_where_to_fetch_again() {
    let bytes = a_transaction_then_its_commit();
    let whole = read_batches(&bytes).unwrap();
    let second_ends = {
        // The end of the second batch: 12 + its length field.
        let first = 12 + be_i32(&bytes[8..]) as usize;
        first + 12 + be_i32(&bytes[first + 8..]) as usize
    };
    for cut in second_ends..bytes.len() {
        let read = read_batches(&bytes.slice(..cut)).unwrap();
        assert_eq!(read.batches, whole.batches[..2], "cut at {cut}");
        assert_eq!(read.next_offset, Some(13), "cut at {cut}");
    }
    let none = read_batches(&bytes.slice(..30)).unwrap();
    assert!(none.batches.is_empty());
    assert_eq!(none.next_offset, None);
}

#[test]
fn a_flipped_byte_is_a_checksum_error_naming_the_batch() {
    let mut raw = a_transaction_then_its_commit().to_vec();
    let at = 70; // inside the first batch's records
    raw[at] ^= 0x40;
    let e = read_batches(&Bytes::from(raw)).unwrap_err();
    assert!(
        matches!(e, RecordsError::Malformed { offset: 10, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("checksum"), "{e}");
}

#[test]
fn compressed_and_old_batches_are_refused_by_name() {
    let mut raw = a_transaction_then_its_commit().to_vec();
    raw[22] |= 0x04; // zstd
    let crc = crc32c::crc32c(&raw[CRC_FROM..12 + be_i32(&raw[8..]) as usize]);
    raw[17..21].copy_from_slice(&crc.to_be_bytes());
    let e = read_batches(&Bytes::from(raw)).unwrap_err();
    assert!(
        matches!(
            e,
            RecordsError::Compressed {
                offset: 10,
                codec: "zstd",
                ..
            }
        ),
        "{e}"
    );
    let mut raw = a_transaction_then_its_commit().to_vec();
    raw[22] |= 0x06; // not Kafka's
    let crc = crc32c::crc32c(&raw[CRC_FROM..12 + be_i32(&raw[8..]) as usize]);
    raw[17..21].copy_from_slice(&crc.to_be_bytes());
    let e = read_batches(&Bytes::from(raw)).unwrap_err();
    assert!(e.to_string().contains("codec number 6"), "{e}");
    let mut raw = a_transaction_then_its_commit().to_vec();
    raw[16] = 1;
    let e = read_batches(&Bytes::from(raw)).unwrap_err();
    assert!(matches!(e, RecordsError::Magic { magic: 1, .. }), "{e}");
}

#[test]
fn a_huge_record_count_is_refused_before_anything_is_kept() {
    let mut raw = a_transaction_then_its_commit().to_vec();
    raw[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    let end = 12 + be_i32(&raw[8..]) as usize;
    let crc = crc32c::crc32c(&raw[CRC_FROM..end]);
    raw[17..21].copy_from_slice(&crc.to_be_bytes());
    let e = read_batches(&Bytes::from(raw)).unwrap_err();
    assert!(e.to_string().contains("cannot fit"), "{e}");
}

proptest! {
    /// Any bytes: an answer or an error, never a panic; and what is read
    /// never holds more records than the bytes could carry.
    #[test]
    fn arbitrary_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(read) = read_batches(&Bytes::from(raw.clone())) {
            let n: usize = read.batches.iter().map(|b| b.records.len()).sum();
            prop_assert!(n * MIN_RECORD <= raw.len());
        }
    }

    /// A valid answer with one byte changed (checksum mended, so the
    /// parser itself is exercised): never a panic.
    #[test]
    fn mutated_batches_never_panic(at in 0usize..200, byte in any::<u8>()) {
        let mut raw = a_transaction_then_its_commit().to_vec();
        let at = at % raw.len();
        raw[at] = byte;
        let first = usize::try_from(be_i32(&raw[8..])).unwrap_or(0).saturating_add(12);
        if (CRC_FROM..raw.len()).contains(&first) {
            let crc = crc32c::crc32c(&raw[CRC_FROM..first]);
            raw[17..21].copy_from_slice(&crc.to_be_bytes());
        }
        let _ = read_batches(&Bytes::from(raw));
    }
}

/// `batch` (one uncompressed batch) with its records gzipped: the
/// attributes, length and checksum made to match.
fn gzipped(batch: &[u8]) -> Bytes {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(&batch[HEADER..]).unwrap();
    let body = e.finish().unwrap();
    let mut out = batch[..HEADER].to_vec();
    out.extend_from_slice(&body);
    let len = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&len.to_be_bytes());
    out[22] |= 0x01;
    let crc = crc32c::crc32c(&out[CRC_FROM..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(out)
}

#[test]
fn a_compressed_batch_reads_as_its_records() {
    let records: Vec<Record> = (0..20)
        .map(|i| {
            let v = format!("value {i}");
            theirs(100 + i, None, Some(v.as_bytes()), (7, 0), false, false)
        })
        .collect();
    let plain = encode(&records).freeze();
    let want = read_batches(&plain).unwrap();
    assert_eq!(want.batches.len(), 1, "{want:?}");
    let got = read_batches(&gzipped(&plain)).unwrap();
    assert_eq!(got, want);
    assert_eq!(got.batches[0].records.len(), 20);
    assert_eq!(got.next_offset, Some(120));
}

/// A batch that decompresses past the answer's budget ends the walk
/// before it; alone first, it is an error naming the limit.
#[test]
fn decompression_past_the_budget_ends_the_walk() {
    let big = vec![b'z'; DECOMPRESSED_MAX / 2 + 1];
    let one = |offset| {
        let r = theirs(offset, None, Some(&big), (-1, -1), false, false);
        gzipped(&encode(&[r]))
    };
    let mut two = one(0).to_vec();
    two.extend_from_slice(&one(1));
    let got = read_batches(&Bytes::from(two)).unwrap();
    assert_eq!(got.batches.len(), 1);
    assert_eq!(got.next_offset, Some(1));

    let huge = vec![b'z'; DECOMPRESSED_MAX + 1];
    let r = theirs(5, None, Some(&huge), (-1, -1), false, false);
    let e = read_batches(&gzipped(&encode(&[r]))).unwrap_err();
    assert!(
        matches!(
            e,
            RecordsError::TooLarge {
                offset: 5,
                codec: "gzip",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_log_append_time_batch_gives_every_record_the_batch_time() {
    // One batch (a producer whose sequences follow its offsets), then
    // marked LogAppendTime (attribute bit 3) as a broker marks it, with
    // its checksum made again. Its largest timestamp stands for the
    // broker's append time.
    let p = (7, 0);
    let mut raw = encode(&[
        theirs(20, Some(b"a"), Some(b"1"), p, false, false),
        theirs(21, Some(b"b"), Some(b"2"), p, false, false),
    ]);
    raw[22] |= 0x08;
    let crc = crc32c::crc32c(&raw[CRC_FROM..]);
    raw[17..21].copy_from_slice(&crc.to_be_bytes());
    let read = read_batches(&raw.freeze()).unwrap();
    assert_eq!(read.batches.len(), 1);
    let times: Vec<i64> = read.batches[0]
        .records
        .iter()
        .map(|r| r.timestamp)
        .collect();
    assert_eq!(times, [1_700_000_000_021, 1_700_000_000_021]);
    // Without the mark, each record's own create time.
    let plain = encode(&[
        theirs(20, Some(b"a"), Some(b"1"), p, false, false),
        theirs(21, Some(b"b"), Some(b"2"), p, false, false),
    ]);
    let read = read_batches(&plain.freeze()).unwrap();
    let times: Vec<i64> = read.batches[0]
        .records
        .iter()
        .map(|r| r.timestamp)
        .collect();
    assert_eq!(times, [1_700_000_000_020, 1_700_000_000_021]);
}
