//! The state of the modelled world: the state partition (a log with open,
//! committed and aborted transactions), the transaction coordinator, the data
//! topic, the members and their clocks, and the ghost variables the
//! properties read.

use std::sync::Arc;

use krabka_coordination::FencingToken;

/// The state of one behaviour at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    /// Real time, in ticks.
    pub now: u8,
    /// The one partition of `__coordination_state` every role shares.
    pub log: Vec<Entry>,
    /// The transaction coordinator's state of each role's transactional id.
    pub coordinator: Vec<TxnId>,
    /// The next producer id the coordinator hands out.
    pub next_producer_id: i64,
    /// The data topic: committed guarded writes in log order, as (role
    /// index, token of the writer).
    pub data: Vec<(u8, FencingToken)>,
    /// The member process slots.
    pub members: Vec<Member>,
    /// What the environment may still inject.
    pub budget: Budget,
    /// Observations for the properties; no member reads them.
    pub ghost: Ghost,
}

/// One record of the state partition: real encoded key and value bytes (the
/// core's codec wrote them; the core's `RoleState` reads them).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The encoded key.
    pub key: Arc<[u8]>,
    /// The encoded value; `None` is a tombstone.
    pub value: Option<Arc<[u8]>>,
    /// Whether a `read_committed` reader sees it.
    pub status: Status,
}

/// The transactional status of an [`Entry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Written outside a transaction, or its transaction committed.
    Committed,
    /// Its transaction aborted: it takes an offset and is never read.
    Aborted,
    /// In a transaction of this role's epoch that is still open: it and
    /// every later offset are beyond the last stable offset.
    Open(u8),
}

/// The coordinator's state of one transactional id (one role).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TxnId {
    /// The current producer id and epoch; `None` until the first
    /// InitProducerId (described as `NO_EPOCH`).
    pub epoch: Option<FencingToken>,
    /// The open transaction, if any: the epoch it belongs to and the tick it
    /// began (it times out a lease duration later).
    pub open: Option<(FencingToken, u8)>,
}

/// One member process slot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Member {
    /// Where the process is in the leadership loop.
    pub phase: Phase,
    /// Frozen: takes no step (its timers do not fire either).
    pub paused: bool,
    /// Cut off: every request to the cluster fails (and is retried).
    pub connected: bool,
    /// Wall-clock skew in ticks (clock steps change it).
    pub skew: i8,
    /// The follower's next offset: it has read every decided record below.
    pub read_upto: u16,
    /// The acquire loop's own memory.
    pub acquire: Acquire,
    /// The held term, from the first lease's commit to its end.
    pub term: Option<Term>,
    /// The winner's removal of the registrations it passed over (member
    /// slots), pending: it runs beside the renewals.
    pub heal: Option<Vec<u8>>,
    /// Fault bookkeeping for the properties' premises.
    pub health: Health,
}

/// The acquire loop's memory (the core's `Memory`,
/// `core/src/leadership/acquire/machine/vocabulary.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Acquire {
    /// The offsets of the registrations this process wrote.
    pub own: Vec<u16>,
    /// The first catch-up is done (`found` is set).
    pub caught_up: bool,
    /// A lease under this member's id the first catch-up found (token,
    /// granted_at): a previous incarnation's, not a twin's.
    pub found: Option<(FencingToken, i64)>,
    /// The tokens this process minted.
    pub minted: Vec<FencingToken>,
    /// After a lost challenge: the token that lost and until when (wall ms)
    /// to hold off.
    pub lost: Option<(FencingToken, i64)>,
    /// The lease seen last: token, granted_at, and the monotonic tick it
    /// was first seen (the far-future-deadline cap).
    pub seen: Option<(FencingToken, i64, u8)>,
    /// The same for the views past an open transaction (the core keeps
    /// them apart: `seen_past` in the acquire machine's memory).
    pub seen_past: Option<(FencingToken, i64, u8)>,
}

/// A held term.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Term {
    /// The minted token.
    pub token: FencingToken,
    /// The monotonic tick the last committed lease write was sent: the local
    /// deadline is a lease duration later.
    pub sent: u8,
    /// When the next renewal is due (monotonic tick).
    pub next_at: u8,
    /// A renewal frozen mid-transaction: the tick it was sent.
    pub in_flight: Option<u8>,
    /// The lease was cleared by this member's resign tombstone.
    pub given_up: bool,
    /// A resign outlived the local deadline: the term ended there
    /// (`LEASE_EXPIRED`) while the resign goes on.
    pub expired: bool,
    /// Ghost: the offset of the term's first lease.
    pub first: u16,
}

/// Where a member process is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Not running: never started, crashed, or exited.
    Down,
    /// Started: reads the partition and appends its registration.
    Start,
    /// The election step said `Register`: registers again.
    Register,
    /// Polls until its registration at `offset` has been read.
    CatchUp {
        /// The registration's offset.
        offset: u16,
    },
    /// The election step said `WaitUntil(at)` (wall ms); a poll with new
    /// records wakes it too.
    Wait {
        /// When to evaluate again (`i64::MAX`: on new records only).
        at: i64,
    },
    /// The step said `Challenge`: it reads what is new first.
    ChallengePoll,
    /// Nothing new: it asks whether its read position is at the end of the
    /// log (without `held_back_at_read_position`: whether an open
    /// transaction holds the partition back).
    HeldBack {
        /// Ghost: the log's length at its last read.
        read: u16,
    },
    /// Not held back: it reads once more before it mints (with
    /// `read_after_held_back`, without `held_back_at_read_position`).
    HeldBackRead,
    /// It polls for up to one poll wait, then evaluates again (held back,
    /// records unread at its check, or its wall clock stepped while it
    /// waited).
    PollWait {
        /// The monotonic tick the poll gives up.
        until: u8,
    },
    /// It mints the epoch (InitProducerId).
    Mint(Challenge),
    /// It writes the first lease through the minted epoch.
    FirstLease(FencingToken, Challenge),
    /// Holds the role and renews.
    Leading,
    /// Resigning: the step it takes next, and the tick the step's bound
    /// started.
    Resigning {
        /// The next step.
        stage: Resign,
        /// When the current bound (one lease duration) started.
        since: u8,
    },
    /// The term ended (fenced, lease expired, a fatal error): it deregisters
    /// and exits.
    Leaving,
}

/// A challenge decided: what the challenger carries from its decision to
/// its first lease.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Challenge {
    /// The member slots whose registrations it removes after winning (the
    /// core's `passed_over`, by id).
    pub stale: Vec<u8>,
    /// Ghost: the log's length at its last read before it decided: records
    /// below were written before, visible to it or held back from it.
    pub decided: u16,
    /// Ghost: its rank counted a registration that an earlier completed
    /// election had passed over while its member was dead.
    pub waited_for_passed: bool,
}

/// The steps of a resign.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resign {
    /// Write the lease tombstone through this epoch.
    Tombstone(FencingToken),
    /// Bump the epoch: conditionally (current) or unconditionally (old).
    Bump,
    /// Deregister and exit.
    Deregister,
}

/// Fault bookkeeping of one member for the properties' premises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Health {
    /// The tick of the last fault or recovery of this member.
    pub last_change: Option<u8>,
    /// A fault hit it since its current challenge began.
    pub challenge_faulted: bool,
    /// A fault hit it since its term began.
    pub term_faulted: bool,
}

/// What the environment may still inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Budget {
    /// Faults left.
    pub faults: u8,
    /// Restarts left.
    pub restarts: u8,
    /// Resigns left.
    pub resigns: u8,
    /// Guarded writes left.
    pub writes: u8,
}

/// Observations for the properties.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Ghost {
    /// A resign fenced a token newer than the resigner's own.
    pub resign_fenced_newer: bool,
    /// A challenger that ran on time fenced a leader that ran on time.
    pub healthy_fenced: bool,
    /// A challenger that ran on time was elected while a holder it could
    /// have known of was inside its local lease window.
    pub windows_overlapped: bool,
    /// An election's winner waited a stagger for a dead registration that an
    /// earlier completed election had already passed over.
    pub dead_delayed: bool,
    /// A member was elected after another member's term.
    pub failover: bool,
    /// A member was elected after a resign cleared the lease.
    pub handover: bool,
    /// A guarded write of a deposed leader was fenced.
    pub zombie_fenced: bool,
    /// The coordinator rotated a role to a new producer id.
    pub exhausted: bool,
    /// A wall clock stepped.
    pub clock_stepped: bool,
    /// A member refused to run beside a twin (another live process with its
    /// member id).
    pub twin_refused: bool,
    /// A standby's wait for a far-future deadline was capped.
    pub capped_wait: bool,
    /// Per role, the member slot of the last elected member.
    pub last_elected: Vec<Option<u8>>,
    /// Per role: a holder crashed at this tick, with this many faults left
    /// in the budget, and no member was elected since.
    pub owed: Vec<Option<(u8, u8)>>,
    /// Registrations of members that were dead when a completed election
    /// passed them over: (offset, the log's length when it did).
    pub passed: Vec<(u16, u16)>,
}

impl State {
    /// The last stable offset: the first offset of an open transaction, or
    /// the end of the log.
    pub fn last_stable(&self) -> u16 {
        self.log
            .iter()
            .position(|e| matches!(e.status, Status::Open(_)))
            .unwrap_or(self.log.len()) as u16
    }

    /// True when member `m` is in a term that has not ended (`is_held` is
    /// true).
    pub fn holding(&self, m: usize) -> bool {
        let me = &self.members[m];
        matches!(me.phase, Phase::Leading | Phase::Resigning { .. })
            && me.term.is_some_and(|t| !t.expired)
    }
}
