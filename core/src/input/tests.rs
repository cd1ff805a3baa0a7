//! The reader's pure parts: positions, options, the out-of-range error and
//! the term's error mapping.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use krabka_kafka::records::BatchRecord;
use krabka_kafka::PartitionRead;

use super::options::InputOutOfRange;
use super::positions::Positions;
use super::{InputOptions, InputPosition};
use crate::error::{Error, ErrorKind};
use crate::leadership::ended_error;

fn pos(topic: &str, partition: i32, offset: i64) -> InputPosition {
    InputPosition::new(topic, partition, offset)
}

fn read(topic: &str, partition: i32, offsets: &[i64], next: i64) -> PartitionRead {
    PartitionRead {
        topic: topic.into(),
        partition,
        records: offsets
            .iter()
            .map(|&offset| BatchRecord {
                offset,
                key: None,
                value: Some(Bytes::from_static(b"v")),
                timestamp: -1,
                headers: Vec::new(),
            })
            .collect(),
        next_offset: next,
        last_stable: next,
        high_watermark: next,
    }
}

#[test]
fn an_assignment_is_checked_naming_what_is_wrong() {
    let cases = [
        (vec![], "at least one"),
        (
            vec![pos("in", 0, 0), pos("in", 0, 5)],
            "\"in\"/0 is assigned twice",
        ),
        (vec![pos("", 0, 0)], "the topic must be named"),
        (vec![pos("in", -1, 0)], "\"in\"/-1"),
        (vec![pos("in", 0, -2)], "from offset -2"),
    ];
    for (assigned, says) in cases {
        let e = Positions::new(assigned.clone()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{assigned:?}");
        assert!(e.to_string().contains(says), "{assigned:?}: {e}");
    }
    let ok = Positions::new(vec![pos("in", 1, 3), pos("in", 0, 0), pos("other", 1, 7)]).unwrap();
    assert_eq!(
        ok.all(),
        &[pos("in", 1, 3), pos("in", 0, 0), pos("other", 1, 7)]
    );
}

#[test]
fn positions_advance_exactly_to_each_next_offset_and_never_back() {
    let mut p = Positions::new(vec![pos("in", 0, 10), pos("in", 1, 0)]).unwrap();
    // Partition 0 read 10 and 12 (11 aborted) and a marker at 13: next 14.
    p.advance(&[read("in", 0, &[10, 12], 14), read("in", 1, &[], 0)])
        .unwrap();
    assert_eq!(p.all(), &[pos("in", 0, 14), pos("in", 1, 0)]);

    // An answer ending before the position or before its own last record
    // moves nothing, not even the partitions that were fine.
    for bad in [
        vec![read("in", 1, &[0], 1), read("in", 0, &[], 13)],
        vec![read("in", 0, &[14, 15], 15)],
        vec![read("elsewhere", 0, &[], 0)],
    ] {
        let e = p.advance(&bad).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Fatal, "{e}");
        assert_eq!(p.all(), &[pos("in", 0, 14), pos("in", 1, 0)]);
    }
}

#[test]
fn seek_moves_one_assigned_partition_anywhere_and_refuses_the_rest() {
    let mut p = Positions::new(vec![pos("in", 0, 10), pos("in", 1, 4)]).unwrap();
    p.seek("in", 0, 2).unwrap();
    p.seek("in", 1, 40).unwrap();
    assert_eq!(p.all(), &[pos("in", 0, 2), pos("in", 1, 40)]);
    let e = p.seek("in", 2, 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("\"in\"/2 is not") || e.to_string().contains("\"in\"/2"));
    assert!(e.to_string().contains("not assigned"), "{e}");
    let e = p.seek("in", 0, -1).unwrap_err();
    assert!(e.to_string().contains("offset -1"), "{e}");
    assert_eq!(p.all(), &[pos("in", 0, 2), pos("in", 1, 40)]);
    let asked = p.to_read();
    assert_eq!(
        asked
            .iter()
            .map(|r| (r.topic.as_str(), r.partition, r.offset))
            .collect::<Vec<_>>(),
        [("in", 0, 2), ("in", 1, 40)]
    );
}

#[test]
fn options_refuse_a_timeout_within_the_long_poll_and_no_bytes() {
    assert!(InputOptions::default().check().is_ok());
    let e = InputOptions::default()
        .with_max_wait(Duration::from_secs(5))
        .with_timeout(Duration::from_secs(5))
        .check()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("must exceed its max_wait"), "{e}");
    let e = InputOptions::default()
        .with_max_bytes(0)
        .check()
        .unwrap_err();
    assert!(e.to_string().contains("max_bytes is 0"), "{e}");
}

#[test]
fn out_of_range_names_the_partition_the_offset_and_the_range() {
    let mut e = InputOutOfRange {
        topic: "in".into(),
        partition: 3,
        offset: 1000,
        log_start: Some(40),
        last_stable: Some(90),
    };
    let text = e.to_string();
    for says in ["offset 1000 of \"in\"/3", "offsets 40 up to 90", "seek"] {
        assert!(text.contains(says), "{text}");
    }
    e.last_stable = None;
    assert!(e.to_string().contains("could not be read"), "{e}");
}

#[test]
fn an_ended_term_gives_the_error_a_guarded_write_gets() {
    let cases = [
        (Error::Resigned, ErrorKind::Resigned),
        (Error::Fenced("newer".into()), ErrorKind::Fenced),
        (Error::LeaseExpired("late".into()), ErrorKind::LeaseExpired),
        (Error::fatal("renewing", "denied"), ErrorKind::Fatal),
    ];
    for (reason, kind) in cases {
        let text = reason.to_string();
        let e = ended_error(&Arc::new(reason));
        assert_eq!(e.kind(), kind, "{e}");
        if kind == ErrorKind::Fatal {
            assert!(e.to_string().contains("the leadership ended"), "{e}");
            let source = std::error::Error::source(&e)
                .expect("the reason")
                .to_string();
            assert_eq!(source, text);
        } else {
            assert!(e.to_string().contains(&text) || text.contains(&e.to_string()));
        }
    }
}
