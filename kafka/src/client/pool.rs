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

use super::*;

/// The least time one bootstrap broker gets (less only when less is left).
const MIN_ATTEMPT: Duration = Duration::from_millis(250);

impl Client {
    /// The deadline of the `i`-th bootstrap broker tried (from 0) by
    /// [`Client::at_bootstrap`]: an equal share of the time left before
    /// `deadline` among the brokers not tried yet, at least
    /// [`MIN_ATTEMPT`] (less only when less is left); `None` once no time
    /// is left.
    pub(super) fn bootstrap_share(&self, deadline: Instant, i: usize) -> Option<Instant> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        let untried = self.inner.bootstrap.len().saturating_sub(i).max(1);
        let share = (left / u32::try_from(untried).unwrap_or(u32::MAX)).max(MIN_ATTEMPT.min(left));
        Some(Instant::now() + share)
    }

    /// The bootstrap brokers in the order [`Client::at_bootstrap`] tries
    /// them.
    pub(super) fn bootstrap_order(&self) -> Vec<String> {
        let stalled = self.inner.stalled.lock().unwrap_or_else(|e| e.into_inner());
        let mut order: Vec<(Option<Instant>, usize, &String)> = self
            .inner
            .bootstrap
            .iter()
            .enumerate()
            .map(|(i, b)| (stalled.get(b).copied(), i, b))
            .collect();
        // Not stalled (None) first, in the configured order; then by when
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
    /// (kept from the first such time until it next answers).
    pub(super) fn stalled(&self, addr: &str) {
        self.inner
            .stalled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(addr.to_owned())
            .or_insert_with(Instant::now);
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

    /// A live connection to `addr`, connecting (and handshaking) if needed.
    ///
    /// A broker gets up to [`Client::CONNECTIONS_PER_BROKER`]
    /// connections. A broker handles one request of a connection at a time
    /// (it reads the next once it has answered), and a Produce with
    /// acks=all holds its connection until the replicas have the records,
    /// so one connection would queue every role's request behind the
    /// others. A request takes an idle connection, else opens another while
    /// the broker has fewer than the bound (only once one connection to it
    /// is up: an unreachable broker gets one attempt at a time), else takes
    /// the connection with the fewest requests in flight.
    pub(super) async fn connection(
        &self,
        addr: &str,
        deadline: Instant,
    ) -> Result<Arc<Connection>, Attempt> {
        let pool = Arc::clone(
            self.inner
                .connections
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(addr.to_owned())
                .or_insert_with(|| {
                    Arc::new(
                        (0..Self::CONNECTIONS_PER_BROKER)
                            .map(|_| ConnectionSlot::default())
                            .collect(),
                    )
                }),
        );
        let mut least: Option<(usize, Arc<Connection>)> = None;
        let mut free: Option<&ConnectionSlot> = None;
        for slot in pool.iter() {
            // A slot being connected is busy: skip it.
            let Ok(guard) = slot.try_lock() else { continue };
            match guard.as_ref() {
                Some(c) if !c.is_closed() && !c.is_expiring() => {
                    let load = c.in_flight();
                    if load == 0 {
                        return Ok(Arc::clone(c));
                    }
                    if least.as_ref().is_none_or(|(l, _)| load < *l) {
                        least = Some((load, Arc::clone(c)));
                    }
                }
                _ => {
                    free.get_or_insert(slot);
                }
            }
        }
        let slot = match (least, free) {
            (Some(_), Some(slot)) => slot,
            (Some((_, c)), None) => return Ok(c),
            // Nothing up: connect through the first slot, one attempt at
            // a time.
            (None, _) => &pool[0],
        };
        // Another request may be connecting through this slot: wait for it
        // no longer than this request may.
        let Ok(mut slot) = tokio::time::timeout_at(deadline, slot.lock()).await else {
            return Err(Attempt::Again(format!(
                "connecting to {addr}: another request's connect to it did not finish in time"
            )));
        };
        if let Some(c) = slot.as_ref() {
            if !c.is_closed() && !c.is_expiring() {
                return Ok(Arc::clone(c));
            }
            *slot = None;
        }
        // One unreachable broker must not use up the whole budget.
        let connect_deadline = deadline.min(deadline_in(self.inner.connect_timeout));
        let conn = Connection::open(
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
                if e.kind() == std::io::ErrorKind::TimedOut {
                    self.stalled(addr);
                }
                Attempt::Again(format!("connecting to {addr}: {e}"))
            }
        })?;
        self.answered(addr);
        self.inner.reached.store(true, Ordering::Relaxed);
        self.inner.connects.fetch_add(1, Ordering::Relaxed);
        self.inner.session_lifetime_ms.store(
            conn.session_lifetime
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            Ordering::Relaxed,
        );
        let conn = Arc::new(conn);
        *slot = Some(Arc::clone(&conn));
        Ok(conn)
    }
}
