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
//! renew interval. Only the broker's fence ([`Error::Fenced`]) ends it; a
//! transient failure (a broker down, a timeout) is retried with backoff and
//! reported, because a renewal that succeeds later was accepted under the same
//! epoch and so nobody else took over. A member never calls itself leader
//! again without minting a newer epoch.
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

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, SystemClock};
use crate::codec::{encode_key, encode_lease, encode_registration, Key, Lease, Registration};
use crate::election::{evaluate, ElectionOptions, Step};
use crate::error::{Error, Result};
use crate::partition::role_partition;
use crate::state::{RoleState, RosterEntry};
use crate::token::FencingToken;
use crate::transport::{Coordinator, OutRecord, StateReader, Transport};

/// Options of [`acquire_leadership`]: the election options, the clock, and
/// how the member waits and retries.
#[derive(Clone)]
pub struct LeadershipOptions {
    /// Partitions, lease duration, renew interval and challenge stagger.
    pub election: ElectionOptions,
    /// The clock that lease instants and every wait use.
    pub clock: Arc<dyn Clock>,
    /// The longest one poll of the state partition waits for new records.
    pub poll_wait: Duration,
    /// The first retry delay after a transient error; doubles up to
    /// [`LeadershipOptions::max_backoff`].
    pub initial_backoff: Duration,
    /// The longest retry delay.
    pub max_backoff: Duration,
    /// Cancels a waiting [`acquire_leadership`] (dropping its future does too).
    pub cancel: CancellationToken,
}

impl std::fmt::Debug for LeadershipOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeadershipOptions")
            .field("election", &self.election)
            .field("poll_wait", &self.poll_wait)
            .field("initial_backoff", &self.initial_backoff)
            .field("max_backoff", &self.max_backoff)
            .finish_non_exhaustive()
    }
}

impl Default for LeadershipOptions {
    /// The spec's defaults (16 partitions, 30 s lease, 10 s renew interval,
    /// 5 s stagger), the system clock, 1 s polls, backoff from 100 ms to 5 s.
    fn default() -> Self {
        LeadershipOptions {
            election: ElectionOptions::default(),
            clock: Arc::new(SystemClock),
            poll_wait: Duration::from_secs(1),
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            cancel: CancellationToken::new(),
        }
    }
}

impl LeadershipOptions {
    /// The partition count of `__coordination_state`.
    pub fn with_partitions(mut self, partitions: i32) -> Self {
        self.election = self.election.with_partitions(partitions);
        self
    }

    /// How long a lease lasts.
    pub fn with_lease_duration(mut self, d: Duration) -> Self {
        self.election = self.election.with_lease_duration(d);
        self
    }

    /// How often the holder renews.
    pub fn with_renew_interval(mut self, d: Duration) -> Self {
        self.election = self.election.with_renew_interval(d);
        self
    }

    /// The delay between ranks of challengers.
    pub fn with_challenge_stagger(mut self, d: Duration) -> Self {
        self.election = self.election.with_challenge_stagger(d);
        self
    }

    /// The clock (inject a [`crate::ManualClock`] in tests).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The longest one poll of the state partition waits.
    pub fn with_poll_wait(mut self, d: Duration) -> Self {
        self.poll_wait = d;
        self
    }

    /// The retry backoff after transient errors.
    pub fn with_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max;
        self
    }

    /// A token that cancels a waiting [`acquire_leadership`].
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }

    /// Checks every option and their relationships; the error names the values.
    pub fn validate(&self) -> Result<()> {
        self.election.validate()?;
        if self.poll_wait.is_zero() {
            return Err(Error::InvalidArgument(
                "poll wait must be above zero, got 0s".into(),
            ));
        }
        if self.initial_backoff.is_zero() || self.max_backoff < self.initial_backoff {
            return Err(Error::InvalidArgument(format!(
                "backoff must be above zero with max ({:?}) at least the initial ({:?})",
                self.max_backoff, self.initial_backoff
            )));
        }
        Ok(())
    }
}

fn millis(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

/// Exponential backoff on the member's clock.
struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    fn new(o: &LeadershipOptions) -> Self {
        Backoff {
            next: o.initial_backoff,
            max: o.max_backoff,
        }
    }
    fn take(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.max);
        d
    }
    fn reset(&mut self, o: &LeadershipOptions) {
        self.next = o.initial_backoff;
    }
}

/// What a member of a role needs, shared by the acquire loop, the renewal
/// task and the [`Leadership`] handle.
struct Member {
    transport: Arc<dyn Transport>,
    role: String,
    member: String,
    partition: i32,
    lease_key: Vec<u8>,
    registration_key: Vec<u8>,
    options: LeadershipOptions,
}

impl Member {
    fn new(
        transport: Arc<dyn Transport>,
        role: &str,
        member: &str,
        options: LeadershipOptions,
    ) -> Result<Self> {
        options.validate()?;
        if role.is_empty() {
            return Err(Error::InvalidArgument("role must not be empty".into()));
        }
        if member.is_empty() {
            return Err(Error::InvalidArgument("member must not be empty".into()));
        }
        let registration_key = encode_key(&Key::registration(role, member))?;
        let lease_key = encode_key(&Key::lease(role))?;
        let partition = role_partition(role, options.election.partitions)?;
        Ok(Member {
            transport,
            role: role.to_owned(),
            member: member.to_owned(),
            partition,
            lease_key,
            registration_key,
            options,
        })
    }

    fn now(&self) -> i64 {
        self.options.clock.now_millis()
    }

    fn lease_value(&self, token: FencingToken, now: i64) -> Result<(Vec<u8>, Lease)> {
        let lease = Lease {
            member: self.member.clone(),
            token,
            granted_at: now,
            deadline: now.saturating_add(millis(self.options.election.lease_duration)),
        };
        Ok((encode_lease(&lease)?, lease))
    }

    async fn register(&self) -> Result<i64> {
        let value = encode_registration(&Registration {
            member: self.member.clone(),
            registered_at: self.now(),
        })?;
        let offset = self
            .transport
            .append(self.partition, self.registration_key.clone(), Some(value))
            .await?;
        tracing::info!(role = %self.role, member = %self.member, partition = self.partition, offset, "registered");
        Ok(offset)
    }

    async fn deregister(&self) -> Result<()> {
        self.transport
            .append(self.partition, self.registration_key.clone(), None)
            .await?;
        tracing::info!(role = %self.role, member = %self.member, "deregistered");
        Ok(())
    }

    /// Runs `op` until it succeeds or fails with a non-transient error,
    /// backing off on the member's clock between tries. Stops when `cancel`
    /// fires.
    async fn retry<T, F, Fut>(&self, what: &str, cancel: &CancellationToken, mut op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut backoff = Backoff::new(&self.options);
        loop {
            let r = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(Error::Cancelled),
                r = op() => r,
            };
            match r {
                Err(e) if e.is_transient() => {
                    let d = backoff.take();
                    tracing::warn!(role = %self.role, member = %self.member, error = %e, retry_in = ?d, "{what} failed; retrying");
                    tokio::select! {
                        biased;
                        _ = cancel.cancelled() => return Err(Error::Cancelled),
                        _ = self.options.clock.sleep(d) => {}
                    }
                }
                other => return other,
            }
        }
    }
}

/// The follower of a role's partition: a state kept current from a long poll.
struct Follower {
    state: RoleState,
    next_offset: i64,
}

impl Follower {
    async fn start(m: &Member, cancel: &CancellationToken) -> Result<Self> {
        let records = m
            .retry("reading the state partition", cancel, || {
                m.transport.read_partition(m.partition)
            })
            .await?;
        let next_offset = records.last().map_or(0, |r| r.offset + 1);
        let state = RoleState::build(m.role.clone(), &records)?;
        Ok(Follower { state, next_offset })
    }

    /// One poll: waits up to `wait` for new committed records and applies them.
    async fn poll(&mut self, m: &Member, wait: Duration) -> Result<usize> {
        let batch = m
            .transport
            .poll_partition(m.partition, self.next_offset, wait)
            .await?;
        let n = batch.records.len();
        for r in &batch.records {
            self.state.apply(r)?;
        }
        self.next_offset = self.next_offset.max(batch.next_offset);
        if let Some(last) = batch.records.last() {
            self.next_offset = self.next_offset.max(last.offset + 1);
        }
        Ok(n)
    }

    /// One poll that rides out a transient error: it is reported and
    /// followed by a backoff pause, and the poll then counts as empty.
    async fn poll_or_back_off(
        &mut self,
        m: &Member,
        wait: Duration,
        cancel: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Result<usize> {
        let r = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(Error::Cancelled),
            r = self.poll(m, wait) => r,
        };
        match r {
            Ok(n) => {
                backoff.reset(&m.options);
                Ok(n)
            }
            Err(e) if e.is_transient() => {
                let d = backoff.take();
                tracing::warn!(role = %m.role, member = %m.member, error = %e, retry_in = ?d, "following the state partition failed; retrying");
                tokio::select! {
                    biased;
                    _ = cancel.cancelled() => Err(Error::Cancelled),
                    _ = m.options.clock.sleep(d) => Ok(0),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Polls until the record at `offset` has been read.
    async fn catch_up(
        &mut self,
        m: &Member,
        offset: i64,
        cancel: &CancellationToken,
    ) -> Result<()> {
        let mut backoff = Backoff::new(&m.options);
        while self.next_offset <= offset {
            self.poll_or_back_off(m, m.options.poll_wait, cancel, &mut backoff)
                .await?;
        }
        Ok(())
    }
}

/// Deregisters a member whose acquire was abandoned (cancelled, dropped, or
/// failed) so that nothing is left half done.
struct AcquireGuard {
    cleanup: Option<Cleanup>,
}

/// What an abandoned candidate must undo: the transport, the role, the
/// partition and the registration key to tombstone.
type Cleanup = (Arc<dyn Transport>, String, i32, Vec<u8>);

impl AcquireGuard {
    fn arm(m: &Member) -> Self {
        AcquireGuard {
            cleanup: Some((
                m.transport.clone(),
                m.role.clone(),
                m.partition,
                m.registration_key.clone(),
            )),
        }
    }
    fn disarm(&mut self) {
        self.cleanup = None;
    }
    async fn run(&mut self) {
        if let Some(c) = self.cleanup.take() {
            undo(c).await;
        }
    }
}

/// Drops the candidate's producer, tells the transport it left the role,
/// and deregisters it.
async fn undo((t, role, partition, key): Cleanup) {
    let _ = t.release(&role).await;
    t.prepare_epoch(&role, None);
    if let Err(e) = t.append(partition, key, None).await {
        tracing::warn!(role = %role, error = %e, "could not deregister an abandoned candidate");
    }
}

impl Drop for AcquireGuard {
    fn drop(&mut self) {
        if let Some(c) = self.cleanup.take() {
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(undo(c));
            }
        }
    }
}

/// Registers `member` in `role`, waits for its turn, mints the epoch and
/// writes the first lease; returns the held [`Leadership`].
///
/// Options are validated first ([`Error::InvalidArgument`] names the values).
/// Waiting ends with [`Error::Cancelled`] when `options.cancel` fires;
/// dropping the future cancels too. Either way the member is deregistered and
/// any producer it minted is dropped, so nothing is left half done.
///
/// Transient transport errors are retried with backoff; a fatal one (an
/// authorization failure, malformed state of this role) is returned.
pub async fn acquire_leadership(
    transport: Arc<dyn Transport>,
    role: &str,
    member: &str,
    options: LeadershipOptions,
) -> Result<Leadership> {
    let m = Member::new(transport, role, member, options)?;
    m.transport.check_options(&m.options.election)?;
    let cancel = m.options.cancel.clone();
    let mut guard = AcquireGuard::arm(&m);
    match acquire_loop(&m, &cancel).await {
        Ok(token_lease) => {
            guard.disarm();
            Ok(Leadership::start(m, token_lease))
        }
        Err(e) => {
            guard.run().await;
            Err(e)
        }
    }
}

async fn acquire_loop(m: &Member, cancel: &CancellationToken) -> Result<Lease> {
    let mut follower = Follower::start(m, cancel).await?;
    let offset = m.retry("registering", cancel, || m.register()).await?;
    m.transport
        .prepare_epoch(&m.role, Some(m.options.election.lease_duration));
    follower.catch_up(m, offset, cancel).await?;
    let mut last_wait: Option<(i64, usize)> = None;
    let mut backoff = Backoff::new(&m.options);
    // After a lost challenge: the token that beat ours is newer than `lost`;
    // hold off until its lease shows up or until `until` passes (its holder
    // may have died between minting and writing).
    let mut lost: Option<(FencingToken, i64)> = None;
    loop {
        let now = m.now();
        let mut step = evaluate(&follower.state, &m.member, None, now, &m.options.election);
        if let Some((token, until)) = lost {
            let superseded = follower.state.lease().is_some_and(|l| l.token > token);
            if superseded || now >= until {
                lost = None;
            } else if step == Step::Challenge {
                step = Step::WaitUntil { at: until, rank: 0 };
            }
        }
        match step {
            Step::Register => {
                let offset = m.retry("registering", cancel, || m.register()).await?;
                follower.catch_up(m, offset, cancel).await?;
            }
            Step::WaitUntil { at, rank } => {
                if last_wait != Some((at, rank)) {
                    tracing::info!(role = %m.role, member = %m.member, rank, challenge_at = at, "waiting");
                    last_wait = Some((at, rank));
                }
                let wait = m.options.poll_wait;
                tokio::select! {
                    biased;
                    _ = cancel.cancelled() => return Err(Error::Cancelled),
                    _ = m.options.clock.sleep_until(at) => {}
                    r = follower.poll_or_back_off(m, wait, cancel, &mut backoff) => { r?; }
                }
            }
            Step::Challenge => {
                // Catch up first: a lease written a moment ago changes the step.
                match follower.poll(m, Duration::ZERO).await {
                    Ok(n) if n > 0 => continue,
                    Ok(_) => {}
                    Err(e) if e.is_transient() => continue,
                    Err(e) => return Err(e),
                }
                tracing::info!(role = %m.role, member = %m.member, "challenging");
                let lease_duration = m.options.election.lease_duration;
                let token = m
                    .retry("minting the epoch", cancel, || {
                        m.transport.acquire_epoch(&m.role, lease_duration)
                    })
                    .await?;
                let (value, lease) = m.lease_value(token, m.now())?;
                let written = m
                    .retry("writing the first lease", cancel, || {
                        m.transport.write_lease(
                            &m.role,
                            m.partition,
                            m.lease_key.clone(),
                            Some(value.clone()),
                        )
                    })
                    .await;
                match written {
                    Ok(()) => {
                        tracing::info!(role = %m.role, member = %m.member, token = %token, deadline = lease.deadline, "elected");
                        return Ok(lease);
                    }
                    Err(Error::Fenced(why)) => {
                        tracing::info!(role = %m.role, member = %m.member, token = %token, %why, "lost the challenge to a newer epoch");
                        let _ = m.transport.release(&m.role).await;
                        lost = Some((token, m.now().saturating_add(millis(lease_duration))));
                    }
                    Err(e) => return Err(e),
                }
            }
            // With no token held the step is never RenewAt or StandDown;
            // follow the partition and evaluate again.
            Step::RenewAt(_) | Step::StandDown => {
                follower
                    .poll_or_back_off(m, m.options.poll_wait, cancel, &mut backoff)
                    .await?;
            }
        }
    }
}

/// Why a [`Leadership`] ended, shared by every clone of its error.
pub type EndReason = Arc<Error>;

struct Held {
    member: Member,
    token: FencingToken,
    lease: Mutex<Lease>,
    ended: watch::Sender<Option<EndReason>>,
    /// Serialises renewals, guarded writes and resign on the epoch-bound producer.
    writes: tokio::sync::Mutex<()>,
    resigned: tokio::sync::Mutex<bool>,
    stop: CancellationToken,
    renewal_failures: Mutex<u32>,
}

impl Held {
    fn end(&self, reason: Error) {
        self.stop.cancel();
        self.ended.send_if_modified(|slot| {
            if slot.is_none() {
                *slot = Some(Arc::new(reason));
                true
            } else {
                false
            }
        });
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
    }
}

impl Leadership {
    fn start(member: Member, lease: Lease) -> Leadership {
        let (ended, _) = watch::channel(None);
        let held = Arc::new(Held {
            token: lease.token,
            member,
            lease: Mutex::new(lease),
            ended,
            writes: tokio::sync::Mutex::new(()),
            resigned: tokio::sync::Mutex::new(false),
            stop: CancellationToken::new(),
            renewal_failures: Mutex::new(0),
        });
        tokio::spawn(renew_loop(held.clone()));
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

    /// Writes `records` in one transaction of the epoch-bound producer,
    /// serialised with the renewals. The broker fences a deposed leader's
    /// write: it fails with [`Error::Fenced`], none of its records become
    /// visible, and the leadership ends.
    pub async fn write(&self, records: Vec<OutRecord>) -> Result<()> {
        let _w = self.held.writes.lock().await;
        if let Some(e) = self.err() {
            return Err(ended_error(&e));
        }
        let m = &self.held.member;
        match m.transport.write_guarded(&m.role, records).await {
            Err(Error::Fenced(why)) => {
                tracing::warn!(role = %m.role, member = %m.member, token = %self.held.token, %why, "fenced");
                self.held.end(Error::Fenced(why.clone()));
                Err(Error::Fenced(why))
            }
            other => other,
        }
    }

    /// Gives the role up: stops renewing, mints one more epoch (so the
    /// resigned token is superseded), clears the lease with a tombstone
    /// written through that producer, deregisters and drops the producer. The
    /// next standby in rank takes over without waiting for the old deadline.
    ///
    /// Idempotent: a second call returns `Ok(())`. After a fence it only
    /// deregisters.
    pub async fn resign(&self) -> Result<()> {
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
                    m.transport
                        .write_lease(&m.role, m.partition, m.lease_key.clone(), None)
                })
                .await?;
                Ok::<_, Error>(successor)
            };
            match cleared.await {
                Ok(successor) => {
                    tracing::info!(role = %m.role, member = %m.member, token = %self.held.token, superseded_by = %successor, "resigned");
                }
                Err(e) => {
                    tracing::warn!(role = %m.role, member = %m.member, error = %e, "resign could not clear the lease; standbys take over at the deadline");
                    result = Err(e);
                }
            }
        }
        let _ = m.transport.release(&m.role).await;
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

/// The error to return for an operation on an ended leadership.
fn ended_error(reason: &Error) -> Error {
    match reason {
        Error::Fenced(why) => Error::Fenced(why.clone()),
        Error::Resigned => Error::Resigned,
        other => Error::fatal("the leadership ended", other.to_string()),
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
        let (value, lease) = match m.lease_value(held.token, now) {
            Ok(v) => v,
            Err(e) => {
                held.end(e);
                return;
            }
        };
        match m
            .transport
            .write_lease(&m.role, m.partition, m.lease_key.clone(), Some(value))
            .await
        {
            Ok(()) => {
                tracing::debug!(role = %m.role, member = %m.member, token = %held.token, deadline = lease.deadline, "renewed");
                *held.lease.lock().unwrap_or_else(|e| e.into_inner()) = lease;
                *held
                    .renewal_failures
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = 0;
                backoff.reset(&m.options);
                next_at = now.saturating_add(renew);
            }
            Err(Error::Fenced(why)) => {
                tracing::warn!(role = %m.role, member = %m.member, token = %held.token, %why, "fenced");
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
                tracing::warn!(role = %m.role, member = %m.member, token = %held.token, error = %e, failures, retry_in = ?d, "renewal failing");
                next_at = now.saturating_add(millis(d));
            }
            Err(e) => {
                tracing::error!(role = %m.role, member = %m.member, token = %held.token, error = %e, "renewal failed fatally");
                held.end(e);
                return;
            }
        }
    }
}

/// The authority of a role as its transaction coordinator reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeadershipStatus {
    /// The newest token the coordinator minted for the role, or
    /// [`crate::NO_EPOCH`] when no member has taken it.
    pub token: FencingToken,
}

impl LeadershipStatus {
    /// True when `token` is the role's current token: a writer holding it is
    /// authoritative. [`crate::NO_EPOCH`] is never authoritative.
    pub fn authoritative(&self, token: &FencingToken) -> bool {
        !token.is_no_epoch() && *token == self.token
    }
}

/// Asks the role's transaction coordinator for the current token: one
/// DescribeTransactions request once the coordinator is known.
pub async fn describe_leadership(
    coordinator: &dyn Coordinator,
    role: &str,
) -> Result<LeadershipStatus> {
    if role.is_empty() {
        return Err(Error::InvalidArgument("role must not be empty".into()));
    }
    Ok(LeadershipStatus {
        token: coordinator.describe_epoch(role).await?,
    })
}

/// The roster (with ranks) and the lease of a role, for tools that report a
/// cluster's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleStateReport {
    /// The role.
    pub role: String,
    /// The partition of `__coordination_state` that holds it.
    pub partition: i32,
    /// The roster in rank order; the rank is the index.
    pub roster: Vec<RosterEntry>,
    /// The current lease (member, token, granted at, deadline), if any.
    pub lease: Option<Lease>,
}

/// Reads the roster and the lease of `role` from its partition.
pub async fn describe_role_state(
    reader: &dyn StateReader,
    role: &str,
    partitions: i32,
) -> Result<RoleStateReport> {
    let partition = role_partition(role, partitions)?;
    let records = reader.read_partition(partition).await?;
    let state = RoleState::build(role, &records)?;
    Ok(RoleStateReport {
        role: role.to_owned(),
        partition,
        roster: state.roster().cloned().collect(),
        lease: state.lease().cloned(),
    })
}
