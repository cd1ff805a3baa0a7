//! The value classes: `Key`, `Registration`, `Lease`, `FencingToken`.
//!
//! Each wraps the core's own type and nothing else, so equality and (for
//! `FencingToken`) order are the core's trait implementations, and encoding
//! hands the wrapped value to the core as it is. The classes are immutable:
//! every field is a getter, made into a JavaScript value when read. Every
//! `i64` (a producer id, a timestamp) is a `bigint`.

use std::cmp::Ordering;

use krabka_coordination as core;
use krabka_coordination_bindings::ArgError;
use napi::bindgen_prelude::{validate_type_tag, BigInt, JavaScriptClassExt, TypeTag, Unknown};
use napi::{sys, Env, JsValue, ValueType};
use napi_derive::napi;

use crate::convert::{int_arg, str_arg, type_name, I16, I64};
use crate::error::arg_napi;

/// The instance of class `T` in `v`, or `None` for any other value: an
/// `instanceof` check, then N-API's type tag (which a prototype cannot
/// spoof), then the unwrap. The classes are immutable, so a shared borrow
/// for the length of the call needs no further tracking.
pub fn instance<'a, T>(env: &Env, v: &Unknown<'_>) -> Option<&'a T>
where
    T: JavaScriptClassExt + TypeTag + 'static,
{
    if v.get_type().ok()? != ValueType::Object || !T::instance_of(env, v).ok()? {
        return None;
    }
    // SAFETY: an object value of this env; the tag check below makes sure
    // the wrapped pointer is a `T` before it is read.
    unsafe {
        validate_type_tag(env.raw(), v.raw(), &T::type_tag(), "").ok()?;
        let mut wrapped: *mut std::ffi::c_void = std::ptr::null_mut();
        if sys::napi_unwrap(env.raw(), v.raw(), &mut wrapped) != sys::Status::napi_ok
            || wrapped.is_null()
        {
            return None;
        }
        Some(&*(wrapped as *const T))
    }
}

/// The instance of class `T` in `v`, or a `TypeError` naming `field`
/// (`token must be a FencingToken, got object`).
pub fn instance_arg<'a, T: JavaScriptClassExt + TypeTag + 'static>(
    env: &Env,
    v: &Unknown<'_>,
    field: &str,
    class: &str,
) -> napi::Result<&'a T> {
    instance(env, v).ok_or_else(|| {
        arg_napi(
            env,
            ArgError::wrong_type(field, &format!("a {class}"), &type_name(v)),
        )
    })
}

/// A JSON-style string literal, for `toString()`.
fn quote(s: &str) -> String {
    format!("{s:?}")
}

/// The key of a state record: a registration key (role and member) or a
/// lease key (role only). Made by `Key.registration` and `Key.lease`, or
/// by `decodeKey`.
#[napi]
#[derive(Debug, Clone)]
pub struct Key {
    pub(crate) inner: core::Key,
}

#[napi]
impl Key {
    /// The registration key of `member` in `role`.
    #[napi(factory, ts_args_type = "role: string, member: string")]
    pub fn registration(env: Env, role: Unknown<'_>, member: Unknown<'_>) -> napi::Result<Key> {
        Ok(Key {
            inner: core::Key::registration(
                str_arg(&env, &role, "role")?,
                str_arg(&env, &member, "member")?,
            ),
        })
    }

    /// The lease key of `role`.
    #[napi(factory, ts_args_type = "role: string")]
    pub fn lease(env: Env, role: Unknown<'_>) -> napi::Result<Key> {
        Ok(Key {
            inner: core::Key::lease(str_arg(&env, &role, "role")?),
        })
    }

    /// `'registration'` or `'lease'`.
    #[napi(getter, ts_return_type = "'registration' | 'lease'")]
    pub fn kind(&self) -> &'static str {
        self.inner.kind.as_str()
    }

    /// The role name.
    #[napi(getter)]
    pub fn role(&self) -> String {
        self.inner.role.clone()
    }

    /// The member id of a registration key; `''` for a lease key.
    #[napi(getter)]
    pub fn member(&self) -> String {
        self.inner.member.clone()
    }

    /// True when `other` is a `Key` of the same kind, role and member.
    #[napi(ts_args_type = "other: unknown")]
    pub fn equals(&self, env: Env, other: Unknown<'_>) -> bool {
        instance::<Key>(&env, &other).is_some_and(|o| o.inner == self.inner)
    }

    /// `Key.registration("role", "member")` or `Key.lease("role")`.
    #[napi(js_name = "toString")]
    pub fn to_js_string(&self) -> String {
        match self.inner.kind {
            core::KeyKind::Registration => format!(
                "Key.registration({}, {})",
                quote(&self.inner.role),
                quote(&self.inner.member)
            ),
            core::KeyKind::Lease => format!("Key.lease({})", quote(&self.inner.role)),
        }
    }
}

/// The value of a registration record.
#[napi]
#[derive(Debug, Clone)]
pub struct Registration {
    pub(crate) inner: core::Registration,
}

#[napi]
impl Registration {
    /// A registration of `member` at `registeredAt` (epoch milliseconds, an
    /// i64: a `bigint`, or a `number` that is a safe integer).
    #[napi(constructor, ts_args_type = "member: string, registeredAt: bigint | number")]
    pub fn new(env: Env, member: Unknown<'_>, registered_at: Unknown<'_>) -> napi::Result<Self> {
        Ok(Registration {
            inner: core::Registration {
                member: str_arg(&env, &member, "member")?,
                registered_at: int_arg(&env, &registered_at, "registered_at", I64)?,
            },
        })
    }

    /// The registering member.
    #[napi(getter)]
    pub fn member(&self) -> String {
        self.inner.member.clone()
    }

    /// When the member registered, in epoch milliseconds.
    #[napi(getter)]
    pub fn registered_at(&self) -> BigInt {
        BigInt::from(self.inner.registered_at)
    }

    /// True when `other` is a `Registration` with the same fields.
    #[napi(ts_args_type = "other: unknown")]
    pub fn equals(&self, env: Env, other: Unknown<'_>) -> bool {
        instance::<Registration>(&env, &other).is_some_and(|o| o.inner == self.inner)
    }

    /// `Registration("member", 1767225600000n)`.
    #[napi(js_name = "toString")]
    pub fn to_js_string(&self) -> String {
        format!(
            "Registration({}, {}n)",
            quote(&self.inner.member),
            self.inner.registered_at
        )
    }
}

/// The value of a lease record.
#[napi]
#[derive(Debug, Clone)]
pub struct Lease {
    pub(crate) inner: core::Lease,
}

#[napi]
impl Lease {
    /// A lease of `member` under `token`, written at `grantedAt` and running
    /// to `deadline` (epoch milliseconds of the holder's clock, i64s).
    #[napi(
        constructor,
        ts_args_type = "member: string, token: FencingToken, grantedAt: bigint | number, deadline: bigint | number"
    )]
    pub fn new(
        env: Env,
        member: Unknown<'_>,
        token: Unknown<'_>,
        granted_at: Unknown<'_>,
        deadline: Unknown<'_>,
    ) -> napi::Result<Self> {
        let member = str_arg(&env, &member, "member")?;
        let token = instance_arg::<FencingToken>(&env, &token, "token", "FencingToken")?.inner;
        Ok(Lease {
            inner: core::Lease {
                member,
                token,
                granted_at: int_arg(&env, &granted_at, "granted_at", I64)?,
                deadline: int_arg(&env, &deadline, "deadline", I64)?,
            },
        })
    }

    /// The member that holds the lease.
    #[napi(getter)]
    pub fn member(&self) -> String {
        self.inner.member.clone()
    }

    /// The holder's fencing token.
    #[napi(getter)]
    pub fn token(&self) -> FencingToken {
        FencingToken {
            inner: self.inner.token,
        }
    }

    /// When the lease was written, in epoch milliseconds of the holder's clock.
    #[napi(getter)]
    pub fn granted_at(&self) -> BigInt {
        BigInt::from(self.inner.granted_at)
    }

    /// When a standby may stop waiting, in epoch milliseconds of the
    /// holder's clock.
    #[napi(getter)]
    pub fn deadline(&self) -> BigInt {
        BigInt::from(self.inner.deadline)
    }

    /// True when `other` is a `Lease` with the same fields.
    #[napi(ts_args_type = "other: unknown")]
    pub fn equals(&self, env: Env, other: Unknown<'_>) -> bool {
        instance::<Lease>(&env, &other).is_some_and(|o| o.inner == self.inner)
    }

    /// `Lease("member", FencingToken(4001n, 7), 1767225600000n, 1767225630000n)`.
    #[napi(js_name = "toString")]
    pub fn to_js_string(&self) -> String {
        format!(
            "Lease({}, {}, {}n, {}n)",
            quote(&self.inner.member),
            FencingToken {
                inner: self.inner.token
            }
            .to_js_string(),
            self.inner.granted_at,
            self.inner.deadline
        )
    }
}

/// The leadership token of a role: the producer id and producer epoch
/// Kafka's transaction coordinator minted for `transactional.id = <role>`.
///
/// Ordered by `producerId` first, then `producerEpoch` (the core's order):
/// the epoch is an i16 that Kafka answers by rotating to a fresh producer
/// id. `NO_EPOCH` ranks below every minted token.
#[napi]
#[derive(Debug, Clone, Copy)]
pub struct FencingToken {
    pub(crate) inner: core::FencingToken,
}

#[napi]
impl FencingToken {
    /// A token of `producerId` (an i64: a `bigint`, or a `number` that is a
    /// safe integer) and `producerEpoch` (an i16 `number`).
    #[napi(
        constructor,
        ts_args_type = "producerId: bigint | number, producerEpoch: number"
    )]
    pub fn new(env: Env, producer_id: Unknown<'_>, producer_epoch: Unknown<'_>) -> napi::Result<Self> {
        Ok(FencingToken {
            inner: core::FencingToken::new(
                int_arg(&env, &producer_id, "producer_id", I64)?,
                int_arg(&env, &producer_epoch, "producer_epoch", I16)? as i16,
            ),
        })
    }

    /// The producer id the coordinator assigned to the transactional id.
    #[napi(getter)]
    pub fn producer_id(&self) -> BigInt {
        BigInt::from(self.inner.producer_id)
    }

    /// The producer epoch within that producer id.
    #[napi(getter)]
    pub fn producer_epoch(&self) -> i32 {
        i32::from(self.inner.producer_epoch)
    }

    /// -1, 0 or 1 as this token is older than, the same as, or newer than
    /// `other`: producer id first, then epoch. Usable as a sort comparator.
    #[napi(ts_args_type = "other: FencingToken", ts_return_type = "-1 | 0 | 1")]
    pub fn compare(&self, env: Env, other: Unknown<'_>) -> napi::Result<i32> {
        let other = instance_arg::<FencingToken>(&env, &other, "other", "FencingToken")?;
        Ok(match self.inner.cmp(&other.inner) {
            Ordering::Less => -1,
            Ordering::Equal => 0,
            Ordering::Greater => 1,
        })
    }

    /// True when `other` is a `FencingToken` with the same producer id and
    /// epoch.
    #[napi(ts_args_type = "other: unknown")]
    pub fn equals(&self, env: Env, other: Unknown<'_>) -> bool {
        instance::<FencingToken>(&env, &other).is_some_and(|o| o.inner == self.inner)
    }

    /// True for `NO_EPOCH`, the token of a role no member has taken.
    #[napi(getter)]
    pub fn is_no_epoch(&self) -> bool {
        self.inner.is_no_epoch()
    }

    /// `FencingToken(4001n, 7)`.
    #[napi(js_name = "toString")]
    pub fn to_js_string(&self) -> String {
        format!(
            "FencingToken({}n, {})",
            self.inner.producer_id, self.inner.producer_epoch
        )
    }
}

/// The core's `NO_EPOCH`. Internal: the package exports it as `NO_EPOCH`.
#[napi(js_name = "_noEpoch", skip_typescript)]
pub fn no_epoch() -> FencingToken {
    FencingToken {
        inner: core::NO_EPOCH,
    }
}
