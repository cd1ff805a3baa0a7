//! Tests of the held term. The renewal tests drive the in-memory transport
//! on a manual clock (no real time passes) and each names the rows of the
//! renewal table (`renewal` module docs) it covers.

use std::sync::Arc;
use std::time::Duration;

use super::{fenced_reason, resign, Leadership};
use crate::error::Error;
use crate::events::{self, EventReceiver};
use crate::leadership::{acquire_leadership, LeadershipOptions};
use crate::transport::memory::MemoryCluster;
use crate::transport::{Coordinator, OutRecord, Transport};
use crate::{Clock, ErrorKind, ManualClock};

const T0: i64 = 1_700_000_000_000;
const LEASE: Duration = Duration::from_secs(30);
const RENEW: Duration = Duration::from_secs(10);
const ROLE: &str = "held-tests";

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
            .with_partitions(4)
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
        let transport: Arc<dyn Transport> = Arc::new(self.cluster.transport());
        let options = options.with_events(tx);
        let a =
            tokio::spawn(async move { acquire_leadership(transport, ROLE, "a", options).await });
        settle().await;
        assert!(a.is_finished(), "a leads at once");
        (a.await.unwrap().unwrap(), rx)
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
