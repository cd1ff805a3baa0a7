//! The fence of SQL stores (`docs/fenced-stores.md`) for the Python helpers
//! of `krabka_coordination.stores`: the migrations and statements of the
//! crate `krabka-coordination-stores`, its rule, and its errors.
//!
//! The helpers run the statements through the user's driver (psycopg,
//! `sqlite3`) and ask these functions for every decision; nothing of the
//! rule is written again in Python.

use krabka_coordination::leadership::LeadershipStatus;
use krabka_coordination::Error;
use krabka_coordination_stores as stores;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::error::{to_py_err, IntoPyResult};
use crate::values::PyFencingToken;

/// The migration and the three statements of `store` (`"postgres"` or
/// `"sqlite"`): `(migration, advance, read, rotate)`, each as the Rust
/// crate runs it (`$1`-style parameters for PostgreSQL, `?1`-style for
/// SQLite: role, producer id, epoch). Raises `ValueError` for another store.
#[pyfunction]
pub fn _fence_sql(
    store: &str,
) -> PyResult<(&'static str, &'static str, &'static str, &'static str)> {
    use stores::statements::{postgres as pg, sqlite as lite};
    match store {
        "postgres" => Ok((stores::POSTGRES_SQL, pg::ADVANCE, pg::READ, pg::ROTATE)),
        "sqlite" => Ok((stores::SQLITE_SQL, lite::ADVANCE, lite::READ, lite::ROTATE)),
        other => Err(PyValueError::new_err(format!(
            "no fence for store {other:?}: \"postgres\" or \"sqlite\""
        ))),
    }
}

/// Refuses, before any statement, a role or token no fence can hold:
/// `InvalidArgumentError` naming the value.
#[pyfunction]
pub fn _fence_check(py: Python<'_>, role: &str, token: PyRef<'_, PyFencingToken>) -> PyResult<()> {
    stores::check_offer(role, token.0).into_py_result(py)
}

/// The verdict on `offered` once the advancing statement returned no row
/// and the stored token is `stored`: returns when the offered token needs
/// the proof of a rotation (another producer id); raises `Fenced` naming
/// the role and both tokens when it is older (the same producer id).
#[pyfunction]
pub fn _fence_verdict(
    py: Python<'_>,
    role: &str,
    stored: PyRef<'_, PyFencingToken>,
    offered: PyRef<'_, PyFencingToken>,
) -> PyResult<()> {
    match stores::verdict(stored.0, offered.0) {
        stores::Verdict::NeedsProof => Ok(()),
        stores::Verdict::Older => Err(to_py_err(py, stores::fenced(role, stored.0, offered.0))),
    }
}

/// Accepts the rotation to `offered` only when `current` (the role's token
/// from `describe_leadership`, asked while the fence row was locked) says it
/// is the current one; otherwise raises `Fenced` naming the stored, offered
/// and current tokens.
#[pyfunction]
pub fn _fence_proven(
    py: Python<'_>,
    role: &str,
    stored: PyRef<'_, PyFencingToken>,
    offered: PyRef<'_, PyFencingToken>,
    current: PyRef<'_, PyFencingToken>,
) -> PyResult<()> {
    let status = LeadershipStatus { token: current.0 };
    stores::proven(role, stored.0, offered.0, &status).into_py_result(py)
}

/// The error of a database call `what` for `role` on `store` (a name for
/// the message, e.g. `"PostgreSQL"`), `cause` being the driver's exception:
/// `TransientError` when `transient` (a serialization failure, a deadlock,
/// a busy database, a lost connection: a new transaction may pass),
/// `FatalError` otherwise; returned, for the caller to raise.
#[pyfunction]
pub fn _fence_error(
    py: Python<'_>,
    what: &str,
    role: &str,
    store: &str,
    transient: bool,
    cause: Bound<'_, PyAny>,
) -> Py<PyAny> {
    let context = format!(
        "{what} of role {} on {store}",
        krabka_coordination::error::quote(role)
    );
    let cause = PyErr::from_value(cause);
    let e = if transient {
        Error::transient(context, cause)
    } else {
        Error::fatal(context, cause)
    };
    to_py_err(py, e).into_value(py).into_any()
}
