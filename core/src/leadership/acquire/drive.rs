//! The acquire loop's driver: runs each state's action (the I/O), hands
//! the event it ended with to the [`Machine`] and reports the notes of the
//! transition. What the loop decides is the machine's (`machine.rs`, whose
//! table is the contract); what each action does is here.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::super::member::{Backoff, Follower, Member};
use super::first_lease::first_lease;
use super::machine::{Elected, Event, Machine, Memory, Note, State, Then};
use super::Won;
use crate::codec::Lease;
use crate::error::{Error, Result};
use crate::events::EventKind;
use crate::rfc3339::Rfc3339;
use crate::state::RoleState;
use crate::token::FencingToken;
use crate::transport::LeaseWriter;

/// The epoch a transport mints.
type Epoch = Box<dyn LeaseWriter>;

/// Registers, follows the role's partition and challenges when the turn
/// comes, until the challenge is won (the [`Won`] epoch, its first lease
/// and the follower as it stood) or an action fails (a cancel, an error it
/// does not ride out, a twin: the error).
pub(super) async fn acquire_loop(m: &Member, cancel: &CancellationToken) -> Result<Won> {
    let (mut follower, memory) = start(m, cancel).await?;
    let mut machine = Machine::new(&m.member, &m.role, &m.options.election, memory);
    let mut io = Io {
        backoff: Backoff::new(m.options.initial_backoff, m.options.max_backoff),
        last_wait: None,
    };
    let mut state: State<Epoch> = State::Judge;
    loop {
        let event = act(m, &state, &mut follower, &mut io, cancel).await?;
        let t = machine.next(state, event, &follower.state);
        for note in t.notes {
            report(m, note);
        }
        state = match t.then {
            Then::Go(next) => next,
            Then::Won(won) => return Ok(elected(m, won, follower)),
            Then::Fail(e) => return Err(e),
        };
    }
}

/// The loop's start: reads the partition, registers, catches up to the
/// registration. A lease under this id already there is a previous
/// incarnation's, not a twin's: only a lease written under this id from
/// now on is.
async fn start(m: &Member, cancel: &CancellationToken) -> Result<(Follower, Memory)> {
    let mut follower = Follower::start(m, cancel).await?;
    let offset = m.retry("registering", cancel, || m.register()).await?;
    follower.catch_up(m, offset, cancel).await?;
    let found = follower
        .state
        .lease()
        .filter(|l| l.member == m.member)
        .map(|l| (l.token, l.granted_at));
    let memory = Memory {
        own: vec![offset],
        found,
        ..Memory::default()
    };
    Ok((follower, memory))
}

/// What the actions keep between states: the back-off of the follower's
/// polls and the challenge's checks, and the wait reported last.
struct Io {
    backoff: Backoff,
    last_wait: Reported,
}

/// Runs `state`'s action (the table of states in `machine.rs`) and returns
/// the event it ended with; an error ends the loop.
async fn act(
    m: &Member,
    state: &State<Epoch>,
    follower: &mut Follower,
    io: &mut Io,
    cancel: &CancellationToken,
) -> Result<Event<Epoch>> {
    let poll_wait = m.options.poll_wait;
    Ok(match state {
        State::Judge => Event::Looked {
            now: m.now(),
            mono: m.mono(),
        },
        State::Register => {
            let offset = m.retry("registering", cancel, || m.register()).await?;
            follower.catch_up(m, offset, cancel).await?;
            Event::Registered(offset)
        }
        State::Wait { at, rank, holder } => {
            let turn = (*at, *rank, holder.as_ref());
            wait_until(
                m,
                follower,
                turn,
                &mut io.last_wait,
                cancel,
                &mut io.backoff,
            )
            .await?;
            Event::Done
        }
        State::Follow => {
            follower
                .poll_or_back_off(m, poll_wait, cancel, &mut io.backoff)
                .await?;
            Event::Done
        }
        State::BackOff { what, error } => {
            let d = io.backoff.take();
            tracing::warn!(error = %error, retry_in = ?d, "{what}");
            m.pause(d, cancel).await?;
            Event::Done
        }
        State::CatchUp { .. } => Event::CaughtUp(catch_up(m, follower, io, cancel).await?),
        State::CheckBacklog { .. } => Event::Backlog(check_backlog(m, follower).await),
        State::LookPast { .. } => Event::Past {
            view: view_past_stable(m, follower).await,
            mono: m.mono(),
        },
        State::Mint { .. } => mint(m, cancel).await?,
        // The lease is stamped per attempt: a write that succeeds late must
        // not publish an already expired deadline.
        State::FirstLease { epoch, .. } => Event::Wrote {
            result: first_lease(m, epoch.as_ref(), cancel).await,
            token: epoch.token(),
            now: m.now(),
        },
    })
}

/// The challenge's catch-up: one poll that does not wait (a lease written a
/// moment ago changes the step); a success resets the back-off. A cancel
/// ends the loop; the poll's own outcome is the machine's to judge.
async fn catch_up(
    m: &Member,
    follower: &mut Follower,
    io: &mut Io,
    cancel: &CancellationToken,
) -> Result<Result<usize>> {
    let read = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(Error::Cancelled),
        r = follower.poll(m, Duration::ZERO) => r,
    };
    if read.is_ok() {
        io.backoff.reset();
    }
    Ok(read)
}

/// Mints the role's epoch, retrying transient failures.
async fn mint(m: &Member, cancel: &CancellationToken) -> Result<Event<Epoch>> {
    let lease_duration = m.options.election.lease_duration;
    let epoch = m
        .retry("minting the epoch", cancel, || {
            m.transport.acquire_epoch(&m.role, lease_duration)
        })
        .await?;
    Ok(Event::Minted {
        token: epoch.token(),
        epoch,
    })
}

/// Is the view complete? One request answers it: the end of the log
/// (records of open transactions included) against the follower's position
/// (the model's held-back fixes, docs/model.md; `model/tests/findings.rs`
/// shows each counterexample without them).
/// * An open transaction on the partition hides what was written after
///   it: the holder's renewals, or the first lease of a member elected a
///   moment ago. No visible lease or renewal is then no sign that the role
///   is free: wait until it ends, with or without a lease in view (a check
///   skipped for want of a lease would let a hidden first lease be fenced).
/// * Records not read yet are missing from the view: decided after the
///   catch-up (the renewals a transaction that just ended released) or not
///   fetched yet (a poll without a wait returns what has arrived). Read
///   them and evaluate again; nothing is held back, so nothing is reported.
/// * One request compared with the position, never a check and a read
///   after it: a transaction opened between the two hides from the read
///   what the check did not cover, and a read that returns before its
///   records arrive looks like a complete one.
async fn check_backlog(m: &Member, follower: &Follower) -> Result<crate::transport::Backlog> {
    m.transport
        .held_back(m.partition, follower.position())
        .await
}

/// Reports a transition's note.
fn report(m: &Member, note: Note<Epoch>) {
    match note {
        Note::Capped { deadline, capped } => {
            tracing::warn!(deadline = %Rfc3339(deadline), capped = %Rfc3339(capped), "the holder's deadline lies beyond one lease from when it was seen; waiting only until then");
        }
        Note::HeldBack => {
            tracing::info!("an open transaction holds the partition back; deciding from what lies past it, if its records are not this role's");
            m.emit(EventKind::HeldBack);
        }
        Note::Challenging => {
            tracing::info!("challenging");
            m.emit(EventKind::Challenging);
        }
        Note::LostChallenge { token, why, epoch } => {
            tracing::info!(%token, why = %why, "lost the challenge to a newer epoch");
            m.emit(EventKind::LostChallenge { token });
            drop(epoch);
        }
    }
}

/// The won challenge, reported: elected.
fn elected(m: &Member, won: Elected<Epoch>, follower: Follower) -> Won {
    let Elected {
        epoch,
        token,
        lease,
        sent,
        stale,
    } = won;
    tracing::info!(%token, deadline = %Rfc3339(lease.deadline), "elected");
    m.emit(EventKind::Elected {
        token,
        granted_at: lease.granted_at,
        deadline: lease.deadline,
    });
    Won {
        epoch,
        lease,
        sent,
        stale,
        follower,
    }
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
