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
//! The returned [`Leadership`] renews the lease in the background at every
//! renew interval. Only the broker's fence ([`crate::Error::Fenced`]) ends it; a
//! transient failure (a broker down, a timeout) is retried with backoff and
//! reported, because a renewal that succeeds later was accepted under the same
//! epoch and so nobody else took over. A member never calls itself leader
//! again without minting a newer epoch.
//!
//! Events: every step is delivered as a typed [`crate::events::Event`] to the
//! subscribers of the member ([`LeadershipOptions::with_events`],
//! [`Leadership::subscribe`]); `tracing` carries diagnostics under one
//! `member` span (role, member, partition).
//!
//! # Resign
//!
//! [`Leadership::resign`] stops renewing, then **mints one more epoch** with a
//! producer of its own and clears the lease with a tombstone written by
//! that producer, deregisters, and drops the producer. Minting before the
//! tombstone is the choice that makes the hand-over both fast and clean:
//!
//! * the resigned token is superseded at the coordinator before any standby
//!   can see the lease cleared, so a third party's [`describe_leadership`]
//!   stops reporting it as authoritative at once, and any write of the old
//!   term still in flight is fenced by the broker;
//! * the standby that takes over mints after the tombstone is visible, so its
//!   epoch is newer still: the resigning member can never fence its successor.
//!
//! # Guarantees and non-guarantees
//!
//! See the crate documentation: the epoch is the safety, the lease is timing.

mod acquire;
mod describe;
mod held;
mod member;
mod options;

pub use acquire::acquire_leadership;
pub(crate) use acquire::acquire_with;
pub use describe::{describe_leadership, describe_role_state, LeadershipStatus, RoleStateReport};
pub use held::{EndReason, Leadership};
pub use options::LeadershipOptions;
