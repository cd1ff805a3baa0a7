//! Argument conversion: JavaScript values in, checked Rust values out, with
//! the messages of the shared crate (`krabka_coordination_bindings::args`),
//! so an argument error reads the same in every binding.
//!
//! This module only knows JavaScript's types (which value is a `string`, a
//! `number`, a `bigint`, a `Uint8Array`); what a value may be and how a
//! refusal is worded is the shared crate's. Refusals are thrown through
//! [`crate::error::arg_napi`] with the code `INVALID_ARGUMENT`.
//!
//! Integers: an `i64` field (a producer id, a timestamp) takes a `bigint`,
//! or a `number` that is a safe integer (converted exactly); any other
//! `number` (a fraction, beyond 2^53 - 1, NaN) is refused, never rounded.
//! An `i16` or `i32` field takes an integer `number` (or a `bigint`).

use krabka_coordination::transport::kafka::KafkaConfig;
use krabka_coordination_bindings::args::{self, ArgError, SecondsBound, SECONDS_TYPE};
use krabka_coordination_bindings::options;
use napi::bindgen_prelude::{
    BigInt, FromNapiValue, JsObjectValue, Object, TypedArrayType, Unknown,
};
use napi::{sys, Env, JsValue, ValueType};

use crate::error::arg_napi;

/// The largest integer a `number` holds exactly (`Number.MAX_SAFE_INTEGER`).
pub const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// An integer width of the record layouts.
#[derive(Debug, Clone, Copy)]
pub struct Width {
    /// How the layout spells the width.
    pub name: &'static str,
    /// The smallest value.
    pub min: i64,
    /// The largest value.
    pub max: i64,
}

/// `i16`.
pub const I16: Width = Width {
    name: "i16",
    min: i16::MIN as i64,
    max: i16::MAX as i64,
};

/// `i32`.
pub const I32: Width = Width {
    name: "i32",
    min: i32::MIN as i64,
    max: i32::MAX as i64,
};

/// `i64`.
pub const I64: Width = Width {
    name: "i64",
    min: i64::MIN,
    max: i64::MAX,
};

/// The name of a value's type, as messages say it (`string`, `number`,
/// `bigint`, `undefined`, `null`, `Array`, `object`...).
pub fn type_name(v: &Unknown<'_>) -> String {
    let name = match v.get_type() {
        Ok(ValueType::Undefined) => "undefined",
        Ok(ValueType::Null) => "null",
        Ok(ValueType::Boolean) => "boolean",
        Ok(ValueType::Number) => "number",
        Ok(ValueType::String) => "string",
        Ok(ValueType::Symbol) => "symbol",
        Ok(ValueType::BigInt) => "bigint",
        Ok(ValueType::Function) => "function",
        Ok(ValueType::External) => "external",
        Ok(ValueType::Object) => {
            if v.is_array().unwrap_or(false) {
                "Array"
            } else if v.is_buffer().unwrap_or(false) {
                "a typed array other than Uint8Array"
            } else {
                "object"
            }
        }
        _ => "a value of unknown type",
    };
    name.to_owned()
}

/// True for `undefined` and `null`.
pub fn is_nullish(v: &Unknown<'_>) -> bool {
    matches!(v.get_type(), Ok(ValueType::Undefined | ValueType::Null))
}

/// `String(value)`, for messages.
pub fn display(v: &Unknown<'_>) -> String {
    v.coerce_to_string()
        .and_then(|s| s.into_utf8())
        .and_then(|s| s.into_owned())
        .unwrap_or_else(|_| "a value of no printable form".to_owned())
}

/// The string argument `field`.
pub fn str_arg(env: &Env, v: &Unknown<'_>, field: &str) -> napi::Result<String> {
    if v.get_type()? == ValueType::String {
        // SAFETY: a string value of this env.
        return unsafe { String::from_napi_value(env.raw(), v.raw()) };
    }
    Err(arg_napi(
        env,
        ArgError::wrong_type(field, "a string", &type_name(v)),
    ))
}

/// The integer argument `field` of `width`: a `bigint` or a `number` that is
/// a safe integer; a value out of the width is a `RangeError` naming the
/// field and the layout's range.
pub fn int_arg(env: &Env, v: &Unknown<'_>, field: &str, width: Width) -> napi::Result<i64> {
    let wide: i128 = match v.get_type()? {
        ValueType::BigInt => {
            // SAFETY: a bigint value of this env.
            let big = unsafe { BigInt::from_napi_value(env.raw(), v.raw()) }?;
            let (value, lossless) = big.get_i128();
            if !lossless {
                return Err(arg_napi(
                    env,
                    ArgError::does_not_fit(field, width.name, width.min, width.max, display(v)),
                ));
            }
            value
        }
        ValueType::Number => {
            // SAFETY: a number value of this env.
            let x = unsafe { f64::from_napi_value(env.raw(), v.raw()) }?;
            if !(x.is_finite() && x.fract() == 0.0) {
                return Err(arg_napi(
                    env,
                    ArgError::invalid(field, "an integer", args::number(x)),
                ));
            }
            if x.abs() > MAX_SAFE_INTEGER {
                if width.max <= i64::from(i32::MAX) {
                    return Err(arg_napi(
                        env,
                        ArgError::does_not_fit(field, width.name, width.min, width.max, display(v)),
                    ));
                }
                return Err(arg_napi(
                    env,
                    ArgError::invalid(
                        field,
                        "a bigint, or a number that is a safe integer (at most 2^53 - 1 from zero: a larger number is not exact)",
                        display(v),
                    ),
                ));
            }
            x as i128
        }
        _ => {
            let expected = if width.max > i64::from(i32::MAX) {
                "a bigint (or a safe integer number)"
            } else {
                "an integer number"
            };
            return Err(arg_napi(
                env,
                ArgError::wrong_type(field, expected, &type_name(v)),
            ));
        }
    };
    if wide < i128::from(width.min) || wide > i128::from(width.max) {
        return Err(arg_napi(
            env,
            ArgError::does_not_fit(field, width.name, width.min, width.max, display(v)),
        ));
    }
    Ok(wide as i64)
}

/// An optional integer argument (`undefined` or `null`: `None`): a `number`
/// or `bigint`; its range (`min..=max`) is the caller's or the shared
/// crate's to check, with the shared wording.
pub fn opt_int_value(
    env: &Env,
    v: Option<&Unknown<'_>>,
    field: &str,
    min: i64,
    max: i64,
) -> napi::Result<Option<i64>> {
    let Some(v) = v.filter(|v| !is_nullish(v)) else {
        return Ok(None);
    };
    match v.get_type()? {
        ValueType::Number => {
            // SAFETY: a number value of this env.
            let x = unsafe { f64::from_napi_value(env.raw(), v.raw()) }?;
            if !(x.is_finite() && x.fract() == 0.0) {
                return Err(arg_napi(
                    env,
                    ArgError::invalid(field, "an integer", args::number(x)),
                ));
            }
            if x.abs() > MAX_SAFE_INTEGER {
                return Err(arg_napi(
                    env,
                    args::out_of_range(field, min, max, args::number(x)),
                ));
            }
            Ok(Some(x as i64))
        }
        ValueType::BigInt => {
            // SAFETY: a bigint value of this env.
            let big = unsafe { BigInt::from_napi_value(env.raw(), v.raw()) }?;
            match big.get_i64() {
                (value, true) => Ok(Some(value)),
                _ => Err(arg_napi(
                    env,
                    args::out_of_range(field, min, max, display(v)),
                )),
            }
        }
        _ => Err(arg_napi(
            env,
            ArgError::wrong_type(field, "an integer number", &type_name(v)),
        )),
    }
}

/// A duration argument in seconds (a `number`; `undefined` or `null`: the
/// default). Only the type is checked here; the value is the shared crate's
/// to check ([`args::seconds`]).
pub fn seconds_value(env: &Env, v: Option<&Unknown<'_>>, field: &str) -> napi::Result<Option<f64>> {
    let Some(v) = v.filter(|v| !is_nullish(v)) else {
        return Ok(None);
    };
    if v.get_type()? != ValueType::Number {
        return Err(arg_napi(
            env,
            ArgError::wrong_type(field, SECONDS_TYPE, &type_name(v)),
        ));
    }
    // SAFETY: a number value of this env.
    Ok(Some(unsafe { f64::from_napi_value(env.raw(), v.raw()) }?))
}

/// [`seconds_value`], then checked against `bound`.
pub fn seconds_arg(
    env: &Env,
    v: Option<&Unknown<'_>>,
    field: &str,
    bound: SecondsBound,
) -> napi::Result<Option<std::time::Duration>> {
    match seconds_value(env, v, field)? {
        None => Ok(None),
        Some(secs) => args::seconds(field, secs, bound)
            .map(Some)
            .map_err(|e| arg_napi(env, e)),
    }
}

/// A boolean option (`undefined` or `null`: `false`).
pub fn bool_value(env: &Env, v: Option<&Unknown<'_>>, field: &str) -> napi::Result<bool> {
    let Some(v) = v.filter(|v| !is_nullish(v)) else {
        return Ok(false);
    };
    if v.get_type()? != ValueType::Boolean {
        return Err(arg_napi(
            env,
            ArgError::wrong_type(field, "a boolean", &type_name(v)),
        ));
    }
    // SAFETY: a boolean value of this env.
    unsafe { bool::from_napi_value(env.raw(), v.raw()) }
}

/// The kind, data and element count of `v` if it is a typed array.
fn typed_array(env: &Env, v: sys::napi_value) -> Option<(i32, *mut std::ffi::c_void, usize)> {
    let (mut kind, mut len) = (0, 0usize);
    let (mut data, mut buffer, mut offset) = (std::ptr::null_mut(), std::ptr::null_mut(), 0usize);
    // SAFETY: a plain N-API query on a value of this env; for a value that is
    // not a typed array it answers napi_invalid_arg and writes nothing.
    let status = unsafe {
        sys::napi_get_typedarray_info(
            env.raw(),
            v,
            &mut kind,
            &mut len,
            &mut data,
            &mut buffer,
            &mut offset,
        )
    };
    (status == sys::Status::napi_ok).then_some((kind, data, len))
}

/// The bytes of `v` if it is a `Buffer` or `Uint8Array`, read in place;
/// valid while the value is (for the current call).
pub fn bytes_of<'v>(env: &Env, v: sys::napi_value) -> Option<&'v [u8]> {
    match typed_array(env, v)? {
        (kind, _, _) if kind != TypedArrayType::Uint8 as i32 => None,
        (_, data, len) if len == 0 || data.is_null() => Some(&[]),
        // SAFETY: N-API reports `len` bytes at `data`, alive while the value
        // is (for this call); JavaScript does not run during the call.
        (_, data, len) => Some(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }),
    }
}

/// Runs `f` on the bytes of a `Buffer` or `Uint8Array` argument, read in
/// place (no copy).
pub fn with_bytes<R>(
    env: &Env,
    v: &Unknown<'_>,
    field: &str,
    f: impl FnOnce(&[u8]) -> R,
) -> napi::Result<R> {
    match bytes_of(env, v.raw()) {
        Some(bytes) => Ok(f(bytes)),
        None => Err(arg_napi(
            env,
            ArgError::wrong_type(field, "a Buffer or Uint8Array", &type_name(v)),
        )),
    }
}

/// Runs `f` on the first `n` elements of `v`, a `BigInt64Array` the
/// package made (its scratch for decoded integers). Anything else is a bug
/// of the package, reported as a plain error.
pub fn with_scratch<R>(
    env: &Env,
    v: &Unknown<'_>,
    n: usize,
    f: impl FnOnce(&mut [i64]) -> R,
) -> napi::Result<R> {
    match typed_array(env, v.raw()) {
        Some((kind, _, _)) if kind == TypedArrayType::BigInt64 as i32 && n == 0 => Ok(f(&mut [])),
        Some((kind, data, len))
            if kind == TypedArrayType::BigInt64 as i32
                && len >= n
                && !data.is_null()
                && data.cast::<i64>().is_aligned() =>
        {
            // SAFETY: N-API reports `len` aligned i64 elements at `data`,
            // alive while the value is (for this call); nothing else reads
            // or writes them during it (one JavaScript thread).
            let out = unsafe { std::slice::from_raw_parts_mut(data.cast::<i64>(), n) };
            Ok(f(out))
        }
        _ => Err(napi::Error::from_reason(format!(
            "krabka-coordination: internal: the decode scratch is not a BigInt64Array of {n} (got {})",
            type_name(v)
        ))),
    }
}

/// An optional bytes argument (`undefined`, `null`, a `Buffer` or a
/// `Uint8Array`), copied.
pub fn opt_bytes(env: &Env, v: Option<&Unknown<'_>>, field: &str) -> napi::Result<Option<Vec<u8>>> {
    match v {
        Some(v) if !is_nullish(v) => with_bytes(env, v, field, <[u8]>::to_vec).map(Some),
        _ => Ok(None),
    }
}

/// An object argument: `undefined`/`null` is `None`.
pub fn opt_object<'a>(
    env: &Env,
    v: Option<&Unknown<'a>>,
    field: &str,
) -> napi::Result<Option<Object<'a>>> {
    let Some(v) = v.filter(|v| !is_nullish(v)) else {
        return Ok(None);
    };
    if v.get_type()? != ValueType::Object || v.is_array()? {
        return Err(arg_napi(
            env,
            ArgError::wrong_type(field, "an object", &type_name(v)),
        ));
    }
    // SAFETY: an object value of this env.
    Ok(Some(unsafe { v.cast::<Object<'a>>() }?))
}

/// A property of an options object (`None` when absent or undefined).
pub fn prop<'a>(obj: Option<&Object<'a>>, name: &str) -> napi::Result<Option<Unknown<'a>>> {
    let Some(obj) = obj else { return Ok(None) };
    let v: Unknown<'a> = obj.get_named_property(name)?;
    Ok((v.get_type()? != ValueType::Undefined).then_some(v))
}

/// The Kafka settings: a plain object of librdkafka client settings, handed
/// to the core as they are (`"bootstrap.servers"` is the bootstrap
/// address). A value may be a `string`, a `number` or a `boolean`
/// (librdkafka reads every setting as a string: a number is written in
/// decimal, a boolean as `"true"` / `"false"`). The core checks them when
/// the client is built.
pub fn kafka_config(env: &Env, v: &Unknown<'_>) -> napi::Result<KafkaConfig> {
    let expected = "an object of librdkafka settings (e.g. { 'bootstrap.servers': 'host:9092' })";
    if v.get_type()? != ValueType::Object || v.is_array()? {
        return Err(arg_napi(
            env,
            ArgError::wrong_type("kafka", expected, &type_name(v)),
        ));
    }
    // SAFETY: an object value of this env.
    let obj = unsafe { v.cast::<Object<'_>>() }?;
    let names = Object::keys(&obj)?;
    let mut settings = Vec::with_capacity(names.len());
    for key in names {
        let value: Unknown<'_> = obj.get_named_property(&key)?;
        let text = match value.get_type()? {
            ValueType::String => {
                // SAFETY: a string value of this env.
                unsafe { String::from_napi_value(env.raw(), value.raw()) }?
            }
            ValueType::Boolean => {
                // SAFETY: a boolean value of this env.
                let b = unsafe { bool::from_napi_value(env.raw(), value.raw()) }?;
                if b { "true" } else { "false" }.to_owned()
            }
            ValueType::Number => display(&value),
            _ => {
                return Err(arg_napi(
                    env,
                    ArgError::wrong_type(
                        &format!("kafka setting {key:?}"),
                        "a string, number or boolean",
                        &type_name(&value),
                    ),
                ))
            }
        };
        settings.push((key, text));
    }
    Ok(options::kafka_config(settings))
}
