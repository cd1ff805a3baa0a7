//! The leader loop: lead, do the role's work while leading, and contend
//! again after losing, until cancelled (Curator's `LeaderSelector` with
//! `autoRequeue`, `krabka run --keep-going`).
//!
//! ```no_run
//! # async fn f(client: krabka_coordination::client::Client) -> krabka_coordination::Result<()> {
//! let options = client.leadership_options();
//! let stop = options.cancel.clone(); // cancel it to stop leading (ctrl-c, SIGTERM)
//! client
//!     .lead("billing", "host-a", options, |term| async move {
//!         while !term.ended().is_cancelled() {
//!             // one unit of the role's work; guarded writes through
//!             // term.leadership().write(..)
//!             tokio::select! {
//!                 _ = term.ended().cancelled() => break,
//!                 _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
//!             }
//!         }
//!         Ok(())
//!     })
//!     .await
//! # }
//! ```
//!
//! Each term runs the work once, given a [`Term`]: the held
//! [`Leadership`] (its token, guarded writes) and a cancellation token,
//! [`Term::ended`], that fires when the term ends (fenced, lease expired,
//! a fatal error) or the loop is cancelled. Then:
//!
//! * **the work returns `Ok`**: the role is resigned (the hand-over is
//!   immediate) and the member contends again, from the tail of the
//!   roster;
//! * **the work returns `Err`**: the role is resigned and the loop ends
//!   with that error;
//! * **the term ends under the work** ([`Term::ended`] fires): the loop
//!   waits for the work to return (the work must watch the token; the loop
//!   never drops it halfway), then contends again;
//! * **the loop is cancelled** (`options.cancel`): a waiting acquire
//!   deregisters, a running term's [`Term::ended`] fires, and once the
//!   work returns the role is resigned; the loop returns `Ok(())`.
//!
//! Before contending again the loop pauses, on the member's clock, for the
//! member's backoff ([`LeadershipOptions::initial_backoff`], doubling up to
//! [`LeadershipOptions::max_backoff`]); the pause starts over after a term
//! that lasted at least one lease, so a member that keeps being fenced or
//! keeps losing its lease backs off, and a healthy one does not. A failure
//! to acquire that a retry may mend (the cluster unreachable at the start)
//! is retried after the same pause; any other ends the loop.

use std::future::Future;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::member::Backoff;
use super::{Leadership, LeadershipOptions};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::token::FencingToken;

/// One term of a leader loop, as the work receives it.
#[derive(Debug, Clone)]
pub struct Term {
    leadership: Arc<Leadership>,
    ended: CancellationToken,
    number: u64,
}

impl Term {
    /// The held leadership: token, lease, guarded writes.
    pub fn leadership(&self) -> &Arc<Leadership> {
        &self.leadership
    }

    /// The term's fencing token.
    pub fn token(&self) -> FencingToken {
        self.leadership.token()
    }

    /// Fires when the term ends or the loop is cancelled: the work must
    /// return then.
    pub fn ended(&self) -> &CancellationToken {
        &self.ended
    }

    /// The term's number in this loop, from 1.
    pub fn number(&self) -> u64 {
        self.number
    }
}

impl Client {
    /// Runs `work` for every term `member` wins of `role`, contending
    /// again after each, until `options.cancel` fires (see
    /// [`crate::leadership::lead`] for the rules). Refused like
    /// [`Client::acquire`] before anything is written.
    pub async fn lead<W, Fut>(
        &self,
        role: &str,
        member: &str,
        options: LeadershipOptions,
        mut work: W,
    ) -> Result<()>
    where
        W: FnMut(Term) -> Fut,
        Fut: Future<Output = Result<()>>,
    {
        options.validate()?;
        let cancel = options.cancel.clone();
        let clock = Arc::clone(&options.clock);
        let lease = crate::clock::duration_millis(options.election.lease_duration);
        let mut backoff = Backoff::new(&options);
        let mut number = 0u64;
        loop {
            let leadership = match self.acquire(role, member, options.clone()).await {
                Ok(l) => Arc::new(l),
                Err(Error::Cancelled) => return Ok(()),
                Err(e) if e.is_transient() => {
                    let d = backoff.take();
                    tracing::warn!(role, member, error = %e, retry_in = ?d, "acquiring failed; contending again");
                    tokio::select! {
                        _ = cancel.cancelled() => return Ok(()),
                        _ = clock.sleep(d) => continue,
                    }
                }
                Err(e) => return Err(e),
            };
            number += 1;
            let started = clock.elapsed_millis();
            let ended = cancel.child_token();
            let term = Term {
                leadership: Arc::clone(&leadership),
                ended: ended.clone(),
                number,
            };
            let result = {
                let work = work(term);
                tokio::pin!(work);
                tokio::select! {
                    r = &mut work => r,
                    _ = leadership.done() => {
                        ended.cancel();
                        work.await
                    }
                    _ = ended.cancelled() => work.await,
                }
            };
            ended.cancel();
            if leadership.is_held() {
                if let Err(e) = leadership.resign().await {
                    tracing::warn!(role, member, error = %e, "resigning at the end of a term failed");
                }
            }
            let reason = leadership.err();
            tracing::info!(role, member, term = number, reason = ?reason.as_deref().map(Error::kind), "the term ended");
            drop(leadership);
            result?;
            if cancel.is_cancelled() {
                return Ok(());
            }
            if clock.elapsed_millis().saturating_sub(started) >= lease {
                backoff.reset();
            }
            let d = backoff.take();
            tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                _ = clock.sleep(d) => {}
            }
        }
    }
}
