//! [`LeaderLoop`] and [`Term`]: the shared crate's leader loop
//! (`LeadHandle`, over the core's `LeaderLoop`) for work that runs in
//! Kotlin or Swift. The hand-written Kotlin `Client.lead`
//! (bindings/uniffi/kotlin/Lead.kt) drives it: `nextTerm()`, the work in a
//! coroutine cancelled when `term.ended()` returns, then `finish(term)`,
//! until `nextTerm()` returns nothing. The rules (when to resign, how long
//! to back off) are the core's.

use std::sync::Arc;

use krabka_coordination::leadership::Term as CoreTerm;
use krabka_coordination_bindings::{LeadHandle, ProcessBound};

use crate::error::KrabkaError;
use crate::leadership::Leadership;
use crate::runtime::runtime;

/// A leader loop of one member in one role, from `client.leaderLoop(...)`
/// (see the module documentation).
#[derive(uniffi::Object)]
pub struct LeaderLoop {
    inner: ProcessBound<LeadHandle>,
}

impl std::fmt::Debug for LeaderLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderLoop").finish_non_exhaustive()
    }
}

impl LeaderLoop {
    pub(crate) fn new(handle: LeadHandle) -> Result<LeaderLoop, KrabkaError> {
        let rt = runtime()?.handle().clone();
        Ok(LeaderLoop {
            inner: ProcessBound::new("LeaderLoop", handle, Some(rt)),
        })
    }
}

impl Drop for LeaderLoop {
    /// Stops the loop (Kotlin's `close()`, Swift's last reference).
    fn drop(&mut self) {
        if let Ok(h) = self.inner.get() {
            h.end();
        }
    }
}

#[uniffi::export]
impl LeaderLoop {
    /// The next term once this member leads (after the backoff a previous
    /// term left owed), or nothing once stopped. An error the core does
    /// not retry is thrown. Cancelling the caller does not stop the loop
    /// (`stop()` does); a term won after the caller stopped waiting is
    /// finished at once (resigned), never left held.
    pub async fn next_term(&self) -> Result<Option<Arc<Term>>, KrabkaError> {
        let handle = self.inner.get()?.clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        runtime()?.spawn(async move {
            let next = handle.next_term().await;
            if let Err(Ok(Some(term))) = tx.send(next) {
                // Nobody takes it: the term ends here.
                handle.finish(term).await;
            }
        });
        let next = rx.await.map_err(|_| KrabkaError::Fatal {
            detail: "the leader loop's task ended without an answer (it panicked)".into(),
        })?;
        match next.map_err(|e| KrabkaError::from(&e))? {
            Some(term) => Ok(Some(Arc::new(Term::new(term)?))),
            None => Ok(None),
        }
    }

    /// Ends `term` once its work returned: resigns the role if still held,
    /// and owes the backoff before the next term. Runs to its end once
    /// started, even if the caller is cancelled.
    pub async fn finish(&self, term: Arc<Term>) -> Result<(), KrabkaError> {
        let finish = self.inner.get()?.finish(term.inner.get()?.clone());
        runtime()?
            .spawn(finish)
            .await
            .map_err(|_| KrabkaError::Fatal {
                detail: "finishing the term panicked".into(),
            })
    }

    /// Stops the loop: a waiting `nextTerm()` deregisters the member and
    /// returns nothing, a running term's `ended()` returns. Idempotent,
    /// from any thread.
    pub fn stop(&self) -> Result<(), KrabkaError> {
        self.inner.get()?.stop();
        Ok(())
    }

    /// True once stopped.
    pub fn is_stopped(&self) -> Result<bool, KrabkaError> {
        Ok(self.inner.get()?.is_stopped())
    }
}

/// One term of a [`LeaderLoop`]: the held leadership and the end of the
/// term.
#[derive(uniffi::Object)]
pub struct Term {
    inner: ProcessBound<CoreTerm>,
}

impl std::fmt::Debug for Term {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Term").finish_non_exhaustive()
    }
}

impl Term {
    fn new(term: CoreTerm) -> Result<Term, KrabkaError> {
        let rt = runtime()?.handle().clone();
        Ok(Term {
            inner: ProcessBound::new("Term", term, Some(rt)),
        })
    }
}

#[uniffi::export]
impl Term {
    /// The term's number in its loop, from 1.
    pub fn number(&self) -> Result<i64, KrabkaError> {
        Ok(i64::try_from(self.inner.get()?.number()).unwrap_or(i64::MAX))
    }

    /// The term's held leadership: token, guarded writes. Closing it
    /// resigns the role, ending the term.
    pub fn leadership(&self) -> Result<Arc<Leadership>, KrabkaError> {
        let l = Arc::clone(self.inner.get()?.leadership());
        Ok(Arc::new(Leadership::new(l)?))
    }

    /// Returns when the term ends (fenced, lease expired, resigned, a fatal
    /// error) or the loop is stopped: the work must return then.
    pub async fn ended(&self) -> Result<(), KrabkaError> {
        // Polled in place: a cancellation token needs no runtime, and a
        // cancelled caller leaves nothing behind.
        let ended = self.inner.get()?.ended().clone();
        ended.cancelled().await;
        Ok(())
    }

    /// True once the term ended or the loop was stopped.
    pub fn is_ended(&self) -> Result<bool, KrabkaError> {
        Ok(self.inner.get()?.ended().is_cancelled())
    }
}
