//! The model: its actions, which of them are enabled, and the scheduling
//! rule that stands in for fairness.
//!
//! # Steps and time
//!
//! An action is one atomic step: a member's request and the cluster's
//! answer (an append, a poll, InitProducerId, a transaction's commit), a
//! member's local decision, a coordinator timeout, a fault, or a tick of
//! real time. Steps take no time; time passes only by [`Action::Tick`].
//!
//! # Fairness
//!
//! stateright checks `eventually` on paths to terminal states and has no
//! fairness constraints, so fairness is part of the model: a tick is enabled
//! only when no *due* step is (maximal progress). A running, unfrozen,
//! connected member takes each step as soon as it is enabled (its timer is
//! due, records it has not read are decided, its request is next), and the
//! coordinator times a transaction out when its timeout passes. Slowness is
//! modelled explicitly, as a fault: a pause freezes a process, a disconnect
//! makes its requests fail, a stall freezes a leader mid-transaction. Every
//! behaviour ends at [`crate::Config::horizon`], so every path is finite.
//!
//! # When the environment acts
//!
//! Faults, restarts, resigns and guarded writes happen between instants,
//! once every due step of the instant is done; a stall is the alternative
//! to a due renewal. With [`crate::Config::faults_anywhere`] they may also
//! strike between any two steps of an instant (a process frozen between
//! deciding to challenge and its InitProducerId, a winner crashing before it
//! removed stale registrations), at a much larger state space.

use std::sync::Arc;

use krabka_coordination::{encode_key, ElectionOptions, Key, RoleState};
use stateright::{Model, Property};

use crate::config::{Config, TICK_MS};
use crate::state::{Budget, Ghost, Member, Phase, State, Status};

/// One atomic step. The `u8` is a member slot (or a role for
/// [`Action::TxnTimeout`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Real time advances one tick.
    Tick,
    /// Reads the partition (first time) and appends a registration.
    Register(u8),
    /// Reads the records decided since the last read.
    Poll(u8),
    /// A wait ran out: the member evaluates again.
    Timer(u8),
    /// The challenger reads what is new before challenging.
    ChallengePoll(u8),
    /// The challenger asks whether its read position is at the end of the
    /// log (without `held_back_at_read_position`: whether an open
    /// transaction holds the partition back).
    HeldBack(u8),
    /// Not held back: the challenger reads once more (with
    /// `read_after_held_back`, without `held_back_at_read_position`).
    HeldBackRead(u8),
    /// InitProducerId.
    Mint(u8),
    /// The first lease, through the minted epoch.
    FirstLease(u8),
    /// The winner removes the registrations of members that missed their
    /// turn (beside its renewals).
    Heal(u8),
    /// A renewal.
    Renew(u8),
    /// The next step of a resign.
    ResignStep(u8),
    /// A resign step's bound ran out while cut off.
    ResignTimeout(u8),
    /// An ended term: deregister and exit.
    Leave(u8),
    /// The coordinator aborts a role's transaction open past its timeout.
    TxnTimeout(u8),
    /// A guarded write to the data topic.
    Write(u8),
    /// The application resigns the role.
    Resign(u8),
    /// Fault: the process dies.
    Crash(u8),
    /// Fault: the process freezes.
    Pause(u8),
    /// The frozen process runs again.
    Resume(u8),
    /// Fault: the process is cut off.
    Disconnect(u8),
    /// The process reaches the cluster again.
    Reconnect(u8),
    /// Fault: a leader freezes mid-renewal with its transaction open.
    Stall(u8),
    /// Fault: the wall clock steps.
    ClockStep(u8, i8),
    /// A process that went down starts again under its id.
    Restart(u8),
    /// Fault: the unmodelled leader of a memberless role leaves a
    /// transaction open on the partition.
    NeighbourStall(u8),
    /// That leader commits its open transaction.
    NeighbourCommit(u8),
}

/// The model of one [`Config`].
#[derive(Debug, Clone)]
pub struct LeaseModel {
    /// The configuration explored.
    pub config: Config,
    pub(crate) options: ElectionOptions,
    pub(crate) lease_keys: Vec<Arc<[u8]>>,
    pub(crate) registration_keys: Vec<Arc<[u8]>>,
}

impl LeaseModel {
    /// The model of `config`; panics with the reason when the configuration
    /// is invalid.
    pub fn new(config: Config) -> LeaseModel {
        if let Err(e) = config.validate() {
            panic!("invalid model configuration: {e}");
        }
        let key =
            |k: Key| -> Arc<[u8]> { encode_key(&k).expect("the model's names encode").into() };
        let lease_keys = config.roles.iter().map(|r| key(Key::lease(r))).collect();
        let registration_keys = config
            .members
            .iter()
            .map(|m| key(Key::registration(&config.roles[m.role], &m.id)))
            .collect();
        LeaseModel {
            options: config.election(),
            config,
            lease_keys,
            registration_keys,
        }
    }

    /// Member `m`'s wall clock at `s.now`, in epoch ms.
    pub fn wall(&self, s: &State, m: usize) -> i64 {
        (s.now as i64 + s.members[m].skew as i64) * TICK_MS
    }

    /// The role index of member slot `m`.
    pub fn role_of(&self, m: usize) -> usize {
        self.config.members[m].role
    }

    /// Member `m`'s follower state: the core's [`RoleState`] built from the
    /// committed records it has read.
    pub fn view(&self, s: &State, m: usize) -> RoleState {
        let role = &self.config.roles[self.role_of(m)];
        let mut state = RoleState::new(role.as_str());
        let upto = s.members[m].read_upto as usize;
        for (offset, e) in s.log.iter().enumerate().take(upto) {
            if e.status == Status::Committed {
                state
                    .apply_parts(offset as i64, &e.key, e.value.as_deref())
                    .expect("the model writes well-formed records");
            }
        }
        state
    }

    /// The member slots of `role` whose id is `id`.
    pub fn slots<'a>(&'a self, role: usize, id: &'a str) -> impl Iterator<Item = usize> + 'a {
        self.config
            .members
            .iter()
            .enumerate()
            .filter(move |(_, m)| m.role == role && m.id == id)
            .map(|(i, _)| i)
    }

    /// The actions that must happen before time may pass (see the module
    /// documentation), then the ones the environment may choose any time.
    fn enabled(&self, s: &State, due: &mut Vec<Action>, free: &mut Vec<Action>) {
        for m in 0..s.members.len() {
            self.due_steps(s, m, due);
            self.free_steps(s, m, free);
        }
        for r in crate::kafka::timed_out(s, self.config.lease) {
            due.push(Action::TxnTimeout(r as u8));
        }
        self.neighbour_steps(s, free);
    }
}

impl Model for LeaseModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let c = &self.config;
        let members = c
            .members
            .iter()
            .map(|spec| Member {
                phase: Phase::Start,
                paused: false,
                connected: true,
                skew: spec.skew,
                read_upto: 0,
                acquire: Default::default(),
                term: None,
                heal: None,
                health: Default::default(),
            })
            .collect();
        // A memberless role's leader holds the first epochs.
        let mut next_producer_id = 0;
        let coordinator = (0..c.roles.len())
            .map(|r| {
                let mut txn = crate::state::TxnId::default();
                if !c.members.iter().any(|m| m.role == r) {
                    txn.epoch = Some(krabka_coordination::FencingToken::new(next_producer_id, 0));
                    next_producer_id += 1;
                }
                txn
            })
            .collect();
        vec![State {
            now: 0,
            log: Vec::new(),
            coordinator,
            next_producer_id,
            data: Vec::new(),
            members,
            budget: Budget {
                faults: c.max_faults,
                restarts: c.max_restarts,
                resigns: c.max_resigns,
                writes: c.max_writes,
            },
            ghost: Ghost {
                last_elected: vec![None; c.roles.len()],
                owed: vec![None; c.roles.len()],
                ..Default::default()
            },
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.now >= self.config.horizon {
            return;
        }
        let mut free = Vec::new();
        self.enabled(s, actions, &mut free);
        if actions.is_empty() {
            actions.push(Action::Tick);
            actions.extend(free);
        } else if self.config.faults_anywhere {
            actions.extend(free);
        }
    }

    fn next_state(&self, s: &State, action: Action) -> Option<State> {
        let mut next = s.clone();
        self.apply(&mut next, action);
        Some(next)
    }

    fn format_action(&self, action: &Action) -> String {
        crate::trace::action(self, action)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        crate::properties::all()
    }
}
