//! The group coordinator of a consumer group: the broker leading the
//! group's `__consumer_offsets` partition, which takes the group's offset
//! commits (TxnOffsetCommit) and answers what is committed (OffsetFetch).
//!
//! Found with FindCoordinator (key type group) at a bootstrap broker and
//! cached as the transaction coordinators are (the `routes` module): used
//! without a second look while younger than [`COORDINATOR_MAX_AGE`],
//! looked up again at the other brokers first once older, and forgotten
//! when a request to it says it moved or gets no answer, the next lookup
//! then asking it last. A group's cache is apart from the transactional
//! ids' (a group and a transactional id may have the same name and
//! different coordinators).

use super::coordinator::{Found, RELOOK_BOUND};
use super::routes::{Route, Suspect};
use super::*;

impl Client {
    /// The address of the group coordinator of `group`: cached while
    /// younger than [`COORDINATOR_MAX_AGE`]; once older, asked about again
    /// at the other brokers first within [`RELOOK_BOUND`] (the cached one
    /// kept when that brings nothing); else found with FindCoordinator, a
    /// forgotten coordinator asked last.
    pub(super) async fn group_coordinator(
        &self,
        group: &str,
        deadline: Instant,
    ) -> Result<String, Attempt> {
        let cached = self
            .inner
            .group_coordinators
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_marking(group, Instant::now())
            .map(|(route, aged)| (route.addr.clone(), aged));
        match cached {
            Some((addr, false)) => Ok(addr),
            Some((addr, true)) => {
                let avoid = Suspect {
                    addr: addr.clone(),
                    named_by: None,
                };
                let bound = deadline.min(deadline_in(RELOOK_BOUND));
                match self.find_group_route(group, bound, Some(&avoid)).await {
                    Ok(found) => Ok(found),
                    Err(e) => {
                        tracing::debug!(group, error = ?e, "asking FindCoordinator again about an aged group coordinator failed; the cached coordinator is used");
                        Ok(addr)
                    }
                }
            }
            None => {
                let suspect = self
                    .inner
                    .group_suspect
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(group, Instant::now());
                self.find_group_route(group, deadline, suspect.as_ref())
                    .await
            }
        }
    }

    /// Forgets the group coordinator of `group`; its next lookup asks
    /// `addr` last and, when the cached coordinator was `addr`, begins
    /// after the bootstrap broker that named it.
    pub(super) fn distrust_group_coordinator(&self, group: &str, addr: &str) {
        super::routes::distrust(
            &self.inner.group_coordinators,
            &self.inner.group_suspect,
            group,
            addr,
            Instant::now(),
        );
    }

    /// FindCoordinator (key type group) for `group` at the bootstrap
    /// brokers in the order of [`Client::lookup_order`] for `avoid`;
    /// caches the coordinator found with the broker that named it. A
    /// principal without DESCRIBE on the group is [`Attempt::Fail`] naming
    /// the group.
    async fn find_group_route(
        &self,
        group: &str,
        deadline: Instant,
        avoid: Option<&Suspect>,
    ) -> Result<String, Attempt> {
        let route = self
            .at_bootstrap_avoiding(deadline, avoid, |at| async move {
                match self.find_coordinator(&at, group, KEY_TYPE_GROUP).await? {
                    Found::At { addr, node } => Ok(Route {
                        addr,
                        node,
                        named_by: at.addr.clone(),
                    }),
                    Found::Refused { code, what } => {
                        match codes::meaning(ApiKey::FindCoordinator, code) {
                            Meaning::Denied(Resource::Group) => {
                                Err(Attempt::Fail(Error::fatal(what, group_denied(group))))
                            }
                            _ => Err(attempt_for(ApiKey::FindCoordinator, code, what)),
                        }
                    }
                }
            })
            .await?;
        let addr = route.addr.clone();
        self.inner
            .group_coordinators
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(group, route, Instant::now());
        Ok(addr)
    }

    /// How many consumer groups have a cached group coordinator. For tests.
    #[doc(hidden)]
    pub fn group_coordinators_cached(&self) -> usize {
        self.inner
            .group_coordinators
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }
}

/// What a principal refused on consumer group `group` needs.
pub(super) fn group_denied(group: &str) -> String {
    let g = crate::error::quote(group);
    format!(
        "not authorized on the consumer group {g}: an ACL allowing READ on Group {g} is needed \
         to commit its offsets (DESCRIBE to read them)"
    )
}
