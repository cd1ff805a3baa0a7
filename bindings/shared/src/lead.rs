//! The core's leader loop ([`krabka_coordination::leadership::LeaderLoop`])
//! for a binding whose work runs in the host language: the binding calls
//! [`LeadHandle::next_term`], runs the user's work with the term's
//! leadership and a signal of [`Term::ended`], then [`LeadHandle::finish`],
//! until `next_term` yields `None`. The rules (when to resign, how long to
//! back off) stay in the core.

use std::future::Future;
use std::sync::Arc;

use krabka_coordination::events::{self, Event, EventReceiver};
use krabka_coordination::leadership::{LeaderLoop, Term};
use krabka_coordination::Result;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::client::KafkaClient;
use crate::options::LeadershipArgs;

/// A leader loop a binding drives (see the module documentation).
#[derive(Clone)]
pub struct LeadHandle {
    inner: Arc<Mutex<LeaderLoop>>,
    cancel: CancellationToken,
    /// Fired by [`LeadHandle::end`]: the binding's loop is over.
    over: CancellationToken,
}

impl std::fmt::Debug for LeadHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeadHandle")
            .field("stopped", &self.cancel.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl LeadHandle {
    /// The next term once this member leads (after the backoff a previous
    /// term left owed), or `None` once stopped.
    pub fn next_term(&self) -> impl Future<Output = Result<Option<Term>>> + Send + 'static {
        let inner = Arc::clone(&self.inner);
        async move { inner.lock().await.next_term().await }
    }

    /// Ends `term` after its work returned: resigns a role still held and
    /// owes the backoff before the next term.
    pub fn finish(&self, term: Term) -> impl Future<Output = ()> + Send + 'static {
        let inner = Arc::clone(&self.inner);
        async move { inner.lock().await.finish(term).await }
    }

    /// Stops the loop: a waiting `next_term` deregisters and yields `None`,
    /// a running term's `ended` fires. Idempotent, from any thread.
    pub fn stop(&self) {
        self.cancel.cancel();
    }

    /// True once stopped.
    pub fn is_stopped(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// The binding's loop is over (`next_term` yielded `None` or an error,
    /// or a work failed and its term was finished): stops the loop, and its
    /// [`LoopEventStream`] ends after the events sent so far (every event
    /// of a finished term and of a stopped acquire is sent by then).
    pub fn end(&self) {
        self.cancel.cancel();
        self.over.cancel();
    }
}

/// The member's events of every term of a leader loop, in order, ending
/// once the loop's [`LeadHandle::end`] was called and the events sent
/// until then were yielded (see [`KafkaClient::leader_loop_with_events`]).
pub struct LoopEventStream {
    rx: EventReceiver,
    over: CancellationToken,
}

impl std::fmt::Debug for LoopEventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopEventStream")
            .field("over", &self.over.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl LoopEventStream {
    /// The next event, or `None` once the loop is over and every event was
    /// yielded. Cancel-safe; it waits only on tokio's channels.
    pub async fn next(&mut self) -> Option<Event> {
        tokio::select! {
            biased;
            event = self.rx.recv() => event,
            _ = self.over.cancelled() => self.rx.try_recv().ok(),
        }
    }
}

impl KafkaClient {
    /// A leader loop of `member` in `role` with the timings of `args`,
    /// checked now (before any I/O). `events` receives the member's events
    /// of every term.
    pub fn leader_loop(
        &self,
        role: &str,
        member: &str,
        args: &LeadershipArgs,
        events: Option<krabka_coordination::events::EventSender>,
    ) -> Result<LeadHandle> {
        self.client().check_open()?;
        // Closing the client stops the loop.
        let cancel = self.client().closing().child_token();
        let mut options = args
            .apply(self.client().leadership_options())?
            .with_cancel(cancel.clone());
        if let Some(tx) = events {
            options = options.with_events(tx);
        }
        let inner = LeaderLoop::new(self.client(), role, member, options)?;
        Ok(LeadHandle {
            inner: Arc::new(Mutex::new(inner)),
            cancel,
            over: CancellationToken::new(),
        })
    }

    /// [`KafkaClient::leader_loop`] with its events as a
    /// [`LoopEventStream`], which ends once the binding calls
    /// [`LeadHandle::end`].
    pub fn leader_loop_with_events(
        &self,
        role: &str,
        member: &str,
        args: &LeadershipArgs,
    ) -> Result<(LeadHandle, LoopEventStream)> {
        let (tx, rx) = events::channel();
        let handle = self.leader_loop(role, member, args, Some(tx))?;
        let stream = LoopEventStream {
            rx,
            over: handle.over.clone(),
        };
        Ok((handle, stream))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::options::kafka_config;

    fn unreachable_client() -> KafkaClient {
        KafkaClient::new(kafka_config([("bootstrap.servers", "127.0.0.1:1")]), 4).unwrap()
    }

    #[test]
    fn arguments_are_checked_before_any_io() {
        let c = unreachable_client();
        let e = c
            .leader_loop("r\0", "m", &LeadershipArgs::default(), None)
            .unwrap_err();
        assert!(e.to_string().contains("NUL"), "{e}");
        let bad = LeadershipArgs {
            lease_duration: Some(1.0),
            renew_interval: Some(2.0),
            ..Default::default()
        };
        let e = c.leader_loop("r", "m", &bad, None).unwrap_err();
        assert_eq!(
            e.kind(),
            krabka_coordination::ErrorKind::InvalidArgument,
            "{e}"
        );
    }

    #[tokio::test]
    async fn stop_ends_a_waiting_next_term() {
        // Nothing answers at 127.0.0.1:1: the acquire waits (the member is
        // checked against a cluster that never answers) until stopped.
        let l = unreachable_client()
            .leader_loop("r", "m", &LeadershipArgs::default(), None)
            .unwrap();
        let waiting = tokio::spawn(l.next_term());
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!waiting.is_finished());
        l.stop();
        let r = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("stop ends the wait")
            .unwrap();
        assert!(r.unwrap().is_none());
        assert!(l.is_stopped());
    }

    #[tokio::test]
    async fn closing_the_client_ends_a_waiting_next_term_and_refuses_later_use() {
        let c = unreachable_client();
        let l = c
            .leader_loop("r", "m", &LeadershipArgs::default(), None)
            .unwrap();
        let waiting = tokio::spawn(l.next_term());
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!waiting.is_finished());
        tokio::time::timeout(Duration::from_secs(5), c.close())
            .await
            .expect("the close ends the acquire at once");
        let r = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the close ends the wait")
            .unwrap();
        assert!(r.unwrap().is_none());
        assert!(l.is_stopped() && c.is_closed());
        let e = c
            .leader_loop("r", "m", &LeadershipArgs::default(), None)
            .unwrap_err();
        assert!(e.to_string().contains("the client is closed"), "{e}");
        let e = c.check_state_topic().await.unwrap_err();
        assert!(e.to_string().contains("the client is closed"), "{e}");
        c.close().await;
    }

    #[tokio::test]
    async fn the_loop_event_stream_yields_what_was_sent_then_ends_with_end() {
        let (l, mut stream) = unreachable_client()
            .leader_loop_with_events("r", "m", &LeadershipArgs::default())
            .unwrap();
        // Nothing yet, and not over: a read waits (and dropping it is safe).
        assert!(
            tokio::time::timeout(Duration::from_millis(100), stream.next())
                .await
                .is_err()
        );
        // The loop's sender is the acquire's; a stand-in event through a
        // clone of the subscription the stream reads.
        let (tx, rx) = events::channel();
        let mut stream = LoopEventStream {
            rx,
            over: stream.over.clone(),
        };
        let event = |kind| Event {
            role: "r".into(),
            member: "m".into(),
            at: 1,
            kind,
        };
        tx.send(event(krabka_coordination::events::EventKind::Challenging))
            .unwrap();
        tx.send(event(krabka_coordination::events::EventKind::Deregistered))
            .unwrap();
        l.end();
        assert!(l.is_stopped());
        let kinds: Vec<_> = [
            stream.next().await,
            stream.next().await,
            stream.next().await,
        ]
        .into_iter()
        .map(|e| e.map(|e| e.kind.name()))
        .collect();
        assert_eq!(kinds, [Some("challenging"), Some("deregistered"), None]);
    }
}
