//! The acquire machine's vocabulary: its states (each owning what its
//! action needs), the events the actions end with, the notes a transition
//! reports, where a transition leads, and what the loop remembers between
//! states. The rules that connect them are the machine's (`machine.rs`).

use crate::codec::Lease;
use crate::election::guards::{HoldOff, SeenLease};
use crate::error::{Error, Result};
use crate::state::RoleState;
use crate::token::FencingToken;
use crate::transport::Backlog;

/// Where the acquire loop stands; each state owns what its action needs.
/// `E` is the epoch the transport minted.
pub(in crate::leadership::acquire) enum State<E> {
    /// Decide from the follower's view.
    Judge,
    /// Register (again: the registration is gone from the view).
    Register,
    /// Wait for the turn at `at` with `rank`, behind `holder` (the lease of
    /// the view the wait was decided from).
    Wait {
        at: i64,
        rank: usize,
        holder: Option<Lease>,
    },
    /// Follow the partition for one poll.
    Follow,
    /// Pause after `error`; `what` says what failed and what follows.
    BackOff { what: &'static str, error: Error },
    /// The challenge's catch-up, decided at `now`.
    CatchUp { now: i64 },
    /// The challenge's check that the view is complete.
    CheckBacklog { now: i64 },
    /// The challenge's look past an open transaction. Another role's open
    /// transaction hides this role's records only from a read_committed
    /// reader: when every record of this role up to the end of the log is
    /// decided, the view past it is as complete as a caught-up one (the end
    /// of the log is read once, by the backlog check).
    LookPast { now: i64 },
    /// Mint the epoch; `stale` are removed once it won.
    Mint { stale: Vec<String> },
    /// Write the first lease through `epoch`, minted with `token`.
    FirstLease {
        epoch: E,
        token: FencingToken,
        stale: Vec<String>,
    },
}

impl<E> State<E> {
    /// The state's name, as the module's table has it.
    pub(in crate::leadership::acquire) fn name(&self) -> &'static str {
        match self {
            State::Judge => "Judge",
            State::Register => "Register",
            State::Wait { .. } => "Wait",
            State::Follow => "Follow",
            State::BackOff { .. } => "BackOff",
            State::CatchUp { .. } => "CatchUp",
            State::CheckBacklog { .. } => "CheckBacklog",
            State::LookPast { .. } => "LookPast",
            State::Mint { .. } => "Mint",
            State::FirstLease { .. } => "FirstLease",
        }
    }
}

/// What a state's action ended with.
pub(in crate::leadership::acquire) enum Event<E> {
    /// `Judge`: the wall clock (epoch ms) and the monotonic clock (ms).
    Looked { now: i64, mono: i64 },
    /// `Register`: registered at this offset, and read up to it.
    Registered(i64),
    /// `Wait`, `Follow`, `BackOff`: done.
    Done,
    /// `CatchUp`: how many records the poll read.
    CaughtUp(Result<usize>),
    /// `CheckBacklog`: the transport's answer.
    Backlog(Result<Backlog>),
    /// `LookPast`: the view past the open transaction, if it can be
    /// decided from, and the monotonic clock (ms).
    Past { view: Option<RoleState>, mono: i64 },
    /// `Mint`: the epoch and its token.
    Minted { epoch: E, token: FencingToken },
    /// `FirstLease`: the write's outcome (the lease and when it was sent,
    /// monotonic ms), the epoch's token after it, and the wall clock then.
    Wrote {
        result: Result<(Lease, i64)>,
        token: FencingToken,
        now: i64,
    },
}

impl<E> Event<E> {
    /// The event's name, as the module's table has it.
    pub(super) fn name(&self) -> &'static str {
        match self {
            Event::Looked { .. } => "Looked",
            Event::Registered(_) => "Registered",
            Event::Done => "Done",
            Event::CaughtUp(_) => "CaughtUp",
            Event::Backlog(_) => "Backlog",
            Event::Past { .. } => "Past",
            Event::Minted { .. } => "Minted",
            Event::Wrote { .. } => "Wrote",
        }
    }
}

/// What a transition reports on the way, in order.
pub(in crate::leadership::acquire) enum Note<E> {
    /// The bound capped a wait: the holder's `deadline` lay beyond one
    /// lease from when its lease was seen; the turn is at `capped`.
    Capped { deadline: i64, capped: i64 },
    /// An open transaction holds the partition back.
    HeldBack,
    /// The member challenges.
    Challenging,
    /// The first lease was fenced (`why`): `token` lost to a newer epoch.
    /// `epoch` is let go once this is reported.
    LostChallenge {
        token: FencingToken,
        why: Error,
        epoch: E,
    },
}

/// A won challenge: the epoch, the token its first lease carries, that
/// lease, when (monotonic ms) it was sent, and the members passed over.
pub(in crate::leadership::acquire) struct Elected<E> {
    pub(in crate::leadership::acquire) epoch: E,
    pub(in crate::leadership::acquire) token: FencingToken,
    pub(in crate::leadership::acquire) lease: Lease,
    pub(in crate::leadership::acquire) sent: i64,
    pub(in crate::leadership::acquire) stale: Vec<String>,
}

/// Where a transition leads.
pub(in crate::leadership::acquire) enum Then<E> {
    /// Run this state's action.
    Go(State<E>),
    /// The challenge was won.
    Won(Elected<E>),
    /// The loop ends with this error.
    Fail(Error),
}

/// One transition: the notes to report, then where it leads.
pub(in crate::leadership::acquire) struct Transition<E> {
    pub(in crate::leadership::acquire) notes: Vec<Note<E>>,
    pub(in crate::leadership::acquire) then: Then<E>,
}

impl<E> Transition<E> {
    pub(super) fn go(state: State<E>) -> Self {
        Transition {
            notes: Vec::new(),
            then: Then::Go(state),
        }
    }

    pub(super) fn fail(e: Error) -> Self {
        Transition {
            notes: Vec::new(),
            then: Then::Fail(e),
        }
    }

    pub(super) fn noting(mut self, note: Note<E>) -> Self {
        self.notes.push(note);
        self
    }
}

/// What the loop remembers between states.
#[derive(Debug, Default)]
pub(in crate::leadership::acquire) struct Memory {
    /// The offsets of this process's registrations, first one first.
    pub(in crate::leadership::acquire) own: Vec<i64>,
    /// The lease under this id the first catch-up found (token, granted_at):
    /// a previous incarnation's, not a twin's.
    pub(in crate::leadership::acquire) found: Option<(FencingToken, i64)>,
    /// The tokens this process minted.
    pub(in crate::leadership::acquire) minted: Vec<FencingToken>,
    /// The lease last seen in the follower's view (see
    /// [`bound_step`](crate::election::guards::bound_step)).
    pub(in crate::leadership::acquire) seen: Option<SeenLease>,
    /// The same for the views past an open transaction.
    pub(in crate::leadership::acquire) seen_past: Option<SeenLease>,
    /// The hold-off after a lost challenge.
    pub(in crate::leadership::acquire) lost: Option<HoldOff>,
    /// Whether the held-back partition was reported since the last check
    /// that found it not held back.
    pub(in crate::leadership::acquire) held_back_reported: bool,
}
