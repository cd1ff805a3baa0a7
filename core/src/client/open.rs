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
}

#[derive(Default)]
struct State {
    closing: bool,
    next: u64,
    /// The cancel token and lease duration of each acquire under way, by
    /// registration id.
    acquires: HashMap<u64, (CancellationToken, Duration)>,
    /// The closer of each observer.
    observers: Vec<CancellationToken>,
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

    /// `Err` (the closed error) once a close started.
    pub(super) fn check(&self) -> Result<()> {
        if self.lock().closing {
            return Err(Self::closed_error());
        }
        Ok(())
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
            return Err(Self::closed_error());
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
            return Err(Self::closed_error());
        }
        state.held.retain(HeldRef::is_live);
        state.held.push(held);
        Ok(())
    }

    /// Registers an observer's closer; cancels it at once when a close
    /// started meanwhile.
    pub(super) fn observe(&self, closer: CancellationToken) -> Result<()> {
        let mut state = self.lock();
        if state.closing {
            closer.cancel();
            return Err(Self::closed_error());
        }
        state.observers.retain(|c| !c.is_cancelled());
        state.observers.push(closer);
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
                observers: std::mem::take(&mut state.observers),
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

    /// Closes without ending anything: every later registration is refused
    /// and [`Open::wait_closed`] returns at once, while what was registered
    /// is left as it is (not cancelled, not resigned). For a client whose
    /// process is gone (a crashed test-kit process), where nothing answers
    /// and a close would wait for ever.
    pub(super) fn abandon(&self) {
        {
            let mut state = self.lock();
            state.closing = true;
            state.observers.clear();
            state.held.clear();
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
