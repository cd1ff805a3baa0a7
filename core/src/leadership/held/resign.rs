//! The resign: hands the role over at once, in a way that can never fence
//! a successor (see [`Leadership::resign`]).
//!
//! A call marks the term resigned at once (`resign_called`: a guarded
//! write called from then on is refused). The first call starts the resign
//! in a task of its own (`resign_started`; later calls wait for it and get
//! `Ok(())`), with a watchdog that ends the term with `LEASE_EXPIRED` at
//! the local lease deadline, should the resign not finish by then (the
//! resign goes on). A panic in the resign ends the term as resigned and
//! returns a fatal error. The task's steps, as `resign_task` runs them:
//!
//! 1. Stop renewing.
//! 2. Take the producer, waiting at most the lease duration for a renewal
//!    or guarded write in flight; it is held to the end of the resign. If
//!    it is not free in time, or the term already ended, go to step 6.
//! 3. Clear the lease. First read whether another member waits
//!    (registered, and not passed over at the challenge: the follower of
//!    the challenge, read on by polls, see `successor_waits`). If one does,
//!    write the lease tombstone and this member's deregistration record in
//!    one transaction of the term's own epoch
//!    ([`crate::transport::LeaseWriter::write_lease_and_deregister`]),
//!    bounded by the lease duration: the successor reads both at once, and
//!    its mint supersedes the resigned token. No bump of this member's own
//!    may run then: a coordinator aborts and fences a successor's open
//!    transaction for any InitProducerId carrying the role's producer id,
//!    whatever the epoch (see the Kafka client's `bump_if_current`). Should
//!    that member have left meanwhile, the token stays current at the
//!    coordinator, unused, until the next mint. If no one waits, write the
//!    tombstone alone through the epoch, bounded the same way.
//! 4. The tombstone's answer. Committed: `resigned` (cleared), and when no
//!    one waits, the bump of step 5 gets the time no other member may
//!    challenge in (the cleared lease's deadline plus one stagger, on the
//!    wall clock and on the local deadline clock, whichever ends first),
//!    within what is left of the lease duration. Fenced (deposed without
//!    noticing; the successor's lease stands): `resigned` (not cleared).
//!    Any other failure: `resigned` (not cleared), and the resign returns
//!    that error; standbys take over at the deadline.
//! 5. Supersede the term's token (bump the epoch if it is still the
//!    term's), when step 4 gave it a time: a member that registered since
//!    the read ranks behind this one, and while this one is still
//!    registered no one may challenge within that time, so the bump fences
//!    no one. Its failure is logged, not returned.
//! 6. Deregister through the registrar (unless step 3's transaction
//!    committed, which deregistered), retrying transient failures within
//!    the lease duration: `deregistered`; its failure is returned if
//!    nothing failed before. A transaction of step 3 that failed (fenced:
//!    nothing of it written) deregisters here; one whose outcome is unknown
//!    deregisters here too (a second deregistration record changes
//!    nothing).
//! 7. End the term as resigned (no event of its own) and let go of the
//!    claim.
//!
//! Step 3 does not read the whole partition: `read_partition` waits for the
//! last stable offset, tens of milliseconds on the hand-over's path with the
//! partition's other roles renewing; the read is bounded by [`RESIGN_READ`].
//! The events keep their order: `resigned`, then `deregistered`.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{Held, Leadership};
use crate::error::{Error, Result, SharedError};
use crate::events::EventKind;
use crate::leadership::member::{millis, Follower, Member};
use crate::transport::Superseded;

/// The longest a resign reads the roster for (`successor_waits`).
const RESIGN_READ: Duration = Duration::from_millis(100);

impl Leadership {
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
}

/// [`Leadership::resign`] on the shared state of a term: starts the resign
/// if no call did yet, and waits for its result (`Ok(())` for any call but
/// the first).
pub(super) async fn resign_held(this: &Arc<Held>) -> Result<()> {
    let first = !this.resign_started.swap(true, Ordering::SeqCst);
    let mut outcome = this.resigned.subscribe();
    if first {
        spawn_resign(this);
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

/// Runs the resign in its own task, with the watchdog of the local lease
/// deadline beside it, and publishes its result in `Held::resigned`.
fn spawn_resign(this: &Arc<Held>) {
    let held = Arc::clone(this);
    let span = held.member.span.clone();
    // A resign that cannot finish (cut off, frozen) must not keep the term
    // alive past the local deadline: the term ends there with
    // LEASE_EXPIRED, the resign goes on.
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

/// An error of the same kind as `shared`, with `shared` as its cause: a
/// transient failure of a resign stays transient (it was reported as FATAL).
pub(super) fn same_kind(context: &str, shared: Arc<Error>) -> Error {
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

/// The resign's steps (numbered in the module docs).
async fn resign_task(held: &Held) -> Result<()> {
    // 1.
    held.stop.cancel();
    let m = &held.member;
    let bound = m.options.election.lease_duration;
    // 2. Held (when taken) until the resign returns.
    let producer = tokio::time::timeout(bound, held.writes.lock()).await;
    let cleared = if producer.is_ok() && !held.is_ended() {
        clear_lease(held, bound).await
    } else {
        Cleared::skipped()
    };
    // 5.
    if let Some(within) = cleared.supersede_within.filter(|w| !w.is_zero()) {
        supersede(held, within).await;
    }
    // 6.
    let result = deregister(m, bound, cleared.deregistered, cleared.result).await;
    // 7.
    held.end(Error::Resigned);
    result
}

/// What steps 3 and 4 leave to the rest of the resign.
struct Cleared {
    /// The tombstone's failure, other than a fence.
    result: Result<()>,
    /// Set when the tombstone committed and no other member waits: the
    /// time the bump may take.
    supersede_within: Option<Duration>,
    /// `Some(Ok(()))` when the deregistration committed in the
    /// tombstone's transaction.
    deregistered: Option<Result<()>>,
}

impl Cleared {
    /// Nothing cleared, nothing to bump, not deregistered yet.
    fn skipped() -> Self {
        Cleared {
            result: Ok(()),
            supersede_within: None,
            deregistered: None,
        }
    }
}

/// Steps 3 and 4: the read of whether another member waits, then the
/// tombstone (with the deregistration in its transaction, if one waits),
/// within `bound` from now.
async fn clear_lease(held: &Held, bound: Duration) -> Cleared {
    let m = &held.member;
    let now = tokio::time::Instant::now();
    // A bound too large for the clock means no bound in practice.
    let deadline = now
        .checked_add(bound)
        .unwrap_or_else(|| now + Duration::from_secs(365 * 86_400));
    let left = move || deadline.saturating_duration_since(tokio::time::Instant::now());
    let waits = successor_waits(held).await;
    let written = if waits {
        held.epoch
            .write_lease_and_deregister(m.lease_tombstone(), m.deregistration(), left())
            .await
    } else {
        held.epoch.write_lease(m.lease_tombstone(), left()).await
    };
    let mut cleared = Cleared::skipped();
    match written {
        Ok(()) => {
            m.emit(EventKind::Resigned { cleared: true });
            if waits {
                tracing::info!("deregistered in the tombstone's transaction");
                cleared.deregistered = Some(Ok(()));
            } else {
                let quiet = quiet_time(held);
                cleared.supersede_within = Some(left().min(quiet));
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
            cleared.result = Err(e);
        }
    }
    cleared
}

/// The time from now in which no other member may challenge: the cleared
/// deadline plus one stagger (on its clock; ours here).
fn quiet_time(held: &Held) -> Duration {
    let m = &held.member;
    let cleared = held.renewal().lease.deadline;
    // Taken as a span now and counted on the monotonic clock from here
    // (the bump's own deadline): a pause or a wall-clock step after this
    // point only shortens it. The local deadline of the last renewal
    // (monotonic) bounds it too, should the wall clock have stepped back
    // since that renewal was sent.
    let stagger = millis(m.options.election.challenge_stagger);
    let by_wall = cleared.saturating_add(stagger).saturating_sub(m.now());
    let by_mono = held
        .deadline()
        .saturating_add(stagger)
        .saturating_sub(m.mono());
    let quiet = by_wall.min(by_mono);
    Duration::from_millis(u64::try_from(quiet).unwrap_or(0))
}

/// Step 5: supersedes the term's token within `within`; the outcome is
/// logged only.
async fn supersede(held: &Held, within: Duration) {
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

/// Step 6: deregisters `m` within `bound` unless `early` (the
/// deregistration in the tombstone's transaction) did, emits
/// `deregistered` when it succeeded, and returns `result` (the
/// tombstone's), else the deregistration's failure.
async fn deregister(
    m: &Member,
    bound: Duration,
    early: Option<Result<()>>,
    mut result: Result<()>,
) -> Result<()> {
    let deregistered = match early {
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
    result
}

/// Whether a member other than this one (and not passed over at the
/// challenge) is registered: from the follower's state at the challenge,
/// read on (polls until one brings nothing, within [`RESIGN_READ`]) when
/// that state shows no one. The read ends before the tombstone's
/// transaction begins: a member that registers after it ranks behind this
/// one. A failed or slow poll answers `false`: the resign then bumps
/// before it deregisters, which is safe whoever waits.
///
/// The follower stands where the term began, and a term of minutes leaves
/// thousands of renewals of the partition's other roles behind it: it
/// starts over from what the transport keeps of the partition when that
/// reaches further ([`crate::transport::StateReader::kept_state`]), and
/// polls only what came after.
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
