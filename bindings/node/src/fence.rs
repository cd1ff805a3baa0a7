//! The fence of SQL stores (`docs/fenced-stores.md`) for the helpers of
//! `krabka-coordination/stores` (`lib/stores.js`): the migrations and
//! statements of the crate `krabka-coordination-stores`, its rule, and its
//! errors. All internal.
//!
//! The helpers run the statements through the user's driver (`pg`,
//! `better-sqlite3`) and ask these functions for every decision; nothing of
//! the rule is written again in JavaScript.

use krabka_coordination::leadership::LeadershipStatus;
use krabka_coordination::Error;
use krabka_coordination_stores as stores;
use napi::bindgen_prelude::Unknown;
use napi::Env;
use napi_derive::napi;

use crate::convert::str_arg;
use crate::error::{invalid_napi, to_napi, OrThrow};
use crate::values::{token_arg, Made};

/// `[migration, advance, read, rotate]` of `store` (`'postgres'` or
/// `'sqlite'`), each as the Rust crate runs it (`$1`-style parameters for
/// PostgreSQL, `?1`-style for SQLite: role, producer id, epoch). Another
/// store is an `InvalidArgumentError`.
#[napi(js_name = "_fenceSql", skip_typescript)]
pub fn fence_sql(env: Env, store: Unknown<'_>) -> napi::Result<Vec<&'static str>> {
    use stores::statements::{postgres as pg, sqlite as lite};
    match str_arg(&env, &store, "store")?.as_str() {
        "postgres" => Ok(vec![
            stores::POSTGRES_SQL,
            pg::ADVANCE,
            pg::READ,
            pg::ROTATE,
        ]),
        "sqlite" => Ok(vec![
            stores::SQLITE_SQL,
            lite::ADVANCE,
            lite::READ,
            lite::ROTATE,
        ]),
        other => Err(invalid_napi(
            &env,
            "store",
            format!("no fence for store {other:?}: 'postgres' or 'sqlite'"),
        )),
    }
}

/// Throws `InvalidArgumentError` for a role or token no fence can hold.
#[napi(js_name = "_fenceCheck", skip_typescript)]
pub fn fence_check(env: Env, role: Unknown<'_>, token: Unknown<'_>) -> napi::Result<()> {
    let role = str_arg(&env, &role, "role")?;
    let token = token_arg(&env, &token, "token")?;
    stores::check_offer(&role, token).or_throw(&env)
}

/// The verdict on `offered` once the advancing statement returned no row
/// and the stored token is `stored`: returns when the offered token needs
/// the proof of a rotation (another producer id); throws `FencedError`
/// naming the role and both tokens when it is older (the same producer id).
#[napi(js_name = "_fenceVerdict", skip_typescript)]
pub fn fence_verdict(
    env: Env,
    role: Unknown<'_>,
    stored: Unknown<'_>,
    offered: Unknown<'_>,
) -> napi::Result<()> {
    let role = str_arg(&env, &role, "role")?;
    let stored = token_arg(&env, &stored, "stored")?;
    let offered = token_arg(&env, &offered, "offered")?;
    match stores::verdict(stored, offered) {
        stores::Verdict::NeedsProof => Ok(()),
        stores::Verdict::Older => Err(to_napi(&env, &stores::fenced(&role, stored, offered))),
    }
}

/// Accepts the rotation to `offered` only when `current` (the role's token
/// from `describeLeadership`, asked while the fence row was locked) is it;
/// otherwise throws `FencedError` naming the stored, offered and current
/// tokens.
#[napi(js_name = "_fenceProven", skip_typescript)]
pub fn fence_proven(
    env: Env,
    role: Unknown<'_>,
    stored: Unknown<'_>,
    offered: Unknown<'_>,
    current: Unknown<'_>,
) -> napi::Result<()> {
    let role = str_arg(&env, &role, "role")?;
    let stored = token_arg(&env, &stored, "stored")?;
    let offered = token_arg(&env, &offered, "offered")?;
    let status = LeadershipStatus {
        token: token_arg(&env, &current, "current")?,
    };
    stores::proven(&role, stored, offered, &status).or_throw(&env)
}

/// The error (returned, not thrown) of a database call `what` for `role`
/// on `store` (`'PostgreSQL'`, `'SQLite'`) that failed with `cause` (the
/// driver's message; the package sets the driver's error as `cause`):
/// `TransientError` when `transient`, `FatalError` otherwise.
#[napi(js_name = "_fenceError", skip_typescript)]
pub fn fence_error(
    env: Env,
    what: String,
    role: String,
    store: String,
    transient: bool,
    cause: String,
) -> napi::Result<Made> {
    let context = format!(
        "{what} of role {} on {store}",
        krabka_coordination::error::quote(&role)
    );
    let e = if transient {
        Error::transient(context, cause)
    } else {
        Error::fatal(context, cause)
    };
    crate::error::error_value(&env, &e).map(Made)
}
