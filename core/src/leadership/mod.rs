//! Leadership: acquire, hold, renew, resign, describe, and guarded writes.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use krabka_coordination::leadership::{acquire_leadership, LeadershipOptions};
//! # use krabka_coordination::transport::Transport;
//! # async fn run(transport: Arc<dyn Transport>, shutdown: impl std::future::Future<Output = ()>) -> krabka_coordination::Result<()> {
//! let leadership = acquire_leadership(transport, "billing-export", "host-a", LeadershipOptions::default()).await?;
//! // Do the role's work; pass guarded writes through `leadership.write(..)`.
//! tokio::select! {
//!     _ = leadership.done() => eprintln!("the role ended: {:?}", leadership.err()),
//!     // `shutdown`: ctrl-c, SIGTERM, an admin command ...
//!     _ = shutdown => leadership.resign().await?,
//! }
//! # Ok(()) }
//! ```
//!
//! # What a member does
//!
//! [`acquire_leadership`] reads the role's partition, appends a registration
//! (its offset is the member's rank: a recovered member goes to the tail),
//! then follows [`crate::election::evaluate`] step by step: it waits for its
//! turn while following the partition with a long poll (so renewals,
//! tombstones and roster changes are seen as they commit, and the steady-state
//! cost grows with new records only), and when its turn comes it mints the
//! epoch (InitProducerId) and writes the first lease through the producer that
//! the epoch binds. If another challenger minted a newer epoch in between, the
//! write is fenced, the lease never becomes visible, and the member goes back
//! to waiting.
//!
//! `acquire` returns, and the `Elected` event is delivered, once the first
//! lease has committed: the epoch is minted and the lease that tells the
//! other members is written. Not at the mint, because a mint is not yet a
//! win: two challengers can mint one after the other (one whose turn came
//! while another's first lease was in flight), and the first one's epoch is
//! superseded before it ever wrote; and the first commit can correct a token
//! that a stale coordinator answered. Announcing at the mint would take the
//! first lease's transaction off a hand-over (one commit,
//! `docs/benchmarks/leadership.md`) and announce leaders that never led.
//!
//! The returned [`Leadership`] renews the lease in the background at every
//! renew interval. The broker's fence ([`crate::Error::Fenced`]) ends it. A
//! transient failure (a broker down, a timeout) is retried with backoff and
//! reported (`renewal_failing`), because a renewal that succeeds later was
//! accepted under the same epoch, but only until the member's own lease
//! deadline: the lease duration after the send time of the last committed
//! renewal, on a monotonic clock that counts the time the machine was
//! suspended ([`crate::Clock::boot_millis`]). Past it a standby may have
//! taken over, so the term ends with [`crate::Error::LeaseExpired`]. Every
//! renewal attempt is bounded by the lease time left, and a guarded write by
//! one renew interval and never past the time kept for the next renewal
//! (see [`Leadership::write`]), so no write takes the renewals' time. A
//! member never calls
//! itself leader again without minting a newer epoch.
//!
//! Events: every step is delivered as a typed [`crate::events::Event`] to the
//! subscribers of the member ([`LeadershipOptions::with_events`],
//! [`Leadership::subscribe`]); `tracing` carries diagnostics under one
//! `member` span (role, member, partition).
//!
//! # Resign
//!
//! [`Leadership::resign`] stops renewing, clears the lease with a tombstone
//! written **through the term's own epoch**, then bumps the epoch **only if it
//! is still the term's** (InitProducerId carrying this producer id and epoch,
//! KIP-360: the coordinator refuses when a newer epoch exists), deregisters
//! and drops the producer. So:
//!
//! * a member deposed without noticing (paused, cut off, its clock behind)
//!   that resigns writes a tombstone the broker fences, and bumps nothing:
//!   it can never erase its successor's lease or mint above its epoch;
//! * a current holder's tombstone commits, and the bump supersedes the
//!   resigned token right after, so any write of the old term still in
//!   flight is fenced and [`describe_leadership`] stops reporting it; a
//!   standby that mints in between is newer still, and then the bump is
//!   refused.
//!
//! # Guarantees and non-guarantees
//!
//! See the crate documentation: the epoch is the safety, the lease is timing.

mod acquire;
mod describe;
mod held;
pub mod lead;
mod member;
mod options;

pub use acquire::acquire_leadership;
pub(crate) use acquire::acquire_with;
pub use describe::{
    describe_leadership, describe_role_state, describe_roles, LeadershipStatus, RoleListing,
    RoleStateReport,
};
#[cfg(feature = "kafka")]
pub(crate) use held::ended_error;
pub(crate) use held::HeldRef;
pub use held::{EndReason, Leadership};
pub use lead::{LeaderLoop, Term};
pub use options::LeadershipOptions;
