//! The value classes `Key`, `Registration`, `Lease` and `FencingToken`,
//! between JavaScript and the core.
//!
//! The classes themselves are plain, frozen JavaScript objects
//! (`lib/values.js`): reading a field is a property read, with no call into
//! the addon (a napi class getter costs about a microsecond). Everything
//! they do that is a rule is here, on the core's types:
//!
//! * their constructors' argument checks (`_tokenArgs`, `_keyArgs`, ...),
//!   with the shared crate's wording;
//! * the order of tokens (`_compareTokens`: the core's `Ord`, producer id
//!   first);
//! * the making of values from core values: through the factories the
//!   package registers (`_registerFactories`), so a decoded lease is built
//!   with one call back into JavaScript and no argument re-checking;
//! * reading a value back into the core type ([`token_from_js`], ...) for
//!   encoding, describing and comparing.
//!
//! Every `i64` (a producer id, a timestamp) is a `bigint`.

use std::cell::RefCell;
use std::cmp::Ordering;

use krabka_coordination as core;
use napi::bindgen_prelude::{
    BigInt, FnArgs, Function, FunctionRef, JsObjectValue, Object, Unknown,
};
use napi::{sys, Env, JsValue, ValueType};
use napi_derive::napi;

use krabka_coordination_bindings::ArgError;

use crate::convert::{int_arg, str_arg, type_name, I16, I64};
use crate::error::{arg_napi, invalid_napi};

type TokenArgs = FnArgs<(BigInt, i32)>;
type KeyArgs = FnArgs<(&'static str, String, String)>;
type RegistrationArgs = FnArgs<(String, BigInt)>;
type LeaseArgs = FnArgs<(String, BigInt, i32, BigInt, BigInt)>;

/// The factories of one environment (see the module documentation).
struct Factories {
    token: FunctionRef<TokenArgs, Unknown<'static>>,
    key: FunctionRef<KeyArgs, Unknown<'static>>,
    registration: FunctionRef<RegistrationArgs, Unknown<'static>>,
    lease: FunctionRef<LeaseArgs, Unknown<'static>>,
}

thread_local! {
    static FACTORIES: RefCell<Option<Factories>> = const { RefCell::new(None) };
}

/// Registers the functions that make value objects from checked fields.
/// Called once by the package's loader.
#[napi(js_name = "_registerFactories", skip_typescript)]
pub fn register_factories(
    token: Function<TokenArgs, Unknown<'static>>,
    key: Function<KeyArgs, Unknown<'static>>,
    registration: Function<RegistrationArgs, Unknown<'static>>,
    lease: Function<LeaseArgs, Unknown<'static>>,
) -> napi::Result<()> {
    let made = Factories {
        token: token.create_ref()?,
        key: key.create_ref()?,
        registration: registration.create_ref()?,
        lease: lease.create_ref()?,
    };
    FACTORIES.with(|f| *f.borrow_mut() = Some(made));
    Ok(())
}

fn with_factories<R>(f: impl FnOnce(&Factories) -> napi::Result<R>) -> napi::Result<R> {
    FACTORIES.with(|cell| match cell.borrow().as_ref() {
        Some(factories) => f(factories),
        None => Err(napi::Error::from_reason(
            "krabka-coordination: load the package (index.js), not the addon on its own",
        )),
    })
}

/// The JavaScript `FencingToken` of a core token.
pub fn token_to_js(env: &Env, t: core::FencingToken) -> napi::Result<sys::napi_value> {
    with_factories(|f| {
        let v = f
            .token
            .borrow_back(env)?
            .call((BigInt::from(t.producer_id), i32::from(t.producer_epoch)).into())?;
        Ok(v.raw())
    })
}

/// The JavaScript `Key` of a core key.
pub fn key_to_js(env: &Env, k: core::Key) -> napi::Result<sys::napi_value> {
    with_factories(|f| {
        let v = f
            .key
            .borrow_back(env)?
            .call((k.kind.as_str(), k.role, k.member).into())?;
        Ok(v.raw())
    })
}

/// The JavaScript `Registration` of a core registration.
pub fn registration_to_js(env: &Env, r: core::Registration) -> napi::Result<sys::napi_value> {
    with_factories(|f| {
        let v = f
            .registration
            .borrow_back(env)?
            .call((r.member, BigInt::from(r.registered_at)).into())?;
        Ok(v.raw())
    })
}

/// The JavaScript `Lease` of a core lease.
pub fn lease_to_js(env: &Env, l: core::Lease) -> napi::Result<sys::napi_value> {
    with_factories(|f| {
        let v = f.lease.borrow_back(env)?.call(
            (
                l.member,
                BigInt::from(l.token.producer_id),
                i32::from(l.token.producer_epoch),
                BigInt::from(l.granted_at),
                BigInt::from(l.deadline),
            )
                .into(),
        )?;
        Ok(v.raw())
    })
}

/// A value made by a factory, as a `napi` return value.
pub struct Made(pub sys::napi_value);

impl napi::bindgen_prelude::ToNapiValue for Made {
    unsafe fn to_napi_value(_env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        Ok(val.0)
    }
}

impl napi::bindgen_prelude::TypeName for Made {
    fn type_name() -> &'static str {
        "Object"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

fn field<'a>(obj: &Object<'a>, name: &str) -> napi::Result<Unknown<'a>> {
    obj.get_named_property(name)
}

fn object<'a>(env: &Env, v: &Unknown<'a>, field: &str, expected: &str) -> napi::Result<Object<'a>> {
    if v.get_type()? != ValueType::Object {
        return Err(arg_napi(
            env,
            ArgError::wrong_type(field, expected, &type_name(v)),
        ));
    }
    // SAFETY: an object value.
    unsafe { v.cast::<Object<'a>>() }
}

/// The core token of a JavaScript `FencingToken` (its class was checked by
/// the package; its fields are checked again here).
pub fn token_from_js(env: &Env, v: &Unknown<'_>) -> napi::Result<core::FencingToken> {
    let o = object(env, v, "token", "a FencingToken")?;
    Ok(core::FencingToken::new(
        int_arg(env, &field(&o, "producerId")?, "producer_id", I64)?,
        int_arg(env, &field(&o, "producerEpoch")?, "producer_epoch", I16)? as i16,
    ))
}

/// The core key of a JavaScript `Key`.
pub fn key_from_js(env: &Env, v: &Unknown<'_>) -> napi::Result<core::Key> {
    let o = object(env, v, "key", "a Key")?;
    let role = str_arg(env, &field(&o, "role")?, "role")?;
    let member = str_arg(env, &field(&o, "member")?, "member")?;
    let kind = str_arg(env, &field(&o, "kind")?, "kind")?;
    Ok(if kind == core::KeyKind::Lease.as_str() {
        core::Key::lease(role)
    } else {
        core::Key::registration(role, member)
    })
}

/// The core registration of a JavaScript `Registration`.
pub fn registration_from_js(env: &Env, v: &Unknown<'_>) -> napi::Result<core::Registration> {
    let o = object(env, v, "registration", "a Registration")?;
    Ok(core::Registration {
        member: str_arg(env, &field(&o, "member")?, "member")?,
        registered_at: int_arg(env, &field(&o, "registeredAt")?, "registered_at", I64)?,
    })
}

/// The core lease of a JavaScript `Lease`.
pub fn lease_from_js(env: &Env, v: &Unknown<'_>) -> napi::Result<core::Lease> {
    let o = object(env, v, "lease", "a Lease")?;
    Ok(core::Lease {
        member: str_arg(env, &field(&o, "member")?, "member")?,
        token: token_from_js(env, &field(&o, "token")?)?,
        granted_at: int_arg(env, &field(&o, "grantedAt")?, "granted_at", I64)?,
        deadline: int_arg(env, &field(&o, "deadline")?, "deadline", I64)?,
    })
}

/// The checked fields of `new FencingToken(producerId, producerEpoch)`:
/// `[producerId as bigint, producerEpoch]`.
#[napi(js_name = "_tokenArgs", skip_typescript)]
pub fn token_args(
    env: Env,
    producer_id: Unknown<'_>,
    producer_epoch: Unknown<'_>,
) -> napi::Result<(BigInt, i32)> {
    Ok((
        BigInt::from(int_arg(&env, &producer_id, "producer_id", I64)?),
        int_arg(&env, &producer_epoch, "producer_epoch", I16)? as i32,
    ))
}

/// The checked fields of `Key.registration(role, member)` (and of
/// `Key.lease(role)`, with the member `''`): `[role, member]`.
#[napi(js_name = "_keyArgs", skip_typescript)]
pub fn key_args(
    env: Env,
    role: Unknown<'_>,
    member: Unknown<'_>,
) -> napi::Result<(String, String)> {
    Ok((
        str_arg(&env, &role, "role")?,
        str_arg(&env, &member, "member")?,
    ))
}

/// The checked fields of `new Registration(member, registeredAt)`.
#[napi(js_name = "_registrationArgs", skip_typescript)]
pub fn registration_args(
    env: Env,
    member: Unknown<'_>,
    registered_at: Unknown<'_>,
) -> napi::Result<(String, BigInt)> {
    Ok((
        str_arg(&env, &member, "member")?,
        BigInt::from(int_arg(&env, &registered_at, "registered_at", I64)?),
    ))
}

/// The checked fields of `new Lease(member, token, grantedAt, deadline)`
/// but the token (whose class the package checks).
#[napi(js_name = "_leaseArgs", skip_typescript)]
pub fn lease_args(
    env: Env,
    member: Unknown<'_>,
    granted_at: Unknown<'_>,
    deadline: Unknown<'_>,
) -> napi::Result<(String, BigInt, BigInt)> {
    Ok((
        str_arg(&env, &member, "member")?,
        BigInt::from(int_arg(&env, &granted_at, "granted_at", I64)?),
        BigInt::from(int_arg(&env, &deadline, "deadline", I64)?),
    ))
}

/// The core's order of two tokens: -1, 0 or 1 (producer id first).
#[napi(js_name = "_compareTokens", skip_typescript)]
pub fn compare_tokens(env: Env, a: Unknown<'_>, b: Unknown<'_>) -> napi::Result<i32> {
    let (a, b) = (token_from_js(&env, &a)?, token_from_js(&env, &b)?);
    Ok(match a.cmp(&b) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    })
}

/// True for the core's `NO_EPOCH`.
#[napi(js_name = "_isNoEpoch", skip_typescript)]
pub fn is_no_epoch(env: Env, token: Unknown<'_>) -> napi::Result<bool> {
    Ok(token_from_js(&env, &token)?.is_no_epoch())
}

/// The core's `NO_EPOCH`. Internal: the package exports it as `NO_EPOCH`.
#[napi(js_name = "_noEpoch", skip_typescript)]
pub fn no_epoch(env: Env) -> napi::Result<Made> {
    token_to_js(&env, core::NO_EPOCH).map(Made)
}

/// A token argument: a `FencingToken`, or its wire form (`'4001/7'`,
/// `'NoEpoch'`) parsed by the core. Malformed text is an
/// `InvalidArgumentError` with the core's message and `field`.
pub fn token_arg(env: &Env, v: &Unknown<'_>, field: &str) -> napi::Result<core::FencingToken> {
    match v.get_type()? {
        ValueType::String => parse_text(env, &str_arg(env, v, field)?, field),
        ValueType::Object => token_from_js(env, v),
        _ => Err(arg_napi(
            env,
            ArgError::wrong_type(
                field,
                "a FencingToken or its text ('4001/7')",
                &type_name(v),
            ),
        )),
    }
}

fn parse_text(env: &Env, text: &str, field: &str) -> napi::Result<core::FencingToken> {
    text.parse::<core::FencingToken>()
        .map_err(|e| invalid_napi(env, field, e.to_string()))
}

/// The wire form of a token: the core's text (`4001/7`, `NoEpoch`).
#[napi(js_name = "_tokenText", skip_typescript)]
pub fn token_text(env: Env, token: Unknown<'_>) -> napi::Result<String> {
    Ok(token_from_js(&env, &token)?.to_string())
}

/// `FencingToken.parse(text)`: the token of a wire form, parsed by the core.
#[napi(js_name = "_parseToken", skip_typescript)]
pub fn parse_token(env: Env, text: Unknown<'_>) -> napi::Result<Made> {
    let text = str_arg(&env, &text, "text")?;
    let token = parse_text(&env, &text, "text")?;
    token_to_js(&env, token).map(Made)
}
