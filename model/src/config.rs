//! What one check explores: the roles and members, the timing in ticks, the
//! bounds (horizon, epoch space, fault budget) and the behaviour switches.
//!
//! Time is counted in *ticks* of [`TICK_MS`] milliseconds: the core's rules
//! see milliseconds, the model steps in ticks.

use std::time::Duration;

use krabka_coordination::ElectionOptions;

/// Milliseconds per tick: every instant the core's rules see is a multiple.
pub const TICK_MS: i64 = 1000;

/// One member process slot: its id, its role and its clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSpec {
    /// The member id (two slots may share one: twins).
    pub id: String,
    /// The index of its role in [`Config::roles`].
    pub role: usize,
    /// How far its wall clock runs ahead of real time, in ticks (negative:
    /// behind). Its monotonic clock runs at real time.
    pub skew: i8,
}

/// Which faults the environment may inject (each injection spends one unit
/// of [`Config::max_faults`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Faults {
    /// A process dies (it may come back: [`Config::max_restarts`]).
    pub crash: bool,
    /// A process freezes (a GC pause, SIGSTOP) and later resumes.
    pub pause: bool,
    /// A process is cut off from the cluster and later reconnects.
    pub disconnect: bool,
    /// A leader freezes in the middle of a renewal: its transaction stays
    /// open on the state partition and holds the last stable offset back.
    pub stall: bool,
    /// A wall clock steps by this many ticks (either way); 0: never.
    pub clock_step: i8,
    /// The leader of a role without member slots (a neighbour on the same
    /// partition, not modelled as a member) leaves a transaction open on
    /// the partition; it commits later or the coordinator times it out.
    pub neighbour: bool,
}

/// The behaviours the core had before the design-level fixes, each behind a
/// switch so that a test pins the counterexample the checker finds with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Old {
    /// Deposed resign: resign minted a new epoch unconditionally
    /// (InitProducerId without the term's producer id and epoch) and then
    /// wrote the lease tombstone through it.
    pub unconditional_resign: bool,
    /// Neighbour freeze: a standby challenged at the deadline without asking
    /// whether an open transaction held the partition back.
    pub no_held_back_check: bool,
    /// Dead roster: the winner of an election removed no registration.
    pub no_heal: bool,
    /// Lease-expiry blindness: a leader kept no local deadline; cut off, it
    /// reported itself holding until a write was fenced.
    pub no_local_deadline: bool,
}

/// The fixes of the model's findings (see `docs/model.md`). The core
/// implements every one, so [`Config::base`] switches them on; a finding's
/// test switches its fix off to show the counterexample of the core before
/// the fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Proposed {
    /// After the held-back check answers "nothing open", a challenger still
    /// reads what the check saw as decided before it mints (the check and
    /// the view it guards then describe the same offsets).
    pub read_after_held_back: bool,
    /// A challenger asks whether the partition is held back even when it
    /// sees no lease: an open transaction may hide the first lease of a
    /// member elected a moment ago.
    pub held_back_without_lease: bool,
    /// A resign that cannot finish before the local lease deadline ends the
    /// term there (`is_held` turns false at the deadline, as it does for a
    /// renewing leader).
    pub resign_ends_at_deadline: bool,
    /// The held-back check and the read after it are one request: it
    /// answers whether anything at or past the challenger's read position
    /// is undecided (wait) or unread (read it and evaluate again), and the
    /// challenger mints only when nothing is. As two requests (the check,
    /// then a read), a transaction opened between them can hide the first
    /// lease of a challenger elected in that instant from the read. Takes
    /// precedence over `read_after_held_back`.
    pub held_back_at_read_position: bool,
    /// A challenger held back by an open transaction with no record of its
    /// own role reads past it (every entry to the end of the log, each
    /// decided by its transaction) and decides on that view; with a record
    /// of its own role open it waits, as before.
    pub look_past_stable: bool,
}

/// One bounded configuration of the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Role names; every role's records go to the one state partition.
    pub roles: Vec<String>,
    /// The member process slots; all start at tick 0.
    pub members: Vec<MemberSpec>,
    /// The lease duration, in ticks.
    pub lease: u8,
    /// The renew interval, in ticks.
    pub renew: u8,
    /// The challenge stagger, in ticks.
    pub stagger: u8,
    /// The longest a poll waits for new records, in ticks.
    pub poll_wait: u8,
    /// The last tick: at it every behaviour ends (the state is terminal).
    pub horizon: u8,
    /// The epoch at which the coordinator rotates the role to a new
    /// producer id with epoch 0 (Kafka: 32766).
    pub max_epoch: i16,
    /// The faults the environment may inject.
    pub faults: Faults,
    /// How many faults one behaviour may contain.
    pub max_faults: u8,
    /// Faults (and restarts, resigns, guarded writes) may also strike
    /// between two steps of one instant, not only between instants.
    pub faults_anywhere: bool,
    /// How many times a process that went down may start again (under the
    /// same id: it registers again, at the tail).
    pub max_restarts: u8,
    /// How many resigns one behaviour may contain.
    pub max_resigns: u8,
    /// How many guarded writes one behaviour may contain.
    pub max_writes: u8,
    /// The clock skew between two members (ticks) under which the
    /// "overlapping lease windows" property is claimed. The project documents
    /// no bound, so the default claims it for equal clocks only.
    pub documented_skew: i8,
    /// A crashed holder must be replaced within this many ticks (the
    /// liveness property's bound; crashes later than `horizon - window` are
    /// not judged).
    pub liveness_window: u8,
    /// The old behaviours switched on.
    pub old: Old,
    /// Proposed fixes of findings switched on.
    pub proposed: Proposed,
}

impl Config {
    /// Two members of one role, no faults: the base every scenario extends.
    pub fn base() -> Config {
        Config {
            roles: vec!["r".into()],
            members: vec![member("a", 0, 0), member("b", 0, 0)],
            lease: 3,
            renew: 1,
            stagger: 1,
            poll_wait: 1,
            horizon: 8,
            max_epoch: 2,
            faults: Faults::default(),
            max_faults: 0,
            faults_anywhere: false,
            max_restarts: 0,
            max_resigns: 0,
            max_writes: 0,
            documented_skew: 0,
            liveness_window: 6,
            old: Old::default(),
            // The core's behaviour: the fixes it implements are in.
            proposed: Proposed {
                read_after_held_back: true,
                held_back_without_lease: true,
                resign_ends_at_deadline: true,
                held_back_at_read_position: true,
                look_past_stable: true,
            },
        }
    }

    /// The election options the core's rules see.
    pub fn election(&self) -> ElectionOptions {
        let ticks = |n: u8| Duration::from_millis(n as u64 * TICK_MS as u64);
        ElectionOptions::default()
            .with_partitions(1)
            .with_lease_duration(ticks(self.lease))
            .with_renew_interval(ticks(self.renew))
            .with_challenge_stagger(ticks(self.stagger))
    }

    /// Refuses a configuration the model cannot run; the message names the
    /// values.
    pub fn validate(&self) -> Result<(), String> {
        self.election().validate().map_err(|e| e.to_string())?;
        if self.roles.is_empty() || self.members.is_empty() {
            return Err("a configuration needs a role and a member".into());
        }
        if let Some(m) = self.members.iter().find(|m| m.role >= self.roles.len()) {
            return Err(format!(
                "member {:?} names role {} of {}",
                m.id,
                m.role,
                self.roles.len()
            ));
        }
        if self.members.len() > 8 || self.roles.len() > 4 {
            return Err("at most 8 members and 4 roles".into());
        }
        if self.max_epoch < 1 || self.poll_wait == 0 {
            return Err(format!(
                "max_epoch ({}) and poll_wait ({}) must be at least 1",
                self.max_epoch, self.poll_wait
            ));
        }
        Ok(())
    }
}

/// A member slot of `role` with id `id` and wall-clock skew `skew` (ticks).
pub fn member(id: &str, role: usize, skew: i8) -> MemberSpec {
    MemberSpec {
        id: id.into(),
        role,
        skew,
    }
}
