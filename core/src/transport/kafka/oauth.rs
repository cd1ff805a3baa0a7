//! SASL/OAUTHBEARER with tokens the caller supplies (KIP-255, RFC 7628).
//!
//! The caller gives the [`KafkaConfig`](super::KafkaConfig) a token provider
//! ([`KafkaConfig::with_oauth_token_provider`](super::KafkaConfig::with_oauth_token_provider)):
//! a function returning an [`OAuthToken`] (the token, when it expires, and
//! the principal it names). Every client of the transport takes its tokens
//! from it: the librdkafka clients (through rust-rdkafka's
//! `generate_oauth_token`, and set directly on the clients that nothing
//! polls) and the project's own protocol client (SaslHandshake OAUTHBEARER,
//! then SaslAuthenticate with `n,,\x01auth=Bearer <token>\x01\x01`).
//!
//! All the clients made from one configuration (and its clones) share one
//! [`TokenSource`]: it keeps the last token and asks the provider again once
//! 80 % of that token's life has passed (librdkafka refreshes at the same
//! point), so a transport with a dozen clients calls the provider about once
//! per token lifetime, not once per client.
//!
//! A provider that fails (returns an error or panics) fails the connection
//! that needed the token, with an error naming the token provider and its
//! message: [`Error::Transient`] (an identity provider that does not answer
//! may answer later), or [`Error::Fatal`] when the provider itself returned
//! one. While the last token is still valid, a failed refresh keeps it (and
//! logs a warning), as Kafka's Java client does.
//!
//! SASL extensions (RFC 7628 key-value pairs besides the token) are not
//! supported: rust-rdkafka's token callback cannot pass them to librdkafka.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

/// The error a token provider returns: any error type, boxed.
pub type OAuthTokenError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The share of a token's lifetime after which a new token is asked for
/// (librdkafka and Kafka's Java client refresh at 80 %).
const REFRESH_AT: f64 = 0.8;

/// An OAuth 2 bearer token for SASL/OAUTHBEARER, as a token provider returns
/// it: the token (often a JWT), when it expires, and the principal it names.
///
/// The broker takes the principal from the token itself (for a JWT, usually
/// its `sub` claim); [`OAuthToken::principal`] only names it in the logs of
/// the clients (librdkafka's `md_principal_name`).
///
/// `Debug` does not show the token.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use krabka_coordination::transport::kafka::OAuthToken;
/// let token = OAuthToken::new("eyJhbGciOi...", SystemTime::now() + Duration::from_secs(3600))
///     .with_principal("billing");
/// assert_eq!(token.principal(), "billing");
/// assert!(!format!("{token:?}").contains("eyJ"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct OAuthToken {
    value: String,
    expires_at: SystemTime,
    principal: String,
}

impl OAuthToken {
    /// A token `value` that expires at `expires_at`, naming no principal.
    pub fn new(value: impl Into<String>, expires_at: SystemTime) -> Self {
        OAuthToken {
            value: value.into(),
            expires_at,
            principal: String::new(),
        }
    }

    /// The same token, naming `principal` (for the clients' logs).
    pub fn with_principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = principal.into();
        self
    }

    /// The token as sent to the broker.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// When the token expires.
    pub fn expires_at(&self) -> SystemTime {
        self.expires_at
    }

    /// The principal the token names, or `""`.
    pub fn principal(&self) -> &str {
        &self.principal
    }

    /// The expiry in milliseconds since the Unix epoch (librdkafka's
    /// `md_lifetime_ms`).
    pub(crate) fn expires_at_ms(&self) -> i64 {
        self.expires_at
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }

    /// What is wrong with the token for SASL/OAUTHBEARER, if anything
    /// (never quoting the token).
    fn problem(&self, now: SystemTime) -> Option<String> {
        if self.value.is_empty() {
            return Some("the token is empty".into());
        }
        // RFC 6750's b64token is printable ASCII; RFC 7628 frames the token
        // between 0x01 bytes and librdkafka takes VCHAR, space and tabs, so
        // a control character or a space would break the message.
        if let Some((i, c)) = self
            .value
            .char_indices()
            .find(|(_, c)| !c.is_ascii_graphic())
        {
            return Some(format!(
                "the token holds the character {c:?} at byte {i}: a bearer token is printable \
                 ASCII without spaces"
            ));
        }
        if self.expires_at <= now {
            return Some(format!(
                "the token expired {} ago (expires_at is in the past)",
                humantime(now.duration_since(self.expires_at).unwrap_or_default())
            ));
        }
        if self.principal.contains('\0') {
            return Some("the principal holds a NUL byte".into());
        }
        None
    }
}

impl fmt::Debug for OAuthToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthToken")
            .field("value", &"***")
            .field("expires_at", &self.expires_at)
            .field("principal", &self.principal)
            .finish()
    }
}

fn humantime(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

type ProviderFn = dyn Fn() -> std::result::Result<OAuthToken, OAuthTokenError> + Send + Sync;

/// The token provider of a configuration, with the last token it gave: what
/// every client made from the configuration asks for a token.
pub(crate) struct TokenSource {
    provider: Box<ProviderFn>,
    /// The last token and when to ask for the next one. Held while the
    /// provider runs, so concurrent askers wait for one call.
    cached: Mutex<Option<Cached>>,
}

struct Cached {
    token: OAuthToken,
    refresh_at: SystemTime,
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenSource")
    }
}

/// What failed while getting a token.
const CONTEXT: &str = "getting an OAUTHBEARER token from the token provider";

impl TokenSource {
    pub(crate) fn new<F>(provider: F) -> TokenSource
    where
        F: Fn() -> std::result::Result<OAuthToken, OAuthTokenError> + Send + Sync + 'static,
    {
        TokenSource {
            provider: Box::new(provider),
            cached: Mutex::new(None),
        }
    }

    /// A valid token: the last one while less than 80 % of its life has
    /// passed, else a new one from the provider. Blocks while the provider
    /// runs. Never panics: a provider that panics is an error.
    pub(crate) fn token(&self) -> Result<OAuthToken> {
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        let now = SystemTime::now();
        if let Some(c) = cached.as_ref() {
            if now < c.refresh_at && c.token.expires_at > now {
                return Ok(c.token.clone());
            }
        }
        let asked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.provider)()));
        let now = SystemTime::now();
        let failure = match asked {
            Ok(Ok(token)) => match token.problem(now) {
                None => {
                    let life = token.expires_at.duration_since(now).unwrap_or_default();
                    *cached = Some(Cached {
                        refresh_at: now + life.mul_f64(REFRESH_AT),
                        token: token.clone(),
                    });
                    return Ok(token);
                }
                Some(why) => Error::InvalidArgument(format!(
                    "{CONTEXT}: the provider returned an unusable token: {why}"
                )),
            },
            Ok(Err(e)) => provider_error(e),
            Err(panic) => Error::fatal(
                CONTEXT,
                format!("the token provider panicked: {}", panic_message(&*panic)),
            ),
        };
        // Kafka's Java client keeps using a token whose refresh failed until
        // it expires; so does this.
        if let Some(c) = cached.as_ref() {
            if c.token.expires_at > now {
                tracing::warn!(
                    error = %failure,
                    "the OAUTHBEARER token provider failed; the last token stays in use until it \
                     expires in {}",
                    humantime(c.token.expires_at.duration_since(now).unwrap_or_default())
                );
                return Ok(c.token.clone());
            }
        }
        Err(failure)
    }

    /// True when the last token given out is no longer fresh (see
    /// [`TokenSource::token`]), or none was given yet.
    #[cfg(test)]
    fn stale(&self) -> bool {
        let cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        cached
            .as_ref()
            .is_none_or(|c| SystemTime::now() >= c.refresh_at)
    }
}

/// The error of a provider that returned `e`, naming the token provider:
/// [`Error::Fatal`] when `e` is this crate's fatal error,
/// [`Error::InvalidArgument`] when it is this crate's invalid argument,
/// else [`Error::Transient`]; the fatal and transient errors keep `e` as
/// their cause.
fn provider_error(e: OAuthTokenError) -> Error {
    match e.downcast::<Error>() {
        Ok(e) if e.kind() == crate::ErrorKind::Fatal => Error::fatal(CONTEXT, e),
        Ok(e) if e.kind() == crate::ErrorKind::InvalidArgument => {
            Error::InvalidArgument(format!("{CONTEXT}: {e}"))
        }
        Ok(e) => Error::transient(CONTEXT, e),
        Err(e) => Error::transient(CONTEXT, e),
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned())
}

/// The token state of one librdkafka client: where its tokens come from
/// and when the one it holds should be replaced.
#[derive(Debug)]
pub(crate) struct ClientToken {
    source: Arc<TokenSource>,
    /// When the token set on the client is 80 % through its life; `None`
    /// before the first.
    refresh_at: Mutex<Option<SystemTime>>,
}

impl ClientToken {
    pub(crate) fn new(source: Arc<TokenSource>) -> ClientToken {
        ClientToken {
            source,
            refresh_at: Mutex::new(None),
        }
    }

    /// A token for the client, from the shared source; remembers when to
    /// replace it.
    pub(crate) fn token(&self) -> Result<OAuthToken> {
        let token = self.source.token()?;
        let now = SystemTime::now();
        let life = token.expires_at.duration_since(now).unwrap_or_default();
        *self.refresh_at.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(now + life.mul_f64(REFRESH_AT));
        Ok(token)
    }

    /// True when the client has no token yet or should replace the one it
    /// has.
    pub(crate) fn due(&self) -> bool {
        self.next_refresh().is_none_or(|at| SystemTime::now() >= at)
    }

    /// When the client's token should be replaced; `None` before the first.
    fn next_refresh(&self) -> Option<SystemTime> {
        *self.refresh_at.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// After a failed refresh, the next try (librdkafka waits 10 s too).
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(10);

/// Keeps the OAUTHBEARER token of `client`, a consumer that may go
/// unpolled for long (a state reader between reads, the high-watermark
/// probe), fresh: a task gives it a new token when its token is due
/// ([`ensure_token`]) for as long as the client lives. librdkafka
/// re-authenticates its connections with the token it holds (KIP-368) and
/// opens new ones with it, so a token that expired while nobody polled the
/// client would fail them. Needs a tokio runtime; a no-op without
/// OAUTHBEARER.
pub(crate) fn keep_fresh<T>(client: &Arc<T>)
where
    T: rdkafka::consumer::Consumer<super::TransportContext> + Send + Sync + 'static,
{
    if client.client().context().oauth().is_none() {
        return;
    }
    let weak = Arc::downgrade(client);
    tokio::spawn(async move {
        let mut retry_at = None;
        loop {
            let next = {
                let Some(client) = weak.upgrade() else { return };
                let state = client
                    .client()
                    .context()
                    .oauth()
                    .map(ClientToken::next_refresh);
                match (state, retry_at) {
                    (None, _) => return,
                    (Some(Some(at)), None) => at,
                    (Some(_), Some(at)) => at,
                    (Some(None), None) => SystemTime::now(),
                }
            };
            let wait = next.duration_since(SystemTime::now()).unwrap_or_default();
            tokio::time::sleep(wait).await;
            // The client is kept alive only for the call, never across the
            // sleep: dropping it ends the task.
            let Some(client) = weak.upgrade() else { return };
            let done = tokio::task::spawn_blocking(move || {
                let r = ensure_token(client.client());
                // Dropped here, on the blocking pool (a client's drop blocks).
                drop(client);
                r
            })
            .await;
            retry_at = match done {
                Ok(Ok(())) => None,
                Ok(Err(e)) => {
                    tracing::warn!(
                        "could not refresh the OAUTHBEARER token of a state consumer (retried in {}): {e}",
                        humantime(RETRY_AFTER_FAILURE)
                    );
                    Some(SystemTime::now() + RETRY_AFTER_FAILURE)
                }
                Err(_) => return,
            };
        }
    });
}

/// Gives librdkafka client `client` a token when it has none or its token is
/// due for a refresh: for the clients nothing polls (the admin client, the
/// high-watermark probe, a state reader before its first receive), which
/// would otherwise never serve librdkafka's token refresh event and wait for
/// a token forever. Blocks while the token provider runs. A no-op without
/// OAUTHBEARER.
pub(crate) fn ensure_token(
    client: &rdkafka::client::Client<super::TransportContext>,
) -> Result<()> {
    let Some(state) = client.context().oauth() else {
        return Ok(());
    };
    if !state.due() {
        return Ok(());
    }
    let token = state.token()?;
    set_token(client.native_ptr(), &token)
}

/// `rd_kafka_oauthbearer_set_token` on the client `rk`.
fn set_token(rk: *mut rdkafka::bindings::rd_kafka_t, token: &OAuthToken) -> Result<()> {
    use std::ffi::{c_char, CStr, CString};
    let value = CString::new(token.value())
        .map_err(|_| Error::InvalidArgument(format!("{CONTEXT}: the token holds a NUL byte")))?;
    let principal = CString::new(token.principal()).map_err(|_| {
        Error::InvalidArgument(format!("{CONTEXT}: the principal holds a NUL byte"))
    })?;
    let mut errstr: [c_char; 512] = [0; 512];
    // SAFETY: `rk` is the handle of a live client (the caller borrows the
    // client for the call); the strings are NUL-terminated and outlive the
    // call, which copies them; no extensions (a null array of size 0);
    // `errstr` is writable for its whole length, and librdkafka writes a
    // NUL-terminated string into it on error only.
    let code = unsafe {
        rdkafka::bindings::rd_kafka_oauthbearer_set_token(
            rk,
            value.as_ptr(),
            token.expires_at_ms(),
            principal.as_ptr(),
            std::ptr::null_mut(),
            0,
            errstr.as_mut_ptr(),
            errstr.len(),
        )
    };
    if code == rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
        return Ok(());
    }
    // SAFETY: zero-initialised and at most `len - 1` bytes written by
    // librdkafka, so there is a NUL within the buffer.
    let why = unsafe { CStr::from_ptr(errstr.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    Err(Error::fatal(
        "setting the OAUTHBEARER token on a librdkafka client",
        format!("librdkafka refused it ({code:?}): {why}"),
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn in_secs(s: u64) -> SystemTime {
        SystemTime::now() + Duration::from_secs(s)
    }

    #[test]
    fn a_fresh_token_is_kept_until_80_percent_of_its_life() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = Arc::clone(&calls);
        let source = TokenSource::new(move || {
            let n = c.fetch_add(1, Ordering::SeqCst);
            Ok(OAuthToken::new(format!("t{n}"), in_secs(3600)).with_principal("p"))
        });
        assert!(source.stale());
        assert_eq!(source.token().unwrap().value(), "t0");
        assert_eq!(source.token().unwrap().value(), "t0");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(!source.stale());
        // A token with little life left is replaced at once.
        let short = TokenSource::new({
            let c = Arc::clone(&calls);
            move || {
                let n = c.fetch_add(1, Ordering::SeqCst);
                Ok(OAuthToken::new(
                    format!("s{n}"),
                    SystemTime::now() + Duration::from_millis(50),
                ))
            }
        });
        let first = short.token().unwrap();
        std::thread::sleep(Duration::from_millis(45));
        assert!(short.stale());
        // The provider is asked again; the new token differs.
        assert_ne!(short.token().unwrap(), first);
    }

    #[test]
    fn provider_errors_and_panics_are_errors_naming_the_provider() {
        let failing = TokenSource::new(|| Err("the identity provider said no".into()));
        let e = failing.token().unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Transient, "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("token provider") && msg.contains("the identity provider said no"),
            "{msg}"
        );
        let fatal =
            TokenSource::new(|| Err(Box::new(Error::fatal("fetching a token", "revoked")) as _));
        let e = fatal.token().unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Fatal, "{e}");
        assert!(e.to_string().contains("revoked"), "{e}");
        let invalid = TokenSource::new(|| {
            Err(Box::new(Error::InvalidArgument("a bad return value".into())) as _)
        });
        let e = invalid.token().unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains("a bad return value"), "{e}");
        let panicking = TokenSource::new(|| panic!("boom in the provider"));
        let e = panicking.token().unwrap_err();
        assert!(e.to_string().contains("boom in the provider"), "{e}");
    }

    #[test]
    fn unusable_tokens_are_refused_without_showing_them() {
        for (token, why) in [
            (OAuthToken::new("", in_secs(60)), "empty"),
            (
                OAuthToken::new("secret part\u{1}x", in_secs(60)),
                "printable ASCII",
            ),
            (OAuthToken::new("secret with space", in_secs(60)), "' '"),
            (
                OAuthToken::new("secret", SystemTime::now() - Duration::from_secs(5)),
                "expired",
            ),
        ] {
            let t = token.clone();
            let e = TokenSource::new(move || Ok(t.clone())).token().unwrap_err();
            let msg = e.to_string();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{msg}");
            assert!(msg.contains(why), "{why}: {msg}");
            assert!(!msg.contains("secret"), "the token shows: {msg}");
        }
    }

    #[test]
    fn a_failed_refresh_keeps_the_last_token_while_it_is_valid() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = Arc::clone(&calls);
        let source = TokenSource::new(move || {
            if c.fetch_add(1, Ordering::SeqCst) == 0 {
                Ok(OAuthToken::new(
                    "first",
                    SystemTime::now() + Duration::from_millis(300),
                ))
            } else {
                Err("down".into())
            }
        });
        assert_eq!(source.token().unwrap().value(), "first");
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(source.token().unwrap().value(), "first", "kept");
        assert_eq!(calls.load(Ordering::SeqCst), 2, "asked again");
        std::thread::sleep(Duration::from_millis(100));
        assert!(source.token().is_err(), "expired: the error shows");
    }

    #[test]
    fn expiry_in_milliseconds_and_a_debug_without_the_token() {
        let t = OAuthToken::new("abc", UNIX_EPOCH + Duration::from_millis(1_700_000_000_123))
            .with_principal("admin");
        assert_eq!(t.expires_at_ms(), 1_700_000_000_123);
        let d = format!("{t:?}");
        assert!(!d.contains("abc") && d.contains("admin"), "{d}");
    }
}
