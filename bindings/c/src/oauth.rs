//! The OAUTHBEARER token callback of `krabka_client_options` as the core's
//! token provider (`KafkaConfig::with_oauth_token_provider`), as Python's
//! `oauth_token=` callable and Kotlin's `OAuthTokenProvider` are.
//!
//! The callback gets an opaque [`krabka_oauth_request`] and settles it
//! before it returns, with [`krabka_oauth_request_set_token`] (the token,
//! its expiry and the principal, copied) or [`krabka_oauth_request_fail`]
//! (a message, and whether no retry mends it). Everything past the
//! translation is the core's: when the callback is called (a client's first
//! connect, then half-way through each token's life, shared by every Kafka
//! client of the `krabka_client`, one call at a time), what a token may
//! hold, and how a failure is reported.
//!
//! The callback and its `user_data` may be used by the core as long as any
//! handle made with the client lives (a held leadership keeps its clients
//! after `krabka_client_free`); the optional `oauth_user_data_free` is
//! called once, when the last of them is gone, so that the caller knows
//! when `user_data` may go.

use std::ffi::{c_char, c_void};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use krabka_coordination::transport::kafka::{KafkaConfig, OAuthToken, OAuthTokenError};
use krabka_coordination::Error;
use krabka_coordination_bindings::args::ArgError;

use crate::ffi::{cstr, guard, krabka_error, krabka_result, Failure};

/// One call of the token callback (opaque), valid only during the call:
/// settle it once with `krabka_oauth_request_set_token` or
/// `krabka_oauth_request_fail` before the callback returns.
pub struct krabka_oauth_request {
    answer: Option<Result<OAuthToken, OAuthTokenError>>,
}

/// The OAUTHBEARER token callback: fetch a token (it may block, on an HTTP
/// request to the identity provider) and settle `request` before returning.
/// Called on a thread of the library's (never the caller's), one call at a
/// time per client.
pub type krabka_oauth_token_callback =
    Option<unsafe extern "C" fn(request: *mut krabka_oauth_request, user_data: *mut c_void)>;

/// Frees a callback's `user_data`: called once, when the library no longer
/// needs it.
pub type krabka_user_data_free = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// The caller's callback and its data.
struct Provider {
    callback: unsafe extern "C" fn(*mut krabka_oauth_request, *mut c_void),
    user_data: *mut c_void,
    free: krabka_user_data_free,
}

// SAFETY: the caller made the callback and `user_data` usable from any
// thread (the documented contract of `krabka_client_options.oauth_token`).
unsafe impl Send for Provider {}
// SAFETY: as above; the core calls the provider one call at a time.
unsafe impl Sync for Provider {}

impl Drop for Provider {
    fn drop(&mut self) {
        if let Some(free) = self.free {
            // SAFETY: the caller's function, with the caller's data, once.
            unsafe { free(self.user_data) };
        }
    }
}

impl Provider {
    fn token(&self) -> Result<OAuthToken, OAuthTokenError> {
        let mut request = krabka_oauth_request { answer: None };
        // SAFETY: the caller's callback, with a request valid for the call.
        unsafe { (self.callback)(&mut request, self.user_data) };
        request.answer.unwrap_or_else(|| {
            Err(Box::new(Error::InvalidArgument(
                "the oauth_token callback returned without settling its request \
                 (krabka_oauth_request_set_token or krabka_oauth_request_fail)"
                    .into(),
            )))
        })
    }
}

/// The caller's token callback, held (so that `free` is called once, when
/// the last holder is gone); `callback` NULL: none, and `free` is not
/// called.
pub(crate) struct TokenCallback(Option<Arc<Provider>>);

impl TokenCallback {
    /// Takes the caller's callback, data and destructor.
    pub(crate) fn new(
        callback: krabka_oauth_token_callback,
        user_data: *mut c_void,
        free: krabka_user_data_free,
    ) -> TokenCallback {
        TokenCallback(callback.map(|callback| {
            Arc::new(Provider {
                callback,
                user_data,
                free,
            })
        }))
    }

    /// `config` with the callback as its token provider (none: unchanged).
    pub(crate) fn apply(self, config: KafkaConfig) -> KafkaConfig {
        match self.0 {
            None => config,
            Some(provider) => config.with_oauth_token_provider(move || provider.token()),
        }
    }
}

/// The request to settle; a second settlement is refused.
unsafe fn open_request<'a>(
    request: *mut krabka_oauth_request,
) -> Result<&'a mut krabka_oauth_request, Failure> {
    let request = unsafe { crate::ffi::output(request, "request") }?;
    if request.answer.is_some() {
        return Err(Failure::core(&Error::InvalidArgument(
            "the oauth_token request is already settled: call krabka_oauth_request_set_token \
             or krabka_oauth_request_fail once"
                .into(),
        )));
    }
    Ok(request)
}

/// Settles the callback's `request` with a token: `token` (printable ASCII
/// without spaces, often a JWT), when it expires (`expires_at_ms`,
/// milliseconds since the Unix epoch, in the future) and the principal it
/// names (`principal`, for the clients' logs; NULL for none), each copied.
/// An `expires_at_ms` of 0 or below is `KRABKA_RESULT_INVALID_ARGUMENT`
/// naming it, and the request stays open; what the core refuses of the
/// token (empty, expired, a space) fails the operation that needed it,
/// naming the token provider. A request already settled is
/// `KRABKA_RESULT_INVALID_ARGUMENT`. Only from the callback, during the
/// call. Does not block.
#[no_mangle]
pub unsafe extern "C" fn krabka_oauth_request_set_token(
    request: *mut krabka_oauth_request,
    token: *const c_char,
    expires_at_ms: i64,
    principal: *const c_char,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let request = unsafe { open_request(request) }?;
        let value = unsafe { cstr(token, "token") }?;
        let ms = u64::try_from(expires_at_ms)
            .ok()
            .filter(|&ms| ms > 0)
            .ok_or_else(|| {
                Failure::core(&Error::from(ArgError::invalid(
                    "expires_at_ms",
                    "a time in milliseconds since the Unix epoch",
                    expires_at_ms,
                )))
            })?;
        let mut t = OAuthToken::new(value, UNIX_EPOCH + Duration::from_millis(ms));
        if !principal.is_null() {
            t = t.with_principal(unsafe { cstr(principal, "principal") }?);
        }
        request.answer = Some(Ok(t));
        Ok(())
    })
}

/// Settles the callback's `request` with a failure: the operation that
/// needed the token fails naming the token provider and `message` (NULL:
/// none given), with `KRABKA_RESULT_FATAL` when `fatal` (no retry mends it:
/// revoked credentials), else `KRABKA_RESULT_TRANSIENT` (the identity
/// provider may answer later). While the last token is still valid, the
/// core keeps it and logs a warning. A request already settled is
/// `KRABKA_RESULT_INVALID_ARGUMENT`. Only from the callback, during the
/// call. Does not block.
#[no_mangle]
pub unsafe extern "C" fn krabka_oauth_request_fail(
    request: *mut krabka_oauth_request,
    message: *const c_char,
    fatal: bool,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let request = unsafe { open_request(request) }?;
        let message = if message.is_null() {
            "(no message)".to_owned()
        } else {
            unsafe { cstr(message, "message") }?.to_owned()
        };
        let cause = std::io::Error::other(format!("the oauth_token callback failed: {message}"));
        request.answer = Some(Err(if fatal {
            Box::new(Error::fatal("the oauth_token callback failed", cause))
        } else {
            Box::new(cause)
        }));
        Ok(())
    })
}
