//! Which steps each member has enabled, and the dispatch of an action to its
//! effect ([`crate::acquire`], [`crate::held`], [`crate::faults`]).

use crate::model::{Action, LeaseModel};
use crate::state::{Phase, State};

impl LeaseModel {
    /// The steps of member `m` that are due now (taken before time passes).
    pub(crate) fn due_steps(&self, s: &State, m: usize, due: &mut Vec<Action>) {
        let me = &s.members[m];
        if me.phase == Phase::Down || me.paused {
            return;
        }
        let a = m as u8;
        let net = me.connected;
        let unread = net && s.last_stable() > me.read_upto;
        // The heal runs in its own task, beside whatever the member does.
        if me.heal.is_some() {
            due.push(Action::Heal(a));
        }
        match &me.phase {
            Phase::Down => {}
            Phase::Start | Phase::Register if net => due.push(Action::Register(a)),
            Phase::CatchUp { .. } if unread => due.push(Action::Poll(a)),
            Phase::Wait { at } => {
                if unread {
                    due.push(Action::Poll(a));
                }
                if self.wall(s, m) >= *at {
                    due.push(Action::Timer(a));
                }
            }
            Phase::PollWait { until } => {
                if unread {
                    due.push(Action::Poll(a));
                }
                if s.now >= *until {
                    due.push(Action::Timer(a));
                }
            }
            Phase::ChallengePoll if net => due.push(Action::ChallengePoll(a)),
            Phase::HeldBack { .. } if net => due.push(Action::HeldBack(a)),
            Phase::HeldBackRead if net => due.push(Action::HeldBackRead(a)),
            Phase::Mint(_) if net => due.push(Action::Mint(a)),
            Phase::FirstLease(..) if net => due.push(Action::FirstLease(a)),
            Phase::Leading => {
                let term = me.term.expect("a leader holds a term");
                if net && s.now >= term.next_at {
                    due.push(Action::Renew(a));
                    // A renewal that is due races the application's write
                    // and may stall mid-transaction.
                    if s.budget.writes > 0 && self.may_write(s, m) {
                        due.push(Action::Write(a));
                    }
                    if self.config.faults.stall && s.budget.faults > 0 {
                        due.push(Action::Stall(a));
                    }
                }
            }
            Phase::Resigning { since, .. } => {
                if self.resign_bound_passed(s, *since) {
                    due.push(Action::ResignTimeout(a));
                } else if net {
                    due.push(Action::ResignStep(a));
                }
            }
            Phase::Leaving => due.push(Action::Leave(a)),
            // Cut off: the request fails and is retried; nothing changes.
            _ => {}
        }
    }

    /// True when a resign step begun at `since` is past its bound (one
    /// lease duration).
    pub(crate) fn resign_bound_passed(&self, s: &State, since: u8) -> bool {
        s.now >= since.saturating_add(self.config.lease)
    }

    /// The steps the environment or the application may take any time.
    pub(crate) fn free_steps(&self, s: &State, m: usize, free: &mut Vec<Action>) {
        let c = &self.config;
        let me = &s.members[m];
        let a = m as u8;
        if me.phase == Phase::Down {
            if s.budget.restarts > 0 {
                free.push(Action::Restart(a));
            }
            return;
        }
        if me.paused {
            free.push(Action::Resume(a));
        }
        if !me.connected {
            free.push(Action::Reconnect(a));
        }
        if me.phase == Phase::Leading && !me.paused {
            if s.budget.writes > 0 && self.may_write(s, m) {
                free.push(Action::Write(a));
            }
            if s.budget.resigns > 0 {
                free.push(Action::Resign(a));
            }
        }
        if s.budget.faults == 0 {
            return;
        }
        let f = c.faults;
        if f.crash {
            free.push(Action::Crash(a));
        }
        if f.pause && !me.paused {
            free.push(Action::Pause(a));
        }
        if f.disconnect && me.connected {
            free.push(Action::Disconnect(a));
        }
        if f.clock_step != 0 {
            free.push(Action::ClockStep(a, f.clock_step));
            free.push(Action::ClockStep(a, -f.clock_step));
        }
    }

    /// True when leader `m` may attempt a guarded write: running, connected
    /// (a cut-off write fails and changes nothing), and within its local
    /// deadline (the old behaviour kept none).
    fn may_write(&self, s: &State, m: usize) -> bool {
        let me = &s.members[m];
        let term = me.term.expect("a leader holds a term");
        let within = self.config.old.no_local_deadline || s.now < term.sent + self.config.lease;
        me.phase == Phase::Leading && !me.paused && me.connected && within
    }

    /// The environment's steps on roles without member slots.
    pub(crate) fn neighbour_steps(&self, s: &State, free: &mut Vec<Action>) {
        if !self.config.faults.neighbour {
            return;
        }
        for (r, txn) in s.coordinator.iter().enumerate() {
            if self.config.members.iter().any(|m| m.role == r) {
                continue;
            }
            match txn.open {
                None if s.budget.faults > 0 => free.push(Action::NeighbourStall(r as u8)),
                Some(_) => free.push(Action::NeighbourCommit(r as u8)),
                None => {}
            }
        }
    }

    /// Applies `action` to `s`.
    pub(crate) fn apply(&self, s: &mut State, action: Action) {
        match action {
            Action::Tick => self.tick(s),
            Action::Register(m) => self.register(s, m as usize),
            Action::Poll(m) => self.poll(s, m as usize),
            Action::Timer(m) => self.loop_head(s, m as usize),
            Action::ChallengePoll(m) => self.challenge_poll(s, m as usize),
            Action::HeldBack(m) => self.held_back(s, m as usize),
            Action::HeldBackRead(m) => self.held_back_read(s, m as usize),
            Action::Mint(m) => self.mint(s, m as usize),
            Action::FirstLease(m) => self.first_lease(s, m as usize),
            Action::Heal(m) => self.heal(s, m as usize),
            Action::Renew(m) => self.renew(s, m as usize, false),
            Action::ResignStep(m) => self.resign_step(s, m as usize),
            Action::ResignTimeout(m) => self.resign_timeout(s, m as usize),
            Action::Leave(m) => self.leave(s, m as usize),
            Action::TxnTimeout(r) => crate::kafka::time_out(s, r as usize, self.config.max_epoch),
            Action::Write(m) => self.write(s, m as usize),
            Action::Resign(m) => self.resign(s, m as usize),
            Action::Crash(m) => self.crash(s, m as usize),
            Action::Pause(m) => self.pause(s, m as usize),
            Action::Resume(m) => self.resume(s, m as usize),
            Action::Disconnect(m) => self.disconnect(s, m as usize),
            Action::Reconnect(m) => self.reconnect(s, m as usize),
            Action::Stall(m) => self.renew(s, m as usize, true),
            Action::ClockStep(m, d) => self.clock_step(s, m as usize, d),
            Action::Restart(m) => self.restart(s, m as usize),
            Action::NeighbourStall(r) => self.neighbour_stall(s, r as usize),
            Action::NeighbourCommit(r) => crate::kafka::decide_open(s, r as usize, true),
        }
    }
}
