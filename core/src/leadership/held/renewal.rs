//! The renewal task: renews the term's lease through its epoch every renew
//! interval, retries transient failures with back-off, and ends the term
//! when it is fenced, fails fatally, or its local lease deadline passes.
//!
//! # The state machine
//!
//! [`Renewing`] is where the task stands; `renew_loop` runs one state's
//! handler at a time, and each handler returns the next state. The table is
//! the contract: a row names a state, an event that ends the state's wait,
//! what the task does, and the state it goes to. When several events are
//! ready at once, the state's first row among them wins (the waits are
//! biased in the table's order): a stop beats the deadline, and the
//! deadline beats the schedule, so a machine suspended past its lease
//! expires rather than renewing late.
//!
//! | Row | State               | Event                                    | Action                                                                 | Next                         |
//! |-----|---------------------|------------------------------------------|------------------------------------------------------------------------|------------------------------|
//! | S1  | `Scheduled { at }`  | stop (term ended, resign, handle dropped)| none                                                                   | `Ended`                      |
//! | S2  | `Scheduled { at }`  | local lease deadline                     | end the term: `LEASE_EXPIRED`                                          | `Ended`                      |
//! | S3  | `Scheduled { at }`  | `at` reached                             | none                                                                   | `WaitingForProducer`         |
//! | P1  | `WaitingForProducer`| stop                                     | none                                                                   | `Ended`                      |
//! | P2  | `WaitingForProducer`| local lease deadline                     | end the term: `LEASE_EXPIRED`                                          | `Ended`                      |
//! | P3  | `WaitingForProducer`| producer taken, and stopped meanwhile    | give the producer back                                                 | `Ended`                      |
//! | P4  | `WaitingForProducer`| producer taken, no lease left            | end the term: `LEASE_EXPIRED`                                          | `Ended`                      |
//! | P5  | `WaitingForProducer`| producer taken, lease left               | keep the producer; the write's bound is the lease left                 | `Writing`                    |
//! | W1  | `Writing`           | the lease record does not build          | end the term with that error                                           | `Ended`                      |
//! | W2  | `Writing`           | local lease deadline, write unanswered   | end the term: `LEASE_EXPIRED` (the write goes on in the epoch's task)  | `Ended`                      |
//! | W3  | `Writing`           | committed                                | store lease and send time, failures to 0, reset the back-off, `renewed`| `Scheduled { send + renew }` |
//! | W4  | `Writing`           | fenced (also an outcome-unknown fence)   | end the term: `FENCED`                                                 | `Ended`                      |
//! | W5  | `Writing`           | transient, or outcome unknown            | count the failure, keep its text, `renewal_failing`                    | `Scheduled { now + pause }`  |
//! | W6  | `Writing`           | any other error                          | end the term with it                                                   | `Ended`                      |
//! | E1  | `Ended`             | none                                     | the task returns                                                       |                              |
//!
//! Rows W3 to W6 first report how an earlier write with an unknown outcome
//! ended, if this one completed it (`write_resolved`). In `Writing` the task
//! holds the producer (`Held::writes`) and gives it back after the row's
//! action, so a guarded write waiting for it sees the renewal's state. The
//! pause of W5 is the back-off ([`Backoff`], jittered, doubling from
//! `initial_backoff` to `max_backoff`), never more than the renew interval:
//! `Scheduled` after a failure is the back-off, and a renewal is tried
//! again as long as the lease lasts. The first state is `Scheduled` one
//! renew interval after the first lease's send.
//!
//! A panic in the loop ends the term with a fatal error (`renew_task`), so
//! a bug never leaves a role that looks held but is not renewed.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::MutexGuard;
use tracing::Instrument;

use super::{fenced_reason, Held, Renewal};
use crate::error::Error;
use crate::events::EventKind;
use crate::leadership::member::{millis, Backoff};

/// Where the renewal task stands (see the module's table).
enum Renewing<'a> {
    /// Waiting for the renewal's time `at` (ms on the local deadline
    /// clock): one renew interval after the last committed renewal's send,
    /// or the back-off after a failed one.
    Scheduled { at: i64 },
    /// The renewal is due: waiting for the producer, which a guarded write
    /// in flight holds for at most one renew interval.
    WaitingForProducer,
    /// Holding the producer: the renewal is written, bounded by `within`
    /// (the lease left when the producer was taken).
    Writing {
        producer: MutexGuard<'a, ()>,
        within: Duration,
    },
    /// The task is over: stopped, or the term ended.
    Ended,
}

/// The renewal task: renews, and ends the term if the loop itself panics,
/// so a bug never leaves a role that looks held but is not renewed.
pub(super) async fn renew_task(held: Arc<Held>) {
    let task = tokio::spawn(renew_loop(held.clone()).in_current_span());
    if let Err(e) = task.await {
        if e.is_panic() {
            tracing::error!("the renewal task panicked; ending the term");
            held.end(Error::fatal("renewing the lease", e));
        }
    }
}

/// Runs the state machine from its first state until it ends.
async fn renew_loop(held: Arc<Held>) {
    let mut renewer = Renewer::new(&held);
    let mut state = renewer.first();
    loop {
        state = match state {
            Renewing::Scheduled { at } => renewer.scheduled(at).await,
            Renewing::WaitingForProducer => renewer.waiting_for_producer().await,
            Renewing::Writing { producer, within } => renewer.writing(producer, within).await,
            // E1.
            Renewing::Ended => return,
        };
    }
}

/// The renewal task's own data: the term and the back-off of its retries.
struct Renewer<'a> {
    held: &'a Held,
    backoff: Backoff,
    /// The renew interval, ms.
    renew: i64,
}

impl<'a> Renewer<'a> {
    fn new(held: &'a Held) -> Self {
        let o = &held.member.options;
        Renewer {
            held,
            backoff: Backoff::new(o.initial_backoff, o.max_backoff),
            renew: millis(o.election.renew_interval),
        }
    }

    /// The first state: one renew interval after the first lease's send.
    fn first(&self) -> Renewing<'a> {
        let lease = millis(self.held.member.options.election.lease_duration);
        Renewing::Scheduled {
            at: self.held.deadline() - lease + self.renew,
        }
    }

    /// The time until `at` on the local deadline clock (zero once passed).
    fn until(&self, at: i64) -> Duration {
        let now = self.held.member.mono();
        Duration::from_millis(at.saturating_sub(now).max(0) as u64)
    }

    /// `Scheduled { at }`: rows S1 to S3.
    async fn scheduled(&mut self, at: i64) -> Renewing<'a> {
        let held = self.held;
        let clock = &held.member.options.clock;
        tokio::select! {
            biased;
            _ = held.stop.cancelled() => Renewing::Ended,
            _ = clock.sleep(held.left()) => {
                held.expire();
                Renewing::Ended
            }
            _ = clock.sleep(self.until(at)) => Renewing::WaitingForProducer,
        }
    }

    /// `WaitingForProducer`: rows P1 to P5.
    async fn waiting_for_producer(&mut self) -> Renewing<'a> {
        let held = self.held;
        let producer = tokio::select! {
            biased;
            _ = held.stop.cancelled() => return Renewing::Ended,
            w = held.writes.lock() => w,
            _ = held.member.options.clock.sleep(held.left()) => {
                held.expire();
                return Renewing::Ended;
            }
        };
        if held.stop.is_cancelled() {
            return Renewing::Ended;
        }
        let within = held.left();
        if within.is_zero() {
            held.expire();
            return Renewing::Ended;
        }
        Renewing::Writing { producer, within }
    }

    /// `Writing`: rows W1 to W6. The write is bounded by the lease time
    /// left: past it the term ends, whether or not the transport kept to
    /// the bound (a transaction the write leaves behind completes in the
    /// epoch's own task). `producer` is given back when this returns.
    async fn writing(&mut self, producer: MutexGuard<'a, ()>, within: Duration) -> Renewing<'a> {
        let held = self.held;
        let m = &held.member;
        let sent = m.mono();
        let (record, lease) = match m.lease_record(held.token) {
            Ok(v) => v,
            Err(e) => {
                held.end(e);
                return Renewing::Ended;
            }
        };
        let written = tokio::select! {
            biased;
            w = held.epoch.write_lease(record, within) => w,
            _ = m.options.clock.sleep(held.left()) => {
                held.expire();
                return Renewing::Ended;
            }
        };
        held.report_resolved();
        let next = match written {
            Ok(()) => self.committed(lease, sent),
            Err(e) if e.means_fenced() => {
                tracing::warn!(token = %held.token, why = %e, "fenced");
                held.end(fenced_reason(&e));
                Renewing::Ended
            }
            Err(e) if e.is_transient() || matches!(e, Error::OutcomeUnknown { .. }) => {
                self.failed(e)
            }
            Err(e) => {
                tracing::error!(error = %e, "renewal failed fatally");
                held.end(e);
                Renewing::Ended
            }
        };
        drop(producer);
        next
    }

    /// Row W3: the renewal of `lease`, sent at `sent`, committed.
    fn committed(&mut self, lease: crate::codec::Lease, sent: i64) -> Renewing<'a> {
        let m = &self.held.member;
        tracing::debug!(deadline = %crate::rfc3339::Rfc3339(lease.deadline), "renewed");
        let deadline = lease.deadline;
        *self.held.renewal() = Renewal {
            lease,
            sent,
            failures: 0,
            last_failure: None,
        };
        self.backoff.reset();
        crate::metrics::renewal(
            &m.role,
            Duration::from_millis(m.mono().saturating_sub(sent).max(0) as u64),
        );
        m.emit(EventKind::Renewed { deadline });
        Renewing::Scheduled {
            at: sent.saturating_add(self.renew),
        }
    }

    /// Row W5: the renewal failed with `e`, transient or of unknown outcome.
    fn failed(&mut self, e: Error) -> Renewing<'a> {
        let m = &self.held.member;
        let failures = {
            let mut r = self.held.renewal();
            r.failures += 1;
            r.last_failure = Some(e.to_string());
            r.failures
        };
        let d = self.backoff.take().min(m.options.election.renew_interval);
        tracing::warn!(error = %e, failures, retry_in = ?d, "renewal failing");
        m.emit(EventKind::RenewalFailing {
            failures,
            error: Arc::new(e),
        });
        Renewing::Scheduled {
            at: m.mono().saturating_add(millis(d)),
        }
    }
}
