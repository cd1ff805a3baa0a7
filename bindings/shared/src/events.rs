//! The event stream of a held leadership, as every binding iterates it, and
//! a flat view of an event for bindings that expose it as one class.
//!
//! [`EventStream`] subscribes to a held [`Leadership`] and yields its
//! member's events from then on. Unlike a bare subscription, it **ends**:
//! after the term ends (fenced, resigned, a fatal error) it yields the
//! event that ended it and whatever the member emitted up to then (a
//! resign's `resigned` and `deregistered`), and then nothing. A `for` loop
//! over it therefore finishes with the role.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

use krabka_coordination::events::{self, Event, EventKind, EventReceiver};
use krabka_coordination::leadership::Leadership;
use krabka_coordination::{Error, FencingToken};

/// Where an [`EventStream`] is.
enum State {
    /// The term is on: events, or the end.
    Live,
    /// The term ended with a fence or an error whose event has not been
    /// yielded yet (it is sent right after the end is set).
    AwaitingEnd,
    /// Yielding what is left in the channel, then done.
    Draining,
    /// Done.
    Finished,
}

/// The events of one held leadership, ending with its term (see the module
/// documentation).
pub struct EventStream {
    rx: Option<EventReceiver>,
    leadership: Weak<Leadership>,
    done: Pin<Box<dyn Future<Output = ()> + Send>>,
    state: State,
    /// A `fenced` or `ended` event was yielded.
    end_seen: bool,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream").finish_non_exhaustive()
    }
}

/// True for the events that the core emits as it ends a term for any reason
/// but a resign (a resign ends it after its `resigned` and `deregistered`).
/// A new reason to end a term needs its event here.
fn ends_term(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::Fenced { .. } | EventKind::LeaseExpired | EventKind::Ended { .. }
    )
}

impl EventStream {
    /// Subscribes to `leadership` from now on. The stream of a leadership
    /// that has ended already is empty. It does not keep the leadership
    /// alive: when every handle on it is dropped, the stream ends.
    pub fn subscribe(leadership: &Arc<Leadership>) -> EventStream {
        let done = Box::pin(leadership.done());
        if leadership.err().is_some() {
            return EventStream {
                rx: None,
                leadership: Arc::downgrade(leadership),
                done,
                state: State::Finished,
                end_seen: false,
            };
        }
        // Checked before subscribing: if the term was on, the event a fence
        // or an error sends right after ending it reaches this subscription.
        let (tx, rx) = events::channel();
        leadership.subscribe(tx);
        EventStream {
            rx: Some(rx),
            leadership: Arc::downgrade(leadership),
            done,
            state: State::Live,
            end_seen: false,
        }
    }

    /// A stream over a subscription made before `leadership` existed: the
    /// receiver of the sender an acquire was given
    /// (`LeadershipOptions::with_events`), so the member's events from its
    /// registration on reach one consumer in order, with no gap and no
    /// duplicate at the moment the acquire returns. It ends with the term
    /// like [`EventStream::subscribe`]: events already in `rx` come first,
    /// including those of a term that has ended by now.
    pub fn with_receiver(leadership: &Arc<Leadership>, rx: EventReceiver) -> EventStream {
        EventStream {
            rx: Some(rx),
            leadership: Arc::downgrade(leadership),
            done: Box::pin(leadership.done()),
            state: State::Live,
            end_seen: false,
        }
    }

    /// The next event, or `None` once the term ended and its last events
    /// were yielded. Cancel-safe: dropping the future loses no event.
    pub async fn next(&mut self) -> Option<Event> {
        loop {
            let rx = self.rx.as_mut()?;
            match self.state {
                State::Finished => {
                    self.rx = None;
                    return None;
                }
                State::Draining => match rx.try_recv() {
                    Ok(event) => return Some(event),
                    Err(_) => self.state = State::Finished,
                },
                State::AwaitingEnd => match rx.recv().await {
                    Some(event) => {
                        if ends_term(&event.kind) {
                            self.end_seen = true;
                            self.state = State::Draining;
                        }
                        return Some(event);
                    }
                    None => self.state = State::Finished,
                },
                State::Live => {
                    tokio::select! {
                        biased;
                        event = rx.recv() => match event {
                            Some(event) => {
                                self.end_seen |= ends_term(&event.kind);
                                return Some(event);
                            }
                            None => self.state = State::Finished,
                        },
                        _ = &mut self.done => {
                            let reason = self.leadership.upgrade().and_then(|l| l.err());
                            self.state = match reason.as_deref() {
                                Some(Error::Resigned) | None => State::Draining,
                                Some(_) if self.end_seen => State::Draining,
                                Some(_) => State::AwaitingEnd,
                            };
                        }
                    }
                }
            }
        }
    }
}

/// An event as one flat record: every field any kind has, `None` where the
/// kind has none. For bindings that expose one event class.
#[derive(Debug, Clone)]
pub struct EventView {
    /// The stable name of the kind ([`EventKind::name`]).
    pub kind: &'static str,
    /// The role.
    pub role: Arc<str>,
    /// The member id.
    pub member: Arc<str>,
    /// The member's clock when the step was taken (epoch ms).
    pub at: i64,
    /// `registered`: the partition of the state topic.
    pub partition: Option<i32>,
    /// `registered`: the registration's offset.
    pub offset: Option<i64>,
    /// `waiting`: the member's rank among the challengers.
    pub rank: Option<usize>,
    /// `waiting`: when the member challenges if nothing changes (epoch ms).
    pub challenge_at: Option<i64>,
    /// `lost_challenge`, `elected`: the member's token; `waiting` behind a
    /// lease: the holder's token.
    pub token: Option<FencingToken>,
    /// `waiting` behind a lease: the member the lease names.
    pub holder: Option<Arc<str>>,
    /// `elected`: when the lease was granted (epoch ms).
    pub granted_at: Option<i64>,
    /// `elected`, `renewed`: the lease deadline (epoch ms).
    pub deadline: Option<i64>,
    /// `renewal_failing`: failed renewals in a row.
    pub failures: Option<u32>,
    /// `renewal_failing`, `retrying`, `fenced`, `ended`: the cause.
    pub error: Option<Arc<Error>>,
    /// `resigned`: whether the lease was cleared.
    pub cleared: Option<bool>,
    /// `retrying`: what failed (`"registering"`, `"minting the epoch"`...).
    pub what: Option<Arc<str>>,
    /// `retrying`: how many times in a row it failed.
    pub attempt: Option<u32>,
    /// `retrying`: the pause before the next try.
    pub retry_in: Option<std::time::Duration>,
}

impl EventView {
    /// The names of the fields this event's kind has, in declaration order.
    pub fn fields(&self) -> Vec<&'static str> {
        let present = [
            ("partition", self.partition.is_some()),
            ("offset", self.offset.is_some()),
            ("rank", self.rank.is_some()),
            ("challenge_at", self.challenge_at.is_some()),
            ("token", self.token.is_some()),
            ("holder", self.holder.is_some()),
            ("granted_at", self.granted_at.is_some()),
            ("deadline", self.deadline.is_some()),
            ("failures", self.failures.is_some()),
            ("what", self.what.is_some()),
            ("attempt", self.attempt.is_some()),
            ("retry_in", self.retry_in.is_some()),
            ("error", self.error.is_some()),
            ("cleared", self.cleared.is_some()),
        ];
        present
            .iter()
            .filter(|(_, p)| *p)
            .map(|(n, _)| *n)
            .collect()
    }
}

impl From<&Event> for EventView {
    fn from(e: &Event) -> Self {
        let mut v = EventView {
            kind: e.kind.name(),
            role: Arc::clone(&e.role),
            member: Arc::clone(&e.member),
            at: e.at,
            partition: None,
            offset: None,
            rank: None,
            challenge_at: None,
            token: None,
            holder: None,
            granted_at: None,
            deadline: None,
            failures: None,
            error: None,
            cleared: None,
            what: None,
            attempt: None,
            retry_in: None,
        };
        match &e.kind {
            EventKind::Registered { partition, offset } => {
                v.partition = Some(*partition);
                v.offset = Some(*offset);
            }
            EventKind::Waiting {
                rank,
                challenge_at,
                holder,
                holder_token,
            } => {
                v.rank = Some(*rank);
                v.challenge_at = Some(*challenge_at);
                v.holder = holder.clone();
                v.token = *holder_token;
            }
            EventKind::LostChallenge { token } => v.token = Some(*token),
            EventKind::Elected {
                token,
                granted_at,
                deadline,
            } => {
                v.token = Some(*token);
                v.granted_at = Some(*granted_at);
                v.deadline = Some(*deadline);
            }
            EventKind::Renewed { deadline } => v.deadline = Some(*deadline),
            EventKind::RenewalFailing { failures, error } => {
                v.failures = Some(*failures);
                v.error = Some(Arc::clone(error));
            }
            EventKind::Fenced { error } | EventKind::Ended { error } => {
                v.error = Some(Arc::clone(error))
            }
            EventKind::Resigned { cleared } => v.cleared = Some(*cleared),
            EventKind::Retrying {
                what,
                attempt,
                retry_in,
                error,
            } => {
                v.what = Some(Arc::clone(what));
                v.attempt = Some(*attempt);
                v.retry_in = Some(*retry_in);
                v.error = Some(Arc::clone(error));
            }
            // Challenging, HeldBack, LeaseExpired, Deregistered, and kinds
            // newer than this binding: the name alone.
            _ => {}
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use krabka_coordination::client::Client;
    use krabka_coordination::transport::memory::MemoryCluster;
    use krabka_coordination::transport::Coordinator;
    use krabka_coordination::SystemClock;

    const ROLE: &str = "events-role";

    async fn leader(cluster: &MemoryCluster, member: &str) -> Arc<Leadership> {
        let client = Client::from_transport(Arc::new(cluster.transport()));
        let options = client
            .leadership_options()
            .with_lease_duration(Duration::from_millis(600))
            .with_renew_interval(Duration::from_millis(50))
            .with_challenge_stagger(Duration::ZERO)
            .with_poll_wait(Duration::from_millis(20));
        Arc::new(client.acquire(ROLE, member, options).await.unwrap())
    }

    fn cluster() -> MemoryCluster {
        MemoryCluster::new(Arc::new(SystemClock))
    }

    async fn kinds_until_end(stream: &mut EventStream) -> Vec<&'static str> {
        let mut kinds = Vec::new();
        while let Some(e) = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("the stream neither yielded nor ended")
        {
            kinds.push(e.kind.name());
        }
        kinds
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_resign_ends_the_stream_after_resigned_and_deregistered() {
        let cluster = cluster();
        let l = leader(&cluster, "a").await;
        let mut stream = EventStream::subscribe(&l);
        let first = stream.next().await.unwrap();
        assert_eq!(first.kind.name(), "renewed");
        assert_eq!((&*first.role, &*first.member), (ROLE, "a"));
        let resign = {
            let l = Arc::clone(&l);
            tokio::spawn(async move { l.resign().await })
        };
        let kinds = kinds_until_end(&mut stream).await;
        resign.await.unwrap().unwrap();
        assert!(kinds.ends_with(&["resigned", "deregistered"]), "{kinds:?}");
        assert!(
            kinds[..kinds.len() - 2].iter().all(|k| *k == "renewed"),
            "{kinds:?}"
        );
        assert!(stream.next().await.is_none(), "an ended stream stays ended");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fence_ends_the_stream_with_the_fenced_event() {
        let cluster = cluster();
        let l = leader(&cluster, "a").await;
        let mut stream = EventStream::subscribe(&l);
        // Another member mints a newer epoch: the next renewal is fenced.
        let newer = cluster
            .transport()
            .acquire_epoch(ROLE, Duration::from_secs(1))
            .await
            .unwrap();
        let kinds = kinds_until_end(&mut stream).await;
        assert_eq!(kinds.last(), Some(&"fenced"), "{kinds:?}");
        assert!(l.err().is_some_and(|e| e.is_fenced()));
        drop(newer);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lease_that_runs_out_ends_the_stream_with_lease_expired() {
        let cluster = cluster();
        let l = leader(&cluster, "a").await;
        let mut stream = EventStream::subscribe(&l);
        // Every renewal fails from now on: the lease runs out.
        cluster.set_unavailable(true);
        let kinds = kinds_until_end(&mut stream).await;
        assert_eq!(kinds.last(), Some(&"lease_expired"), "{kinds:?}");
        assert!(kinds.contains(&"renewal_failing"), "{kinds:?}");
        assert_eq!(
            l.err().map(|e| e.kind()),
            Some(krabka_coordination::ErrorKind::LeaseExpired)
        );
        cluster.set_unavailable(false);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_stream_of_an_ended_leadership_is_empty_and_a_dropped_one_ends() {
        let cluster = cluster();
        let l = leader(&cluster, "a").await;
        l.resign().await.unwrap();
        let mut stream = EventStream::subscribe(&l);
        assert!(stream.next().await.is_none());

        let l = leader(&cluster, "b").await;
        let mut stream = EventStream::subscribe(&l);
        drop(l);
        // The stream did not keep the leadership: it ends.
        let kinds = kinds_until_end(&mut stream).await;
        assert!(kinds.iter().all(|k| *k == "renewed"), "{kinds:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stream_over_the_acquires_receiver_has_every_event_and_ends_with_the_term() {
        let cluster = cluster();
        let client = Client::from_transport(Arc::new(cluster.transport()));
        let (tx, rx) = events::channel();
        let options = client
            .leadership_options()
            .with_lease_duration(Duration::from_millis(600))
            .with_renew_interval(Duration::from_millis(50))
            .with_challenge_stagger(Duration::ZERO)
            .with_poll_wait(Duration::from_millis(20))
            .with_events(tx);
        let l = Arc::new(client.acquire(ROLE, "a", options).await.unwrap());
        let mut stream = EventStream::with_receiver(&l, rx);
        let resign = {
            let l = Arc::clone(&l);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(120)).await;
                l.resign().await
            })
        };
        let kinds = kinds_until_end(&mut stream).await;
        resign.await.unwrap().unwrap();
        assert_eq!(kinds.first(), Some(&"registered"), "{kinds:?}");
        assert!(kinds.contains(&"elected"), "{kinds:?}");
        assert!(kinds.ends_with(&["resigned", "deregistered"]), "{kinds:?}");
        assert!(stream.next().await.is_none());

        // A term that ended before the stream was made: its events, then the end.
        let (tx, rx) = events::channel();
        let options = client
            .leadership_options()
            .with_lease_duration(Duration::from_millis(600))
            .with_renew_interval(Duration::from_millis(50))
            .with_challenge_stagger(Duration::ZERO)
            .with_poll_wait(Duration::from_millis(20))
            .with_events(tx);
        let l = Arc::new(client.acquire(ROLE, "b", options).await.unwrap());
        l.resign().await.unwrap();
        let mut stream = EventStream::with_receiver(&l, rx);
        let kinds = kinds_until_end(&mut stream).await;
        assert_eq!(kinds.first(), Some(&"registered"), "{kinds:?}");
        assert!(kinds.ends_with(&["resigned", "deregistered"]), "{kinds:?}");
    }

    #[test]
    fn views_carry_each_kinds_fields() {
        let token = FencingToken::new(1000, 3);
        let error = Arc::new(Error::Fenced("newer".into()));
        let event = |kind| Event {
            role: "r".into(),
            member: "m".into(),
            at: 5,
            kind,
        };
        let cases: Vec<(EventKind, &str, Vec<&str>)> = vec![
            (
                EventKind::Registered {
                    partition: 2,
                    offset: 9,
                },
                "registered",
                vec!["partition", "offset"],
            ),
            (
                EventKind::Waiting {
                    rank: 1,
                    challenge_at: 7,
                    holder: None,
                    holder_token: None,
                },
                "waiting",
                vec!["rank", "challenge_at"],
            ),
            (
                EventKind::Waiting {
                    rank: 0,
                    challenge_at: 7,
                    holder: Some("host-a".into()),
                    holder_token: Some(token),
                },
                "waiting",
                vec!["rank", "challenge_at", "token", "holder"],
            ),
            (EventKind::Challenging, "challenging", vec![]),
            (
                EventKind::LostChallenge { token },
                "lost_challenge",
                vec!["token"],
            ),
            (
                EventKind::Elected {
                    token,
                    granted_at: 1,
                    deadline: 2,
                },
                "elected",
                vec!["token", "granted_at", "deadline"],
            ),
            (
                EventKind::Renewed { deadline: 3 },
                "renewed",
                vec!["deadline"],
            ),
            (
                EventKind::RenewalFailing {
                    failures: 2,
                    error: error.clone(),
                },
                "renewal_failing",
                vec!["failures", "error"],
            ),
            (
                EventKind::Fenced {
                    error: error.clone(),
                },
                "fenced",
                vec!["error"],
            ),
            (
                EventKind::Ended {
                    error: error.clone(),
                },
                "ended",
                vec!["error"],
            ),
            (
                EventKind::Resigned { cleared: true },
                "resigned",
                vec!["cleared"],
            ),
            (EventKind::Deregistered, "deregistered", vec![]),
            (EventKind::HeldBack, "held_back", vec![]),
            (
                EventKind::Retrying {
                    what: "registering".into(),
                    attempt: 3,
                    retry_in: Duration::from_millis(400),
                    error: error.clone(),
                },
                "retrying",
                vec!["what", "attempt", "retry_in", "error"],
            ),
        ];
        for (kind, name, fields) in cases {
            let v = EventView::from(&event(kind));
            assert_eq!(v.kind, name);
            assert_eq!((&*v.role, &*v.member, v.at), ("r", "m", 5));
            assert_eq!(v.fields(), fields, "{name}");
        }
        let v = EventView::from(&event(EventKind::Elected {
            token,
            granted_at: 1,
            deadline: 2,
        }));
        assert_eq!(
            (v.token, v.granted_at, v.deadline),
            (Some(token), Some(1), Some(2))
        );
    }
}
