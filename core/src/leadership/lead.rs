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
    /// When it started, on the member's boot clock ([`crate::Clock::boot_millis`]),
    /// the clock its length is compared with the lease on.
    started: i64,
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

/// The leader loop's rules, driven one term at a time: what
/// [`Client::lead`] runs, and what a binding drives when the work runs in
/// its host language (a Python function, a JavaScript promise, a C
/// callback) between [`LeaderLoop::next_term`] and [`LeaderLoop::finish`].
pub struct LeaderLoop {
    client: Client,
    role: String,
    member: String,
    options: LeadershipOptions,
    backoff: Backoff,
    /// The pause owed before the next acquire (set by `finish`).
    pause: Option<std::time::Duration>,
    number: u64,
}

impl std::fmt::Debug for LeaderLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderLoop")
            .field("role", &self.role)
            .field("member", &self.member)
            .field("terms", &self.number)
            .finish_non_exhaustive()
    }
}

impl LeaderLoop {
    /// A loop of `member` in `role`; the options are checked now (the
    /// role, the member and the rest as [`Client::acquire`] checks them, at
    /// the first acquire). `options.cancel` stops it.
    pub fn new(
        client: &Client,
        role: &str,
        member: &str,
        options: LeadershipOptions,
    ) -> Result<LeaderLoop> {
        options.validate()?;
        crate::codec::check_role(role)?;
        crate::codec::check_member_id(member)?;
        let options = match client.clock() {
            Some(clock) => options.with_clock(clock),
            None => options,
        };
        Ok(LeaderLoop {
            client: client.clone(),
            role: role.to_owned(),
            member: member.to_owned(),
            backoff: Backoff::new(options.initial_backoff, options.max_backoff),
            options,
            pause: None,
            number: 0,
        })
    }

    /// The token that stops the loop (the options' `cancel`).
    pub fn cancel(&self) -> &CancellationToken {
        &self.options.cancel
    }

    /// Pauses for the backoff a previous term left owed, then contends
    /// until this member leads: the next term, or `None` once the loop is
    /// cancelled or its client closed (a waiting acquire deregisters). A
    /// failure a retry may mend is retried after a pause; any other is
    /// returned. The term's [`Term::ended`] fires when it ends (a close
    /// resigns it) or the loop is cancelled. A loop of a crashed test-kit
    /// process returns the client's closed error naming the crash. Must
    /// run on a tokio runtime.
    pub async fn next_term(&mut self) -> Result<Option<Term>> {
        let cancel = self.options.cancel.clone();
        let closing = self.client.closing();
        let crashed = self.client.abandoned();
        loop {
            if let Some(d) = self.pause.take() {
                tokio::select! {
                    _ = cancel.cancelled() => return Ok(None),
                    _ = closing.cancelled() => return Ok(None),
                    // The acquire below is refused with the crash's error.
                    _ = crashed.cancelled() => {}
                    _ = self.options.clock.sleep(d) => {}
                }
            }
            if cancel.is_cancelled() || closing.is_cancelled() {
                return Ok(None);
            }
            let leadership = match self
                .client
                .acquire(&self.role, &self.member, self.options.clone())
                .await
            {
                Ok(l) => Arc::new(l),
                Err(Error::Cancelled) => return Ok(None),
                // Closed between the check above and the acquire.
                Err(_) if closing.is_cancelled() => return Ok(None),
                Err(e) if e.is_transient() => {
                    let d = self.backoff.take();
                    tracing::warn!(role = %self.role, member = %self.member, error = %e, retry_in = ?d, "acquiring failed; contending again");
                    self.pause = Some(d);
                    continue;
                }
                Err(e) => return Err(e),
            };
            self.number += 1;
            let ended = cancel.child_token();
            let (done, fire) = (leadership.done(), ended.clone());
            tokio::spawn(async move {
                tokio::select! {
                    _ = done => fire.cancel(),
                    _ = fire.cancelled() => {}
                }
            });
            return Ok(Some(Term {
                leadership,
                ended,
                number: self.number,
                started: self.options.clock.boot_millis(),
            }));
        }
    }

    /// Ends `term` once its work returned: fires [`Term::ended`], resigns
    /// the role if it is still held, and owes the backoff before the next
    /// term (starting over after a term of at least one lease).
    pub async fn finish(&mut self, term: Term) {
        term.ended.cancel();
        let leadership = term.leadership;
        if leadership.is_held() {
            if let Err(e) = leadership.resign().await {
                tracing::warn!(role = %self.role, member = %self.member, error = %e, "resigning at the end of a term failed");
            }
        }
        let reason = leadership.err();
        tracing::info!(role = %self.role, member = %self.member, term = term.number, reason = ?reason.as_deref().map(Error::kind), "the term ended");
        let lasted = self
            .options
            .clock
            .boot_millis()
            .saturating_sub(term.started);
        if lasted >= crate::clock::duration_millis(self.options.election.lease_duration) {
            self.backoff.reset();
        }
        self.pause = Some(self.backoff.take());
    }
}

impl Client {
    /// Runs `work` for every term `member` wins of `role`, contending
    /// again after each, until `options.cancel` fires (see
    /// [`crate::leadership::lead`] for the rules; [`LeaderLoop`] drives
    /// the same rules one term at a time). Refused like
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
        let mut leader = LeaderLoop::new(self, role, member, options)?;
        while let Some(term) = leader.next_term().await? {
            let result = work(term.clone()).await;
            leader.finish(term).await;
            result?;
        }
        Ok(())
    }
}
