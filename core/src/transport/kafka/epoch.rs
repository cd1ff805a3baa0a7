//! The held epoch of a role on Kafka: [`KafkaEpoch`], the owned handle of the
//! producer id and epoch that a mint returned.
//!
//! A mint returns one `KafkaEpoch`; every lease write and guarded write of
//! that term goes through it, one transaction at a time, through the
//! transport's protocol client, and dropping it releases the epoch (in a
//! task, aborting a transaction it left open). Two epochs of one role, minted
//! on one transport or on two, write as their own producer epochs: the older
//! one is fenced by the broker.
//!
//! # How the epoch drives its writer
//!
//! The writer ([`ProtocolLease`]) is a state machine whose table is in the
//! module doc of `protocol_lease`; the epoch holds it behind one lock and
//! asks it for:
//!
//! * a write ([`Ask`]): under the lock, in a task of its own ([`Run`]),
//!   so a caller that stops waiting never leaves a transaction half done.
//!   Its [`Outcome`] becomes the caller's answer ([`Outcome::at_epoch`]);
//!   a dropped writer is released, and every later write fails with why.
//! * after a lease commits, the next transaction opened ahead (rows H1 to
//!   H4), in the same task after a pause with the lock let go, unless a
//!   write, a supersede or the release was asked first;
//! * before a supersede's bump, the abort of a transaction opened ahead
//!   (rows H5, H6);
//! * when the epoch is dropped, the release (rows R1 to R3).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Mutex as AsyncMutex;

use super::client::BumpAnswer;
use super::protocol_lease::{Gone, Outcome, ProtocolLease, Write};
use super::{KafkaClient, KafkaConfig};
use crate::error::{Error, Result};
use crate::token::FencingToken;
use crate::transport::{
    check_guarded, check_offsets, check_tombstone_and_deregistration, CommittedOffset,
    ConsumedOffsets, LeaseWriter, OutRecord, StateRecord, Superseded,
};

/// How long releasing a producer waits to abort a transaction it left open.
const RELEASE_ABORT_BOUND: Duration = Duration::from_secs(5);

/// How long opening the next transaction ahead may take (it holds the
/// epoch's writer meanwhile; past it, the next write adds the partition
/// itself).
const AHEAD_BOUND: Duration = Duration::from_millis(250);

/// How long after a lease's commit the next transaction is opened ahead:
/// as long as the commit took, within these bounds. The coordinator accepts
/// the next AddPartitionsToTxn only once the commit's markers are written and
/// it has recorded the transaction complete, about two replicated writes
/// after its answer to the EndTxn; asked sooner, it answers
/// CONCURRENT_TRANSACTIONS. Asked at once and every millisecond after (the
/// busy pauses of the hand-over's path), it would be asked several times
/// per commit with many roles renewing (`docs/benchmarks/scale.md`), so the
/// open-ahead waits first. The writer's lock is free during the pause: a
/// write that comes first adds its partition itself.
const AHEAD_AFTER_MIN: Duration = Duration::from_millis(2);
const AHEAD_AFTER_MAX: Duration = Duration::from_millis(50);

type Slot = Arc<AsyncMutex<Option<ProtocolLease>>>;

mod ask;
use ask::Ask;

/// The held epoch of one role: implements [`LeaseWriter`].
///
/// Built by [`super::KafkaTransport::mint_epoch`] (or
/// [`crate::transport::Coordinator::acquire_epoch`], boxed).
pub struct KafkaEpoch {
    role: String,
    /// The epoch's token: the mint's (a test may replace it,
    /// [`KafkaEpoch::assume_token`]).
    token: Arc<StdMutex<FencingToken>>,
    /// The lease (the transaction timeout) in milliseconds.
    lease_ms: u64,
    client: KafkaClient,
    state_topic: String,
    timeout: Duration,
    slot: Slot,
    /// Why the producer is gone (a fence or a fatal error), for every later
    /// write.
    gone: Arc<StdMutex<Option<Gone>>>,
    /// See [`LeaseWriter::take_resolved`].
    resolved: Arc<StdMutex<Option<bool>>>,
    /// Counts what the writer was asked to do (each transaction, a
    /// supersede, the release), changed under the slot's lock: a transaction
    /// opened ahead after a pause is opened only if nothing came first.
    asked: Arc<AtomicU64>,
}

impl std::fmt::Debug for KafkaEpoch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaEpoch")
            .field("role", &self.role)
            .field("token", &self.token())
            .finish_non_exhaustive()
    }
}

impl KafkaEpoch {
    pub(super) fn new(
        config: &KafkaConfig,
        client: KafkaClient,
        role: String,
        lease_ms: u64,
        producer: ProtocolLease,
    ) -> KafkaEpoch {
        KafkaEpoch {
            role,
            token: Arc::new(StdMutex::new(producer.token)),
            lease_ms,
            client,
            state_topic: config.state_topic().to_owned(),
            timeout: config.operation_timeout(),
            slot: Arc::new(AsyncMutex::new(Some(producer))),
            gone: Arc::default(),
            resolved: Arc::default(),
            asked: Arc::default(),
        }
    }

    /// True while this epoch can still write (its producer not fenced, not
    /// failed fatally). For tests.
    pub async fn has_producer(&self) -> bool {
        self.slot.lock().await.is_some()
    }

    /// Fault injection, for tests of the fence: writes one lease record
    /// inside a transaction of this epoch and leaves that transaction
    /// **open**, as a holder that stalls or dies mid-transaction would. The
    /// record stays invisible to read_committed readers, and the open
    /// transaction holds the partition's last stable offset back, until the
    /// next write of this epoch commits it, the coordinator aborts it
    /// (transaction timeout, or a new InitProducerId for the role), or the
    /// epoch is dropped (which aborts it).
    #[doc(hidden)]
    pub async fn write_lease_uncommitted(&self, record: StateRecord) -> Result<()> {
        let record = self.state_record(record);
        self.transact(
            "write_lease_uncommitted",
            (vec![record], None),
            Ask::LeftOpen,
            self.timeout,
        )
        .await
    }

    /// Fault injection, for tests of the fence: makes the epoch write as
    /// `token` from now on, as a writer with a stale or wrong token would.
    #[doc(hidden)]
    pub async fn assume_token(&self, token: FencingToken) {
        if let Some(p) = self.slot.lock().await.as_mut() {
            p.token = token;
        }
        *self.token.lock().unwrap_or_else(|e| e.into_inner()) = token;
    }

    fn state_record(&self, r: StateRecord) -> OutRecord {
        OutRecord {
            topic: self.state_topic.clone(),
            partition: Some(r.partition),
            key: Some(r.key),
            value: r.value,
            headers: Vec::new(),
        }
    }

    fn gone_error(&self, what: &str) -> Option<Error> {
        let gone = self.gone.lock().unwrap_or_else(|e| e.into_inner());
        gone.as_ref().map(|g| g.error(&self.role, what))
    }

    /// One transaction of the producer within `within` (bounded by the
    /// operation timeout too), with the error handling of rule 2 (see
    /// [`ProtocolLease::transact`]). The transaction runs in its own task
    /// ([`Run`]), holding the writer's lock, so a caller that stops
    /// waiting never leaves it half done: the epoch's transaction state
    /// and the coordinator's stay in step.
    async fn transact(
        &self,
        what: &str,
        (records, offsets): (Vec<OutRecord>, Option<ConsumedOffsets>),
        ask: Ask,
        within: Duration,
    ) -> Result<()> {
        // A lease's commit opens the next transaction ahead, on the lease's
        // own partition (see the `ahead` module of `protocol_lease`).
        let ahead = match (ask, records.first()) {
            (Ask::Lease, Some(r)) => r.partition.map(|p| (r.topic.clone(), p)),
            _ => None,
        };
        if let Some(e) = self.gone_error(what) {
            return Err(e);
        }
        // The bound counts from the call: a transaction of this epoch still
        // completing (a caller that stopped waiting for it) takes the slot's
        // time out of it, never more.
        let deadline = super::deadline_in(within.min(self.timeout));
        let Ok(guard) = tokio::time::timeout_at(deadline, self.slot.clone().lock_owned()).await
        else {
            return Err(Error::transient(
                format!("{what} for role {}", crate::error::quote(&self.role)),
                format!(
                    "an earlier write of this epoch was still being completed after {}; \
                     nothing of this one was sent",
                    crate::human::duration(within)
                ),
            ));
        };
        if guard.is_none() {
            return Err(self.gone_error(what).unwrap_or_else(|| {
                Error::fatal(
                    format!("{what} for role {}", crate::error::quote(&self.role)),
                    "released",
                )
            }));
        }
        // Under the lock: this write is the last thing asked of the writer.
        let this_write = self.asked.fetch_add(1, Ordering::SeqCst) + 1;
        let run = Run {
            role: self.role.clone(),
            what: what.to_owned(),
            gone: Arc::clone(&self.gone),
            resolved: Arc::clone(&self.resolved),
            token: Arc::clone(&self.token),
            slot: Arc::clone(&self.slot),
            asked: Arc::clone(&self.asked),
            this_write,
            ahead,
        };
        let (answer, answered) = tokio::sync::oneshot::channel();
        tokio::spawn(run.go(guard, ask.write(records, offsets), deadline, answer));
        answered.await.unwrap_or_else(|_| {
            Err(Error::fatal(
                "a lease transaction task",
                "the task ended without an answer (it panicked)",
            ))
        })
    }
}

/// One transaction of an epoch, in its own task: what it needs of the
/// epoch's shared cells.
struct Run {
    role: String,
    what: String,
    gone: Arc<StdMutex<Option<Gone>>>,
    resolved: Arc<StdMutex<Option<bool>>>,
    token: Arc<StdMutex<FencingToken>>,
    slot: Slot,
    asked: Arc<AtomicU64>,
    /// What [`KafkaEpoch::asked`] counted when this write was asked.
    this_write: u64,
    /// The lease's partition, to open the next transaction ahead on.
    ahead: Option<(String, i32)>,
}

impl Run {
    /// Runs `write` by `deadline` under the writer's lock `guard`, sends
    /// the answer as soon as the transaction is done (dropping the writer
    /// when the outcome says so), then, after a lease, opens the next one
    /// ahead ([`Run::open_ahead`]).
    async fn go(
        self,
        mut guard: tokio::sync::OwnedMutexGuard<Option<ProtocolLease>>,
        write: Write,
        deadline: tokio::time::Instant,
        answer: tokio::sync::oneshot::Sender<Result<()>>,
    ) {
        let producer = guard
            .as_mut()
            .expect("checked by the caller, under the same lock");
        let started = tokio::time::Instant::now();
        let result = producer
            .transact(&self.role, &self.what, write, deadline)
            .await;
        if let Some(committed) = producer.resolved.take() {
            *self.resolved.lock().unwrap_or_else(|e| e.into_inner()) = Some(committed);
        }
        *self.token.lock().unwrap_or_else(|e| e.into_inner()) = producer.token;
        let result = result.map_err(|outcome: Outcome| {
            let (e, gone) = outcome.at_epoch();
            if let Some(gone) = gone {
                *self.gone.lock().unwrap_or_else(|e| e.into_inner()) = Some(gone);
                if let Some(p) = guard.take() {
                    tracing::info!(token = %p.token, error = %e, "dropping the epoch's producer");
                    release(&self.role, p);
                }
            }
            e
        });
        let opened = result.is_ok();
        // The caller may have stopped waiting: nothing to tell then.
        let _ = answer.send(result);
        if opened && guard.is_some() {
            drop(guard);
            self.open_ahead(started.elapsed()).await;
        }
    }

    /// Opens the next transaction ahead on the lease's partition, after a
    /// pause as long as the commit `took` ([`AHEAD_AFTER_MIN`] to
    /// [`AHEAD_AFTER_MAX`]) with the writer's lock let go, unless anything
    /// else was asked of the writer meanwhile.
    async fn open_ahead(self, took: Duration) {
        let Some((topic, partition)) = self.ahead else {
            return;
        };
        tokio::time::sleep(took.clamp(AHEAD_AFTER_MIN, AHEAD_AFTER_MAX)).await;
        let mut guard = self.slot.lock_owned().await;
        // A write, a supersede or the release came first: it did what
        // it needed (a write adds its partition itself).
        if self.asked.load(Ordering::SeqCst) != self.this_write {
            return;
        }
        if let Some(producer) = guard.as_mut() {
            producer
                .open_ahead(
                    &self.role,
                    &topic,
                    partition,
                    super::deadline_in(AHEAD_BOUND),
                )
                .await;
        }
    }
}

/// Lets go of the writer of an epoch of `role`: in a task, aborts a
/// transaction it left open (bounded by [`RELEASE_ABORT_BOUND`]). Without a
/// runtime, the coordinator aborts an open transaction at the transaction
/// timeout.
pub(super) fn release(role: &str, p: ProtocolLease) {
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        handle.spawn(p.release(role.to_owned(), RELEASE_ABORT_BOUND));
    }
}

impl Drop for KafkaEpoch {
    fn drop(&mut self) {
        // Nothing is opened ahead after the release.
        self.asked.fetch_add(1, Ordering::SeqCst);
        let slot = Arc::clone(&self.slot);
        let role = std::mem::take(&mut self.role);
        // A transaction of this epoch may still run in its task, holding the
        // lock: wait for it, then release.
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move {
                    if let Some(p) = slot.lock().await.take() {
                        release(&role, p);
                    }
                });
            }
            Err(_) => {
                if let Ok(mut guard) = slot.try_lock() {
                    if let Some(p) = guard.take() {
                        release(&role, p);
                    }
                }
            }
        }
    }
}

#[async_trait]
impl LeaseWriter for KafkaEpoch {
    fn role(&self) -> &str {
        &self.role
    }

    fn token(&self) -> FencingToken {
        *self.token.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn write_lease(&self, record: StateRecord, within: Duration) -> Result<()> {
        super::check_partition(record.partition)?;
        let ask = if record.value.is_some() {
            Ask::Lease
        } else {
            Ask::Tombstone
        };
        let record = self.state_record(record);
        self.transact("write_lease", (vec![record], None), ask, within)
            .await
    }

    async fn write_lease_and_deregister(
        &self,
        tombstone: StateRecord,
        deregistration: StateRecord,
        within: Duration,
    ) -> Result<()> {
        check_tombstone_and_deregistration(&tombstone, &deregistration)?;
        super::check_partition(tombstone.partition)?;
        // One partition, so one batch of the transaction: the tombstone
        // first, then the deregistration.
        let records = vec![
            self.state_record(tombstone),
            self.state_record(deregistration),
        ];
        self.transact(
            "write_lease_and_deregister",
            (records, None),
            Ask::Tombstone,
            within,
        )
        .await
    }

    async fn write_guarded(&self, records: Vec<OutRecord>, within: Duration) -> Result<()> {
        check_guarded(&records, &self.state_topic)?;
        self.transact("a guarded write", (records, None), Ask::Guarded, within)
            .await
    }

    async fn write_guarded_with_offsets(
        &self,
        records: Vec<OutRecord>,
        offsets: ConsumedOffsets,
        within: Duration,
    ) -> Result<()> {
        check_guarded(&records, &self.state_topic)?;
        check_offsets(&offsets)?;
        let offsets = (!offsets.offsets.is_empty()).then_some(offsets);
        self.transact("a guarded write", (records, offsets), Ask::Guarded, within)
            .await
    }

    async fn committed_offsets(
        &self,
        group: &str,
        partitions: &[(String, Vec<i32>)],
        within: Duration,
    ) -> Result<Vec<CommittedOffset>> {
        self.client
            .committed_offsets(group, partitions, within)
            .await
    }

    fn take_resolved(&self) -> Option<bool> {
        self.resolved
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    async fn supersede(&self, within: Duration) -> Result<Superseded> {
        let timeout_ms = i32::try_from(self.lease_ms).unwrap_or(i32::MAX);
        let deadline = super::deadline_in(within);
        // Under the writer's lock: a transaction of this epoch still
        // running (or being opened ahead after a lease) finishes first, and
        // none starts before the bump is answered.
        let Ok(mut guard) = tokio::time::timeout_at(deadline, self.slot.lock()).await else {
            return Err(Error::transient(
                format!(
                    "superseding the epoch of role {}",
                    crate::error::quote(&self.role)
                ),
                format!(
                    "a write of this epoch was still being completed after {}; nothing was sent",
                    crate::human::duration(within)
                ),
            ));
        };
        // Nothing is opened ahead after this (the bump ends the term).
        self.asked.fetch_add(1, Ordering::SeqCst);
        // A transaction opened ahead is aborted first: found `Ongoing`, the
        // coordinator would abort it with a bump of its own, and this bump
        // would then find a newer epoch than the one it asks about.
        if let Some(producer) = guard.as_mut() {
            match producer.abort_ahead(&self.role, deadline).await {
                Ok(()) => {}
                Err(Outcome::Drop(e)) if e.means_fenced() => {
                    tracing::debug!(token = %self.token(), error = %e, "not bumped: fenced while aborting the transaction opened ahead");
                    return Ok(Superseded::AlreadySuperseded);
                }
                Err(Outcome::Keep(e) | Outcome::Drop(e)) => return Err(e),
            }
        }
        let within = deadline.saturating_duration_since(tokio::time::Instant::now());
        match self
            .client
            .bump_if_current(&self.role, self.token(), timeout_ms, within)
            .await?
        {
            BumpAnswer::Bumped(t) => Ok(Superseded::Bumped(t)),
            BumpAnswer::NotCurrent(why) => {
                tracing::debug!(token = %self.token(), %why, "not bumped: a newer epoch exists");
                Ok(Superseded::AlreadySuperseded)
            }
        }
    }
}
