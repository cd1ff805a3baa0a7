//! The held term (`core/src/leadership/held/`): renewals bounded by the
//! local lease deadline on the monotonic clock, guarded writes, resign, and
//! the end of a term.

use crate::kafka;
use crate::model::LeaseModel;
use crate::state::{Phase, Resign, State};

impl LeaseModel {
    /// Real time advances one tick. A running leader whose local deadline
    /// (the lease duration after the send of its last committed renewal)
    /// has come ends its term with `LEASE_EXPIRED` at that instant: the
    /// renewal task's timer is local and exact. (The old behaviour kept no
    /// local deadline.)
    pub(crate) fn tick(&self, s: &mut State) {
        s.now += 1;
        for m in 0..s.members.len() {
            if !s.members[m].paused && self.local_deadline_passed(s, m) {
                self.expire_or_end(s, m, true);
            }
        }
    }

    /// The local deadline of member `m` passed (`expired`) or its term was
    /// fenced: a leader's term ends and it leaves; a resigner's term ends
    /// with `LEASE_EXPIRED` at the deadline while the resign goes on (a
    /// fenced resigner goes on too).
    pub(crate) fn expire_or_end(&self, s: &mut State, m: usize, expired: bool) {
        let me = &mut s.members[m];
        match (&me.phase, me.term.as_mut()) {
            (Phase::Resigning { .. }, Some(term)) => term.expired |= expired,
            _ => self.end_term(s, m),
        }
    }

    /// True when member `m` holds a term whose local deadline has passed
    /// and the modelled core would end it (a leader always; a resigner with
    /// the proposed fix only).
    pub(crate) fn local_deadline_passed(&self, s: &State, m: usize) -> bool {
        let c = &self.config;
        let me = &s.members[m];
        let Some(term) = me.term else { return false };
        if term.expired {
            return false;
        }
        let expiring = match me.phase {
            Phase::Leading => !c.old.no_local_deadline,
            Phase::Resigning { .. } => c.proposed.resign_ends_at_deadline,
            _ => false,
        };
        expiring && s.now >= term.sent.saturating_add(c.lease)
    }

    /// Ends member `m`'s term (fenced, expired, or fatal): it stops, then
    /// deregisters and exits.
    pub(crate) fn end_term(&self, s: &mut State, m: usize) {
        s.members[m].term = None;
        s.members[m].phase = Phase::Leaving;
    }

    /// A renewal through the term's epoch: committed, the local deadline
    /// moves; fenced, the term ends. With `stall` the leader freezes
    /// mid-transaction instead: the record stays open on the partition.
    pub(crate) fn renew(&self, s: &mut State, m: usize, stall: bool) {
        let role = self.role_of(m);
        let mut term = s.members[m].term.expect("a leader holds a term");
        let value = self.lease_value(m, term.token, self.wall(s, m));
        let key = self.lease_keys[role].clone();
        if !kafka::write_txn(s, role, term.token, key, Some(value), stall) {
            return self.end_term(s, m);
        }
        if stall {
            self.spend_fault(s, m);
            term.in_flight = Some(s.now);
            s.members[m].paused = true;
        } else {
            kafka::open_ahead(s, role, term.token);
            term.sent = s.now;
            term.next_at = s.now.saturating_add(self.config.renew);
        }
        s.members[m].term = Some(term);
    }

    /// A guarded write through the term's epoch; a deposed leader's write is
    /// fenced and ends its term.
    pub(crate) fn write(&self, s: &mut State, m: usize) {
        s.budget.writes -= 1;
        let token = s.members[m].term.expect("a leader holds a term").token;
        if !kafka::write_guarded(s, self.role_of(m), token) {
            s.ghost.zombie_fenced = true;
            self.end_term(s, m);
        }
    }

    /// The application resigns: renewals stop; the tombstone comes first
    /// (the old behaviour bumped the epoch first).
    pub(crate) fn resign(&self, s: &mut State, m: usize) {
        s.budget.resigns -= 1;
        let token = s.members[m].term.expect("a leader holds a term").token;
        let stage = if self.config.old.unconditional_resign {
            Resign::Bump
        } else {
            Resign::Tombstone(token)
        };
        s.members[m].phase = Phase::Resigning {
            stage,
            since: s.now,
        };
    }

    /// The next step of a resign.
    ///
    /// Current: with another member registered (read from the committed
    /// records), the tombstone and the deregistration in one transaction
    /// of the term's own epoch, and no bump (fenced: nothing of it written,
    /// the successor's lease stands, deregistration follows). With no one
    /// else registered: the tombstone through the term's own epoch (fenced:
    /// nothing is bumped), then InitProducerId with the term's producer id
    /// and epoch (refused when a newer epoch exists), then deregistration. Old: an unconditional InitProducerId,
    /// then the tombstone through the epoch it minted.
    pub(crate) fn resign_step(&self, s: &mut State, m: usize) {
        let Phase::Resigning { stage, since } = s.members[m].phase else {
            unreachable!("a resign step outside a resign");
        };
        let role = self.role_of(m);
        let own = s.members[m].term.expect("a resigner holds a term").token;
        let old = self.config.old.unconditional_resign;
        let next = match stage {
            Resign::Tombstone(via) if !old && self.successor_waits(s, m) => {
                let dereg = self.registration_keys[m].clone();
                let lease = self.lease_keys[role].clone();
                if kafka::write_txn_pair(s, role, via, (lease, None), (dereg, None)) {
                    if let Some(term) = s.members[m].term.as_mut() {
                        term.given_up = true;
                    }
                    return self.exit(s, m);
                }
                Resign::Deregister
            }
            Resign::Tombstone(via) => {
                let cleared =
                    kafka::write_txn(s, role, via, self.lease_keys[role].clone(), None, false);
                if cleared {
                    if let Some(term) = s.members[m].term.as_mut() {
                        term.given_up = true;
                    }
                }
                if cleared && !old {
                    Resign::Bump
                } else {
                    Resign::Deregister
                }
            }
            Resign::Bump if old => {
                let (minted, previous) = kafka::init_producer_id(s, role, self.config.max_epoch);
                crate::properties::note_resign_bump(s, own, previous);
                Resign::Tombstone(minted)
            }
            Resign::Bump => {
                let previous = s.coordinator[role].epoch;
                if kafka::bump_if_current(s, role, own, self.config.max_epoch).is_some() {
                    crate::properties::note_resign_bump(s, own, previous);
                }
                Resign::Deregister
            }
            Resign::Deregister => {
                kafka::append(s, self.registration_keys[m].clone(), None);
                return self.exit(s, m);
            }
        };
        s.members[m].phase = Phase::Resigning { stage: next, since };
    }

    /// Whether a member other than `m` is registered for `m`'s role in the
    /// committed records below the last stable offset (what the resign's
    /// read returns before its transaction begins).
    fn successor_waits(&self, s: &State, m: usize) -> bool {
        let role = &self.config.roles[self.role_of(m)];
        let mut state = krabka_coordination::RoleState::new(role.as_str());
        let upto = s.last_stable() as usize;
        for (offset, e) in s.log.iter().enumerate().take(upto) {
            if e.status == crate::state::Status::Committed {
                state
                    .apply_parts(offset as i64, &e.key, e.value.as_deref())
                    .expect("the model writes well-formed records");
            }
        }
        let me = &self.config.members[m].id;
        let waits = state.roster().any(|e| &e.member != me);
        waits
    }

    /// A resign step's bound (one lease duration) ran out, the member cut
    /// off or frozen meanwhile: the tombstone and bump give up and
    /// deregistration begins (its own bound); a deregistration that ran out
    /// leaves the registration behind.
    pub(crate) fn resign_timeout(&self, s: &mut State, m: usize) {
        let Phase::Resigning { stage, .. } = s.members[m].phase else {
            unreachable!("a resign timeout outside a resign");
        };
        match stage {
            Resign::Deregister => self.exit(s, m),
            _ => {
                s.members[m].phase = Phase::Resigning {
                    stage: Resign::Deregister,
                    since: s.now,
                }
            }
        }
    }

    /// An ended term or a failed acquire: deregisters (when it reaches the
    /// cluster) and exits.
    pub(crate) fn leave(&self, s: &mut State, m: usize) {
        if s.members[m].connected {
            kafka::append(s, self.registration_keys[m].clone(), None);
        }
        self.exit(s, m);
    }

    /// The process exits (a pending heal goes with it).
    pub(crate) fn exit(&self, s: &mut State, m: usize) {
        let me = &mut s.members[m];
        me.phase = Phase::Down;
        me.term = None;
        me.heal = None;
        me.paused = false;
        me.connected = true;
    }
}
