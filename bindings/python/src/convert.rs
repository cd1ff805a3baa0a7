//! Argument conversion with messages that name the field.
//!
//! PyO3's own integer extraction says "out of range integral type conversion
//! attempted" without naming the argument; the layouts have fields of three
//! widths, so every integer argument goes through [`int_field`], which names
//! the field and its range. Decoder inputs go through [`with_bytes`], which
//! accepts `bytes` (without copying), `bytearray` and `memoryview`.
//!
//! For the leadership API: [`kafka_config`] turns the `kafka` dict into the
//! core's `KafkaConfig` (every entry passed through unchanged), [`seconds`]
//! turns a number of seconds into a `Duration`, and [`opt_bytes`] and
//! [`headers`] take the parts of a guarded record.

use std::time::Duration;

use krabka_coordination::transport::kafka::KafkaConfig;
use krabka_coordination::Error;
use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyMapping, PyMemoryView, PyString,
};

use crate::error::to_py_err;

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

/// The `kafka` argument: a dict (or other mapping) of librdkafka client
/// settings, handed to the core as they are. `"bootstrap.servers"` is the
/// bootstrap address of `KafkaConfig::new`; every other entry goes through
/// `KafkaConfig::set`.
/// The core checks the values (a missing or empty bootstrap address, a
/// setting librdkafka refuses, security settings the describe client cannot
/// honour) and names them.
///
/// Keys must be `str`. A value may be a `str`, an `int`, a `float` or a
/// `bool`: librdkafka reads every setting as a string, so a number is written
/// in decimal and a bool as `"true"` / `"false"`.
pub fn kafka_config(kafka: &Bound<'_, PyAny>) -> PyResult<KafkaConfig> {
    let items = match kafka.cast::<PyDict>() {
        Ok(dict) => dict.items(),
        Err(_) => match kafka.cast::<PyMapping>() {
            Ok(mapping) => mapping.items()?,
            Err(_) => {
                return Err(PyTypeError::new_err(format!(
                    "kafka must be a dict of librdkafka settings (e.g. {{\"bootstrap.servers\": \"host:9092\"}}), got {}",
                    type_name(kafka)
                )))
            }
        },
    };
    let mut config = KafkaConfig::new("");
    for item in items.iter() {
        let (key, value): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
        let key = match key.cast::<PyString>() {
            Ok(k) => k.to_cow()?.into_owned(),
            Err(_) => {
                return Err(PyTypeError::new_err(format!(
                    "kafka setting names must be str, got {}",
                    type_name(&key)
                )))
            }
        };
        let value = setting_value(&value).ok_or_else(|| {
            PyTypeError::new_err(format!(
                "kafka setting {key:?} must be a str, int, float or bool, got {}",
                type_name(&value)
            ))
        })??;
        // `set` maps "bootstrap.servers" to the bootstrap address itself.
        config = config.set(key, value);
    }
    Ok(config)
}

fn setting_value(value: &Bound<'_, PyAny>) -> Option<PyResult<String>> {
    if let Ok(s) = value.cast::<PyString>() {
        return Some(s.to_cow().map(|c| c.into_owned()));
    }
    if let Ok(b) = value.cast::<PyBool>() {
        return Some(Ok(if b.is_true() { "true" } else { "false" }.to_owned()));
    }
    if value.is_instance_of::<PyInt>() || value.is_instance_of::<PyFloat>() {
        return Some(value.str().map(|s| s.to_string()));
    }
    None
}

/// A duration argument `field` given in seconds (an `int` or a `float`),
/// or `default` when it was left out. A wrong type is a `TypeError` naming
/// the field; a negative, infinite or NaN value an `InvalidArgumentError`
/// naming the field and the value. The core checks the rest (zero, and how
/// the options relate) with its own messages.
pub fn seconds_arg(
    value: Option<&Bound<'_, PyAny>>,
    field: &str,
    default: Duration,
) -> PyResult<Duration> {
    let Some(value) = value else {
        return Ok(default);
    };
    if value.is_instance_of::<PyBool>()
        || !(value.is_instance_of::<PyInt>() || value.is_instance_of::<PyFloat>())
    {
        return Err(PyTypeError::new_err(format!(
            "{field} must be a number of seconds (int or float), got {}",
            type_name(value)
        )));
    }
    let secs: f64 = value.extract()?;
    Duration::try_from_secs_f64(secs).map_err(|_| {
        to_py_err(
            value.py(),
            Error::InvalidArgument(format!(
                "{field} must be a finite, non-negative number of seconds, got {}",
                display(value)
            )),
        )
    })
}

/// An `i32` argument `field` (a Python `int`), or `default` when it was left
/// out: a `TypeError` naming the field for another type, an `OverflowError`
/// naming the field and the range for a value out of range.
pub fn i32_arg(value: Option<&Bound<'_, PyAny>>, field: &str, default: i32) -> PyResult<i32> {
    let Some(value) = value else {
        return Ok(default);
    };
    if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "{field} must be an int, got {}",
            type_name(value)
        )));
    }
    value.extract::<i32>().map_err(|_| {
        PyOverflowError::new_err(format!(
            "{field} does not fit an i32 ({}..={}): got {}",
            i32::MIN,
            i32::MAX,
            display(value)
        ))
    })
}

/// An optional bytes argument (`None`, `bytes`, `bytearray`, `memoryview`).
pub fn opt_bytes(value: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<Option<Vec<u8>>> {
    match value {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => with_bytes(v, field, <[u8]>::to_vec).map(Some),
    }
}

/// Record headers: `None`, a dict of `str` to bytes, or an iterable of
/// `(str, bytes)` pairs (Kafka allows a name more than once).
pub fn headers(value: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(String, Vec<u8>)>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(Vec::new());
    };
    let pairs = match value.cast::<PyDict>() {
        Ok(d) => d.items().into_any(),
        Err(_) => value.clone(),
    };
    let mut out = Vec::new();
    let iter = pairs.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "headers must be a dict or an iterable of (str, bytes) pairs, got {}",
            type_name(value)
        ))
    })?;
    for item in iter {
        let item = item?;
        let pair: Option<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = item.extract().ok();
        let Some((name, data)) = pair else {
            return Err(PyTypeError::new_err(format!(
                "a header must be a (str, bytes) pair, got {}",
                type_name(&item)
            )));
        };
        let name = str_field(&name, "header name")?;
        let data = with_bytes(&data, "header value", <[u8]>::to_vec)?;
        out.push((name, data));
    }
    Ok(out)
}
