//! Fenced writes to SQL stores: a leader's database transaction commits only
//! if no newer fencing token of its role reached the store first.
//!
//! The protocol is `docs/fenced-stores.md`: one row per role in the table
//! `krabka_fence` holds the newest token a transaction carried through the
//! fence; the helper, called inside the caller's own transaction, checks the
//! offered token against it and advances it, so the check and the caller's
//! writes commit or roll back together.
//!
//! * PostgreSQL (feature `postgres`, tokio-postgres): [`postgres::fence`],
//!   [`postgres::migrate`].
//! * SQLite (feature `sqlite`, rusqlite): [`sqlite::fence`],
//!   [`sqlite::migrate`].
//! * Any other language or driver: the SQL itself, [`POSTGRES_SQL`] and
//!   [`SQLITE_SQL`] (the files under `stores/sql/`).
//! * A binding running the statements through its own driver (Python's,
//!   Node's and the JVM's helpers): the statements the helpers run
//!   ([`statements`]) and the rule on a refused token ([`check_offer`],
//!   [`verdict`], [`fenced`], [`proven`]), asked for every decision, so no
//!   binding restates it.
//!
//! Every refusal is the core's [`Error::Fenced`], naming the role, the
//! stored token and the offered one. A producer id rotation (the stored
//! token's producer id differs from the offered one's) is accepted only
//! when the role's transaction coordinator answers, while the fence row is
//! locked, that the offered token is the current one: the `describe`
//! argument of each helper asks it (`Client::describe_leadership`).

use krabka_coordination::leadership::LeadershipStatus;
use krabka_coordination::{Error, FencingToken, Result};

#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod statements;

/// The PostgreSQL migration (`stores/sql/postgres.sql`): the `krabka_fence`
/// table and the function `krabka_fence(role text, producer_id bigint,
/// epoch smallint)` for callers without a helper. Idempotent.
pub const POSTGRES_SQL: &str = include_str!("../sql/postgres.sql");

/// The SQLite migration (`stores/sql/sqlite.sql`): the `krabka_fence`
/// table, with the fence's statements in comments. Idempotent.
pub const SQLITE_SQL: &str = include_str!("../sql/sqlite.sql");

/// What the stored row says about an offered token that the advancing
/// statement did not accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Same producer id, older epoch: refused.
    Older,
    /// Another producer id: accepted only if proven current now.
    NeedsProof,
}

/// Refuses a role or token that no fence can hold: an invalid role name
/// ([`krabka_coordination::codec::check_role`]) or a token with a negative
/// producer id or epoch ([`krabka_coordination::NO_EPOCH`] included).
/// [`Error::InvalidArgument`] naming the value.
pub fn check_offer(role: &str, token: FencingToken) -> Result<()> {
    krabka_coordination::codec::check_role(role)?;
    if token.producer_id < 0 || token.producer_epoch < 0 {
        return Err(Error::InvalidArgument(format!(
            "the fence of role {} needs a minted token, got {token}",
            krabka_coordination::error::quote(role)
        )));
    }
    Ok(())
}

/// The verdict on `offered` given the `stored` token, once the advancing
/// statement refused it (so the stored token is not of the same producer id
/// with an epoch at most the offered one's). [`Verdict::Older`] is a
/// refusal ([`fenced`]); [`Verdict::NeedsProof`] asks the coordinator,
/// with the row still locked, and decides with [`proven`].
pub fn verdict(stored: FencingToken, offered: FencingToken) -> Verdict {
    if stored.producer_id == offered.producer_id {
        Verdict::Older
    } else {
        Verdict::NeedsProof
    }
}

/// The refusal of `offered` against `stored`, as [`Error::Fenced`].
pub fn fenced(role: &str, stored: FencingToken, offered: FencingToken) -> Error {
    Error::Fenced(format!(
        "role {}: the store accepted token {stored}, this transaction offers {offered}",
        krabka_coordination::error::quote(role)
    ))
}

/// Accepts a rotation to `offered` only when `status` (asked while the
/// fence row was locked) says it is the role's current token; otherwise
/// [`Error::Fenced`] naming the stored, offered and current tokens.
pub fn proven(
    role: &str,
    stored: FencingToken,
    offered: FencingToken,
    status: &LeadershipStatus,
) -> Result<()> {
    if status.authoritative(&offered) {
        return Ok(());
    }
    Err(Error::Fenced(format!(
        "role {}: the store accepted token {stored} of another producer id, and this \
         transaction's token {offered} is not the current one ({} is)",
        krabka_coordination::error::quote(role),
        status.token
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_coordination::NO_EPOCH;

    #[test]
    fn unminted_tokens_and_bad_roles_are_refused_by_name() {
        let t = FencingToken::new;
        for bad in [NO_EPOCH, t(-5, 0), t(5, -1)] {
            let e = check_offer("billing", bad).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
            assert!(e.to_string().contains(&bad.to_string()), "{e}");
        }
        assert!(matches!(
            check_offer("", t(1, 0)),
            Err(Error::InvalidArgument(_))
        ));
        check_offer("billing", t(0, 0)).unwrap();
    }

    #[test]
    fn another_producer_id_needs_proof_in_both_directions() {
        let t = FencingToken::new;
        assert_eq!(verdict(t(9, 4), t(9, 3)), Verdict::Older);
        assert_eq!(verdict(t(9, 4), t(3, 0)), Verdict::NeedsProof);
        assert_eq!(verdict(t(3, 4), t(9, 0)), Verdict::NeedsProof);
    }

    #[test]
    fn a_rotation_passes_only_as_the_current_token() {
        let t = FencingToken::new;
        let now = |token| LeadershipStatus { token };
        proven("billing", t(9, 4), t(3, 0), &now(t(3, 0))).unwrap();
        let e = proven("billing", t(9, 4), t(3, 0), &now(t(3, 1))).unwrap_err();
        assert!(matches!(e, Error::Fenced(_)), "{e}");
        let m = e.to_string();
        for part in ["\"billing\"", "9/4", "3/0", "3/1"] {
            assert!(m.contains(part), "{m}");
        }
    }
}
