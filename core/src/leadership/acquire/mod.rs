//! Acquiring a role: register, follow the partition, wait for the turn the
//! election step gives, mint the epoch and write the first lease.
//!
//! * `machine`: the loop's decisions, a pure state machine whose table
//!   (state × event → action, next state) is the contract;
//! * `drive`: the loop that runs each state's action and feeds the machine;
//! * `first_lease`: the bounded write of a won epoch's first lease, and
//!   letting the epoch go when the acquire gives it up;
//! * here: the entry points, the clean-up of an abandoned acquire and the
//!   heal of passed-over registrations after a win.

use std::sync::Arc;

use tracing::Instrument;

use super::member::{Follower, Member};
use super::{Leadership, LeadershipOptions};
use crate::codec::{encode_key, Key, Lease};
use crate::error::{Error, Result};
use crate::transport::{LeaseWriter, StateRecord, Transport};

mod drive;
mod first_lease;
mod machine;

use drive::acquire_loop;

/// Deregisters a member whose acquire was abandoned (cancelled, dropped, or
/// failed) so that nothing is left half done. An epoch the candidate minted
/// is its own and goes with it.
struct AcquireGuard {
    member: Option<Arc<Member>>,
}

impl AcquireGuard {
    fn disarm(&mut self) {
        self.member = None;
    }
    async fn run(&mut self) {
        if let Some(m) = self.member.take() {
            undo(m).await;
        }
    }
}

/// Deregisters a member that left the role.
async fn undo(m: Arc<Member>) {
    if let Err(e) = m.deregister().await {
        tracing::warn!(error = %e, "could not deregister an abandoned candidate");
    }
}

impl Drop for AcquireGuard {
    fn drop(&mut self) {
        if let Some(m) = self.member.take() {
            if m.transport.is_gone() {
                // A killed process deregisters nothing; a task left waiting
                // for it would wait for ever.
                return;
            }
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                let span = m.span.clone();
                handle.spawn(undo(m).instrument(span));
            }
        }
    }
}

/// Registers `member` in `role`, waits for its turn, mints the epoch and
/// writes the first lease; returns the held [`Leadership`].
///
/// Options are validated first ([`Error::InvalidArgument`] names the values),
/// then the transport's limits, before anything is written.
/// Waiting ends with [`Error::Cancelled`] when `options.cancel` fires;
/// dropping the future cancels too. Either way the member is deregistered and
/// the epoch it minted (if any) is released, so nothing is left half done. A
/// cancel that fires in the instant the role was won resigns it before the
/// call returns `Cancelled`: a caller that gave up never holds the role.
///
/// Transient transport errors are retried with backoff; a fatal one (an
/// authorization failure, malformed state of this role) is returned.
///
/// Prefer [`crate::client::Client::acquire`], which shares one set of Kafka
/// clients between roles and refuses a second acquire of a role it holds.
pub async fn acquire_leadership(
    transport: Arc<dyn Transport>,
    role: &str,
    member: &str,
    options: LeadershipOptions,
) -> Result<Leadership> {
    acquire_with(transport, role, member, options, None).await
}

/// [`acquire_leadership`] with an object kept alive while the leadership is
/// held (the client's claim on the role).
pub(crate) async fn acquire_with(
    transport: Arc<dyn Transport>,
    role: &str,
    member: &str,
    options: LeadershipOptions,
    claim: Option<Box<dyn std::any::Any + Send + Sync>>,
) -> Result<Leadership> {
    let m = Arc::new(Member::new(transport, role, member, options)?);
    let cancel = m.options.cancel.clone();
    // Nothing is written yet: a cancel ends the check at once (it may take
    // the connect timeout when no broker answers).
    tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(Error::Cancelled),
        r = m.transport.check_member(&m.role, &m.options.election) => r?,
    }
    let mut guard = AcquireGuard {
        member: Some(Arc::clone(&m)),
    };
    let span = m.span.clone();
    let won = acquire_loop(&m, &cancel).instrument(span).await;
    match won {
        Ok(won) => {
            guard.disarm();
            // The held leadership keeps them too (a resign counts no
            // passed-over member as a successor).
            let stale = won.stale.clone();
            let leadership = Leadership::start(Arc::clone(&m), won, claim);
            // After the renewals started: a slow heal never delays them.
            if !stale.is_empty() {
                let span = m.span.clone();
                tokio::spawn(async move { heal(&m, &stale).await }.instrument(span));
            }
            if cancel.is_cancelled() {
                // The caller stopped waiting in the instant the role was won:
                // hand it over rather than hold it until the lease runs out.
                let _ = leadership.resign().await;
                return Err(Error::Cancelled);
            }
            Ok(leadership)
        }
        Err(e) => {
            guard.run().await;
            Err(e)
        }
    }
}

/// Removes the registrations of `members` (see
/// [`crate::election::guards::passed_over`]); best
/// effort, reported.
async fn heal(m: &Member, members: &[String]) {
    for other in members {
        let key = match encode_key(&Key::registration(&m.role, other)) {
            Ok(k) => k,
            Err(_) => continue,
        };
        let tombstone = StateRecord {
            partition: m.partition,
            key,
            value: None,
        };
        match m.transport.append(tombstone).await {
            Ok(_) => {
                tracing::info!(member = %other, "removed the registration of a member that did not take its turn")
            }
            Err(e) => {
                tracing::warn!(member = %other, error = %e, "could not remove a stale registration")
            }
        }
    }
}

/// A won challenge: the epoch, its first lease, and when (monotonic ms) that
/// lease was sent.
pub(super) struct Won {
    pub(super) epoch: Box<dyn LeaseWriter>,
    pub(super) lease: Lease,
    pub(super) sent: i64,
    /// Members that missed their turn: their registrations go once the
    /// renewals run (see [`crate::election::guards::passed_over`]).
    pub(super) stale: Vec<String>,
    /// The follower of the role's partition as it stood at the challenge: a
    /// resign reads on from there to learn whether a successor waits.
    pub(super) follower: Follower,
}
