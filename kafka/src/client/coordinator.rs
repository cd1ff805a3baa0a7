//! The transaction coordinator of a transactional id (FindCoordinator at a
//! bootstrap broker, cached until it moves or for [`COORDINATOR_MAX_AGE`])
//! and what it reports of the id
//! (DescribeTransactions).

use super::routes::{Route, Suspect};
use super::*;

/// The longest a second look at FindCoordinator for an aged coordinator
/// takes before the request goes to the cached coordinator all the same
/// (as for an aged partition leader, or group coordinator).
pub(super) const RELOOK_BOUND: Duration = Duration::from_secs(1);

/// A FindCoordinator's answer.
pub(super) enum Found {
    /// The coordinator's address and node id.
    At { addr: String, node: i32 },
    /// An error code, and the request and answer in words.
    Refused { code: i16, what: String },
}

impl Client {
    /// Everything the coordinator reports about `transactional_id`, or
    /// `None` when it does not know the id (`TRANSACTIONAL_ID_NOT_FOUND`).
    pub async fn describe_transaction(
        &self,
        transactional_id: &str,
    ) -> Result<Option<TransactionDescription>> {
        crate::error::check_transactional_id(transactional_id)?;
        let context = || {
            format!(
                "DescribeTransactions for {}",
                crate::error::quote(transactional_id)
            )
        };
        let (deadline, budget) = self.deadline(self.inner.timeout);
        self.retrying(context, deadline, budget, Backoff::LOOKUP, || {
            self.describe_once(transactional_id, deadline)
        })
        .await
    }

    /// The address (`host:port`) of the transaction coordinator of
    /// `transactional_id`, from the cache or from FindCoordinator.
    pub async fn coordinator_address(&self, transactional_id: &str) -> Result<String> {
        crate::error::check_transactional_id(transactional_id)?;
        let (deadline, budget) = self.deadline(self.inner.timeout);
        let context = || {
            format!(
                "FindCoordinator for {}",
                crate::error::quote(transactional_id)
            )
        };
        self.retrying(context, deadline, budget, Backoff::LOOKUP, || {
            self.coordinator(transactional_id, deadline)
        })
        .await
    }

    /// The node id of `addr` as the FindCoordinator that named it the
    /// cached coordinator of `transactional_id` said, if it still is.
    pub(super) fn coordinator_node(&self, transactional_id: &str, addr: &str) -> Option<i32> {
        self.inner
            .coordinators
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .peek(transactional_id)
            .filter(|r| r.addr == addr)
            .map(|r| r.node)
    }

    /// How many transactional ids have a cached coordinator. For tests.
    #[doc(hidden)]
    pub fn coordinators_cached(&self) -> usize {
        self.inner
            .coordinators
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// The cached coordinator of `transactional_id` and whether it is older
    /// than [`COORDINATOR_MAX_AGE`] (see [`routes::Aged::get_marking`]).
    fn cached_coordinator(&self, transactional_id: &str) -> Option<(String, bool)> {
        self.inner
            .coordinators
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_marking(transactional_id, Instant::now())
            .map(|(route, aged)| (route.addr.clone(), aged))
    }

    /// The address of the coordinator of `transactional_id`: cached while
    /// younger than [`COORDINATOR_MAX_AGE`]; once older, asked about again
    /// at the other brokers first within [`RELOOK_BOUND`] (the cached one
    /// when that brings nothing); else found with FindCoordinator, a
    /// suspected coordinator asked last (see [`Client::lookup_order`]).
    pub(super) async fn coordinator(
        &self,
        transactional_id: &str,
        deadline: Instant,
    ) -> Result<String, Attempt> {
        match self.cached_coordinator(transactional_id) {
            Some((addr, false)) => return Ok(addr),
            Some((addr, true)) => {
                let avoid = Suspect {
                    addr: addr.clone(),
                    named_by: None,
                };
                let bound = deadline.min(deadline_in(RELOOK_BOUND));
                return match self.find_route(transactional_id, bound, Some(&avoid)).await {
                    Ok(found) => Ok(found),
                    Err(e) => {
                        tracing::debug!(transactional_id, error = ?e, "asking FindCoordinator again about an aged coordinator failed; the cached coordinator is used");
                        Ok(addr)
                    }
                };
            }
            None => {}
        }
        let suspect = self
            .inner
            .suspect
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(transactional_id, Instant::now());
        self.find_route(transactional_id, deadline, suspect.as_ref())
            .await
    }

    /// FindCoordinator for `transactional_id` at the bootstrap brokers in
    /// the order of [`Client::lookup_order`] for `avoid`; caches the
    /// coordinator found with the broker that named it.
    async fn find_route(
        &self,
        transactional_id: &str,
        deadline: Instant,
        avoid: Option<&Suspect>,
    ) -> Result<String, Attempt> {
        let route = self
            .at_bootstrap_avoiding(deadline, avoid, |at| async move {
                match self
                    .find_coordinator(&at, transactional_id, KEY_TYPE_TRANSACTION)
                    .await?
                {
                    Found::At { addr, node } => Ok(Route {
                        addr,
                        node,
                        named_by: at.addr.clone(),
                    }),
                    Found::Refused { code, what } => {
                        Err(attempt_for(ApiKey::FindCoordinator, code, what))
                    }
                }
            })
            .await?;
        let addr = route.addr.clone();
        self.inner
            .coordinators
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(transactional_id, route, Instant::now());
        Ok(addr)
    }

    /// One FindCoordinator at the broker reached, for `key` of `key_type`
    /// (a transactional id, or a group): the broker's answer, error codes
    /// included; only a failure to get an answer is an `Attempt`.
    pub(super) async fn find_coordinator(
        &self,
        at: &Reached,
        key: &str,
        key_type: i8,
    ) -> Result<Found, Attempt> {
        let version = at.version(
            ApiKey::FindCoordinator,
            FindCoordinatorRequest::VERSIONS_RANGE,
            "",
        )?;
        let mut req = FindCoordinatorRequest::default();
        req.key_type = key_type;
        if version >= 4 {
            req.coordinator_keys = vec![StrBytes::from_string(key.to_owned())];
        } else {
            req.key = StrBytes::from_string(key.to_owned());
        }
        let resp: FindCoordinatorResponse = self
            .exchange(at, ApiKey::FindCoordinator, version, &req)
            .await?;
        let broker = &at.addr;
        let (code, message, host, port, node) = if version >= 4 {
            match resp.coordinators.first() {
                Some(c) => (
                    c.error_code,
                    c.error_message.clone(),
                    c.host.clone(),
                    c.port,
                    c.node_id.0,
                ),
                None => {
                    return Err(Attempt::Again(format!(
                        "FindCoordinator at {broker} answered no coordinator"
                    )))
                }
            }
        } else {
            (
                resp.error_code,
                resp.error_message.clone(),
                resp.host.clone(),
                resp.port,
                resp.node_id.0,
            )
        };
        if code != codes::NONE {
            let what = format!(
                "FindCoordinator for {} at {broker}{}",
                crate::error::quote(key),
                message
                    .map(|m| format!(" ({})", m.as_str()))
                    .unwrap_or_default()
            );
            return Ok(Found::Refused { code, what });
        }
        Ok(Found::At {
            addr: format_addr(host.as_str(), port),
            node,
        })
    }

    /// One DescribeTransactions of `transactional_id` at its coordinator.
    pub(super) async fn describe_once(
        &self,
        transactional_id: &str,
        deadline: Instant,
    ) -> Result<Option<TransactionDescription>, Attempt> {
        self.at(
            Target::Coordinator(transactional_id),
            deadline,
            |at| async move { self.describe_at(&at, transactional_id).await },
        )
        .await
    }

    /// One DescribeTransactions request at the coordinator reached.
    pub(super) async fn describe_at(
        &self,
        at: &Reached,
        transactional_id: &str,
    ) -> Result<Option<TransactionDescription>, Attempt> {
        let addr = &at.addr;
        let version = at.version(
            ApiKey::DescribeTransactions,
            DescribeTransactionsRequest::VERSIONS_RANGE,
            "Kafka 3.0 or newer is needed",
        )?;
        let mut req = DescribeTransactionsRequest::default();
        req.transactional_ids = vec![TransactionalId(StrBytes::from_string(
            transactional_id.to_owned(),
        ))];
        let resp: DescribeTransactionsResponse = self
            .exchange(at, ApiKey::DescribeTransactions, version, &req)
            .await?;
        let Some(state) = resp
            .transaction_states
            .into_iter()
            .find(|s| s.transactional_id.0.as_str() == transactional_id)
        else {
            return Err(Attempt::Again(format!(
                "DescribeTransactions at {addr} answered nothing for {}",
                crate::error::quote(transactional_id)
            )));
        };
        match codes::meaning(ApiKey::DescribeTransactions, state.error_code) {
            Meaning::Ok => {}
            Meaning::Missing(Resource::TransactionalId) => return Ok(None),
            _ => {
                return Err(attempt_for(
                    ApiKey::DescribeTransactions,
                    state.error_code,
                    format!(
                        "DescribeTransactions for {} at {addr}",
                        crate::error::quote(transactional_id)
                    ),
                ))
            }
        }
        if state.producer_id.0 < 0 {
            return Ok(None);
        }
        Ok(Some(TransactionDescription {
            transactional_id: transactional_id.to_owned(),
            state: state.transaction_state.as_str().to_owned(),
            timeout_ms: state.transaction_timeout_ms,
            start_time_ms: state.transaction_start_time_ms,
            producer: ProducerEpoch::new(state.producer_id.0, state.producer_epoch),
            topics: state
                .topics
                .into_iter()
                .map(|t| (t.topic.0.as_str().to_owned(), t.partitions))
                .collect(),
        }))
    }
}
