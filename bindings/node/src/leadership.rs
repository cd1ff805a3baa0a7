//! `_Leadership`: the held leadership of a role, the core's handle, behind
//! the package's `Leadership` (`lib/leadership.js`).
//!
//! Properties read the handle directly; `wait`, `write`,
//! `writeWithOffsets`, `committedOffsets` and `resign` return promises of
//! work done on the runtime. A guarded write or a resign runs to
//! its end once started (the core runs a resign in its own task): a
//! transaction is never abandoned open.
//!
//! The handle is dropped inside the runtime ([`ProcessBound`]), so the
//! epoch's producer is destroyed on the runtime's blocking pool, never on
//! the JavaScript thread. Dropping it (the JavaScript object collected)
//! stops the renewals without resigning, as in the core.

use std::sync::Arc;

use krabka_coordination::leadership::Leadership;
use krabka_coordination::transport::OutRecord;
use krabka_coordination_bindings::{ArgError, ProcessBound};
use napi::bindgen_prelude::{Array, JsObjectValue, Object, Unknown};
use napi::{Env, JsValue, ValueType};
use napi_derive::napi;

use crate::convert::{int_arg, is_nullish, opt_bytes, prop, str_arg, type_name, with_bytes, I32};
use crate::error::{arg_napi, error_value, OrThrow};
use crate::events::NativeEventStream;
use crate::offsets::{committed_to_js, consumed_offsets, topic_partitions};
use crate::runtime::{js, promise, runtime};
use crate::values::{lease_to_js, token_to_js, Made};

/// The held leadership of a role (see the module documentation).
#[napi(js_name = "_Leadership")]
pub struct NativeLeadership {
    inner: ProcessBound<Arc<Leadership>>,
}

impl NativeLeadership {
    /// Wraps a leadership just won.
    pub fn new(leadership: Arc<Leadership>) -> napi::Result<NativeLeadership> {
        let handle = runtime()?.handle().clone();
        Ok(NativeLeadership {
            inner: ProcessBound::new("Leadership", leadership, Some(handle)),
        })
    }

    fn core(&self, env: &Env) -> napi::Result<&Arc<Leadership>> {
        self.inner.get().or_throw(env)
    }
}

/// One record of a guarded write from a plain object `{ topic, value, key,
/// partition, headers }`.
pub fn out_record(env: &Env, v: &Unknown<'_>, field: &str) -> napi::Result<OutRecord> {
    if v.get_type()? != ValueType::Object || v.is_array()? {
        return Err(arg_napi(
            env,
            ArgError::wrong_type(
                field,
                "an object { topic, value, key?, partition?, headers? }",
                &type_name(v),
            ),
        ));
    }
    // SAFETY: an object value of this env.
    let obj = unsafe { v.cast::<Object<'_>>() }?;
    let o = Some(&obj);
    let topic = match prop(o, "topic")? {
        Some(t) => str_arg(env, &t, "topic")?,
        None => {
            return Err(arg_napi(
                env,
                ArgError::wrong_type("topic", "a string", "undefined"),
            ))
        }
    };
    let value = prop(o, "value")?;
    if value.is_none() {
        return Err(arg_napi(
            env,
            ArgError::wrong_type("value", "a Buffer, a Uint8Array or null", "undefined"),
        ));
    }
    let partition = match prop(o, "partition")? {
        Some(p) if !is_nullish(&p) => Some(int_arg(env, &p, "partition", I32)? as i32),
        _ => None,
    };
    Ok(OutRecord {
        topic,
        partition,
        key: opt_bytes(env, prop(o, "key")?.as_ref(), "key")?,
        value: opt_bytes(env, value.as_ref(), "value")?,
        headers: headers(env, prop(o, "headers")?.as_ref())?,
    })
}

/// The records of a guarded write: an array of `{ topic, value, key?,
/// partition?, headers? }` (see [`out_record`]).
fn out_records(env: &Env, records: &Unknown<'_>) -> napi::Result<Vec<OutRecord>> {
    if !records.is_array()? {
        return Err(arg_napi(
            env,
            ArgError::wrong_type("records", "an array of records", &type_name(records)),
        ));
    }
    // SAFETY: an array value of this env.
    let array = unsafe { records.cast::<Array<'_>>() }?;
    let mut out = Vec::with_capacity(array.len() as usize);
    for i in 0..array.len() {
        let item: Unknown<'_> = array.get(i)?.ok_or_else(|| {
            arg_napi(
                env,
                ArgError::wrong_type("a record", "an object", "undefined"),
            )
        })?;
        out.push(out_record(env, &item, "a record")?);
    }
    Ok(out)
}

/// Record headers: `undefined`, an object of name to bytes, or an array of
/// `[name, bytes]` pairs (Kafka allows a name more than once).
fn headers(env: &Env, v: Option<&Unknown<'_>>) -> napi::Result<Vec<(String, Vec<u8>)>> {
    let Some(v) = v.filter(|v| !is_nullish(v)) else {
        return Ok(Vec::new());
    };
    let expected = "an object of name to bytes, or an array of [name, bytes] pairs";
    if v.get_type()? != ValueType::Object {
        return Err(arg_napi(
            env,
            ArgError::wrong_type("headers", expected, &type_name(v)),
        ));
    }
    let mut out = Vec::new();
    if v.is_array()? {
        // SAFETY: an array value of this env.
        let pairs = unsafe { v.cast::<Array<'_>>() }?;
        for i in 0..pairs.len() {
            let pair: Unknown<'_> = pairs.get(i)?.ok_or_else(|| {
                arg_napi(
                    env,
                    ArgError::wrong_type("a header", "a [name, bytes] pair", "undefined"),
                )
            })?;
            if !pair.is_array()? {
                return Err(arg_napi(
                    env,
                    ArgError::wrong_type("a header", "a [name, bytes] pair", &type_name(&pair)),
                ));
            }
            // SAFETY: an array value of this env.
            let pair = unsafe { pair.cast::<Array<'_>>() }?;
            let name: Option<Unknown<'_>> = pair.get(0)?;
            let data: Option<Unknown<'_>> = pair.get(1)?;
            let (Some(name), Some(data)) = (name, data) else {
                return Err(arg_napi(
                    env,
                    ArgError::wrong_type("a header", "a [name, bytes] pair", "a shorter array"),
                ));
            };
            let name = str_arg(env, &name, "header name")?;
            out.push((
                name,
                with_bytes(env, &data, "header value", <[u8]>::to_vec)?,
            ));
        }
    } else {
        // SAFETY: an object value of this env.
        let obj = unsafe { v.cast::<Object<'_>>() }?;
        for name in Object::keys(&obj)? {
            let data: Unknown<'_> = obj.get_named_property(&name)?;
            out.push((
                name,
                with_bytes(env, &data, "header value", <[u8]>::to_vec)?,
            ));
        }
    }
    Ok(out)
}

#[napi]
impl NativeLeadership {
    /// The fencing token of this term.
    #[napi(getter, ts_return_type = "FencingToken")]
    pub fn token(&self, env: Env) -> napi::Result<Made> {
        token_to_js(&env, self.core(&env)?.token()).map(Made)
    }

    /// The role.
    #[napi(getter)]
    pub fn role(&self, env: Env) -> napi::Result<String> {
        Ok(self.core(&env)?.role().to_owned())
    }

    /// The member id.
    #[napi(getter)]
    pub fn member(&self, env: Env) -> napi::Result<String> {
        Ok(self.core(&env)?.member().to_owned())
    }

    /// The partition of `__coordination_state` that holds the role.
    #[napi(getter)]
    pub fn partition(&self, env: Env) -> napi::Result<i32> {
        Ok(self.core(&env)?.partition())
    }

    /// The last lease this member wrote.
    #[napi(getter, ts_return_type = "Lease")]
    pub fn lease(&self, env: Env) -> napi::Result<Made> {
        lease_to_js(&env, self.core(&env)?.lease()).map(Made)
    }

    /// The lease time left on this member's monotonic clock, in seconds.
    #[napi(getter)]
    pub fn lease_left(&self, env: Env) -> napi::Result<f64> {
        Ok(self.core(&env)?.lease_left().as_secs_f64())
    }

    /// How many renewals in a row have failed with a transient error.
    #[napi(getter)]
    pub fn renewal_failures(&self, env: Env) -> napi::Result<u32> {
        Ok(self.core(&env)?.renewal_failures())
    }

    /// True until the role ends.
    #[napi(getter)]
    pub fn is_held(&self, env: Env) -> napi::Result<bool> {
        Ok(self.core(&env)?.is_held())
    }

    /// Why the role ended, as the error the package throws for it, or
    /// `null` while it is held.
    #[napi(ts_return_type = "KrabkaError | null")]
    pub fn error<'env>(&self, env: &'env Env) -> napi::Result<Option<Unknown<'env>>> {
        let Some(reason) = self.core(env)?.err() else {
            return Ok(None);
        };
        let v = error_value(env, &reason)?;
        // SAFETY: a value made in this env.
        Ok(Some(unsafe { Unknown::from_raw_unchecked(env.raw(), v) }))
    }

    /// A promise that resolves when the role ends.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn wait<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let done = self.core(env)?.done();
        promise(
            env,
            async move {
                done.await;
                Ok(())
            },
            |env, ()| js(env, ()),
        )
    }

    /// A guarded write of `records` (an array of `{ topic, value, key?,
    /// partition?, headers? }`) in one transaction of the term's epoch.
    #[napi(
        ts_args_type = "records: OutRecord[]",
        ts_return_type = "Promise<void>"
    )]
    pub fn write<'env>(&self, env: &'env Env, records: Unknown<'_>) -> napi::Result<Object<'env>> {
        let out = out_records(env, &records)?;
        // Called here, on the JavaScript thread: a write called after
        // `resign()` is refused whatever order the runtime runs them in.
        let write = Arc::clone(self.core(env)?).write_owned(out);
        promise(env, write, |env, ()| js(env, ()))
    }

    /// A guarded write of `records` that commits `offsets` (`{ group,
    /// offsets: [{ topic, partition, offset, metadata? }] }`, the input
    /// they were made from) in the same transaction of the term's epoch:
    /// the core's `write_with_offsets`. Its refusals (after a resign, bad
    /// offsets) are the core's, decided at this call.
    #[napi(
        ts_args_type = "records: OutRecord[], offsets: ConsumedOffsets",
        ts_return_type = "Promise<void>"
    )]
    pub fn write_with_offsets<'env>(
        &self,
        env: &'env Env,
        records: Unknown<'_>,
        offsets: Unknown<'_>,
    ) -> napi::Result<Object<'env>> {
        let out = out_records(env, &records)?;
        let offsets = consumed_offsets(env, &offsets)?;
        // On the JavaScript thread, as `write`: ordered with `resign()`.
        let write = Arc::clone(self.core(env)?).write_with_offsets_owned(out, offsets);
        promise(env, write, |env, ()| js(env, ()))
    }

    /// What consumer group `group` committed for `partitions` (`[{ topic,
    /// partitions: number[] }]`), in the order asked: the core's
    /// `committed_offsets` (read_committed; waits through a pending commit
    /// for at most one lease). Resolves with `{ topic, partition, offset,
    /// metadata }` objects, `offset` a `bigint` or `null`.
    #[napi(
        ts_args_type = "group: string, partitions: TopicPartitions[]",
        ts_return_type = "Promise<CommittedOffset[]>"
    )]
    pub fn committed_offsets<'env>(
        &self,
        env: &'env Env,
        group: Unknown<'_>,
        partitions: Unknown<'_>,
    ) -> napi::Result<Object<'env>> {
        let group = str_arg(env, &group, "group")?;
        let partitions = topic_partitions(env, &partitions)?;
        let leadership = Arc::clone(self.core(env)?);
        promise(
            env,
            async move { leadership.committed_offsets(&group, &partitions).await },
            committed_to_js,
        )
    }

    /// Gives the role up: the core stops renewing, supersedes the token,
    /// clears the lease and deregisters. Idempotent. From this call on,
    /// every `write` or `writeWithOffsets` of this leadership rejects with a `ResignedError`.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn resign<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        // Marked resigning here, before the promise's work runs (see `write`).
        let resign = Arc::clone(self.core(env)?).resign_owned();
        promise(env, resign, |env, ()| js(env, ()))
    }

    /// The member's events from now on, ending with the term.
    #[napi]
    pub fn events(&self, env: Env) -> napi::Result<NativeEventStream> {
        let l = self.core(&env)?;
        NativeEventStream::subscribe(l)
    }
}
