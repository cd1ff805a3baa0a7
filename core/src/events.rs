//! The leadership event stream: what a member does, as typed events.
//!
//! Every step a member takes (registered, waiting, challenging, elected,
//! renewed, fenced, ...) is delivered as an [`Event`] to each subscriber, in
//! the order the member took the steps. Programs (the member process, the
//! demo, the benchmark, the end-to-end tests, every binding) read these
//! events, never the text of log lines; `tracing` stays for diagnostics.
//!
//! Subscribe before acquiring, to see the steps of the acquire too:
//!
//! ```no_run
//! # async fn f(client: krabka_coordination::client::Client) -> krabka_coordination::Result<()> {
//! use krabka_coordination::events::{self, EventKind};
//! use krabka_coordination::leadership::LeadershipOptions;
//! let (tx, mut rx) = events::channel();
//! let leadership = client
//!     .acquire("billing", "host-a", LeadershipOptions::default().with_events(tx))
//!     .await?;
//! while let Some(event) = rx.recv().await {
//!     if let EventKind::Fenced { .. } = event.kind { break; }
//! }
//! # drop(leadership); Ok(()) }
//! ```
//!
//! or subscribe to a held [`crate::leadership::Leadership`] with
//! [`crate::leadership::Leadership::subscribe`]. Channels are unbounded: a
//! member emits a handful of events per renewal interval, and a subscriber
//! that stops reading is dropped from the list once its receiver is gone.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::error::Error;
use crate::token::FencingToken;

/// One step of a member of a role.
#[derive(Debug, Clone)]
pub struct Event {
    /// The role.
    pub role: Arc<str>,
    /// The member id.
    pub member: Arc<str>,
    /// The member's clock (epoch milliseconds) when the step was taken.
    pub at: i64,
    /// What happened.
    pub kind: EventKind,
}

/// What happened to a member.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum EventKind {
    /// The member's registration record was appended; its offset is the
    /// member's rank order.
    Registered {
        /// The partition of the state topic that holds the role.
        partition: i32,
        /// The offset of the registration record.
        offset: i64,
    },
    /// The member waits for its turn (emitted when the rank, the challenge
    /// time or the holder changes).
    Waiting {
        /// The member's place among the challengers (0 challenges first).
        rank: usize,
        /// When the member challenges if nothing changes (epoch ms).
        challenge_at: i64,
        /// The member the role's lease names, if there is a lease (it may
        /// have lapsed: `challenge_at` is then its deadline plus the stagger).
        holder: Option<Arc<str>>,
        /// The token of that lease.
        holder_token: Option<FencingToken>,
    },
    /// The member's turn came, but an open transaction holds the partition's
    /// last stable offset back (renewals may be hidden behind it): it reads
    /// past it and decides from that, unless a record of its own role is in
    /// an open transaction, which it waits for (reported once per stall).
    HeldBack,
    /// The member's turn came: it mints the epoch.
    Challenging,
    /// Another member minted a newer epoch first; back to waiting.
    LostChallenge {
        /// The token this member minted, which lost.
        token: FencingToken,
    },
    /// The member leads: its first lease committed.
    Elected {
        /// The token of the term.
        token: FencingToken,
        /// When the lease was granted (epoch ms).
        granted_at: i64,
        /// The lease deadline written in the record (epoch ms).
        deadline: i64,
    },
    /// A renewal committed.
    Renewed {
        /// The new lease deadline (epoch ms).
        deadline: i64,
    },
    /// A renewal failed with a transient error and will be retried.
    RenewalFailing {
        /// How many renewals in a row have failed.
        failures: u32,
        /// The cause.
        error: Arc<Error>,
    },
    /// A guarded write that failed with `OUTCOME_UNKNOWN` was completed by a
    /// later write of the term (librdkafka lets only the commit go on): its
    /// records are visible (`committed`) or not.
    WriteResolved {
        /// True when the earlier write's records committed.
        committed: bool,
    },
    /// The broker fenced the member: a newer epoch took the role.
    Fenced {
        /// The broker's answer.
        error: Arc<Error>,
    },
    /// No renewal committed within the lease (on the member's monotonic
    /// clock): the term ended, a standby may have taken over.
    LeaseExpired,
    /// The term ended for another reason than a fence, an expired lease or a
    /// resign (a fatal error).
    Ended {
        /// Why.
        error: Arc<Error>,
    },
    /// The member resigned the role (the lease was cleared, or could not be;
    /// see `cleared`).
    Resigned {
        /// True when the lease tombstone committed (the hand-over is
        /// immediate); false when standbys wait for the deadline.
        cleared: bool,
    },
    /// The member's registration was removed (after a resign, a fence, or an
    /// abandoned acquire).
    Deregistered,
    /// A step of the member failed with a transient error (the cluster
    /// unreachable, a coordinator or partition leader moving) and is tried
    /// again after a pause. A member that loses the cluster keeps retrying
    /// and reports every try, so a standby cut off from Kafka is visible.
    /// Renewals of a held lease report [`EventKind::RenewalFailing`] instead.
    Retrying {
        /// What failed (`"registering"`, `"following the state partition"`,
        /// `"minting the epoch"`, ...).
        what: Arc<str>,
        /// How many times in a row it failed (1 at the first failure).
        attempt: u32,
        /// The pause before the next try.
        retry_in: Duration,
        /// The cause.
        error: Arc<Error>,
    },
}

impl EventKind {
    /// A short stable name (`registered`, `waiting`, `held_back`, `challenging`,
    /// `lost_challenge`, `elected`, `renewed`, `renewal_failing`, `write_resolved`, `fenced`,
    /// `lease_expired`, `ended`, `resigned`, `deregistered`, `retrying`), for
    /// JSON lines and bindings.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::Registered { .. } => "registered",
            EventKind::Waiting { .. } => "waiting",
            EventKind::HeldBack => "held_back",
            EventKind::Challenging => "challenging",
            EventKind::LostChallenge { .. } => "lost_challenge",
            EventKind::Elected { .. } => "elected",
            EventKind::Renewed { .. } => "renewed",
            EventKind::RenewalFailing { .. } => "renewal_failing",
            EventKind::WriteResolved { .. } => "write_resolved",
            EventKind::Fenced { .. } => "fenced",
            EventKind::LeaseExpired => "lease_expired",
            EventKind::Ended { .. } => "ended",
            EventKind::Resigned { .. } => "resigned",
            EventKind::Deregistered => "deregistered",
            EventKind::Retrying { .. } => "retrying",
        }
    }
}

/// The sending half a subscriber hands to
/// [`crate::leadership::LeadershipOptions::with_events`].
pub type EventSender = mpsc::UnboundedSender<Event>;
/// The receiving half of an event subscription.
pub type EventReceiver = mpsc::UnboundedReceiver<Event>;

/// A new subscription: pass the sender to the options, read the receiver.
pub fn channel() -> (EventSender, EventReceiver) {
    mpsc::unbounded_channel()
}

/// The subscribers of one member, shared by its acquire loop, renewal task
/// and handle.
#[derive(Clone, Default)]
pub(crate) struct EventSink {
    subscribers: Arc<Mutex<Vec<EventSender>>>,
}

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventSink")
            .field("subscribers", &self.lock().len())
            .finish()
    }
}

impl EventSink {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<EventSender>> {
        self.subscribers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a subscriber.
    pub(crate) fn subscribe(&self, tx: EventSender) {
        self.lock().push(tx);
    }

    /// Sends `event` to every subscriber whose receiver is still alive.
    pub(crate) fn emit(&self, event: Event) {
        let mut subs = self.lock();
        subs.retain(|tx| tx.send(event.clone()).is_ok());
    }
}
