//! The fence of SQL stores (`docs/fenced-stores.md`) for a host that runs
//! its statements through its own database driver: the hand-written
//! Kotlin `KrabkaFence` runs them through JDBC. The statements and the rule
//! on a refused token are the stores crate's
//! ([`krabka_coordination_stores`]); this module only hands them over.

use std::sync::Arc;

use krabka_coordination_stores as stores;

use crate::{FencingToken, KrabkaError, LeadershipStatus};

/// The SQL store a fence runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum FenceStore {
    /// PostgreSQL (`stores/sql/postgres.sql`).
    Postgres,
    /// SQLite, 3.35 or newer (`stores/sql/sqlite.sql`).
    Sqlite,
}

/// One statement of the fence with plain `?` placeholders (JDBC's), and
/// the argument each binds.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct FenceStatement {
    /// The statement, its numbered placeholders replaced by `?`.
    pub sql: String,
    /// For each `?` in order, the argument it binds: 1 the role, 2 the
    /// producer id, 3 the epoch.
    pub params: Vec<u8>,
}

/// The migration and the three statements of the fence for one store.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct FenceStatements {
    /// The migration (the files under `stores/sql/`): idempotent; several
    /// statements on PostgreSQL (the table and the `krabka_fence` function).
    pub migration: String,
    /// Step 1: advances the row; returns a row when the token may write.
    pub advance: FenceStatement,
    /// Step 2: the stored `producer_id, epoch`, once step 1 returned none.
    pub read: FenceStatement,
    /// Step 3: replaces the stored token by a proven rotation.
    pub rotate: FenceStatement,
}

/// The statements of the fence on `store`, as the Rust helpers run them.
#[uniffi::export]
pub fn fence_statements(store: FenceStore) -> FenceStatements {
    let (migration, advance, read, rotate) = match store {
        FenceStore::Postgres => (
            stores::POSTGRES_SQL,
            stores::statements::postgres::ADVANCE,
            stores::statements::postgres::READ,
            stores::statements::postgres::ROTATE,
        ),
        FenceStore::Sqlite => (
            stores::SQLITE_SQL,
            stores::statements::sqlite::ADVANCE,
            stores::statements::sqlite::READ,
            stores::statements::sqlite::ROTATE,
        ),
    };
    FenceStatements {
        migration: migration.to_owned(),
        advance: positional(advance),
        read: positional(read),
        rotate: positional(rotate),
    }
}

/// `sql` with each numbered placeholder (`$2`, `?2`) replaced by `?`, and
/// the numbers in order. The statements hold no string literal a `$` or
/// `?` could be part of.
fn positional(sql: &str) -> FenceStatement {
    let mut out = String::with_capacity(sql.len());
    let mut params = Vec::new();
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('$' | '?', Some(d)) if d.is_ascii_digit() => {
                let mut n = 0u8;
                while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                    n = n
                        .saturating_mul(10)
                        .saturating_add(u8::try_from(d).unwrap_or(9));
                    chars.next();
                }
                params.push(n);
                out.push('?');
            }
            _ => out.push(c),
        }
    }
    FenceStatement { sql: out, params }
}

/// Refuses what no fence can hold, before any statement runs: an invalid
/// role or an unminted token (`KrabkaException.InvalidArgument` naming it).
#[uniffi::export]
pub fn fence_check_offer(role: String, token: FencingToken) -> Result<(), KrabkaError> {
    Ok(stores::check_offer(&role, token.into())?)
}

/// The verdict on `offered` once step 1 returned no row and step 2 read
/// `stored`: `KrabkaException.Fenced` (naming the role and both tokens) when
/// `stored` has the same producer id, so a newer epoch was accepted;
/// returns when `stored` has another producer id: a rotation, which only
/// `fenceProven` on a status asked now, with the row locked, accepts.
#[uniffi::export]
pub fn fence_verdict(
    role: String,
    stored: FencingToken,
    offered: FencingToken,
) -> Result<(), KrabkaError> {
    let (stored, offered) = (stored.into(), offered.into());
    match stores::verdict(stored, offered) {
        stores::Verdict::Older => Err(stores::fenced(&role, stored, offered).into()),
        stores::Verdict::NeedsProof => Ok(()),
    }
}

/// Accepts the rotation from `stored` to `offered` only when `current`
/// (the role's describe, asked while the fence row is locked) says
/// `offered` is the current token; otherwise `KrabkaException.Fenced`
/// naming the stored, offered and current tokens. On success the caller
/// runs step 3.
#[uniffi::export]
pub fn fence_proven(
    role: String,
    stored: FencingToken,
    offered: FencingToken,
    current: Arc<LeadershipStatus>,
) -> Result<(), KrabkaError> {
    Ok(stores::proven(
        &role,
        stored.into(),
        offered.into(),
        &current.inner,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_placeholders_become_positional_in_order() {
        let p = positional("UPDATE t SET a = $2, b = $3 WHERE r = $1 AND x = ?12");
        assert_eq!(p.sql, "UPDATE t SET a = ?, b = ? WHERE r = ? AND x = ?");
        assert_eq!(p.params, vec![2, 3, 1, 12]);
    }

    #[test]
    fn every_statement_binds_only_role_id_and_epoch() {
        for store in [FenceStore::Postgres, FenceStore::Sqlite] {
            let s = fence_statements(store);
            assert!(s
                .migration
                .contains("CREATE TABLE IF NOT EXISTS krabka_fence"));
            for (st, want) in [
                (&s.advance, vec![1, 2, 3]),
                (&s.read, vec![1]),
                (&s.rotate, vec![2, 3, 1]),
            ] {
                assert_eq!(st.params, want, "{store:?}: {}", st.sql);
                assert_eq!(st.sql.matches('?').count(), want.len(), "{}", st.sql);
            }
        }
    }

    #[test]
    fn a_stored_token_of_the_same_producer_id_is_fenced_another_needs_proof() {
        let t = |p, e| FencingToken {
            producer_id: p,
            producer_epoch: e,
        };
        let e = fence_verdict("billing".into(), t(9, 4), t(9, 3)).unwrap_err();
        assert!(matches!(e, KrabkaError::Fenced { .. }), "{e}");
        fence_verdict("billing".into(), t(9, 4), t(3, 0)).unwrap();
        assert!(matches!(
            fence_check_offer("billing".into(), t(-1, -1)),
            Err(KrabkaError::InvalidArgument { .. })
        ));
    }
}
