//! The InitProducerId requests of the client: a mint, and the
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
    /// deregisters, while no other member may challenge), and gives as
    /// `within` the time until one may. The bump is sent only before that
    /// time has passed on the monotonic clock, checked right before the
    /// InitProducerId is written: a process paused (or slowed by retries)
    /// between the check and the send sends nothing once the window closed
    /// ([`Error::Transient`], saying so).
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
    /// address and its answer, error codes included, except those the
    /// request layer acts on: a coordinator that moved (or did not answer)
    /// is forgotten, and CONCURRENT_TRANSACTIONS is counted, each ending the
    /// attempt as an [`Attempt`].
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
                // A conditional bump whose window closed (a pause since
                // its check) is not sent: past its deadline it could land
                // after a successor's mint and abort its first transaction.
                if current.is_some() && Instant::now() >= deadline {
                    return Err(Attempt::Fail(Error::transient(
                        format!(
                            "conditional epoch bump of {}",
                            crate::error::quote(transactional_id)
                        ),
                        "its window closed before it could be sent (the process was paused \
                         or slowed since its check); nothing was sent",
                    )));
                }
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
                // NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE end the
                // attempt here, so the request layer forgets the
                // coordinator and the next attempt finds it again (answered
                // to the caller, the code would send every later attempt
                // to the former coordinator, for as long as the caller
                // retries). CONCURRENT_TRANSACTIONS too, so the layer sees
                // how long the coordinator stays busy.
                if matches!(
                    codes::meaning(ApiKey::InitProducerId, resp.error_code),
                    Meaning::Busy | Meaning::CoordinatorMoved
                ) {
                    return Err(attempt_for(
                        ApiKey::InitProducerId,
                        resp.error_code,
                        format!("InitProducerId at {}", at.addr),
                    ));
                }
                Ok((at.addr, resp))
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::fake_broker::{self, FakeBroker, Reply};

    const TOKEN: ProducerEpoch = ProducerEpoch::new(11, 3);

    /// One broker, coordinator of every id, whose DescribeTransactions names
    /// [`TOKEN`] and whose InitProducerId bumps it.
    fn coordinator() -> FakeBroker {
        let endpoint = Arc::new(std::sync::OnceLock::<fake_broker::Endpoint>::new());
        let seen = Arc::clone(&endpoint);
        let broker = FakeBroker::start(move |r| match r.key() {
            Some(ApiKey::FindCoordinator) => {
                fake_broker::find_coordinator(r, seen.get().expect("set before use"))
            }
            Some(ApiKey::DescribeTransactions) => fake_broker::describe_transactions(
                r,
                "CompleteCommit",
                TOKEN.producer_id,
                TOKEN.producer_epoch,
            ),
            Some(ApiKey::InitProducerId) => {
                fake_broker::init_producer_id(r, TOKEN.producer_id, TOKEN.producer_epoch + 1)
            }
            _ => Reply::Default,
        });
        endpoint.set(broker.endpoint()).expect("set once");
        broker
    }

    fn client(broker: &FakeBroker) -> Client {
        let mut settings = Settings::new(broker.addr());
        settings.operation_timeout = Duration::from_secs(5);
        Client::new(&settings).unwrap()
    }

    fn bumps_sent(broker: &FakeBroker) -> usize {
        broker
            .requests()
            .iter()
            .filter(|r| r.is(ApiKey::InitProducerId))
            .count()
    }

    /// A resigner paused (the thread blocked, as a
    /// SIGSTOP would) between the check that still names its token and the
    /// bump sends no InitProducerId once the bump's window closed: landing
    /// after a successor's mint, it would abort the successor's first
    /// transaction.
    #[tokio::test(flavor = "current_thread")]
    async fn a_bump_whose_window_closed_after_its_check_is_not_sent() {
        let broker = coordinator();
        let client = client(&broker);
        let deadline = Instant::now() + Duration::from_millis(200);
        let checked = client.describe_once("r", deadline).await.unwrap();
        assert_eq!(checked.map(|d| d.producer), Some(TOKEN));
        std::thread::sleep(Duration::from_millis(300));
        let sent = client
            .send_init_producer_id("r", 60_000, Some(TOKEN), deadline)
            .await;
        match sent {
            Err(Attempt::Fail(e)) => {
                assert!(
                    e.is_transient() && e.to_string().contains("window closed"),
                    "{e}"
                )
            }
            Err(other) => panic!("{other:?}"),
            Ok((_, resp)) => panic!("sent past its window: {resp:?}"),
        }
        assert_eq!(
            bumps_sent(&broker),
            0,
            "no InitProducerId reached the coordinator"
        );

        // The same within its window is sent, and bumps.
        let bumped = client
            .bump_if_current("r", TOKEN, 60_000, Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!(bumped, BumpAnswer::Bumped(ProducerEpoch::new(11, 4)));
        assert_eq!(bumps_sent(&broker), 1);
    }
}
