//! Acquiring a role: register, follow the partition, wait for the turn the
//! election step gives, mint the epoch and write the first lease.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::member::{millis, Backoff, Follower, Member};
use super::{Leadership, LeadershipOptions};
use crate::codec::{encode_key, Key, Lease};
use crate::election::guards::{bound_step, find_twin, passed_over, HoldOff, SeenLease};
use crate::election::{evaluate, Step};
use crate::error::{Error, Result};
use crate::events::EventKind;
use crate::rfc3339::Rfc3339;
use crate::state::RoleState;
use crate::token::FencingToken;
use crate::transport::{Backlog, LeaseWriter, StateRecord, Transport};

/// Deregisters a member whose acquire was abandoned (cancelled, dropped, or
/// failed) so that nothing is left half done. An epoch the candidate minted
/// is its own and goes with it.
struct AcquireGuard {
    member: Option<Arc<Member>>,
}

impl AcquireGuard {
    fn disarm(&mut self) {
        self.member = None;
    }
    async fn run(&mut self) {
        if let Some(m) = self.member.take() {
            undo(m).await;
        }
    }
}

/// Deregisters a member that left the role.
async fn undo(m: Arc<Member>) {
    if let Err(e) = m.deregister().await {
        tracing::warn!(error = %e, "could not deregister an abandoned candidate");
    }
}

impl Drop for AcquireGuard {
    fn drop(&mut self) {
        if let Some(m) = self.member.take() {
            if m.transport.is_gone() {
                // A killed process deregisters nothing; a task left waiting
                // for it would wait for ever.
                return;
            }
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                let span = m.span.clone();
                handle.spawn(undo(m).instrument(span));
            }
        }
    }
}

/// Registers `member` in `role`, waits for its turn, mints the epoch and
/// writes the first lease; returns the held [`Leadership`].
///
/// Options are validated first ([`Error::InvalidArgument`] names the values),
/// then the transport's limits, before anything is written.
/// Waiting ends with [`Error::Cancelled`] when `options.cancel` fires;
/// dropping the future cancels too. Either way the member is deregistered and
/// the epoch it minted (if any) is released, so nothing is left half done. A
/// cancel that fires in the instant the role was won resigns it before the
/// call returns `Cancelled`: a caller that gave up never holds the role.
///
/// Transient transport errors are retried with backoff; a fatal one (an
/// authorization failure, malformed state of this role) is returned.
///
/// Prefer [`crate::client::Client::acquire`], which shares one set of Kafka
/// clients between roles and refuses a second acquire of a role it holds.
pub async fn acquire_leadership(
    transport: Arc<dyn Transport>,
    role: &str,
    member: &str,
    options: LeadershipOptions,
) -> Result<Leadership> {
    acquire_with(transport, role, member, options, None).await
}

/// [`acquire_leadership`] with an object kept alive while the leadership is
/// held (the client's claim on the role).
pub(crate) async fn acquire_with(
    transport: Arc<dyn Transport>,
    role: &str,
    member: &str,
    options: LeadershipOptions,
    claim: Option<Box<dyn std::any::Any + Send + Sync>>,
) -> Result<Leadership> {
    let m = Arc::new(Member::new(transport, role, member, options)?);
    let cancel = m.options.cancel.clone();
    // Nothing is written yet: a cancel ends the check at once (it may take
    // the connect timeout when no broker answers).
    tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(Error::Cancelled),
        r = m.transport.check_member(&m.role, &m.options.election) => r?,
    }
    let mut guard = AcquireGuard {
        member: Some(Arc::clone(&m)),
    };
    let span = m.span.clone();
    let won = acquire_loop(&m, &cancel).instrument(span).await;
    match won {
        Ok(won) => {
            guard.disarm();
            // The held leadership keeps them too (a resign counts no
            // passed-over member as a successor).
            let stale = won.stale.clone();
            let leadership = Leadership::start(Arc::clone(&m), won, claim);
            // After the renewals started: a slow heal never delays them.
            if !stale.is_empty() {
                let span = m.span.clone();
                tokio::spawn(async move { heal(&m, &stale).await }.instrument(span));
            }
            if cancel.is_cancelled() {
                // The caller stopped waiting in the instant the role was won:
                // hand it over rather than hold it until the lease runs out.
                let _ = leadership.resign().await;
                return Err(Error::Cancelled);
            }
            Ok(leadership)
        }
        Err(e) => {
            guard.run().await;
            Err(e)
        }
    }
}

/// Writes the first lease of a won epoch: (lease, send time).
///
/// A write in flight is never cut short by a cancel. A failed write is
/// tried again after the member's back-off ([`Backoff`], from
/// `initial_backoff` doubling to `max_backoff`), whether nothing was
/// written or the outcome is unknown, so a coordinator that keeps leaving
/// the outcome unknown is asked at most once per back-off pause; a cancel
/// ends the pause at once with [`Error::Cancelled`].
///
/// Bounded: no attempt starts once one lease duration has passed since the
/// first, so the call ends within two lease durations (the last attempt's
/// own bound), then fails with [`Error::Transient`] naming the last error.
///
/// Whenever it gives up (a cancel, the bound, an error that is neither
/// transient nor a fence) after an attempt whose lease may have committed,
/// it first lets go of the epoch ([`let_go`]), so no lease is left behind
/// that nobody renews or resigns.
async fn first_lease(
    m: &Member,
    epoch: &dyn LeaseWriter,
    cancel: &CancellationToken,
) -> Result<(Lease, i64)> {
    let lease_duration = m.options.election.lease_duration;
    let mut backoff = Backoff::new(m.options.initial_backoff, m.options.max_backoff);
    let started = m.mono();
    // The last lease whose commit may still complete, and when it was sent.
    let mut maybe_written: Option<(Lease, i64)> = None;
    loop {
        let sent = m.mono();
        let (record, lease) = m.lease_record(epoch.token())?;
        let e = match epoch.write_lease(record, lease_duration).await {
            Ok(()) => return Ok((lease, sent)),
            Err(e) => e,
        };
        let unknown = matches!(e, Error::OutcomeUnknown { .. }) && !e.means_fenced();
        if unknown {
            maybe_written = Some((lease, sent));
        } else if !e.is_transient() {
            // A fence means a newer epoch exists: nothing to let go.
            if !e.means_fenced() {
                if let Some((lease, sent)) = &maybe_written {
                    let_go(m, epoch, lease, *sent).await;
                }
            }
            return Err(e);
        }
        let d = backoff.take();
        let spent = m.mono().saturating_sub(started);
        let out_of_time = spent.saturating_add(millis(d)) >= millis(lease_duration);
        let stop = if out_of_time {
            Some(Error::transient(
                "writing the first lease",
                format!(
                    "no write succeeded within the lease duration ({}): {e}",
                    crate::human::duration(lease_duration)
                ),
            ))
        } else {
            tracing::warn!(error = %e, retry_in = ?d, "writing the first lease failed; retrying");
            m.pause(d, cancel).await.err()
        };
        if let Some(stop) = stop {
            if let Some((lease, sent)) = &maybe_written {
                let_go(m, epoch, lease, *sent).await;
            }
            return Err(stop);
        }
    }
}

/// Lets go of an epoch whose first lease (`lease`, sent at monotonic
/// `sent`) may have committed, when the acquire gives it up: clears the
/// lease with a tombstone through the epoch (its pending commit completes
/// first), so standbys need not wait out its deadline, then supersedes the
/// epoch, so nothing of it lands later. The bump runs only within the time
/// no other member may challenge (the lease's deadline plus one stagger,
/// this member still registered), as a resign's does, and is skipped when
/// the tombstone was fenced (a newer epoch exists). Each step is bounded by
/// the lease duration; failures are logged, as the acquire's own error is
/// what the caller gets.
async fn let_go(m: &Member, epoch: &dyn LeaseWriter, lease: &Lease, sent: i64) {
    let bound = m.options.election.lease_duration;
    match epoch.write_lease(m.lease_tombstone(), bound).await {
        Ok(()) => tracing::info!("cleared a first lease that may have committed"),
        Err(e) if e.means_fenced() => return,
        Err(e) => {
            tracing::warn!(error = %e, "could not clear a first lease that may have committed; standbys take over at its deadline")
        }
    }
    let stagger = millis(m.options.election.challenge_stagger);
    let by_wall = lease
        .deadline
        .saturating_add(stagger)
        .saturating_sub(m.now());
    let by_mono = sent
        .saturating_add(millis(bound))
        .saturating_add(stagger)
        .saturating_sub(m.mono());
    let quiet = Duration::from_millis(u64::try_from(by_wall.min(by_mono)).unwrap_or(0));
    let within = quiet.min(bound);
    if within.is_zero() {
        return;
    }
    match epoch.supersede(within).await {
        Ok(_) => {
            tracing::info!(token = %epoch.token(), "superseded an epoch given up before its first lease was confirmed")
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not supersede an epoch given up before its first lease was confirmed")
        }
    }
}

/// Removes the registrations of `members` (see [`passed_over`]); best
/// effort, reported.
async fn heal(m: &Member, members: &[String]) {
    for other in members {
        let key = match encode_key(&Key::registration(&m.role, other)) {
            Ok(k) => k,
            Err(_) => continue,
        };
        let tombstone = StateRecord {
            partition: m.partition,
            key,
            value: None,
        };
        match m.transport.append(tombstone).await {
            Ok(_) => {
                tracing::info!(member = %other, "removed the registration of a member that did not take its turn")
            }
            Err(e) => {
                tracing::warn!(member = %other, error = %e, "could not remove a stale registration")
            }
        }
    }
}

/// A won challenge: the epoch, its first lease, and when (monotonic ms) that
/// lease was sent.
pub(super) struct Won {
    pub(super) epoch: Box<dyn LeaseWriter>,
    pub(super) lease: Lease,
    pub(super) sent: i64,
    /// Members that missed their turn: their registrations go once the
    /// renewals run (see [`passed_over`]).
    pub(super) stale: Vec<String>,
    /// The follower of the role's partition as it stood at the challenge: a
    /// resign reads on from there to learn whether a successor waits.
    pub(super) follower: Follower,
}

/// [`find_twin`] as the loop's fatal error, naming the member and role.
fn check_unique(
    m: &Member,
    state: &RoleState,
    own: &[i64],
    found: Option<(FencingToken, i64)>,
    minted: &[FencingToken],
) -> Result<()> {
    match find_twin(state, &m.member, own, found, minted) {
        Some(twin) => Err(Error::fatal(
            format!(
                "member {} of role {}",
                crate::error::quote(&m.member),
                crate::error::quote(&m.role)
            ),
            format!("another live process uses this member id (it {twin}); member ids must be unique within a role"),
        )),
        None => Ok(()),
    }
}

/// The next step for `state` at `now`: the election's rules
/// ([`evaluate`]) bounded as [`bound_step`] says, on this member's clocks;
/// a capped wait is logged.
fn step_for(
    m: &Member,
    state: &RoleState,
    now: i64,
    seen: &mut Option<SeenLease>,
    lost: &mut Option<HoldOff>,
) -> Step {
    let step = evaluate(state, &m.member, None, now, &m.options.election);
    let bounded = bound_step(step, state, now, m.mono(), &m.options.election, seen, lost);
    if let (Some(capped), Some(l)) = (bounded.capped_at, state.lease()) {
        tracing::warn!(deadline = %Rfc3339(l.deadline), capped = %Rfc3339(capped), "the holder's deadline lies beyond one lease from when it was seen; waiting only until then");
    }
    bounded.step
}

/// A wait as it was last reported: its turn, rank and the holder's token.
type Reported = Option<(i64, usize, Option<FencingToken>)>;

/// True when a wait at `at` with `rank` behind `holder` is worth a log line
/// after the wait `last` reported: the first wait, another rank or holder,
/// or a turn that moved for another reason than the same holder renewing
/// (which only moves it later). A standby behind a healthy leader logs
/// one line per leader, not one per renewal; its events still report each.
fn wait_is_news(last: Reported, at: i64, rank: usize, holder: Option<FencingToken>) -> bool {
    match last {
        None => true,
        Some((last_at, last_rank, last_holder)) => {
            last_rank != rank
                || last_holder != holder
                || at < last_at
                || (holder.is_none() && at != last_at)
        }
    }
}

/// One wait of a member whose turn is at `at` with `rank`, behind the
/// lease `holder` of the view it decided from: reports it (an event once
/// per turn and holder, a log line when [`wait_is_news`]), then follows
/// the partition until the turn comes or a poll brings news (the caller
/// evaluates again).
async fn wait_until(
    m: &Member,
    follower: &mut Follower,
    (at, rank, holder): (i64, usize, Option<&Lease>),
    last_wait: &mut Reported,
    cancel: &CancellationToken,
    backoff: &mut Backoff,
) -> Result<()> {
    let holder_token = holder.map(|l| l.token);
    if *last_wait != Some((at, rank, holder_token)) {
        if wait_is_news(*last_wait, at, rank, holder_token) {
            tracing::info!(
                rank,
                challenge_at = %Rfc3339(at),
                holder = holder.map(|l| l.member.as_str()),
                "waiting"
            );
        }
        m.emit(EventKind::Waiting {
            rank,
            challenge_at: at,
            holder: holder.map(|l| Arc::from(l.member.as_str())),
            holder_token,
        });
        *last_wait = Some((at, rank, holder_token));
    }
    let wait = m.options.poll_wait;
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(Error::Cancelled),
        _ = m.options.clock.sleep_until(at) => Ok(()),
        r = follower.poll_or_back_off(m, wait, cancel, backoff) => r.map(|_| ()),
    }
}

/// The follower's state with what lies past the partition's open
/// transaction applied ([`crate::transport::StateReader::read_past_stable`]),
/// when every record of this role up to the end of the log is decided;
/// `None` when a record of this role is in an open transaction (a
/// renewal, a first lease or a resign's tombstone in flight: the
/// transaction decides), or when the transport cannot tell (it waits then,
/// as for any open transaction).
async fn view_past_stable(m: &Member, follower: &Follower) -> Option<RoleState> {
    let past = match m
        .transport
        .read_past_stable(m.partition, follower.position())
        .await
    {
        Ok(past) => past?,
        Err(e) => {
            tracing::debug!(error = %e, "could not read past the open transaction; waiting for it");
            return None;
        }
    };
    if let Some(r) = past.open.iter().find(|r| follower.state.is_own_key(&r.key)) {
        tracing::debug!(
            offset = r.offset,
            "a record of this role is in the open transaction; waiting for it"
        );
        return None;
    }
    let mut view = follower.state.clone();
    for r in &past.committed {
        if let Err(e) = view.apply(r) {
            tracing::warn!(error = %e, offset = r.offset, "a record past the open transaction does not decode; waiting for the transaction");
            return None;
        }
    }
    Some(view)
}

async fn acquire_loop(m: &Member, cancel: &CancellationToken) -> Result<Won> {
    let mut follower = Follower::start(m, cancel).await?;
    let offset = m.retry("registering", cancel, || m.register()).await?;
    let mut own = vec![offset];
    follower.catch_up(m, offset, cancel).await?;
    // A lease under this id already there is a previous incarnation's, not
    // a twin's: only a lease written under this id from now on is.
    let found = follower
        .state
        .lease()
        .filter(|l| l.member == m.member)
        .map(|l| (l.token, l.granted_at));
    let mut minted: Vec<FencingToken> = Vec::new();
    let mut last_wait: Reported = None;
    let mut backoff = Backoff::new(m.options.initial_backoff, m.options.max_backoff);
    // After a lost challenge: the token that beat ours is newer than `lost`;
    // hold off until its lease shows up or until `until` passes (its holder
    // may have died between minting and writing).
    let mut lost: Option<HoldOff> = None;
    // The lease seen last and when it was first seen (see `step_for`): a
    // clock hours ahead or a corrupt deadline cannot stall the role.
    let mut seen: Option<SeenLease> = None;
    // The same for the views past an open transaction (kept apart, so the
    // follower's older lease and the view's newer one do not take turns).
    let mut seen_past: Option<SeenLease> = None;
    let mut held_back_reported = false;
    loop {
        check_unique(m, &follower.state, &own, found, &minted)?;
        let now = m.now();
        let step = step_for(m, &follower.state, now, &mut seen, &mut lost);
        match step {
            Step::Register => {
                let offset = m.retry("registering", cancel, || m.register()).await?;
                own.push(offset);
                follower.catch_up(m, offset, cancel).await?;
            }
            Step::WaitUntil { at, rank } => {
                let holder = follower.state.lease().cloned();
                wait_until(
                    m,
                    &mut follower,
                    (at, rank, holder.as_ref()),
                    &mut last_wait,
                    cancel,
                    &mut backoff,
                )
                .await?;
            }
            Step::Challenge => {
                // Catch up first: a lease written a moment ago changes the
                // step. A transient failure backs off before the next look.
                let caught_up = tokio::select! {
                    biased;
                    _ = cancel.cancelled() => return Err(Error::Cancelled),
                    r = follower.poll(m, Duration::ZERO) => r,
                };
                match caught_up {
                    Ok(n) => {
                        backoff.reset();
                        if n > 0 {
                            continue;
                        }
                    }
                    Err(e) if e.is_transient() => {
                        let d = backoff.take();
                        tracing::warn!(error = %e, retry_in = ?d, "catching up before the challenge failed; retrying");
                        m.pause(d, cancel).await?;
                        continue;
                    }
                    Err(e) => return Err(e),
                }
                // Is the view complete? One request answers it: the end of
                // the log (records of open transactions included) against
                // the follower's position (the model's held-back fixes,
                // docs/model.md; `model/tests/findings.rs` shows each
                // counterexample without them).
                // * An open transaction on the partition hides what was
                //   written after it: the holder's renewals, or the first
                //   lease of a member elected a moment ago. No visible lease
                //   or renewal is then no sign that the role is free: wait
                //   until it ends, with or without a lease in view (a check
                //   skipped for want of a lease would let a hidden first
                //   lease be fenced).
                // * Records not read yet are missing from the view: decided
                //   after the poll above (the renewals a transaction that
                //   just ended released) or not fetched yet (a poll without
                //   a wait returns what has arrived). Read them and evaluate
                //   again; nothing is held back, so nothing is reported.
                // * One request compared with the position, never a check
                //   and a read after it: a transaction opened between the
                //   two hides from the read what the check did not cover,
                //   and a read that returns before its records arrive looks
                //   like a complete one.
                let backlog = m
                    .transport
                    .held_back(m.partition, follower.position())
                    .await;
                // The view past an open transaction that decided the
                // challenge, if one did.
                let mut past: Option<RoleState> = None;
                match backlog {
                    Ok(Backlog::CaughtUp) => {
                        held_back_reported = false;
                    }
                    Ok(Backlog::Unread) => {
                        held_back_reported = false;
                        follower
                            .poll_or_back_off(m, m.options.poll_wait, cancel, &mut backoff)
                            .await?;
                        continue;
                    }
                    Ok(Backlog::HeldBack) => {
                        if !held_back_reported {
                            tracing::info!("an open transaction holds the partition back; deciding from what lies past it, if its records are not this role's");
                            m.emit(EventKind::HeldBack);
                            held_back_reported = true;
                        }
                        // Another role's open transaction hides this
                        // role's records only from a
                        // read_committed reader. Read past it; when every
                        // record of this role up to the end of the log is
                        // decided, that view is as complete as a caught-up
                        // one (the end of the log is read once, as above).
                        let Some(v) = view_past_stable(m, &follower).await else {
                            follower
                                .poll_or_back_off(m, m.options.poll_wait, cancel, &mut backoff)
                                .await?;
                            continue;
                        };
                        check_unique(m, &v, &own, found, &minted)?;
                        match step_for(m, &v, now, &mut seen_past, &mut lost) {
                            Step::Challenge => past = Some(v),
                            Step::WaitUntil { at, rank } => {
                                wait_until(
                                    m,
                                    &mut follower,
                                    (at, rank, v.lease()),
                                    &mut last_wait,
                                    cancel,
                                    &mut backoff,
                                )
                                .await?;
                                continue;
                            }
                            Step::Register | Step::RenewAt(_) | Step::StandDown => {
                                follower
                                    .poll_or_back_off(m, m.options.poll_wait, cancel, &mut backoff)
                                    .await?;
                                continue;
                            }
                        }
                    }
                    Err(e) if e.is_transient() => {
                        let d = backoff.take();
                        tracing::warn!(error = %e, retry_in = ?d, "checking the partition before the challenge failed; retrying");
                        m.pause(d, cancel).await?;
                        continue;
                    }
                    Err(e) => return Err(e),
                }
                let stale = passed_over(past.as_ref().unwrap_or(&follower.state), &m.member, now);
                tracing::info!("challenging");
                m.emit(EventKind::Challenging);
                let lease_duration = m.options.election.lease_duration;
                let epoch = m
                    .retry("minting the epoch", cancel, || {
                        m.transport.acquire_epoch(&m.role, lease_duration)
                    })
                    .await?;
                let token = epoch.token();
                minted.push(token);
                // The lease is stamped per attempt: a write that succeeds
                // late must not publish an already expired deadline.
                let written = first_lease(m, epoch.as_ref(), cancel).await;
                match written {
                    Ok((lease, sent)) => {
                        // The transport may have corrected the token before
                        // the first lease committed (a stale coordinator
                        // answer): the committed lease carries this one.
                        let token = epoch.token();
                        if minted.last() != Some(&token) {
                            minted.push(token);
                        }
                        tracing::info!(%token, deadline = %Rfc3339(lease.deadline), "elected");
                        m.emit(EventKind::Elected {
                            token,
                            granted_at: lease.granted_at,
                            deadline: lease.deadline,
                        });
                        return Ok(Won {
                            epoch,
                            lease,
                            sent,
                            stale,
                            follower,
                        });
                    }
                    Err(e) if e.means_fenced() => {
                        tracing::info!(%token, why = %e, "lost the challenge to a newer epoch");
                        m.emit(EventKind::LostChallenge { token });
                        drop(epoch);
                        lost = Some(HoldOff {
                            token,
                            until: m.now().saturating_add(millis(lease_duration)),
                        });
                    }
                    // The first lease could not be written within its
                    // bound: the epoch is given up and the turn evaluated
                    // again (a challenge mints anew).
                    Err(e) if e.is_transient() => {
                        drop(epoch);
                        let d = backoff.take();
                        tracing::warn!(error = %e, retry_in = ?d, "gave up the epoch's first lease; challenging again");
                        m.pause(d, cancel).await?;
                    }
                    Err(e) => return Err(e),
                }
            }
            // With no token held the step is never RenewAt or StandDown;
            // follow the partition and evaluate again.
            Step::RenewAt(_) | Step::StandDown => {
                follower
                    .poll_or_back_off(m, m.options.poll_wait, cancel, &mut backoff)
                    .await?;
            }
        }
    }
}
