//! The event stream of a held leadership ([`krabka_coordination_bindings::events`]):
//! what the member does (renewed, renewal failing, fenced, resigned, ...),
//! as flat records, ending with the term; and [`AcquireEvents`], the events
//! of an acquire from the member's registration on (`waiting` names the
//! holder it waits behind), then of the term it wins.

use std::sync::Arc;

use krabka_coordination::events::{self, Event, EventReceiver, EventSender};
use krabka_coordination::leadership::Leadership as CoreLeadership;
use krabka_coordination_bindings::{EventView, ProcessBound};
use tokio::sync::oneshot;

use crate::codec::FencingToken;
use crate::error::KrabkaError;
use crate::runtime::{run, runtime};

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
    pub rank: Option<u64>,
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
    pub failures: Option<u32>,
    /// The error of `renewal_failing`, `fenced`, `ended`, `retrying`.
    pub error: Option<KrabkaError>,
    /// `resigned`: whether the lease record was cleared.
    pub cleared: Option<bool>,
    /// `write_resolved`, `retrying`: what was being done.
    pub what: Option<String>,
    /// `retrying`: how many times in a row it failed.
    pub attempt: Option<u32>,
    /// `retrying`: the pause before the next try, in seconds.
    pub retry_in: Option<f64>,
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
            rank: v.rank.map(|r| r as u64),
            challenge_at: v.challenge_at,
            token: v.token.map(Into::into),
            holder: v.holder.map(|h| h.to_string()),
            granted_at: v.granted_at,
            deadline: v.deadline,
            failures: v.failures,
            error: v.error.as_deref().map(KrabkaError::from),
            cleared: v.cleared,
            what: v.what.map(|w| w.to_string()),
            attempt: v.attempt,
            retry_in: v.retry_in.map(|d| d.as_secs_f64()),
        }
    }
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
        let stream = Arc::clone(self.stream.get()?);
        let event = run(async move {
            let mut stream = stream.lock().await;
            Ok(stream.next().await)
        })
        .await?;
        Ok(event.map(|e| EventView::from(&e).into()))
    }
}

/// Where an acquire's event stream is.
enum Feed {
    /// The acquire runs: its events, until it hands over the leadership it
    /// won (`Some`) or ends without one (`None`, or the sender dropped).
    Acquiring {
        rx: EventReceiver,
        won: oneshot::Receiver<Option<Arc<CoreLeadership>>>,
    },
    /// The acquire won: the shared stream over the same subscription.
    Term(krabka_coordination_bindings::EventStream),
    /// The acquire failed: what it sent before it returned.
    Draining(EventReceiver),
    /// Done.
    Finished,
}

impl Feed {
    async fn next(&mut self) -> Option<Event> {
        loop {
            match self {
                Feed::Acquiring { rx, won } => {
                    let handed = tokio::select! {
                        biased;
                        event = rx.recv() => match event {
                            Some(e) => return Some(e),
                            None => {
                                *self = Feed::Finished;
                                continue;
                            }
                        },
                        handed = won => handed.ok().flatten(),
                    };
                    let Feed::Acquiring { rx, .. } = std::mem::replace(self, Feed::Finished) else {
                        return None;
                    };
                    *self = match handed {
                        Some(l) => Feed::Term(
                            krabka_coordination_bindings::EventStream::with_receiver(&l, rx),
                        ),
                        None => Feed::Draining(rx),
                    };
                }
                Feed::Term(stream) => match stream.next().await {
                    Some(e) => return Some(e),
                    None => *self = Feed::Finished,
                },
                Feed::Draining(rx) => match rx.try_recv() {
                    Ok(e) => return Some(e),
                    Err(_) => *self = Feed::Finished,
                },
                Feed::Finished => return None,
            }
        }
    }
}

/// The sending halves an acquire takes.
pub(crate) struct AcquireFeed {
    /// For the core's `LeadershipOptions::with_events`.
    pub(crate) events: EventSender,
    /// Sent once the acquire settled: the leadership it won, or nothing.
    pub(crate) won: oneshot::Sender<Option<Arc<CoreLeadership>>>,
}

/// The events of one acquire, from the member's registration on: while it
/// acquires (`registered`, `waiting` with the holder, `challenging`, ...),
/// then, once it won, the term's, ending with the term; after a failed
/// acquire, ending with the acquire's last event. Make one, pass it to one
/// `acquire(..., events = it)` and read `next()` alongside (another
/// coroutine or task).
#[derive(uniffi::Object)]
pub struct AcquireEvents {
    feed: ProcessBound<Arc<tokio::sync::Mutex<Feed>>>,
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
        let (tx, rx) = events::channel();
        let (won_tx, won_rx) = oneshot::channel();
        let handle = runtime()?.handle().clone();
        Ok(Arc::new(AcquireEvents {
            feed: ProcessBound::new(
                "event stream",
                Arc::new(tokio::sync::Mutex::new(Feed::Acquiring { rx, won: won_rx })),
                Some(handle),
            ),
            senders: std::sync::Mutex::new(Some(AcquireFeed {
                events: tx,
                won: won_tx,
            })),
        }))
    }

    /// The next event, or nothing once the acquire failed, or the term it
    /// won ended, and the last events were delivered. A call cancelled
    /// while it waits may take the event it was waiting for with it.
    pub async fn next(&self) -> Result<Option<LeadershipEvent>, KrabkaError> {
        let feed = Arc::clone(self.feed.get()?);
        let event = run(async move { Ok(feed.lock().await.next().await) }).await?;
        Ok(event.map(|e| EventView::from(&e).into()))
    }
}
