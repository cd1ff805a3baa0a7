//! The held leadership: the renewal task, guarded writes and resign, all
//! through the epoch the member minted and owns.

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::member::{millis, Backoff, Member};
use crate::codec::Lease;
use crate::error::{Error, Result, SharedError};
use crate::events::{EventKind, EventSender};
use crate::token::FencingToken;
use crate::transport::{LeaseWriter, OutRecord};

/// Why a [`Leadership`] ended, shared by every clone of its error.
pub type EndReason = Arc<Error>;

/// An object kept alive while the leadership is held (a client's claim on
/// the role), let go when the term ends or the handle is dropped.
type Claim = Box<dyn std::any::Any + Send + Sync>;

struct Held {
    member: Arc<Member>,
    /// The epoch this member minted: every renewal and guarded write goes
    /// through it.
    epoch: Box<dyn LeaseWriter>,
    token: FencingToken,
    lease: Mutex<Lease>,
    ended: watch::Sender<Option<EndReason>>,
    /// Serialises renewals, guarded writes and resign on the epoch.
    writes: tokio::sync::Mutex<()>,
    resigned: tokio::sync::Mutex<bool>,
    stop: CancellationToken,
    renewal_failures: Mutex<u32>,
    claim: Mutex<Option<Claim>>,
}

impl Held {
    /// Ends the term with `reason` (the first reason wins), stops renewing
    /// and lets go of the claim.
    fn end(&self, reason: Error) {
        self.stop.cancel();
        let reason = Arc::new(reason);
        let first = self.ended.send_if_modified(|slot| {
            if slot.is_none() {
                *slot = Some(Arc::clone(&reason));
                true
            } else {
                false
            }
        });
        if first {
            match &*reason {
                Error::Fenced(_) => self.member.emit(EventKind::Fenced { error: reason }),
                Error::Resigned => {}
                _ => self.member.emit(EventKind::Ended { error: reason }),
            }
        }
        self.release_claim();
    }

    fn release_claim(&self) {
        let claim = self.claim.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(claim);
    }

    fn is_ended(&self) -> bool {
        self.ended.borrow().is_some()
    }
}

/// The held leadership of a role.
///
/// Renews the lease in the background. [`Leadership::done`] resolves when the
/// role ends and [`Leadership::err`] then says why: [`Error::Fenced`] (a newer
/// epoch exists), [`Error::Resigned`], or a fatal error. Stop the role's work
/// when it resolves.
///
/// Dropping a `Leadership` stops the renewals without resigning: standbys take
/// over once the lease expires. Call [`Leadership::resign`] to hand over at
/// once.
pub struct Leadership {
    held: Arc<Held>,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("role", &self.held.member.role)
            .field("member", &self.held.member.member)
            .field("token", &self.held.token)
            .field(
                "ended",
                &self.held.ended.borrow().as_ref().map(|e| e.to_string()),
            )
            .finish()
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        self.held.stop.cancel();
        self.held.release_claim();
    }
}

impl Leadership {
    pub(super) fn start(
        member: Arc<Member>,
        epoch: Box<dyn LeaseWriter>,
        lease: Lease,
        claim: Option<Claim>,
    ) -> Leadership {
        let (ended, _) = watch::channel(None);
        let span = member.span.clone();
        let held = Arc::new(Held {
            token: epoch.token(),
            epoch,
            member,
            lease: Mutex::new(lease),
            ended,
            writes: tokio::sync::Mutex::new(()),
            resigned: tokio::sync::Mutex::new(false),
            stop: CancellationToken::new(),
            renewal_failures: Mutex::new(0),
            claim: Mutex::new(claim),
        });
        tokio::spawn(renew_task(held.clone()).instrument(span));
        Leadership { held }
    }

    /// The fencing token of this term. Pass it with every guarded write.
    pub fn token(&self) -> FencingToken {
        self.held.token
    }

    /// The role.
    pub fn role(&self) -> &str {
        &self.held.member.role
    }

    /// The member id.
    pub fn member(&self) -> &str {
        &self.held.member.member
    }

    /// The partition of `__coordination_state` the role's records go to.
    pub fn partition(&self) -> i32 {
        self.held.member.partition
    }

    /// The last lease this member wrote (granted at, deadline).
    pub fn lease(&self) -> Lease {
        self.held
            .lease
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// How many renewals in a row have failed with a transient error.
    pub fn renewal_failures(&self) -> u32 {
        *self
            .held
            .renewal_failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// True until the role ends.
    pub fn is_held(&self) -> bool {
        !self.held.is_ended()
    }

    /// Resolves when the role ends (fenced, resigned, or a fatal error).
    pub fn done(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.held.ended.subscribe();
        async move {
            let _ = rx.wait_for(|e| e.is_some()).await;
        }
    }

    /// Why the role ended, or `None` while it is held.
    pub fn err(&self) -> Option<EndReason> {
        self.held.ended.borrow().clone()
    }

    /// Sends this member's events from now on to `events` (see
    /// [`crate::events`]).
    pub fn subscribe(&self, events: EventSender) {
        self.held.member.events.subscribe(events);
    }

    /// Writes `records` in one transaction of this term's epoch, serialised
    /// with the renewals. The broker fences a deposed leader's write: it
    /// fails with [`Error::Fenced`], none of its records become visible, and
    /// the leadership ends.
    pub async fn write(&self, records: Vec<OutRecord>) -> Result<()> {
        let _w = self.held.writes.lock().await;
        if let Some(e) = self.err() {
            return Err(ended_error(&e));
        }
        match self.held.epoch.write_guarded(records).await {
            Err(Error::Fenced(why)) => {
                let _span = self.held.member.span.enter();
                tracing::warn!(token = %self.held.token, %why, "fenced");
                self.held.end(Error::Fenced(why.clone()));
                Err(Error::Fenced(why))
            }
            other => other,
        }
    }

    /// Gives the role up: stops renewing, mints one more epoch (so the
    /// resigned token is superseded), clears the lease with a tombstone
    /// written through that epoch, deregisters and lets go of both epochs.
    /// The next standby in rank takes over without waiting for the old
    /// deadline.
    ///
    /// Idempotent: a second call returns `Ok(())`. After a fence it only
    /// deregisters.
    pub async fn resign(&self) -> Result<()> {
        let span = self.held.member.span.clone();
        self.resign_inner().instrument(span).await
    }

    async fn resign_inner(&self) -> Result<()> {
        let mut resigned = self.held.resigned.lock().await;
        if *resigned {
            return Ok(());
        }
        *resigned = true;
        self.held.stop.cancel();
        let _w = self.held.writes.lock().await;
        let m = &self.held.member;
        let never = CancellationToken::new();
        let mut result = Ok(());
        if !self.held.is_ended() {
            let lease_duration = m.options.election.lease_duration;
            let cleared = async {
                let successor = m
                    .retry("minting the resign epoch", &never, || {
                        m.transport.acquire_epoch(&m.role, lease_duration)
                    })
                    .await?;
                m.retry("clearing the lease", &never, || {
                    successor.write_lease(m.lease_tombstone())
                })
                .await?;
                Ok::<_, Error>(successor.token())
            };
            match cleared.await {
                Ok(successor) => {
                    tracing::info!(token = %self.held.token, superseded_by = %successor, "resigned");
                    m.emit(EventKind::Resigned { cleared: true });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "resign could not clear the lease; standbys take over at the deadline");
                    m.emit(EventKind::Resigned { cleared: false });
                    result = Err(e);
                }
            }
        }
        m.transport.prepare_epoch(&m.role, None);
        if let Err(e) = m.retry("deregistering", &never, || m.deregister()).await {
            if result.is_ok() {
                result = Err(e);
            }
        }
        self.held.end(Error::Resigned);
        result
    }
}

/// The error to return for an operation on an ended leadership; the reason
/// stays the cause.
fn ended_error(reason: &EndReason) -> Error {
    match &**reason {
        Error::Fenced(why) => Error::Fenced(why.clone()),
        Error::Resigned => Error::Resigned,
        _ => Error::fatal("the leadership ended", SharedError(Arc::clone(reason))),
    }
}

/// The renewal task: renews, and ends the term if the loop itself panics,
/// so a bug never leaves a role that looks held but is not renewed.
async fn renew_task(held: Arc<Held>) {
    let task = tokio::spawn(renew_loop(held.clone()).in_current_span());
    if let Err(e) = task.await {
        if e.is_panic() {
            tracing::error!("the renewal task panicked; ending the term");
            held.end(Error::fatal("renewing the lease", e));
        }
    }
}

async fn renew_loop(held: Arc<Held>) {
    let m = &held.member;
    let renew = millis(m.options.election.renew_interval);
    let mut backoff = Backoff::new(&m.options);
    let mut next_at = held
        .lease
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .granted_at
        .saturating_add(renew);
    loop {
        tokio::select! {
            biased;
            _ = held.stop.cancelled() => return,
            _ = m.options.clock.sleep_until(next_at) => {}
        }
        let _w = held.writes.lock().await;
        if held.stop.is_cancelled() {
            return;
        }
        let now = m.now();
        let (record, lease) = match m.lease_record(held.token) {
            Ok(v) => v,
            Err(e) => {
                held.end(e);
                return;
            }
        };
        match held.epoch.write_lease(record).await {
            Ok(()) => {
                tracing::debug!(deadline = lease.deadline, "renewed");
                let deadline = lease.deadline;
                *held.lease.lock().unwrap_or_else(|e| e.into_inner()) = lease;
                *held
                    .renewal_failures
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = 0;
                backoff.reset();
                m.emit(EventKind::Renewed { deadline });
                next_at = now.saturating_add(renew);
            }
            Err(Error::Fenced(why)) => {
                tracing::warn!(token = %held.token, %why, "fenced");
                held.end(Error::Fenced(why));
                return;
            }
            Err(e) if e.is_transient() => {
                let failures = {
                    let mut f = held
                        .renewal_failures
                        .lock()
                        .unwrap_or_else(|e| e.into_inner());
                    *f += 1;
                    *f
                };
                let d = backoff.take().min(m.options.election.renew_interval);
                tracing::warn!(error = %e, failures, retry_in = ?d, "renewal failing");
                m.emit(EventKind::RenewalFailing {
                    failures,
                    error: Arc::new(e),
                });
                next_at = now.saturating_add(millis(d));
            }
            Err(e) => {
                tracing::error!(error = %e, "renewal failed fatally");
                held.end(e);
                return;
            }
        }
    }
}
