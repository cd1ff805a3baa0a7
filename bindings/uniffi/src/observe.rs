//! Watching roles without joining them ([`krabka_coordination::observe`],
//! through the shared [`ObserverHandle`]): who leads, with which token,
//! until when, and the roster behind them, as a stream of [`RoleView`]s.
//!
//! `client.observe(roles, renewals)` opens an [`Observer`]; its `next()`
//! (Kotlin `suspend`, Swift `async`) returns the next view, or nothing once
//! the observer is stopped; an error ends it (later calls return nothing).
//! `stop()` wakes a waiting `next()` from any thread; Kotlin's `close()`
//! (and Swift's last reference) stop it too once no call is in flight, and
//! cancelling the coroutine of a `next()` loses no view. Kotlin users
//! collect `client.observeFlow(roles)` (bindings/uniffi/kotlin), which
//! stops the observer when the collection ends.

use krabka_coordination::observe::{Change as CoreChange, RoleView as CoreView};
use krabka_coordination_bindings::{ObserverHandle, ProcessBound};

use crate::codec::{Lease, RosterEntry};
use crate::error::KrabkaError;
use crate::runtime::runtime;

/// Why a [`RoleView`] was reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum Change {
    /// The first view of the role, once its partition's committed records
    /// were read.
    Initial,
    /// A lease names a leader (member and token) that the last view did not.
    Elected,
    /// The leader renewed its lease (only when observing with `renewals`).
    Renewed,
    /// A tombstone cleared the lease: the leader resigned.
    Cleared,
    /// The lease deadline passed without a renewal (on the observer's
    /// clock, with nothing of the role left unread).
    Lapsed,
    /// The roster changed; the leader did not.
    Roster,
    /// A change this binding does not name (a newer core); the view's
    /// leader, lapsed lease and roster are still what the state topic says.
    Other,
}

impl From<CoreChange> for Change {
    fn from(c: CoreChange) -> Self {
        match c {
            CoreChange::Initial => Change::Initial,
            CoreChange::Elected => Change::Elected,
            CoreChange::Renewed => Change::Renewed,
            CoreChange::Cleared => Change::Cleared,
            CoreChange::Lapsed => Change::Lapsed,
            CoreChange::Roster => Change::Roster,
            _ => Change::Other,
        }
    }
}

/// One role as an [`Observer`] read it from the state topic: a read, not a
/// fence (only the broker's fence decides whose writes count).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct RoleView {
    /// The role.
    pub role: String,
    /// The partition of the state topic that holds it.
    pub partition: i32,
    /// Why this view was reported.
    pub change: Change,
    /// The leader's lease, or nothing: no leader (never taken, cleared or
    /// lapsed).
    pub leader: Option<Lease>,
    /// The lease whose deadline passed without a renewal, while the view has
    /// no leader because of it (until the role's next lease record).
    pub lapsed: Option<Lease>,
    /// The roster in rank order (the rank is the index).
    pub roster: Vec<RosterEntry>,
    /// The offset the view was read up to (every record of the partition
    /// below it was read).
    pub position: i64,
    /// The observer's clock when the view was taken (epoch milliseconds).
    pub at: i64,
}

impl From<CoreView> for RoleView {
    fn from(v: CoreView) -> Self {
        RoleView {
            role: v.role.to_string(),
            partition: v.partition,
            change: v.change.into(),
            leader: v.leader.map(Into::into),
            lapsed: v.lapsed.map(Into::into),
            roster: v.roster.into_iter().map(Into::into).collect(),
            position: v.position,
            at: v.at,
        }
    }
}

/// A watch of one or more roles (see the module documentation). It writes
/// nothing: it never registers, takes a rank or delays an election.
#[derive(uniffi::Object)]
pub struct Observer {
    inner: ProcessBound<ObserverHandle>,
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer").finish_non_exhaustive()
    }
}

impl Observer {
    /// Wraps an open observer; it is dropped inside the runtime.
    pub(crate) fn new(handle: ObserverHandle) -> Result<Observer, KrabkaError> {
        let rt = runtime()?.handle().clone();
        Ok(Observer {
            inner: ProcessBound::new("Observer", handle, Some(rt)),
        })
    }
}

impl Drop for Observer {
    /// Stops the reads (Kotlin's `close()`, Swift's last reference).
    fn drop(&mut self) {
        if let Ok(h) = self.inner.get() {
            h.close();
        }
    }
}

#[uniffi::export]
impl Observer {
    /// The next view of any watched role, in the order each role's changes
    /// happened; nothing once stopped or ended. An error (a record that
    /// does not decode, a state topic that is missing or unreadable) ends
    /// the observer: it is thrown once, later calls return nothing. An
    /// unreachable cluster is not an error: the observer retries and
    /// reports nothing new meanwhile. Cancelling the caller loses no view.
    pub async fn next(&self) -> Result<Option<RoleView>, KrabkaError> {
        // Polled here, not spawned: the shared future only waits on tokio's
        // channels and locks (no timer, no I/O), which any executor may
        // poll, and dropping it (a cancelled coroutine) loses no view; a
        // spawned one would take the next view and lose it.
        let next = self.inner.get()?.next();
        Ok(next
            .await
            .map_err(|e| KrabkaError::from(&e))?
            .map(Into::into))
    }

    /// Stops the reads: a waiting and every later `next()` return nothing.
    /// Idempotent, from any thread.
    pub fn stop(&self) -> Result<(), KrabkaError> {
        self.inner.get()?.close();
        Ok(())
    }

    /// True once stopped (by `stop()`, an error, or `close()`).
    pub fn is_stopped(&self) -> Result<bool, KrabkaError> {
        Ok(self.inner.get()?.is_closed())
    }

    /// The roles watched, sorted, each once.
    pub fn roles(&self) -> Result<Vec<String>, KrabkaError> {
        Ok(self.inner.get()?.roles().to_vec())
    }
}
