//! The fence on PostgreSQL through tokio-postgres (feature `postgres`).
//!
//! ```no_run
//! # async fn example(db: &mut tokio_postgres::Client, client: &krabka_coordination::client::Client,
//! #     lead: &krabka_coordination::leadership::Leadership) -> krabka_coordination::Result<()> {
//! use krabka_coordination_stores::postgres;
//!
//! let tx = db.transaction().await.map_err(|e| postgres::error("begin", "billing", e))?;
//! postgres::fence(&tx, "billing", lead.token(), || client.describe_leadership("billing")).await?;
//! tx.execute("INSERT INTO invoices (id) VALUES (42)", &[]).await
//!     .map_err(|e| postgres::error("write", "billing", e))?;
//! tx.commit().await.map_err(|e| postgres::error("commit", "billing", e))?;
//! # Ok(()) }
//! ```

use std::future::Future;

use krabka_coordination::leadership::LeadershipStatus;
use krabka_coordination::{Error, FencingToken, Result};
use tokio_postgres::error::SqlState;
use tokio_postgres::Transaction;

use crate::Verdict;

use crate::statements::postgres::{ADVANCE, READ, ROTATE};

/// Creates the fence table and the `krabka_fence` SQL function
/// ([`crate::POSTGRES_SQL`]) if they are missing; run it once per database
/// before the first fenced write (running it again changes nothing).
/// A database error is [`Error::Fatal`] (or [`Error::Transient`], see
/// [`error`]).
pub async fn migrate(db: &tokio_postgres::Client) -> Result<()> {
    db.batch_execute(crate::POSTGRES_SQL)
        .await
        .map_err(|e| error("migrate", "(all roles)", e))
}

/// Checks `token` against the newest token of `role` that the store
/// accepted, and advances it, inside the caller's transaction `tx`.
///
/// On `Ok(())` the token may write: the role's fence row holds it and stays
/// locked until `tx` ends, so no transaction with another token of the role
/// commits in between, and `tx` commits its writes with the advance or
/// rolls both back. Call it before the transaction's guarded writes (at
/// least before its commit) and commit `tx` yourself.
///
/// `describe` is asked for the role's current token only when the stored
/// token has another producer id than `token` (a producer id rotation), and
/// then while the row is locked; pass
/// `|| client.describe_leadership(role)`.
///
/// Errors: [`Error::Fenced`] when the store accepted a newer token (or the
/// rotation is not proven current), naming the role and both tokens;
/// [`Error::InvalidArgument`] for an invalid role or an unminted token;
/// [`Error::Transient`] for a serialization failure or deadlock (under
/// REPEATABLE READ or SERIALIZABLE another transaction advanced the row
/// after this one's snapshot: roll back and retry the whole transaction)
/// or a lost connection, and whatever `describe` returns; [`Error::Fatal`]
/// for any other database error (a missing table: run [`migrate`]). After
/// any error, roll `tx` back.
pub async fn fence<F, Fut>(
    tx: &Transaction<'_>,
    role: &str,
    token: FencingToken,
    describe: F,
) -> Result<()>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<LeadershipStatus>>,
{
    crate::check_offer(role, token)?;
    let advanced = tx
        .query_opt(ADVANCE, &[&role, &token.producer_id, &token.producer_epoch])
        .await
        .map_err(|e| error("fence", role, e))?;
    if advanced.is_some() {
        return Ok(());
    }
    let row = tx
        .query_one(READ, &[&role])
        .await
        .map_err(|e| error("fence (read)", role, e))?;
    let stored = FencingToken::new(row.get(0), row.get(1));
    match crate::verdict(stored, token) {
        Verdict::Older => Err(crate::fenced(role, stored, token)),
        Verdict::NeedsProof => {
            crate::proven(role, stored, token, &describe().await?)?;
            tx.execute(ROTATE, &[&role, &token.producer_id, &token.producer_epoch])
                .await
                .map_err(|e| error("fence (rotate)", role, e))?;
            Ok(())
        }
    }
}

/// A tokio-postgres error of `what` for `role` as the core's error:
/// [`Error::Transient`] for a serialization failure (40001), a deadlock
/// (40P01) or a closed connection, which a new transaction may mend;
/// [`Error::Fatal`] for every other one. The database's message is kept as
/// the cause.
pub fn error(what: &str, role: &str, e: tokio_postgres::Error) -> Error {
    let context = format!(
        "{what} of role {} on PostgreSQL",
        krabka_coordination::error::quote(role)
    );
    let retry = e.is_closed()
        || matches!(
            e.code(),
            Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
        );
    if retry {
        Error::transient(context, e)
    } else {
        Error::fatal(context, e)
    }
}
