//! The value classes: `Key`, `Registration`, `Lease`, `FencingToken`.
//!
//! Each wraps the core's own type and nothing else, so equality, hashing and
//! (for `FencingToken`) ordering are the core's trait implementations, and
//! encoding hands the wrapped value to the core as it is. The classes are
//! `frozen`: immutable, and readable without a borrow check.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use krabka_coordination as core;
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use pyo3::types::{PyBool, PyString, PyTuple};

use krabka_coordination_bindings::args::{self, ArgError};

use crate::convert::{int_field, str_field, type_name};
use crate::error::arg_error;

/// What `__reduce__` returns: the callable that rebuilds the value and its arguments.
type Reduced<'py, A> = (Bound<'py, PyAny>, A);

/// The constructor arguments of a `Lease`.
type LeaseArgs = (String, PyFencingToken, i64, i64);

/// Python's `repr()` of a string: quotes and escapes as Python writes them.
fn py_repr(py: Python<'_>, s: &str) -> PyResult<String> {
    Ok(PyString::new(py, s).repr()?.to_string())
}

/// The key of a state record: a registration key (role and member) or a lease
/// key (role only).
#[pyclass(module = "krabka_coordination", name = "Key", frozen, eq, hash)]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PyKey(pub core::Key);

#[pymethods]
impl PyKey {
    /// The registration key of `member` in `role`.
    #[staticmethod]
    fn registration(role: &Bound<'_, PyAny>, member: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyKey(core::Key::registration(
            str_field(role, "role")?,
            str_field(member, "member")?,
        )))
    }

    /// The lease key of `role`.
    #[staticmethod]
    fn lease(role: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyKey(core::Key::lease(str_field(role, "role")?)))
    }

    /// `"registration"` or `"lease"`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.0.kind.as_str()
    }

    /// The role name.
    #[getter]
    fn role(&self) -> &str {
        &self.0.role
    }

    /// The member id of a registration key; `""` for a lease key.
    #[getter]
    fn member(&self) -> &str {
        &self.0.member
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(match self.0.kind {
            core::KeyKind::Registration => format!(
                "Key.registration(role={}, member={})",
                py_repr(py, &self.0.role)?,
                py_repr(py, &self.0.member)?
            ),
            core::KeyKind::Lease => format!("Key.lease(role={})", py_repr(py, &self.0.role)?),
        })
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let key = &slf.get().0;
        let ty = slf.get_type();
        let py = slf.py();
        Ok(match key.kind {
            core::KeyKind::Registration => (
                ty.getattr("registration")?,
                PyTuple::new(py, [&key.role, &key.member])?,
            ),
            core::KeyKind::Lease => (ty.getattr("lease")?, PyTuple::new(py, [&key.role])?),
        })
    }
}

/// The value of a registration record.
#[pyclass(
    module = "krabka_coordination",
    name = "Registration",
    frozen,
    eq,
    hash
)]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PyRegistration(pub core::Registration);

#[pymethods]
impl PyRegistration {
    /// A registration of `member` at `registered_at` (epoch milliseconds, i64).
    #[new]
    fn new(member: &Bound<'_, PyAny>, registered_at: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyRegistration(core::Registration {
            member: str_field(member, "member")?,
            registered_at: int_field(registered_at, "registered_at")?,
        }))
    }

    /// The registering member.
    #[getter]
    fn member(&self) -> &str {
        &self.0.member
    }

    /// When the member registered, in epoch milliseconds.
    #[getter]
    fn registered_at(&self) -> i64 {
        self.0.registered_at
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Registration(member={}, registered_at={})",
            py_repr(py, &self.0.member)?,
            self.0.registered_at
        ))
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (String, i64))> {
        let reg = &slf.get().0;
        Ok((
            slf.get_type().into_any(),
            (reg.member.clone(), reg.registered_at),
        ))
    }
}

/// The value of a lease record.
#[pyclass(module = "krabka_coordination", name = "Lease", frozen, eq, hash)]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PyLease(pub core::Lease);

#[pymethods]
impl PyLease {
    /// A lease of `member` under `token`, written at `granted_at` and running
    /// to `deadline` (epoch milliseconds, i64, of the holder's clock).
    #[new]
    fn new(
        member: &Bound<'_, PyAny>,
        token: PyRef<'_, PyFencingToken>,
        granted_at: &Bound<'_, PyAny>,
        deadline: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        Ok(PyLease(core::Lease {
            member: str_field(member, "member")?,
            token: token.0,
            granted_at: int_field(granted_at, "granted_at")?,
            deadline: int_field(deadline, "deadline")?,
        }))
    }

    /// The member that holds the lease.
    #[getter]
    fn member(&self) -> &str {
        &self.0.member
    }

    /// The holder's fencing token.
    #[getter]
    fn token(&self) -> PyFencingToken {
        PyFencingToken(self.0.token)
    }

    /// When the lease was written, in epoch milliseconds of the holder's clock.
    #[getter]
    fn granted_at(&self) -> i64 {
        self.0.granted_at
    }

    /// When a standby may stop waiting, in epoch milliseconds of the holder's clock.
    #[getter]
    fn deadline(&self) -> i64 {
        self.0.deadline
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Lease(member={}, token={}, granted_at={}, deadline={})",
            py_repr(py, &self.0.member)?,
            PyFencingToken(self.0.token).__repr__(),
            self.0.granted_at,
            self.0.deadline
        ))
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Reduced<'py, LeaseArgs>> {
        let l = &slf.get().0;
        Ok((
            slf.get_type().into_any(),
            (
                l.member.clone(),
                PyFencingToken(l.token),
                l.granted_at,
                l.deadline,
            ),
        ))
    }
}

/// A token given as a `FencingToken` or as its wire form (a `str`, read by
/// the core's parser): what `FencingToken.parse` and `authoritative` take.
pub fn token_of(value: &Bound<'_, PyAny>) -> PyResult<PyFencingToken> {
    if let Ok(t) = value.cast::<PyFencingToken>() {
        return Ok(*t.get());
    }
    if !value.is_instance_of::<PyString>() {
        return Err(arg_error(
            value.py(),
            ArgError::wrong_type("token", "a FencingToken or its text", &type_name(value)),
        ));
    }
    let text = str_field(value, "token")?;
    args::token(&text)
        .map(PyFencingToken)
        .map_err(|e| arg_error(value.py(), e))
}

/// The leadership token of a role: the producer id and producer epoch Kafka's
/// transaction coordinator minted for `transactional.id = <role>`.
///
/// Ordered by `producer_id` first, then `producer_epoch` (the core's `Ord`);
/// `NO_EPOCH` ranks below every minted token.
#[pyclass(module = "krabka_coordination", name = "FencingToken", frozen)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PyFencingToken(pub core::FencingToken);

#[pymethods]
impl PyFencingToken {
    /// A token of `producer_id` (i64) and `producer_epoch` (i16).
    #[new]
    fn new(producer_id: &Bound<'_, PyAny>, producer_epoch: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyFencingToken(core::FencingToken::new(
            int_field(producer_id, "producer_id")?,
            int_field(producer_epoch, "producer_epoch")?,
        )))
    }

    /// The producer id the coordinator assigned to the transactional id.
    #[getter]
    fn producer_id(&self) -> i64 {
        self.0.producer_id
    }

    /// The producer epoch within that producer id.
    #[getter]
    fn producer_epoch(&self) -> i16 {
        self.0.producer_epoch
    }

    fn __repr__(&self) -> String {
        format!(
            "FencingToken(producer_id={}, producer_epoch={})",
            self.0.producer_id, self.0.producer_epoch
        )
    }

    /// The wire form, `PRODUCER_ID/EPOCH` (`"4001/7"`), or `"NoEpoch"`:
    /// what the CLI prints, `KRABKA_TOKEN` holds and [`Self::parse`] reads.
    fn __str__(&self) -> String {
        self.0.to_string()
    }

    /// The token of its wire form `text` (`"4001/7"`, `"NoEpoch"`), read by
    /// the core's parser as in every binding. Malformed text is an
    /// `InvalidArgumentError` quoting it; a non-`str` a `TypeError`.
    #[staticmethod]
    fn parse(text: &Bound<'_, PyAny>) -> PyResult<Self> {
        token_of(text)
    }

    fn __richcmp__(&self, other: &Bound<'_, PyAny>, op: CompareOp) -> Py<PyAny> {
        let py = other.py();
        match other.cast::<PyFencingToken>() {
            Ok(other) => PyBool::new(py, op.matches(self.0.cmp(&other.get().0)))
                .to_owned()
                .into_any()
                .unbind(),
            Err(_) => py.NotImplemented(),
        }
    }

    fn __hash__(&self) -> u64 {
        let mut h = DefaultHasher::new();
        self.0.hash(&mut h);
        h.finish()
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> (Bound<'py, PyAny>, (i64, i16)) {
        let t = slf.get().0;
        (slf.get_type().into_any(), (t.producer_id, t.producer_epoch))
    }
}
