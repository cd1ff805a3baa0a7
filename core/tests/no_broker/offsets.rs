//! Input offsets in a guarded write's transaction, on the in-memory
//! transport (manual clock): the records and the consumer group's offsets
//! commit together; a successor resumes from what the last leader
//! committed; a deposed leader's write moves nothing; a pending commit is
//! waited for; bad offsets are refused before anything is sent.

use crate::world;

use std::time::Duration;

use krabka_coordination::transport::{
    CommittedOffset, ConsumedOffsets, Coordinator, InputOffset, LeaseWriter,
};
use krabka_coordination::{Error, ErrorKind};
use world::*;

const GROUP: &str = "billing-export-input";
const INPUT: &str = "invoices";

/// The input position `offset` of `INPUT`/0 for [`GROUP`], with `metadata`.
fn consumed(offset: i64, metadata: Option<&str>) -> ConsumedOffsets {
    ConsumedOffsets::new(
        GROUP,
        vec![InputOffset {
            metadata: metadata.map(str::to_owned),
            ..InputOffset::new(INPUT, 0, offset)
        }],
    )
}

/// The input partitions the tests ask about.
fn input() -> Vec<(String, Vec<i32>)> {
    vec![(INPUT.to_owned(), vec![0, 1])]
}

/// What [`GROUP`] committed for `INPUT`/0 and /1, as offsets.
fn offsets_of(found: &[CommittedOffset]) -> Vec<(i32, Option<i64>)> {
    found.iter().map(|c| (c.partition, c.offset)).collect()
}

#[tokio::test(flavor = "current_thread")]
async fn records_and_offsets_commit_together_and_a_successor_resumes_from_them() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let nothing = a.committed_offsets(GROUP, &input()).await.unwrap();
    assert_eq!(offsets_of(&nothing), [(0, None), (1, None)]);

    a.write_with_offsets(vec![order("o1")], consumed(1, Some("batch-1")))
        .await
        .unwrap();
    assert_eq!(orders(&w), ["o1"]);
    let found = a.committed_offsets(GROUP, &input()).await.unwrap();
    assert_eq!(offsets_of(&found), [(0, Some(1)), (1, None)]);
    assert_eq!(found[0].metadata.as_deref(), Some("batch-1"));
    // Only offsets: nothing written, the position moves.
    a.write_with_offsets(vec![], consumed(2, None))
        .await
        .unwrap();
    assert_eq!(orders(&w), ["o1"]);
    assert_eq!(w.cluster.committed_offset(GROUP, INPUT, 0), Some(2));
    // An empty metadata is none, as Kafka keeps no metadata.
    a.write_with_offsets(vec![], consumed(2, Some("")))
        .await
        .unwrap();
    let found = a.committed_offsets(GROUP, &input()).await.unwrap();
    assert_eq!(found[0].metadata, None);

    // A hand-over: the successor reads where the last leader left off.
    let b = w.spawn("b");
    w.run_until(T0 + 1_000).await;
    a.resign().await.unwrap();
    settle().await;
    let b = leader(b).await;
    let resumed = b.committed_offsets(GROUP, &input()).await.unwrap();
    assert_eq!(offsets_of(&resumed), [(0, Some(2)), (1, None)]);
    b.write_with_offsets(vec![order("o3")], consumed(3, None))
        .await
        .unwrap();
    assert_eq!(orders(&w), ["o1", "o3"]);
    assert_eq!(w.cluster.committed_offset(GROUP, INPUT, 0), Some(3));
}

#[tokio::test(flavor = "current_thread")]
async fn a_deposed_leaders_write_with_offsets_is_fenced_and_moves_nothing() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    a.write_with_offsets(vec![order("o1")], consumed(1, None))
        .await
        .unwrap();
    // Another process mints a newer epoch for the role (a take-over).
    let _newer = w.transport().acquire_epoch(ROLE, LEASE).await.unwrap();
    let e = a
        .write_with_offsets(vec![order("o2")], consumed(2, None))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Fenced(_)), "{e:?}");
    assert!(a.err().unwrap().is_fenced(), "the term ended");
    assert_eq!(
        orders(&w),
        ["o1"],
        "the deposed write's records are not visible"
    );
    assert_eq!(
        w.cluster.committed_offset(GROUP, INPUT, 0),
        Some(1),
        "the deposed write's offsets did not move"
    );
    // Offsets alone are fenced the same way.
    let e = a
        .write_with_offsets(vec![], consumed(5, None))
        .await
        .unwrap_err();
    assert!(e.is_fenced(), "{e:?}");
    assert_eq!(w.cluster.committed_offset(GROUP, INPUT, 0), Some(1));
}

/// A write whose commit went unconfirmed leaves its offsets pending: a
/// read waits, and they move exactly when its records become visible.
#[tokio::test(flavor = "current_thread")]
async fn offsets_of_an_unconfirmed_commit_move_with_its_records() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = std::sync::Arc::new(leader(a).await);
    a.write_with_offsets(vec![order("o1")], consumed(1, None))
        .await
        .unwrap();
    w.cluster.set_next_commit_unknown(false);
    let e = a
        .write_with_offsets(vec![order("lost")], consumed(2, None))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutcomeUnknown, "{e}");
    let reader = std::sync::Arc::clone(&a);
    let read = tokio::spawn(async move { reader.committed_offsets(GROUP, &input()).await });
    settle().await;
    assert!(!read.is_finished(), "a pending commit is waited for");
    // The next write decides the pending transaction: it did not commit.
    a.write(vec![order("o2")]).await.unwrap();
    settle().await;
    let found = read.await.unwrap().unwrap();
    assert_eq!(offsets_of(&found), [(0, Some(1)), (1, None)]);
    assert_eq!(orders(&w), ["o1", "o2"]);

    w.cluster.set_next_commit_unknown(true);
    let e = a
        .write_with_offsets(vec![order("o3")], consumed(3, None))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutcomeUnknown, "{e}");
    assert_eq!(w.cluster.committed_offset(GROUP, INPUT, 0), Some(1));
    a.write(vec![order("o4")]).await.unwrap();
    assert_eq!(orders(&w), ["o1", "o2", "o3", "o4"]);
    assert_eq!(w.cluster.committed_offset(GROUP, INPUT, 0), Some(3));
}

/// A read of offsets a pending commit holds is bounded: past its time it
/// fails transient, naming the group and the partition.
#[tokio::test(flavor = "current_thread")]
async fn a_read_of_pending_offsets_gives_up_naming_them() {
    let w = World::new();
    let epoch = w.transport().mint(ROLE).unwrap();
    w.cluster.set_next_commit_unknown(true);
    let e = epoch
        .write_guarded_with_offsets(vec![order("o1")], consumed(1, None), LEASE)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutcomeUnknown, "{e}");
    let read = tokio::spawn(async move {
        epoch
            .committed_offsets(GROUP, &input(), Duration::from_secs(5))
            .await
    });
    w.run_until(T0 + 4_000).await;
    assert!(!read.is_finished(), "waits within its bound");
    w.run_until(T0 + 6_000).await;
    let e = read.await.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transient, "{e}");
    let said = e.to_string();
    assert!(
        said.contains(GROUP) && said.contains("\"invoices\"/0") && !said.contains("/1"),
        "{said}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn bad_offsets_are_refused_at_the_call_and_no_offsets_is_a_plain_write() {
    let w = World::new();
    let a = w.spawn("a");
    w.run_until(T0).await;
    let a = leader(a).await;
    let requests = w.cluster.requests();
    let cases: [(ConsumedOffsets, &str); 4] = [
        (
            ConsumedOffsets::new("", vec![InputOffset::new(INPUT, 0, 1)]),
            "group",
        ),
        (consumed(-4, None), "offset -4"),
        (
            ConsumedOffsets::new(GROUP, vec![InputOffset::new(INPUT, -1, 1)]),
            "partition -1",
        ),
        (
            ConsumedOffsets::new(
                GROUP,
                vec![InputOffset::new(INPUT, 2, 1), InputOffset::new(INPUT, 2, 5)],
            ),
            "\"invoices\"/2 is named twice",
        ),
    ];
    for (offsets, named) in cases {
        let e = a
            .write_with_offsets(vec![order("bad")], offsets)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains(named), "{named}: {e}");
    }
    assert_eq!(w.cluster.requests(), requests, "nothing was sent");
    assert!(orders(&w).is_empty());
    let e = a
        .committed_offsets(GROUP, &[(INPUT.to_owned(), vec![-3])])
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");

    // No offsets: exactly a write.
    a.write_with_offsets(vec![order("o1")], ConsumedOffsets::new(GROUP, vec![]))
        .await
        .unwrap();
    assert_eq!(orders(&w), ["o1"]);
    assert_eq!(w.cluster.committed_offset(GROUP, INPUT, 0), None);

    // After a resign: refused at the call, as a write is.
    let write = a.write_with_offsets(vec![order("late")], consumed(9, None));
    a.resign().await.unwrap();
    assert!(matches!(write.await, Err(Error::Resigned)));
    assert_eq!(w.cluster.committed_offset(GROUP, INPUT, 0), None);
}

/// The test kit reads back the input position a leader committed.
#[tokio::test(flavor = "current_thread")]
async fn the_test_kit_reads_back_the_committed_position() {
    let cluster = krabka_coordination::testing::TestCluster::new();
    let a = cluster.process("a");
    let lead = a
        .client()
        .acquire(ROLE, "a", a.client().leadership_options())
        .await
        .unwrap();
    assert_eq!(cluster.committed_offset(GROUP, INPUT, 0), None);
    lead.write_with_offsets(vec![order("o1")], consumed(7, None))
        .await
        .unwrap();
    assert_eq!(cluster.committed_offset(GROUP, INPUT, 0), Some(7));
    assert_eq!(cluster.guarded_writes().len(), 1);
}
