//! Guarded writes: records written in one transaction of the term's epoch,
//! holding the producer (`Held::writes`) like a renewal, and bounded so
//! they never take the time the next renewal needs.
//!
//! A write, in order:
//!
//! 1. Refused at its call, sending nothing, once a resign was called.
//! 2. Waits for the producer (a renewal or another write in flight); the
//!    lease running out meanwhile ends the term and the write with it.
//! 3. With the producer: refused if the term ended, ends the term if the
//!    lease ran out, fails at once (sending nothing) if the write would run
//!    into the renewal's reserve.
//! 4. Writes, bounded by [`Held::write_bound`]; the lease running out while
//!    it is in flight ends the term, and the write's outcome is unknown.
//! 5. Maps the answer: a fence ends the term; a transient failure past the
//!    lease is the term's end; a fatal one names the role.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::{ended_error, fenced_reason, Held, Leadership};
use crate::error::{Error, Result};
use crate::transport::{ConsumedOffsets, LeaseWriter, OutRecord};

/// What one guarded write sends through the epoch.
pub(super) enum Payload {
    /// Records alone ([`LeaseWriter::write_guarded`]).
    Records(Vec<OutRecord>),
    /// Records with input offsets, at least one, in the same transaction
    /// ([`LeaseWriter::write_guarded_with_offsets`]).
    WithOffsets(Vec<OutRecord>, ConsumedOffsets),
}

impl Payload {
    /// `records` with `offsets`; records alone when there are no offsets,
    /// so such a write is exactly [`Leadership::write`].
    pub(super) fn of(records: Vec<OutRecord>, offsets: ConsumedOffsets) -> Payload {
        if offsets.offsets.is_empty() {
            Payload::Records(records)
        } else {
            Payload::WithOffsets(records, offsets)
        }
    }

    /// Sends it through `epoch` within `within`.
    async fn send(self, epoch: &dyn LeaseWriter, within: Duration) -> Result<()> {
        match self {
            Payload::Records(records) => epoch.write_guarded(records, within).await,
            Payload::WithOffsets(records, offsets) => {
                epoch
                    .write_guarded_with_offsets(records, offsets, within)
                    .await
            }
        }
    }
}

impl Held {
    /// The lease time a renewal is always left: a guarded write may not
    /// run into it. The renew interval, or the time from a renewal's
    /// schedule to the deadline (lease - renew) when that is shorter: a
    /// renewal that starts on time is never kept waiting by a write past
    /// the point where less than this is left.
    pub(super) fn renewal_reserve(&self) -> Duration {
        let e = &self.member.options.election;
        e.renew_interval
            .min(e.lease_duration.saturating_sub(e.renew_interval))
    }

    /// How long a guarded write starting now may take: one renew interval,
    /// and never into the renewal's reserve ([`Held::renewal_reserve`]).
    pub(super) fn write_bound(&self) -> Duration {
        let renew = self.member.options.election.renew_interval;
        self.left()
            .saturating_sub(self.renewal_reserve())
            .min(renew)
    }

    /// The context of a guarded write's errors: the role it was for.
    fn write_context(&self) -> String {
        format!(
            "a guarded write for role {}",
            crate::error::quote(&self.member.role)
        )
    }
}

impl Leadership {
    /// Writes `records` in one transaction of this term's epoch, serialised
    /// with the renewals. The broker fences a deposed leader's write: it
    /// fails with [`Error::Fenced`], none of its records become visible, and
    /// the leadership ends.
    ///
    /// A write may take at most one renew interval, and never runs into the
    /// lease time kept for the next renewal (the renew interval, or lease -
    /// renew when that is shorter), so it never starves the renewals: one
    /// not acknowledged by then fails with [`Error::Transient`], and nothing
    /// of it is ever written; while renewals fail and less than that time
    /// is left, a write fails at once with [`Error::Transient`], sending
    /// nothing. A partition whose leader does not answer costs the writes
    /// to it: records it never acknowledged keep the epoch's transaction
    /// from being ended (their copy could land after an abort), so the
    /// renewals first send them again, for at most half of each renewal's
    /// time; until the partition's leader answers or the partition moves
    /// (within `broker.session.timeout.ms` of a dead or paused broker), the
    /// renewals fail, and once the lease runs out the term ends with
    /// [`Error::LeaseExpired`] naming the partition; when the lease ran out meanwhile (the process was
    /// paused, say), it fails with [`Error::LeaseExpired`] and the term
    /// ends; if the write was already in flight then (the transport overran
    /// its bound), it fails with [`Error::OutcomeUnknown`] instead, and the
    /// term ends all the same. Its transaction is aborted once the transaction
    /// coordinator has it (at once, unless the coordinator is moving or
    /// still completing the previous transaction; then before the next
    /// write or renewal of the role). A failure after its commit was sent is
    /// [`Error::OutcomeUnknown`]: the records may or may not be visible.
    ///
    /// Call order: a write called after [`Leadership::resign`] was called on
    /// this leadership fails with [`Error::Resigned`] and sends nothing, even
    /// when its future runs before the resign's (the check is made at the
    /// call, not at the first poll). A write called before the resign either
    /// commits before the resign clears the lease, or fails.
    pub fn write(&self, records: Vec<OutRecord>) -> impl Future<Output = Result<()>> + Send + '_ {
        let refused = self.refused_after_resign();
        async move {
            match refused {
                Some(e) => Err(e),
                None => {
                    let payload = Payload::Records(records);
                    self.held.unless_crashed(self.write_now(payload)).await
                }
            }
        }
    }

    /// [`Leadership::write`] on a shared handle: the same check at the call,
    /// a future that owns the handle (for bindings, which run it on a
    /// runtime while the caller goes on).
    pub fn write_owned(
        self: Arc<Self>,
        records: Vec<OutRecord>,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let refused = self.refused_after_resign();
        async move {
            match refused {
                Some(e) => Err(e),
                None => {
                    let payload = Payload::Records(records);
                    self.held.unless_crashed(self.write_now(payload)).await
                }
            }
        }
    }

    /// Step 1: the error of a write called once a resign was called, else
    /// `None`.
    pub(super) fn refused_after_resign(&self) -> Option<Error> {
        if self.held.resign_called.load(Ordering::SeqCst) {
            tracing::debug!(parent: &self.held.member.span, "a guarded write called after resign was refused; nothing was sent");
            return Some(Error::Resigned);
        }
        None
    }

    /// Steps 2 to 5 (see the module docs).
    pub(super) async fn write_now(&self, payload: Payload) -> Result<()> {
        let held = &self.held;
        let _producer = self.producer().await?;
        let within = self.bound()?;
        let written = tokio::select! {
            biased;
            w = payload.send(held.epoch.as_ref(), within) => w,
            _ = held.member.options.clock.sleep(held.left()) => return Err(self.overran()),
        };
        held.report_resolved();
        self.answer(written)
    }

    /// Step 2: the producer, once no renewal or other write holds it;
    /// the term's end reason if the lease ran out first.
    async fn producer(&self) -> Result<tokio::sync::MutexGuard<'_, ()>> {
        let held = &self.held;
        tokio::select! {
            biased;
            w = held.writes.lock() => Ok(w),
            _ = held.member.options.clock.sleep(held.left()) => {
                // The lease ran out while a renewal or another write held the
                // producer: the term ends now, whoever notices first.
                if self.err().is_none() {
                    held.expire();
                }
                Err(ended_error(&self.err().expect("ended above")))
            }
        }
    }

    /// Step 3: the bound of a write that may start now, or why it may not.
    fn bound(&self) -> Result<Duration> {
        let held = &self.held;
        if let Some(e) = self.err() {
            return Err(ended_error(&e));
        }
        if held.left().is_zero() {
            held.expire();
            return Err(ended_error(&self.err().expect("ended above")));
        }
        let within = held.write_bound();
        if within.is_zero() {
            return Err(Error::transient(
                held.write_context(),
                format!(
                    "the lease has {} left, within the {} kept for its renewal (renewals are \
                     failing); nothing was sent",
                    crate::human::duration(held.left()),
                    crate::human::duration(held.renewal_reserve())
                ),
            ));
        }
        Ok(within)
    }

    /// Step 4, the lease ran out while the write was in flight: the
    /// transport overran the bound past the lease. The term is over, but
    /// the write goes on in its own task and its commit may already be on
    /// its way, so its outcome is unknown (never `LeaseExpired`, which
    /// would let a committed write look failed).
    fn overran(&self) -> Error {
        let held = &self.held;
        if self.err().is_none() {
            held.expire();
        }
        Error::OutcomeUnknown {
            context: held.write_context(),
            source: "the lease ran out while the write was in flight, and the term has ended \
                     (LEASE_EXPIRED); the records may or may not become visible"
                .into(),
        }
    }

    /// Step 5: what the caller gets for the transport's answer `written`.
    fn answer(&self, written: Result<()>) -> Result<()> {
        let held = &self.held;
        match written {
            Err(e) if e.means_fenced() => {
                let _span = held.member.span.enter();
                tracing::warn!(token = %held.token, why = %e, "fenced");
                held.end(fenced_reason(&e));
                Err(e)
            }
            // The lease ran out while the write waited (the process was
            // paused, or the write was given the lease's last moments):
            // nothing of it was written, and the term is over. That, not a
            // failure to retry, is the answer.
            Err(e @ Error::Transient { .. }) if held.left().is_zero() => {
                tracing::debug!(why = %e, "a guarded write outlived the lease");
                if self.err().is_none() {
                    held.expire();
                }
                Err(ended_error(&self.err().expect("ended above")))
            }
            // What no retry mends (a data topic that does not exist, a
            // denied write) says which role's write it was: the caller may
            // hold many.
            Err(Error::Fatal { context, source }) => Err(Error::Fatal {
                context: format!("{}: {context}", held.write_context()),
                source,
            }),
            other => other,
        }
    }
}
