//! Argument conversion with messages that name the field.
//!
//! PyO3's own integer extraction says "out of range integral type conversion
//! attempted" without naming the argument; the layouts have fields of three
//! widths, so every integer argument goes through [`int_field`], which names
//! the field and its range. Decoder inputs go through [`with_bytes`], which
//! accepts `bytes` (without copying), `bytearray` and `memoryview`.

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyMemoryView};

/// An integer width of the record layouts.
pub trait IntField: Sized {
    /// How the layout spells the width.
    const WIDTH: &'static str;
    /// The smallest value.
    const MIN: i64;
    /// The largest value.
    const MAX: i64;
}

impl IntField for i16 {
    const WIDTH: &'static str = "i16";
    const MIN: i64 = i16::MIN as i64;
    const MAX: i64 = i16::MAX as i64;
}

impl IntField for i32 {
    const WIDTH: &'static str = "i32";
    const MIN: i64 = i32::MIN as i64;
    const MAX: i64 = i32::MAX as i64;
}

impl IntField for i64 {
    const WIDTH: &'static str = "i64";
    const MIN: i64 = i64::MIN;
    const MAX: i64 = i64::MAX;
}

/// Extracts the integer argument `field`: a `TypeError` for a non-integer, an
/// `OverflowError` naming the field and its range for a value out of range
/// (the original error is kept as `__cause__`).
pub fn int_field<'py, T>(value: &Bound<'py, PyAny>, field: &str) -> PyResult<T>
where
    T: IntField + for<'a> FromPyObject<'a, 'py>,
{
    let py = value.py();
    match value.extract::<T>().map_err(Into::into) {
        Ok(v) => Ok(v),
        Err(e) if e.is_instance_of::<PyOverflowError>(py) => {
            let err = PyOverflowError::new_err(format!(
                "{field} does not fit the layout's {} ({}..={}): got {}",
                T::WIDTH,
                T::MIN,
                T::MAX,
                display(value)
            ));
            err.set_cause(py, Some(e));
            Err(err)
        }
        Err(e) => {
            let err =
                PyTypeError::new_err(format!("{field} must be an int, got {}", type_name(value)));
            err.set_cause(py, Some(e));
            Err(err)
        }
    }
}

/// Extracts the string argument `field` with a message naming it.
pub fn str_field(value: &Bound<'_, PyAny>, field: &str) -> PyResult<String> {
    match value.extract::<String>() {
        Ok(s) => Ok(s),
        Err(e) if value.is_instance_of::<pyo3::types::PyString>() => Err(e),
        Err(e) => {
            let err =
                PyTypeError::new_err(format!("{field} must be a str, got {}", type_name(value)));
            err.set_cause(value.py(), Some(e));
            Err(err)
        }
    }
}

/// Runs `f` on the bytes of a `bytes`, `bytearray` or `memoryview` argument.
///
/// `bytes` is read in place. A `bytearray` or `memoryview` is copied once
/// first: the stable ABI this wheel targets (CPython 3.9) has no buffer
/// protocol, and a copy also keeps the bytes from changing under the decoder.
pub fn with_bytes<R>(
    data: &Bound<'_, PyAny>,
    field: &str,
    f: impl FnOnce(&[u8]) -> R,
) -> PyResult<R> {
    if let Ok(b) = data.cast::<PyBytes>() {
        return Ok(f(b.as_bytes()));
    }
    if let Ok(b) = data.cast::<PyByteArray>() {
        return Ok(f(&b.to_vec()));
    }
    if data.is_instance_of::<PyMemoryView>() {
        // `tobytes()` flattens any memoryview (of any shape or stride) in C order.
        let copy = data.call_method0("tobytes")?;
        let b = copy.cast::<PyBytes>()?;
        return Ok(f(b.as_bytes()));
    }
    Err(PyTypeError::new_err(format!(
        "{field} must be bytes, bytearray or memoryview, got {}",
        type_name(data)
    )))
}

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "an object".to_owned())
}

fn display(value: &Bound<'_, PyAny>) -> String {
    value
        .str()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "a value of no printable form".to_owned())
}
