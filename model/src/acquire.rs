//! The acquire loop of a member (`core/src/leadership/acquire/`), one
//! atomic step per request: register, follow the partition, evaluate,
//! challenge (read what is new, ask whether the read position is at the end
//! of the log), mint, write the first lease, remove the registrations of
//! members that missed their turn.

use krabka_coordination::transport::Backlog;
use krabka_coordination::{
    encode_lease, encode_registration, evaluate, Lease, Registration, RoleState, Step,
};

use crate::kafka;
use crate::model::LeaseModel;
use crate::rules;
use crate::state::{Challenge, Phase, State, Status, Term};

impl LeaseModel {
    /// The head of the acquire loop: the duplicate-id check, the core's
    /// `evaluate` on the member's view, the loop's own adjustments, and the
    /// phase the step leads to.
    pub(crate) fn loop_head(&self, s: &mut State, m: usize) {
        let id = &self.config.members[m].id;
        let view = self.view(s, m);
        let now = self.wall(s, m);
        if rules::twin(&view, id, &s.members[m].acquire) {
            // A fatal error: the acquire fails and deregisters.
            s.ghost.twin_refused = true;
            s.members[m].phase = Phase::Leaving;
            return;
        }
        let step = evaluate(&view, id, None, now, &self.options);
        let mono = s.now;
        let me = &mut s.members[m];
        let (step, capped) = rules::adjust(step, &view, &mut me.acquire, now, mono, &self.options);
        s.ghost.capped_wait |= capped;
        let me = &mut s.members[m];
        me.phase = match step {
            Step::Register => Phase::Register,
            Step::WaitUntil { at, .. } => Phase::Wait { at },
            Step::Challenge => {
                me.health.challenge_faulted = false;
                Phase::ChallengePoll
            }
            // Never with no token held: follow the partition.
            Step::RenewAt(_) | Step::StandDown => Phase::Wait { at: i64::MAX },
        };
    }

    /// Registers: the first time after reading the partition (the follower
    /// starts at the last stable offset), then appends the registration and
    /// catches up to it.
    pub(crate) fn register(&self, s: &mut State, m: usize) {
        if s.members[m].phase == Phase::Start {
            s.members[m].read_upto = s.last_stable();
        }
        let value = encode_registration(&Registration {
            member: self.config.members[m].id.clone(),
            registered_at: self.wall(s, m),
        })
        .expect("the model's ids encode");
        let key = self.registration_keys[m].clone();
        let offset = kafka::append(s, key, Some(value.into()));
        let me = &mut s.members[m];
        me.acquire.own.push(offset);
        me.phase = Phase::CatchUp { offset };
    }

    /// Reads the committed records up to the last stable offset; returns
    /// how many were committed (aborted ones are never returned).
    fn read(&self, s: &mut State, m: usize) -> usize {
        let stable = s.last_stable();
        let from = s.members[m].read_upto;
        let n = s.log[from as usize..stable as usize]
            .iter()
            .filter(|e| e.status == Status::Committed)
            .count();
        s.members[m].read_upto = stable.max(from);
        n
    }

    /// A poll of a waiting member: reads, then evaluates again (a catching
    /// up member evaluates once its registration is read).
    pub(crate) fn poll(&self, s: &mut State, m: usize) {
        self.read(s, m);
        match s.members[m].phase {
            Phase::CatchUp { offset } if s.members[m].read_upto <= offset => {}
            Phase::CatchUp { .. } if !s.members[m].acquire.caught_up => {
                // After the first catch-up: a lease under this id already
                // there is a previous incarnation's, not a twin's.
                let id = &self.config.members[m].id;
                let found = self
                    .view(s, m)
                    .lease()
                    .filter(|l| &l.member == id)
                    .map(|l| (l.token, l.granted_at));
                let acquire = &mut s.members[m].acquire;
                acquire.caught_up = true;
                acquire.found = found;
                self.loop_head(s, m);
            }
            _ => self.loop_head(s, m),
        }
    }

    /// The challenge's catch-up read: new records make the member evaluate
    /// again; otherwise it makes the held-back check (without
    /// `held_back_without_lease`, only with a lease in view; the old
    /// behaviour never).
    pub(crate) fn challenge_poll(&self, s: &mut State, m: usize) {
        let read = s.log.len() as u16;
        if self.read(s, m) > 0 {
            return self.loop_head(s, m);
        }
        let leased = self.view(s, m).lease().is_some();
        let check = leased || self.config.proposed.held_back_without_lease;
        if check && !self.config.old.no_held_back_check {
            s.members[m].phase = Phase::HeldBack { read };
        } else {
            self.to_mint(s, m, read);
        }
    }

    /// The held-back check. The core's: one request compares the end of the
    /// log (entries of open transactions included) with the member's read
    /// position ([`Backlog::of`], the core's own comparison). Caught up, it
    /// mints; an open transaction, or decided records it has not read, make
    /// it poll (for up to one poll wait; a poll returns as soon as there is
    /// something decided to read) and evaluate again. The cores before
    /// (`held_back_at_read_position` off) asked only whether an open
    /// transaction held the partition back (the last stable offset below
    /// the end of the log) and, with `read_after_held_back`, read once more
    /// (a separate request) before they minted.
    pub(crate) fn held_back(&self, s: &mut State, m: usize) {
        let Phase::HeldBack { read } = s.members[m].phase else {
            unreachable!("a held-back check outside its phase");
        };
        let end = s.log.len() as u16;
        if self.config.proposed.held_back_at_read_position {
            let position = s.members[m].read_upto as i64;
            let stable = s.last_stable() as i64;
            match Backlog::of(position, end as i64, stable) {
                Backlog::CaughtUp => self.to_mint(s, m, end),
                Backlog::HeldBack
                    if self.config.proposed.look_past_stable && position >= stable =>
                {
                    self.look_past(s, m, end)
                }
                Backlog::Unread | Backlog::HeldBack => {
                    let until = s.now.saturating_add(self.config.poll_wait);
                    s.members[m].phase = Phase::PollWait { until };
                }
            }
        } else if s.last_stable() < end {
            let until = s.now.saturating_add(self.config.poll_wait);
            s.members[m].phase = Phase::PollWait { until };
        } else if self.config.proposed.read_after_held_back {
            s.members[m].phase = Phase::HeldBackRead;
        } else {
            self.to_mint(s, m, read);
        }
    }

    /// The look past an open transaction (`view_past_stable` and the
    /// `LookPast` rows of the acquire machine in the core): with no entry
    /// of the member's role open between its position and the end of the
    /// log, the committed entries there join its view and the loop's step
    /// is taken on that view (the far-future cap with its own `seen_past`);
    /// to challenge it mints, to wait it waits; otherwise, and with an
    /// entry of its role open, it polls as for any held-back check.
    fn look_past(&self, s: &mut State, m: usize, end: u16) {
        let from = s.members[m].read_upto as usize;
        let mut view = self.view(s, m);
        let past = &s.log[from..end as usize];
        let own_open = past
            .iter()
            .any(|e| matches!(e.status, Status::Open(_)) && view.is_own_key(&e.key));
        if !own_open {
            for (i, e) in past.iter().enumerate() {
                if e.status == Status::Committed {
                    view.apply_parts((from + i) as i64, &e.key, e.value.as_deref())
                        .expect("the model writes well-formed records");
                }
            }
            let id = &self.config.members[m].id;
            if rules::twin(&view, id, &s.members[m].acquire) {
                s.ghost.twin_refused = true;
                s.members[m].phase = Phase::Leaving;
                return;
            }
            let now = self.wall(s, m);
            let step = evaluate(&view, id, None, now, &self.options);
            let mono = s.now;
            let acquire = &mut s.members[m].acquire;
            std::mem::swap(&mut acquire.seen, &mut acquire.seen_past);
            let (step, capped) = rules::adjust(step, &view, acquire, now, mono, &self.options);
            std::mem::swap(&mut acquire.seen, &mut acquire.seen_past);
            s.ghost.capped_wait |= capped;
            match step {
                Step::Challenge => return self.to_mint_from(s, m, end, &view),
                Step::WaitUntil { at, .. } => {
                    s.members[m].phase = Phase::Wait { at };
                    return;
                }
                Step::Register | Step::RenewAt(_) | Step::StandDown => {}
            }
        }
        let until = s.now.saturating_add(self.config.poll_wait);
        s.members[m].phase = Phase::PollWait { until };
    }

    /// The read after "not held back" (with `read_after_held_back` and
    /// without `held_back_at_read_position`): records released since the
    /// last read (a leader's renewals that were hidden) make the member
    /// evaluate again.
    pub(crate) fn held_back_read(&self, s: &mut State, m: usize) {
        let read = s.log.len() as u16;
        if self.read(s, m) > 0 {
            return self.loop_head(s, m);
        }
        self.to_mint(s, m, read);
    }

    /// Decides to mint after a last read of the log at length `read`:
    /// remembers whom to deregister after winning.
    fn to_mint(&self, s: &mut State, m: usize, read: u16) {
        let view = self.view(s, m);
        self.to_mint_from(s, m, read, &view)
    }

    /// [`Self::to_mint`] on `view` (the member's, or one past an open
    /// transaction).
    fn to_mint_from(&self, s: &mut State, m: usize, read: u16, view: &RoleState) {
        let role = self.role_of(m);
        let stale = rules::passed_over(view, &self.config.members[m].id, self.wall(s, m))
            .iter()
            .flat_map(|id| self.slots(role, id).take(1))
            .map(|slot| slot as u8)
            .collect();
        let waited_for_passed = crate::properties::waits_for_passed(self, s, m, view);
        s.members[m].phase = Phase::Mint(Challenge {
            stale,
            decided: read,
            waited_for_passed,
        });
    }

    /// InitProducerId: the new epoch supersedes every earlier one.
    pub(crate) fn mint(&self, s: &mut State, m: usize) {
        let Phase::Mint(challenge) = std::mem::replace(&mut s.members[m].phase, Phase::Down) else {
            unreachable!("mint outside the mint phase");
        };
        let role = self.role_of(m);
        let (token, previous) = kafka::init_producer_id(s, role, self.config.max_epoch);
        s.members[m].acquire.minted.push(token);
        if let Some(previous) = previous {
            crate::properties::note_challenge(self, s, m, previous, challenge.decided);
        }
        s.members[m].phase = Phase::FirstLease(token, challenge);
    }

    /// The first lease through the minted epoch: committed, the member has
    /// won; fenced, a newer epoch exists and it holds off.
    pub(crate) fn first_lease(&self, s: &mut State, m: usize) {
        let Phase::FirstLease(token, challenge) =
            std::mem::replace(&mut s.members[m].phase, Phase::Down)
        else {
            unreachable!("first lease outside its phase");
        };
        let role = self.role_of(m);
        let now = self.wall(s, m);
        let value = self.lease_value(m, token, now);
        let first = s.log.len() as u16;
        if kafka::write_txn(
            s,
            role,
            token,
            self.lease_keys[role].clone(),
            Some(value),
            false,
        ) {
            kafka::open_ahead(s, role, token);
            crate::properties::note_election(self, s, m, &challenge);
            let me = &mut s.members[m];
            me.term = Some(Term {
                token,
                sent: s.now,
                next_at: s.now.saturating_add(self.config.renew),
                in_flight: None,
                given_up: false,
                expired: false,
                first,
            });
            me.health.term_faulted = false;
            // The renewals start; the heal runs beside them.
            me.phase = Phase::Leading;
            me.heal = Some(challenge.stale);
        } else {
            let until = now.saturating_add(rules::millis(self.options.lease_duration));
            s.members[m].acquire.lost = Some((token, until));
            self.loop_head(s, m);
        }
    }

    /// The winner deregisters the members that missed their turn, in a
    /// task of its own beside the renewals (the old behaviour removed
    /// nothing). One attempt each: cut off, the appends fail.
    pub(crate) fn heal(&self, s: &mut State, m: usize) {
        let stale = s.members[m].heal.take().expect("a heal is pending");
        if !s.members[m].connected {
            return;
        }
        crate::properties::note_passed_over(self, s, m);
        if !self.config.old.no_heal {
            for slot in stale {
                kafka::append(s, self.registration_keys[slot as usize].clone(), None);
            }
        }
    }

    /// The encoded lease value of member `m` with `token`, granted at `now`
    /// (wall ms).
    pub(crate) fn lease_value(
        &self,
        m: usize,
        token: krabka_coordination::FencingToken,
        now: i64,
    ) -> std::sync::Arc<[u8]> {
        encode_lease(&Lease {
            member: self.config.members[m].id.clone(),
            token,
            granted_at: now,
            deadline: now.saturating_add(rules::millis(self.options.lease_duration)),
        })
        .expect("the model's ids encode")
        .into()
    }
}
