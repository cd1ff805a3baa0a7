//! Minting an epoch fast: warm spare lease producers, and a clear way for
//! InitProducerId.
//!
//! A mint (`acquire_epoch`) is InitProducerId on a transactional producer of
//! the role followed by DescribeTransactions (rule 1). Two things in
//! librdkafka made it slow and erratic, both a fixed 500 ms timer of its
//! producer-id state machine (`rd_kafka_idemp_pid_timer_restart`):
//!
//! * **A fresh producer** that starts InitProducerId while it has no broker
//!   connection up (its bootstrap connection is torn down when the first
//!   metadata answer names the real broker, and the replacement connects only
//!   after the sparse-connection pause) finds no broker for FindCoordinator
//!   and retries 500 ms later. That hit a third to a half of fresh producers.
//! * **InitProducerId while the role's previous transaction is still
//!   completing** (Ongoing, PrepareCommit, PrepareAbort) is answered
//!   CONCURRENT_TRANSACTIONS, and librdkafka retries it 500 ms later.
//!
//! So a mint here:
//!
//! 1. takes the role's **spare** lease producer, built ahead of time and
//!    connected: it fetched the state topic's metadata twice, so it holds a
//!    connection to a broker the cluster named (not only the bootstrap one)
//!    and knows the state topic's leaders. A spare that waited a long time
//!    may have lost its connection (brokers close idle ones after
//!    `connections.max.idle.ms`, 10 min by default), so the mint asks for the
//!    metadata once more (one round trip; it reconnects if needed). Without a
//!    spare it builds a producer and connects it the same way first;
//! 2. **clears the way** ([`clear_the_way`]): asks DescribeTransactions and,
//!    while the role's transaction is completing (PrepareCommit, PrepareAbort,
//!    PrepareEpochFence), asks again every millisecond. An Ongoing transaction
//!    gets [`ONGOING_GRACE`] to finish; one still open then is a holder that
//!    crashed or stalled mid-transaction (a standby mints only once the lease
//!    ran out), and it is **fenced** at once with one InitProducerId of the
//!    transport's own protocol client ([`super::DescribeClient::fence`], what
//!    Kafka's `Admin.fenceProducers` does): the coordinator bumps the epoch
//!    and aborts the transaction, and the mint waits the abort out like any
//!    completing transaction. Waiting for the transaction timeout instead
//!    would cost up to a lease. The fence's epoch binds no producer and
//!    writes nothing; the producer's own InitProducerId comes next and gets a
//!    newer one, so rule 1 holds: the epoch that writes is the one its writer
//!    minted;
//! 3. calls InitProducerId (`init_transactions`) on the blocking pool.
//!
//! After a mint the transport builds the next spare of the role in the
//! background, [`SPARE_DELAY`] later so that it does not compete with the
//! first lease write for the CPU. A waiting member tells the transport which
//! role it may mint and with which lease ([`crate::transport::Coordinator::prepare_epoch`]),
//! and the transport keeps a spare for it (a mint with another lease builds a
//! fresh producer). The spare of a role goes when the member leaves the role
//! and when the transport is dropped. A spare is a librdkafka producer
//! with its threads and one connection, idle until used; it has not called
//! InitProducerId, so the coordinator does not know it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::Producer as _;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::config::KafkaConfig;
use super::describe::{DescribeClient, FenceAnswer};
use super::{drop_off_thread, kafka_error, Producer, TransportContext};
use crate::error::{Error, Result};

/// How long an Ongoing transaction of the role may go on finishing before
/// the mint fences it. A lease or guarded transaction of a live holder takes
/// a few milliseconds on a healthy cluster.
pub(crate) const ONGOING_GRACE: Duration = Duration::from_millis(20);

/// How long after a mint the next spare of the role is built.
pub(crate) const SPARE_DELAY: Duration = Duration::from_millis(100);

/// The pause between two DescribeTransactions while a transaction completes.
const SETTLE_POLL: Duration = Duration::from_millis(1);

/// The longest one metadata request of a warm-up may take.
const WARM_UP_TIMEOUT: Duration = Duration::from_secs(10);

/// The `reconnect.backoff.ms` of lease producers unless the user sets it.
/// librdkafka's pause before it connects to a newly learned broker is half
/// of it (at least 11 ms): 50 ms with librdkafka's default of 100 ms, which
/// made up most of a fresh producer's 55 ms to a first usable connection.
pub(crate) const LEASE_RECONNECT_BACKOFF_MS: &str = "22";

/// The `reconnect.backoff.max.ms` of lease producers unless the user sets
/// it. librdkafka looks for a new transaction coordinator only after a
/// connection attempt to the old one failed, and those attempts back off up
/// to this (10 s by default): after a broker loss the coordinator moved at
/// about 9 s, but the producer learned it several seconds later, past its
/// lease. With a 1 s cap it finds the new coordinator within about a second.
pub(crate) const LEASE_RECONNECT_BACKOFF_MAX_MS: &str = "1000";

/// Counters of the mints of one transport.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) minted: AtomicU64,
    pub(crate) from_spare: AtomicU64,
    pub(crate) fenced: AtomicU64,
    pub(crate) waited: AtomicU64,
}

/// Counters of the epoch mints of a [`super::KafkaTransport`], for metrics
/// and tests ([`super::KafkaTransport::mint_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MintStats {
    /// Successful `acquire_epoch` calls.
    pub minted: u64,
    /// Of those, the ones that used a spare lease producer built and
    /// connected ahead of time (the others built theirs on the spot).
    pub from_spare: u64,
    /// Mints that waited for a transaction of the role to complete before
    /// InitProducerId.
    pub waited_for_completion: u64,
    /// Open transactions of a previous holder that a mint fenced (one
    /// InitProducerId of the protocol client) instead of waiting for them.
    pub fenced_open_transactions: u64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> MintStats {
        MintStats {
            minted: self.minted.load(Ordering::Relaxed),
            from_spare: self.from_spare.load(Ordering::Relaxed),
            waited_for_completion: self.waited.load(Ordering::Relaxed),
            fenced_open_transactions: self.fenced.load(Ordering::Relaxed),
        }
    }
}

/// Builds (does not initialise) the lease producer of `role`: every user
/// setting, then the transport's defaults a user value overrides, then the
/// settings the rules depend on.
pub(crate) fn create_lease_producer(
    config: &KafkaConfig,
    client_suffix: &str,
    role: &str,
    lease_ms: u64,
) -> Result<Producer> {
    lease_client_config(config, client_suffix, role, lease_ms)
        .create_with_context(TransportContext::new(config))
        .map_err(|e| {
            kafka_error(
                &format!(
                    "creating the lease producer of role {}",
                    crate::error::quote(role)
                ),
                e,
            )
        })
}

/// The librdkafka configuration of the lease producer of `role`.
fn lease_client_config(
    config: &KafkaConfig,
    client_suffix: &str,
    role: &str,
    lease_ms: u64,
) -> rdkafka::ClientConfig {
    let mut cc = config.client_config(&format!("{client_suffix}-lease"));
    if config.get("partitioner").is_none() {
        cc.set("partitioner", "murmur2_random");
    }
    // A lease or guarded transaction is sent as soon as it is complete.
    if config.get("linger.ms").is_none() && config.get("queue.buffering.max.ms").is_none() {
        cc.set("linger.ms", "0");
    }
    if config.get("reconnect.backoff.ms").is_none() {
        cc.set("reconnect.backoff.ms", LEASE_RECONNECT_BACKOFF_MS);
    }
    if config.get("reconnect.backoff.max.ms").is_none() {
        cc.set("reconnect.backoff.max.ms", LEASE_RECONNECT_BACKOFF_MAX_MS);
    }
    cc.set("transactional.id", role);
    cc.set("transaction.timeout.ms", lease_ms.to_string());
    cc.set("enable.idempotence", "true");
    cc.set("acks", "all");
    cc.set("allow.auto.create.topics", "false");
    cc
}

/// Asks for the state topic's metadata `rounds` times, each bounded by the
/// time left until `deadline` (blocking). Leaves the producer with a
/// connection to a broker of the cluster, and the topic's leaders known.
/// Failures are only logged: InitProducerId, which comes next, reports an
/// unreachable cluster with its own error.
pub(crate) fn connect(producer: &Producer, topic: &str, deadline: Instant, rounds: usize) {
    for _ in 0..rounds {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .min(WARM_UP_TIMEOUT);
        if left.is_zero() {
            return;
        }
        if let Err(e) = producer.client().fetch_metadata(Some(topic), left) {
            tracing::debug!(error = %e, "warming up a lease producer: metadata");
            return;
        }
    }
}

/// InitProducerId on `producer` (blocking), with librdkafka's errors mapped.
pub(crate) fn init(
    producer: &Producer,
    role: &str,
    lease_ms: u64,
    timeout: Duration,
) -> Result<()> {
    match producer.init_transactions(timeout) {
        Ok(()) => Ok(()),
        Err(e) => {
            let context = format!("InitProducerId for role {}", crate::error::quote(role));
            Err(match &e {
                KafkaError::Transaction(t)
                    if t.code() == RDKafkaErrorCode::InvalidTransactionTimeout =>
                {
                    Error::InvalidArgument(format!(
                        "{context}: the lease of {lease_ms} ms is over the broker's transaction.max.timeout.ms"
                    ))
                }
                _ => kafka_error(&context, e),
            })
        }
    }
}

/// The states in which the coordinator answers InitProducerId with
/// CONCURRENT_TRANSACTIONS, and which end on their own within milliseconds.
fn is_completing(state: &str) -> bool {
    matches!(
        state,
        "PrepareCommit" | "PrepareAbort" | "PrepareEpochFence"
    )
}

/// Waits, bounded by `deadline`, until InitProducerId for `role` will not
/// meet a transaction of the role that is still completing (module docs,
/// step 2). Never fails: on any error it returns and the InitProducerId that
/// follows deals with the situation.
pub(crate) async fn clear_the_way(
    describe: &DescribeClient,
    role: &str,
    lease_ms: u64,
    deadline: Instant,
    counters: &Counters,
) {
    let started = Instant::now();
    let mut fenced = false;
    let mut waited = false;
    loop {
        let state = match describe.describe_transaction(role).await {
            Ok(Some(d)) => d.state,
            Ok(None) => break,
            Err(e) => {
                tracing::debug!(role, error = %e, "DescribeTransactions before InitProducerId failed");
                break;
            }
        };
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        if is_completing(&state) {
            waited = true;
        } else if state == "Ongoing" {
            if fenced {
                // A transaction opened after the fence: another member minted
                // meanwhile. InitProducerId fences it in turn, as it would
                // without this step.
                break;
            }
            if now.duration_since(started) >= ONGOING_GRACE {
                fenced = true;
                let timeout_ms = i32::try_from(lease_ms).unwrap_or(i32::MAX);
                match describe.fence(role, timeout_ms).await {
                    Ok(answer) => {
                        counters.fenced.fetch_add(1, Ordering::Relaxed);
                        tracing::info!(
                            role,
                            ?answer,
                            "fenced the open transaction of the previous holder"
                        );
                        if let FenceAnswer::Refused(_) = answer {
                            break;
                        }
                    }
                    Err(e) => {
                        tracing::debug!(role, error = %e, "fencing the open transaction failed");
                        break;
                    }
                }
                continue;
            }
            waited = true;
        } else {
            break;
        }
        tokio::time::sleep(SETTLE_POLL).await;
    }
    if waited {
        counters.waited.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(role, waited = ?started.elapsed(), "waited for the role's transaction to complete before InitProducerId");
    }
}

// ---------------------------------------------------------------- spares

/// A spare lease producer of a role, being built or ready.
struct Spare {
    lease_ms: u64,
    /// Dropping it skips what is left of [`SPARE_DELAY`].
    hurry: Option<oneshot::Sender<()>>,
    cancel: CancellationToken,
    task: JoinHandle<Option<Producer>>,
}

impl Spare {
    /// Lets go of the spare: stops a build that has not started and drops a
    /// built producer on the blocking pool.
    fn discard(self) {
        self.cancel.cancel();
        drop(self.hurry);
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let task = self.task;
                drop(handle.spawn(async move {
                    if let Ok(Some(p)) = task.await {
                        drop_off_thread(p);
                    }
                }));
            }
            // Outside a runtime blocking is allowed.
            Err(_) => drop(self.task),
        }
    }

    /// The producer, waiting for its build if needed; `None` when the build
    /// failed.
    async fn get(mut self) -> Option<Producer> {
        drop(self.hurry.take());
        self.task.await.ok().flatten()
    }
}

#[derive(Default)]
struct SpareState {
    spares: HashMap<String, Spare>,
}

/// The spare lease producers of a transport. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Spares {
    config: KafkaConfig,
    client_suffix: String,
    state: Arc<StdMutex<SpareState>>,
}

impl Spares {
    pub(crate) fn new(config: KafkaConfig, client_suffix: String) -> Spares {
        Spares {
            config,
            client_suffix,
            state: Arc::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SpareState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The spare of `role` built for `lease_ms`, if there is one. A spare of
    /// another lease is discarded.
    pub(crate) async fn take(&self, role: &str, lease_ms: u64) -> Option<Producer> {
        let spare = self.lock().spares.remove(role)?;
        if spare.lease_ms != lease_ms {
            spare.discard();
            return None;
        }
        spare.get().await
    }

    /// After a mint of `role` with `lease_ms`: build the next spare.
    pub(crate) fn minted(&self, role: &str, lease_ms: u64) {
        self.ensure(&mut self.lock(), role, lease_ms, SPARE_DELAY);
    }

    /// The member may mint `role` with `lease_ms` (`Some`): keep a spare; or
    /// it left the role (`None`): let the spare go.
    pub(crate) fn prepare(&self, role: &str, lease_ms: Option<u64>) {
        let mut s = self.lock();
        match lease_ms {
            Some(ms) => self.ensure(&mut s, role, ms, Duration::ZERO),
            None => {
                if let Some(spare) = s.spares.remove(role) {
                    spare.discard();
                }
            }
        }
    }

    /// Starts building a spare of `role` for `lease_ms` unless one is there.
    fn ensure(&self, s: &mut SpareState, role: &str, lease_ms: u64, delay: Duration) {
        if s.spares.get(role).is_some_and(|sp| sp.lease_ms == lease_ms) {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if let Some(old) = s.spares.remove(role) {
            old.discard();
        }
        let (hurry, hurried) = oneshot::channel::<()>();
        let cancel = CancellationToken::new();
        let (config, suffix, role_owned) = (
            self.config.clone(),
            self.client_suffix.clone(),
            role.to_owned(),
        );
        let stop = cancel.clone();
        let task = handle.spawn(async move {
            if !delay.is_zero() {
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = hurried => {}
                    _ = stop.cancelled() => return None,
                }
            }
            if stop.is_cancelled() {
                return None;
            }
            let topic = config.state_topic().to_owned();
            let budget = config.operation_timeout().min(WARM_UP_TIMEOUT);
            let built = tokio::task::spawn_blocking(move || {
                let p = create_lease_producer(&config, &suffix, &role_owned, lease_ms)?;
                connect(&p, &topic, super::deadline_in(budget), 2);
                Ok::<_, Error>(p)
            })
            .await;
            match built {
                Ok(Ok(p)) if !stop.is_cancelled() => Some(p),
                Ok(Ok(p)) => {
                    drop_off_thread(p);
                    None
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "building a spare lease producer failed");
                    None
                }
                Err(_) => None,
            }
        });
        s.spares.insert(
            role.to_owned(),
            Spare {
                lease_ms,
                hurry: Some(hurry),
                cancel,
                task,
            },
        );
    }

    /// Whether a spare of `role` exists (built or being built).
    pub(crate) fn has_spare(&self, role: &str) -> bool {
        self.lock().spares.contains_key(role)
    }

    /// Discards every spare (the transport is going).
    pub(crate) fn discard_all(&self) {
        let spares = std::mem::take(&mut self.lock().spares);
        for (_, spare) in spares {
            spare.discard();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_producer_defaults_yield_to_user_settings_but_rules_do_not() {
        let cc = lease_client_config(&KafkaConfig::new("h:1"), "m", "billing", 2000);
        assert_eq!(cc.get("linger.ms"), Some("0"));
        assert_eq!(
            cc.get("reconnect.backoff.ms"),
            Some(LEASE_RECONNECT_BACKOFF_MS)
        );
        assert_eq!(
            cc.get("reconnect.backoff.max.ms"),
            Some(LEASE_RECONNECT_BACKOFF_MAX_MS)
        );
        assert_eq!(cc.get("transactional.id"), Some("billing"));
        assert_eq!(cc.get("transaction.timeout.ms"), Some("2000"));

        let user = KafkaConfig::new("h:1")
            .set("linger.ms", "7")
            .set("reconnect.backoff.ms", "300")
            .set("transactional.id", "other")
            .set("acks", "1");
        let cc = lease_client_config(&user, "m", "billing", 2000);
        assert_eq!(cc.get("linger.ms"), Some("7"));
        assert_eq!(cc.get("reconnect.backoff.ms"), Some("300"));
        assert_eq!(cc.get("transactional.id"), Some("billing"));
        assert_eq!(cc.get("acks"), Some("all"));

        // The alias of linger.ms counts as the user's choice too.
        let alias = KafkaConfig::new("h:1").set("queue.buffering.max.ms", "3");
        let cc = lease_client_config(&alias, "m", "billing", 2000);
        assert_eq!(cc.get("linger.ms"), None);
        assert_eq!(cc.get("queue.buffering.max.ms"), Some("3"));
    }

    #[test]
    fn only_completing_states_are_waited_for() {
        for s in ["PrepareCommit", "PrepareAbort", "PrepareEpochFence"] {
            assert!(is_completing(s), "{s}");
        }
        for s in [
            "Empty",
            "Ongoing",
            "CompleteCommit",
            "CompleteAbort",
            "Dead",
        ] {
            assert!(!is_completing(s), "{s}");
        }
    }

    #[tokio::test]
    async fn spares_follow_the_members_hints() {
        // Nothing is reachable on port 1: spares are built in the
        // background and fail there, which these checks do not need.
        let config =
            KafkaConfig::new("127.0.0.1:1").with_operation_timeout(Duration::from_millis(50));
        let spares = Spares::new(config, "m".into());
        assert!(!spares.has_spare("a"), "no hint, no spare");
        spares.prepare("a", Some(3_000));
        spares.prepare("c", Some(2_000));
        assert!(spares.has_spare("a") && spares.has_spare("c"));
        spares.prepare("a", None);
        assert!(!spares.has_spare("a"), "the member left the role");
        assert_eq!(
            spares.take("c", 9_999).await.map(|_| ()),
            None,
            "another lease"
        );
        assert!(!spares.has_spare("c"), "a spare of another lease is let go");
        spares.minted("c", 2_000);
        assert!(
            spares.has_spare("c"),
            "after a mint the next spare is built"
        );
        spares.discard_all();
        assert!(!spares.has_spare("c"));
    }
}
