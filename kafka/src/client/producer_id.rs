//! The InitProducerId requests of the describe client: a mint, and the
//! conditional epoch bump of a resign (KIP-360: the caller's producer id and
//! epoch must still be current).

use kafka_protocol::messages::{
    ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::*;

/// The answer to [`Client::bump_if_current`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BumpAnswer {
    /// The token was current; the coordinator bumped it to this one.
    Bumped(ProducerEpoch),
    /// A newer epoch already exists (the coordinator's error code is given):
    /// nothing was bumped.
    NotCurrent(String),
}

impl Client {
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
        token: ProducerEpoch,
        transaction_timeout_ms: i32,
        within: Duration,
    ) -> Result<BumpAnswer> {
        crate::error::check_transactional_id(transactional_id)?;
        let (deadline, budget) = self.deadline(within.min(self.inner.timeout));
        let context = || {
            format!(
                "conditional epoch bump of {}",
                crate::error::quote(transactional_id)
            )
        };
        self.retrying(context, deadline, budget, Backoff::TRANSACTION, || async {
            match self.describe_once(transactional_id, deadline).await? {
                None => {
                    return Ok(BumpAnswer::NotCurrent(
                        "the coordinator has no epoch for the id".into(),
                    ))
                }
                Some(d) if d.producer != token => {
                    return Ok(BumpAnswer::NotCurrent(format!(
                        "the coordinator names {} ({})",
                        d.producer, d.state
                    )))
                }
                Some(_) => {}
            }
            let (addr, resp) = self
                .send_init_producer_id(
                    transactional_id,
                    transaction_timeout_ms,
                    Some(token),
                    deadline,
                )
                .await?;
            match codes::meaning(ApiKey::InitProducerId, resp.error_code) {
                Meaning::Ok => Ok(BumpAnswer::Bumped(ProducerEpoch::new(
                    resp.producer_id.0,
                    resp.producer_epoch,
                ))),
                Meaning::Fenced => Ok(BumpAnswer::NotCurrent(code_name(resp.error_code))),
                _ => Err(attempt_for(
                    ApiKey::InitProducerId,
                    resp.error_code,
                    format!("InitProducerId at {addr}"),
                )),
            }
        })
        .await
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
        current: Option<ProducerEpoch>,
        deadline: Instant,
    ) -> Result<(String, InitProducerIdResponse), Attempt> {
        self.at(
            Target::Coordinator(transactional_id),
            deadline,
            |at| async move {
                let least = if current.is_some() { 3 } else { 0 };
                let version = at.version(
                    ApiKey::InitProducerId,
                    (least, InitProducerIdRequest::VERSIONS_RANGE.1),
                    if current.is_some() {
                        "a conditional epoch bump needs Kafka 2.5 or newer"
                    } else {
                        ""
                    },
                )?;
                let mut req = InitProducerIdRequest::default();
                req.transactional_id = Some(TransactionalId(StrBytes::from_string(
                    transactional_id.to_owned(),
                )));
                req.transaction_timeout_ms = transaction_timeout_ms;
                let token = current.unwrap_or(ProducerEpoch::new(-1, -1));
                req.producer_id = ProducerId(token.producer_id);
                req.producer_epoch = token.producer_epoch;
                let resp: InitProducerIdResponse = self
                    .exchange(&at, ApiKey::InitProducerId, version, &req)
                    .await?;
                Ok((at.addr, resp))
            },
        )
        .await
    }
}
