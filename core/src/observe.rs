//! Watching roles without joining them: who leads, with which token, until
//! when, and the roster behind them, as a stream of changes.
//!
//! ```no_run
//! # async fn f(client: krabka_coordination::client::Client) -> krabka_coordination::Result<()> {
//! use krabka_coordination::observe::{Change, ObserveOptions};
//! let mut observer = client.observe(&["billing"], ObserveOptions::default()).await?;
//! while let Some(view) = observer.next().await? {
//!     match (&view.change, &view.leader) {
//!         (_, Some(lease)) => println!("{} leads {} with {}", lease.member, view.role, lease.token),
//!         (Change::Lapsed, None) => println!("{}: the lease lapsed", view.role),
//!         (_, None) => println!("{}: no leader", view.role),
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! An [`Observer`] reads the state topic as a member's standby does (the
//! client's state reader, read_committed, a long poll per role), and
//! **writes nothing**: it does not register, so it never takes a rank or
//! delays an election. It is what etcd's `Observe`, Curator's
//! `LeaderLatch` listeners and client-go's `OnNewLeader` give their users.
//!
//! # What is reported
//!
//! Per role, first one [`Change::Initial`] view once the committed records
//! of the role's partition are read, then a view at each change, in the
//! order of the records that made it (each record is applied alone, so a
//! hand-over shows as [`Change::Cleared`] for the resign's tombstone and
//! [`Change::Roster`] for its deregistration, in the order they committed
//! (on Kafka the deregistration, a plain write beside the tombstone's
//! transaction, often commits first), then [`Change::Elected`]):
//!
//! * [`Change::Elected`]: a lease names a leader (member and token) that the
//!   last view did not: a new term, or a term back after its lease lapsed
//!   (a renewal that came late);
//! * [`Change::Cleared`]: the lease was cleared by a tombstone (a resign);
//! * [`Change::Lapsed`]: the lease deadline passed on the observer's clock
//!   with no renewal, and the observer's view was complete (nothing written
//!   to the partition was left unread, and no record of this role was in an
//!   open transaction). A deadline is trusted at most the lease's own
//!   duration (deadline minus granted at) past when the observer first read
//!   the record, as a standby trusts it, so a holder whose clock runs hours
//!   ahead does not stay leader in the views;
//! * [`Change::Roster`]: members registered or left, the leader did not change;
//! * [`Change::Renewed`]: the leader renewed, only with
//!   [`ObserveOptions::with_renewals`].
//!
//! # What a view is, and is not
//!
//! A view is what the state topic said when it was read. Like
//! [`crate::leadership::describe_leadership`] it is a read, not a fence: the
//! leader it names may be superseded a moment later, and only the broker's
//! fence decides whose writes count. A lapse is decided on the observer's
//! clock against the deadline the holder wrote, so clock skew moves it by
//! the skew. An observer that cannot reach the cluster reports nothing new:
//! it retries with backoff and logs each failure (`tracing`, target
//! `krabka_coordination::observe`). A non-transient failure (a record of a
//! watched role that does not decode, a state topic that is missing or not
//! readable) ends the observer with that error.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::clock::{Backoff, Clock, SystemClock};
use crate::codec::Lease;
use crate::error::{Error, Result};
use crate::partition::role_partition;
use crate::state::{RoleState, RosterEntry};
use crate::transport::{Backlog, Transport};

/// Why a [`RoleView`] was reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Change {
    /// The first view of the role, once its partition's committed records
    /// were read.
    Initial,
    /// A lease names a leader (member and token) that the last view did not.
    Elected,
    /// The leader renewed its lease (reported only with
    /// [`ObserveOptions::with_renewals`]).
    Renewed,
    /// A tombstone cleared the lease: the leader resigned.
    Cleared,
    /// The lease deadline passed without a renewal (observer's clock,
    /// complete view).
    Lapsed,
    /// The roster changed; the leader did not.
    Roster,
}

impl Change {
    /// A short stable name (`initial`, `elected`, `renewed`, `cleared`,
    /// `lapsed`, `roster`), for JSON lines and bindings.
    pub fn name(&self) -> &'static str {
        match self {
            Change::Initial => "initial",
            Change::Elected => "elected",
            Change::Renewed => "renewed",
            Change::Cleared => "cleared",
            Change::Lapsed => "lapsed",
            Change::Roster => "roster",
        }
    }
}

/// One role as an [`Observer`] saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleView {
    /// The role.
    pub role: Arc<str>,
    /// The partition of the state topic that holds it.
    pub partition: i32,
    /// Why this view was reported.
    pub change: Change,
    /// The leader: the lease in the log, unless it was cleared or lapsed
    /// (then `None`: no leader).
    pub leader: Option<Lease>,
    /// The lease whose deadline passed without a renewal, while the view
    /// has no leader because of it (and until the role's next lease record).
    pub lapsed: Option<Lease>,
    /// The roster in rank order (the rank is the index).
    pub roster: Vec<RosterEntry>,
    /// The offset the view was read up to (every record of the partition
    /// below it was read).
    pub position: i64,
    /// The observer's clock when the view was taken (epoch ms).
    pub at: i64,
}

/// Options of an [`Observer`].
#[derive(Clone)]
pub struct ObserveOptions {
    /// Report every renewal ([`Change::Renewed`]); off by default.
    pub renewals: bool,
    /// The longest one poll of a state partition waits for new records.
    pub poll_wait: Duration,
    /// The first retry delay after a transient error; doubles up to
    /// [`ObserveOptions::max_backoff`].
    pub initial_backoff: Duration,
    /// The longest retry delay.
    pub max_backoff: Duration,
    /// The clock a lapse is decided on.
    pub clock: Arc<dyn Clock>,
}

impl Default for ObserveOptions {
    /// No renewals, 1 s polls, backoff from 100 ms to 5 s, the system clock.
    fn default() -> Self {
        ObserveOptions {
            renewals: false,
            poll_wait: Duration::from_secs(1),
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            clock: Arc::new(SystemClock),
        }
    }
}

impl std::fmt::Debug for ObserveOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObserveOptions")
            .field("renewals", &self.renewals)
            .field("poll_wait", &self.poll_wait)
            .field("initial_backoff", &self.initial_backoff)
            .field("max_backoff", &self.max_backoff)
            .finish_non_exhaustive()
    }
}

impl ObserveOptions {
    /// Reports renewals too ([`Change::Renewed`]).
    pub fn with_renewals(mut self, renewals: bool) -> Self {
        self.renewals = renewals;
        self
    }

    /// Sets the longest wait of one poll.
    pub fn with_poll_wait(mut self, d: Duration) -> Self {
        self.poll_wait = d;
        self
    }

    /// Sets the clock (a manual clock in tests).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Checks the options; the error names the values.
    pub fn validate(&self) -> Result<()> {
        if self.poll_wait.is_zero() {
            return Err(Error::InvalidArgument(
                "the observer's poll wait must be above zero".into(),
            ));
        }
        if self.initial_backoff.is_zero() || self.initial_backoff > self.max_backoff {
            return Err(Error::InvalidArgument(format!(
                "the observer's backoff must start above zero and at most its maximum: initial {}, max {}",
                crate::human::duration(self.initial_backoff),
                crate::human::duration(self.max_backoff)
            )));
        }
        Ok(())
    }
}

/// A stream of [`RoleView`]s of one or more roles (see the module
/// documentation). Dropping it (or [`Observer::close`]) stops the reads.
pub struct Observer {
    rx: mpsc::UnboundedReceiver<Result<RoleView>>,
    /// The readers' sender, not keeping the stream open: for ending the
    /// observer with an error ([`ObserverRef::fail`]).
    tx: mpsc::WeakUnboundedSender<Result<RoleView>>,
    cancel: CancellationToken,
    roles: Vec<String>,
    failed: bool,
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer")
            .field("roles", &self.roles)
            .field("closed", &self.cancel.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl Observer {
    /// The next view of any watched role, in the order each role's changes
    /// happened (views of different roles interleave as they are read).
    /// `Ok(None)` once the observer is closed; an error ends it (every
    /// later call returns `Ok(None)`). Cancel-safe: dropping the future
    /// loses no view.
    pub async fn next(&mut self) -> Result<Option<RoleView>> {
        if self.failed || self.cancel.is_cancelled() {
            return Ok(None);
        }
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Ok(None),
            item = self.rx.recv() => match item {
                Some(Ok(view)) => Ok(Some(view)),
                Some(Err(e)) => {
                    self.failed = true;
                    self.cancel.cancel();
                    Err(e)
                }
                None => Ok(None),
            },
        }
    }

    /// A view already read, without waiting: `None` when there is none yet
    /// (or the observer ended).
    pub fn try_next(&mut self) -> Result<Option<RoleView>> {
        if self.failed || self.cancel.is_cancelled() {
            return Ok(None);
        }
        match self.rx.try_recv() {
            Ok(Ok(view)) => Ok(Some(view)),
            Ok(Err(e)) => {
                self.failed = true;
                self.cancel.cancel();
                Err(e)
            }
            Err(_) => Ok(None),
        }
    }

    /// The roles watched, sorted.
    pub fn roles(&self) -> &[String] {
        &self.roles
    }

    /// Stops the reads; [`Observer::next`] returns `Ok(None)` from now on.
    pub fn close(&self) {
        self.cancel.cancel();
    }

    /// A token that closes the observer when cancelled (for a binding
    /// that closes it from another thread).
    pub fn closer(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// What its client keeps of the observer, to close it or end it.
    pub(crate) fn handle(&self) -> ObserverRef {
        ObserverRef {
            cancel: self.cancel.clone(),
            tx: self.tx.clone(),
        }
    }
}

/// An observer as its client keeps it: it closes the observer, or ends it
/// with an error, without keeping it open.
pub(crate) struct ObserverRef {
    cancel: CancellationToken,
    tx: mpsc::WeakUnboundedSender<Result<RoleView>>,
}

impl ObserverRef {
    /// False once the observer was closed or ended.
    pub(crate) fn is_live(&self) -> bool {
        !self.cancel.is_cancelled()
    }

    /// The token that closes the observer.
    pub(crate) fn closer(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Closes the observer: its next view is `None`.
    pub(crate) fn close(&self) {
        self.cancel.cancel();
    }

    /// Ends the observer with `e`: its next call returns the views already
    /// read, then `e` (then `None`). Closes it when its readers are gone.
    pub(crate) fn fail(&self, e: Error) {
        match self.tx.upgrade() {
            Some(tx) if tx.send(Err(e)).is_ok() => {}
            _ => self.cancel.cancel(),
        }
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Watches `roles` on `transport`'s state topic of `partitions`
/// partitions, one reader task per role on the current tokio runtime.
///
/// Refused with [`Error::InvalidArgument`] before any read: no role, a role
/// the record layout cannot hold, a partition count below 1, invalid
/// options, or no tokio runtime to run on.
pub async fn observe(
    transport: Arc<dyn Transport>,
    roles: &[&str],
    partitions: i32,
    options: ObserveOptions,
) -> Result<Observer> {
    options.validate()?;
    if roles.is_empty() {
        return Err(Error::InvalidArgument(
            "observe needs at least one role".into(),
        ));
    }
    let mut unique = BTreeSet::new();
    for role in roles {
        crate::codec::check_role(role)?;
        unique.insert(role.to_string());
    }
    let watched: Vec<(String, i32)> = unique
        .iter()
        .map(|role| Ok((role.clone(), role_partition(role, partitions)?)))
        .collect::<Result<_>>()?;
    let handle = tokio::runtime::Handle::try_current()
        .map_err(|_| Error::InvalidArgument("observe must be called on a tokio runtime".into()))?;
    let (tx, rx) = mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    for (role, partition) in watched {
        let watch = RoleWatch {
            transport: Arc::clone(&transport),
            role: Arc::from(role.as_str()),
            partition,
            partitions,
            options: options.clone(),
            tx: tx.clone(),
        };
        let cancel = cancel.clone();
        let span = tracing::info_span!("observe", role, partition);
        handle.spawn(
            async move {
                let ended = tokio::select! {
                    biased;
                    _ = cancel.cancelled() => Ok(()),
                    r = watch.run() => r,
                };
                if let Err(e) = ended {
                    // A missing state topic's remedy names the client's count.
                    let e = crate::remedy::with_partitions(e, watch.partitions);
                    let _ = watch.tx.send(Err(e));
                }
            }
            .instrument(span),
        );
    }
    Ok(Observer {
        rx,
        tx: tx.downgrade(),
        cancel,
        roles: unique.into_iter().collect(),
        failed: false,
    })
}

/// The reader of one watched role.
struct RoleWatch {
    transport: Arc<dyn Transport>,
    role: Arc<str>,
    partition: i32,
    /// The client's partition count (for the advice of a missing topic).
    partitions: i32,
    options: ObserveOptions,
    tx: mpsc::UnboundedSender<Result<RoleView>>,
}

/// What the last view said, to tell what changed.
#[derive(Default)]
struct Shown {
    leader: Option<Lease>,
    lapsed: Option<Lease>,
    roster: Vec<String>,
    /// The lease record read last (token, granted at) and when it was first
    /// read, on the boot clock ([`crate::Clock::boot_millis`]).
    seen: Option<(crate::FencingToken, i64, i64)>,
}

impl RoleWatch {
    async fn run(&self) -> Result<()> {
        let mut backoff = Backoff::new(self.options.initial_backoff, self.options.max_backoff);
        // The start: what the transport keeps (or every record), then polls
        // until nothing decided is left unread.
        let read = loop {
            match self.transport.read_state(self.partition).await {
                Ok(read) => break read,
                Err(e) => {
                    self.back_off(e, "reading the state partition", &mut backoff)
                        .await?
                }
            }
        };
        let mut state = RoleState::build(self.role.to_string(), &read.records)?;
        let mut position = read
            .next_offset
            .max(read.records.last().map_or(0, |r| r.offset + 1));
        loop {
            match self.transport.held_back(self.partition, position).await {
                Ok(Backlog::Unread) => {}
                Ok(_) => break,
                Err(e) => {
                    self.back_off(e, "checking the state partition", &mut backoff)
                        .await?;
                    continue;
                }
            }
            match self.poll(&mut state, &mut position, None).await {
                Ok(()) => backoff.reset(),
                Err(e) => {
                    self.back_off(e, "following the state partition", &mut backoff)
                        .await?
                }
            }
        }
        let mut shown = Shown::default();
        self.show(&state, position, Change::Initial, &mut shown)?;
        if self.lapse_due(&state, &mut shown) {
            self.check_lapse(&state, position, &mut shown).await?;
        }
        loop {
            // The deadline of the lease as read, which renewals move even
            // when they are not reported.
            let due = match shown.leader {
                Some(_) => self.deadline(&state, &mut shown),
                None => None,
            };
            let polled = match due {
                Some(at) if self.options.clock.now_millis() < at => {
                    tokio::select! {
                        r = self.poll(&mut state, &mut position, Some(&mut shown)) => Some(r),
                        _ = self.options.clock.sleep_until(at) => None,
                    }
                }
                _ => Some(self.poll(&mut state, &mut position, Some(&mut shown)).await),
            };
            match polled {
                Some(Ok(())) => backoff.reset(),
                Some(Err(e)) => {
                    self.back_off(e, "following the state partition", &mut backoff)
                        .await?;
                    continue;
                }
                None => {}
            }
            if self.lapse_due(&state, &mut shown) {
                if let Err(e) = self.check_lapse(&state, position, &mut shown).await {
                    self.back_off(e, "checking the state partition", &mut backoff)
                        .await?;
                }
            }
        }
    }

    /// A transient error is logged and waited out; any other ends the watch.
    async fn back_off(&self, e: Error, what: &str, backoff: &mut Backoff) -> Result<()> {
        if !e.is_transient() {
            return Err(e);
        }
        let d = backoff.take();
        tracing::warn!(error = %e, retry_in = ?d, "{what} failed; retrying");
        self.options.clock.sleep(d).await;
        Ok(())
    }

    /// One poll; each record of this role is applied alone and, once
    /// `shown` is given (after the first view), reported if it changed
    /// what the last view said.
    async fn poll(
        &self,
        state: &mut RoleState,
        position: &mut i64,
        mut shown: Option<&mut Shown>,
    ) -> Result<()> {
        let batch = self
            .transport
            .poll_partition(self.partition, *position, self.options.poll_wait)
            .await?;
        for r in &batch.records {
            state.apply(r)?;
            *position = (*position).max(r.offset + 1);
            if let Some(shown) = shown.as_deref_mut() {
                if state.is_own_key(&r.key) {
                    if let Some(change) = self.change(state, shown) {
                        self.show(state, *position, change, shown)?;
                    }
                }
            }
        }
        *position = (*position).max(batch.next_offset);
        Ok(())
    }

    /// What `state` changed from the last view, if anything worth a view.
    fn change(&self, state: &RoleState, shown: &Shown) -> Option<Change> {
        let lease = state.lease();
        let same_term = |a: &Lease, b: &Lease| a.member == b.member && a.token == b.token;
        match (lease, &shown.leader, &shown.lapsed) {
            (Some(now), Some(was), _) if same_term(now, was) => {
                if self.options.renewals && now != was {
                    Some(Change::Renewed)
                } else {
                    // Without renewals a moved deadline is not a view.
                    self.roster_change(state, shown)
                }
            }
            // The lapsed lease itself, read again: still no leader.
            (Some(now), None, Some(lapsed)) if now == lapsed => self.roster_change(state, shown),
            (Some(_), _, _) => Some(Change::Elected),
            (None, Some(_), _) => Some(Change::Cleared),
            (None, None, _) => self.roster_change(state, shown),
        }
    }

    fn roster_change(&self, state: &RoleState, shown: &Shown) -> Option<Change> {
        let roster = state.roster().map(|e| &e.member);
        (!roster.eq(shown.roster.iter())).then_some(Change::Roster)
    }

    /// Reports the view of `state` for `change` and remembers it.
    fn show(
        &self,
        state: &RoleState,
        position: i64,
        change: Change,
        shown: &mut Shown,
    ) -> Result<()> {
        let lease = state.lease().cloned();
        let (leader, lapsed) = match change {
            Change::Lapsed => (None, lease),
            // A roster change while the lease stays lapsed keeps it lapsed.
            _ if shown.lapsed.is_some() && lease == shown.lapsed => (None, lease),
            _ => (lease, None),
        };
        shown.leader.clone_from(&leader);
        shown.lapsed.clone_from(&lapsed);
        shown.roster = state.roster().map(|e| e.member.clone()).collect();
        let view = RoleView {
            role: Arc::clone(&self.role),
            partition: self.partition,
            change,
            leader,
            lapsed,
            roster: state.roster().cloned().collect(),
            position,
            at: self.options.clock.now_millis(),
        };
        tracing::debug!(change = change.name(), position, "role view");
        self.tx.send(Ok(view)).map_err(|_| Error::Cancelled)
    }

    /// True when the last view names a leader whose lease, as the state
    /// has it, is past its deadline ([`RoleWatch::deadline`]).
    fn lapse_due(&self, state: &RoleState, shown: &mut Shown) -> bool {
        shown.leader.is_some()
            && self
                .deadline(state, shown)
                .is_some_and(|at| at <= self.options.clock.now_millis())
    }

    /// When the lease of `state` lapses on the observer's wall clock: its
    /// deadline, but never later than its own duration (deadline minus
    /// granted at) after the observer first read it, so that a holder whose
    /// clock runs far ahead cannot keep a dead leader in the views (the
    /// rule a standby follows, with the lease's own duration in place of
    /// the standby's).
    fn deadline(&self, state: &RoleState, shown: &mut Shown) -> Option<i64> {
        let l = state.lease()?;
        let clock = &self.options.clock;
        // The boot clock, as the standby's: a lease read before a suspend
        // ran on while this machine slept.
        let mono = clock.boot_millis();
        if shown
            .seen
            .is_none_or(|(t, g, _)| (t, g) != (l.token, l.granted_at))
        {
            shown.seen = Some((l.token, l.granted_at, mono));
        }
        let (_, _, first_seen) = shown.seen.expect("set above");
        let duration = l.deadline.saturating_sub(l.granted_at).max(0);
        let cap = clock
            .now_millis()
            .saturating_add(first_seen.saturating_add(duration).saturating_sub(mono));
        Some(l.deadline.min(cap))
    }

    /// Reports [`Change::Lapsed`] when the view at `position` is complete:
    /// nothing is left unread, or only another role's open transaction is
    /// (read past it: no record of this role is open, and the committed
    /// ones do not renew the lease). Otherwise the next polls decide.
    async fn check_lapse(&self, state: &RoleState, position: i64, shown: &mut Shown) -> Result<()> {
        let complete = match self.transport.held_back(self.partition, position).await? {
            Backlog::CaughtUp => true,
            Backlog::Unread => false,
            Backlog::HeldBack => match self
                .transport
                .read_past_stable(self.partition, position)
                .await?
            {
                Some(past) if !past.open.iter().any(|r| state.is_own_key(&r.key)) => {
                    let mut view = state.clone();
                    for r in &past.committed {
                        view.apply(r)?;
                    }
                    view.lease() == state.lease()
                }
                _ => false,
            },
        };
        if complete {
            self.show(state, position, Change::Lapsed, shown)?;
        } else {
            // Not decided yet: the next poll (at most one poll wait away)
            // reads on, and the check comes again after it.
            tracing::debug!(
                position,
                "the lease is past its deadline; the view is not complete yet"
            );
        }
        Ok(())
    }
}
