//! The roster and lease of a role, built from the log.

use crate::codec::Lease;

/// One record of `__coordination_state` as the state code sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The record's offset in its partition.
    pub offset: i64,
    /// The key bytes.
    pub key: Vec<u8>,
    /// The value bytes; `None` (and an empty value) is a tombstone.
    pub value: Option<Vec<u8>>,
}

/// The roster and lease of one role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleState {
    role: String,
    lease: Option<Lease>,
}
