//! The first lease of a won epoch, written within a bound, and the epoch let
//! go when the acquire gives it up after a write that may have committed.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::super::member::{millis, Backoff, Member};
use crate::codec::Lease;
use crate::error::{Error, Result};
use crate::transport::LeaseWriter;

/// Writes the first lease of a won epoch: (lease, send time).
///
/// A write in flight is never cut short by a cancel. A failed write is
/// tried again after the member's back-off ([`Backoff`], from
/// `initial_backoff` doubling to `max_backoff`), whether nothing was
/// written or the outcome is unknown, so a coordinator that keeps leaving
/// the outcome unknown is asked at most once per back-off pause; a cancel
/// ends the pause at once with [`Error::Cancelled`].
///
/// Bounded: no attempt starts once one lease duration has passed since the
/// first, so the call ends within two lease durations (the last attempt's
/// own bound), then fails with [`Error::Transient`] naming the last error.
///
/// Whenever it gives up (a cancel, the bound, an error that is neither
/// transient nor a fence) after an attempt whose lease may have committed,
/// it first lets go of the epoch ([`let_go`]), so no lease is left behind
/// that nobody renews or resigns.
pub(super) async fn first_lease(
    m: &Member,
    epoch: &dyn LeaseWriter,
    cancel: &CancellationToken,
) -> Result<(Lease, i64)> {
    let lease_duration = m.options.election.lease_duration;
    let mut backoff = Backoff::new(m.options.initial_backoff, m.options.max_backoff);
    let started = m.mono();
    // The last lease whose commit may still complete, and when it was sent.
    let mut maybe_written: Option<(Lease, i64)> = None;
    loop {
        let sent = m.mono();
        let (record, lease) = m.lease_record(epoch.token())?;
        let e = match epoch.write_lease(record, lease_duration).await {
            Ok(()) => return Ok((lease, sent)),
            Err(e) => e,
        };
        let unknown = matches!(e, Error::OutcomeUnknown { .. }) && !e.means_fenced();
        if unknown {
            maybe_written = Some((lease, sent));
        } else if !e.is_transient() {
            // A fence means a newer epoch exists: nothing to let go.
            if !e.means_fenced() {
                if let Some((lease, sent)) = &maybe_written {
                    let_go(m, epoch, lease, *sent).await;
                }
            }
            return Err(e);
        }
        let d = backoff.take();
        let spent = m.mono().saturating_sub(started);
        let out_of_time = spent.saturating_add(millis(d)) >= millis(lease_duration);
        let stop = if out_of_time {
            Some(Error::transient(
                "writing the first lease",
                format!(
                    "no write succeeded within the lease duration ({}): {e}",
                    crate::human::duration(lease_duration)
                ),
            ))
        } else {
            tracing::warn!(error = %e, retry_in = ?d, "writing the first lease failed; retrying");
            m.pause(d, cancel).await.err()
        };
        if let Some(stop) = stop {
            if let Some((lease, sent)) = &maybe_written {
                let_go(m, epoch, lease, *sent).await;
            }
            return Err(stop);
        }
    }
}

/// Lets go of an epoch whose first lease (`lease`, sent at monotonic
/// `sent`) may have committed, when the acquire gives it up: clears the
/// lease with a tombstone through the epoch (its pending commit completes
/// first), so standbys need not wait out its deadline, then supersedes the
/// epoch, so nothing of it lands later. The bump runs only within the time
/// no other member may challenge (the lease's deadline plus one stagger,
/// this member still registered), as a resign's does, and is skipped when
/// the tombstone was fenced (a newer epoch exists). Each step is bounded by
/// the lease duration; failures are logged, as the acquire's own error is
/// what the caller gets.
async fn let_go(m: &Member, epoch: &dyn LeaseWriter, lease: &Lease, sent: i64) {
    let bound = m.options.election.lease_duration;
    match epoch.write_lease(m.lease_tombstone(), bound).await {
        Ok(()) => tracing::info!("cleared a first lease that may have committed"),
        Err(e) if e.means_fenced() => return,
        Err(e) => {
            tracing::warn!(error = %e, "could not clear a first lease that may have committed; standbys take over at its deadline")
        }
    }
    let stagger = millis(m.options.election.challenge_stagger);
    let by_wall = lease
        .deadline
        .saturating_add(stagger)
        .saturating_sub(m.now());
    let by_mono = sent
        .saturating_add(millis(bound))
        .saturating_add(stagger)
        .saturating_sub(m.mono());
    let quiet = Duration::from_millis(u64::try_from(by_wall.min(by_mono)).unwrap_or(0));
    let within = quiet.min(bound);
    if within.is_zero() {
        return;
    }
    match epoch.supersede(within).await {
        Ok(_) => {
            tracing::info!(token = %epoch.token(), "superseded an epoch given up before its first lease was confirmed")
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not supersede an epoch given up before its first lease was confirmed")
        }
    }
}
