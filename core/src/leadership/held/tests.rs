//! Tests of the held term. The renewal and resign tests drive the
//! in-memory transport on a manual clock (no real time passes); each names
//! the rows of the renewal table (`renewal` module docs) or the steps of
//! the resign (`resign` module docs) it covers.

use std::sync::Arc;
use std::time::Duration;

use super::{fenced_reason, resign, Leadership};
use crate::error::Error;
use crate::events::{self, EventKind, EventReceiver};
use crate::leadership::{acquire_leadership, describe_role_state, LeadershipOptions};
use crate::transport::memory::MemoryCluster;
use crate::transport::{Coordinator, Describer, OutRecord, Transport};
use crate::{Clock, ErrorKind, FencingToken, ManualClock, STATE_TOPIC};

const T0: i64 = 1_700_000_000_000;
const LEASE: Duration = Duration::from_secs(30);
const RENEW: Duration = Duration::from_secs(10);
const ROLE: &str = "held-tests";
const PARTITIONS: i32 = 4;

fn ms(d: Duration) -> i64 {
    d.as_millis() as i64
}

/// A manual clock and an in-memory cluster on it.
struct World {
    clock: ManualClock,
    cluster: MemoryCluster,
}

impl World {
    fn new() -> Self {
        let clock = ManualClock::new(T0);
        let cluster = MemoryCluster::new(Arc::new(clock.clone()));
        World { clock, cluster }
    }

    fn options(&self) -> LeadershipOptions {
        LeadershipOptions::default()
            .with_partitions(PARTITIONS)
            .with_lease_duration(LEASE)
            .with_renew_interval(RENEW)
            .with_challenge_stagger(Duration::from_secs(5))
            .with_clock(Arc::new(self.clock.clone()))
            .with_poll_wait(Duration::from_secs(1))
    }

    /// "a" leads [`ROLE`] with `options`, elected at [`T0`]; its events go
    /// to the receiver.
    async fn leader_with(&self, options: LeadershipOptions) -> (Leadership, EventReceiver) {
        let (tx, rx) = events::channel();
        let a = self.spawn("a", options.with_events(tx));
        settle().await;
        assert!(a.is_finished(), "a leads at once");
        (a.await.unwrap().unwrap(), rx)
    }

    /// `member` acquires [`ROLE`] on a transport of its own, in a task.
    fn spawn(
        &self,
        member: &str,
        options: LeadershipOptions,
    ) -> tokio::task::JoinHandle<crate::Result<Leadership>> {
        let transport: Arc<dyn Transport> = Arc::new(self.cluster.transport());
        let member = member.to_owned();
        tokio::spawn(async move { acquire_leadership(transport, ROLE, &member, options).await })
    }

    /// The coordinator's current token of [`ROLE`].
    async fn current_token(&self) -> FencingToken {
        self.cluster.transport().describe_epoch(ROLE).await.unwrap()
    }

    async fn leader(&self) -> (Leadership, EventReceiver) {
        self.leader_with(self.options()).await
    }

    /// Moves the clock to `at` in steps of at most one second, letting
    /// every task run at every step.
    async fn run_until(&self, at: i64) {
        settle().await;
        while self.clock.now_millis() < at {
            let step = (at - self.clock.now_millis()).min(1_000);
            self.clock.advance(Duration::from_millis(step as u64));
            settle().await;
        }
    }
}

/// Lets every ready task run to its next wait.
async fn settle() {
    for _ in 0..200 {
        tokio::task::yield_now().await;
    }
}

/// The stable names of the events delivered so far.
fn seen(rx: &mut EventReceiver) -> Vec<&'static str> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e.kind.name());
    }
    out
}

/// The `cleared` of every `resigned` event in `events`, in order.
fn resigned(events: &[EventKind]) -> Vec<bool> {
    events
        .iter()
        .filter_map(|k| match k {
            EventKind::Resigned { cleared } => Some(*cleared),
            _ => None,
        })
        .collect()
}

/// Every event delivered so far.
fn kinds(rx: &mut EventReceiver) -> Vec<EventKind> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e.kind);
    }
    out
}

/// `token` with its epoch `n` higher.
fn later(token: FencingToken, n: i16) -> FencingToken {
    FencingToken::new(token.producer_id, token.producer_epoch + n)
}

/// A guarded record of the `orders` topic, partition 0.
fn order(value: &str) -> OutRecord {
    OutRecord {
        topic: "orders".into(),
        partition: Some(0),
        key: None,
        value: Some(value.as_bytes().to_vec()),
        headers: vec![],
    }
}

/// Rows S3, P5, W3: the renewal is due one renew interval after the first
/// lease's send, takes the free producer, commits, and the next one is
/// scheduled one renew interval after its own send, not before.
#[tokio::test(flavor = "current_thread")]
async fn rows_s3_p5_w3_a_due_renewal_commits_and_schedules_the_next() {
    let w = World::new();
    let (a, mut rx) = w.leader().await;
    seen(&mut rx);
    w.run_until(T0 + ms(RENEW) - 1).await;
    assert!(
        seen(&mut rx).is_empty(),
        "not due before the renew interval"
    );
    w.run_until(T0 + ms(RENEW)).await;
    assert_eq!(seen(&mut rx), ["renewed"]);
    assert_eq!(a.lease().granted_at, T0 + ms(RENEW));
    assert_eq!(a.lease_left(), LEASE, "the deadline moved with the send");
    w.run_until(T0 + 2 * ms(RENEW) - 1).await;
    assert!(
        seen(&mut rx).is_empty(),
        "the next one is a renew interval on"
    );
    w.run_until(T0 + 2 * ms(RENEW)).await;
    assert_eq!(seen(&mut rx), ["renewed"]);
}

/// Rows S2 and P4: a machine suspended past its lease finds the deadline
/// and the schedule due at once; the term ends with `LEASE_EXPIRED` and no
/// renewal is sent. S2 ends it (the deadline is first in the wait); were
/// the schedule taken first, P4 would end it with the producer taken, so
/// the test fails only when both are lost.
#[tokio::test(flavor = "current_thread")]
async fn rows_s2_p4_a_suspend_past_the_lease_expires_without_renewing() {
    let w = World::new();
    let (a, mut rx) = w.leader().await;
    seen(&mut rx);
    let requests = w.cluster.requests();
    w.clock.advance(LEASE + Duration::from_secs(1));
    settle().await;
    assert_eq!(seen(&mut rx), ["lease_expired"]);
    assert_eq!(w.cluster.requests(), requests, "no renewal was sent");
    assert_eq!(a.err().unwrap().kind(), ErrorKind::LeaseExpired);
}

/// Rows S1 and E1: dropping the handle stops the renewals; nothing is sent
/// after it, and no event. (P1 and P3 stop a renewal that got past S1, so
/// this checks the outcome of the three together.)
#[tokio::test(flavor = "current_thread")]
async fn rows_s1_e1_a_dropped_handle_renews_no_more() {
    let w = World::new();
    let (a, mut rx) = w.leader().await;
    w.run_until(T0 + 1_000).await;
    seen(&mut rx);
    drop(a);
    settle().await;
    let requests = w.cluster.requests();
    w.run_until(T0 + 3 * ms(RENEW)).await;
    assert_eq!(w.cluster.requests(), requests, "nothing was sent");
    assert!(seen(&mut rx).is_empty());
}

/// Rows W5 then W3: a transient failure is counted and reported, the retry
/// comes after the back-off but never later than one renew interval (the
/// back-off here starts above it), and the commit that follows resets the
/// count.
#[tokio::test(flavor = "current_thread")]
async fn rows_w5_w3_a_failure_is_retried_within_a_renew_interval_then_cleared() {
    let w = World::new();
    let slow = w.options().with_backoff(RENEW * 3, RENEW * 3);
    let (a, mut rx) = w.leader_with(slow).await;
    seen(&mut rx);
    w.cluster.set_unavailable(true);
    w.run_until(T0 + ms(RENEW)).await;
    assert_eq!(seen(&mut rx), ["renewal_failing"]);
    assert_eq!(a.renewal_failures(), 1);
    assert!(a.is_held());
    w.cluster.set_unavailable(false);
    w.run_until(T0 + 2 * ms(RENEW) - 1).await;
    assert!(seen(&mut rx).is_empty(), "the back-off is not cut short");
    w.run_until(T0 + 2 * ms(RENEW)).await;
    assert_eq!(seen(&mut rx), ["renewed"]);
    assert_eq!(a.renewal_failures(), 0);
    assert_eq!(a.lease().granted_at, T0 + 2 * ms(RENEW));
}

/// Rows W5 and S2: while renewals keep failing, the lease runs out at the
/// local deadline (the send of the last committed lease plus the lease
/// duration), and the end names the last failure.
#[tokio::test(flavor = "current_thread")]
async fn rows_w5_s2_failing_renewals_expire_at_the_deadline() {
    let w = World::new();
    let (a, mut rx) = w.leader().await;
    w.cluster.set_unavailable(true);
    w.run_until(T0 + ms(LEASE) - 1).await;
    assert!(a.is_held());
    assert!(a.renewal_failures() > 1, "retried with back-off");
    w.run_until(T0 + ms(LEASE)).await;
    let names = seen(&mut rx);
    assert_eq!(names.last(), Some(&"lease_expired"), "{names:?}");
    let why = a.err().unwrap();
    assert_eq!(why.kind(), ErrorKind::LeaseExpired);
    assert!(why.to_string().contains("the last renewal failed"), "{why}");
}

/// Row W4: a newer epoch fences the next renewal, which ends the term with
/// `FENCED`; no renewal follows. (The end reason of a fence whose outcome
/// was unknown is `fenced_reason`'s, tested below.)
#[tokio::test(flavor = "current_thread")]
async fn row_w4_a_fenced_renewal_ends_the_term() {
    let w = World::new();
    let (a, mut rx) = w.leader().await;
    seen(&mut rx);
    let rival = w.cluster.transport();
    let _newer = rival.acquire_epoch(ROLE, LEASE).await.unwrap();
    w.run_until(T0 + ms(RENEW)).await;
    assert_eq!(seen(&mut rx), ["fenced"]);
    assert!(a.err().unwrap().is_fenced());
    let requests = w.cluster.requests();
    w.run_until(T0 + 3 * ms(RENEW)).await;
    assert_eq!(w.cluster.requests(), requests, "no renewal after the fence");
}

/// Rows P1/P3: a resign called while the due renewal waits for the
/// producer (a guarded write to a partition that does not answer holds it)
/// stops the renewal: once the write gives the producer up, the resign
/// takes it, and no renewal is written between.
#[tokio::test(flavor = "current_thread")]
async fn rows_p1_p3_a_resign_stops_a_renewal_waiting_for_the_producer() {
    let w = World::new();
    let (a, mut rx) = w.leader().await;
    let a = Arc::new(a);
    seen(&mut rx);
    w.run_until(T0 + ms(RENEW) - 1_000).await;
    w.cluster.set_stalled("orders", true);
    let writer = Arc::clone(&a);
    let write = tokio::spawn(async move { writer.write(vec![order("stuck")]).await });
    // The renewal is due while the write holds the producer.
    w.run_until(T0 + ms(RENEW) + 1_000).await;
    assert!(!write.is_finished(), "the write holds the producer");
    assert!(seen(&mut rx).is_empty(), "the renewal waits");
    let resigner = Arc::clone(&a);
    let resigned = tokio::spawn(async move { resigner.resign().await });
    w.run_until(T0 + ms(RENEW) + 2 * ms(RENEW)).await;
    assert!(write.is_finished() && resigned.is_finished());
    assert_eq!(
        write.await.unwrap().unwrap_err().kind(),
        ErrorKind::Transient
    );
    resigned.await.unwrap().unwrap();
    assert_eq!(seen(&mut rx), ["resigned", "deregistered"]);
}

/// Resign steps 1 to 7, alone: with no other member registered, the
/// tombstone commits (`resigned`, cleared), the term's token is superseded
/// (the bump of step 5: the coordinator's token is one epoch on), the
/// member deregisters (`deregistered`) and the term ends as resigned.
#[tokio::test(flavor = "current_thread")]
async fn resign_steps_1_to_7_a_lone_leader_clears_bumps_and_deregisters() {
    let w = World::new();
    let (a, mut rx) = w.leader().await;
    w.run_until(T0 + 1_000).await;
    kinds(&mut rx);
    a.resign().await.unwrap();
    let events = kinds(&mut rx);
    assert_eq!(resigned(&events), [true]);
    assert!(matches!(events.last(), Some(EventKind::Deregistered)));
    assert_eq!(w.current_token().await, later(a.token(), 1), "bumped");
    assert!(!a.is_held());
    assert!(matches!(*a.err().unwrap(), Error::Resigned));
    let state = describe_role_state(&w.cluster.transport(), ROLE, PARTITIONS)
        .await
        .unwrap();
    assert!(state.lease.is_none(), "cleared: {state:?}");
    assert!(state.roster.is_empty(), "deregistered: {state:?}");
}

/// Resign steps 3 and 6 with a member waiting: the deregistration goes out
/// with the tombstone and no bump runs (step 5 is skipped), so the
/// successor's mint is the first one after the term's token.
#[tokio::test(flavor = "current_thread")]
async fn resign_step_3_a_waiting_member_is_not_bumped_over() {
    let w = World::new();
    let (a, mut rx) = w.leader().await;
    let b = w.spawn("b", w.options());
    w.run_until(T0 + 1_000).await;
    assert!(!b.is_finished(), "b waits");
    kinds(&mut rx);
    a.resign().await.unwrap();
    let events = kinds(&mut rx);
    assert_eq!(resigned(&events), [true]);
    assert!(matches!(events.last(), Some(EventKind::Deregistered)));
    w.run_until(T0 + 2_000).await;
    assert!(b.is_finished(), "b took over at once");
    let b = b.await.unwrap().unwrap();
    assert_eq!(b.token(), later(a.token(), 1), "nothing minted between");
}

/// The state topic's records that resign `member`'s term of [`ROLE`]:
/// the lease tombstone and `member`'s deregistration, as committed.
fn resign_records(w: &World, member: &str) -> Vec<crate::transport::memory::CommittedWrite> {
    use crate::codec::{encode_key, Key};
    let lease = encode_key(&Key::lease(ROLE)).unwrap();
    let registration = encode_key(&Key::registration(ROLE, member)).unwrap();
    w.cluster
        .committed_writes(Some(STATE_TOPIC))
        .into_iter()
        .filter(|r| r.value.is_none() && (r.key == lease || r.key == registration))
        .collect()
}

/// Resign step 3 with a member waiting: the tombstone and the
/// deregistration are one transaction of the term's epoch (both written
/// by it, next to each other, the tombstone first), not a tombstone and
/// a registrar's record; `resigned` comes before `deregistered`.
#[tokio::test(flavor = "current_thread")]
async fn resign_step_3_a_waiting_member_gets_tombstone_and_deregistration_in_one_transaction() {
    let w = World::new();
    let (a, mut rx) = w.leader().await;
    let b = w.spawn("b", w.options());
    w.run_until(T0 + 1_000).await;
    assert!(!b.is_finished(), "b waits");
    kinds(&mut rx);
    a.resign().await.unwrap();
    assert_eq!(seen(&mut rx), ["resigned", "deregistered"]);
    let written = resign_records(&w, "a");
    assert_eq!(written.len(), 2, "{written:?}");
    let (tombstone, deregistration) = (&written[0], &written[1]);
    for r in &written {
        assert_eq!(r.role.as_deref(), Some(ROLE), "through the epoch: {r:?}");
        assert_eq!(r.token, Some(a.token()), "the term's own epoch: {r:?}");
    }
    assert_eq!(
        tombstone.key,
        crate::codec::encode_key(&crate::codec::Key::lease(ROLE)).unwrap()
    );
    assert_eq!(deregistration.offset, tombstone.offset + 1, "{written:?}");
    w.run_until(T0 + 2_000).await;
    let b = b.await.unwrap().unwrap();
    assert_eq!(b.token(), later(a.token(), 1), "nothing minted between");
}

/// Resign steps 3 and 6 with a member waiting and this one deposed without
/// noticing: the one transaction is fenced (nothing of it written), so the
/// member deregisters through the registrar, after `resigned`.
#[tokio::test(flavor = "current_thread")]
async fn resign_step_6_a_fenced_transaction_deregisters_through_the_registrar() {
    let w = World::new();
    let (a, mut rx) = w.leader().await;
    let b = w.spawn("b", w.options());
    w.run_until(T0 + 1_000).await;
    assert!(!b.is_finished(), "b waits");
    kinds(&mut rx);
    let newer = w
        .cluster
        .transport()
        .acquire_epoch(ROLE, LEASE)
        .await
        .unwrap()
        .token();
    a.resign().await.unwrap();
    let events = kinds(&mut rx);
    assert_eq!(resigned(&events), [false]);
    assert!(matches!(events.last(), Some(EventKind::Deregistered)));
    let written = resign_records(&w, "a");
    assert_eq!(
        written.len(),
        1,
        "no tombstone, one deregistration: {written:?}"
    );
    assert_eq!(written[0].role, None, "through the registrar: {written:?}");
    assert_eq!(w.current_token().await, newer, "not bumped");
    b.abort();
}

/// Resign step 4, fenced: a member deposed without noticing resigns
/// without erasing anything (`resigned`, not cleared), bumps nothing, and
/// still deregisters; the resign succeeds.
#[tokio::test(flavor = "current_thread")]
async fn resign_step_4_a_deposed_member_clears_nothing_and_bumps_nothing() {
    let w = World::new();
    let (a, mut rx) = w.leader().await;
    kinds(&mut rx);
    let newer = w
        .cluster
        .transport()
        .acquire_epoch(ROLE, LEASE)
        .await
        .unwrap()
        .token();
    a.resign().await.unwrap();
    let events = kinds(&mut rx);
    assert_eq!(resigned(&events), [false]);
    assert!(matches!(events.last(), Some(EventKind::Deregistered)));
    assert_eq!(w.current_token().await, newer, "not bumped");
}

/// The resign's watchdog (before step 1): a resign whose tombstone hangs
/// does not keep the term past the local lease deadline, even when nothing
/// asks the handle; the term ends there with
/// `LEASE_EXPIRED` naming the resign, and the resign goes on to its bound
/// and returns the tombstone's failure.
#[tokio::test(flavor = "current_thread")]
async fn a_resign_that_hangs_ends_the_term_at_the_local_deadline() {
    let w = World::new();
    let (a, _rx) = w.leader().await;
    let a = Arc::new(a);
    w.run_until(T0 + 5_000).await;
    w.cluster.set_stalled(STATE_TOPIC, true);
    let resigner = Arc::clone(&a);
    let resign = tokio::spawn(async move { resigner.resign().await });
    // Only the watchdog's timer ends it: nothing asks the handle.
    let done = tokio::spawn(a.done());
    w.run_until(T0 + ms(LEASE) - 1).await;
    assert!(!done.is_finished(), "held until the deadline");
    w.run_until(T0 + ms(LEASE)).await;
    assert!(done.is_finished(), "ended at the deadline");
    let why = a.err().expect("ended at the deadline");
    assert_eq!(why.kind(), ErrorKind::LeaseExpired);
    assert!(
        why.to_string().contains("before its resign finished"),
        "{why}"
    );
    assert!(!resign.is_finished(), "the resign goes on");
    w.run_until(T0 + 5_000 + ms(LEASE)).await;
    assert!(resign.is_finished(), "bounded by the lease duration");
    assert!(resign.await.unwrap().is_err());
}

#[test]
fn a_shared_error_keeps_its_kind() {
    let cases = vec![
        Error::transient("deregistering", "not done within 5s"),
        Error::Fenced("x".into()),
        Error::LeaseExpired("x".into()),
        Error::fatal("x", "y"),
        Error::Cancelled,
    ];
    for e in cases {
        let kind = e.kind();
        let shared = Arc::new(e);
        let _other_owner = Arc::clone(&shared);
        assert_eq!(resign::same_kind("resigning", shared).kind(), kind);
    }
}

#[test]
fn a_fenced_write_ends_the_term_with_its_message_once() {
    let write = Error::Fenced("write_guarded for role \"r\": superseded".into());
    let reason = fenced_reason(&write);
    assert!(reason.is_fenced());
    assert_eq!(reason.to_string(), write.to_string());
    assert_eq!(reason.to_string().matches("fenced").count(), 1, "{reason}");

    let unknown = Error::OutcomeUnknown {
        context: "write_guarded".into(),
        source: Box::new(Error::Fenced("superseded at commit".into())),
    };
    let reason = fenced_reason(&unknown);
    assert!(reason.is_fenced());
    assert!(reason.to_string().contains("write_guarded"), "{reason}");
}
