//! The request layer: every request of the client goes through
//! [`Client::at`] (or, for the lookups that may ask any broker,
//! [`Client::at_bootstrap`]), and every retried one through the loop of the
//! `retry` module.
//!
//! [`Client::at`] owns, for one attempt:
//!
//! - **where it goes**: the transaction coordinator of a transactional id,
//!   the group coordinator of a consumer group, or the leader of a
//!   partition ([`Target`]; a request any bootstrap
//!   broker may answer goes through [`Client::at_bootstrap`]). The
//!   coordinator and the leader are looked up once (FindCoordinator,
//!   Metadata, each at a bootstrap broker) and cached;
//! - **forgetting** them: an attempt that ends [`Attempt::Moved`] (the
//!   broker said NOT_COORDINATOR, NOT_LEADER_OR_FOLLOWER, ..., or could not
//!   be reached) or [`Attempt::NoAnswer`] (sent, and no answer: a dead or
//!   stalled connection) drops the cached address, so the next attempt
//!   looks it up again;
//! - **its timeout**: an attempt gets the settings' request timeout, cut to
//!   the caller's deadline; a bootstrap lookup gives each broker an equal
//!   share of the time left (the `pool` module). A request that runs out
//!   of it closes its connection and marks the broker stalled;
//! - **stalled brokers**: lookups try them last, so the next attempt after
//!   a stall goes to another broker;
//! - **stale views**: a coordinator that has answered
//!   CONCURRENT_TRANSACTIONS without a break for [`BUSY_SUSPECT`], and a
//!   partition leader that did not answer or said it moved, are forgotten,
//!   and the lookup after asks them last: a broker cut off from its peers
//!   and the controller still names itself (the `busy_since` and `suspect`
//!   maps). That lookup also begins after the bootstrap broker that named
//!   the forgotten one, whose view may be what is stale, so lookups whose
//!   answers keep refusing go round the brokers in turn
//!   ([`Client::lookup_order`]).
//!
//! A request module only builds its request, sends it with
//! [`Client::exchange`], and reads the answer, turning an error code into
//! an [`Attempt`] through the one table of [`crate::codes`]
//! ([`attempt_for`]) when the answer means nothing more precise for it.

use std::future::Future;

use super::routes::Suspect;
use super::*;

mod attempt;

pub(crate) use attempt::Attempt;
pub(super) use attempt::{attempt_for, denied, read_answer, GROUP_HAS_MEMBERS};

/// Where a request goes.
#[derive(Debug, Clone, Copy)]
pub(super) enum Target<'a> {
    /// The transaction coordinator of this transactional id.
    Coordinator(&'a str),
    /// The group coordinator of this consumer group.
    Group(&'a str),
    /// The leader of this topic's partition.
    Leader(&'a str, i32),
}

/// A broker reached for one attempt: its address, a live connection in
/// this attempt's sole use and the attempt's deadline.
pub(super) struct Reached {
    /// The broker's address (`host:port`).
    pub(super) addr: String,
    /// The connection, this attempt's until it ends.
    pub(super) conn: super::pool::Leased,
    /// When this attempt gives up (the request timeout from when the
    /// connection was had, cut to the caller's deadline).
    pub(super) deadline: Instant,
}

impl Reached {
    /// The highest version of `key` in `range` the broker speaks; else
    /// [`Attempt::Fail`] naming the broker, the range and `needs` ("Kafka
    /// 3.0 or newer is needed", say; empty for nothing).
    pub(super) fn version(
        &self,
        key: ApiKey,
        range: (i16, i16),
        needs: &str,
    ) -> Result<i16, Attempt> {
        self.conn.version_for(key, range).ok_or_else(|| {
            Attempt::Fail(Error::fatal(
                format!("{key:?} at {}", self.addr),
                format!(
                    "the broker supports no {key:?} version {} to {}{}",
                    range.0,
                    range.1,
                    if needs.is_empty() {
                        String::new()
                    } else {
                        format!(" ({needs})")
                    }
                ),
            ))
        })
    }

    /// The highest version of `key` in `range` the broker speaks, if any.
    pub(super) fn supports(&self, key: ApiKey, range: (i16, i16)) -> Option<i16> {
        self.conn.version_for(key, range)
    }

    /// The time left of this attempt, in whole milliseconds (at least 1),
    /// for a request that tells the broker how long it may wait (a
    /// Produce's `timeout_ms`): the broker answers before the attempt
    /// gives up on it.
    pub(super) fn broker_wait_ms(&self) -> i32 {
        let left = self.deadline.saturating_duration_since(Instant::now());
        // A margin for the answer's way back.
        let wait = left.saturating_sub(left / 10);
        i32::try_from(wait.as_millis()).unwrap_or(i32::MAX).max(1)
    }
}

/// The longest one attempt waits at a broker that is stalled (see
/// [`Client::attempt_timeout`]).
pub(super) const STALLED_ATTEMPT: Duration = Duration::from_secs(1);

/// How long a coordinator may answer CONCURRENT_TRANSACTIONS without a
/// break before it is looked up again (see [`Client::note_busy`]): its
/// markers take milliseconds on a healthy cluster, and seconds only while
/// a partition of the transaction has lost its leader.
pub(crate) const BUSY_SUSPECT: Duration = Duration::from_secs(2);

impl Client {
    /// One attempt of a request at `target`, within `deadline`: finds the
    /// target's broker (cached, or looked up), connects, and runs `f` with
    /// the broker reached and the attempt's own deadline. When `f` (or the
    /// way to the broker) ends [`Attempt::Moved`] or
    /// [`Attempt::NoAnswer`], the coordinator or leader is forgotten. A
    /// request any bootstrap broker may answer goes through
    /// [`Client::at_bootstrap`] instead.
    pub(super) async fn at<T, F, Fut>(
        &self,
        target: Target<'_>,
        deadline: Instant,
        mut f: F,
    ) -> Result<T, Attempt>
    where
        F: FnMut(Reached) -> Fut,
        Fut: Future<Output = Result<T, Attempt>>,
    {
        let addr = match target {
            Target::Coordinator(id) => self.coordinator(id, deadline).await?,
            Target::Group(group) => self.group_coordinator(group, deadline).await?,
            Target::Leader(topic, partition) => {
                self.partition_leader(topic, partition, deadline).await?
            }
        };
        let out = self.on(addr.clone(), deadline, None, &mut f).await;
        if let Err(Attempt::Moved(_) | Attempt::NoAnswer(_)) = &out {
            match target {
                // A coordinator cut off from the controller names itself in
                // FindCoordinator: the next lookup asks the other brokers
                // first.
                Target::Coordinator(id) => self.distrust_coordinator(id, &addr),
                Target::Group(group) => self.distrust_group_coordinator(group, &addr),
                Target::Leader(topic, partition) => {
                    let named_by = self
                        .forget_leader(topic, partition)
                        .filter(|l| l.addr == addr)
                        .map(|l| l.named_by);
                    // Its view of the topic may be what is stale (a leader
                    // cut off from the controller still names itself), and
                    // so may the view of the broker that named it: the next
                    // Metadata asks the other brokers first.
                    self.distrust_for_topic(
                        topic,
                        Suspect {
                            addr: addr.clone(),
                            named_by,
                        },
                    );
                }
            }
        }
        if let Target::Coordinator(id) = target {
            self.note_busy(id, &addr, matches!(out, Err(Attempt::Busy(_))));
        }
        out
    }

    /// Keeps track of how long the coordinator at `addr` has answered
    /// CONCURRENT_TRANSACTIONS for `id` without a break. Past
    /// [`BUSY_SUSPECT`] it is forgotten and the next lookup asks the other
    /// brokers first: a coordinator cut off from its peers and from the
    /// controller cannot end the transaction it holds and does not learn
    /// that the cluster moved its partition elsewhere, so it answers
    /// CONCURRENT_TRANSACTIONS for as long as the cut lasts. A coordinator
    /// that is really the coordinator is found again by the lookup, at the
    /// cost of one FindCoordinator.
    fn note_busy(&self, id: &str, addr: &str, busy: bool) {
        let mut map = self
            .inner
            .busy_since
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if !busy {
            map.remove(id);
            return;
        }
        let now = Instant::now();
        let since = match map.get(id) {
            Some((a, t)) if a == addr => *t,
            _ => {
                map.insert(id.to_owned(), (addr.to_owned(), now));
                now
            }
        };
        if now.duration_since(since) >= BUSY_SUSPECT {
            map.remove(id);
            drop(map);
            tracing::debug!(transactional_id = id, coordinator = addr, "CONCURRENT_TRANSACTIONS for {BUSY_SUSPECT:?}; looking the coordinator up again at the other brokers first");
            self.distrust_coordinator(id, addr);
        }
    }

    /// Forgets the coordinator of `id`; its next lookup asks `addr` last
    /// and, when the cached coordinator was `addr`, begins after the
    /// bootstrap broker that named it (see [`Client::lookup_order`]).
    pub(super) fn distrust_coordinator(&self, id: &str, addr: &str) {
        routes::distrust(
            &self.inner.coordinators,
            &self.inner.suspect,
            id,
            addr,
            Instant::now(),
        );
    }

    /// The next Metadata of `topic` asks `suspect` last (a leader that did
    /// not answer, or a broker whose view of the topic may be stale) and
    /// begins after the broker that named it, if known.
    pub(super) fn distrust_for_topic(&self, topic: &str, suspect: Suspect) {
        self.inner
            .suspect_leader
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(topic.to_owned(), suspect);
    }

    /// The longest one attempt at `addr` waits: the request timeout, or
    /// [`STALLED_ATTEMPT`] while `addr` is stalled (see the `pool` module).
    /// A stalled broker is paused, cut off or dead, and the coordinator or
    /// leader the cluster moves away from it is found only by the next
    /// attempt's lookup: a full request timeout per attempt would add up to
    /// that much to every failover; a broker that is merely slow answers
    /// once and is no longer stalled.
    pub(super) fn attempt_timeout(&self, addr: &str) -> Duration {
        if self.is_stalled(addr) {
            self.inner.request_timeout.min(STALLED_ATTEMPT)
        } else {
            self.inner.request_timeout
        }
    }

    /// One attempt at one bootstrap broker after another until one answers
    /// or fails for good: brokers not stalled first, in the configured
    /// order, then the stalled ones, longest stalled last. Each broker gets
    /// an equal share of the time left among those not tried yet (see the
    /// `pool` module), at most the request timeout. When none answers, the
    /// last reason, as [`Attempt::Again`].
    pub(super) async fn at_bootstrap<T, F, Fut>(
        &self,
        deadline: Instant,
        f: F,
    ) -> Result<T, Attempt>
    where
        F: FnMut(Reached) -> Fut,
        Fut: Future<Output = Result<T, Attempt>>,
    {
        self.at_bootstrap_avoiding(deadline, None, f).await
    }

    /// [`Client::at_bootstrap`], in the order [`Client::lookup_order`]
    /// gives for `avoid`.
    pub(super) async fn at_bootstrap_avoiding<T, F, Fut>(
        &self,
        deadline: Instant,
        avoid: Option<&Suspect>,
        f: F,
    ) -> Result<T, Attempt>
    where
        F: FnMut(Reached) -> Fut,
        Fut: Future<Output = Result<T, Attempt>>,
    {
        self.at_each(self.lookup_order(avoid), deadline, f).await
    }

    /// One attempt at each broker of `order` in turn until one answers or
    /// fails for good, each with an equal share of the time left among
    /// those not tried yet (see [`Client::broker_share`]), at most the
    /// request timeout. When none answers, the last reason, as
    /// [`Attempt::Again`].
    pub(super) async fn at_each<T, F, Fut>(
        &self,
        order: Vec<String>,
        deadline: Instant,
        mut f: F,
    ) -> Result<T, Attempt>
    where
        F: FnMut(Reached) -> Fut,
        Fut: Future<Output = Result<T, Attempt>>,
    {
        let n = order.len();
        let mut last = String::from("no bootstrap broker answered");
        for (i, broker) in order.into_iter().enumerate() {
            let Some(share) = Self::broker_share(deadline, i, n) else {
                break;
            };
            let share = share.min(deadline_in(self.inner.request_timeout));
            match self
                .on(broker, share, Some(self.inner.request_timeout), &mut f)
                .await
            {
                Ok(v) => return Ok(v),
                Err(Attempt::Fail(e)) => return Err(Attempt::Fail(e)),
                Err(
                    Attempt::Moved(r) | Attempt::NoAnswer(r) | Attempt::Again(r) | Attempt::Busy(r),
                ) => last = r,
            }
        }
        Err(Attempt::Again(last))
    }

    /// The bootstrap brokers in the order a lookup asks them, given
    /// `avoid`, a broker that refused or did not answer: the brokers not
    /// stalled first, in the configured order rotated to begin after the
    /// bootstrap broker that named `avoid` (when known: its view may be
    /// stale, so it is asked last of them), then the stalled ones (see
    /// [`Client::bootstrap_order`]), and `avoid` itself last of all. A
    /// lookup whose answer keeps refusing thus goes round every broker in
    /// turn, one per lookup, until the caller's deadline.
    pub(super) fn lookup_order(&self, avoid: Option<&Suspect>) -> Vec<String> {
        let start_after = avoid.and_then(|s| s.named_by.as_deref());
        let mut order = self.bootstrap_order(start_after);
        if let Some(avoid) = avoid {
            // A stable sort: the others keep their order.
            order.sort_by_key(|b| *b == avoid.addr);
        }
        order
    }

    /// Has a connection to `addr` of its own (an unreachable broker, or
    /// one that stalls while this waits, is [`Attempt::Moved`]), waiting
    /// for it until `deadline`, and runs `f` there with the attempt's
    /// deadline: `attempt` (else [`Client::attempt_timeout`]) from then,
    /// cut to `deadline`.
    async fn on<T, F, Fut>(
        &self,
        addr: String,
        deadline: Instant,
        attempt: Option<Duration>,
        f: &mut F,
    ) -> Result<T, Attempt>
    where
        F: FnMut(Reached) -> Fut,
        Fut: Future<Output = Result<T, Attempt>>,
    {
        let leased = self.connection(&addr, deadline, attempt).await?;
        let attempt = attempt.unwrap_or_else(|| self.attempt_timeout(&addr));
        f(Reached {
            conn: leased,
            addr,
            deadline: deadline.min(deadline_in(attempt)),
        })
        .await
    }

    /// Sends `req` as version `version` of `key` on the connection reached
    /// and waits for the answer until the attempt's deadline. No answer (a
    /// timeout, which closes the connection and marks the broker stalled,
    /// or a broken connection) is [`Attempt::NoAnswer`].
    pub(super) async fn exchange<Req: Encodable, Resp: Decodable + HeaderVersion>(
        &self,
        at: &Reached,
        key: ApiKey,
        version: i16,
        req: &Req,
    ) -> Result<Resp, Attempt> {
        match at
            .conn
            .request::<Req, Resp>(key, version, req, at.deadline)
            .await
        {
            Ok(r) => {
                self.answered(&at.addr);
                Ok(r)
            }
            Err(e) => {
                if e.kind() == std::io::ErrorKind::TimedOut {
                    self.stalled(&at.addr);
                }
                // A closed connection is replaced by the next `connection`
                // call for its address.
                Err(Attempt::NoAnswer(format!(
                    "{key:?} v{version} to {}: {e}",
                    at.addr
                )))
            }
        }
    }

    /// Runs `attempt` through the retry loop until `deadline` (see the
    /// `retry` module) with `backoff`; out of time, the error names
    /// `context()`, the budget and the last reason.
    pub(super) async fn retrying<T, F, Fut>(
        &self,
        context: impl FnOnce() -> String,
        deadline: Instant,
        budget: Duration,
        backoff: retry::Backoff,
        attempt: F,
    ) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Attempt>>,
    {
        self.check_resolves().await?;
        match retry::retry(deadline, backoff, attempt).await {
            retry::Tried::Done(v) => Ok(v),
            retry::Tried::Failed(e) => Err(e),
            retry::Tried::OutOfTime(why) => Err(self.gave_up(context(), budget, why)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_become_attempts() {
        let a = |api, code| attempt_for(api, code, String::new());
        assert!(matches!(a(ApiKey::FindCoordinator, 16), Attempt::Moved(_)));
        assert!(matches!(a(ApiKey::FindCoordinator, 15), Attempt::Moved(_)));
        assert!(matches!(a(ApiKey::FindCoordinator, 14), Attempt::Again(_)));
        assert!(matches!(a(ApiKey::FindCoordinator, 7), Attempt::Again(_)));
        assert!(matches!(a(ApiKey::ListOffsets, 6), Attempt::Moved(_)));
        assert!(matches!(a(ApiKey::InitProducerId, 51), Attempt::Busy(_)));
        assert!(matches!(
            a(ApiKey::FindCoordinator, 53),
            Attempt::Fail(Error::Fatal { .. })
        ));
        assert!(matches!(a(ApiKey::FindCoordinator, 42), Attempt::Fail(_)));
        match a(ApiKey::Metadata, 30) {
            Attempt::Fail(e) => {
                assert!(e.to_string().contains("not authorized on the group"), "{e}")
            }
            other => panic!("{other:?}"),
        }
    }
}
