//! The fence on SQLite through rusqlite (feature `sqlite`).
//!
//! ```
//! # fn main() -> krabka_coordination::Result<()> {
//! use krabka_coordination::leadership::LeadershipStatus;
//! use krabka_coordination::FencingToken;
//! use krabka_coordination_stores::sqlite;
//! use rusqlite::{Connection, TransactionBehavior};
//!
//! let mut db = Connection::open_in_memory().unwrap();
//! sqlite::migrate(&db)?;
//! let token = FencingToken::new(1000, 3); // the leadership's token
//! let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
//! // `describe` asks Kafka, e.g. a blocking call of client.describe_leadership("billing").
//! sqlite::fence(&tx, "billing", token, || Ok(LeadershipStatus { token }))?;
//! tx.execute("CREATE TABLE invoices (id INTEGER)", []).unwrap();
//! tx.commit().unwrap();
//! # Ok(()) }
//! ```

use krabka_coordination::leadership::LeadershipStatus;
use krabka_coordination::{Error, FencingToken, Result};
use rusqlite::{params, ErrorCode, OptionalExtension, Transaction};

use crate::Verdict;

use crate::statements::sqlite::{ADVANCE, READ, ROTATE};

/// Creates the fence table ([`crate::SQLITE_SQL`]) if it is missing; run it
/// once per database before the first fenced write. A database error is
/// [`Error::Fatal`] (or [`Error::Transient`], see [`error`]).
pub fn migrate(db: &rusqlite::Connection) -> Result<()> {
    db.execute_batch(crate::SQLITE_SQL)
        .map_err(|e| error("migrate", "(all roles)", e))
}

/// Checks `token` against the newest token of `role` that the store
/// accepted, and advances it, inside the caller's transaction `tx`.
///
/// On `Ok(())` the token may write: the fence row holds it, and the
/// statement took the database's write lock, which SQLite keeps until `tx`
/// ends, so no other writer passes the fence in between, and `tx` commits
/// its writes with the advance or rolls both back. Begin `tx` IMMEDIATE
/// (or call this first in it): a deferred transaction that read before it
/// may be refused the write lock with SQLITE_BUSY (a transient error here).
///
/// `describe` is asked for the role's current token only when the stored
/// token has another producer id than `token` (a producer id rotation), and
/// then while the lock is held; it blocks, e.g. by running
/// `client.describe_leadership(role)` on a tokio runtime handle.
///
/// Errors: [`Error::Fenced`] when the store accepted a newer token (or the
/// rotation is not proven current), naming the role and both tokens;
/// [`Error::InvalidArgument`] for an invalid role or an unminted token;
/// [`Error::Transient`] when the database is busy or locked, and whatever
/// `describe` returns; [`Error::Fatal`] for any other database error (a
/// missing table: run [`migrate`]). After any error, roll `tx` back.
pub fn fence<F>(tx: &Transaction<'_>, role: &str, token: FencingToken, describe: F) -> Result<()>
where
    F: FnOnce() -> Result<LeadershipStatus>,
{
    crate::check_offer(role, token)?;
    let id = token.producer_id;
    let epoch = token.producer_epoch;
    let advanced: Option<i64> = tx
        .query_row(ADVANCE, params![role, id, epoch], |r| r.get(0))
        .optional()
        .map_err(|e| error("fence", role, e))?;
    if advanced.is_some() {
        return Ok(());
    }
    let stored = tx
        .query_row(READ, params![role], |r| {
            Ok(FencingToken::new(r.get(0)?, r.get(1)?))
        })
        .map_err(|e| error("fence (read)", role, e))?;
    match crate::verdict(stored, token) {
        Verdict::Older => Err(crate::fenced(role, stored, token)),
        Verdict::NeedsProof => {
            crate::proven(role, stored, token, &describe()?)?;
            tx.execute(ROTATE, params![role, id, epoch])
                .map_err(|e| error("fence (rotate)", role, e))?;
            Ok(())
        }
    }
}

/// A rusqlite error of `what` for `role` as the core's error:
/// [`Error::Transient`] when the database is busy or locked (another
/// writer holds it; a new transaction may pass), [`Error::Fatal`] for every
/// other one. The database's message is kept as the cause.
pub fn error(what: &str, role: &str, e: rusqlite::Error) -> Error {
    let context = format!(
        "{what} of role {} on SQLite",
        krabka_coordination::error::quote(role)
    );
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Error::transient(context, e),
        _ => Error::fatal(context, e),
    }
}
