//! What a client has open: its pending acquires, its observers and the
//! terms it holds, so that closing the client ends them all.
//!
//! Invariants: once `closing` is set (under the lock) nothing is
//! registered any more, so whatever [`Open::shut`] drains is everything the
//! client started; a registration made before it is drained by it. The
//! lists are pruned of what already ended at each registration, so a
//! long-lived client does not grow them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::leadership::HeldRef;
use crate::observe::ObserverRef;

/// The registry of one client (see the module documentation).
pub(super) struct Open {
    state: Mutex<State>,
    /// Cancelled when the close starts: leader loops and bindings derive
    /// their stop tokens from it.
    closing: CancellationToken,
    /// True once a close finished resigning what it found.
    closed: watch::Sender<bool>,
    /// Notified whenever an acquire ends.
    acquire_ended: Notify,
    /// Cancelled when the client is abandoned ([`Open::abandon`]): what is
    /// pending ends with [`crate::error::process_crashed`].
    abandoned: CancellationToken,
}

#[derive(Default)]
struct State {
    closing: bool,
    next: u64,
    /// The cancel token and lease duration of each acquire under way, by
    /// registration id.
    acquires: HashMap<u64, (CancellationToken, Duration)>,
    /// Each observer, to close or end.
    observers: Vec<ObserverRef>,
    /// The terms won through the client.
    held: Vec<HeldRef>,
}

/// What a close has to end, taken from the registry in one step.
pub(super) struct Drained {
    /// The cancel tokens of the acquires under way.
    pub(super) acquires: Vec<CancellationToken>,
    /// The longest lease among those acquires (zero when none): a close
    /// waits at most that long for them to let go of the role.
    pub(super) acquire_lease: Duration,
    pub(super) observers: Vec<CancellationToken>,
    pub(super) held: Vec<HeldRef>,
}

/// An acquire under way, unregistered when dropped.
pub(super) struct AcquireEntry<'a> {
    open: &'a Open,
    id: u64,
}

impl Drop for AcquireEntry<'_> {
    fn drop(&mut self) {
        self.open.lock().acquires.remove(&self.id);
        self.open.acquire_ended.notify_waiters();
    }
}

impl Default for Open {
    fn default() -> Self {
        Open {
            state: Mutex::default(),
            closing: CancellationToken::new(),
            closed: watch::channel(false).0,
            acquire_ended: Notify::new(),
            abandoned: CancellationToken::new(),
        }
    }
}

impl Open {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The error of every operation refused because the client is closed.
    pub(super) fn closed_error() -> Error {
        Error::InvalidArgument("the client is closed".into())
    }

    /// The error of an operation refused once closing: the closed error,
    /// naming the crash for an abandoned client.
    fn refused(&self) -> Error {
        if self.abandoned.is_cancelled() {
            crate::error::process_crashed()
        } else {
            Self::closed_error()
        }
    }

    /// `Err` (the closed error) once a close started.
    pub(super) fn check(&self) -> Result<()> {
        if self.lock().closing {
            return Err(self.refused());
        }
        Ok(())
    }

    /// A token cancelled when the client is abandoned.
    pub(super) fn abandoned(&self) -> &CancellationToken {
        &self.abandoned
    }

    /// True once a close started (or the client was abandoned).
    pub(super) fn is_closing(&self) -> bool {
        self.lock().closing
    }

    /// A token cancelled when the close starts.
    pub(super) fn closing(&self) -> &CancellationToken {
        &self.closing
    }

    /// Registers an acquire (of a lease of `lease`) whose waiting `cancel`
    /// stops; refused once a close started.
    pub(super) fn acquire(
        &self,
        cancel: CancellationToken,
        lease: Duration,
    ) -> Result<AcquireEntry<'_>> {
        let mut state = self.lock();
        if state.closing {
            return Err(self.refused());
        }
        state.next += 1;
        let id = state.next;
        state.acquires.insert(id, (cancel, lease));
        Ok(AcquireEntry { open: self, id })
    }

    /// Registers a term won through the client. `Err` when a close started
    /// meanwhile: the caller resigns the term itself.
    pub(super) fn hold(&self, held: HeldRef) -> Result<()> {
        let mut state = self.lock();
        if state.closing {
            return Err(self.refused());
        }
        state.held.retain(HeldRef::is_live);
        state.held.push(held);
        Ok(())
    }

    /// Registers an observer; closes it at once when a close started
    /// meanwhile.
    pub(super) fn observe(&self, observer: ObserverRef) -> Result<()> {
        let mut state = self.lock();
        if state.closing {
            observer.close();
            return Err(self.refused());
        }
        state.observers.retain(ObserverRef::is_live);
        state.observers.push(observer);
        Ok(())
    }

    /// Starts the close: refuses every later registration, fires
    /// [`Open::closing`], and returns what was registered, or `None` when a
    /// close had already started.
    pub(super) fn shut(&self) -> Option<Drained> {
        let drained = {
            let mut state = self.lock();
            if state.closing {
                return None;
            }
            state.closing = true;
            Drained {
                acquires: state.acquires.values().map(|(c, _)| c.clone()).collect(),
                acquire_lease: (state.acquires.values().map(|(_, d)| *d))
                    .max()
                    .unwrap_or_default(),
                observers: (state.observers.drain(..)).map(|o| o.closer()).collect(),
                held: std::mem::take(&mut state.held),
            }
        };
        self.closing.cancel();
        Some(drained)
    }

    /// Waits until no acquire is under way.
    pub(super) async fn acquires_ended(&self) {
        loop {
            let ended = self.acquire_ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.lock().acquires.is_empty() {
                return;
            }
            ended.await;
        }
    }

    /// Closes without sending anything, for a client whose process is gone
    /// (a crashed test-kit process), where nothing answers and a close
    /// would wait for ever: every later registration is refused and
    /// [`Open::wait_closed`] returns at once; what is pending ends with
    /// [`crate::error::process_crashed`] (the acquires under way through
    /// [`Open::abandoned`], the observers' next view), and each term held
    /// ends with it too, locally: not resigned, no event, so the cluster
    /// sees exactly what a killed process leaves (its lease runs out).
    pub(super) fn abandon(&self) {
        let (observers, held) = {
            let mut state = self.lock();
            state.closing = true;
            (
                std::mem::take(&mut state.observers),
                std::mem::take(&mut state.held),
            )
        };
        self.abandoned.cancel();
        for term in held {
            term.abandon();
        }
        for observer in observers {
            observer.fail(crate::error::process_crashed());
        }
        self.finished();
    }

    /// Marks the close finished, waking every [`Open::wait_closed`].
    pub(super) fn finished(&self) {
        self.closed.send_replace(true);
    }

    /// Waits until the close that started has finished.
    pub(super) async fn wait_closed(&self) {
        let mut rx = self.closed.subscribe();
        let _ = rx.wait_for(|done| *done).await;
    }
}
