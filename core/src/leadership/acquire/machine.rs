//! The acquire loop's decisions, as a pure state machine.
//!
//! [`Machine::next`] takes the loop's [`State`], the [`Event`] its action
//! ended with and the follower's view of the role, and returns the
//! [`Transition`]: the next state and what to report on the way. It does no
//! I/O and reads no clock (the events carry the clocks the driver read);
//! the driver (`drive.rs`) runs each state's action and reports the notes.
//! The rules are [`evaluate`] and the acquire loop's guards
//! ([`find_twin`], [`bound_step`], [`passed_over`]), called, never copied.
//!
//! # States and their actions
//!
//! | state | action (the driver's) | event it ends with |
//! | --- | --- | --- |
//! | `Judge` | reads the wall and monotonic clocks | `Looked` |
//! | `Register` | registers (retried), catches up to the registration | `Registered` |
//! | `Wait` | reports the wait, follows the partition until the turn or news | `Done` |
//! | `Follow` | one poll of the partition (a failed one backs off) | `Done` |
//! | `BackOff` | logs the error, pauses for the next back-off | `Done` |
//! | `CatchUp` | one poll that does not wait (success resets the back-off) | `CaughtUp` |
//! | `CheckBacklog` | asks how the end of the log stands to the read position | `Backlog` |
//! | `LookPast` | reads the view past the open transaction, if this role has nothing open there | `Past` |
//! | `Mint` | mints the epoch (retried) | `Minted` |
//! | `FirstLease` | writes the first lease (bounded, see `first_lease.rs`) | `Wrote` |
//!
//! The loop starts in `Judge`, after the member registered and caught up
//! to its registration (a lease under its id already there is `found`: a
//! previous incarnation's). An action that fails (a cancel, an error it
//! does not ride out) ends the loop with that error.
//!
//! # Transitions
//!
//! `view` is the follower's view, `now` the wall clock the `Judge` that
//! began the challenge read, `stale` the members [`passed_over`] in the
//! view the challenge was decided from. A twin is [`find_twin`] on the
//! view, checked before the step (J1 before J2 to J6, P2 before P3 to
//! P5); a step is [`evaluate`] bounded by [`bound_step`].
//!
//! | row | state | event | action | next state |
//! | --- | --- | --- | --- | --- |
//! | J1 | `Judge` | a twin in `view` | | fails (fatal, naming the member) |
//! | J2 | `Judge` | step `Register` | | `Register` |
//! | J3 | `Judge` | step `WaitUntil { at, rank }` | | `Wait` (behind `view`'s lease) |
//! | J4 | `Judge` | step `Challenge` | | `CatchUp { now }` |
//! | J5 | `Judge` | step `RenewAt` or `StandDown` (never with no token) | | `Follow` |
//! | J6 | `Judge` | the bound capped the wait | warn (the holder's deadline is too far) | as J3 or J4 |
//! | R1 | `Register` | registered at an offset | remember it as this process's own | `Judge` |
//! | D1 | `Wait`, `Follow`, `BackOff` | done | | `Judge` |
//! | C1 | `CatchUp` | records read | | `Judge` |
//! | C2 | `CatchUp` | nothing new | | `CheckBacklog { now }` |
//! | C3 | `CatchUp` | a transient error | | `BackOff` |
//! | C4 | `CatchUp` | another error | | fails with it |
//! | B1 | `CheckBacklog` | caught up | forget the held-back report, announce the challenge | `Mint { stale }` of `view` |
//! | B2 | `CheckBacklog` | decided records unread | forget the held-back report | `Follow` |
//! | B3 | `CheckBacklog` | held back | report it, once until B1 or B2 | `LookPast { now }` |
//! | B4 | `CheckBacklog` | a transient error | | `BackOff` |
//! | B5 | `CheckBacklog` | another error | | fails with it |
//! | P1 | `LookPast` | no view (this role's record is open, or the transport cannot tell) | | `Follow` |
//! | P2 | `LookPast` | a view with a twin | | fails (fatal) |
//! | P3 | `LookPast` | a view whose step is `Challenge` | announce the challenge | `Mint { stale }` of that view |
//! | P4 | `LookPast` | a view whose step is `WaitUntil` | | `Wait` (behind that view's lease) |
//! | P5 | `LookPast` | a view whose step is another | | `Follow` |
//! | M1 | `Mint` | minted an epoch | remember its token as minted | `FirstLease` |
//! | F1 | `FirstLease` | written | remember the token the commit carries, if corrected | won: report elected |
//! | F2 | `FirstLease` | fenced | report the lost challenge, let the epoch go, hold off one lease | `Judge` |
//! | F3 | `FirstLease` | a transient error (the write's bound passed) | let the epoch go | `BackOff` |
//! | F4 | `FirstLease` | another error | | fails with it |
//!
//! The step on a view past an open transaction (P2 to P5) keeps its own
//! [`SeenLease`](crate::election::guards::SeenLease), so the follower's older lease and the view's newer one
//! do not take turns resetting when a lease was first seen; the hold-off
//! after a lost challenge is one, whichever view ends it.

use crate::codec::Lease;
use crate::election::guards::{bound_step, find_twin, passed_over, HoldOff, Twin};
use crate::election::{evaluate, ElectionOptions, Step};
use crate::error::{Error, Result};
use crate::state::RoleState;
use crate::token::FencingToken;
use crate::transport::Backlog;

mod vocabulary;

pub(super) use vocabulary::{Elected, Event, Memory, Note, State, Then, Transition};

/// The acquire loop's decisions for one member of one role.
pub(super) struct Machine<'a> {
    member: &'a str,
    role: &'a str,
    options: &'a ElectionOptions,
    /// What the loop remembers.
    pub(super) memory: Memory,
}

/// The step (or twin) on a view.
enum Judged {
    Twin(Twin),
    Step(Step),
}

impl<'a> Machine<'a> {
    /// The machine of `member` in `role` with `options`, starting from
    /// `memory`.
    pub(super) fn new(
        member: &'a str,
        role: &'a str,
        options: &'a ElectionOptions,
        memory: Memory,
    ) -> Self {
        Machine {
            member,
            role,
            options,
            memory,
        }
    }

    /// The transition from `state` on `event`, with `view` the follower's
    /// view of the role: the module's table, row by row. An event another
    /// state ends with fails the loop with a fatal error naming both.
    pub(super) fn next<E>(
        &mut self,
        state: State<E>,
        event: Event<E>,
        view: &RoleState,
    ) -> Transition<E> {
        match (state, event) {
            (State::Judge, Event::Looked { now, mono }) => self.judge(view, now, mono),
            (State::Register, Event::Registered(offset)) => {
                self.memory.own.push(offset);
                Transition::go(State::Judge)
            }
            (State::Wait { .. } | State::Follow | State::BackOff { .. }, Event::Done) => {
                Transition::go(State::Judge)
            }
            (State::CatchUp { now }, Event::CaughtUp(read)) => caught_up(now, read),
            (State::CheckBacklog { now }, Event::Backlog(backlog)) => {
                self.backlog(now, backlog, view)
            }
            (State::LookPast { now }, Event::Past { view, mono }) => self.past(now, view, mono),
            (State::Mint { stale }, Event::Minted { epoch, token }) => {
                self.memory.minted.push(token);
                Transition::go(State::FirstLease {
                    epoch,
                    token,
                    stale,
                })
            }
            (
                State::FirstLease {
                    epoch,
                    token,
                    stale,
                },
                Event::Wrote {
                    result,
                    token: committed,
                    now,
                },
            ) => self.wrote((epoch, token, stale), result, committed, now),
            (state, event) => Transition::fail(Error::fatal(
                "the acquire loop",
                format!("no transition from {} on {}", state.name(), event.name()),
            )),
        }
    }

    /// `Judge` (rows J1 to J6).
    fn judge<E>(&mut self, view: &RoleState, now: i64, mono: i64) -> Transition<E> {
        let (judged, capped) = self.step_on(view, now, mono, false);
        let t = match judged {
            Judged::Twin(twin) => return Transition::fail(self.twin_error(twin)),
            Judged::Step(Step::Register) => Transition::go(State::Register),
            Judged::Step(Step::WaitUntil { at, rank }) => Transition::go(State::Wait {
                at,
                rank,
                holder: view.lease().cloned(),
            }),
            Judged::Step(Step::Challenge) => Transition::go(State::CatchUp { now }),
            Judged::Step(Step::RenewAt(_) | Step::StandDown) => Transition::go(State::Follow),
        };
        with_capped(t, capped)
    }

    /// `CheckBacklog` (rows B1 to B5).
    fn backlog<E>(
        &mut self,
        now: i64,
        backlog: Result<Backlog>,
        view: &RoleState,
    ) -> Transition<E> {
        match backlog {
            Ok(Backlog::CaughtUp) => {
                self.memory.held_back_reported = false;
                self.challenge(view, now)
            }
            Ok(Backlog::Unread) => {
                self.memory.held_back_reported = false;
                Transition::go(State::Follow)
            }
            Ok(Backlog::HeldBack) => {
                let t = Transition::go(State::LookPast { now });
                if self.memory.held_back_reported {
                    t
                } else {
                    self.memory.held_back_reported = true;
                    t.noting(Note::HeldBack)
                }
            }
            Err(error) if error.is_transient() => Transition::go(State::BackOff {
                what: "checking the partition before the challenge failed; retrying",
                error,
            }),
            Err(e) => Transition::fail(e),
        }
    }

    /// `LookPast` (rows P1 to P5): `now` is the challenge's.
    fn past<E>(&mut self, now: i64, view: Option<RoleState>, mono: i64) -> Transition<E> {
        let Some(view) = view else {
            return Transition::go(State::Follow);
        };
        let (judged, capped) = self.step_on(&view, now, mono, true);
        let t = match judged {
            Judged::Twin(twin) => return Transition::fail(self.twin_error(twin)),
            Judged::Step(Step::Challenge) => self.challenge(&view, now),
            Judged::Step(Step::WaitUntil { at, rank }) => Transition::go(State::Wait {
                at,
                rank,
                holder: view.lease().cloned(),
            }),
            Judged::Step(Step::Register | Step::RenewAt(_) | Step::StandDown) => {
                Transition::go(State::Follow)
            }
        };
        with_capped(t, capped)
    }

    /// `FirstLease` (rows F1 to F4), from the state's epoch, the token it
    /// was minted with and the members passed over; `committed` is the
    /// epoch's token after the write, `now` the wall clock then.
    fn wrote<E>(
        &mut self,
        (epoch, token, stale): (E, FencingToken, Vec<String>),
        result: Result<(Lease, i64)>,
        committed: FencingToken,
        now: i64,
    ) -> Transition<E> {
        match result {
            Ok((lease, sent)) => {
                // The transport may have corrected the token before the
                // first lease committed (a stale coordinator answer): the
                // committed lease carries the corrected one.
                if self.memory.minted.last() != Some(&committed) {
                    self.memory.minted.push(committed);
                }
                Transition {
                    notes: Vec::new(),
                    then: Then::Won(Elected {
                        epoch,
                        token: committed,
                        lease,
                        sent,
                        stale,
                    }),
                }
            }
            Err(why) if why.means_fenced() => {
                let lease_ms = crate::clock::duration_millis(self.options.lease_duration);
                self.memory.lost = Some(HoldOff {
                    token,
                    until: now.saturating_add(lease_ms),
                });
                Transition::go(State::Judge).noting(Note::LostChallenge { token, why, epoch })
            }
            // The first lease could not be written within its bound: the
            // epoch is given up and the turn evaluated again (a challenge
            // mints anew).
            Err(error) if error.is_transient() => Transition::go(State::BackOff {
                what: "gave up the epoch's first lease; challenging again",
                error,
            }),
            Err(e) => Transition::fail(e),
        }
    }

    /// Challenges from `view` at `now`: the members passed over in it go
    /// once the challenge is won.
    fn challenge<E>(&self, view: &RoleState, now: i64) -> Transition<E> {
        let stale = passed_over(view, self.member, now);
        Transition::go(State::Mint { stale }).noting(Note::Challenging)
    }

    /// [`find_twin`], then [`evaluate`] bounded by [`bound_step`] on `view`
    /// (with the memory of views past an open transaction when `past`);
    /// the capped turn, if the bound capped a wait.
    fn step_on(
        &mut self,
        view: &RoleState,
        now: i64,
        mono: i64,
        past: bool,
    ) -> (Judged, Option<Capped>) {
        let m = &mut self.memory;
        if let Some(twin) = find_twin(view, self.member, &m.own, m.found, &m.minted) {
            return (Judged::Twin(twin), None);
        }
        let step = evaluate(view, self.member, None, now, self.options);
        let seen = if past { &mut m.seen_past } else { &mut m.seen };
        let bounded = bound_step(step, view, now, mono, self.options, seen, &mut m.lost);
        let capped = match (bounded.capped_at, view.lease()) {
            (Some(capped), Some(l)) => Some((l.deadline, capped)),
            _ => None,
        };
        (Judged::Step(bounded.step), capped)
    }

    /// [`find_twin`]'s answer as the loop's fatal error, naming the member
    /// and role.
    fn twin_error(&self, twin: Twin) -> Error {
        Error::fatal(
            format!(
                "member {} of role {}",
                crate::error::quote(self.member),
                crate::error::quote(self.role)
            ),
            format!("another live process uses this member id (it {twin}); member ids must be unique within a role"),
        )
    }
}

/// `CatchUp` (rows C1 to C4).
fn caught_up<E>(now: i64, read: Result<usize>) -> Transition<E> {
    match read {
        Ok(0) => Transition::go(State::CheckBacklog { now }),
        Ok(_) => Transition::go(State::Judge),
        Err(error) if error.is_transient() => Transition::go(State::BackOff {
            what: "catching up before the challenge failed; retrying",
            error,
        }),
        Err(e) => Transition::fail(e),
    }
}

/// A wait the bound capped: the holder's deadline and the capped turn.
type Capped = (i64, i64);

/// `t` with the capped-wait note first (row J6), if there is one.
fn with_capped<E>(mut t: Transition<E>, capped: Option<Capped>) -> Transition<E> {
    if let Some((deadline, capped)) = capped {
        t.notes.insert(0, Note::Capped { deadline, capped });
    }
    t
}

#[cfg(test)]
mod tests;
