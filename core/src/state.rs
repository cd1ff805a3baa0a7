//! The roster and lease of a role, built from the log.
//!
//! Every record of a role lives in one partition of `__coordination_state`, so
//! the records of a role carry a total order: the offset. [`RoleState`] folds
//! the records of a partition, in offset order, into the state of one role.
//!
//! # Rules
//!
//! * **Rank comes from the log.** The roster is ordered by the offset of each
//!   member's *latest* registration. A member that registers again moves to the
//!   tail (the no-failback rule). A registration tombstone (a null or an empty
//!   value) removes the member.
//! * **The lease is the latest lease record**, or none after a lease tombstone
//!   (null or empty value). The deadline of the lease a tombstone cleared is
//!   kept as [`RoleState::last_cleared_deadline`].
//! * **Other roles are ignored.** A partition holds the records of many roles;
//!   a record whose key names another role only moves
//!   [`RoleState::last_offset`]. It is filtered without allocating, and its
//!   value is never decoded.
//! * **Re-delivery is harmless.** A record whose offset is at or below
//!   [`RoleState::last_offset`] is ignored, so a reader may re-apply an
//!   overlapping batch.
//!
//! # Malformed data
//!
//! * A key that does not decode cannot be attributed to any role. It is
//!   skipped, counted ([`RoleState::malformed_keys`]) and logged with
//!   `tracing::warn!`: one writer's bad key must not stop every role sharing the
//!   partition.
//! * A record whose key is this role's but whose value does not decode, or a
//!   registration whose value names another member than its key, is an error
//!   ([`FormatError`]) and the state is left as it was before that record. A
//!   port that writes bad values for a role is a bug that must be seen, not
//!   elected around: skipping a lease or a registration would silently change
//!   who challenges when.

use std::collections::{BTreeMap, HashMap};

use crate::codec::{decode_key_ref, decode_lease_ref, decode_registration_ref, KeyKind, Lease};
use crate::error::{FormatError, Part};
use crate::transport::Record;

/// One member of a role's roster.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RosterEntry {
    /// The member id.
    pub member: String,
    /// The offset of the member's latest registration record: its join sequence.
    pub offset: i64,
    /// The `registered_at` of that registration, in epoch milliseconds of the
    /// member's clock (informational; rank comes from `offset`).
    pub registered_at: i64,
}

/// The roster and lease of one role.
///
/// Build it with [`RoleState::build`] from the records of the role's partition
/// in offset order, and keep it current with [`RoleState::apply`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleState {
    role: String,
    /// The roster in rank order: latest registration offset -> entry.
    roster: BTreeMap<i64, RosterEntry>,
    /// Member -> the offset of its latest registration (the key into `roster`).
    members: HashMap<String, i64>,
    lease: Option<Lease>,
    last_cleared_deadline: Option<i64>,
    last_offset: Option<i64>,
    malformed_keys: u64,
}

impl RoleState {
    /// Whether `key` is the key of a record of this role (a registration
    /// or the lease); a key that does not decode is nobody's.
    pub fn is_own_key(&self, key: &[u8]) -> bool {
        decode_key_ref(key).is_ok_and(|k| k.role == self.role)
    }

    /// The empty state of `role`: nobody registered, no lease, no record applied.
    pub fn new(role: impl Into<String>) -> Self {
        RoleState {
            role: role.into(),
            roster: BTreeMap::new(),
            members: HashMap::new(),
            lease: None,
            last_cleared_deadline: None,
            last_offset: None,
            malformed_keys: 0,
        }
    }

    /// The state of `role` after `records`, which are in offset order (records
    /// at or below an offset already applied are ignored).
    ///
    /// Fails with the first [`FormatError`] of a record of this role (see the
    /// module documentation for what counts as malformed).
    pub fn build<'a, I>(role: impl Into<String>, records: I) -> Result<RoleState, FormatError>
    where
        I: IntoIterator<Item = &'a Record>,
    {
        let mut state = RoleState::new(role);
        for r in records {
            state.apply(r)?;
        }
        Ok(state)
    }

    /// Applies one more record.
    ///
    /// A record at or below [`RoleState::last_offset`] is ignored (idempotent
    /// re-delivery). A record of another role, and a record whose key does not
    /// decode (counted in [`RoleState::malformed_keys`]), only advance
    /// `last_offset`. On error the state is unchanged, `last_offset` included.
    pub fn apply(&mut self, record: &Record) -> Result<(), FormatError> {
        self.apply_parts(record.offset, &record.key, record.value.as_deref())
    }

    /// [`RoleState::apply`] on borrowed parts, for readers that do not hold a
    /// [`Record`].
    pub fn apply_parts(
        &mut self,
        offset: i64,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), FormatError> {
        if self.last_offset.is_some_and(|last| offset <= last) {
            return Ok(());
        }
        let k = match decode_key_ref(key) {
            Ok(k) => k,
            Err(e) => {
                self.malformed_keys += 1;
                tracing::warn!(
                    role = %self.role,
                    offset,
                    error = %e,
                    "skipping a record of __coordination_state whose key does not decode"
                );
                self.last_offset = Some(offset);
                return Ok(());
            }
        };
        if k.role != self.role {
            self.last_offset = Some(offset);
            return Ok(());
        }
        // A null and an empty value are both tombstones.
        let value = value.filter(|v| !v.is_empty());
        match (k.kind, value) {
            (KeyKind::Registration, None) => {
                if let Some(old) = self.members.remove(k.member) {
                    self.roster.remove(&old);
                }
            }
            (KeyKind::Registration, Some(v)) => {
                let (member, registered_at) =
                    decode_registration_ref(v).map_err(|e| self.locate(offset, e))?;
                if member != k.member {
                    return Err(self.locate(
                        offset,
                        FormatError::new(
                            Part::RegistrationValue,
                            format!(
                                "member {member:?} differs from the key's member {:?}",
                                k.member
                            ),
                        ),
                    ));
                }
                self.register(member, offset, registered_at);
            }
            (KeyKind::Lease, None) => {
                if let Some(old) = self.lease.take() {
                    self.last_cleared_deadline = Some(old.deadline);
                }
            }
            (KeyKind::Lease, Some(v)) => {
                let (member, token, granted_at, deadline) =
                    decode_lease_ref(v).map_err(|e| self.locate(offset, e))?;
                match &mut self.lease {
                    // A renewal by the same holder: no allocation.
                    Some(l) if l.member == member => {
                        l.token = token;
                        l.granted_at = granted_at;
                        l.deadline = deadline;
                    }
                    _ => {
                        self.lease = Some(Lease {
                            member: member.to_owned(),
                            token,
                            granted_at,
                            deadline,
                        })
                    }
                }
            }
        }
        self.last_offset = Some(offset);
        Ok(())
    }

    /// Puts `member` at the tail of the roster (its registration at `offset`
    /// is the latest record). A known member's entry moves without allocating.
    fn register(&mut self, member: &str, offset: i64, registered_at: i64) {
        match self.members.get_mut(member) {
            Some(latest) => {
                let previous = std::mem::replace(latest, offset);
                let mut entry = self
                    .roster
                    .remove(&previous)
                    .unwrap_or_else(|| RosterEntry {
                        member: member.to_owned(),
                        offset,
                        registered_at,
                    });
                entry.offset = offset;
                entry.registered_at = registered_at;
                self.roster.insert(offset, entry);
            }
            None => {
                self.members.insert(member.to_owned(), offset);
                self.roster.insert(
                    offset,
                    RosterEntry {
                        member: member.to_owned(),
                        offset,
                        registered_at,
                    },
                );
            }
        }
    }

    fn locate(&self, offset: i64, e: FormatError) -> FormatError {
        FormatError::new(
            e.part,
            format!(
                "record at offset {offset} of role {}: {}",
                crate::error::quote(&self.role),
                e.message
            ),
        )
    }

    /// The role.
    pub fn role(&self) -> &str {
        &self.role
    }

    /// The roster in rank order (rank 0 first).
    pub fn roster(
        &self,
    ) -> impl ExactSizeIterator<Item = &RosterEntry> + DoubleEndedIterator + Clone + '_ {
        self.roster.values()
    }

    /// The number of registered members.
    pub fn roster_len(&self) -> usize {
        self.roster.len()
    }

    /// The roster entry of `member`, if it is registered.
    pub fn entry(&self, member: &str) -> Option<&RosterEntry> {
        self.members.get(member).and_then(|o| self.roster.get(o))
    }

    /// True if `member` is in the roster.
    pub fn is_registered(&self, member: &str) -> bool {
        self.members.contains_key(member)
    }

    /// The roster position of `member` (0 is the earliest registration), or
    /// `None` if it is not registered. This is the plain roster rank; the
    /// election ranks challengers without the lease holder
    /// ([`crate::election::challenger_rank`]). O(rank).
    pub fn rank_of(&self, member: &str) -> Option<usize> {
        let offset = *self.members.get(member)?;
        Some(self.roster.range(..offset).count())
    }

    /// The current lease, if any.
    pub fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }

    /// The deadline of the last lease that a lease tombstone cleared.
    pub fn last_cleared_deadline(&self) -> Option<i64> {
        self.last_cleared_deadline
    }

    /// The offset of the last record applied (of any role), or `None` before
    /// the first.
    pub fn last_offset(&self) -> Option<i64> {
        self.last_offset
    }

    /// How many records were skipped because their key did not decode.
    pub fn malformed_keys(&self) -> u64 {
        self.malformed_keys
    }
}
