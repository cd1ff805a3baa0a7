//! The epoch-bound (transactional) producer of a role: rules 1 and 2.
//!
//! One [`LeaseProducer`] per role and transport. It is built by
//! `acquire_epoch` with `transactional.id = <role>` and
//! `transaction.timeout.ms = <lease>`, and every lease write and guarded write
//! of the role goes through it, one transaction at a time (the slot's lock
//! serialises them).
//!
//! Errors are read the way librdkafka's transactional API defines them:
//!
//! * fatal with code `_FENCED` (-144), `INVALID_PRODUCER_EPOCH` (47) or
//!   `PRODUCER_FENCED` (90): [`Error::Fenced`]; the producer is dropped;
//! * any other fatal error: [`Error::Fatal`]; the producer is dropped;
//! * abortable (`txn_requires_abort`): the transaction is aborted and the
//!   write fails with [`Error::Transient`];
//! * retriable (a commit or abort that timed out): the commit or abort goes on
//!   in librdkafka; the write fails with [`Error::Transient`] and the next
//!   write of the role first finishes it.
//!
//! A write whose records are not acknowledged in time is aborted, but only
//! once the coordinator has the transaction (see
//! [`LeaseProducer::abort_registered`]): librdkafka sends EndTxn(abort)
//! whenever it sent a partition registration, refused or lost ones
//! included, and a coordinator without the transaction answers
//! INVALID_TXN_STATE, which librdkafka makes fatal. On the three-broker
//! cluster that ended a healthy leader's term when a broker was killed
//! during its writes.
//!
//! Every blocking librdkafka call (init, begin, commit, abort, and dropping a
//! producer, which flushes) runs on tokio's blocking pool.

use std::time::Duration;

use tokio::time::Instant;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureRecord, Producer as _};

use super::describe::Writer;
use super::{kafka_error, run_blocking, DescribeClient, Producer};
use crate::error::{Error, Result};
use crate::token::FencingToken;
use crate::transport::OutRecord;

/// Where the producer's current transaction stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnState {
    /// No transaction is open.
    Idle,
    /// A transaction is open (left open on purpose by a fault-injection write).
    Open,
    /// A commit timed out and goes on in librdkafka; call commit again.
    CommitPending,
    /// An abort timed out and goes on in librdkafka; call abort again.
    AbortPending,
    /// A write gave up before its records were acknowledged, and the
    /// coordinator has not shown the transaction yet: abort it (through
    /// [`LeaseProducer::abort_registered`]) before anything else. Nothing of
    /// it ever commits.
    AbortDeferred,
}

/// The producer the epoch of a role binds.
///
/// Dropping it blocks (librdkafka flushes and joins threads): whoever lets go
/// of one hands it to `drop_off_thread`.
pub(crate) struct LeaseProducer {
    pub(crate) producer: Producer,
    pub(crate) token: FencingToken,
    /// Asks the coordinator whether it has the open transaction.
    pub(crate) describe: DescribeClient,
    /// Since when the coordinator, reachable, has shown no open transaction
    /// of this producer while an abort waits.
    pub(crate) unregistered_since: Option<Instant>,
    /// False while the open transaction has no record queued: librdkafka
    /// has registered no partition for it, so its abort does not ask the
    /// coordinator and needs no [`LeaseProducer::abort_registered`].
    pub(crate) queued: bool,
    pub(crate) state: TxnState,
    /// True once the partition's log showed a record of this producer
    /// written with `token` (see [`LeaseProducer::confirm`]). False after a
    /// mint, whose token came from DescribeTransactions, and after every
    /// abort, after which librdkafka may have bumped the epoch itself
    /// (KIP-360).
    pub(crate) confirmed: bool,
    /// True once a transaction of this producer committed: from then on
    /// its token is the term's and never changes.
    pub(crate) committed: bool,
    /// How an earlier transaction whose outcome was reported unknown ended,
    /// once a later write completed it (`true`: committed).
    pub(crate) resolved: Option<bool>,
}

/// How one failed step ends the write.
pub(crate) enum Outcome {
    /// The producer is unusable: drop it and return this error.
    Drop(Error),
    /// The producer stays; return this error.
    Keep(Error),
}

/// The least time an abort gets, even past the caller's deadline.
const MIN_ABORT_TIME: Duration = Duration::from_millis(500);

/// How long a reachable coordinator must show this producer's transactions
/// settled (none open, none completing) before an abort is sent all the
/// same. librdkafka sends a partition registration again 20 ms after the
/// coordinator answered "concurrent transactions", and within about a
/// second after a connection to it broke (coordinator lookup, reconnect
/// back-off capped at one second for lease producers); after this long none
/// is on its way: the transaction's partitions were never registered (a
/// topic librdkafka does not know), and librdkafka's abort ends it without
/// asking the coordinator.
const REGISTRATION_GRACE: Duration = Duration::from_secs(2);

/// Between two looks at the coordinator while an abort waits.
const REGISTRATION_POLL: Duration = Duration::from_millis(100);

/// The time left until `deadline`, at least a millisecond.
fn left(deadline: Instant) -> Duration {
    deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1))
}

/// A failure after the commit was sent: the records may or may not be
/// committed. The cause (a fence included) stays the source.
fn outcome_unknown(role: &str, what: &str, outcome: Outcome) -> Outcome {
    let wrap = |e: Error| Error::OutcomeUnknown {
        context: format!("{what} for role {}: commit", crate::error::quote(role)),
        source: Box::new(e),
    };
    match outcome {
        Outcome::Keep(e) => Outcome::Keep(wrap(e)),
        Outcome::Drop(e) => Outcome::Drop(wrap(e)),
    }
}

/// The longest [`wait_for_empty_queue`] waits.
const QUEUE_DRAIN_BOUND: Duration = Duration::from_millis(50);

/// Waits (blocking, bounded by [`QUEUE_DRAIN_BOUND`]) until librdkafka counts
/// no message or event of `producer` as outstanding.
///
/// rust-rdkafka's `commit_transaction` flushes first, and its flush polls the
/// producer's queue for up to 100 ms whenever the outstanding count is not
/// zero at the first look. When every delivery of the transaction has been
/// awaited that count is still one for a moment: the producer's polling
/// thread resolves the delivery future before librdkafka releases the
/// message. A commit that started in that moment waited the full 100 ms for
/// an event that never came (a tenth of the first transactions of fresh
/// producers did). Here that moment passes in microseconds.
pub(crate) fn wait_for_empty_queue(producer: &Producer) {
    let start = std::time::Instant::now();
    while producer.in_flight_count() > 0 && start.elapsed() < QUEUE_DRAIN_BOUND {
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// True for the codes that mean a newer epoch exists.
pub(crate) fn is_fenced_code(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::Fenced
            | RDKafkaErrorCode::InvalidProducerEpoch
            | RDKafkaErrorCode::ProducerFenced
    )
}

/// An error of the role's producer once it has a fatal error.
fn fatal_outcome(role: &str, what: &str, code: RDKafkaErrorCode, reason: String) -> Outcome {
    if is_fenced_code(code) {
        Outcome::Drop(Error::Fenced(format!(
            "{what} for role {}: the producer's epoch is superseded ({code:?}: {reason})",
            crate::error::quote(role)
        )))
    } else {
        Outcome::Drop(Error::fatal(
            format!("{what} for role {}", crate::error::quote(role)),
            format!("fatal producer error {code:?}: {reason}"),
        ))
    }
}

impl LeaseProducer {
    /// A producer with no transaction open.
    pub(crate) fn new(
        producer: Producer,
        token: FencingToken,
        describe: DescribeClient,
    ) -> LeaseProducer {
        LeaseProducer {
            producer,
            token,
            describe,
            unregistered_since: None,
            queued: false,
            state: TxnState::Idle,
            confirmed: false,
            committed: false,
            resolved: None,
        }
    }

    /// The producer's fatal error, if librdkafka has raised one.
    fn fatal(&self) -> Option<(RDKafkaErrorCode, String)> {
        self.producer.client().fatal_error()
    }

    /// Runs one transaction with `records`: finish what an earlier write left
    /// pending, begin (unless a transaction is open), send, wait for every
    /// delivery, and commit unless `leave_open`.
    pub(crate) async fn transact(
        &mut self,
        role: &str,
        what: &str,
        records: Vec<OutRecord>,
        leave_open: bool,
        deadline: Instant,
    ) -> Result<(), Outcome> {
        self.finish_pending(role, what, deadline).await?;
        if self.state == TxnState::Idle {
            let p = self.producer.clone();
            let r = run_blocking(move || p.begin_transaction())
                .await
                .map_err(Outcome::Keep)?;
            if let Err(e) = r {
                return Err(self.on_error(role, what, "begin", e, deadline).await);
            }
            self.state = TxnState::Open;
            self.queued = false;
        }
        let mut deliveries = Vec::with_capacity(records.len());
        // Where the first record landed: the log says there who wrote it.
        let mut first: Option<(i32, i64)> = None;
        for r in &records {
            let mut fr = FutureRecord::<[u8], [u8]>::to(&r.topic);
            if let Some(p) = r.partition {
                fr = fr.partition(p);
            }
            if let Some(k) = &r.key {
                fr = fr.key(k.as_slice());
            }
            if let Some(v) = &r.value {
                fr = fr.payload(v.as_slice());
            }
            if !r.headers.is_empty() {
                let mut h = OwnedHeaders::new_with_capacity(r.headers.len());
                for (k, v) in &r.headers {
                    h = h.insert(Header {
                        key: k,
                        value: Some(v.as_slice()),
                    });
                }
                fr = fr.headers(h);
            }
            match self.producer.send_result(fr) {
                Ok(d) => {
                    self.queued = true;
                    deliveries.push(d);
                }
                Err((e, _)) => return Err(self.on_error(role, what, "send", e, deadline).await),
            }
        }
        for d in deliveries {
            let Ok(delivered) = tokio::time::timeout_at(deadline, d).await else {
                // Not acknowledged in time: abort (librdkafka purges what is
                // still queued); nothing of this transaction is written.
                return Err(match self.abort_registered(role, what, deadline).await {
                    None => Outcome::Keep(Error::transient(
                        format!("{what} for role {}", crate::error::quote(role)),
                        "the records were not acknowledged in time; the transaction was aborted",
                    )),
                    Some(o) => o,
                });
            };
            match delivered {
                Ok(Ok(d)) => {
                    if first.is_none() {
                        first = Some((d.partition, d.offset));
                    }
                }
                Ok(Err((e, _))) => {
                    return Err(self.on_error(role, what, "delivery", e, deadline).await)
                }
                Err(_) => {
                    return Err(Outcome::Drop(Error::fatal(
                        format!("{what} for role {}", crate::error::quote(role)),
                        "the producer dropped a delivery report",
                    )))
                }
            }
        }
        if let Some((partition, offset)) = first.filter(|_| !self.confirmed) {
            // Deliveries come in the records' order.
            let topic = records
                .first()
                .map(|r| r.topic.as_str())
                .unwrap_or_default();
            self.confirm(role, what, topic, partition, offset, deadline)
                .await?;
        }
        if leave_open {
            return Ok(());
        }
        self.commit(role, what, deadline).await
    }

    /// Checks the token against the header of the batch that holds this
    /// transaction's first record (at `offset`), before the transaction
    /// commits: the producer id and epoch the broker wrote it with are the
    /// truth, and DescribeTransactions, where the token came from, can
    /// answer from a stale coordinator (see `describe/batch.rs`).
    ///
    /// * The same token: confirmed; no later transaction is checked until
    ///   the next abort.
    /// * Another token, and nothing committed yet: the coordinator's answer
    ///   at the mint was stale. The transaction is aborted, the token becomes
    ///   the broker's, and the write fails with [`Error::Transient`]: written
    ///   again, it carries the right token.
    /// * Another token after a commit: the epoch moved under the term (an
    ///   abort that librdkafka followed with an epoch bump). The transaction
    ///   is aborted and the term ends ([`Error::Fenced`]), so one term never
    ///   carries two tokens.
    /// * The principal may not read the topic (a guarded write to a topic it
    ///   may only write): not confirmed, the next transaction checks again.
    /// * No answer in time: the transaction is aborted
    ///   ([`Error::Transient`]); nothing unconfirmed commits.
    async fn confirm(
        &mut self,
        role: &str,
        what: &str,
        topic: &str,
        partition: i32,
        offset: i64,
        deadline: Instant,
    ) -> Result<(), Outcome> {
        let context = || format!("{what} for role {}", crate::error::quote(role));
        let answer = self
            .describe
            .batch_writer(topic, partition, offset, deadline)
            .await;
        match answer {
            Ok(Writer::Batch(t)) if t == self.token => {
                self.confirmed = true;
                Ok(())
            }
            Ok(Writer::Denied) => {
                tracing::debug!(
                    role,
                    topic,
                    "the token is not confirmed: the principal may not read the topic"
                );
                Ok(())
            }
            Ok(Writer::Batch(t)) => {
                let token = self.token;
                let aborted = self.abort(role, what, deadline).await;
                if self.committed {
                    return Err(Outcome::Drop(Error::Fenced(format!(
                        "{}: the broker wrote the transaction with token {t}, not with this term's \
                         {token}: the producer's epoch moved after an abort; nothing of the \
                         transaction is committed",
                        context()
                    ))));
                }
                tracing::warn!(
                    role,
                    stale = %token,
                    broker = %t,
                    "the coordinator named a stale token after InitProducerId; taking the one the broker wrote"
                );
                self.token = t;
                Err(aborted.unwrap_or_else(|| {
                    Outcome::Keep(Error::transient(
                        context(),
                        format!(
                            "the coordinator named token {token}, the broker wrote the records with \
                             {t}; the transaction was aborted, the next write carries {t}"
                        ),
                    ))
                }))
            }
            Err(e) => {
                let aborted = self.abort(role, what, deadline).await;
                Err(aborted.unwrap_or_else(|| {
                    Outcome::Keep(Error::transient(
                        context(),
                        format!("the token could not be checked, the transaction was aborted: {e}"),
                    ))
                }))
            }
        }
    }

    /// Commits. A failure after the commit was sent (a timeout, a fence
    /// raised at EndTxn) leaves the outcome unknown and says so; an abortable
    /// one is aborted and certain.
    async fn commit(&mut self, role: &str, what: &str, deadline: Instant) -> Result<(), Outcome> {
        let p = self.producer.clone();
        let timeout = left(deadline);
        let r = run_blocking(move || {
            wait_for_empty_queue(&p);
            p.commit_transaction(timeout)
        })
        .await
        .map_err(Outcome::Keep)?;
        match r {
            Ok(()) => {
                self.state = TxnState::Idle;
                self.committed = true;
                Ok(())
            }
            Err(e) => {
                let aborts = matches!(&e, KafkaError::Transaction(t) if t.txn_requires_abort() && !t.is_fatal());
                if matches!(&e, KafkaError::Transaction(t) if t.is_retriable() && !t.is_fatal() && !t.txn_requires_abort())
                {
                    self.state = TxnState::CommitPending;
                }
                let outcome = self.on_error(role, what, "commit", e, deadline).await;
                Err(if aborts {
                    outcome
                } else {
                    outcome_unknown(role, what, outcome)
                })
            }
        }
    }

    /// Finishes a commit or abort that an earlier write left going.
    async fn finish_pending(
        &mut self,
        role: &str,
        what: &str,
        deadline: Instant,
    ) -> Result<(), Outcome> {
        match self.state {
            TxnState::Idle | TxnState::Open => Ok(()),
            TxnState::CommitPending => {
                // librdkafka allows only the commit to go on. Its records
                // were reported with an unknown outcome; say how it ended.
                let r = self.commit(role, what, deadline).await;
                if self.state != TxnState::CommitPending {
                    let committed = r.is_ok();
                    self.resolved = Some(committed);
                    tracing::warn!(
                        role,
                        committed,
                        "an earlier transaction whose outcome was reported unknown was completed before {what}"
                    );
                }
                r
            }
            TxnState::AbortPending => match self.abort(role, what, deadline).await {
                None => Ok(()),
                Some(o) => Err(o),
            },
            TxnState::AbortDeferred => match self.abort_registered(role, what, deadline).await {
                None => Ok(()),
                Some(o) => Err(o),
            },
        }
    }

    /// Aborts the open transaction of a write that gave up before its
    /// records were acknowledged, once the coordinator has it. `None` when it
    /// is aborted.
    ///
    /// librdkafka sends EndTxn(abort) whenever a partition registration of
    /// the transaction was sent, even one the coordinator refused ("concurrent
    /// transactions", while the previous transaction's markers are written)
    /// or one lost with a broken connection. A coordinator that has no open
    /// transaction of the producer answers that EndTxn with
    /// INVALID_TXN_STATE, and librdkafka makes it fatal: the producer, and
    /// with it a healthy leader's term, is gone (librdkafka issue 4849; seen
    /// on the three-broker cluster when the broker of the coordinator or of
    /// the state partition's leader was killed). So the coordinator is asked
    /// first (DescribeTransactions), and the abort goes ahead when it shows
    ///
    /// * this producer's transaction open (`Ongoing`): the EndTxn finds it;
    /// * a newer epoch: the abort is fenced, as it must be;
    /// * the producer's transactions settled (`Empty`, `CompleteCommit`,
    ///   `CompleteAbort`) for [`REGISTRATION_GRACE`]: no registration is on
    ///   its way, so none was sent and librdkafka does not ask the
    ///   coordinator.
    ///
    /// While the coordinator cannot be asked, or shows the previous
    /// transaction completing (its markers not yet written: the registration
    /// is refused and sent again until they are), or within the grace, the
    /// abort waits, bounded by `deadline` (at least [`MIN_ABORT_TIME`]); past
    /// that the transaction stays [`TxnState::AbortDeferred`] and the next
    /// write of the role aborts it first. It never commits.
    async fn abort_registered(
        &mut self,
        role: &str,
        what: &str,
        deadline: Instant,
    ) -> Option<Outcome> {
        let deadline = deadline.max(Instant::now() + MIN_ABORT_TIME);
        loop {
            let look =
                tokio::time::timeout_at(deadline, self.describe.describe_transaction(role)).await;
            let now = Instant::now();
            let go = match look {
                Ok(Ok(Some(d))) if d.token != self.token || d.state == "Ongoing" => true,
                Ok(Ok(answer)) => {
                    let state = answer.as_ref().map_or("unknown", |d| d.state.as_str());
                    let settled = matches!(
                        state,
                        "Empty" | "CompleteCommit" | "CompleteAbort" | "unknown"
                    );
                    if settled {
                        let since = *self.unregistered_since.get_or_insert(now);
                        let waited = now.duration_since(since);
                        tracing::debug!(
                            role,
                            state,
                            ?waited,
                            "the abort waits for the registration"
                        );
                        waited >= REGISTRATION_GRACE
                    } else {
                        tracing::debug!(
                            role,
                            state,
                            "the abort waits for the previous transaction"
                        );
                        self.unregistered_since = None;
                        false
                    }
                }
                Ok(Err(e)) => {
                    tracing::debug!(role, error = %e, "the abort waits: the coordinator cannot be asked");
                    self.unregistered_since = None;
                    false
                }
                Err(_) => false,
            };
            if go {
                self.unregistered_since = None;
                return self.abort(role, what, deadline).await;
            }
            if now + REGISTRATION_POLL >= deadline {
                self.state = TxnState::AbortDeferred;
                return Some(Outcome::Keep(Error::transient(
                    format!("{what} for role {}", crate::error::quote(role)),
                    "the records were not acknowledged in time; the transaction will be aborted \
                     once the coordinator has it, before the next write (nothing of it commits)",
                )));
            }
            tokio::time::sleep(REGISTRATION_POLL).await;
        }
    }

    /// Aborts the open transaction. `None` when it is aborted.
    async fn abort(&mut self, role: &str, what: &str, deadline: Instant) -> Option<Outcome> {
        let p = self.producer.clone();
        // An abort may run a little past the caller's deadline: it only ever
        // makes the transaction's records certain not to commit.
        let timeout = left(deadline).max(MIN_ABORT_TIME);
        let r = match run_blocking(move || p.abort_transaction(timeout)).await {
            Ok(r) => r,
            Err(e) => return Some(Outcome::Keep(e)),
        };
        match r {
            Ok(()) => {
                self.state = TxnState::Idle;
                self.confirmed = false;
                None
            }
            Err(e) => {
                if let Some((code, reason)) = self.fatal() {
                    return Some(fatal_outcome(role, what, code, reason));
                }
                match &e {
                    KafkaError::Transaction(t) if t.is_fatal() => {
                        Some(fatal_outcome(role, what, t.code(), t.string()))
                    }
                    KafkaError::Transaction(t) if t.is_retriable() => {
                        self.state = TxnState::AbortPending;
                        Some(Outcome::Keep(kafka_error(
                            &format!("{what} for role {}: abort", crate::error::quote(role)),
                            e,
                        )))
                    }
                    _ => Some(Outcome::Drop(Error::fatal(
                        format!("{what} for role {}", crate::error::quote(role)),
                        format!(
                            "the transaction could not be aborted, the producer is dropped: {e}"
                        ),
                    ))),
                }
            }
        }
    }

    /// Classifies a failed step and cleans up: drop on fatal errors, abort on
    /// abortable ones.
    async fn on_error(
        &mut self,
        role: &str,
        what: &str,
        step: &str,
        e: KafkaError,
        deadline: Instant,
    ) -> Outcome {
        // A fatal error (fencing included) is raised on the instance; a failed
        // delivery or send may only show it there.
        if let Some((code, reason)) = self.fatal() {
            return fatal_outcome(role, what, code, reason);
        }
        let context = format!("{what} for role {}: {step}", crate::error::quote(role));
        match &e {
            KafkaError::Transaction(t) if t.is_fatal() => {
                fatal_outcome(role, what, t.code(), t.string())
            }
            KafkaError::Transaction(t) if t.txn_requires_abort() => {
                match self.abort(role, what, deadline).await {
                    None => Outcome::Keep(Error::transient(
                        context,
                        format!("{e}; the transaction was aborted"),
                    )),
                    Some(o) => o,
                }
            }
            KafkaError::Transaction(t) if t.is_retriable() => {
                Outcome::Keep(Error::transient(context, e.to_string()))
            }
            KafkaError::Transaction(_) => Outcome::Keep(Error::fatal(context, e.to_string())),
            other => {
                if let Some(code) = other.rdkafka_error_code() {
                    if is_fenced_code(code) {
                        return Outcome::Drop(Error::Fenced(format!("{context}: {other}")));
                    }
                }
                // A failed send or delivery inside a transaction: the
                // transaction cannot commit any more, so abort it.
                if self.state == TxnState::Open {
                    let aborted = if self.queued {
                        self.abort_registered(role, what, deadline).await
                    } else {
                        self.abort(role, what, deadline).await
                    };
                    if let Some(o) = aborted {
                        return o;
                    }
                }
                match kafka_error(&context, e) {
                    Error::Fenced(m) => Outcome::Drop(Error::Fenced(m)),
                    err @ Error::Transient { .. } => Outcome::Keep(err),
                    err => Outcome::Keep(err),
                }
            }
        }
    }
}
