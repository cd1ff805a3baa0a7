//! The fence's three statements for each store (the protocol's steps in
//! `docs/fenced-stores.md`, also written out in the comments of the
//! migrations), as the helpers of every binding run them. Each takes the
//! role as its first parameter, the producer id as its second and the epoch
//! as its third (only the first for [`postgres::READ`] and [`sqlite::READ`]).
//!
//! 1. `ADVANCE` returns one row (the stored producer id) when the token may
//!    write: no row yet, or the same producer id with an epoch at least the
//!    stored one. It locks the role's row (PostgreSQL; even when it returns
//!    nothing) or takes the database's write lock (SQLite) until the
//!    transaction ends.
//! 2. When it returned nothing, `READ` gives the stored `(producer_id,
//!    epoch)`, and [`crate::verdict`] judges it.
//! 3. A rotation proven current ([`crate::proven`]) is stored by `ROTATE`.

/// PostgreSQL, with `$1`-style parameters.
pub mod postgres {
    /// Step 1: advance the role's row to the offered token, if it may write.
    pub const ADVANCE: &str =
        "INSERT INTO krabka_fence AS f (role, producer_id, epoch) VALUES ($1, $2, $3) \
         ON CONFLICT (role) DO UPDATE SET epoch = EXCLUDED.epoch \
         WHERE f.producer_id = EXCLUDED.producer_id AND f.epoch <= EXCLUDED.epoch \
         RETURNING f.producer_id";
    /// Step 2: the stored token of the (locked) row.
    pub const READ: &str = "SELECT producer_id, epoch FROM krabka_fence WHERE role = $1";
    /// Step 3: store a rotation proven current.
    pub const ROTATE: &str = "UPDATE krabka_fence SET producer_id = $2, epoch = $3 WHERE role = $1";
}

/// SQLite, with `?1`-style parameters.
pub mod sqlite {
    /// Step 1: advance the role's row to the offered token, if it may write.
    pub const ADVANCE: &str = "INSERT INTO krabka_fence (role, producer_id, epoch) VALUES (?1, ?2, ?3) \
         ON CONFLICT (role) DO UPDATE SET epoch = excluded.epoch \
         WHERE krabka_fence.producer_id = excluded.producer_id AND krabka_fence.epoch <= excluded.epoch \
         RETURNING producer_id";
    /// Step 2: the stored token of the role's row.
    pub const READ: &str = "SELECT producer_id, epoch FROM krabka_fence WHERE role = ?1";
    /// Step 3: store a rotation proven current.
    pub const ROTATE: &str = "UPDATE krabka_fence SET producer_id = ?2, epoch = ?3 WHERE role = ?1";
}
