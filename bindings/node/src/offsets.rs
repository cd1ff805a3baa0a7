//! The input offsets of a guarded write and the offsets a group committed,
//! as plain JavaScript objects (`Leadership.writeWithOffsets` and
//! `Leadership.committedOffsets`).
//!
//! Translation only: the shapes and types are checked here (a wrong type
//! or an integer out of its width is the package's argument error, as
//! everywhere); what the values mean (an empty group, a negative offset or
//! partition, a topic-partition named twice) is the core's to refuse, with
//! its `InvalidArgumentError` naming the value.
//!
//! An offset is an `i64`: it is taken as a `bigint` or a safe integer
//! `number`, and returned as a `bigint` (as every `i64` of the package).

use krabka_coordination::transport::{CommittedOffset, ConsumedOffsets, InputOffset};
use krabka_coordination_bindings::ArgError;
use napi::bindgen_prelude::{Array, BigInt, Null, Object, Unknown};
use napi::{sys, Env, JsValue, ValueType};

use crate::convert::{int_arg, is_nullish, prop, str_arg, type_name, I32, I64};
use crate::error::arg_napi;

/// The elements of the array argument `field`; anything but an array is
/// the package's type error, naming `field` and `expected`.
fn elements<'a>(
    env: &Env,
    v: &Unknown<'a>,
    field: &str,
    expected: &str,
) -> napi::Result<Vec<Unknown<'a>>> {
    if !v.is_array()? {
        return Err(arg_napi(
            env,
            ArgError::wrong_type(field, expected, &type_name(v)),
        ));
    }
    // SAFETY: an array value of this env.
    let array = unsafe { v.cast::<Array<'a>>() }?;
    let mut out = Vec::with_capacity(array.len() as usize);
    for i in 0..array.len() {
        let item: Unknown<'a> = array.get(i)?.ok_or_else(|| {
            arg_napi(
                env,
                ArgError::wrong_type(field, expected, "an array with holes"),
            )
        })?;
        out.push(item);
    }
    Ok(out)
}

/// The object argument `field` (not an array, not `null`).
fn object<'a>(env: &Env, v: &Unknown<'a>, field: &str, expected: &str) -> napi::Result<Object<'a>> {
    if v.get_type()? != ValueType::Object || v.is_array()? {
        return Err(arg_napi(
            env,
            ArgError::wrong_type(field, expected, &type_name(v)),
        ));
    }
    // SAFETY: an object value of this env.
    unsafe { v.cast::<Object<'a>>() }
}

/// The required property `name` of `obj`; absent or `undefined` is the
/// package's type error naming it and what it must be.
fn required<'a>(
    env: &Env,
    obj: &Object<'a>,
    name: &str,
    expected: &str,
) -> napi::Result<Unknown<'a>> {
    prop(Some(obj), name)?
        .ok_or_else(|| arg_napi(env, ArgError::wrong_type(name, expected, "undefined")))
}

/// `{ group, offsets: [{ topic, partition, offset, metadata? }] }` as the
/// core's [`ConsumedOffsets`].
pub fn consumed_offsets(env: &Env, v: &Unknown<'_>) -> napi::Result<ConsumedOffsets> {
    let obj = object(
        env,
        v,
        "offsets",
        "an object { group, offsets: [{ topic, partition, offset, metadata? }] }",
    )?;
    let group = str_arg(env, &required(env, &obj, "group", "a string")?, "group")?;
    let list = required(env, &obj, "offsets", "an array of input offsets")?;
    let expected = "an array of { topic, partition, offset, metadata? }";
    let offsets = elements(env, &list, "offsets", expected)?
        .iter()
        .map(|item| input_offset(env, item))
        .collect::<napi::Result<Vec<_>>>()?;
    Ok(ConsumedOffsets { group, offsets })
}

/// One `{ topic, partition, offset, metadata? }`.
fn input_offset(env: &Env, v: &Unknown<'_>) -> napi::Result<InputOffset> {
    let expected = "an object { topic, partition, offset, metadata? }";
    let obj = object(env, v, "an input offset", expected)?;
    let topic = str_arg(env, &required(env, &obj, "topic", "a string")?, "topic")?;
    let partition = required(env, &obj, "partition", "an integer number")?;
    let partition = int_arg(env, &partition, "partition", I32)? as i32;
    let offset = required(env, &obj, "offset", "a bigint (or a safe integer number)")?;
    let offset = int_arg(env, &offset, "offset", I64)?;
    let metadata = match prop(Some(&obj), "metadata")? {
        Some(m) if !is_nullish(&m) => Some(str_arg(env, &m, "metadata")?),
        _ => None,
    };
    Ok(InputOffset {
        topic,
        partition,
        offset,
        metadata,
    })
}

/// `[{ topic, partitions: [0, 1] }]` as the core's `(topic, partitions)`
/// pairs, in the order given.
pub fn topic_partitions(env: &Env, v: &Unknown<'_>) -> napi::Result<Vec<(String, Vec<i32>)>> {
    let expected = "an array of { topic, partitions: number[] }";
    let mut out = Vec::new();
    for item in elements(env, v, "partitions", expected)? {
        let obj = object(env, &item, "partitions", expected)?;
        let topic = str_arg(env, &required(env, &obj, "topic", "a string")?, "topic")?;
        let list = required(env, &obj, "partitions", "an array of partition numbers")?;
        let partitions = elements(env, &list, "partitions", "an array of partition numbers")?
            .iter()
            .map(|p| int_arg(env, p, "partition", I32).map(|p| p as i32))
            .collect::<napi::Result<Vec<_>>>()?;
        out.push((topic, partitions));
    }
    Ok(out)
}

/// The committed offsets as an array of `{ topic, partition, offset,
/// metadata }` (`offset` a `bigint`, or `null` when the group committed
/// nothing for the partition; `metadata` a string or `null`).
pub fn committed_to_js(env: &Env, found: Vec<CommittedOffset>) -> napi::Result<sys::napi_value> {
    let mut out = env.create_array(found.len() as u32)?;
    for (i, c) in found.into_iter().enumerate() {
        let mut o = Object::new(env)?;
        o.set("topic", c.topic)?;
        o.set("partition", c.partition)?;
        match c.offset {
            Some(offset) => o.set("offset", BigInt::from(offset))?,
            None => o.set("offset", Null)?,
        }
        match c.metadata {
            Some(m) => o.set("metadata", m)?,
            None => o.set("metadata", Null)?,
        }
        out.set(i as u32, o)?;
    }
    Ok(out.raw())
}
