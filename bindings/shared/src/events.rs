//! The event stream of a held leadership, as every binding iterates it, and
//! a flat view of an event for bindings that expose it as one class.
//!
//! [`EventStream`] subscribes to a held [`Leadership`] and yields its
//! member's events from then on. Unlike a bare subscription, it **ends**:
//! after the term ends (fenced, resigned, a fatal error) it yields the
//! event that ended it and whatever the member emitted up to then (a
//! resign's `resigned` and `deregistered`), and then nothing. A `for` loop
//! over it therefore finishes with the role.
//!
//! [`AcquireEventStream`] starts earlier, at the member's registration:
//! made before the acquire (its [`AcquireFeed`] goes to
//! [`crate::KafkaClient::acquire`]), it yields the acquire's events
//! (`registered`, `waiting` with the holder, `challenging`, ...), then,
//! once the acquire's outcome is attached, the term's, ending like an
//! [`EventStream`]; after a failed acquire it ends with the acquire's last
//! event.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

use krabka_coordination::events::{self, Event, EventKind, EventReceiver, EventSender};
use krabka_coordination::leadership::Leadership;
use krabka_coordination::{Error, FencingToken};
use tokio::sync::oneshot;

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

/// What an acquire takes so that an [`AcquireEventStream`] sees its events
/// and, once it settles, the term it won.
#[derive(Debug)]
pub struct AcquireFeed {
    /// The member's events: for the acquire's `events` argument.
    pub events: EventSender,
    /// The acquire's outcome, attached once it settles.
    pub outcome: AcquireOutcome,
}

/// Where an acquire's outcome goes: [`AcquireOutcome::won`] attaches the
/// leadership (the stream goes on with the term), [`AcquireOutcome::failed`]
/// (or dropping it) ends the stream after the acquire's own events.
#[derive(Debug)]
pub struct AcquireOutcome(oneshot::Sender<Option<Arc<Leadership>>>);

impl AcquireOutcome {
    /// The acquire won `leadership`: the stream goes on until its term ends.
    pub fn won(self, leadership: &Arc<Leadership>) {
        let _ = self.0.send(Some(Arc::clone(leadership)));
    }

    /// The acquire failed (or was cancelled, or timed out): the stream
    /// yields what it sent, then ends. Dropping the outcome does the same.
    pub fn failed(self) {
        let _ = self.0.send(None);
    }

    /// [`AcquireOutcome::won`] or [`AcquireOutcome::failed`], as `outcome`
    /// says.
    pub fn settle<E>(self, outcome: &std::result::Result<Arc<Leadership>, E>) {
        match outcome {
            Ok(l) => self.won(l),
            Err(_) => self.failed(),
        }
    }
}

/// Where an [`AcquireEventStream`] is.
enum Feed {
    /// The acquire runs: its events, until its outcome is attached.
    Acquiring {
        rx: EventReceiver,
        outcome: oneshot::Receiver<Option<Arc<Leadership>>>,
    },
    /// The acquire won: the term's stream over the same subscription.
    Term(EventStream),
    /// The acquire failed: what it sent before it returned.
    Draining(EventReceiver),
    /// Done.
    Finished,
}

/// A member's events from its registration to the end of its term (see
/// the module documentation): make it with [`AcquireEventStream::channel`],
/// give the [`AcquireFeed`]'s `events` to the acquire and settle its
/// `outcome` when the acquire returns, while a consumer reads
/// [`AcquireEventStream::next`] alongside.
pub struct AcquireEventStream {
    feed: Feed,
}

impl std::fmt::Debug for AcquireEventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.feed {
            Feed::Acquiring { .. } => "acquiring",
            Feed::Term(_) => "term",
            Feed::Draining(_) => "draining",
            Feed::Finished => "finished",
        };
        f.debug_struct("AcquireEventStream")
            .field("state", &state)
            .finish()
    }
}

impl AcquireEventStream {
    /// A stream and the feed of the one acquire it follows.
    pub fn channel() -> (AcquireFeed, AcquireEventStream) {
        let (tx, rx) = events::channel();
        let (outcome_tx, outcome_rx) = oneshot::channel();
        (
            AcquireFeed {
                events: tx,
                outcome: AcquireOutcome(outcome_tx),
            },
            AcquireEventStream {
                feed: Feed::Acquiring {
                    rx,
                    outcome: outcome_rx,
                },
            },
        )
    }

    /// The next event, or `None` once the acquire failed, or the term it
    /// won ended, and the last events were yielded. Cancel-safe: dropping
    /// the future loses no event. It waits only on tokio's channels (no
    /// timer, no I/O), so any executor may poll it.
    pub async fn next(&mut self) -> Option<Event> {
        loop {
            match &mut self.feed {
                Feed::Acquiring { rx, outcome } => {
                    let settled = tokio::select! {
                        biased;
                        event = rx.recv() => match event {
                            Some(e) => return Some(e),
                            // Every sender dropped: nothing more can come.
                            None => None,
                        },
                        o = outcome => Some(o.ok().flatten()),
                    };
                    let Feed::Acquiring { rx, .. } =
                        std::mem::replace(&mut self.feed, Feed::Finished)
                    else {
                        unreachable!("matched above")
                    };
                    self.feed = match settled {
                        None => Feed::Finished,
                        Some(Some(l)) => Feed::Term(EventStream::with_receiver(&l, rx)),
                        // The acquire sent all its events before it settled.
                        Some(None) => Feed::Draining(rx),
                    };
                }
                Feed::Term(stream) => match stream.next().await {
                    Some(e) => return Some(e),
                    None => self.feed = Feed::Finished,
                },
                Feed::Draining(rx) => match rx.try_recv() {
                    Ok(e) => return Some(e),
                    Err(_) => self.feed = Feed::Finished,
                },
                Feed::Finished => return None,
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
    /// `write_resolved`: whether the earlier write whose outcome was
    /// unknown committed.
    pub committed: Option<bool>,
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
            ("committed", self.committed.is_some()),
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
            committed: None,
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
            EventKind::WriteResolved { committed } => v.committed = Some(*committed),
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

    fn quick_options(client: &Client) -> krabka_coordination::leadership::LeadershipOptions {
        client
            .leadership_options()
            .with_lease_duration(Duration::from_millis(600))
            .with_renew_interval(Duration::from_millis(50))
            .with_challenge_stagger(Duration::ZERO)
            .with_poll_wait(Duration::from_millis(20))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_acquire_stream_runs_from_registration_to_the_end_of_the_term() {
        let cluster = cluster();
        let client = Client::from_transport(Arc::new(cluster.transport()));
        let (feed, mut stream) = AcquireEventStream::channel();
        // The consumer reads while the acquire runs.
        let reader = tokio::spawn(async move {
            let kinds = kinds_until_end_acquire(&mut stream).await;
            (kinds, stream.next().await.is_none())
        });
        let won = client
            .acquire(ROLE, "a", quick_options(&client).with_events(feed.events))
            .await
            .map(Arc::new);
        feed.outcome.settle(&won);
        let l = won.unwrap();
        tokio::time::sleep(Duration::from_millis(120)).await;
        l.resign().await.unwrap();
        let (kinds, ended) = reader.await.unwrap();
        assert_eq!(kinds.first(), Some(&"registered"), "{kinds:?}");
        let elected = kinds.iter().position(|k| *k == "elected").expect("elected");
        assert!(kinds[..elected].contains(&"challenging"), "{kinds:?}");
        assert!(kinds[elected + 1..].contains(&"renewed"), "{kinds:?}");
        assert!(kinds.ends_with(&["resigned", "deregistered"]), "{kinds:?}");
        assert!(ended, "an ended stream stays ended");
    }

    async fn kinds_until_end_acquire(stream: &mut AcquireEventStream) -> Vec<&'static str> {
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
    async fn a_failed_acquire_ends_its_stream_after_its_own_events() {
        let cluster = cluster();
        let holder = leader(&cluster, "a").await;
        let client = Client::from_transport(Arc::new(cluster.transport()));
        let (feed, mut stream) = AcquireEventStream::channel();
        let cancel = tokio_util::sync::CancellationToken::new();
        let options = quick_options(&client)
            .with_events(feed.events)
            .with_cancel(cancel.clone());
        let acquire = tokio::spawn(async move { client.acquire(ROLE, "b", options).await });
        // b waits behind a's lease, and its stream says so.
        let mut seen = Vec::new();
        loop {
            let e = tokio::time::timeout(Duration::from_secs(10), stream.next())
                .await
                .expect("b's events")
                .expect("b's stream goes on while it waits");
            seen.push(e.kind.name());
            if let EventKind::Waiting {
                holder: Some(h), ..
            } = &e.kind
            {
                assert_eq!(&**h, "a");
                break;
            }
        }
        assert_eq!(seen.first(), Some(&"registered"), "{seen:?}");
        cancel.cancel();
        let won = acquire.await.unwrap().map(Arc::new);
        assert!(matches!(won, Err(Error::Cancelled)), "{won:?}");
        feed.outcome.settle(&won);
        let kinds = kinds_until_end_acquire(&mut stream).await;
        assert_eq!(kinds.last(), Some(&"deregistered"), "{kinds:?}");
        assert!(stream.next().await.is_none());
        assert!(holder.is_held(), "a's term goes on");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_next_loses_no_event_before_or_after_the_win() {
        let cluster = cluster();
        let client = Client::from_transport(Arc::new(cluster.transport()));
        let (feed, mut stream) = AcquireEventStream::channel();
        // Nothing comes yet: a waiting next is dropped.
        assert!(
            tokio::time::timeout(Duration::from_millis(50), stream.next())
                .await
                .is_err()
        );
        // A lease of 30 s renewed every 10 s: no renewal within the test.
        let options = client
            .leadership_options()
            .with_lease_duration(Duration::from_secs(30))
            .with_renew_interval(Duration::from_secs(10))
            .with_challenge_stagger(Duration::ZERO)
            .with_poll_wait(Duration::from_millis(20))
            .with_events(feed.events);
        let won = client.acquire(ROLE, "a", options).await.map(Arc::new);
        feed.outcome.settle(&won);
        let l = won.unwrap();
        let mut kinds = Vec::new();
        loop {
            match tokio::time::timeout(Duration::from_millis(300), stream.next()).await {
                Ok(Some(e)) => kinds.push(e.kind.name()),
                Ok(None) => panic!("the term is on: {kinds:?}"),
                // A waiting next dropped, with the term on and nothing new.
                Err(_) => break,
            }
        }
        assert_eq!(kinds.first(), Some(&"registered"), "{kinds:?}");
        assert_eq!(kinds.last(), Some(&"elected"), "{kinds:?}");
        l.resign().await.unwrap();
        let kinds = kinds_until_end_acquire(&mut stream).await;
        assert_eq!(kinds, ["resigned", "deregistered"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_outcome_dropped_or_attached_late_still_ends_the_stream() {
        // Dropped unsettled (the acquire's task died): its events, then the end.
        let cluster = cluster();
        let client = Client::from_transport(Arc::new(cluster.transport()));
        let (feed, mut stream) = AcquireEventStream::channel();
        let l = Arc::new(
            client
                .acquire(ROLE, "a", quick_options(&client).with_events(feed.events))
                .await
                .unwrap(),
        );
        drop(feed.outcome);
        let kinds = kinds_until_end_acquire(&mut stream).await;
        assert_eq!(kinds.first(), Some(&"registered"), "{kinds:?}");
        assert!(kinds.contains(&"elected"), "{kinds:?}");
        assert!(l.is_held(), "the stream ends, the term does not");

        // Attached once the term had ended: every event, then the end.
        l.resign().await.unwrap();
        let (feed, mut stream) = AcquireEventStream::channel();
        let l = Arc::new(
            client
                .acquire(ROLE, "b", quick_options(&client).with_events(feed.events))
                .await
                .unwrap(),
        );
        l.resign().await.unwrap();
        feed.outcome.won(&l);
        let kinds = kinds_until_end_acquire(&mut stream).await;
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
            (
                EventKind::WriteResolved { committed: false },
                "write_resolved",
                vec!["committed"],
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
