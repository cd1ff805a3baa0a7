//! `oauth_token=`: a Python callable as the core's OAUTHBEARER token
//! provider (`KafkaConfig::with_oauth_token_provider`).
//!
//! The callable takes no argument and returns `(token, expiry)` or
//! `(token, expiry, principal)`: the token (`str`), when it expires in
//! seconds since the Unix epoch (`int` or `float`, as `time.time() + 3600`
//! writes it) and the principal it names (`str`, for the clients' logs),
//! the shape confluent-kafka's `oauth_cb` returns. Everything else is the
//! core's: when it is called (a client's first connect, then half-way
//! through each token's life, shared by every client of the `Client`), what
//! a token may hold, and how a failure is reported.
//!
//! It is called on a background thread (librdkafka's, or the runtime's
//! blocking pool) with the GIL taken; the blocking calls of `Client`
//! release the GIL while they wait, so it never waits for itself. An
//! exception it raises becomes the core's error for the provider:
//! `TransientError` with the exception as `__cause__`, or `FatalError` when
//! it raised `FatalError`. A return value of another shape is an
//! `InvalidArgumentError` naming `oauth_token`.

use krabka_coordination::transport::kafka::{OAuthToken, OAuthTokenError};
use krabka_coordination::Error;
use krabka_coordination_bindings::args::{self, ArgError};
use krabka_coordination_bindings::Field;
use pyo3::prelude::*;
use pyo3::types::{PyFloat, PyString, PyTuple};

use crate::convert::{is_int, type_name};
use crate::error::{arg_error, Exc};

/// What the callable must return, as messages say it.
const RETURNS: &str =
    "a callable returning (token: str, expiry: seconds since the epoch) or (token, expiry, principal: str)";

/// The token provider of `callable`, checked to be callable.
pub fn token_provider(
    callable: &Bound<'_, PyAny>,
) -> PyResult<impl Fn() -> Result<OAuthToken, OAuthTokenError> + Send + Sync + 'static> {
    let field = Field::OAuthToken.name();
    if !callable.is_callable() {
        return Err(arg_error(
            callable.py(),
            ArgError::wrong_type(field, RETURNS, &type_name(callable)),
        ));
    }
    let callable = callable.clone().unbind();
    Ok(move || {
        crate::exit::attach(|py| call(py, callable.bind(py)))
            .unwrap_or_else(|| Err("the Python interpreter is shutting down".into()))
    })
}

/// Calls the provider and translates what it returned or raised.
fn call(py: Python<'_>, callable: &Bound<'_, PyAny>) -> Result<OAuthToken, OAuthTokenError> {
    let returned = match callable.call0() {
        Ok(r) => r,
        Err(e) => {
            let fatal = Exc::Fatal
                .type_object(py)
                .is_ok_and(|fatal| e.is_instance(py, &fatal));
            return Err(if fatal {
                Box::new(Error::fatal("the oauth_token callable raised", e))
            } else {
                Box::new(e)
            });
        }
    };
    token(&returned).map_err(|e| Box::new(Error::from(e)) as OAuthTokenError)
}

/// `(token, expiry[, principal])` as a token.
fn token(returned: &Bound<'_, PyAny>) -> Result<OAuthToken, ArgError> {
    let field = format!("the return value of {}", Field::OAuthToken.name());
    let wrong = || ArgError::wrong_type(&field, RETURNS, &type_name(returned));
    let tuple = returned.cast::<PyTuple>().map_err(|_| wrong())?;
    if !(2..=3).contains(&tuple.len()) {
        return Err(ArgError::invalid(
            &field,
            "a tuple of 2 or 3 items (token, expiry[, principal])",
            format!("{} items", tuple.len()),
        ));
    }
    let item = |i: usize| tuple.get_item(i).map_err(|_| wrong());
    let value = item(0)?;
    let value = value
        .cast::<PyString>()
        .ok()
        .and_then(|s| s.to_cow().ok().map(|c| c.into_owned()))
        .ok_or_else(|| ArgError::wrong_type("the token", "a str", &type_name(&value)))?;
    let expiry = item(1)?;
    if !(is_int(&expiry) || expiry.is_instance_of::<PyFloat>()) {
        return Err(ArgError::wrong_type(
            "the token's expiry",
            "a number of seconds since the epoch",
            &type_name(&expiry),
        ));
    }
    let expires_at = args::epoch_seconds(
        "the token's expiry",
        expiry.extract::<f64>().unwrap_or(f64::INFINITY),
    )?;
    let mut token = OAuthToken::new(value, expires_at);
    if tuple.len() == 3 {
        let principal = item(2)?;
        let principal = principal
            .cast::<PyString>()
            .ok()
            .and_then(|s| s.to_cow().ok().map(|c| c.into_owned()))
            .ok_or_else(|| {
                ArgError::wrong_type("the token's principal", "a str", &type_name(&principal))
            })?;
        token = token.with_principal(principal);
    }
    Ok(token)
}
