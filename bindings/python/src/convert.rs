//! Argument conversion: Python values in, checked Rust values out, with the
//! messages of the shared crate (`krabka_coordination_bindings::args`), so an
//! argument error reads the same in every binding.
//!
//! This module only knows Python's types (which object is an `int`, a
//! `float`, `bytes`...); what a value may be and how a refusal is worded is
//! the shared crate's. Refusals are raised through [`crate::error::arg_error`]:
//! a wrong type is a `TypeError`, a value the argument does not allow an
//! `InvalidArgumentError` (a `ValueError`), an integer too wide for a record
//! field an `OverflowError`.

use krabka_coordination::transport::kafka::KafkaConfig;
use krabka_coordination_bindings::args::{self, ArgError, SecondsBound, SECONDS_TYPE};
use krabka_coordination_bindings::options;
use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyMapping, PyMemoryView, PyString,
};

use crate::error::arg_error;

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

/// The name of a value's type, as messages say it (`str`, `float`).
pub fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "an object".to_owned())
}

/// `str(value)`, for messages.
pub fn display(value: &Bound<'_, PyAny>) -> String {
    value
        .str()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "a value of no printable form".to_owned())
}

/// True for a Python `int` that is not a `bool`.
pub fn is_int(value: &Bound<'_, PyAny>) -> bool {
    value.is_instance_of::<PyInt>() && !value.is_instance_of::<PyBool>()
}

/// The integer record field `field`: a `TypeError` for a non-integer, an
/// `OverflowError` naming the field and the layout's range for a value out
/// of it (Python's own error kept as `__cause__`).
pub fn int_field<'py, T>(value: &Bound<'py, PyAny>, field: &str) -> PyResult<T>
where
    T: IntField + for<'a> FromPyObject<'a, 'py>,
{
    let py = value.py();
    match value.extract::<T>().map_err(Into::into) {
        Ok(v) => Ok(v),
        Err(e) => {
            let refusal = if e.is_instance_of::<PyOverflowError>(py) {
                ArgError::does_not_fit(field, T::WIDTH, T::MIN, T::MAX, display(value))
            } else {
                ArgError::wrong_type(field, "an int", &type_name(value))
            };
            let err = arg_error(py, refusal);
            err.set_cause(py, Some(e));
            Err(err)
        }
    }
}

/// The string argument `field`.
pub fn str_field(value: &Bound<'_, PyAny>, field: &str) -> PyResult<String> {
    match value.extract::<String>() {
        Ok(s) => Ok(s),
        // A str that is not valid UTF-8 (a lone surrogate): Python's error.
        Err(e) if value.is_instance_of::<PyString>() => Err(e),
        Err(e) => {
            let err = arg_error(
                value.py(),
                ArgError::wrong_type(field, "a str", &type_name(value)),
            );
            err.set_cause(value.py(), Some(e));
            Err(err)
        }
    }
}

/// True for a `datetime.timedelta` (or a subclass).
fn is_timedelta(value: &Bound<'_, PyAny>) -> PyResult<bool> {
    let timedelta = value.py().import("datetime")?.getattr("timedelta")?;
    value.is_instance(&timedelta)
}

/// A duration argument in seconds (an `int`, a `float`, or a
/// `datetime.timedelta`, taken as its `total_seconds()`; `None` or left out:
/// the default). Only the type is checked here; the value is the shared
/// crate's to check ([`args::seconds`]), so a negative `timedelta` is
/// refused as a negative number of seconds is.
pub fn seconds_value(value: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<Option<f64>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    if is_timedelta(value)? {
        return Ok(Some(value.call_method0("total_seconds")?.extract()?));
    }
    if !(is_int(value) || value.is_instance_of::<PyFloat>()) {
        return Err(arg_error(
            value.py(),
            ArgError::wrong_type(field, SECONDS_TYPE, &type_name(value)),
        ));
    }
    // An int too large for a float is certainly out of range.
    Ok(Some(value.extract().unwrap_or(f64::INFINITY)))
}

/// [`seconds_value`], then checked against `bound`.
pub fn seconds_arg(
    value: Option<&Bound<'_, PyAny>>,
    field: &str,
    bound: SecondsBound,
) -> PyResult<Option<std::time::Duration>> {
    match seconds_value(value, field)? {
        None => Ok(None),
        Some(secs) => args::seconds(field, secs, bound)
            .map(Some)
            .map_err(|e| arg_error(value.expect("given").py(), e)),
    }
}

/// An integer argument (`None` or left out: `None`): a `TypeError` for
/// another type; an integer beyond `i64` is refused as outside
/// `min..=max`. The range itself is checked by the caller or the shared
/// crate.
pub fn int_value(
    value: Option<&Bound<'_, PyAny>>,
    field: &str,
    min: i64,
    max: i64,
) -> PyResult<Option<i64>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    if !is_int(value) {
        return Err(arg_error(
            value.py(),
            ArgError::wrong_type(field, "an int", &type_name(value)),
        ));
    }
    match value.extract::<i64>() {
        Ok(v) => Ok(Some(v)),
        Err(_) => Err(arg_error(
            value.py(),
            args::out_of_range(field, min, max, display(value)),
        )),
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
    Err(arg_error(
        data.py(),
        ArgError::wrong_type(field, "bytes, bytearray or memoryview", &type_name(data)),
    ))
}

/// An optional bytes argument (`None`, `bytes`, `bytearray`, `memoryview`).
pub fn opt_bytes(value: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<Option<Vec<u8>>> {
    match value {
        Some(v) if !v.is_none() => with_bytes(v, field, <[u8]>::to_vec).map(Some),
        _ => Ok(None),
    }
}

/// Record headers: `None`, a dict of `str` to bytes, or an iterable of
/// `(str, bytes)` pairs (Kafka allows a name more than once).
pub fn headers(value: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(String, Vec<u8>)>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(Vec::new());
    };
    let py = value.py();
    let pairs = match value.cast::<PyDict>() {
        Ok(d) => d.items().into_any(),
        Err(_) => value.clone(),
    };
    let iter = pairs.try_iter().map_err(|_| {
        arg_error(
            py,
            ArgError::wrong_type(
                "headers",
                "a dict or an iterable of (str, bytes) pairs",
                &type_name(value),
            ),
        )
    })?;
    let mut out = Vec::new();
    for item in iter {
        let item = item?;
        let pair: Option<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = item.extract().ok();
        let Some((name, data)) = pair else {
            return Err(arg_error(
                py,
                ArgError::wrong_type("a header", "a (str, bytes) pair", &type_name(&item)),
            ));
        };
        let name = str_field(&name, "header name")?;
        let data = with_bytes(&data, "header value", <[u8]>::to_vec)?;
        out.push((name, data));
    }
    Ok(out)
}

/// The `kafka` argument: a dict (or other mapping) of librdkafka client
/// settings, handed to the core as they are (`"bootstrap.servers"` is the
/// bootstrap address). Keys must be `str`; a value may be a `str`, an `int`,
/// a `float` or a `bool` (librdkafka reads every setting as a string, so a
/// number is written in decimal and a bool as `"true"` / `"false"`). The
/// core checks the values when the client is built.
pub fn kafka_config(kafka: &Bound<'_, PyAny>) -> PyResult<KafkaConfig> {
    let py = kafka.py();
    let items = match kafka.cast::<PyDict>() {
        Ok(dict) => dict.items(),
        Err(_) => match kafka.cast::<PyMapping>() {
            Ok(mapping) => mapping.items()?,
            Err(_) => return Err(arg_error(
                py,
                ArgError::wrong_type(
                    "kafka",
                    "a dict of librdkafka settings (e.g. {\"bootstrap.servers\": \"host:9092\"})",
                    &type_name(kafka),
                ),
            )),
        },
    };
    let mut settings = Vec::with_capacity(items.len());
    for item in items.iter() {
        let (key, value): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
        let key = match key.cast::<PyString>() {
            Ok(k) => k.to_cow()?.into_owned(),
            Err(_) => {
                return Err(arg_error(
                    py,
                    ArgError::wrong_type("a kafka setting name", "a str", &type_name(&key)),
                ))
            }
        };
        let Some(value) = setting_value(&value) else {
            return Err(arg_error(
                py,
                ArgError::wrong_type(
                    &format!("kafka setting {key:?}"),
                    "a str, int, float or bool",
                    &type_name(&value),
                ),
            ));
        };
        settings.push((key, value?));
    }
    Ok(options::kafka_config(settings))
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
