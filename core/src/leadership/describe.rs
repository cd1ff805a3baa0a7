//! What a third party reads: the authority of a role (one DescribeTransactions
//! request) and its roster and lease (a read of its state partition).

use crate::codec::Lease;
use crate::error::Result;
use crate::partition::role_partition;
use crate::state::{RoleState, RosterEntry};
use crate::token::FencingToken;
use crate::transport::{Describer, StateReader};

/// The authority of a role as its transaction coordinator reports it.
///
/// This is a **read** of the coordinator at one instant, not a fence: a
/// writer that was authoritative when asked may be superseded a moment
/// later. The fence is the broker's, on every write that carries the epoch.
/// Use [`LeadershipStatus::authoritative`] (equality with the current token)
/// to check a writer. Comparing tokens by order is meaningful within one
/// producer id (the epoch grows); across producer ids it is not a proof: a
/// rotation (an exhausted epoch, an expired transactional id) takes an id
/// from the current coordinator's block, which can be lower than the old
/// one. A store that fences by token proves a new producer id current with
/// this call (see `docs/fenced-stores.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeadershipStatus {
    /// The newest token the coordinator minted for the role, or
    /// [`crate::NO_EPOCH`] when no member has taken it.
    pub token: FencingToken,
}

impl LeadershipStatus {
    /// True when `token` is the role's current token (equality, not order):
    /// a writer holding it was authoritative when the coordinator answered.
    /// [`crate::NO_EPOCH`] is never authoritative.
    pub fn authoritative(&self, token: &FencingToken) -> bool {
        !token.is_no_epoch() && *token == self.token
    }
}

/// Asks the role's transaction coordinator for the current token: one
/// DescribeTransactions request once the coordinator is known.
pub async fn describe_leadership(
    describer: &dyn Describer,
    role: &str,
) -> Result<LeadershipStatus> {
    crate::codec::check_role(role)?;
    let started = std::time::Instant::now();
    let token = describer.describe_epoch(role).await?;
    crate::metrics::describe(started.elapsed());
    Ok(LeadershipStatus { token })
}

/// The roster (with ranks) and the lease of a role, for tools that report a
/// cluster's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleStateReport {
    /// The role.
    pub role: String,
    /// The partition of `__coordination_state` that holds it.
    pub partition: i32,
    /// The roster in rank order; the rank is the index.
    pub roster: Vec<RosterEntry>,
    /// The current lease (member, token, granted at, deadline), if any.
    pub lease: Option<Lease>,
}

/// Reads the roster and the lease of `role` from its partition.
pub async fn describe_role_state(
    reader: &dyn StateReader,
    role: &str,
    partitions: i32,
) -> Result<RoleStateReport> {
    let partition = role_partition(role, partitions)?;
    let records = reader.read_partition(partition).await?;
    let state = RoleState::build(role, &records)?;
    Ok(RoleStateReport {
        role: role.to_owned(),
        partition,
        roster: state.roster().cloned().collect(),
        lease: state.lease().cloned(),
    })
}

/// Every role found in the state topic ([`describe_roles`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleListing {
    /// The roles with a roster or a lease, by partition, then by name.
    pub roles: Vec<RoleStateReport>,
    /// Roles whose records do not decode: the role, its partition and the
    /// first error (see [`RoleState`]'s policy for malformed data).
    pub unreadable: Vec<(String, i32, crate::error::FormatError)>,
    /// Records whose key does not decode, so that belong to no role.
    pub malformed_keys: u64,
}

/// Reads every partition of the state topic once (all of them at the same
/// time) and reports each role that has a roster or a lease. A role whose
/// records do not decode is listed in [`RoleListing::unreadable`] instead of
/// failing the others.
pub async fn describe_roles(reader: &dyn StateReader, partitions: i32) -> Result<RoleListing> {
    if partitions < 1 {
        return Err(crate::Error::InvalidArgument(format!(
            "the partition count must be at least 1, not {partitions}"
        )));
    }
    let reads = (0..partitions).map(|p| reader.read_partition(p)).collect();
    let mut listing = RoleListing::default();
    for (partition, records) in (0..partitions).zip(crate::join::join_all(reads).await) {
        let records = records?;
        // Each role's records, in offset order.
        let mut by_role: std::collections::HashMap<&str, Vec<&crate::transport::Record>> =
            std::collections::HashMap::new();
        for r in &records {
            match crate::codec::decode_key_ref(&r.key) {
                Ok(k) => by_role.entry(k.role).or_default().push(r),
                Err(_) => listing.malformed_keys += 1,
            }
        }
        let mut roles: Vec<_> = by_role.into_iter().collect();
        roles.sort_unstable_by_key(|(role, _)| *role);
        for (role, records) in roles {
            match RoleState::build(role, records) {
                Ok(state) if state.roster_len() > 0 || state.lease().is_some() => {
                    listing.roles.push(RoleStateReport {
                        role: role.to_owned(),
                        partition,
                        roster: state.roster().cloned().collect(),
                        lease: state.lease().cloned(),
                    })
                }
                Ok(_) => {}
                Err(e) => listing.unreadable.push((role.to_owned(), partition, e)),
            }
        }
    }
    Ok(listing)
}
