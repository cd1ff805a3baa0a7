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

mod watch;

use watch::RoleWatch;

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
