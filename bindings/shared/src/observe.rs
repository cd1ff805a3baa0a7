//! The core's observer ([`krabka_coordination::observe`]) as every binding
//! holds it: a handle whose `next` is a `'static` future, so a host can
//! await it as a promise or block on it, and which any thread may close.

use std::future::Future;
use std::sync::Arc;

use krabka_coordination::observe::{ObserveOptions, Observer, RoleView};
use krabka_coordination::Result;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::client::KafkaClient;

/// A watch of one or more roles (see [`KafkaClient::observe`]).
#[derive(Clone)]
pub struct ObserverHandle {
    observer: Arc<Mutex<Observer>>,
    closer: CancellationToken,
    roles: Arc<[String]>,
}

impl std::fmt::Debug for ObserverHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObserverHandle")
            .field("roles", &self.roles)
            .field("closed", &self.closer.is_cancelled())
            .finish()
    }
}

impl ObserverHandle {
    /// The next view, `Ok(None)` once closed or ended (an error ends it:
    /// later calls return `Ok(None)`). Calls from several threads take
    /// turns; each view goes to one of them. Cancel-safe: dropping the
    /// future loses no view. [`ObserverHandle::close`] wakes a waiting call
    /// with `Ok(None)`.
    pub fn next(&self) -> impl Future<Output = Result<Option<RoleView>>> + Send + 'static {
        let (observer, closer) = (Arc::clone(&self.observer), self.closer.clone());
        async move {
            tokio::select! {
                biased;
                _ = closer.cancelled() => Ok(None),
                mut o = observer.lock() => o.next().await,
            }
        }
    }

    /// Stops the reads; every waiting and later [`ObserverHandle::next`]
    /// returns `Ok(None)`. Idempotent, from any thread.
    pub fn close(&self) {
        self.closer.cancel();
    }

    /// True once closed.
    pub fn is_closed(&self) -> bool {
        self.closer.is_cancelled()
    }

    /// The roles watched, sorted, each once.
    pub fn roles(&self) -> &[String] {
        &self.roles
    }
}

impl KafkaClient {
    /// Watches `roles` without joining them, through this client's state
    /// reader; `renewals` reports each renewal too. The roles are checked
    /// when the future runs, before any read; it must run on the binding's
    /// runtime. It never waits: it is ready at its first poll (it only
    /// checks and spawns the readers), so a binding may poll it once to
    /// raise a bad role at the call (the test below holds it to that).
    pub fn observe(
        &self,
        roles: Vec<String>,
        renewals: bool,
    ) -> impl Future<Output = Result<ObserverHandle>> + Send + 'static {
        let client = self.client().clone();
        async move {
            let refs: Vec<&str> = roles.iter().map(String::as_str).collect();
            let observer = client
                .observe(&refs, ObserveOptions::default().with_renewals(renewals))
                .await?;
            Ok(ObserverHandle {
                closer: observer.closer(),
                roles: observer.roles().to_vec().into(),
                observer: Arc::new(Mutex::new(observer)),
            })
        }
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

    #[tokio::test]
    async fn close_wakes_a_waiting_next_and_later_ones() {
        // Nothing answers at 127.0.0.1:1: the observer retries, and `next`
        // waits until the handle is closed from elsewhere.
        let o = unreachable_client()
            .observe(vec!["b".into(), "a".into(), "b".into()], false)
            .await
            .unwrap();
        assert_eq!(o.roles(), ["a", "b"]);
        let waiting = tokio::spawn(o.next());
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            !waiting.is_finished(),
            "no view from an unreachable cluster"
        );
        o.clone().close();
        let woke = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("close wakes the waiting next")
            .unwrap();
        assert!(woke.unwrap().is_none());
        assert!(o.is_closed());
        assert!(o.next().await.unwrap().is_none(), "and every later one");
    }

    #[tokio::test]
    async fn the_observe_future_is_ready_at_its_first_poll() {
        use std::task::{Context, Poll};
        let c = unreachable_client();
        for roles in [vec!["a".to_string()], vec![]] {
            let mut fut = Box::pin(c.observe(roles, false));
            let waker = std::task::Waker::noop();
            let ready = fut.as_mut().poll(&mut Context::from_waker(waker));
            assert!(matches!(ready, Poll::Ready(_)), "ready at once");
        }
    }

    #[tokio::test]
    async fn roles_are_checked_before_any_read() {
        let c = unreachable_client();
        for (roles, what) in [
            (vec![], "at least one role"),
            (vec!["a\0b".to_string()], "NUL"),
        ] {
            let e = c.observe(roles, false).await.unwrap_err();
            assert_eq!(e.kind(), krabka_coordination::ErrorKind::InvalidArgument);
            assert!(e.to_string().contains(what), "{e}");
        }
    }
}
