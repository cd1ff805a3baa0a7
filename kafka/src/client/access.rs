//! What a principal may do, asked of the cluster without changing anything
//! ([`Client::check_member_access`]): what a coordination member needs
//! before it registers in a role (the transactional id of the role, the
//! state readers' group, READ on the state topic).
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
//!    group nor commit to it, so DESCRIBE is all they need (the member's
//!    ACLs in `core/tests/kafka_acls.rs` grant no more).
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

use std::sync::atomic::AtomicBool;

use super::coordinator::Found;
use super::*;

/// Which of the questions are answered.
#[derive(Default)]
struct Answered {
    transactional_id: AtomicBool,
    group: AtomicBool,
    topic: AtomicBool,
}

/// True when `code` is the authorizer's "no" on a `resource`.
fn denied_on(api: ApiKey, code: i16, resource: Resource) -> bool {
    codes::meaning(api, code) == Meaning::Denied(resource)
}

impl Client {
    /// Asks the cluster whether this client's principal may lead `role`
    /// (module docs): WRITE and DESCRIBE on TransactionalId `role`, the
    /// consumer group `group`, READ on `topic`. A denial is
    /// [`Error::Fatal`] naming the resource and the ACL it needs; a cluster
    /// that does not answer within the operation timeout is
    /// [`Error::Transient`].
    pub async fn check_member_access(
        &self,
        role: &str,
        topic: &str,
        partition: i32,
        group: &str,
    ) -> Result<()> {
        crate::error::check_transactional_id(role)?;
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
        let answered = Answered {
            group: AtomicBool::new(allowed(&group_key)),
            topic: AtomicBool::new(allowed(&topic_key)),
            ..Answered::default()
        };
        let context = || {
            format!(
                "checking the ACLs of a member of {}",
                crate::error::quote(role)
            )
        };
        self.retrying(context, deadline, budget, Backoff::LOOKUP, || async {
            if !answered.transactional_id.load(Ordering::Relaxed) {
                self.ask_transactional_write(role, deadline).await?;
                answered.transactional_id.store(true, Ordering::Relaxed);
            }
            if answered.group.load(Ordering::Relaxed) && answered.topic.load(Ordering::Relaxed) {
                return Ok(());
            }
            // One check asks them; the checks that started with it (a
            // thousand roles acquired at once) take its answer.
            let _asking = tokio::time::timeout_at(deadline, self.inner.asking.lock())
                .await
                .map_err(|_| Attempt::Again("another check of the same ACLs did not end".into()))?;
            if allowed(&group_key) {
                answered.group.store(true, Ordering::Relaxed);
            }
            if allowed(&topic_key) {
                answered.topic.store(true, Ordering::Relaxed);
            }
            if !answered.group.load(Ordering::Relaxed) {
                self.ask_group(group, deadline).await?;
                answered.group.store(true, Ordering::Relaxed);
                self.remember_allowed(&group_key);
            }
            if !answered.topic.load(Ordering::Relaxed) {
                self.ask_topic_read(topic, partition, deadline).await?;
                answered.topic.store(true, Ordering::Relaxed);
                self.remember_allowed(&topic_key);
            }
            Ok(())
        })
        .await
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
        self.at(Target::Coordinator(role), deadline, |at| async move {
            let addr = &at.addr;
            // Up to version 4, as the lease writer sends it.
            let Some(version) = at.supports(ApiKey::EndTxn, (0, 4)) else {
                // No question to ask: the first InitProducerId answers it.
                tracing::debug!(broker = %addr, "no EndTxn version up to 4: WRITE on the transactional id is not checked before registering");
                return Ok(());
            };
            let mut req = EndTxnRequest::default();
            req.transactional_id = TransactionalId(StrBytes::from_string(role.to_owned()));
            req.producer_id = ProducerId(-1);
            req.producer_epoch = -1;
            req.committed = false;
            let resp: EndTxnResponse = self.exchange(&at, ApiKey::EndTxn, version, &req).await?;
            if denied_on(ApiKey::EndTxn, resp.error_code, Resource::TransactionalId) {
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
        })
        .await
    }

    /// Question 2: FindCoordinator for the group, at a bootstrap broker.
    async fn ask_group(&self, group: &str, deadline: Instant) -> Result<(), Attempt> {
        self.at_bootstrap(deadline, |at| async move {
            match self.find_coordinator(&at, group, KEY_TYPE_GROUP).await? {
                Found::Refused { code, what }
                    if denied_on(ApiKey::FindCoordinator, code, Resource::Group) =>
                {
                    Err(Attempt::Fail(Error::fatal(
                        format!("checking the ACLs of a member ({what}: {})", code_name(code)),
                        format!(
                            "not authorized on the consumer group {} (the group.id of the state readers): a \
                             member needs DESCRIBE on Group {}; nothing was registered",
                            crate::error::quote(group),
                            crate::error::quote(group),
                        ),
                    )))
                }
                // Any other answer came past the authorizer.
                _ => Ok(()),
            }
        })
        .await
    }

    /// Question 3: a Fetch of `topic`/`partition` that waits for nothing.
    async fn ask_topic_read(
        &self,
        topic: &str,
        partition: i32,
        deadline: Instant,
    ) -> Result<(), Attempt> {
        self.at_bootstrap(deadline, |at| async move {
            let broker = &at.addr;
            // Versions 4 to 12 name the topic (13 and later give its id).
            let Some(version) = at.supports(ApiKey::Fetch, (4, 12)) else {
                tracing::debug!(%broker, "no Fetch version 4 to 12: READ on the state topic is not checked before registering");
                return Ok(());
            };
            let req = one_batch_fetch(topic, partition, 0, 1);
            let resp: FetchResponse = self.exchange(&at, ApiKey::Fetch, version, &req).await?;
            let topic_denied = |code| denied_on(ApiKey::Fetch, code, Resource::Topic);
            let refusal = std::iter::once(resp.error_code)
                .chain(resp.responses.iter().flat_map(|t| t.partitions.iter()).map(|p| p.error_code))
                .find(|code| topic_denied(*code));
            if let Some(code) = refusal {
                return Err(Attempt::Fail(Error::fatal(
                    format!("checking the ACLs of a member (Fetch at {broker})"),
                    format!(
                        "not authorized to READ the state topic {} ({}): a member needs READ, WRITE, DESCRIBE \
                         and DESCRIBE_CONFIGS on Topic {}; nothing was registered",
                        crate::error::quote(topic),
                        code_name(code),
                        crate::error::quote(topic),
                    ),
                )));
            }
            Ok(())
        })
        .await
    }
}
