//! The test kit ([`krabka_coordination::testing`]) as a user's test drives
//! it: elections, failover after a crash at the deadline plus rank × stagger,
//! a paused leader's write fenced on resume, a resign's hand-over, a cut
//! and a heal, calls that fail for a while, the guarded writes read back
//! with their tokens, an observer and a leader loop, on a current-thread
//! and a multi-thread runtime. No test waits on real time for the
//! cluster's; each runs in milliseconds with 30 s leases.

use std::time::Duration;

use krabka_coordination::events::{channel, Event, EventKind, EventReceiver};
use krabka_coordination::leadership::Leadership;
use krabka_coordination::observe::ObserveOptions;
use krabka_coordination::testing::{TestCluster, TestProcess};
use krabka_coordination::transport::memory::ProcessState;
use krabka_coordination::transport::OutRecord;
use krabka_coordination::{Error, ErrorKind};
use tokio::task::JoinHandle;

const ROLE: &str = "billing";
const LEASE_MS: i64 = 30_000;
const STAGGER_MS: i64 = 5_000;

fn order(value: &str) -> OutRecord {
    OutRecord {
        topic: "orders".into(),
        partition: Some(0),
        key: None,
        value: Some(value.as_bytes().to_vec()),
        headers: vec![],
    }
}

/// `p`'s member `member` acquires [`ROLE`] in a task, its events to the
/// returned receiver.
fn contend(
    p: &TestProcess,
    member: &str,
) -> (JoinHandle<Result<Leadership, Error>>, EventReceiver) {
    let (tx, rx) = channel();
    let client = p.client().clone();
    let member = member.to_owned();
    let task = tokio::spawn(async move {
        client
            .acquire(ROLE, &member, client.leadership_options().with_events(tx))
            .await
    });
    (task, rx)
}

fn drain(rx: &mut EventReceiver) -> Vec<Event> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}

fn elected_at(events: &[Event]) -> Option<i64> {
    events
        .iter()
        .find(|e| matches!(e.kind, EventKind::Elected { .. }))
        .map(|e| e.at)
}

async fn won(task: JoinHandle<Result<Leadership, Error>>) -> Leadership {
    assert!(task.is_finished(), "the member should lead by now");
    task.await.unwrap().unwrap()
}

#[tokio::test]
async fn the_first_member_leads_and_renews_while_time_passes() {
    let cluster = TestCluster::new();
    let a = cluster.process("a");
    let (task, mut events) = contend(&a, "a");
    cluster.settle().await;
    let lead = won(task).await;
    assert!(cluster
        .describe_leadership(ROLE)
        .await
        .unwrap()
        .authoritative(&lead.token()));
    cluster.advance(Duration::from_secs(120)).await;
    assert!(lead.is_held());
    let renewed = drain(&mut events)
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Renewed { .. }))
        .count();
    // A renewal every 10 s over two minutes.
    assert!((11..=13).contains(&renewed), "{renewed} renewals");
    assert_eq!(cluster.now_millis(), TestCluster::START_MILLIS + 120_000);
}

#[tokio::test]
async fn a_crashed_leader_is_replaced_at_its_deadline_plus_the_stagger() {
    // Rank 0 (b) challenges at the deadline; rank 1 (c, behind a crashed b)
    // at the deadline plus one stagger.
    crashed_leader_replaced_by_rank(0).await;
    crashed_leader_replaced_by_rank(1).await;
}

/// `a` leads, then `rank + 1` standbys register in order; the kit crashes
/// `a` and the first `rank` standbys (their registrations stay, so the
/// survivor waits at challenger rank `rank`). The survivor is not elected
/// 1 ms before `a`'s deadline plus rank × stagger and is elected exactly
/// then, with a token newer than `a`'s.
async fn crashed_leader_replaced_by_rank(rank: usize) {
    let cluster = TestCluster::new();
    let a = cluster.process("a");
    let stagger = a.client().leadership_options().election.challenge_stagger;
    assert_eq!(stagger, Duration::from_millis(STAGGER_MS as u64));
    let (task, _) = contend(&a, "a");
    cluster.settle().await;
    let lead_a = won(task).await;
    let standbys: Vec<_> = ["b", "c"][..=rank]
        .iter()
        .map(|name| {
            let p = cluster.process(name);
            let (task, events) = contend(&p, name);
            (p, task, events)
        })
        .collect();
    cluster.settle().await;
    let deadline = lead_a.lease().deadline;
    a.crash();
    assert_eq!(a.state(), ProcessState::Crashed);
    for (p, _, _) in &standbys[..rank] {
        p.crash();
    }
    let (_, task, mut events) = standbys.into_iter().next_back().unwrap();
    // Rank k challenges at the deadline plus k staggers; the kit moves the
    // clock to exactly that instant.
    let turn = deadline + rank as i64 * STAGGER_MS;
    let just_before = (turn - 1 - cluster.now_millis()) as u64;
    cluster.advance(Duration::from_millis(just_before)).await;
    assert!(!task.is_finished(), "rank {rank} must wait until {turn}");
    assert_eq!(elected_at(&drain(&mut events)), None);
    cluster.advance(Duration::from_millis(1)).await;
    let lead = won(task).await;
    assert!(lead.token() > lead_a.token());
    assert_eq!(lead.lease().granted_at, turn);
    assert_eq!(elected_at(&drain(&mut events)), Some(turn));
    assert!(cluster
        .describe_leadership(ROLE)
        .await
        .unwrap()
        .authoritative(&lead.token()));
    // A crash is for good.
    a.resume();
    assert_eq!(a.state(), ProcessState::Crashed);
}

#[tokio::test]
async fn a_paused_leader_wakes_deposed_and_its_write_is_fenced() {
    paused_write_is_fenced().await;
}

/// On several threads, the write held across the pause and the lease timer
/// that came due during it wake together: the write still goes first and is
/// fenced (not reported as of unknown outcome by the term's end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_leaders_write_is_fenced_on_a_multi_thread_runtime() {
    for _ in 0..5 {
        paused_write_is_fenced().await;
    }
}

async fn paused_write_is_fenced() {
    let cluster = TestCluster::new();
    let (a, b) = (cluster.process("a"), cluster.process("b"));
    let (task, _) = contend(&a, "a");
    cluster.settle().await;
    let lead_a = won(task).await;
    lead_a.write(vec![order("a-1")]).await.unwrap();
    let (task_b, _) = contend(&b, "b");
    cluster.settle().await;
    // The write was on its way when the process stopped.
    a.pause();
    let write = tokio::spawn(async move {
        let r = lead_a.write(vec![order("a-2")]).await;
        (r, lead_a)
    });
    cluster
        .advance(Duration::from_secs(LEASE_MS as u64 / 1000 + 10))
        .await;
    let lead_b = won(task_b).await;
    lead_b.write(vec![order("b-1")]).await.unwrap();
    assert!(!write.is_finished(), "a paused process does nothing");
    a.resume();
    cluster.settle().await;
    let (r, lead_a) = write.await.unwrap();
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Fenced, "{e}");
    assert!(!lead_a.is_held());
    // Only what the authoritative token wrote committed, in order.
    let writes: Vec<_> = cluster
        .guarded_writes()
        .into_iter()
        .map(|w| {
            (
                String::from_utf8(w.value.unwrap()).unwrap(),
                w.token.unwrap(),
            )
        })
        .collect();
    assert_eq!(
        writes,
        vec![
            ("a-1".to_owned(), lead_a.token()),
            ("b-1".to_owned(), lead_b.token())
        ]
    );
}

#[tokio::test]
async fn a_resign_hands_over_without_waiting_for_the_lease() {
    let cluster = TestCluster::new();
    let (a, b) = (cluster.process("a"), cluster.process("b"));
    let (task, _) = contend(&a, "a");
    cluster.settle().await;
    let lead_a = won(task).await;
    let (task_b, _) = contend(&b, "b");
    cluster.settle().await;
    let before = cluster.now_millis();
    lead_a.resign().await.unwrap();
    // b follows the partition with one-second polls.
    cluster.advance(Duration::from_secs(2)).await;
    let lead_b = won(task_b).await;
    assert!(lead_b.token() > lead_a.token());
    assert!(cluster.now_millis() - before <= 2_000);
    assert!(matches!(lead_a.err().as_deref(), Some(Error::Resigned)));
}

#[tokio::test]
async fn a_leader_cut_off_loses_its_lease_and_a_standby_takes_over_then_it_heals() {
    let cluster = TestCluster::new();
    let (a, b) = (cluster.process("a"), cluster.process("b"));
    let (task, mut events_a) = contend(&a, "a");
    cluster.settle().await;
    let lead_a = won(task).await;
    let (task_b, _) = contend(&b, "b");
    cluster.settle().await;
    a.cut_off();
    cluster
        .advance(Duration::from_millis(
            (LEASE_MS + STAGGER_MS + 1_000) as u64,
        ))
        .await;
    assert!(!lead_a.is_held());
    let kinds: Vec<&str> = drain(&mut events_a).iter().map(|e| e.kind.name()).collect();
    assert!(kinds.contains(&"renewal_failing"), "{kinds:?}");
    assert!(kinds.contains(&"lease_expired"), "{kinds:?}");
    let lead_b = won(task_b).await;
    a.heal();
    assert_eq!(a.state(), ProcessState::Running);
    // Healed, a waits behind b as any standby does.
    let (again, _) = contend(&a, "a");
    cluster.advance(Duration::from_secs(60)).await;
    assert!(!again.is_finished());
    assert!(lead_b.is_held());
}

#[tokio::test]
async fn renewals_that_fail_for_a_while_keep_the_role() {
    let cluster = TestCluster::new();
    let a = cluster.process("a");
    let (task, mut events) = contend(&a, "a");
    cluster.settle().await;
    let lead = won(task).await;
    a.fail_for(Duration::from_secs(15));
    cluster.advance(Duration::from_secs(40)).await;
    assert!(lead.is_held());
    let kinds: Vec<&str> = drain(&mut events).iter().map(|e| e.kind.name()).collect();
    let failing = kinds.iter().position(|k| *k == "renewal_failing");
    let renewed_after = failing.and_then(|i| kinds[i..].iter().position(|k| *k == "renewed"));
    assert!(failing.is_some() && renewed_after.is_some(), "{kinds:?}");
}

#[tokio::test]
async fn an_observer_sees_the_failover() {
    let cluster = TestCluster::new();
    let (a, b, o) = (
        cluster.process("a"),
        cluster.process("b"),
        cluster.process("observer"),
    );
    let mut observer = o
        .client()
        .observe(&[ROLE], ObserveOptions::default())
        .await
        .unwrap();
    let (task, _) = contend(&a, "a");
    cluster.settle().await;
    let _lead_a = won(task).await;
    let (task_b, _) = contend(&b, "b");
    cluster.settle().await;
    a.crash();
    cluster.advance(Duration::from_secs(70)).await;
    let lead_b = won(task_b).await;
    let mut holders = Vec::new();
    while let Ok(Ok(Some(view))) =
        tokio::time::timeout(Duration::from_millis(1), observer.next()).await
    {
        if let Some(lease) = view.leader {
            if holders.last() != Some(&lease.member) {
                holders.push(lease.member);
            }
        }
    }
    assert_eq!(holders, ["a", "b"]);
    drop(lead_b);
}

#[tokio::test]
async fn a_leader_loop_contends_again_after_losing() {
    let cluster = TestCluster::new();
    let (a, b) = (cluster.process("a"), cluster.process("b"));
    let terms = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = terms.clone();
    let client = a.client().clone();
    let options = client.leadership_options();
    let cancel = options.cancel.clone();
    let stop = cancel.clone();
    let looped = tokio::spawn(async move {
        client
            .lead(ROLE, "a", options, |term| {
                let (seen, stop) = (seen.clone(), stop.clone());
                async move {
                    seen.lock().unwrap().push(term.token());
                    tokio::select! {
                        _ = term.leadership().done() => {}
                        _ = stop.cancelled() => {}
                    }
                    Ok(())
                }
            })
            .await
    });
    cluster.settle().await;
    assert_eq!(terms.lock().unwrap().len(), 1);
    // b takes the role while a is paused past its lease; a, resumed, is
    // fenced or expired and contends again behind b.
    let (task_b, _) = contend(&b, "b");
    cluster.settle().await;
    a.pause();
    cluster.advance(Duration::from_secs(40)).await;
    let lead_b = won(task_b).await;
    a.resume();
    cluster.advance(Duration::from_secs(5)).await;
    lead_b.resign().await.unwrap();
    cluster.advance(Duration::from_secs(60)).await;
    let tokens = terms.lock().unwrap().clone();
    assert_eq!(tokens.len(), 2, "{tokens:?}");
    assert!(tokens[1] > lead_b.token() && lead_b.token() > tokens[0]);
    cancel.cancel();
    cluster.settle().await;
    assert!(looped.is_finished());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kit_settles_on_a_multi_thread_runtime() {
    let cluster = TestCluster::new();
    let (a, b) = (cluster.process("a"), cluster.process("b"));
    let (task, _) = contend(&a, "a");
    cluster.settle().await;
    let lead_a = won(task).await;
    let (task_b, mut events_b) = contend(&b, "b");
    cluster.settle().await;
    let deadline = lead_a.lease().deadline;
    a.crash();
    cluster.advance(Duration::from_secs(60)).await;
    let lead_b = won(task_b).await;
    assert!(lead_b.token() > lead_a.token());
    assert_eq!(elected_at(&drain(&mut events_b)), Some(deadline));
}

#[test]
fn a_cluster_of_no_partitions_is_refused() {
    let e = TestCluster::with_partitions(0).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid argument: partitions must be at least 1, got 0"
    );
}

/// The example of `docs/testing.md` (which `cargo test --doc` compiles).
#[tokio::test]
async fn a_standby_takes_over_when_the_leader_dies() {
    let cluster = TestCluster::new();
    let (a, b) = (cluster.process("a"), cluster.process("b"));
    let leader = a
        .client()
        .acquire("billing", "a", a.client().leadership_options())
        .await
        .unwrap();
    let standby = tokio::spawn({
        let client = b.client().clone();
        async move {
            client
                .acquire("billing", "b", client.leadership_options())
                .await
        }
    });
    cluster.settle().await;
    a.crash(); // SIGKILL: no renewal, no resign
    cluster.advance(Duration::from_secs(60)).await; // past a's 30 s lease
    let new = standby.await.unwrap().unwrap();
    assert!(new.token() > leader.token());
}

/// A crashed process's client counts as closed: its close returns at once
/// (a resign would wait for ever on a process that never answers) and a
/// later operation is refused; its term is not resigned, so the standby
/// still waits out the lease.
#[tokio::test]
async fn a_crashed_processs_client_closes_at_once_without_resigning() {
    let cluster = TestCluster::new();
    let (a, b) = (cluster.process("a"), cluster.process("b"));
    let (task, _) = contend(&a, "a");
    cluster.settle().await;
    let lead_a = won(task).await;
    let (task_b, _) = contend(&b, "b");
    cluster.settle().await;
    a.crash();
    let closed = tokio::spawn({
        let client = a.client().clone();
        async move { client.close().await }
    });
    cluster.settle().await;
    assert!(closed.is_finished(), "the close of a crashed process waits");
    assert!(a.client().is_closed());
    let e = a.client().describe_leadership(ROLE).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    cluster.advance(Duration::from_secs(20)).await;
    assert!(
        !task_b.is_finished(),
        "nothing was resigned: b waits out a's lease"
    );
    cluster.advance(Duration::from_secs(20)).await;
    assert!(won(task_b).await.token() > lead_a.token());
}

/// A crashed process's pending calls end at once with the client's closed
/// error naming the crash (a pending acquire, a write held by a pause, an
/// observer's next view, its term's `done`), and nothing of it reaches the
/// cluster: only what it committed before stays, and the standby is still
/// elected at the crashed leader's deadline.
#[tokio::test]
async fn a_crashed_processs_pending_calls_end_with_the_closed_error() {
    let cluster = TestCluster::new();
    let (a, b, c) = (
        cluster.process("a"),
        cluster.process("b"),
        cluster.process("c"),
    );
    let (task, _) = contend(&a, "a");
    cluster.settle().await;
    let lead_a = std::sync::Arc::new(won(task).await);
    lead_a.write(vec![order("a-1")]).await.unwrap();
    let mut observer = a
        .client()
        .observe(&[ROLE], ObserveOptions::default())
        .await
        .unwrap();
    let (task_b, mut events_b) = contend(&b, "b");
    let (task_c, _) = contend(&c, "c");
    cluster.settle().await;
    a.pause();
    let write = tokio::spawn(lead_a.clone().write_owned(vec![order("a-2")]));
    let done = tokio::spawn(lead_a.done());
    cluster.settle().await;
    assert!(!write.is_finished() && !done.is_finished() && !task_c.is_finished());
    let deadline = lead_a.lease().deadline;
    a.crash();
    c.crash();
    cluster.settle().await;
    let crashed = |e: &Error| {
        e.kind() == ErrorKind::InvalidArgument
            && e.to_string()
                .contains("the client is closed: its process crashed")
    };
    assert!(write.is_finished() && done.is_finished() && task_c.is_finished());
    let e = write.await.unwrap().unwrap_err();
    assert!(crashed(&e), "{e}");
    let e = task_c.await.unwrap().unwrap_err();
    assert!(crashed(&e), "{e}");
    let e = loop {
        match observer.try_next() {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the observer should end with the crash"),
            Err(e) => break e,
        }
    };
    assert!(crashed(&e), "{e}");
    assert!(!lead_a.is_held());
    let reason = lead_a.err().expect("the term ended");
    assert!(crashed(&reason), "{reason}");
    let e = lead_a.resign().await.unwrap_err();
    assert!(crashed(&e), "{e}");
    // Nothing reached the cluster: b challenges at a's deadline.
    cluster.advance(Duration::from_secs(60)).await;
    let lead_b = won(task_b).await;
    assert_eq!(elected_at(&drain(&mut events_b)), Some(deadline));
    let values: Vec<_> = cluster
        .guarded_writes()
        .into_iter()
        .map(|w| w.value.unwrap())
        .collect();
    assert_eq!(values, vec![b"a-1".to_vec()]);
    assert!(lead_b.token() > lead_a.token());
}
