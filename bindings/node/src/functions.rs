//! The codec and partitioning functions: thin translations onto the core.
//!
//! Every function converts its arguments, calls the core function of the
//! same name, and maps the result; none re-implements a layout or a hash.
//! Bytes come in as a `Buffer` or `Uint8Array` (read in place) and go out as
//! a `Buffer`.

use krabka_coordination as core;
use napi::bindgen_prelude::{Buffer, Unknown};
use napi::Env;
use napi_derive::napi;

use crate::convert::{int_arg, str_arg, with_bytes, I32};
use crate::error::OrThrow;
use crate::values::{instance_arg, Key, Lease, Registration};

/// Encodes a record key. Throws `EncodeError` (`code` `'ENCODE'`, with
/// `part` and `field`) for a key the layout cannot hold: an empty role, an
/// empty member in a registration key, or a role or member over 32767
/// bytes of UTF-8.
#[napi(ts_args_type = "key: Key")]
pub fn encode_key(env: Env, key: Unknown<'_>) -> napi::Result<Buffer> {
    let key = instance_arg::<Key>(&env, &key, "key", "Key")?;
    Ok(core::encode_key(&key.inner).or_throw(&env)?.into())
}

/// Decodes a record key from a `Buffer` or `Uint8Array`. Throws
/// `FormatError` with `part === 'key'` for malformed bytes.
#[napi(ts_args_type = "data: Uint8Array")]
pub fn decode_key(env: Env, data: Unknown<'_>) -> napi::Result<Key> {
    let key = with_bytes(&env, &data, "data", core::decode_key)?.or_throw(&env)?;
    Ok(Key { inner: key })
}

/// Encodes a registration value. Throws `EncodeError` for an empty or
/// over-long member.
#[napi(ts_args_type = "registration: Registration")]
pub fn encode_registration(env: Env, registration: Unknown<'_>) -> napi::Result<Buffer> {
    let reg = instance_arg::<Registration>(&env, &registration, "registration", "Registration")?;
    Ok(core::encode_registration(&reg.inner).or_throw(&env)?.into())
}

/// Decodes a registration value from a `Buffer` or `Uint8Array`. Throws
/// `FormatError` with `part === 'registration value'` for malformed bytes.
#[napi(ts_args_type = "data: Uint8Array")]
pub fn decode_registration(env: Env, data: Unknown<'_>) -> napi::Result<Registration> {
    let reg = with_bytes(&env, &data, "data", core::decode_registration)?.or_throw(&env)?;
    Ok(Registration { inner: reg })
}

/// Encodes a lease value. Throws `EncodeError` for an empty or over-long
/// member.
#[napi(ts_args_type = "lease: Lease")]
pub fn encode_lease(env: Env, lease: Unknown<'_>) -> napi::Result<Buffer> {
    let lease = instance_arg::<Lease>(&env, &lease, "lease", "Lease")?;
    Ok(core::encode_lease(&lease.inner).or_throw(&env)?.into())
}

/// Decodes a lease value from a `Buffer` or `Uint8Array`. Throws
/// `FormatError` with `part === 'lease value'` for malformed bytes.
#[napi(ts_args_type = "data: Uint8Array")]
pub fn decode_lease(env: Env, data: Unknown<'_>) -> napi::Result<Lease> {
    let lease = with_bytes(&env, &data, "data", core::decode_lease)?.or_throw(&env)?;
    Ok(Lease { inner: lease })
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
