//! The codec and partitioning functions: thin translations onto the core.
//!
//! Every function converts its arguments, calls the core function of the
//! same name, and maps the result; none re-implements a layout or a hash.
//! Bytes come in as a `Buffer` or `Uint8Array` (read in place) and go out as
//! a `Buffer`. The encoders are internal (`_encodeKey`...): the package's
//! `encodeKey` checks the value's class first (`lib/values.js`).

use krabka_coordination as core;
use napi::bindgen_prelude::{Buffer, Unknown};
use napi::Env;
use napi_derive::napi;

use crate::convert::{int_arg, str_arg, with_bytes, I32};
use crate::error::OrThrow;
use crate::values::{
    key_from_js, key_to_js, lease_from_js, lease_to_js, registration_from_js, registration_to_js,
    Made,
};

/// Encodes a record key (a `Key`). Throws `EncodeError` for a key the
/// layout cannot hold.
#[napi(js_name = "_encodeKey", skip_typescript)]
pub fn encode_key(env: Env, key: Unknown<'_>) -> napi::Result<Buffer> {
    let key = key_from_js(&env, &key)?;
    Ok(core::encode_key(&key).or_throw(&env)?.into())
}

/// Decodes a record key from a `Buffer` or `Uint8Array`. Throws
/// `FormatError` with `part === 'key'` for malformed bytes.
#[napi(ts_args_type = "data: Uint8Array", ts_return_type = "Key")]
pub fn decode_key(env: Env, data: Unknown<'_>) -> napi::Result<Made> {
    let key = with_bytes(&env, &data, "data", core::decode_key)?.or_throw(&env)?;
    key_to_js(&env, key).map(Made)
}

/// Encodes a registration value (a `Registration`). Throws `EncodeError`
/// for an empty or over-long member.
#[napi(js_name = "_encodeRegistration", skip_typescript)]
pub fn encode_registration(env: Env, registration: Unknown<'_>) -> napi::Result<Buffer> {
    let reg = registration_from_js(&env, &registration)?;
    Ok(core::encode_registration(&reg).or_throw(&env)?.into())
}

/// Decodes a registration value from a `Buffer` or `Uint8Array`. Throws
/// `FormatError` with `part === 'registration value'` for malformed bytes.
#[napi(ts_args_type = "data: Uint8Array", ts_return_type = "Registration")]
pub fn decode_registration(env: Env, data: Unknown<'_>) -> napi::Result<Made> {
    let reg = with_bytes(&env, &data, "data", core::decode_registration)?.or_throw(&env)?;
    registration_to_js(&env, reg).map(Made)
}

/// Encodes a lease value (a `Lease`). Throws `EncodeError` for an empty or
/// over-long member.
#[napi(js_name = "_encodeLease", skip_typescript)]
pub fn encode_lease(env: Env, lease: Unknown<'_>) -> napi::Result<Buffer> {
    let lease = lease_from_js(&env, &lease)?;
    Ok(core::encode_lease(&lease).or_throw(&env)?.into())
}

/// Decodes a lease value from a `Buffer` or `Uint8Array`. Throws
/// `FormatError` with `part === 'lease value'` for malformed bytes.
#[napi(ts_args_type = "data: Uint8Array", ts_return_type = "Lease")]
pub fn decode_lease(env: Env, data: Unknown<'_>) -> napi::Result<Made> {
    let lease = with_bytes(&env, &data, "data", core::decode_lease)?.or_throw(&env)?;
    lease_to_js(&env, lease).map(Made)
}

/// The partition of `role` among `partitions`: Kafka's murmur2 of the
/// role's UTF-8 bytes, masked with `toPositive`, modulo the partition
/// count. Throws `InvalidArgumentError` for an empty role or a count below
/// 1, and a `RangeError` (`code` `'INVALID_ARGUMENT'`) for a count that is
/// not an i32.
#[napi(ts_args_type = "role: string, partitions: number")]
pub fn role_partition(env: Env, role: Unknown<'_>, partitions: Unknown<'_>) -> napi::Result<i32> {
    let role = str_arg(&env, &role, "role")?;
    let partitions = int_arg(&env, &partitions, "partitions", I32)? as i32;
    core::role_partition(&role, partitions).or_throw(&env)
}

/// Kafka's murmur2 hash (`Utils.murmur2`) of `data`, as a signed 32-bit
/// integer.
#[napi(ts_args_type = "data: Uint8Array")]
pub fn murmur2(env: Env, data: Unknown<'_>) -> napi::Result<i32> {
    with_bytes(&env, &data, "data", core::murmur2)
}
