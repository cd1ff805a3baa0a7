//! `oauthToken`: a JavaScript function as the core's OAUTHBEARER token
//! provider (`KafkaConfig::with_oauth_token_provider`).
//!
//! The function takes no argument and returns (or resolves with) `{ token,
//! expiresAt, principal? }`: the token (a string), when it expires (a
//! `Date`, or milliseconds since the Unix epoch, as `Date.now() + 3600_000`
//! writes it) and the principal it names (a string, for the clients' logs):
//! Python's `(token, expiry[, principal])` as a JavaScript object. SASL
//! extensions are refused: the core sends none. Everything else is the
//! core's: when it is called (a client's first connect, then half-way
//! through each token's life, shared by every client of the `Client`), what
//! a token may hold, and how a failure is reported.
//!
//! The core calls its provider on background threads (a refresher thread,
//! librdkafka's threads, the runtime's blocking pool) and waits for the
//! token there. The provider here hands a `_TokenRequest` to the JavaScript
//! thread through a thread-safe function (weak: it never keeps the process
//! alive) and waits for the package's wrapper (`lib/client.js`) to settle
//! it with the function's value or rejection, at most the client's connect
//! timeout. A rejection becomes the core's error for the provider, with the
//! rejection's message: `TransientError`, or `FatalError` when it rejected
//! with the package's `FatalError`. A value of another shape is an
//! `InvalidArgumentError` naming it. The provider never runs on the
//! JavaScript thread itself (it could not wait there for a promise): such a
//! call fails at once.

use std::fmt;
use std::sync::mpsc::{sync_channel, RecvTimeoutError, SyncSender};
use std::sync::Mutex;
use std::thread::ThreadId;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use krabka_coordination::transport::kafka::{OAuthToken, OAuthTokenError};
use krabka_coordination::Error;
use krabka_coordination_bindings::args::ArgError;
use krabka_coordination_bindings::Field;
use napi::bindgen_prelude::{Function, Object, Unknown};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, JsValue, Status, ValueType};
use napi_derive::napi;

use crate::convert::{is_nullish, prop, type_name};

/// What the function must resolve with, as messages say it.
const RETURNS: &str =
    "an object { token: string, expiresAt: Date or milliseconds since the epoch, principal?: string }";

type Answer = Result<OAuthToken, OAuthTokenError>;

/// The function's rejection, as the cause of the core's error.
#[derive(Debug)]
struct Rejected(String);

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the oauth_token function rejected: {}", self.0)
    }
}

impl std::error::Error for Rejected {}

/// One call of the provider, settled on the JavaScript thread. Internal:
/// the package's wrapper of the `oauthToken` function settles it.
#[napi(js_name = "_TokenRequest")]
pub struct TokenRequest {
    reply: Mutex<Option<SyncSender<Answer>>>,
}

impl TokenRequest {
    fn answer(&self, answer: Answer) {
        if let Some(tx) = self.reply.lock().unwrap_or_else(|e| e.into_inner()).take() {
            // The provider may have given up waiting (its timeout).
            let _ = tx.try_send(answer);
        }
    }
}

#[napi]
impl TokenRequest {
    /// Settles the request with the function's value (checked here).
    /// Only the first settlement counts.
    #[napi(ts_args_type = "value: unknown")]
    pub fn resolve(&self, env: Env, value: Unknown<'_>) -> napi::Result<()> {
        let answer = token(&env, &value).map_err(|e| Box::new(Error::from(e)) as OAuthTokenError);
        self.answer(answer);
        Ok(())
    }

    /// Settles the request with the function's rejection: its `message`,
    /// and whether it was the package's `FatalError`.
    #[napi]
    pub fn reject(&self, message: String, fatal: bool) {
        let answer: OAuthTokenError = if fatal {
            Box::new(Error::fatal(
                "the oauth_token function rejected",
                std::io::Error::other(message),
            ))
        } else {
            Box::new(Rejected(message))
        };
        self.answer(Err(answer));
    }
}

/// The thread-safe function that hands requests to the JavaScript thread:
/// weak (it keeps nothing alive), called without a leading error argument.
type Requests = ThreadsafeFunction<SyncSender<Answer>, (), TokenRequest, Status, false, true, 0>;

/// The core's token provider of `function` (the package's wrapper of the
/// `oauthToken` option), called from background threads; waits for an
/// answer at most `timeout`.
pub fn token_provider(
    function: &Function<'_, TokenRequest, ()>,
    timeout: Duration,
) -> napi::Result<impl Fn() -> Answer + Send + Sync + 'static> {
    let requests: Requests = function
        .build_threadsafe_function::<SyncSender<Answer>>()
        .weak::<true>()
        .callee_handled::<false>()
        .build_callback(|ctx| {
            Ok(TokenRequest {
                reply: Mutex::new(Some(ctx.value)),
            })
        })?;
    let js_thread: ThreadId = std::thread::current().id();
    Ok(move || {
        if std::thread::current().id() == js_thread {
            return Err(
                "the oauth_token function cannot be called on the JavaScript thread (it could not wait there for its promise)".into(),
            );
        }
        let (tx, rx) = sync_channel(1);
        let status = requests.call(tx, ThreadsafeFunctionCallMode::NonBlocking);
        if status != Status::Ok {
            return Err(format!(
                "the oauth_token function could not be called: the JavaScript environment is gone ({status})"
            )
            .into());
        }
        match rx.recv_timeout(timeout) {
            Ok(answer) => answer,
            Err(RecvTimeoutError::Timeout) => Err(format!(
                "the oauth_token function did not settle within {} (the connect timeout)",
                krabka_coordination::human::duration(timeout)
            )
            .into()),
            Err(RecvTimeoutError::Disconnected) => Err(
                "the oauth_token function's request was dropped unanswered (the JavaScript environment is going away)".into(),
            ),
        }
    })
}

fn string_field(
    env: &Env,
    o: &Object<'_>,
    name: &str,
    field: &str,
) -> Result<Option<String>, ArgError> {
    let v = prop(Some(o), name).map_err(|e| ArgError::wrong_type(field, "a string", &e.reason))?;
    let Some(v) = v.filter(|v| !is_nullish(v)) else {
        return Ok(None);
    };
    if v.get_type().ok() != Some(ValueType::String) {
        return Err(ArgError::wrong_type(field, "a string", &type_name(&v)));
    }
    // SAFETY: a string value of this env.
    unsafe { <String as napi::bindgen_prelude::FromNapiValue>::from_napi_value(env.raw(), v.raw()) }
        .map(Some)
        .map_err(|e| ArgError::wrong_type(field, "a string", &e.reason))
}

/// `{ token, expiresAt, principal? }` as a token.
fn token(env: &Env, value: &Unknown<'_>) -> Result<OAuthToken, ArgError> {
    let field = format!("the value of {}", Field::OAuthToken.name());
    if value.get_type().ok() != Some(ValueType::Object) || value.is_array().unwrap_or(false) {
        return Err(ArgError::wrong_type(&field, RETURNS, &type_name(value)));
    }
    // SAFETY: an object value of this env.
    let o = unsafe { value.cast::<Object<'_>>() }
        .map_err(|e| ArgError::wrong_type(&field, RETURNS, &e.reason))?;
    for name in Object::keys(&o).unwrap_or_default() {
        if !matches!(name.as_str(), "token" | "expiresAt" | "principal") {
            let why = if name == "extensions" {
                "SASL extensions are not supported: the core sends none"
            } else {
                "the fields are token, expiresAt and principal"
            };
            return Err(ArgError::invalid(
                &field,
                &format!("{RETURNS} ({why})"),
                format!("a field {name:?}"),
            ));
        }
    }
    let Some(text) = string_field(env, &o, "token", "the token")? else {
        return Err(ArgError::wrong_type("the token", "a string", "undefined"));
    };
    let expires_at = expiry(&o)?;
    let mut token = OAuthToken::new(text, expires_at);
    if let Some(principal) = string_field(env, &o, "principal", "the token's principal")? {
        token = token.with_principal(principal);
    }
    Ok(token)
}

/// `expiresAt`: a `Date` or milliseconds since the epoch.
fn expiry(o: &Object<'_>) -> Result<SystemTime, ArgError> {
    let field = "the token's expiry";
    let expected = "a Date or a number of milliseconds since the epoch";
    let v = prop(Some(o), "expiresAt")
        .map_err(|e| ArgError::wrong_type(field, expected, &e.reason))?
        .ok_or_else(|| ArgError::wrong_type(field, expected, "undefined"))?;
    let ms = if v.get_type().ok() == Some(ValueType::Number) {
        // SAFETY: a number value.
        unsafe {
            <f64 as napi::bindgen_prelude::FromNapiValue>::from_napi_value(v.value().env, v.raw())
        }
        .map_err(|e| ArgError::wrong_type(field, expected, &e.reason))?
    } else if v.is_date().unwrap_or(false) {
        // SAFETY: a Date value.
        let date = unsafe { v.cast::<napi::JsDate<'_>>() }
            .map_err(|e| ArgError::wrong_type(field, expected, &e.reason))?;
        date.value_of()
            .map_err(|e| ArgError::wrong_type(field, expected, &e.reason))?
    } else {
        return Err(ArgError::wrong_type(field, expected, &type_name(&v)));
    };
    let requirement = "a time after the Unix epoch, in milliseconds";
    if !ms.is_finite() || ms <= 0.0 {
        return Err(ArgError::invalid(
            field,
            requirement,
            krabka_coordination_bindings::args::number(ms),
        ));
    }
    Duration::try_from_secs_f64(ms / 1000.0)
        .ok()
        .and_then(|d| UNIX_EPOCH.checked_add(d))
        .ok_or_else(|| {
            ArgError::invalid(
                field,
                requirement,
                krabka_coordination_bindings::args::number(ms),
            )
        })
}
