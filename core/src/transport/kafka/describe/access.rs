//! What a member may do, asked of the cluster before it registers
//! ([`DescribeClient::check_member_access`]).
//!
//! A member that lacks an ACL would otherwise find out only after it
//! registered: its InitProducerId (WRITE on the transactional id), the state
//! readers' consumer group or their fetches would fail it then, and its
//! registration record would already be in the roster. So before it
//! registers, three requests ask the authorizer, each of which changes
//! nothing on the broker:
//!
//! 1. **WRITE on TransactionalId `<role>`**: an EndTxn (abort) for the role
//!    with producer id -1. The broker checks WRITE on the transactional id
//!    before anything else (`TRANSACTIONAL_ID_AUTHORIZATION_FAILED`); past
//!    that, the coordinator compares the producer id with the role's, which
//!    is never -1, and answers `INVALID_PRODUCER_ID_MAPPING` without touching
//!    the transaction (or `NOT_COORDINATOR` elsewhere). No epoch is bumped,
//!    no transaction is aborted. It goes to the role's coordinator, found by
//!    FindCoordinator, which needs DESCRIBE on the transactional id.
//! 2. **The state readers' consumer group** (`group.id`, by default
//!    `krabka-coordination-reader`): FindCoordinator for the group, the
//!    request the readers' librdkafka consumers send (DESCRIBE on the group;
//!    READ implies it). They assign partitions by hand and never join the
//!    group nor commit to it, so DESCRIBE is all they need (measured on
//!    Kafka 4.1.1).
//! 3. **READ on the state topic**: a Fetch of the member's partition at
//!    offset 0 with `max_wait_ms` 0 (isolation read_committed), answered at
//!    once.
//!
//! Questions 2 and 3 are the same for every role: a client asks each once
//! and remembers an allowed answer (a denied one is asked again); checks
//! running at the same time wait for the one asking.
//!
//! Only the authorizer's answer counts: any other answer (a coordinator that
//! moved, a topic partition led elsewhere, an offset out of range) shows
//! the request was authorized, so it passes. A request that got no answer
//! (a connection failure) is retried within the operation timeout. WRITE on
//! the state topic needs no question: the registration is the member's
//! first write, and a refused one writes nothing.

use kafka_protocol::messages::{
    ApiKey, EndTxnRequest, EndTxnResponse, FetchResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::*;

/// TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
const TRANSACTIONAL_ID_DENIED: i16 = 53;
/// GROUP_AUTHORIZATION_FAILED.
const GROUP_DENIED: i16 = 30;
/// TOPIC_AUTHORIZATION_FAILED.
const TOPIC_DENIED: i16 = 29;

/// Which of the questions are answered.
#[derive(Default)]
struct Answered {
    transactional_id: bool,
    group: bool,
    topic: bool,
}

impl DescribeClient {
    /// Asks the cluster whether this client's principal may lead `role`
    /// (module docs): WRITE and DESCRIBE on TransactionalId `role`, the
    /// consumer group `group`, READ on `topic`. A denial is
    /// [`Error::Fatal`] naming the resource and the ACL it needs; a cluster
    /// that does not answer within the operation timeout is
    /// [`Error::Transient`].
    pub(crate) async fn check_member_access(
        &self,
        role: &str,
        topic: &str,
        partition: i32,
        group: &str,
    ) -> Result<()> {
        crate::codec::check_role(role)?;
        let (deadline, budget) = self.deadline(self.inner.timeout);
        // The group and the topic are the same for every role: asked once
        // per client (a thousand roles acquired at once ask them once).
        let allowed = |what: &str| {
            self.inner
                .allowed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(what)
        };
        let (group_key, topic_key) = (format!("group {group}"), format!("topic {topic}"));
        let mut answered = Answered {
            group: allowed(&group_key),
            topic: allowed(&topic_key),
            ..Answered::default()
        };
        let mut backoff = FIRST_BACKOFF;
        loop {
            let attempt = async {
                if !answered.transactional_id {
                    self.ask_transactional_write(role, deadline).await?;
                    answered.transactional_id = true;
                }
                if answered.group && answered.topic {
                    return Ok(());
                }
                // One check asks them; the checks that started with it
                // (a thousand roles acquired at once) take its answer.
                let _asking = tokio::time::timeout_at(deadline, self.inner.asking.lock())
                    .await
                    .map_err(|_| {
                        Attempt::Backoff("another check of the same ACLs did not end".into())
                    })?;
                answered.group |= allowed(&group_key);
                answered.topic |= allowed(&topic_key);
                if !answered.group {
                    self.ask_group(group, deadline).await?;
                    answered.group = true;
                    self.remember_allowed(&group_key);
                }
                if !answered.topic {
                    self.ask_topic_read(topic, partition, deadline).await?;
                    answered.topic = true;
                    self.remember_allowed(&topic_key);
                }
                Ok::<(), Attempt>(())
            };
            let reason = match attempt.await {
                Ok(()) => return Ok(()),
                Err(Attempt::Fail(e)) => return Err(e),
                Err(Attempt::Refind(r)) => {
                    self.forget_coordinator(role);
                    r
                }
                Err(Attempt::Backoff(r)) => r,
            };
            if no_time_for(backoff, deadline) {
                let context = format!(
                    "checking the ACLs of a member of {}",
                    crate::error::quote(role)
                );
                return Err(self.gave_up(context, budget, reason));
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    fn remember_allowed(&self, what: &str) {
        self.inner
            .allowed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(what.to_owned());
    }

    /// Question 1: the EndTxn for producer id -1.
    async fn ask_transactional_write(&self, role: &str, deadline: Instant) -> Result<(), Attempt> {
        let addr = self.coordinator(role, deadline).await?;
        let conn = self
            .connection(&addr, deadline)
            .await
            .map_err(|a| match a {
                Attempt::Backoff(r) => Attempt::Refind(r),
                other => other,
            })?;
        // Up to version 4, as the lease producers send it.
        let Some(version) = conn.version_for(ApiKey::EndTxn, (0, 4)) else {
            // No question to ask: the first InitProducerId answers it.
            tracing::debug!(broker = %addr, "no EndTxn version up to 4: WRITE on the transactional id is not checked before registering");
            return Ok(());
        };
        let mut req = EndTxnRequest::default();
        req.transactional_id = TransactionalId(StrBytes::from_string(role.to_owned()));
        req.producer_id = ProducerId(-1);
        req.producer_epoch = -1;
        req.committed = false;
        let resp: EndTxnResponse = self
            .call(&conn, ApiKey::EndTxn, version, &req, deadline)
            .await
            .map_err(|a| match a {
                Attempt::Backoff(r) => Attempt::Refind(r),
                other => other,
            })?;
        if resp.error_code == TRANSACTIONAL_ID_DENIED {
            return Err(Attempt::Fail(Error::fatal(
                format!(
                    "checking the ACLs of a member of {} (EndTxn at {addr})",
                    crate::error::quote(role)
                ),
                format!(
                    "not authorized to WRITE TransactionalId {} ({}): to lead the role a member needs WRITE and \
                     DESCRIBE on TransactionalId {}; nothing was registered",
                    crate::error::quote(role),
                    code_name(resp.error_code),
                    crate::error::quote(role),
                ),
            )));
        }
        tracing::trace!(answer = %code_name(resp.error_code), "WRITE on the transactional id: allowed");
        Ok(())
    }

    /// Question 2: FindCoordinator for the group, at a bootstrap broker.
    async fn ask_group(&self, group: &str, deadline: Instant) -> Result<(), Attempt> {
        let mut last = String::from("no bootstrap broker answered");
        for broker in &self.inner.bootstrap {
            match self
                .find_coordinator_answer(broker, group, KEY_TYPE_GROUP, deadline)
                .await
            {
                Ok(Found::Refused { code, what }) if code == GROUP_DENIED => {
                    return Err(Attempt::Fail(Error::fatal(
                        format!("checking the ACLs of a member ({what})"),
                        format!(
                            "not authorized on the consumer group {} (the group.id of the state readers): a \
                             member needs DESCRIBE on Group {}; nothing was registered",
                            crate::error::quote(group),
                            crate::error::quote(group),
                        ),
                    )))
                }
                // Any other answer came past the authorizer.
                Ok(_) => return Ok(()),
                Err(Attempt::Fail(e)) => return Err(Attempt::Fail(e)),
                Err(Attempt::Refind(r) | Attempt::Backoff(r)) => last = r,
            }
        }
        Err(Attempt::Backoff(last))
    }

    /// Question 3: a Fetch of `topic`/`partition` that waits for nothing.
    async fn ask_topic_read(
        &self,
        topic: &str,
        partition: i32,
        deadline: Instant,
    ) -> Result<(), Attempt> {
        let mut last = String::from("no bootstrap broker answered");
        for broker in &self.inner.bootstrap {
            let conn = match self.connection(broker, deadline).await {
                Ok(c) => c,
                Err(Attempt::Fail(e)) => return Err(Attempt::Fail(e)),
                Err(Attempt::Refind(r) | Attempt::Backoff(r)) => {
                    last = r;
                    continue;
                }
            };
            // Versions 4 to 12 name the topic (13 and later give its id).
            let Some(version) = conn.version_for(ApiKey::Fetch, (4, 12)) else {
                tracing::debug!(%broker, "no Fetch version 4 to 12: READ on the state topic is not checked before registering");
                return Ok(());
            };
            let req = one_batch_fetch(topic, partition, 0, 1);
            let resp: FetchResponse = match self
                .call(&conn, ApiKey::Fetch, version, &req, deadline)
                .await
            {
                Ok(r) => r,
                Err(Attempt::Fail(e)) => return Err(Attempt::Fail(e)),
                Err(Attempt::Refind(r) | Attempt::Backoff(r)) => {
                    last = r;
                    continue;
                }
            };
            let denied = resp.error_code == TOPIC_DENIED
                || resp
                    .responses
                    .iter()
                    .flat_map(|t| t.partitions.iter())
                    .any(|p| p.error_code == TOPIC_DENIED);
            if denied {
                return Err(Attempt::Fail(Error::fatal(
                    format!("checking the ACLs of a member (Fetch at {broker})"),
                    format!(
                        "not authorized to READ the state topic {} ({}): a member needs READ, WRITE, DESCRIBE \
                         and DESCRIBE_CONFIGS on Topic {}; nothing was registered",
                        crate::error::quote(topic),
                        code_name(TOPIC_DENIED),
                        crate::error::quote(topic),
                    ),
                )));
            }
            return Ok(());
        }
        Err(Attempt::Backoff(last))
    }
}
