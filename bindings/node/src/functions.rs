//! The codec and partitioning functions: thin translations onto the core.
//!
//! Every function converts its arguments, calls the core function of the
//! same name, and maps the result; none re-implements a layout or a hash.
//! Bytes come in as a `Buffer` or `Uint8Array` (read in place) and go out as
//! a `Buffer`. The encoders are internal (`_encodeKey`...): the package's
//! `encodeKey` checks the value's class first (`lib/values.js`).

use krabka_coordination as core;
use napi::bindgen_prelude::{Buffer, Unknown};
use napi::{sys, Env, JsValue};
use napi_derive::napi;

use crate::convert::{bytes_of, int_arg, str_arg, with_bytes, with_scratch, I32};
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

/// Decodes a registration value like [`decode_registration`], writing
/// `registeredAt` into `out[0]` (a `BigInt64Array`) and returning the
/// member. The package's `decodeRegistration` builds the `Registration`
/// from them in JavaScript: one N-API call and a string, where building it
/// through N-API costs a call back into JavaScript and a BigInt per field
/// (`docs/benchmarks/node.md`).
#[napi(js_name = "_decodeRegistrationInto", skip_typescript)]
pub fn decode_registration_into(
    env: Env,
    data: Unknown<'_>,
    out: Unknown<'_>,
) -> napi::Result<Made> {
    with_bytes(&env, &data, "data", |bytes| {
        let (member, registered_at) = core::decode_registration_ref(bytes).or_throw(&env)?;
        with_scratch(&env, &out, 1, |s| s[0] = registered_at)?;
        js_string(&env, member).map(Made)
    })?
}

/// Decodes a lease value like [`decode_lease`], writing the producer id,
/// producer epoch, `grantedAt` and `deadline` into `out[0..4]` (a
/// `BigInt64Array`) and returning the member (see
/// [`decode_registration_into`]).
#[napi(js_name = "_decodeLeaseInto", skip_typescript)]
pub fn decode_lease_into(env: Env, data: Unknown<'_>, out: Unknown<'_>) -> napi::Result<Made> {
    with_bytes(&env, &data, "data", |bytes| {
        let (member, token, granted_at, deadline) = core::decode_lease_ref(bytes).or_throw(&env)?;
        with_scratch(&env, &out, 4, |s| {
            s[0] = token.producer_id;
            s[1] = i64::from(token.producer_epoch);
            s[2] = granted_at;
            s[3] = deadline;
        })?;
        js_string(&env, member).map(Made)
    })?
}

/// Decodes many lease values in one call (see [`decode_lease_into`]):
/// `values` is an array of `Buffer`s or `Uint8Array`s. `out[0]` gets the
/// number of values decoded, and for value `i`,
/// `out[1 + 5 * i..1 + 5 * i + 5]` the producer id, producer epoch,
/// `grantedAt`, `deadline`, and where its member ends in the returned
/// string, which holds every member one after the other (offsets in UTF-16
/// code units, JavaScript's string indices): one string for the batch costs
/// far less than a string and an array slot per value. At the first element
/// that is not bytes or not a lease value, it returns that element's index
/// (a number) instead: the package's `decodeLeases` decodes that element
/// alone, which throws its error, so a batch reports exactly what a single
/// decode would.
#[napi(js_name = "_decodeLeasesInto", skip_typescript)]
pub fn decode_leases_into(env: Env, values: Unknown<'_>, out: Unknown<'_>) -> napi::Result<Made> {
    if !values.is_array()? {
        return Err(crate::error::arg_napi(
            &env,
            krabka_coordination_bindings::args::ArgError::wrong_type(
                "values",
                "an Array of Buffer or Uint8Array",
                &crate::convert::type_name(&values),
            ),
        ));
    }
    let raw_env = env.raw();
    let mut n = 0u32;
    // SAFETY: an array value of this env.
    check(unsafe { sys::napi_get_array_length(raw_env, values.raw(), &mut n) })?;
    // Every element first: a getter (JavaScript) may run while elements are
    // read, never while their bytes are.
    let mut elements = Vec::with_capacity(n as usize);
    for i in 0..n {
        let mut v = std::ptr::null_mut();
        // SAFETY: as above.
        check(unsafe { sys::napi_get_element(raw_env, values.raw(), i, &mut v) })?;
        elements.push(v);
    }
    // The members stay borrowed from the values' bytes: no JavaScript runs
    // from here to the end of the call.
    let mut decoded = Vec::with_capacity(elements.len());
    let mut total = 0;
    for (i, v) in elements.iter().enumerate() {
        match bytes_of(&env, *v).map(core::decode_lease_ref) {
            Some(Ok(lease)) => {
                total += lease.0.len();
                decoded.push(lease);
            }
            _ => return index_value(&env, i),
        }
    }
    let mut members = String::with_capacity(total);
    with_scratch(&env, &out, 1 + 5 * decoded.len(), |s| {
        s[0] = decoded.len() as i64;
        let mut end = 0i64;
        for (ints, (member, token, granted_at, deadline)) in
            s[1..].chunks_exact_mut(5).zip(&decoded)
        {
            members.push_str(member);
            end += if member.is_ascii() {
                member.len() as i64
            } else {
                member.encode_utf16().count() as i64
            };
            ints[0] = token.producer_id;
            ints[1] = i64::from(token.producer_epoch);
            ints[2] = *granted_at;
            ints[3] = *deadline;
            ints[4] = end;
        }
    })?;
    js_string(&env, &members).map(Made)
}

/// A JavaScript string of `s`.
fn js_string(env: &Env, s: &str) -> napi::Result<sys::napi_value> {
    let mut v = std::ptr::null_mut();
    // SAFETY: `s` is valid UTF-8 of `s.len()` bytes (ASCII, for the latin1
    // path, is the same bytes in both encodings).
    let status = unsafe {
        if s.is_ascii() {
            sys::napi_create_string_latin1(env.raw(), s.as_ptr().cast(), s.len() as isize, &mut v)
        } else {
            sys::napi_create_string_utf8(env.raw(), s.as_ptr().cast(), s.len() as isize, &mut v)
        }
    };
    check(status)?;
    Ok(v)
}

fn index_value(env: &Env, i: usize) -> napi::Result<Made> {
    let mut v = std::ptr::null_mut();
    // SAFETY: a plain N-API call of this env.
    check(unsafe { sys::napi_create_uint32(env.raw(), i as u32, &mut v) })?;
    Ok(Made(v))
}

fn check(status: sys::napi_status) -> napi::Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::from_reason(format!(
            "krabka-coordination: an N-API call failed (status {status})"
        )))
    }
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
