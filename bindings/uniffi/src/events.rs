//! The event stream of a held leadership ([`krabka_coordination_bindings::events`]):
//! what the member does (renewed, renewal failing, fenced, resigned, ...),
//! as flat records, ending with the term.

use std::sync::Arc;

use krabka_coordination::leadership::Leadership as CoreLeadership;
use krabka_coordination_bindings::{EventView, ProcessBound};

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
    /// `elected`, `lost_challenge`, `fenced`: a fencing token.
    pub token: Option<FencingToken>,
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
