//! The properties the checker proves or refutes, and the ghost bookkeeping
//! they read. Each property's constant is its name in a report; its doc
//! line is its statement.

use krabka_coordination::{FencingToken, RoleState};
use stateright::Property;

use crate::model::LeaseModel;
use crate::state::{Challenge, Phase, State};

/// (always) The committed guarded writes of a role carry non-decreasing
/// tokens in log order: none comes from a token after a newer one committed.
pub const ORDERED_WRITES: &str = "guarded writes are ordered";
/// (always) A resign never fences a token newer than the resigner's own.
pub const RESIGN_FENCES_NOTHING_NEWER: &str = "a resign never fences a newer token";
/// (always) A running member whose local lease deadline has passed does not
/// report itself as holding (`is_held` is false).
pub const NO_HOLDING_PAST_DEADLINE: &str = "no holding past the local deadline";
/// (always) With clock skew within [`crate::Config::documented_skew`] (and
/// no clock step), no two members of a role hold with overlapping local
/// lease windows: a challenger that ran on time is never elected while a
/// holder whose first lease was written before the challenger's last read
/// (visible to it, or held back from it) is inside its window (from its
/// election to its local deadline, or to its resign's tombstone).
pub const NO_OVERLAPPING_WINDOWS: &str = "no overlapping lease windows";
/// (always) With clock skew below the lease duration minus the renew
/// interval, a challenger that ran on time never fences a leader that ran
/// on time and whose first lease was written before the challenger's last
/// read (visible to it, or held back from it): in particular a transaction
/// held open on the shared partition by another role does not make a
/// standby fence its healthy leader.
pub const HEALTHY_LEADER_KEPT: &str = "a healthy leader is never fenced";
/// (always, bounded wait) A registration of a member that was already dead
/// when a completed election passed it over (ranked ahead of the winner, or
/// the holder it replaced; the winner reaching the cluster) adds no stagger
/// to the wait of a later challenger that has read that election: each dead
/// registration delays at most one failover.
pub const DEAD_DELAY_ONCE: &str = "a dead registration delays one failover at most";
/// (sometimes) A member is elected after another member's term.
pub const FAILOVER: &str = "a failover";
/// (sometimes) A member is elected after a resign cleared the lease.
pub const HANDOVER: &str = "a resign hand-over";
/// (sometimes) A deposed leader's guarded write is fenced.
pub const ZOMBIE_FENCED: &str = "a fenced zombie write";
/// (sometimes) The coordinator rotates a role to a new producer id.
pub const EXHAUSTION: &str = "an epoch exhaustion";
/// (sometimes) A member refuses to run beside another live process with its
/// member id (the duplicate-member-id check).
pub const TWIN_REFUSED: &str = "a twin is refused";
/// (sometimes) A standby stops waiting for a holder's far-future deadline at
/// one lease duration after it first saw that lease (the cap).
pub const CAPPED_WAIT: &str = "a far-future deadline is capped";
/// (eventually, under the model's fairness) If a holder crashes and some
/// member of its role stays alive, running and connected, a member of the
/// role is elected within [`crate::Config::liveness_window`] ticks, plus a
/// lease duration and a stagger per other member for each later fault.
pub const CRASH_REPLACED: &str = "a crashed holder is replaced";

/// Every property, in report order.
pub fn all() -> Vec<Property<LeaseModel>> {
    vec![
        Property::always(ORDERED_WRITES, |_, s: &State| ordered_writes(s)),
        Property::always(RESIGN_FENCES_NOTHING_NEWER, |_, s: &State| {
            !s.ghost.resign_fenced_newer
        }),
        Property::always(NO_HOLDING_PAST_DEADLINE, no_holding_past_deadline),
        Property::always(NO_OVERLAPPING_WINDOWS, |_, s: &State| {
            !s.ghost.windows_overlapped
        }),
        Property::always(HEALTHY_LEADER_KEPT, |_, s: &State| !s.ghost.healthy_fenced),
        Property::always(DEAD_DELAY_ONCE, |_, s: &State| !s.ghost.dead_delayed),
        Property::sometimes(FAILOVER, |_, s: &State| s.ghost.failover),
        Property::sometimes(HANDOVER, |_, s: &State| s.ghost.handover),
        Property::sometimes(ZOMBIE_FENCED, |_, s: &State| s.ghost.zombie_fenced),
        Property::sometimes(EXHAUSTION, |_, s: &State| s.ghost.exhausted),
        Property::sometimes(TWIN_REFUSED, |_, s: &State| s.ghost.twin_refused),
        Property::sometimes(CAPPED_WAIT, |_, s: &State| s.ghost.capped_wait),
        Property::eventually(CRASH_REPLACED, crash_replaced),
    ]
}

fn ordered_writes(s: &State) -> bool {
    let mut last: Vec<Option<FencingToken>> = Vec::new();
    for (role, token) in &s.data {
        let r = *role as usize;
        if last.len() <= r {
            last.resize(r + 1, None);
        }
        if last[r].is_some_and(|l| *token < l) {
            return false;
        }
        last[r] = Some(*token);
    }
    true
}

/// The local deadline (tick) of member `m`'s term, if it holds one.
fn deadline(model: &LeaseModel, s: &State, m: usize) -> Option<u8> {
    s.members[m]
        .term
        .map(|t| t.sent.saturating_add(model.config.lease))
}

fn no_holding_past_deadline(model: &LeaseModel, s: &State) -> bool {
    (0..s.members.len()).all(|m| {
        !s.holding(m) || s.members[m].paused || deadline(model, s, m).is_some_and(|d| s.now < d)
    })
}

/// The largest wall-clock difference (ticks) between two members of `role`.
fn skew_spread(model: &LeaseModel, s: &State, role: usize) -> i16 {
    let skews = (0..s.members.len())
        .filter(|m| model.role_of(*m) == role)
        .map(|m| s.members[m].skew as i16);
    let (lo, hi) = skews.fold((i16::MAX, i16::MIN), |(lo, hi), k| (lo.min(k), hi.max(k)));
    (hi - lo).max(0)
}

fn crash_replaced(model: &LeaseModel, s: &State) -> bool {
    let c = &model.config;
    if s.now < c.horizon {
        return false;
    }
    // Each fault after the crash may cost a lease duration (a lost
    // challenge's hold-off) and a stagger per member.
    let per_fault = c.lease as u16 + c.stagger as u16 * (c.members.len() as u16).saturating_sub(1);
    s.ghost.owed.iter().enumerate().all(|(role, owed)| {
        let Some((at, faults_left)) = *owed else {
            return true;
        };
        let later_faults = faults_left.saturating_sub(s.budget.faults) as u16;
        let window = c.liveness_window as u16 + later_faults * per_fault;
        let judged = at as u16 + window <= c.horizon as u16;
        let stayed_up = (0..s.members.len()).any(|m| {
            let me = &s.members[m];
            model.role_of(m) == role
                && me.phase != Phase::Down
                && !me.paused
                && me.connected
                && me.health.last_change.is_none_or(|t| t < at)
        });
        !judged || !stayed_up
    })
}

/// True when clocks are within `bound` ticks of each other in `role` and no
/// clock stepped.
fn clocks_within(model: &LeaseModel, s: &State, role: usize, bound: i16) -> bool {
    !s.ghost.clock_stepped && skew_spread(model, s, role) <= bound
}

/// True when member `h` holds a term whose first lease was written below
/// `decided`, the log's length at a challenger's last read.
fn elected_before(s: &State, h: usize, decided: u16) -> bool {
    s.members[h].term.is_some_and(|t| t.first < decided)
}

/// A challenger `m` that decided at log length `decided` minted and
/// superseded `previous`: records whether it fenced a healthy leader.
pub(crate) fn note_challenge(
    model: &LeaseModel,
    s: &mut State,
    m: usize,
    previous: FencingToken,
    decided: u16,
) {
    let role = model.role_of(m);
    let c = &model.config;
    let on_time = clocks_within(model, s, role, c.lease as i16 - c.renew as i16 - 1)
        && !s.members[m].health.challenge_faulted;
    let healthy_leader = (0..s.members.len()).any(|h| {
        let me = &s.members[h];
        h != m
            && model.role_of(h) == role
            && me.phase == Phase::Leading
            && me.term.is_some_and(|t| t.token == previous)
            && !me.health.term_faulted
            && elected_before(s, h, decided)
    });
    if on_time && healthy_leader {
        s.ghost.healthy_fenced = true;
    }
}

/// At member `m`'s decision to challenge: whether its rank counts a
/// registration that a completed election it had read of (its view reaches
/// that election) passed over while dead.
pub(crate) fn waits_for_passed(model: &LeaseModel, s: &State, m: usize, view: &RoleState) -> bool {
    let read = s.members[m].read_upto;
    let Some(own) = view.entry(&model.config.members[m].id) else {
        return false;
    };
    let holder = view.lease().map(|l| l.member.as_str());
    view.roster()
        .take_while(|e| e.offset < own.offset)
        .filter(|e| Some(e.member.as_str()) != holder)
        .any(|e| {
            s.ghost
                .passed
                .iter()
                .any(|(offset, at)| *offset as i64 == e.offset && *at <= read)
        })
}

/// Member `m`'s first lease committed after `challenge`: records a
/// failover, a hand-over, the end of an owed failover, a winner that waited
/// for a dead registration already passed over, and a window opened while
/// an earlier holder's was open.
pub(crate) fn note_election(model: &LeaseModel, s: &mut State, m: usize, challenge: &Challenge) {
    let role = model.role_of(m);
    let c = &model.config;
    let view = model.view(s, m);
    let on_time = clocks_within(model, s, role, c.documented_skew as i16)
        && !s.members[m].health.challenge_faulted;
    let overlapped = (0..s.members.len()).any(|h| {
        h != m
            && model.role_of(h) == role
            && s.holding(h)
            && s.members[h]
                .term
                .is_some_and(|t| !t.given_up && s.now < t.sent.saturating_add(c.lease))
            && elected_before(s, h, challenge.decided)
    });
    let g = &mut s.ghost;
    if on_time && overlapped {
        g.windows_overlapped = true;
    }
    if challenge.waited_for_passed {
        g.dead_delayed = true;
    }
    if g.last_elected[role].is_some_and(|x| x as usize != m) {
        g.failover = true;
    }
    if view.lease().is_none() && view.last_cleared_deadline().is_some() {
        g.handover = true;
    }
    g.last_elected[role] = Some(m as u8);
    g.owed[role] = None;
}

/// Member `m` completed its election and reached the cluster to remove the
/// registrations it passed over: those of dead members (ranked ahead of
/// it, or the holder it replaced) are recorded with the log's length.
pub(crate) fn note_passed_over(model: &LeaseModel, s: &mut State, m: usize) {
    let at = s.log.len() as u16;
    let role = model.role_of(m);
    let view = model.view(s, m);
    let id = &model.config.members[m].id;
    let Some(own) = view.entry(id) else { return };
    let holder = view.lease().map(|l| l.member.clone());
    for e in view.roster() {
        let passed = e.offset < own.offset || holder.as_deref() == Some(e.member.as_str());
        let dead = model
            .slots(role, &e.member)
            .all(|slot| s.members[slot].phase == Phase::Down);
        let offset = e.offset as u16;
        if passed && dead && !s.ghost.passed.iter().any(|(o, _)| *o == offset) {
            s.ghost.passed.push((offset, at));
            s.ghost.passed.sort_unstable();
        }
    }
}

/// A resign bumped the epoch of a term holding `own` while the coordinator
/// held `previous`.
pub(crate) fn note_resign_bump(s: &mut State, own: FencingToken, previous: Option<FencingToken>) {
    if previous.is_some_and(|p| p > own) {
        s.ghost.resign_fenced_newer = true;
    }
}
