//! The one place where errors become JavaScript errors.
//!
//! # The classes
//!
//! The error classes are JavaScript classes (`lib/errors.js`), one per core
//! `ErrorKind`, each with the kind's stable name as its `code`:
//!
//! ```text
//! KrabkaError(Error)                 base; code: the kind's name
//! ├── FormatError                    FORMAT; .part
//! ├── EncodeError                    ENCODE; .part, .field
//! ├── InvalidArgumentError           INVALID_ARGUMENT; .field for argument checks
//! ├── FencedError                    FENCED
//! ├── TransientError                 TRANSIENT
//! ├── FatalError                     FATAL
//! ├── ResignedError                  RESIGNED
//! ├── CancelledError                 CANCELLED
//! ├── LeaseExpiredError              LEASE_EXPIRED
//! └── OutcomeUnknownError            OUTCOME_UNKNOWN
//! ```
//!
//! The package's loader hands this module a factory
//! (`_registerErrorFactory`) that builds an instance from an [`ErrorSpec`]:
//! the code, the message, the record part and field, and the cause. This
//! module chooses the code by `Error::kind()`, never by message text (a kind
//! this binding does not know yet gets its name as the code and the base
//! class), and rebuilds the Rust `source()` chain as the `cause` chain: a
//! link that is a core error is mapped by its own kind, any other link
//! becomes a plain `Error` carrying its message.
//!
//! Argument refusals of the shared crate ([`arg_napi`]) carry the code
//! `INVALID_ARGUMENT` and the argument's snake_case name as `field`; each is
//! an `InvalidArgumentError` ([`ErrorSpec::class`] still says whether it was
//! a wrong type, an integer too wide for a record field, or another value,
//! for the package to word nothing differently: every refusal is one class).

use std::cell::RefCell;
use std::error::Error as StdError;

use krabka_coordination::{Error, ErrorKind, SharedError};
use krabka_coordination_bindings::errors::{argument_field, details, message, Caller};
use krabka_coordination_bindings::{ArgError, ArgErrorKind};
use napi::bindgen_prelude::{Function, FunctionRef, Object, ToNapiValue, Unknown};
use napi::{sys, Env, JsValue};
use napi_derive::napi;

/// What the error factory is asked to build.
pub struct ErrorSpec {
    /// The stable code: a core kind's name (`FENCED`).
    pub code: &'static str,
    /// Which JavaScript class: `"kind"` (the class of `code`), `"type"`
    /// (a `TypeError`) or `"range"` (a `RangeError`).
    pub class: &'static str,
    /// The message.
    pub message: String,
    /// The record part of a format or encode error.
    pub part: Option<&'static str>,
    /// The field of an encode error or an argument refusal.
    pub field: Option<String>,
    /// The cause, already a JavaScript value.
    pub cause: Option<sys::napi_value>,
}

impl ToNapiValue for ErrorSpec {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let env = Env::from_raw(env);
        let mut spec = Object::new(&env)?;
        spec.set("code", val.code)?;
        spec.set("class", val.class)?;
        spec.set("message", val.message)?;
        if let Some(part) = val.part {
            spec.set("part", part)?;
        }
        if let Some(field) = val.field {
            spec.set("field", field)?;
        }
        if let Some(cause) = val.cause {
            // SAFETY: a value of this env, made in this call's scope.
            let cause = unsafe { Unknown::from_raw_unchecked(env.raw(), cause) };
            spec.set("cause", cause)?;
        }
        // SAFETY: the object was made in this env.
        unsafe { ToNapiValue::to_napi_value(env.raw(), spec) }
    }
}

type Factory = FunctionRef<ErrorSpec, Unknown<'static>>;

thread_local! {
    /// The factory of this thread's environment (the main thread's, or a
    /// worker's: each loads the addon in its own environment).
    static FACTORY: RefCell<Option<Factory>> = const { RefCell::new(None) };
}

/// Registers the function that builds error objects (see the module
/// documentation). Called once by the package's loader.
#[napi(js_name = "_registerErrorFactory", skip_typescript)]
pub fn register_error_factory(factory: Function<ErrorSpec, Unknown<'static>>) -> napi::Result<()> {
    let factory = factory.create_ref()?;
    FACTORY.with(|f| *f.borrow_mut() = Some(factory));
    Ok(())
}

/// Builds the error of `spec` as a JavaScript value: through the factory,
/// or, when none is registered (the addon loaded on its own), a plain
/// `Error` with the code.
fn build(env: &Env, spec: ErrorSpec) -> napi::Result<sys::napi_value> {
    let made = FACTORY.with(|f| -> Option<napi::Result<sys::napi_value>> {
        let f = f.borrow();
        let factory = f.as_ref()?;
        Some(
            factory
                .borrow_back(env)
                .and_then(|func| func.call(spec_clone(&spec)))
                .map(|v| v.raw()),
        )
    });
    match made {
        Some(result) => result,
        None => {
            let mut e = env.create_error(napi::Error::from_reason(spec.message))?;
            e.set("code", spec.code)?;
            if let Some(field) = spec.field {
                e.set("field", field)?;
            }
            if let Some(part) = spec.part {
                e.set("part", part)?;
            }
            Ok(e.raw())
        }
    }
}

fn spec_clone(s: &ErrorSpec) -> ErrorSpec {
    ErrorSpec {
        code: s.code,
        class: s.class,
        message: s.message.clone(),
        part: s.part,
        field: s.field.clone(),
        cause: s.cause,
    }
}

/// The JavaScript error of a core error: the class of its kind, `code`, the
/// part and field of a format or encode error, and the cause chain.
pub fn error_value(env: &Env, e: &Error) -> napi::Result<sys::napi_value> {
    let d = details(e);
    let cause = match e.source() {
        Some(source) => Some(cause_value(env, source)?),
        None => None,
    };
    build(
        env,
        ErrorSpec {
            code: kind_code(d.kind),
            class: "kind",
            message: message(e, Caller::Node),
            part: d.part,
            field: d.field.or_else(|| argument_field(e)).map(str::to_owned),
            cause,
        },
    )
}

/// The stable code of a kind: its name.
pub fn kind_code(kind: ErrorKind) -> &'static str {
    kind.name()
}

/// One link of a cause chain (see the module documentation).
fn cause_value(env: &Env, cause: &(dyn StdError + 'static)) -> napi::Result<sys::napi_value> {
    if let Some(core) = cause.downcast_ref::<Error>() {
        return error_value(env, core);
    }
    if let Some(SharedError(core)) = cause.downcast_ref::<SharedError>() {
        return error_value(env, core);
    }
    let next = match cause.source() {
        Some(next) => Some(cause_value(env, next)?),
        None => None,
    };
    build(
        env,
        ErrorSpec {
            code: "",
            class: "plain",
            message: message(cause, Caller::Node),
            part: None,
            field: None,
            cause: next,
        },
    )
}

/// A `napi::Error` that throws (or rejects with) the JavaScript error of `e`.
pub fn to_napi(env: &Env, e: &Error) -> napi::Error {
    match error_value(env, e) {
        // SAFETY: a value of this env.
        Ok(v) => napi::Error::from(unsafe { Unknown::from_raw_unchecked(env.raw(), v) }),
        Err(made) => made,
    }
}

/// The JavaScript error of an argument refusal of the shared crate (see the
/// module documentation).
pub fn arg_value(env: &Env, e: ArgError) -> napi::Result<sys::napi_value> {
    let class = match e.kind {
        ArgErrorKind::Type => "type",
        ArgErrorKind::Overflow => "range",
        ArgErrorKind::Value => "kind",
    };
    let message = match e.kind {
        // Worded like every other core refusal.
        ArgErrorKind::Value => message(&Error::from(e.clone()), Caller::Node),
        _ => e.message.clone(),
    };
    build(
        env,
        ErrorSpec {
            code: kind_code(ErrorKind::InvalidArgument),
            class,
            message,
            part: None,
            field: Some(e.field),
            cause: None,
        },
    )
}

/// A `napi::Error` that throws an `InvalidArgumentError` with `message` as
/// it is and `field` set: a refusal worded by the core (a token's text) or
/// by this binding (an unknown option).
pub fn invalid_napi(env: &Env, field: &str, message: String) -> napi::Error {
    let made = build(
        env,
        ErrorSpec {
            code: kind_code(ErrorKind::InvalidArgument),
            class: "kind",
            message,
            part: None,
            field: Some(field.to_owned()),
            cause: None,
        },
    );
    match made {
        // SAFETY: a value of this env.
        Ok(v) => napi::Error::from(unsafe { Unknown::from_raw_unchecked(env.raw(), v) }),
        Err(made) => made,
    }
}

/// A `napi::Error` that throws the JavaScript error of an argument refusal.
pub fn arg_napi(env: &Env, e: ArgError) -> napi::Error {
    match arg_value(env, e) {
        // SAFETY: a value of this env.
        Ok(v) => napi::Error::from(unsafe { Unknown::from_raw_unchecked(env.raw(), v) }),
        Err(made) => made,
    }
}

/// Turns a result into a `napi::Result` through the one mapping.
pub trait OrThrow<T> {
    /// The result with the error mapped to its JavaScript error.
    fn or_throw(self, env: &Env) -> napi::Result<T>;
}

impl<T> OrThrow<T> for Result<T, Error> {
    fn or_throw(self, env: &Env) -> napi::Result<T> {
        self.map_err(|e| to_napi(env, &e))
    }
}

impl<T> OrThrow<T> for Result<T, krabka_coordination::FormatError> {
    fn or_throw(self, env: &Env) -> napi::Result<T> {
        self.map_err(|e| to_napi(env, &Error::Format(e)))
    }
}

impl<T> OrThrow<T> for Result<T, krabka_coordination::EncodeError> {
    fn or_throw(self, env: &Env) -> napi::Result<T> {
        self.map_err(|e| to_napi(env, &Error::Encode(e)))
    }
}

impl<T> OrThrow<T> for Result<T, ArgError> {
    fn or_throw(self, env: &Env) -> napi::Result<T> {
        self.map_err(|e| arg_napi(env, e))
    }
}

/// One entry of the error-kind table, for the package and its tests.
#[napi(object)]
pub struct ErrorKindInfo {
    /// The stable name, the `code` of its errors (`FENCED`).
    pub code: String,
    /// The kind's fixed numeric value in the core.
    pub value: u32,
    /// What the kind means (the same text in every binding).
    pub description: String,
    /// True when retrying the operation may succeed.
    pub retryable: bool,
}

/// The core's error kinds, in value order: each error's `code` is one of
/// these names (new kinds may be added).
#[napi]
pub fn error_kinds() -> Vec<ErrorKindInfo> {
    krabka_coordination_bindings::errors::KINDS
        .iter()
        .map(|k| ErrorKindInfo {
            code: k.name.to_owned(),
            value: k.kind as u32,
            description: k.description.to_owned(),
            retryable: k.retryable,
        })
        .collect()
}

/// Throws the JavaScript error the mapping makes of a core error of
/// `variant` (`format`, `encode`, `invalid_argument`, `fenced`, `resigned`,
/// `cancelled`, `transient`, `fatal`, `lease_expired`, `outcome_unknown`,
/// `shared`: a fatal error whose cause is a shared transient one).
/// Internal: tests the mapping of every kind and the cause chain.
#[napi(js_name = "_throwCoreError", skip_typescript)]
pub fn throw_core_error(env: Env, variant: String, message: String) -> napi::Result<()> {
    use krabka_coordination::{EncodeError, FormatError, Part};
    let err = match variant.as_str() {
        "format" => Error::Format(FormatError::new(Part::LeaseValue, message)),
        "encode" => Error::Encode(EncodeError {
            part: Part::Key,
            field: "role",
            message,
        }),
        "invalid_argument" => Error::InvalidArgument(message),
        "fenced" => Error::Fenced(message),
        "resigned" => Error::Resigned,
        "cancelled" => Error::Cancelled,
        "transient" => Error::transient(message, "the broker did not answer"),
        "fatal" => Error::fatal(
            message,
            std::io::Error::other("the topic has the wrong shape"),
        ),
        "lease_expired" => Error::LeaseExpired(message),
        "outcome_unknown" => Error::OutcomeUnknown {
            context: message,
            source: Box::new(Error::Fenced("newer epoch".to_owned())),
        },
        "shared" => Error::fatal(
            message,
            SharedError(std::sync::Arc::new(Error::transient(
                "renewing",
                "the broker did not answer",
            ))),
        ),
        other => {
            return Err(napi::Error::from_reason(format!(
                "unknown variant {other:?}"
            )))
        }
    };
    Err(to_napi(&env, &err))
}
