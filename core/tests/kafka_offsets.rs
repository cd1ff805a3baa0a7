//! Input offsets in a guarded write's transaction, on a real Kafka: a
//! pipeline leader writes one output per input with the input's offset in
//! the same transaction; the commit shows in `committed_offsets` and in a
//! read_committed read of the output; a successor (after a resign, or a
//! newer epoch that deposed the leader) resumes from the committed offset;
//! a deposed leader's write with offsets is fenced, its records never
//! visible, the group's offset unmoved.
//!
//! Needs a real cluster: `KRABKA_BOOTSTRAP`, or `ci/kafka.sh start 1` is run.
#![cfg(feature = "kafka")]

mod support;

use std::time::Duration;

use krabka_coordination::client::Client;
use krabka_coordination::events::{self, EventReceiver};
use krabka_coordination::leadership::{Leadership, LeadershipOptions};
use krabka_coordination::transport::kafka::{KafkaTransport, TopicSpec};
use krabka_coordination::transport::{ConsumedOffsets, Coordinator, InputOffset, StateReader};
use support::*;

/// The longest any awaited step may take before the test gives up.
const PATIENCE: Duration = Duration::from_secs(60);

/// A client on the single-node cluster, with the shared topic in place.
async fn client() -> Client {
    init_tracing();
    let client = Client::new(config(&bootstrap())).expect("client");
    client
        .ensure_state_topic(TopicSpec::development())
        .await
        .expect("the shared state topic");
    client
}

fn options(client: &Client) -> LeadershipOptions {
    client
        .leadership_options()
        .with_lease_duration(Duration::from_secs(10))
        .with_renew_interval(Duration::from_secs(2))
        .with_challenge_stagger(Duration::from_secs(1))
}

/// A pipeline: its input topic, its output topic (with a transport that
/// reads it read_committed), its consumer group and its role.
struct Pipeline {
    input: String,
    output: String,
    out_reader: KafkaTransport,
    group: String,
    role: String,
}

impl Pipeline {
    async fn new(prefix: &str) -> Pipeline {
        let (input, _) = data_topic(&format!("{prefix}-in")).await;
        let (output, out_reader) = data_topic(&format!("{prefix}-out")).await;
        Pipeline {
            input,
            output,
            out_reader,
            group: unique(&format!("{prefix}-group")),
            role: unique(prefix),
        }
    }

    /// The input position after input `i` (the next to read: `i + 1`).
    fn after(&self, i: i64) -> ConsumedOffsets {
        ConsumedOffsets::new(
            self.group.clone(),
            vec![InputOffset {
                metadata: Some(format!("after {i}")),
                ..InputOffset::new(self.input.clone(), 0, i + 1)
            }],
        )
    }

    /// Processes input `i`: its output, with its offset, in one transaction.
    async fn process(&self, leader: &Leadership, i: i64) -> krabka_coordination::Result<()> {
        let out = data_record(&self.output, 0, format!("out-{i}").as_bytes());
        leader.write_with_offsets(vec![out], self.after(i)).await
    }

    /// Where the group's committed offset says to resume (0 when nothing).
    async fn resume_at(&self, leader: &Leadership) -> i64 {
        let found = leader
            .committed_offsets(&self.group, &[(self.input.clone(), vec![0])])
            .await
            .expect("committed offsets");
        assert_eq!(found.len(), 1);
        assert_eq!(
            (found[0].topic.as_str(), found[0].partition),
            (&*self.input, 0)
        );
        found[0].offset.unwrap_or(0)
    }

    /// The output's values, read_committed.
    async fn outputs(&self) -> Vec<String> {
        self.out_reader
            .read_partition(0)
            .await
            .expect("read the output")
            .into_iter()
            .map(|r| String::from_utf8(r.value.unwrap_or_default()).unwrap())
            .collect()
    }
}

/// Receives events until one named `name`.
async fn until_event(rx: &mut EventReceiver, name: &str) {
    tokio::time::timeout(PATIENCE, async {
        while rx.recv().await.expect("the member's events").kind.name() != name {}
    })
    .await
    .unwrap_or_else(|_| panic!("no {name:?} event"));
}

fn expected(range: std::ops::Range<i64>) -> Vec<String> {
    range.map(|i| format!("out-{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successor_resumes_at_the_offset_committed_with_the_output() {
    let p = Pipeline::new("eos-handover").await;
    let first = client().await;
    let a = first
        .acquire(&p.role, "a", options(&first))
        .await
        .expect("a leads");
    assert_eq!(p.resume_at(&a).await, 0, "nothing committed yet");
    for i in 0..3 {
        p.process(&a, i).await.expect("a processes");
    }
    assert_eq!(p.resume_at(&a).await, 3);
    let found = a
        .committed_offsets(&p.group, &[(p.input.clone(), vec![0])])
        .await
        .unwrap();
    assert_eq!(found[0].metadata.as_deref(), Some("after 2"));
    assert_eq!(p.outputs().await, expected(0..3));

    // Only offsets (an input that makes no output): the position moves.
    a.write_with_offsets(vec![], p.after(3)).await.unwrap();
    assert_eq!(p.resume_at(&a).await, 4);
    // Without metadata: Kafka keeps an empty string, read back as none, as
    // the in-memory transport answers.
    let bare = ConsumedOffsets::new(
        p.group.clone(),
        vec![InputOffset::new(p.input.clone(), 0, 4)],
    );
    a.write_with_offsets(vec![], bare).await.unwrap();
    let found = a
        .committed_offsets(&p.group, &[(p.input.clone(), vec![0])])
        .await
        .unwrap();
    assert_eq!(found[0].metadata, None, "{found:?}");

    let second = client().await;
    let (tx, mut rx) = events::channel();
    let b = {
        let (second, role) = (second.clone(), p.role.clone());
        let opts = options(&second).with_events(tx);
        tokio::spawn(async move { second.acquire(&role, "b", opts).await })
    };
    until_event(&mut rx, "waiting").await;
    a.resign().await.unwrap();
    let b = tokio::time::timeout(PATIENCE, b)
        .await
        .expect("b takes over")
        .unwrap()
        .unwrap();
    let from = p.resume_at(&b).await;
    assert_eq!(from, 4, "b resumes where a committed");
    for i in from..7 {
        p.process(&b, i).await.expect("b processes");
    }
    assert_eq!(p.resume_at(&b).await, 7);
    let mut want = expected(0..3);
    want.extend(expected(4..7));
    assert_eq!(p.outputs().await, want, "each output once, in input order");
    b.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_leaders_write_with_offsets_is_fenced_and_moves_nothing() {
    let p = Pipeline::new("eos-fence").await;
    let c = client().await;
    let a = c.acquire(&p.role, "a", options(&c)).await.expect("a leads");
    p.process(&a, 0).await.expect("a processes");

    // A newer epoch of the role (a take-over a missed): its mint fences a.
    let other = transport("eos-successor").await;
    let newer = other
        .acquire_epoch(&p.role, Duration::from_secs(10))
        .await
        .expect("a newer epoch");
    assert!(newer.token() > a.token());

    let e = p
        .process(&a, 1)
        .await
        .expect_err("a deposed leader's write");
    assert!(e.is_fenced(), "{e:?}");
    assert!(a.err().is_some_and(|why| why.is_fenced()), "the term ended");
    let e = a
        .write_with_offsets(vec![], p.after(5))
        .await
        .expect_err("offsets alone");
    assert!(e.is_fenced(), "{e:?}");

    // The successor's view: the offset of a's last committed write.
    let found = newer
        .committed_offsets(
            &p.group,
            &[(p.input.clone(), vec![0])],
            Duration::from_secs(10),
        )
        .await
        .expect("committed offsets");
    assert_eq!(found[0].offset, Some(1), "the deposed write moved nothing");
    assert_eq!(
        p.outputs().await,
        expected(0..1),
        "its records are invisible"
    );

    // The successor goes on from there, and what it commits is seen.
    let out = data_record(&p.output, 0, b"out-1");
    newer
        .write_guarded_with_offsets(vec![out], p.after(1), Duration::from_secs(10))
        .await
        .expect("the successor processes");
    let found = newer
        .committed_offsets(
            &p.group,
            &[(p.input.clone(), vec![0])],
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(found[0].offset, Some(2));
    assert_eq!(p.outputs().await, expected(0..2));
}

/// Bad offsets are refused at the call, naming the value, before anything
/// reaches the cluster: the term goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_offsets_are_refused_before_anything_is_sent() {
    let p = Pipeline::new("eos-bad").await;
    let c = client().await;
    let a = c.acquire(&p.role, "a", options(&c)).await.expect("a leads");
    let twice = ConsumedOffsets::new(
        p.group.clone(),
        vec![
            InputOffset::new(p.input.clone(), 0, 1),
            InputOffset::new(p.input.clone(), 0, 2),
        ],
    );
    let e = a.write_with_offsets(vec![], twice).await.unwrap_err();
    assert!(e.to_string().contains("named twice"), "{e}");
    let e = a
        .write_with_offsets(vec![], ConsumedOffsets::new("", vec![]))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("group"), "{e}");
    assert!(a.is_held());
    assert_eq!(p.resume_at(&a).await, 0);
    a.resign().await.unwrap();
}

/// A predecessor's transaction left open with a pending offset commit (a
/// leader that stalled between its TxnOffsetCommit and its EndTxn): the
/// next leader's mint aborts it, so `committed_offsets` on its leadership
/// never returns the pending offset, and the predecessor's epoch can no
/// longer commit it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_predecessors_pending_offsets_never_reach_the_next_leader() {
    use krabka_kafka::client::retry::{retry, Backoff, Tried};
    use krabka_kafka::{deadline_in, OffsetToCommit};
    let p = Pipeline::new("eos-pending").await;
    let c = client().await;
    let t = transport("eos-stalled").await;
    let raw = t.kafka_client().kafka().clone();
    let stalled = raw
        .init_producer_id(&p.role, 10_000, deadline_in(PATIENCE))
        .await
        .expect("the stalled leader's epoch");
    let offsets = [OffsetToCommit {
        topic: p.input.clone(),
        partition: 0,
        offset: 10,
        metadata: None,
    }];
    done(
        "AddOffsetsToTxn",
        retry(deadline_in(PATIENCE), Backoff::TRANSACTION, || {
            raw.add_offsets(&p.role, stalled, &p.group, deadline_in(PATIENCE))
        })
        .await,
    );
    done(
        "TxnOffsetCommit",
        retry(deadline_in(PATIENCE), Backoff::TRANSACTION, || {
            raw.commit_offsets_in_txn(&p.role, stalled, &p.group, &offsets, deadline_in(PATIENCE))
        })
        .await,
    );
    let asked = [(p.input.clone(), vec![0])];
    let seen = raw
        .committed_offsets_now(&p.group, &asked, deadline_in(PATIENCE))
        .await
        .unwrap();
    assert_eq!(seen[0].committed, krabka_kafka::Committed::Pending);

    // The next leader's mint fences the stalled epoch and aborts its
    // transaction: the offset it resumes from is not the pending one.
    let a = c.acquire(&p.role, "a", options(&c)).await.expect("a leads");
    assert_eq!(p.resume_at(&a).await, 0, "the pending offset was dropped");
    let late = retry(deadline_in(PATIENCE), Backoff::TRANSACTION, || {
        raw.commit_offsets_in_txn(&p.role, stalled, &p.group, &offsets, deadline_in(PATIENCE))
    })
    .await;
    let fenced = matches!(late, Tried::Failed(krabka_kafka::TxnError::Fenced(_)));
    assert!(fenced, "the stalled epoch's late commit is fenced");
    assert_eq!(p.resume_at(&a).await, 0);
    a.resign().await.unwrap();
}

/// The value of a request that succeeded within its retries.
fn done<T>(what: &str, tried: krabka_kafka::client::retry::Tried<T, krabka_kafka::TxnError>) -> T {
    use krabka_kafka::client::retry::Tried;
    match tried {
        Tried::Done(v) => v,
        Tried::Failed(e) => panic!("{what}: {e:?}"),
        Tried::OutOfTime(why) => panic!("{what}: out of time: {why}"),
    }
}
