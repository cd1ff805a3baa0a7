//! The held leadership: the term's shared state ([`Held`]) and its handle
//! ([`Leadership`]). Renewals, guarded writes and the resign all go through
//! the epoch the member minted and owns, one at a time:
//!
//! * `renewal`: the renewal task, a state machine with its table;
//! * `writes`: guarded writes and their bounds;
//! * `offsets`: guarded writes that commit input offsets, and the
//!   committed offsets a new leader resumes from;
//! * `resign`: the resign, in numbered steps.
//!
//! # The term's mutable state and its locks
//!
//! | Cell             | Kind                     | Guards                                             | Order |
//! |------------------|--------------------------|----------------------------------------------------|-------|
//! | `writes`         | async mutex              | the epoch's producer: one write at a time          | 1     |
//! | `follower`       | async mutex              | the challenge's follower, taken once by the resign | 2     |
//! | `renewal`        | sync mutex, one statement| the last committed lease, its send time, failures  | 3     |
//! | `claim`          | sync mutex, one statement| the client's claim on the role                     | 3     |
//! | `ended`          | watch, one call          | why the term ended (the first reason wins)         | 3     |
//! | `resigned`       | watch, one call          | the resign's result                                | 3     |
//! | `resign_called`, `resign_started` | atomic flags | set once, never cleared                     | -     |
//! | `stop`, `abandoned` | cancellation tokens   | cancelled once, never reset                        | -     |
//!
//! A lock is only taken while holding locks of a lower order: `follower`
//! only inside `writes` (by the resign), the order-3 cells inside anything.
//! The two asynchronous locks are the only ones held across an await. The
//! order-3 cells are each taken for one statement or call, never two at
//! once and never across an await, so nothing nests inside them (`ended`'s
//! update only counts a metric). The flags and tokens are read without a
//! lock: each only ever moves one way.
mod offsets;
mod renewal;
mod resign;
mod writes;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::acquire::Won;
use super::member::{millis, Follower, Member};
use crate::codec::Lease;
use crate::error::{Error, Result, SharedError};
use crate::events::{EventKind, EventSender};
use crate::token::FencingToken;
use crate::transport::LeaseWriter;

/// Why a [`Leadership`] ended, shared by every clone of its error.
pub type EndReason = Arc<Error>;

/// An object kept alive while the leadership is held (a client's claim on
/// the role), let go when the term ends or the handle is dropped.
type Claim = Box<dyn std::any::Any + Send + Sync>;

/// The shared state of a term, behind every clone of its [`Leadership`].
/// The lock order is in the module docs; each cell says what it guards.
struct Held {
    member: Arc<Member>,
    /// The epoch this member minted: every renewal and guarded write goes
    /// through it, each holding `writes`.
    epoch: Box<dyn LeaseWriter>,
    token: FencingToken,
    /// Order 3 (sync, one statement): what the renewals leave behind (see
    /// [`Renewal`]). Written by the renewal task only.
    renewal: Mutex<Renewal>,
    /// Order 3 (the watch's own, one call): why the term ended; the first
    /// reason wins. Its update only counts a metric under the lock.
    ended: watch::Sender<Option<EndReason>>,
    /// Order 1 (async, outermost): the epoch's producer. Held across a
    /// renewal's write, a guarded write, and the resign's steps, so the
    /// epoch writes one thing at a time.
    writes: tokio::sync::Mutex<()>,
    /// Set once a resign started (by the first caller, which spawns it);
    /// the resign runs in its own task and publishes its result in
    /// `resigned`.
    resign_started: AtomicBool,
    /// Set when [`Leadership::resign`] is called, before its future runs:
    /// a guarded write called after it is refused at its call, so no write
    /// issued after a resign can commit, whatever order the futures run in.
    /// Always set before `resign_started`.
    resign_called: AtomicBool,
    /// Order 3 (the watch's own, one call): the resign's result, once it
    /// finished.
    resigned: watch::Sender<Option<Result<(), Arc<Error>>>>,
    /// Cancelled when the renewals must stop: the term ended, a resign
    /// started, or the handle was dropped.
    stop: CancellationToken,
    /// Cancelled when the term's process crashed ([`HeldRef::abandon`]): a
    /// write or resign pending then, or called later, ends with
    /// [`crate::error::process_crashed`].
    abandoned: CancellationToken,
    /// Order 3 (sync, one statement): the claim, taken out once when the
    /// term ends or the handle is dropped.
    claim: Mutex<Option<Claim>>,
    /// Order 2 (async; only the resign takes it, and only while it holds
    /// `writes`): the follower of the partition as the challenge
    /// left it, and the members passed over then; a resign reads on from
    /// there (see `resign::successor_waits`) and takes it, once.
    follower: tokio::sync::Mutex<Option<(Follower, Vec<String>)>>,
}

/// The term's renewal state, read and written in one critical section each,
/// so a reader never sees a lease without the send time that goes with it.
struct Renewal {
    /// The last lease this member committed.
    lease: Lease,
    /// The time (ms, on the local deadline clock, `Member::mono`) that
    /// lease's write was sent: the local lease deadline is this plus the
    /// lease duration.
    sent: i64,
    /// Transient renewal failures in a row.
    failures: u32,
    /// Why the last renewal failed, while renewals fail: the lease's expiry
    /// names it.
    last_failure: Option<String>,
}

impl Held {
    /// The renewal state, locked (a poisoned lock is taken as it is: every
    /// write of it is one assignment).
    fn renewal(&self) -> std::sync::MutexGuard<'_, Renewal> {
        self.renewal.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends the term with `reason` (the first reason wins), stops renewing
    /// and lets go of the claim.
    fn end(&self, reason: Error) {
        self.stop.cancel();
        let reason = Arc::new(reason);
        let kind = match &*reason {
            e if e.means_fenced() => Some(EventKind::Fenced {
                error: Arc::clone(&reason),
            }),
            Error::LeaseExpired(_) => Some(EventKind::LeaseExpired),
            Error::Resigned => None,
            _ => Some(EventKind::Ended {
                error: Arc::clone(&reason),
            }),
        };
        // The end is counted in the metrics before the waiters wake (the
        // closure runs before the watch notifies): whoever sees the term
        // ended finds it counted.
        let first = self.ended.send_if_modified(|slot| {
            if slot.is_none() {
                if let Some(kind) = &kind {
                    self.member.count(kind);
                }
                *slot = Some(Arc::clone(&reason));
                true
            } else {
                false
            }
        });
        if let Some(kind) = kind.filter(|_| first) {
            self.member.send(kind);
        }
        self.release_claim();
    }

    /// Ends the term of a crashed process with `reason`, locally: stops
    /// renewing and ends what is pending, and sends nothing (no resign, no
    /// event, no metric), as a killed process does. The first reason wins.
    fn abandon(&self, reason: Error) {
        self.stop.cancel();
        self.abandoned.cancel();
        let reason = Arc::new(reason);
        self.ended.send_if_modified(|slot| {
            if slot.is_none() {
                *slot = Some(reason);
                true
            } else {
                false
            }
        });
        self.release_claim();
    }

    /// `fut`, unless the process crashed first: then the closed error
    /// naming the crash, and `fut` is dropped where it waits (for a
    /// process that never answers again).
    async fn unless_crashed<T>(&self, fut: impl Future<Output = Result<T>>) -> Result<T> {
        tokio::select! {
            biased;
            _ = self.abandoned.cancelled() => Err(crate::error::process_crashed()),
            r = fut => r,
        }
    }

    fn release_claim(&self) {
        let claim = self.claim.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(claim);
    }

    fn is_ended(&self) -> bool {
        self.ended.borrow().is_some()
    }

    /// The local lease deadline, ms on the local deadline clock (monotonic,
    /// counting suspended time).
    fn deadline(&self) -> i64 {
        let sent = self.renewal().sent;
        sent.saturating_add(millis(self.member.options.election.lease_duration))
    }

    /// The lease time left on the local deadline clock (zero once it ran
    /// out): read afresh at every call, so a suspend that outlasted the lease
    /// shows at the first call after the resume, whatever timers did not fire.
    fn left(&self) -> Duration {
        let left = self.deadline().saturating_sub(self.member.mono());
        Duration::from_millis(left.max(0) as u64)
    }

    /// Reports how an earlier write with an unknown outcome ended, if a
    /// write just completed it: the user is never left guessing silently.
    fn report_resolved(&self) {
        if let Some(committed) = self.epoch.take_resolved() {
            self.member.emit(EventKind::WriteResolved { committed });
        }
    }

    /// Ends the term because the local lease deadline passed: renewals did
    /// not commit in time, or a resign (which stops them) did not finish
    /// within the lease left.
    fn expire(&self) {
        let lease = self.member.options.election.lease_duration;
        let role = crate::error::quote(&self.member.role);
        if self.resign_started.load(Ordering::SeqCst) {
            tracing::warn!(
                ?lease,
                "the lease ran out before the resign finished; the term ends"
            );
            self.end(Error::LeaseExpired(format!(
                "the lease of role {role} ({}) ran out before its resign finished; a standby may take over",
                crate::human::duration(lease)
            )));
            return;
        }
        let last = self.renewal().last_failure.clone();
        let last = last
            .map(|e| format!("; the last renewal failed: {e}"))
            .unwrap_or_default();
        tracing::warn!(
            ?lease,
            "no renewal committed within the lease{last}; the term ends"
        );
        self.end(Error::LeaseExpired(format!(
            "no renewal of role {role} committed within the lease ({}){last}; a standby may have taken over",
            crate::human::duration(lease)
        )));
    }
}

/// The held leadership of a role.
///
/// Renews the lease in the background. [`Leadership::done`] resolves when the
/// role ends and [`Leadership::err`] then says why: [`Error::Fenced`] (a newer
/// epoch exists), [`Error::LeaseExpired`] (no renewal committed within the
/// lease, measured from the send time of the last committed one on a
/// monotonic clock that counts the time the machine was suspended,
/// [`crate::Clock::boot_millis`]: a standby may have taken over),
/// [`Error::Resigned`], or a fatal error. Stop the role's work when it resolves; work outside Kafka
/// should also stop when [`Leadership::lease_left`] reaches zero.
///
/// Dropping a `Leadership` stops the renewals without resigning: standbys take
/// over once the lease expires. Call [`Leadership::resign`] to hand over at
/// once.
pub struct Leadership {
    held: Arc<Held>,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("role", &self.held.member.role)
            .field("member", &self.held.member.member)
            .field("token", &self.held.token)
            .field(
                "ended",
                &self.held.ended.borrow().as_ref().map(|e| e.to_string()),
            )
            .finish()
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        self.held.stop.cancel();
        self.held.release_claim();
    }
}

impl Leadership {
    pub(super) fn start(member: Arc<Member>, won: Won, claim: Option<Claim>) -> Leadership {
        let Won {
            epoch,
            lease,
            sent,
            stale,
            follower,
        } = won;
        let (ended, _) = watch::channel(None);
        let span = member.span.clone();
        let held = Arc::new(Held {
            token: epoch.token(),
            epoch,
            member,
            renewal: Mutex::new(Renewal {
                lease,
                sent,
                failures: 0,
                last_failure: None,
            }),
            ended,
            writes: tokio::sync::Mutex::new(()),
            resign_started: AtomicBool::new(false),
            resign_called: AtomicBool::new(false),
            resigned: watch::channel(None).0,
            stop: CancellationToken::new(),
            abandoned: CancellationToken::new(),
            claim: Mutex::new(claim),
            follower: tokio::sync::Mutex::new(Some((follower, stale))),
        });
        tokio::spawn(renewal::renew_task(held.clone()).instrument(span));
        Leadership { held }
    }

    /// The fencing token of this term. Pass it with every guarded write.
    pub fn token(&self) -> FencingToken {
        self.held.token
    }

    /// The role.
    pub fn role(&self) -> &str {
        &self.held.member.role
    }

    /// The member id.
    pub fn member(&self) -> &str {
        &self.held.member.member
    }

    /// The partition of `__coordination_state` the role's records go to.
    pub fn partition(&self) -> i32 {
        self.held.member.partition
    }

    /// The last lease this member wrote (granted at, deadline).
    pub fn lease(&self) -> Lease {
        self.held.renewal().lease.clone()
    }

    /// The lease time left on this member's monotonic clock, which counts
    /// the time the machine was suspended ([`crate::Clock::boot_millis`]):
    /// the lease duration since the send time of the last committed
    /// renewal. Zero once it ran out, and then the term has ended with
    /// [`Error::LeaseExpired`] (this call ends it, if nothing else noticed
    /// first): zero here and [`Leadership::is_held`] true are never seen
    /// together.
    pub fn lease_left(&self) -> Duration {
        if !self.is_held() {
            return Duration::ZERO;
        }
        self.held.left()
    }

    /// How many renewals in a row have failed with a transient error.
    pub fn renewal_failures(&self) -> u32 {
        self.held.renewal().failures
    }

    /// True until the role ends. False from the local lease deadline on,
    /// which ends the term with [`Error::LeaseExpired`] if nothing else
    /// noticed first.
    pub fn is_held(&self) -> bool {
        if self.held.is_ended() {
            return false;
        }
        if self.held.left().is_zero() {
            self.held.expire();
            return false;
        }
        true
    }

    /// Resolves when the role ends (fenced, resigned, or a fatal error; in
    /// the test kit, when its process crashed: [`Leadership::err`] is then
    /// the client's closed error naming the crash).
    pub fn done(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.held.ended.subscribe();
        async move {
            let _ = rx.wait_for(|e| e.is_some()).await;
        }
    }

    /// Why the role ended, or `None` while it is held (see
    /// [`Leadership::is_held`]).
    pub fn err(&self) -> Option<EndReason> {
        self.is_held();
        self.held.ended.borrow().clone()
    }

    /// Sends this member's events from now on to `events` (see
    /// [`crate::events`]).
    pub fn subscribe(&self, events: EventSender) {
        self.held.member.events.subscribe(events);
    }

    /// A handle on this term that does not keep it alive, for the client
    /// that closes whatever it still holds ([`HeldRef::resign`]).
    pub(crate) fn weak(&self) -> HeldRef {
        HeldRef(Arc::downgrade(&self.held))
    }
}

/// A term a client may have to resign when it closes: a weak reference,
/// so it keeps neither the term nor its producer alive.
pub(crate) struct HeldRef(Weak<Held>);

impl HeldRef {
    /// False once the term ended or nothing refers to it any more.
    pub(crate) fn is_live(&self) -> bool {
        self.0.upgrade().is_some_and(|h| !h.is_ended())
    }

    /// The lease time the term has left (zero once it ended or nothing
    /// refers to it): a close resigns the terms with the least left first.
    pub(crate) fn left(&self) -> Duration {
        match self.0.upgrade() {
            Some(h) if !h.is_ended() => h.left(),
            _ => Duration::ZERO,
        }
    }

    /// Ends the term of a crashed process (see `Held::abandon`) with the
    /// closed error naming the crash, if it is still referred to.
    pub(crate) fn abandon(&self) {
        if let Some(held) = self.0.upgrade() {
            held.abandon(crate::error::process_crashed());
        }
    }

    /// Resigns the term if it still runs, as [`Leadership::resign`] does
    /// (bounded the same way); a resign already under way is waited for.
    /// Returns the resign's error, `Ok` when there was nothing to resign.
    pub(crate) async fn resign(&self) -> Result<()> {
        match self.0.upgrade() {
            Some(held) if !held.is_ended() || held.resign_started.load(Ordering::SeqCst) => {
                held.resign_called.store(true, Ordering::SeqCst);
                resign::resign_held(&held).await
            }
            _ => Ok(()),
        }
    }
}

/// The error to return for an operation on an ended leadership (a guarded
/// write, the term's input reader): the kinds that say why a term ends as
/// they are, anything else fatal with the reason as its cause.
pub(crate) fn ended_error(reason: &EndReason) -> Error {
    match &**reason {
        Error::Fenced(why) => Error::Fenced(why.clone()),
        Error::Resigned => Error::Resigned,
        Error::LeaseExpired(why) => Error::LeaseExpired(why.clone()),
        _ => Error::fatal("the leadership ended", SharedError(Arc::clone(reason))),
    }
}

/// The end reason of a term whose write `e` was fenced: `e` itself when it
/// is [`Error::Fenced`] (not wrapped again, which printed "fenced: fenced:
/// ..."), else `e`'s text as a fence (an outcome-unknown commit that was
/// fenced).
fn fenced_reason(e: &Error) -> Error {
    match e {
        Error::Fenced(m) => Error::Fenced(m.clone()),
        other => Error::Fenced(other.to_string()),
    }
}
