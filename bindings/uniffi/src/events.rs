//! The event stream of a held leadership ([`krabka_coordination_bindings::events`]):
//! what the member does (renewed, renewal failing, fenced, resigned, ...),
//! as flat records, ending with the term; and [`AcquireEvents`], the events
//! of an acquire from the member's registration on (`waiting` names the
//! holder it waits behind), then of the term it wins.

use std::sync::Arc;

use krabka_coordination::leadership::Leadership as CoreLeadership;
use krabka_coordination_bindings::{AcquireEventStream, AcquireFeed, EventView, ProcessBound};

use crate::codec::FencingToken;
use crate::error::KrabkaError;
use crate::runtime::runtime;

/// One event of a member: every field any kind has, `null`/`nil` where
/// this kind has none.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct LeadershipEvent {
    /// The kind's stable name: `registered`, `waiting`, `held_back`,
    /// `challenging`, `lost_challenge`, `elected`, `renewed`,
    /// `renewal_failing`, `write_resolved`, `fenced`, `lease_expired`,
    /// `ended`, `resigned`, `deregistered`, `retrying`.
    pub kind: String,
    /// The role.
    pub role: String,
    /// The member.
    pub member: String,
    /// When it happened, in epoch milliseconds.
    pub at: i64,
    /// `registered`: the partition of the state topic.
    pub partition: Option<i32>,
    /// `registered`: the offset of the registration.
    pub offset: Option<i64>,
    /// `waiting`: the member's rank among the challengers.
    pub rank: Option<i64>,
    /// `waiting`: when it challenges, in epoch milliseconds.
    pub challenge_at: Option<i64>,
    /// `elected`, `lost_challenge`: the member's token; `waiting` behind a
    /// lease: the holder's token.
    pub token: Option<FencingToken>,
    /// `waiting` behind a lease: the member that holds it.
    pub holder: Option<String>,
    /// `elected`: when the lease was granted (epoch milliseconds).
    pub granted_at: Option<i64>,
    /// `elected`, `renewed`: the lease deadline (epoch milliseconds).
    pub deadline: Option<i64>,
    /// `renewal_failing`: how many renewals in a row failed.
    pub failures: Option<i32>,
    /// The error of `renewal_failing`, `fenced`, `ended`, `retrying`.
    pub error: Option<KrabkaError>,
    /// `resigned`: whether the lease record was cleared.
    pub cleared: Option<bool>,
    /// `retrying`: what was being done.
    pub what: Option<String>,
    /// `retrying`: how many times in a row it failed.
    pub attempt: Option<i32>,
    /// `retrying`: the pause before the next try, in seconds.
    pub retry_in: Option<f64>,
    /// `write_resolved`: true when the earlier write whose outcome was
    /// unknown committed (its records are visible), false when it did not.
    /// The last field, so the fields before it keep their places.
    pub committed: Option<bool>,
}

impl From<EventView> for LeadershipEvent {
    fn from(v: EventView) -> Self {
        LeadershipEvent {
            kind: v.kind.to_owned(),
            role: v.role.to_string(),
            member: v.member.to_string(),
            at: v.at,
            partition: v.partition,
            offset: v.offset,
            rank: v.rank.map(|r| i64::try_from(r).unwrap_or(i64::MAX)),
            challenge_at: v.challenge_at,
            token: v.token.map(Into::into),
            holder: v.holder.map(|h| h.to_string()),
            granted_at: v.granted_at,
            deadline: v.deadline,
            failures: v.failures.map(saturating_i32),
            error: v.error.as_deref().map(KrabkaError::from),
            cleared: v.cleared,
            what: v.what.map(|w| w.to_string()),
            attempt: v.attempt.map(saturating_i32),
            retry_in: v.retry_in.map(|d| d.as_secs_f64()),
            committed: v.committed,
        }
    }
}

/// A count as a signed 32-bit number (saturating): the bindings' counts are
/// signed, as Java has no unsigned types (Kotlin's `UInt` reaches Java
/// under a mangled name).
pub(crate) fn saturating_i32(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

type Shared = Arc<tokio::sync::Mutex<krabka_coordination_bindings::EventStream>>;

/// The events of one held leadership from its subscription on; `next`
/// returns `null`/`nil` once the term ended and its last events were
/// delivered.
#[derive(uniffi::Object)]
pub struct EventStream {
    stream: ProcessBound<Shared>,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream").finish_non_exhaustive()
    }
}

impl EventStream {
    /// Subscribes to `leadership` from now on.
    pub(crate) fn subscribe(leadership: &Arc<CoreLeadership>) -> Result<EventStream, KrabkaError> {
        let handle = runtime()?.handle().clone();
        let stream = {
            let _entered = handle.enter();
            krabka_coordination_bindings::EventStream::subscribe(leadership)
        };
        Ok(EventStream {
            stream: ProcessBound::new(
                "event stream",
                Arc::new(tokio::sync::Mutex::new(stream)),
                Some(handle),
            ),
        })
    }
}

#[uniffi::export]
impl EventStream {
    /// The next event, or nothing once the term ended and its last events
    /// were delivered. Cancelling the caller loses no event.
    pub async fn next(&self) -> Result<Option<LeadershipEvent>, KrabkaError> {
        // Polled here, not spawned (as `Observer::next`): the shared stream
        // waits only on tokio's channels and locks, which any executor may
        // poll, and dropping it (a cancelled coroutine) loses no event; a
        // spawned read would take the next event and lose it.
        let stream = Arc::clone(self.stream.get()?);
        let event = stream.lock().await.next().await;
        Ok(event.map(|e| EventView::from(&e).into()))
    }
}

/// The events of one acquire, from the member's registration on: while it
/// acquires (`registered`, `waiting` with the holder, `challenging`, ...),
/// then, once it won, the term's, ending with the term; after a failed
/// acquire, ending with the acquire's last event. Make one, pass it to one
/// `acquire(..., events = it)` and read `next()` alongside (another
/// coroutine or task).
#[derive(uniffi::Object)]
pub struct AcquireEvents {
    feed: ProcessBound<Arc<tokio::sync::Mutex<AcquireEventStream>>>,
    senders: std::sync::Mutex<Option<AcquireFeed>>,
}

impl std::fmt::Debug for AcquireEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcquireEvents").finish_non_exhaustive()
    }
}

impl AcquireEvents {
    /// The senders, for the one acquire that uses this stream (`None` once
    /// taken).
    pub(crate) fn take(&self) -> Option<AcquireFeed> {
        self.senders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}

#[uniffi::export]
impl AcquireEvents {
    /// A stream for one acquire.
    #[uniffi::constructor]
    pub fn new() -> Result<Arc<Self>, KrabkaError> {
        let (feed, stream) = AcquireEventStream::channel();
        let handle = runtime()?.handle().clone();
        Ok(Arc::new(AcquireEvents {
            feed: ProcessBound::new(
                "event stream",
                Arc::new(tokio::sync::Mutex::new(stream)),
                Some(handle),
            ),
            senders: std::sync::Mutex::new(Some(feed)),
        }))
    }

    /// The next event, or nothing once the acquire failed, or the term it
    /// won ended, and the last events were delivered. Cancelling the caller
    /// loses no event.
    pub async fn next(&self) -> Result<Option<LeadershipEvent>, KrabkaError> {
        // Polled in place, like `EventStream::next`.
        let feed = Arc::clone(self.feed.get()?);
        let event = feed.lock().await.next().await;
        Ok(event.map(|e| EventView::from(&e).into()))
    }
}
