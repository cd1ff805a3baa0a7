//! The InitProducerId requests of the describe client: the fence of a
//! transaction a crashed holder left open, and the conditional epoch bump of
//! a resign (KIP-360: the caller's producer id and epoch must still be
//! current).

use kafka_protocol::messages::{
    ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::*;

/// What a [`DescribeClient::fence`] got for an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FenceAnswer {
    /// The coordinator is aborting the open transaction (it answered
    /// CONCURRENT_TRANSACTIONS after bumping the epoch).
    Aborting,
    /// Nothing was open any more: the request minted this epoch.
    Minted(FencingToken),
    /// The request failed; why.
    Refused(String),
}

/// The answer to [`DescribeClient::bump_if_current`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BumpAnswer {
    /// The token was current; the coordinator bumped it to this one.
    Bumped(FencingToken),
    /// A newer epoch already exists (the coordinator's error code is given):
    /// nothing was bumped.
    NotCurrent(String),
}

impl DescribeClient {
    /// Fences the holder of `transactional_id` the way a new producer of the
    /// id would, and the way Kafka's `Admin.fenceProducers` (KIP-618) does:
    /// one InitProducerId for the id, which bumps its epoch and makes the
    /// coordinator abort the transaction left open. The epoch it mints binds
    /// no producer and writes nothing; a producer that wants to write calls
    /// InitProducerId itself afterwards and gets a newer one.
    ///
    /// One attempt, no retry: the caller goes on to its own InitProducerId
    /// whatever the answer.
    pub(crate) async fn fence(
        &self,
        transactional_id: &str,
        transaction_timeout_ms: i32,
    ) -> Result<FenceAnswer> {
        let (deadline, _) = self.deadline(self.inner.timeout);
        let attempt = async {
            let (_, resp) = self
                .send_init_producer_id(transactional_id, transaction_timeout_ms, None, deadline)
                .await?;
            Ok::<_, Attempt>(match resp.error_code {
                0 => {
                    FenceAnswer::Minted(FencingToken::new(resp.producer_id.0, resp.producer_epoch))
                }
                // CONCURRENT_TRANSACTIONS: the open transaction is being aborted.
                51 => FenceAnswer::Aborting,
                code => FenceAnswer::Refused(code_name(code)),
            })
        };
        match attempt.await {
            Ok(answer) => Ok(answer),
            Err(Attempt::Fail(e)) => Err(e),
            Err(Attempt::Refind(r)) => {
                self.forget_coordinator(transactional_id);
                Ok(FenceAnswer::Refused(r))
            }
            Err(Attempt::Backoff(r)) => Ok(FenceAnswer::Refused(r)),
        }
    }

    /// Bumps the epoch of `transactional_id` only if `token` is still its
    /// current (producer id, epoch): InitProducerId v3+ carries the caller's
    /// producer id and epoch (KIP-360), and the coordinator answers
    /// `PRODUCER_FENCED` / `INVALID_PRODUCER_EPOCH` instead of bumping when a
    /// newer epoch exists. A resigning member supersedes its own term this
    /// way.
    ///
    /// The producer id and epoch alone do not make the bump conditional: a
    /// coordinator that finds a transaction `Ongoing` aborts it and fences
    /// its producer for **any** InitProducerId carrying the id's producer id,
    /// whatever the epoch (Kafka's `prepareInitProducerIdTransit`), and an
    /// epoch one behind the current one counts as a retry of that bump.
    /// So each attempt first asks DescribeTransactions, and sends the bump
    /// only while the coordinator still names `token`: a newer epoch (a
    /// successor's, with a transaction open or not) is answered
    /// [`BumpAnswer::NotCurrent`] without any InitProducerId. What remains
    /// is the time between the two requests, a round trip; the caller
    /// makes sure no successor mints then (a resign supersedes before it
    /// deregisters, while no other member may challenge).
    pub async fn bump_if_current(
        &self,
        transactional_id: &str,
        token: FencingToken,
        transaction_timeout_ms: i32,
        within: Duration,
    ) -> Result<BumpAnswer> {
        crate::codec::check_role(transactional_id)?;
        let (deadline, budget) = self.deadline(within.min(self.inner.timeout));
        // CONCURRENT_TRANSACTIONS right after the term's last commit lasts
        // only until its markers are written (a few ms): look again soon.
        let mut backoff = Duration::from_millis(2).min(FIRST_BACKOFF);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let described = tokio::time::timeout(left, self.describe_transaction(transactional_id))
                .await
                .map_err(|_| {
                    Error::transient(
                        format!(
                            "conditional epoch bump of {}",
                            crate::error::quote(transactional_id)
                        ),
                        format!("DescribeTransactions gave no answer within {within:?}"),
                    )
                })??;
            match described {
                None => {
                    return Ok(BumpAnswer::NotCurrent(
                        "the coordinator has no epoch for the id".into(),
                    ))
                }
                Some(d) if d.token != token => {
                    return Ok(BumpAnswer::NotCurrent(format!(
                        "the coordinator names {} ({})",
                        d.token, d.state
                    )))
                }
                Some(_) => {}
            }
            let attempt = async {
                let (addr, resp) = self
                    .send_init_producer_id(
                        transactional_id,
                        transaction_timeout_ms,
                        Some(token),
                        deadline,
                    )
                    .await?;
                match resp.error_code {
                    0 => Ok(BumpAnswer::Bumped(FencingToken::new(
                        resp.producer_id.0,
                        resp.producer_epoch,
                    ))),
                    // INVALID_PRODUCER_EPOCH, PRODUCER_FENCED,
                    // INVALID_PRODUCER_ID_MAPPING: not current any more.
                    47 | 90 | 49 => Ok(BumpAnswer::NotCurrent(code_name(resp.error_code))),
                    // CONCURRENT_TRANSACTIONS: a transaction is completing.
                    51 => Err(Attempt::Backoff(code_name(51))),
                    code => Err(classify_code(code, format!("InitProducerId at {addr}"))),
                }
            };
            let why = match attempt.await {
                Ok(answer) => return Ok(answer),
                Err(Attempt::Fail(e)) => return Err(e),
                Err(Attempt::Refind(r)) => {
                    self.forget_coordinator(transactional_id);
                    r
                }
                Err(Attempt::Backoff(r)) => r,
            };
            if no_time_for(backoff, deadline) {
                let context = format!(
                    "conditional epoch bump of {}",
                    crate::error::quote(transactional_id)
                );
                return Err(self.gave_up(context, budget, why));
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// One InitProducerId for `transactional_id` at its coordinator: a new
    /// epoch (`current` is `None`), or the conditional bump of `current`
    /// (KIP-360, InitProducerId v3 or later). Returns the coordinator's
    /// address and its answer, error codes included; a broken connection
    /// finds the coordinator again.
    pub(super) async fn send_init_producer_id(
        &self,
        transactional_id: &str,
        transaction_timeout_ms: i32,
        current: Option<FencingToken>,
        deadline: Instant,
    ) -> Result<(String, InitProducerIdResponse), Attempt> {
        let addr = self.coordinator(transactional_id, deadline).await?;
        let conn = self.connection(&addr, deadline).await?;
        let least = if current.is_some() { 3 } else { 0 };
        let version = conn
            .version_for(
                ApiKey::InitProducerId,
                InitProducerIdRequest::VERSIONS_RANGE,
            )
            .filter(|v| *v >= least)
            .ok_or_else(|| {
                Attempt::Fail(Error::fatal(
                    format!("InitProducerId at {addr}"),
                    if current.is_some() {
                        "the broker does not speak InitProducerId v3+ (Kafka 2.5 or newer), which a conditional epoch bump needs"
                    } else {
                        "the broker supports no InitProducerId version this client speaks"
                    },
                ))
            })?;
        let mut req = InitProducerIdRequest::default();
        req.transactional_id = Some(TransactionalId(StrBytes::from_string(
            transactional_id.to_owned(),
        )));
        req.transaction_timeout_ms = transaction_timeout_ms;
        let token = current.unwrap_or(FencingToken::new(-1, -1));
        req.producer_id = ProducerId(token.producer_id);
        req.producer_epoch = token.producer_epoch;
        let resp: InitProducerIdResponse = self
            .call(&conn, ApiKey::InitProducerId, version, &req, deadline)
            .await
            .map_err(|a| match a {
                // A broken connection to the coordinator: find it again.
                Attempt::Backoff(r) => Attempt::Refind(r),
                other => other,
            })?;
        Ok((addr, resp))
    }
}
