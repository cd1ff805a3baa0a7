//! The connections of a [`Client`]: up to
//! [`Client::CONNECTIONS_PER_BROKER`] per broker, opened while requests
//! overlap, and which brokers are stalled.
//!
//! A broker that let a connect or a request run out of time is *stalled*
//! (paused, overloaded, cut off) until it next answers: lookups that may go
//! to any bootstrap broker try it last ([`Client::at_bootstrap`]), and
//! each try gets a share of the time left, so one stalled broker never uses
//! up the budget of the brokers after it; a request whose coordinator or
//! leader is a stalled broker waits at most a second per attempt there, so
//! the lookup that finds where the cluster moved it comes soon.

use std::sync::atomic::AtomicBool;

use tokio::sync::{Notify, OwnedMutexGuard, OwnedSemaphorePermit, Semaphore};

use super::request::STALLED_ATTEMPT;
use super::*;

/// The least time one bootstrap broker gets (less only when less is left).
const MIN_ATTEMPT: Duration = Duration::from_millis(250);

impl Client {
    /// The deadline of the `i`-th broker tried (from 0) of `n` by
    /// [`Client::at_each`]: an equal share of the time left before
    /// `deadline` among the brokers not tried yet, at least
    /// [`MIN_ATTEMPT`] (less only when less is left); `None` once no time
    /// is left.
    pub(super) fn broker_share(deadline: Instant, i: usize, n: usize) -> Option<Instant> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        let untried = n.saturating_sub(i).max(1);
        let share = (left / u32::try_from(untried).unwrap_or(u32::MAX)).max(MIN_ATTEMPT.min(left));
        Some(Instant::now() + share)
    }

    /// The bootstrap brokers in the order [`Client::at_bootstrap`] tries
    /// them: those not stalled in the configured order, rotated to begin
    /// after `start_after` when it is one of them (so it comes last of
    /// them), then the stalled ones.
    pub(super) fn bootstrap_order(&self, start_after: Option<&str>) -> Vec<String> {
        let n = self.inner.bootstrap.len();
        let first = start_after
            .and_then(|a| self.inner.bootstrap.iter().position(|b| b == a))
            .map_or(0, |k| k + 1);
        let stalled = self.inner.stalled.lock().unwrap_or_else(|e| e.into_inner());
        let mut order: Vec<(Option<Instant>, usize, &String)> = self
            .inner
            .bootstrap
            .iter()
            .enumerate()
            .map(|(i, b)| (stalled.get(b).copied(), (i + n - first % n) % n, b))
            .collect();
        // Not stalled (None) first, in the (rotated) configured order; then by when
        // the stall began, the most recent first (a broker stalled for long
        // is the least likely to answer now).
        order.sort_by(|a, b| match (a.0, b.0) {
            (None, None) => a.1.cmp(&b.1),
            (None, Some(_)) => std::cmp::Ordering::Less,
            (Some(_), None) => std::cmp::Ordering::Greater,
            (Some(x), Some(y)) => y.cmp(&x).then(a.1.cmp(&b.1)),
        });
        order.into_iter().map(|(_, _, b)| b.clone()).collect()
    }

    /// Remembers that `addr` let a connect or a request run out of time
    /// (kept from the first such time until it next answers), and sends the
    /// requests waiting for its connections elsewhere.
    pub(super) fn stalled(&self, addr: &str) {
        self.inner
            .stalled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(addr.to_owned())
            .or_insert_with(Instant::now);
        let pool = self
            .inner
            .connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(addr)
            .cloned();
        if let Some(pool) = pool {
            pool.stall.notify_waiters();
        }
    }

    /// `addr` answered: it is no longer stalled.
    pub(super) fn answered(&self, addr: &str) {
        let mut stalled = self.inner.stalled.lock().unwrap_or_else(|e| e.into_inner());
        if !stalled.is_empty() {
            stalled.remove(addr);
        }
    }

    /// True while `addr` is stalled. For tests.
    #[doc(hidden)]
    pub fn is_stalled(&self, addr: &str) -> bool {
        self.inner
            .stalled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(addr)
    }

    /// Opens a connection to `addr` by `connect_deadline`. A failure a
    /// retry may mend marks the broker's connections down (counting the
    /// failure for the requests waiting for this connect) and, if it timed
    /// out, the broker stalled: [`Attempt::Moved`].
    async fn open(
        &self,
        pool: &BrokerConnections,
        addr: &str,
        connect_deadline: Instant,
    ) -> Result<Connection, Attempt> {
        Connection::open(
            addr,
            self.inner.client_id.clone(),
            Arc::clone(&self.inner.requests),
            connect_deadline,
            &self.inner.security,
        )
        .await
        .map_err(|e| match e {
            OpenError::Fail(e) => Attempt::Fail(e),
            OpenError::Retry(e) => {
                pool.up.store(false, Ordering::Relaxed);
                pool.connect_failures.fetch_add(1, Ordering::Relaxed);
                if e.kind() == std::io::ErrorKind::TimedOut {
                    self.stalled(addr);
                }
                Attempt::Moved(format!("connecting to {addr}: {e}"))
            }
        })
    }

    /// A live connection to `addr` in the caller's sole use until the
    /// returned [`Leased`] is dropped, connecting (and handshaking) if
    /// needed.
    ///
    /// A broker gets up to [`Client::CONNECTIONS_PER_BROKER`] connections,
    /// each carrying one request at a time. A broker handles one request of
    /// a connection at a time (it reads the next once it has answered), and
    /// a Produce with acks=all holds its connection until the replicas have
    /// the records: a request sent behind another would wait at the broker
    /// for it, on its own attempt's clock, and a load the broker answers
    /// slowly but surely would run requests out of time, close their
    /// connections and mark the broker stalled. So a request waits here, in
    /// the client, for a connection of its own (in the order requests
    /// came, until `deadline`, the caller's), and the attempt's clock starts
    /// once it has one ([`Client::on`]). It takes an idle connection, else
    /// opens another in a free slot (while no connection to the broker is
    /// up, one connect at a time: an unreachable broker gets one attempt at
    /// a time). A connect is an attempt: it gets `attempt` (else
    /// [`Client::attempt_timeout`]), at most the connect timeout.
    ///
    /// A waiter gives up and goes elsewhere ([`Attempt::Moved`], as for a
    /// broker it cannot connect to) when the broker lets a request run out
    /// of time while it waits, or has been stalled for [`STALLED_ATTEMPT`]
    /// of its wait; one that waits until `deadline` ends
    /// [`Attempt::Again`], the broker still trusted.
    pub(super) async fn connection(
        &self,
        addr: &str,
        deadline: Instant,
        attempt: Option<Duration>,
    ) -> Result<Leased, Attempt> {
        let pool = Arc::clone(
            self.inner
                .connections
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(addr.to_owned())
                .or_insert_with(|| Arc::new(BrokerConnections::new())),
        );
        let permit = self.wait_for_a_connection(addr, &pool, deadline).await?;
        // The permit guarantees a slot no other request holds: an idle live
        // connection if there is one, else a slot to connect through.
        // Another request's look may hold a slot for a moment (it locks
        // each slot it looks into): then this one looks again.
        let mut slot = loop {
            let mut free = None;
            for slot in &pool.slots {
                let Ok(guard) = Arc::clone(slot).try_lock_owned() else {
                    continue;
                };
                match guard.as_ref() {
                    Some(c) if !c.is_closed() && !c.is_expiring() => {
                        return Ok(Leased {
                            conn: Arc::clone(c),
                            _slot: guard,
                            _permit: permit,
                        });
                    }
                    _ => {
                        free.get_or_insert(guard);
                    }
                }
            }
            if let Some(slot) = free {
                break slot;
            }
            if Instant::now() >= deadline {
                return Err(Attempt::Again(format!(
                    "{addr}: no connection slot came free before the deadline"
                )));
            }
            tokio::task::yield_now().await;
        };
        // A connect is one attempt: it and the wait for another's get the
        // attempt's time, as a request does.
        let bound = deadline.min(deadline_in(
            attempt.unwrap_or_else(|| self.attempt_timeout(addr)),
        ));
        let _first = first_connect_turn(&pool, addr, bound).await?;
        *slot = None;
        // One unreachable broker must not use up the whole budget.
        let connect_deadline = bound.min(deadline_in(self.inner.connect_timeout));
        let conn = self.open(&pool, addr, connect_deadline).await?;
        self.answered(addr);
        self.inner.reached.store(true, Ordering::Relaxed);
        self.inner.connects.fetch_add(1, Ordering::Relaxed);
        self.inner.session_lifetime_ms.store(
            conn.session_lifetime
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            Ordering::Relaxed,
        );
        pool.up.store(true, Ordering::Relaxed);
        let conn = Arc::new(conn);
        *slot = Some(Arc::clone(&conn));
        Ok(Leased {
            conn,
            _slot: slot,
            _permit: permit,
        })
    }

    /// Waits for one of `addr`'s connections to be free (see
    /// [`Client::connection`]).
    async fn wait_for_a_connection(
        &self,
        addr: &str,
        pool: &BrokerConnections,
        deadline: Instant,
    ) -> Result<OwnedSemaphorePermit, Attempt> {
        // Registered before the first look, so no stall is missed.
        let stall = pool.stall.notified();
        tokio::pin!(stall);
        let acquire = Arc::clone(&pool.permits).acquire_owned();
        tokio::pin!(acquire);
        let since = Instant::now();
        loop {
            let stalled = self.is_stalled(addr);
            tokio::select! {
                biased;
                // A stall first: a permit freed by the request that timed
                // out is not taken for another attempt there.
                _ = &mut stall => {
                    return Err(Attempt::Moved(format!(
                        "{addr} let a request run out of time while this one waited for a connection"
                    )));
                }
                p = &mut acquire => {
                    // The semaphore is never closed.
                    return p.map_err(|_| Attempt::Again(format!("{addr}: the connection pool closed")));
                }
                _ = tokio::time::sleep_until(since + STALLED_ATTEMPT), if stalled => {
                    if self.is_stalled(addr) {
                        return Err(Attempt::Moved(format!(
                            "{addr} is stalled and its connections stayed busy for {}",
                            crate::human::duration(STALLED_ATTEMPT)
                        )));
                    }
                }
                // Not the broker's fault: the coordinator or leader stays
                // known.
                _ = tokio::time::sleep_until(deadline) => {
                    return Err(Attempt::Again(format!(
                        "all {} connections to {addr} stayed busy until the deadline",
                        Client::CONNECTIONS_PER_BROKER
                    )));
                }
            }
        }
    }
}

/// The turn of a request to connect to `addr` (by `bound`): while no
/// connection to the broker is up, one connect at a time, and when the one
/// waited for fails, this request goes elsewhere too ([`Attempt::Moved`]).
/// `None` when a connection is up (no turn needed); else the guard of the
/// turn, held while this request connects.
async fn first_connect_turn<'a>(
    pool: &'a BrokerConnections,
    addr: &str,
    bound: Instant,
) -> Result<Option<tokio::sync::MutexGuard<'a, ()>>, Attempt> {
    if pool.up.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let failed = pool.connect_failures.load(Ordering::Relaxed);
    let Ok(g) = tokio::time::timeout_at(bound, pool.first_connect.lock()).await else {
        return Err(Attempt::Moved(format!(
            "connecting to {addr}: another request's connect to it did not finish in time"
        )));
    };
    if pool.connect_failures.load(Ordering::Relaxed) != failed {
        return Err(Attempt::Moved(format!(
            "connecting to {addr}: another request's connect to it failed"
        )));
    }
    Ok(Some(g))
}

/// The connections of one broker.
pub(super) struct BrokerConnections {
    /// One per slot: a request holds one for its whole attempt.
    permits: Arc<Semaphore>,
    slots: Vec<ConnectionSlot>,
    /// False until a connect succeeds and after one fails: connects are
    /// then made one at a time, under `first_connect`.
    up: AtomicBool,
    first_connect: AsyncMutex<()>,
    /// Connects that failed, so those waiting for one learn it did.
    connect_failures: AtomicU64,
    /// Woken when a request to the broker runs out of time, so requests
    /// waiting for its connections go elsewhere.
    stall: Notify,
}

impl BrokerConnections {
    fn new() -> BrokerConnections {
        BrokerConnections {
            permits: Arc::new(Semaphore::new(Client::CONNECTIONS_PER_BROKER)),
            slots: (0..Client::CONNECTIONS_PER_BROKER)
                .map(|_| ConnectionSlot::default())
                .collect(),
            up: AtomicBool::new(false),
            first_connect: AsyncMutex::new(()),
            connect_failures: AtomicU64::new(0),
            stall: Notify::new(),
        }
    }
}

/// A connection in one request's sole use while this lives (see
/// [`Client::connection`]).
pub(super) struct Leased {
    conn: Arc<Connection>,
    _slot: OwnedMutexGuard<Option<Arc<Connection>>>,
    _permit: OwnedSemaphorePermit,
}

impl std::ops::Deref for Leased {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.conn
    }
}
