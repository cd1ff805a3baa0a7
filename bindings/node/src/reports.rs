//! What the describe and topic operations return: `LeadershipStatus`,
//! `RoleStateReport`, `RosterEntry`, `TopicReport`.

use krabka_coordination::leadership::{
    LeadershipStatus as CoreStatus, RoleStateReport as CoreReport,
};
use krabka_coordination::transport::kafka::TopicReport as CoreTopicReport;
use napi::bindgen_prelude::{BigInt, Unknown};
use napi::Env;
use napi_derive::napi;

use crate::values::{lease_to_js, token_arg, token_to_js, Made};

/// The authority of a role as its transaction coordinator reports it, from
/// `client.describeLeadership(role)`. A read at one instant, not a fence.
#[napi]
pub struct LeadershipStatus {
    pub(crate) inner: CoreStatus,
}

#[napi]
impl LeadershipStatus {
    /// The newest token the coordinator minted for the role (`NO_EPOCH`
    /// when no member has taken it).
    #[napi(getter, ts_return_type = "FencingToken")]
    pub fn token(&self, env: Env) -> napi::Result<Made> {
        token_to_js(&env, self.inner.token).map(Made)
    }

    /// True when `token` is the role's current token: its holder is
    /// authoritative. `NO_EPOCH` never is. `token` is a `FencingToken` or
    /// its text (`'4001/7'`, as `String(token)` gives it); malformed text
    /// throws an `InvalidArgumentError` (`field` `'token'`).
    #[napi(ts_args_type = "token: FencingToken | string")]
    pub fn authoritative(&self, env: Env, token: Unknown<'_>) -> napi::Result<bool> {
        let token = token_arg(&env, &token, "token")?;
        Ok(self.inner.authoritative(&token))
    }
}

/// One member of a role's roster.
#[napi(object)]
pub struct RosterEntry {
    /// The member id.
    pub member: String,
    /// The member's place in the roster (0 first): the order of its
    /// registration.
    pub rank: u32,
    /// The offset of the member's latest registration record.
    pub offset: BigInt,
    /// When the member registered, in epoch milliseconds of its clock.
    pub registered_at: BigInt,
}

/// The roster (in rank order) and the lease of a role, from
/// `client.describeRoleState(role)`.
#[napi]
pub struct RoleStateReport {
    pub(crate) inner: CoreReport,
}

#[napi]
impl RoleStateReport {
    /// The role.
    #[napi(getter)]
    pub fn role(&self) -> String {
        self.inner.role.clone()
    }

    /// The partition of `__coordination_state` that holds the role.
    #[napi(getter)]
    pub fn partition(&self) -> i32 {
        self.inner.partition
    }

    /// The roster in rank order (`roster[i].rank === i`).
    #[napi(getter)]
    pub fn roster(&self) -> Vec<RosterEntry> {
        self.inner
            .roster
            .iter()
            .enumerate()
            .map(|(rank, e)| RosterEntry {
                member: e.member.clone(),
                rank: u32::try_from(rank).unwrap_or(u32::MAX),
                offset: BigInt::from(e.offset),
                registered_at: BigInt::from(e.registered_at),
            })
            .collect()
    }

    /// The member ids in rank order.
    #[napi(getter)]
    pub fn members(&self) -> Vec<String> {
        self.inner.roster.iter().map(|e| e.member.clone()).collect()
    }

    /// The current lease, or `null` (never taken, or cleared by a resign).
    #[napi(getter, ts_return_type = "Lease | null")]
    pub fn lease(&self, env: Env) -> napi::Result<Option<Made>> {
        self.inner
            .lease
            .clone()
            .map(|l| lease_to_js(&env, l).map(Made))
            .transpose()
    }
}

/// What `client.ensureStateTopic()` or `client.checkStateTopic()` found or
/// made.
#[napi(object)]
pub struct TopicReport {
    /// The topic's name.
    pub topic: String,
    /// True when this call created the topic.
    pub created: bool,
    /// The partition count.
    pub partitions: i32,
    /// The replica count of partition 0.
    pub replication_factor: i32,
    /// The topic's `cleanup.policy` (`compact`).
    pub cleanup_policy: String,
    /// The topic's `min.insync.replicas`, when the broker reports it.
    pub min_insync_replicas: Option<i32>,
    /// Advice for the operator (such as a `min.insync.replicas` below 2).
    pub warnings: Vec<String>,
}

impl From<CoreTopicReport> for TopicReport {
    fn from(r: CoreTopicReport) -> Self {
        TopicReport {
            topic: r.topic,
            created: r.created,
            partitions: r.partitions,
            replication_factor: r.replication_factor,
            cleanup_policy: r.cleanup_policy,
            min_insync_replicas: r.min_insync_replicas,
            warnings: r.warnings,
        }
    }
}
