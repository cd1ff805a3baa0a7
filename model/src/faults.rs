//! The environment: crashes, pauses, disconnects, clock steps and restarts.
//! Each fault spends one unit of the budget and marks the member unhealthy
//! for the properties whose premise is a member that ran on time.

use crate::kafka;
use crate::model::LeaseModel;
use crate::state::{Acquire, Phase, State};

impl LeaseModel {
    /// Spends a fault on member `m` and records it.
    pub(crate) fn spend_fault(&self, s: &mut State, m: usize) {
        s.budget.faults -= 1;
        let h = &mut s.members[m].health;
        h.last_change = Some(s.now);
        h.challenge_faulted = true;
        h.term_faulted = true;
    }

    /// The process dies; a holder's crash obliges the role to a failover.
    pub(crate) fn crash(&self, s: &mut State, m: usize) {
        self.spend_fault(s, m);
        let role = self.role_of(m);
        let current = s.coordinator[role].epoch;
        if s.members[m].term.is_some_and(|t| Some(t.token) == current) {
            s.ghost.owed[role].get_or_insert((s.now, s.budget.faults));
        }
        self.exit(s, m);
        s.members[m].read_upto = 0;
        s.members[m].acquire = Acquire::default();
    }

    /// The process freezes.
    pub(crate) fn pause(&self, s: &mut State, m: usize) {
        self.spend_fault(s, m);
        s.members[m].paused = true;
    }

    /// The process runs again. Its timers fire first: a leader past its
    /// local deadline ends its term; a renewal frozen mid-transaction
    /// completes (committed, unless its transaction was aborted meanwhile)
    /// or, past the deadline, is aborted by the client's own timeout.
    pub(crate) fn resume(&self, s: &mut State, m: usize) {
        let me = &mut s.members[m];
        me.paused = false;
        me.health.last_change = Some(s.now);
        let Some(mut term) = me.term else { return };
        let role = self.role_of(m);
        let expired = self.local_deadline_passed(s, m);
        if let Some(sent) = term.in_flight.take() {
            let open = s.coordinator[role]
                .open
                .is_some_and(|(t, _)| t == term.token);
            if expired || !open {
                if open {
                    kafka::decide_open(s, role, false);
                }
                s.members[m].term = Some(term);
                return self.expire_or_end(s, m, expired);
            }
            kafka::decide_open(s, role, true);
            kafka::open_ahead(s, role, term.token);
            term.sent = sent;
            term.next_at = sent.saturating_add(self.config.renew);
            s.members[m].term = Some(term);
        } else if expired {
            self.expire_or_end(s, m, true);
        }
    }

    /// The process is cut off from the cluster.
    pub(crate) fn disconnect(&self, s: &mut State, m: usize) {
        self.spend_fault(s, m);
        s.members[m].connected = false;
    }

    /// The process reaches the cluster again.
    pub(crate) fn reconnect(&self, s: &mut State, m: usize) {
        s.members[m].connected = true;
        s.members[m].health.last_change = Some(s.now);
    }

    /// The wall clock steps by `delta` ticks.
    pub(crate) fn clock_step(&self, s: &mut State, m: usize, delta: i8) {
        self.spend_fault(s, m);
        s.members[m].skew = s.members[m].skew.saturating_add(delta);
        s.ghost.clock_stepped = true;
        // A waiting member's poll returns empty within one poll wait and it
        // evaluates again on the stepped clock (the far-future cap follows
        // the monotonic clock). Without a step, that re-evaluation changes
        // nothing, so the model only takes it after one.
        if matches!(s.members[m].phase, Phase::Wait { .. }) {
            let until = s.now.saturating_add(self.config.poll_wait);
            s.members[m].phase = Phase::PollWait { until };
        }
    }

    /// A process that went down starts again under the same id.
    pub(crate) fn restart(&self, s: &mut State, m: usize) {
        s.budget.restarts -= 1;
        let me = &mut s.members[m];
        me.phase = Phase::Start;
        me.read_upto = 0;
        me.acquire = Acquire::default();
        me.health.last_change = Some(s.now);
    }

    /// The unmodelled leader of memberless role `r` writes a renewal and
    /// freezes with its transaction open.
    pub(crate) fn neighbour_stall(&self, s: &mut State, r: usize) {
        s.budget.faults -= 1;
        let token = s.coordinator[r]
            .epoch
            .expect("a memberless role's leader holds an epoch");
        let now = s.now as i64 * crate::TICK_MS;
        let value = krabka_coordination::encode_lease(&krabka_coordination::Lease {
            member: format!("{}-leader", self.config.roles[r]),
            token,
            granted_at: now,
            deadline: now + crate::rules::millis(self.options.lease_duration),
        })
        .expect("the model's names encode");
        kafka::write_txn(
            s,
            r,
            token,
            self.lease_keys[r].clone(),
            Some(value.into()),
            true,
        );
    }
}
