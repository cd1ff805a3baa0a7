//! The codec and partitioning functions: thin translations onto the core.
//!
//! Every function converts its arguments, calls the core function of the
//! same name, and maps the result; none re-implements a layout or a hash.

use krabka_coordination as core;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::convert::{int_field, str_field, with_bytes};
use crate::error::IntoPyResult;
use crate::values::{PyKey, PyLease, PyRegistration};

/// Encodes a record key. Raises `EncodeError` (a `ValueError`) for a key the
/// layout cannot hold: an empty role, an empty member in a registration key,
/// or a role or member over 32767 bytes of UTF-8.
#[pyfunction]
pub fn encode_key<'py>(py: Python<'py>, key: PyRef<'py, PyKey>) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = core::encode_key(&key.0).into_py_result(py)?;
    Ok(PyBytes::new(py, &bytes))
}

/// Decodes a record key from `bytes`, `bytearray` or `memoryview`. Raises
/// `FormatError` with `part == "key"` for malformed bytes.
#[pyfunction]
pub fn decode_key(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<PyKey> {
    with_bytes(data, "data", core::decode_key)?
        .into_py_result(py)
        .map(PyKey)
}

/// Encodes a registration value. Raises `EncodeError` (a `ValueError`) for
/// an empty or over-long member.
#[pyfunction]
pub fn encode_registration<'py>(
    py: Python<'py>,
    reg: PyRef<'py, PyRegistration>,
) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = core::encode_registration(&reg.0).into_py_result(py)?;
    Ok(PyBytes::new(py, &bytes))
}

/// Decodes a registration value from `bytes`, `bytearray` or `memoryview`.
/// Raises `FormatError` with `part == "registration value"` for malformed bytes.
#[pyfunction]
pub fn decode_registration(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<PyRegistration> {
    with_bytes(data, "data", core::decode_registration)?
        .into_py_result(py)
        .map(PyRegistration)
}

/// Encodes a lease value. Raises `EncodeError` (a `ValueError`) for an empty
/// or over-long member.
#[pyfunction]
pub fn encode_lease<'py>(
    py: Python<'py>,
    lease: PyRef<'py, PyLease>,
) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = core::encode_lease(&lease.0).into_py_result(py)?;
    Ok(PyBytes::new(py, &bytes))
}

/// Decodes a lease value from `bytes`, `bytearray` or `memoryview`. Raises
/// `FormatError` with `part == "lease value"` for malformed bytes.
#[pyfunction]
pub fn decode_lease(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<PyLease> {
    with_bytes(data, "data", core::decode_lease)?
        .into_py_result(py)
        .map(PyLease)
}

/// The partition of `role` among `partitions`: Kafka's murmur2 of the role's
/// UTF-8 bytes, masked with `toPositive`, modulo the partition count. Raises
/// `InvalidArgumentError` (a `ValueError`) for an empty role or a count below
/// 1, and `OverflowError` for a count that is not an i32.
#[pyfunction]
pub fn role_partition(
    py: Python<'_>,
    role: &Bound<'_, PyAny>,
    partitions: &Bound<'_, PyAny>,
) -> PyResult<i32> {
    let role = str_field(role, "role")?;
    let partitions: i32 = int_field(partitions, "partitions")?;
    core::role_partition(&role, partitions).into_py_result(py)
}

/// Kafka's murmur2 hash (`Utils.murmur2`) of `data`, as a signed 32-bit int.
#[pyfunction]
pub fn murmur2(data: &Bound<'_, PyAny>) -> PyResult<i32> {
    with_bytes(data, "data", core::murmur2)
}
