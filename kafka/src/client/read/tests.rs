use super::*;

fn r(topic: &str, partition: i32, offset: i64) -> ReadFrom {
    ReadFrom {
        topic: topic.into(),
        partition,
        offset,
    }
}

#[test]
fn reads_no_fetch_can_ask_are_refused_by_name() {
    let refused = |from: &[ReadFrom], says: &str| match check_reads(from) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains(says), "{m}"),
        other => panic!("{from:?}: {other:?}"),
    };
    refused(&[], "no partition");
    refused(&[r("t", -1, 0)], "\"t\"/-1");
    refused(&[r("t", 0, -5)], "offset -5");
    refused(&[r("", 0, 0)], "must be named");
    refused(
        &[r("t", 0, 0), r("u", 0, 0), r("t", 0, 9)],
        "\"t\"/0 is named twice",
    );
    check_reads(&[r("t", 0, 0), r("t", 1, 0), r("u", 0, 7)]).unwrap();
}

#[test]
fn one_fetch_names_each_topic_once() {
    let req = committed_fetch(&[r("t", 0, 1), r("u", 0, 2), r("t", 3, 4)], 250, 1000);
    assert_eq!(req.isolation_level, 1);
    assert_eq!((req.max_wait_ms, req.min_bytes), (250, 1));
    let topics: Vec<(&str, Vec<(i32, i64)>)> = req
        .topics
        .iter()
        .map(|t| {
            let parts = t.partitions.iter();
            (
                t.topic.0.as_str(),
                parts.map(|p| (p.partition, p.fetch_offset)).collect(),
            )
        })
        .collect();
    assert_eq!(topics, [("t", vec![(0, 1), (3, 4)]), ("u", vec![(0, 2)])]);
}
