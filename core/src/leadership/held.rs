//! The held leadership: the renewal task, guarded writes and resign, all
//! through the epoch the member minted and owns.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::acquire::Won;
use super::member::{millis, Backoff, Follower, Member};
use crate::codec::Lease;
use crate::error::{Error, Result, SharedError};
use crate::events::{EventKind, EventSender};
use crate::token::FencingToken;
use crate::transport::{LeaseWriter, OutRecord, Superseded};

/// Why a [`Leadership`] ended, shared by every clone of its error.
pub type EndReason = Arc<Error>;

/// An object kept alive while the leadership is held (a client's claim on
/// the role), let go when the term ends or the handle is dropped.
type Claim = Box<dyn std::any::Any + Send + Sync>;

/// The shared state of a term, behind every clone of its [`Leadership`].
///
/// Locks: `writes` (async) is taken first and held across a renewal, a
/// guarded write or the resign's tombstone; `follower` (async) only by the
/// resign, inside `writes`. The synchronous `renewal` and `claim` are
/// each taken for one statement, never together and never across an
/// await, so they nest inside anything and nothing nests inside them.
struct Held {
    member: Arc<Member>,
    /// The epoch this member minted: every renewal and guarded write goes
    /// through it.
    epoch: Box<dyn LeaseWriter>,
    token: FencingToken,
    /// What the renewals leave behind (see [`Renewal`]).
    renewal: Mutex<Renewal>,
    ended: watch::Sender<Option<EndReason>>,
    /// Serialises renewals, guarded writes and resign on the epoch.
    writes: tokio::sync::Mutex<()>,
    /// Set once a resign started; the resign runs in its own task and
    /// publishes its result in `resigned`.
    resign_started: AtomicBool,
    /// Set when [`Leadership::resign`] is called, before its future runs:
    /// a guarded write called after it is refused at its call, so no write
    /// issued after a resign can commit, whatever order the futures run in.
    resign_called: AtomicBool,
    resigned: watch::Sender<Option<Result<(), Arc<Error>>>>,
    stop: CancellationToken,
    /// Cancelled when the term's process crashed ([`HeldRef::abandon`]): a
    /// write or resign pending then, or called later, ends with
    /// [`crate::error::process_crashed`].
    abandoned: CancellationToken,
    claim: Mutex<Option<Claim>>,
    /// The follower of the partition as the challenge left it, and the
    /// members passed over then: a resign reads on from there (see
    /// `resign_task`).
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

    /// The lease time a renewal is always left: a guarded write may not
    /// run into it. The renew interval, or the time from a renewal's
    /// schedule to the deadline (lease - renew) when that is shorter: a
    /// renewal that starts on time is never kept waiting by a write past
    /// the point where less than this is left.
    fn renewal_reserve(&self) -> Duration {
        let e = &self.member.options.election;
        e.renew_interval
            .min(e.lease_duration.saturating_sub(e.renew_interval))
    }

    /// How long a guarded write starting now may take: one renew interval,
    /// and never into the renewal's reserve ([`Held::renewal_reserve`]).
    fn write_bound(&self) -> Duration {
        let renew = self.member.options.election.renew_interval;
        self.left()
            .saturating_sub(self.renewal_reserve())
            .min(renew)
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
        tokio::spawn(renew_task(held.clone()).instrument(span));
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

    /// Writes `records` in one transaction of this term's epoch, serialised
    /// with the renewals. The broker fences a deposed leader's write: it
    /// fails with [`Error::Fenced`], none of its records become visible, and
    /// the leadership ends.
    ///
    /// A write may take at most one renew interval, and never runs into the
    /// lease time kept for the next renewal (the renew interval, or lease -
    /// renew when that is shorter), so it never starves the renewals: one
    /// not acknowledged by then fails with [`Error::Transient`], and nothing
    /// of it is ever written; while renewals fail and less than that time
    /// is left, a write fails at once with [`Error::Transient`], sending
    /// nothing. A partition whose leader does not answer costs the writes
    /// to it: records it never acknowledged keep the epoch's transaction
    /// from being ended (their copy could land after an abort), so the
    /// renewals first send them again, for at most half of each renewal's
    /// time; until the partition's leader answers or the partition moves
    /// (within `broker.session.timeout.ms` of a dead or paused broker), the
    /// renewals fail, and once the lease runs out the term ends with
    /// [`Error::LeaseExpired`] naming the partition; when the lease ran out meanwhile (the process was
    /// paused, say), it fails with [`Error::LeaseExpired`] and the term
    /// ends; if the write was already in flight then (the transport overran
    /// its bound), it fails with [`Error::OutcomeUnknown`] instead, and the
    /// term ends all the same. Its transaction is aborted once the transaction
    /// coordinator has it (at once, unless the coordinator is moving or
    /// still completing the previous transaction; then before the next
    /// write or renewal of the role). A failure after its commit was sent is
    /// [`Error::OutcomeUnknown`]: the records may or may not be visible.
    ///
    /// Call order: a write called after [`Leadership::resign`] was called on
    /// this leadership fails with [`Error::Resigned`] and sends nothing, even
    /// when its future runs before the resign's (the check is made at the
    /// call, not at the first poll). A write called before the resign either
    /// commits before the resign clears the lease, or fails.
    pub fn write(&self, records: Vec<OutRecord>) -> impl Future<Output = Result<()>> + Send + '_ {
        let refused = self.refused_after_resign();
        async move {
            match refused {
                Some(e) => Err(e),
                None => self.held.unless_crashed(self.write_now(records)).await,
            }
        }
    }

    /// [`Leadership::write`] on a shared handle: the same check at the call,
    /// a future that owns the handle (for bindings, which run it on a
    /// runtime while the caller goes on).
    pub fn write_owned(
        self: Arc<Self>,
        records: Vec<OutRecord>,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let refused = self.refused_after_resign();
        async move {
            match refused {
                Some(e) => Err(e),
                None => self.held.unless_crashed(self.write_now(records)).await,
            }
        }
    }

    /// The error of a write called once a resign was called, else `None`.
    fn refused_after_resign(&self) -> Option<Error> {
        if self.held.resign_called.load(Ordering::SeqCst) {
            tracing::debug!(parent: &self.held.member.span, "a guarded write called after resign was refused; nothing was sent");
            return Some(Error::Resigned);
        }
        None
    }

    async fn write_now(&self, records: Vec<OutRecord>) -> Result<()> {
        let held = &self.held;
        let _w = tokio::select! {
            biased;
            w = held.writes.lock() => w,
            _ = held.member.options.clock.sleep(held.left()) => {
                // The lease ran out while a renewal or another write held the
                // producer: the term ends now, whoever notices first.
                if self.err().is_none() {
                    held.expire();
                }
                return Err(ended_error(&self.err().expect("ended above")));
            }
        };
        if let Some(e) = self.err() {
            return Err(ended_error(&e));
        }
        if held.left().is_zero() {
            held.expire();
            return Err(ended_error(&self.err().expect("ended above")));
        }
        let within = held.write_bound();
        if within.is_zero() {
            return Err(Error::transient(
                format!(
                    "a guarded write for role {}",
                    crate::error::quote(&held.member.role)
                ),
                format!(
                    "the lease has {} left, within the {} kept for its renewal (renewals are \
                     failing); nothing was sent",
                    crate::human::duration(held.left()),
                    crate::human::duration(held.renewal_reserve())
                ),
            ));
        }
        let written = tokio::select! {
            biased;
            w = held.epoch.write_guarded(records, within) => w,
            // The transport overran the bound past the lease: the term is
            // over, but the write goes on in its own task and its commit may
            // already be on its way, so its outcome is unknown (reporting
            // LEASE_EXPIRED here let a committed write look failed: seen by
            // the fault campaign).
            _ = held.member.options.clock.sleep(held.left()) => {
                if self.err().is_none() {
                    held.expire();
                }
                return Err(Error::OutcomeUnknown {
                    context: format!(
                        "a guarded write for role {}",
                        crate::error::quote(&held.member.role)
                    ),
                    source: "the lease ran out while the write was in flight, and the term has ended \
                             (LEASE_EXPIRED); the records may or may not become visible"
                        .into(),
                });
            }
        };
        held.report_resolved();
        match written {
            Err(e) if e.means_fenced() => {
                let _span = held.member.span.enter();
                tracing::warn!(token = %held.token, why = %e, "fenced");
                held.end(fenced_reason(&e));
                Err(e)
            }
            // The lease ran out while the write waited (the process was
            // paused, or the write was given the lease's last moments):
            // nothing of it was written, and the term is over. That, not a
            // failure to retry, is the answer.
            Err(e @ Error::Transient { .. }) if held.left().is_zero() => {
                tracing::debug!(why = %e, "a guarded write outlived the lease");
                if self.err().is_none() {
                    held.expire();
                }
                Err(ended_error(&self.err().expect("ended above")))
            }
            // What no retry mends (a data topic that does not exist, a
            // denied write) says which role's write it was: the caller may
            // hold many.
            Err(Error::Fatal { context, source }) => Err(Error::Fatal {
                context: format!(
                    "a guarded write for role {}: {context}",
                    crate::error::quote(&held.member.role)
                ),
                source,
            }),
            other => other,
        }
    }

    /// Gives the role up, in a way that can never fence a successor: stops
    /// renewing, clears the lease with a tombstone written through this
    /// term's own epoch (fenced harmlessly if the member was deposed without
    /// noticing), then bumps the epoch only if it is still this term's
    /// (InitProducerId with this producer id and epoch, KIP-360), so the
    /// resigned token is superseded and any write of the term still in
    /// flight is fenced. It deregisters and lets go of the epoch. The next
    /// standby in rank takes over without waiting for the old deadline.
    ///
    /// Bounded: each step gets at most the lease duration, and the whole
    /// resign ends the handle ([`Leadership::done`] fires, `is_held` is false)
    /// whatever happens. It runs in its own task, so a caller that stops
    /// waiting (a dropped future, a cancelled task) leaves no half-state.
    /// Idempotent: a second call waits for the first and returns `Ok(())`.
    ///
    /// Call order: from this call on (before its future runs), every
    /// [`Leadership::write`] called on this leadership fails with
    /// [`Error::Resigned`] without sending anything.
    pub fn resign(&self) -> impl Future<Output = Result<()>> + Send + '_ {
        self.held.resign_called.store(true, Ordering::SeqCst);
        self.held.unless_crashed(resign_held(&self.held))
    }

    /// [`Leadership::resign`] on a shared handle: the same mark at the call,
    /// a future that owns the handle (for bindings).
    pub fn resign_owned(self: Arc<Self>) -> impl Future<Output = Result<()>> + Send + 'static {
        self.held.resign_called.store(true, Ordering::SeqCst);
        async move { self.held.unless_crashed(resign_held(&self.held)).await }
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
                resign_held(&held).await
            }
            _ => Ok(()),
        }
    }
}

/// [`Leadership::resign`] on the shared state of a term.
async fn resign_held(this: &Arc<Held>) -> Result<()> {
    let first = !this.resign_started.swap(true, Ordering::SeqCst);
    let mut outcome = this.resigned.subscribe();
    if first {
        let held = Arc::clone(this);
        let span = held.member.span.clone();
        // A resign that cannot finish (cut off, frozen) must not keep the
        // term alive past the local deadline (found by the model): the
        // term ends there with LEASE_EXPIRED, the resign goes on.
        let watch = Arc::clone(&held);
        let expiry = tokio::spawn(async move {
            let left = watch.left();
            watch.member.options.clock.sleep(left).await;
            if !watch.is_ended() {
                watch.expire();
            }
        });
        let task = tokio::spawn(
            async move {
                let r = resign_task(&held).await.map_err(Arc::new);
                expiry.abort();
                r
            }
            .instrument(span),
        );
        let held = Arc::clone(this);
        tokio::spawn(async move {
            let r = match task.await {
                Ok(r) => r,
                // A panic in the resign: the term ends all the same.
                Err(e) => {
                    held.end(Error::Resigned);
                    Err(Arc::new(Error::fatal("the resign task", e)))
                }
            };
            held.resigned.send_replace(Some(r));
        });
    }
    // The sender lives in `held`, which this handle keeps alive.
    let result = match outcome.wait_for(Option::is_some).await {
        Ok(r) => r.clone().unwrap_or(Ok(())),
        Err(_) => Ok(()),
    };
    if !first {
        return Ok(());
    }
    result.map_err(|e| match Arc::try_unwrap(e) {
        Ok(e) => e,
        Err(shared) => same_kind("resigning", shared),
    })
}

/// An error of the same kind as `shared`, with `shared` as its cause: a
/// transient failure of a resign stays transient (it was reported as FATAL).
fn same_kind(context: &str, shared: Arc<Error>) -> Error {
    match &*shared {
        Error::Transient { .. } => Error::transient(context, SharedError(shared)),
        Error::OutcomeUnknown { .. } => Error::OutcomeUnknown {
            context: context.to_owned(),
            source: Box::new(SharedError(shared)),
        },
        Error::Fenced(why) => Error::Fenced(why.clone()),
        Error::LeaseExpired(why) => Error::LeaseExpired(why.clone()),
        Error::InvalidArgument(why) => Error::InvalidArgument(why.clone()),
        Error::Format(e) => Error::Format(e.clone()),
        Error::Encode(e) => Error::Encode(e.clone()),
        Error::Resigned => Error::Resigned,
        Error::Cancelled => Error::Cancelled,
        _ => Error::fatal(context, SharedError(shared)),
    }
}

/// The steps of a resign (see [`Leadership::resign`]).
///
/// 1. The lease tombstone, through the term's own epoch (fenced harmlessly
///    when the member was deposed without noticing).
/// 2. If another member is registered (as the follower of the challenge
///    saw it, read on by one poll beside the tombstone's transaction: see
///    `successor_waits`), the deregistration goes out at once, beside the
///    tombstone: the successor waits for both, and its mint supersedes the
///    resigned token. No bump of this member's own may run then: a
///    coordinator aborts and fences a successor's open transaction for any
///    InitProducerId carrying the role's producer id, whatever the epoch
///    (see `DescribeClient::bump_if_current`). Should that member have left
///    meanwhile, the token stays current at the coordinator, unused, until
///    the next mint.
/// 3. Otherwise the member supersedes its own token first (bumps the epoch
///    if it is still the term's) and deregisters after. A member that
///    registered since the read ranks behind it, and while it is still
///    registered no other member may challenge before the cleared lease's
///    deadline plus one stagger (the election rules); the bump is bounded
///    by that time, so it fences no one.
///
/// Not a full read of the partition: `read_partition` waits for the last
/// stable offset, so beside the tombstone it would wait for the tombstone's
/// own markers, tens of milliseconds on the hand-over's path. The events
/// keep their order: `resigned`, then `deregistered`.
async fn resign_task(held: &Held) -> Result<()> {
    held.stop.cancel();
    let m = &held.member;
    let bound = m.options.election.lease_duration;
    let mut result = Ok(());
    // Set when the tombstone committed and no other member is registered:
    // the time the bump may take.
    let mut supersede_within = None;
    // The deregistration, when it went out beside the tombstone.
    let mut deregistered = None;
    // Waits for a renewal or guarded write in flight, at most the bound.
    let writes = tokio::time::timeout(bound, held.writes.lock()).await;
    if writes.is_ok() && !held.is_ended() {
        let now = tokio::time::Instant::now();
        // A bound too large for the clock means no bound in practice.
        let deadline = now
            .checked_add(bound)
            .unwrap_or_else(|| now + Duration::from_secs(365 * 86_400));
        let left = move || deadline.saturating_duration_since(tokio::time::Instant::now());
        let beside = async {
            if successor_waits(held).await {
                Some(deregister_within(m, bound).await)
            } else {
                None
            }
        };
        let (written, early) =
            tokio::join!(held.epoch.write_lease(m.lease_tombstone(), left()), beside);
        match written {
            Ok(()) => {
                m.emit(EventKind::Resigned { cleared: true });
                if early.is_none() {
                    // No other member may challenge before the cleared
                    // deadline plus one stagger (on its clock; ours here).
                    let cleared = held.renewal().lease.deadline;
                    // Taken as a span now and counted on the monotonic
                    // clock from here (the bump's own deadline): a pause or
                    // a wall-clock step after this point only shortens it.
                    // The local deadline of the last renewal (monotonic)
                    // bounds it too, should the wall clock have stepped
                    // back since that renewal was sent.
                    let stagger = millis(m.options.election.challenge_stagger);
                    let by_wall = cleared.saturating_add(stagger).saturating_sub(m.now());
                    let by_mono = held
                        .deadline()
                        .saturating_add(stagger)
                        .saturating_sub(m.mono());
                    let quiet = by_wall.min(by_mono);
                    let quiet = Duration::from_millis(u64::try_from(quiet).unwrap_or(0));
                    supersede_within = Some(left().min(quiet));
                }
            }
            Err(e) if e.means_fenced() => {
                // Deposed without noticing: the successor's lease stands.
                tracing::info!(why = %e, "resigning: already fenced; the successor's lease stands");
                m.emit(EventKind::Resigned { cleared: false });
            }
            Err(e) => {
                tracing::warn!(error = %e, "resign could not clear the lease; standbys take over at the deadline");
                m.emit(EventKind::Resigned { cleared: false });
                result = Err(e);
            }
        }
        deregistered = early;
    }
    if let Some(within) = supersede_within.filter(|w| !w.is_zero()) {
        match held.epoch.supersede(within).await {
            Ok(Superseded::Bumped(next)) => {
                tracing::info!(token = %held.token, superseded_by = %next, "resigned");
            }
            Ok(Superseded::AlreadySuperseded) => {
                tracing::info!(token = %held.token, "resigned; a newer epoch already superseded it");
            }
            Err(e) => {
                tracing::warn!(error = %e, "resigned, but the epoch could not be superseded");
            }
        }
    }
    let deregistered = match deregistered {
        Some(r) => r,
        None => deregister_within(m, bound).await,
    };
    match deregistered {
        Ok(()) => m.emit(EventKind::Deregistered),
        Err(e) => {
            if result.is_ok() {
                result = Err(e);
            }
        }
    }
    held.end(Error::Resigned);
    result
}

/// Whether a member other than this one (and not passed over at the
/// challenge) is registered: from the follower's state at the challenge,
/// read on (polls until one brings nothing, within [`RESIGN_READ`]) when
/// that state shows no one. The polls run beside the tombstone's
/// transaction: they return what was committed before the transaction
/// began (its open transaction holds the last stable offset). A failed or
/// slow poll answers `false`: the resign then bumps before it deregisters,
/// which is safe whoever waits.
///
/// The follower stands where the term began, and a term of minutes leaves
/// thousands of renewals of the partition's other roles behind it (1,300
/// a minute with a thousand roles in the process): it starts over from
/// what the transport keeps of the partition when that reaches further
/// ([`crate::transport::StateReader::kept_state`]), and polls only what
/// came after.
async fn successor_waits(held: &Held) -> bool {
    let m = &held.member;
    let Some((mut follower, stale)) = held.follower.lock().await.take() else {
        return false;
    };
    let other = |f: &Follower| {
        f.state
            .roster()
            .any(|e| e.member != m.member && !stale.contains(&e.member))
    };
    if other(&follower) {
        return true;
    }
    let deadline = tokio::time::Instant::now() + RESIGN_READ;
    // The first poll waits for the first fetch; the next ones take what
    // that fetch brought, until one brings nothing (the term's own first
    // lease may come alone in the first batch, a registration after it).
    // A follower that skipped to what the transport keeps does not wait:
    // that is as recent as the last fetch, and what came since is already
    // fetched.
    let mut wait = RESIGN_READ;
    let kept = tokio::time::timeout_at(deadline, m.transport.kept_state(m.partition)).await;
    if let Ok(Some(kept)) = kept {
        match follower.skip_to(m, &kept) {
            Ok(true) if other(&follower) => return true,
            Ok(true) => wait = Duration::ZERO,
            Ok(false) => {}
            Err(e) => {
                tracing::debug!(error = %e, "resigning: what the transport keeps of the partition does not build");
                return false;
            }
        }
    }
    loop {
        match tokio::time::timeout_at(deadline, follower.poll(m, wait)).await {
            Ok(Ok(n)) => {
                if other(&follower) {
                    return true;
                }
                if n == 0 {
                    return false;
                }
                wait = Duration::ZERO;
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "resigning: reading on from the challenge failed");
                return false;
            }
            Err(_) => return false,
        }
    }
}

/// The longest a resign reads the roster for (`successor_waits`).
const RESIGN_READ: Duration = Duration::from_millis(100);

/// Deregisters `m` (retrying transient failures) within `bound`; the caller
/// emits `deregistered`.
async fn deregister_within(m: &Member, bound: Duration) -> Result<()> {
    let never = CancellationToken::new();
    match tokio::time::timeout(
        bound,
        m.retry("deregistering", &never, || m.append_deregistration()),
    )
    .await
    {
        Ok(r) => r,
        Err(_) => {
            tracing::warn!(
                ?bound,
                "could not deregister within the bound; the registration stays"
            );
            Err(Error::transient(
                "deregistering",
                format!("not done within {}", crate::human::duration(bound)),
            ))
        }
    }
}

/// The error to return for an operation on an ended leadership; the reason
/// stays the cause.
fn ended_error(reason: &EndReason) -> Error {
    match &**reason {
        Error::Fenced(why) => Error::Fenced(why.clone()),
        Error::Resigned => Error::Resigned,
        Error::LeaseExpired(why) => Error::LeaseExpired(why.clone()),
        _ => Error::fatal("the leadership ended", SharedError(Arc::clone(reason))),
    }
}

/// The renewal task: renews, and ends the term if the loop itself panics,
/// so a bug never leaves a role that looks held but is not renewed.
async fn renew_task(held: Arc<Held>) {
    let task = tokio::spawn(renew_loop(held.clone()).in_current_span());
    if let Err(e) = task.await {
        if e.is_panic() {
            tracing::error!("the renewal task panicked; ending the term");
            held.end(Error::fatal("renewing the lease", e));
        }
    }
}

async fn renew_loop(held: Arc<Held>) {
    let m = &held.member;
    let clock = &m.options.clock;
    let renew = millis(m.options.election.renew_interval);
    let mut backoff = Backoff::new(m.options.initial_backoff, m.options.max_backoff);
    let mut next_at = held.deadline() - millis(m.options.election.lease_duration) + renew;
    loop {
        let until = |at: i64| Duration::from_millis(at.saturating_sub(m.mono()).max(0) as u64);
        tokio::select! {
            biased;
            _ = held.stop.cancelled() => return,
            _ = clock.sleep(held.left()) => { held.expire(); return; }
            _ = clock.sleep(until(next_at)) => {}
        }
        // A guarded write in flight holds the producer for at most one renew
        // interval; the lease deadline bounds the wait all the same.
        let _w = tokio::select! {
            biased;
            _ = held.stop.cancelled() => return,
            w = held.writes.lock() => w,
            _ = clock.sleep(held.left()) => { held.expire(); return; }
        };
        if held.stop.is_cancelled() {
            return;
        }
        let within = held.left();
        if within.is_zero() {
            held.expire();
            return;
        }
        let sent = m.mono();
        let (record, lease) = match m.lease_record(held.token) {
            Ok(v) => v,
            Err(e) => {
                held.end(e);
                return;
            }
        };
        // The write is bounded by the lease time left: past it the term
        // ends, whether or not the transport kept to the bound (a
        // transaction the write leaves behind completes in the epoch's own
        // task).
        let written = tokio::select! {
            biased;
            w = held.epoch.write_lease(record, within) => w,
            _ = clock.sleep(held.left()) => { held.expire(); return; }
        };
        held.report_resolved();
        match written {
            Ok(()) => {
                tracing::debug!(deadline = %crate::rfc3339::Rfc3339(lease.deadline), "renewed");
                let deadline = lease.deadline;
                *held.renewal() = Renewal {
                    lease,
                    sent,
                    failures: 0,
                    last_failure: None,
                };
                backoff.reset();
                crate::metrics::renewal(
                    &m.role,
                    Duration::from_millis(m.mono().saturating_sub(sent).max(0) as u64),
                );
                m.emit(EventKind::Renewed { deadline });
                next_at = sent.saturating_add(renew);
            }
            Err(e) if e.means_fenced() => {
                tracing::warn!(token = %held.token, why = %e, "fenced");
                held.end(fenced_reason(&e));
                return;
            }
            Err(e) if e.is_transient() || matches!(e, Error::OutcomeUnknown { .. }) => {
                let failures = {
                    let mut r = held.renewal();
                    r.failures += 1;
                    r.last_failure = Some(e.to_string());
                    r.failures
                };
                let d = backoff.take().min(m.options.election.renew_interval);
                tracing::warn!(error = %e, failures, retry_in = ?d, "renewal failing");
                m.emit(EventKind::RenewalFailing {
                    failures,
                    error: Arc::new(e),
                });
                next_at = m.mono().saturating_add(millis(d));
            }
            Err(e) => {
                tracing::error!(error = %e, "renewal failed fatally");
                held.end(e);
                return;
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
            assert_eq!(same_kind("resigning", shared).kind(), kind);
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
}
