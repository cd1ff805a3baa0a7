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
//! [`TokenSource`]: it keeps the last token and fetches the next one half-way
//! through its life, on a thread of its own while the last token is still
//! good; the clients ask it for a token when theirs is 80 % through its life
//! (librdkafka's refresh point) and get the fresh one at once. So a transport
//! with a dozen clients calls the provider about twice per token lifetime,
//! not once per client, and a slow provider holds up no client that has a
//! token. One call runs at a time; a client that needs a token meanwhile
//! waits for it and shares its outcome.
//!
//! A provider that fails (returns an error or panics) fails the connection
//! that needed the token, with an error naming the token provider and its
//! message ([`TokenProviderError`] is the cause): [`Error::Transient`] (an
//! identity provider that does not answer may answer later), or
//! [`Error::Fatal`] when the provider itself returned one. While the last
//! token is still valid, a failed refresh keeps it (and logs a warning), as
//! Kafka's Java client does.
//!
//! SASL extensions (RFC 7628 key-value pairs besides the token) are not
//! supported: rust-rdkafka's token callback cannot pass them to librdkafka.

use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

/// The error a token provider returns: any error type, boxed.
pub type OAuthTokenError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The share of a token's lifetime after which a client wants a new token
/// (librdkafka and Kafka's Java client refresh at 80 %).
const REFRESH_AT: f64 = 0.8;

/// The share of a token's lifetime after which the shared source fetches
/// the next one: well before the clients ask for it, so that a client asking
/// (at 80 % of what its token had left) gets a token with at least half its
/// life left. librdkafka looks at its refresh time only once a second: a
/// client given a token with a few seconds left could ask too late.
const SOURCE_REFRESH_AT: f64 = 0.5;

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

/// The error a token provider returned, as the cause of the errors of every
/// client that needed a token from that call. `Display` is the provider's
/// message; [`TokenProviderError::get_ref`] is the provider's error itself
/// (downcast it to your own type).
#[derive(Clone)]
pub struct TokenProviderError(Arc<OAuthTokenError>);

impl TokenProviderError {
    /// The error the token provider returned.
    pub fn get_ref(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &**self.0
    }
}

impl fmt::Debug for TokenProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self.0, f)
    }
}

impl fmt::Display for TokenProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self.0, f)
    }
}

impl std::error::Error for TokenProviderError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// Why a provider call gave no token, kept for every caller that waited for
/// it.
#[derive(Clone)]
enum Failure {
    /// An unusable token or argument: [`Error::InvalidArgument`].
    Invalid(String),
    /// The provider failed: [`Error::Fatal`] or [`Error::Transient`].
    Failed {
        fatal: bool,
        cause: TokenProviderError,
    },
}

impl Failure {
    fn error(&self) -> Error {
        match self {
            Failure::Invalid(why) => Error::InvalidArgument(format!("{CONTEXT}: {why}")),
            Failure::Failed { fatal: true, cause } => Error::fatal(CONTEXT, cause.clone()),
            Failure::Failed {
                fatal: false,
                cause,
            } => Error::transient(CONTEXT, cause.clone()),
        }
    }
}

/// The token provider of a configuration, with the last token it gave: what
/// every client made from the configuration asks for a token.
///
/// One provider call at a time: a client that needs a token while a call is
/// running waits for that call and takes its token or its error. While the
/// last token is still good, nobody waits: a thread of the source fetches
/// the next token at half of the last one's life (well before the clients
/// ask, at 80 %) and the last one is handed out meanwhile, so a slow provider
/// never holds up a client that has a token (a leader's lease producer,
/// say). The thread ends when the source goes (it holds it weakly).
pub(crate) struct TokenSource {
    provider: Box<ProviderFn>,
    state: Mutex<State>,
    /// Signalled when a provider call ends.
    done: Condvar,
}

#[derive(Default)]
struct State {
    cached: Option<Cached>,
    /// A provider call is running.
    calling: bool,
    /// Provider calls finished so far.
    calls: u64,
    /// The outcome of the last call when it failed, with its number.
    failed: Option<(u64, Failure)>,
    /// No background refresh before this (after one failed).
    retry_at: Option<SystemTime>,
    /// The refresh thread is running.
    refresher: bool,
}

struct Cached {
    token: OAuthToken,
    /// When to fetch the next token: half-way through this one's life.
    refresh_at: SystemTime,
    /// The last moment to hand the token out: a little before it expires,
    /// so that it is still valid when the broker checks it.
    usable_until: SystemTime,
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenSource")
    }
}

/// What failed while getting a token.
const CONTEXT: &str = "getting an OAUTHBEARER token from the token provider";

/// How long before its expiry a token is no longer handed out: a tenth of
/// its life, at most this.
const EXPIRY_MARGIN: Duration = Duration::from_secs(1);

impl TokenSource {
    pub(crate) fn new<F>(provider: F) -> TokenSource
    where
        F: Fn() -> std::result::Result<OAuthToken, OAuthTokenError> + Send + Sync + 'static,
    {
        TokenSource {
            provider: Box::new(provider),
            state: Mutex::default(),
            done: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A valid token: the last one while it is good (the refresh thread
    /// replaces it in time), else one from the provider, waiting for a call
    /// already running rather than starting another. Blocks while a
    /// provider call it needs runs. Never panics: a provider that panics is
    /// an error.
    pub(crate) fn token(self: &Arc<Self>) -> Result<OAuthToken> {
        let mut state = self.lock();
        let seen = state.calls;
        loop {
            let now = SystemTime::now();
            if let Some(c) = state.cached.as_ref() {
                if now < c.usable_until {
                    return Ok(c.token.clone());
                }
            }
            if let Some((call, failure)) = &state.failed {
                // A call that ended while this one waited failed: its error,
                // rather than a call per waiting client.
                if *call > seen {
                    return Err(failure.error());
                }
            }
            if !state.calling {
                break;
            }
            state = self.done.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.calling = true;
        drop(state);
        let outcome = self.call();
        let mut state = self.record(outcome.clone());
        if outcome.is_ok() && !state.refresher {
            state.refresher = self.start_refresher();
        }
        drop(state);
        outcome.map_err(|f| f.error())
    }

    /// Starts the thread that fetches the next token before the last one
    /// runs out; false when no thread could be made (the clients then fetch
    /// a token themselves once the last one is no longer usable).
    fn start_refresher(self: &Arc<Self>) -> bool {
        let source = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("krabka-oauth-refresh".into())
            .spawn(move || refresh_loop(&source))
            .is_ok()
    }

    /// One background refresh, when it is time (see [`refresh_loop`]).
    /// Returns when to look again, or `None` to end the thread.
    fn refresh_step(&self) -> Option<SystemTime> {
        let mut state = self.lock();
        let now = SystemTime::now();
        let Some(c) = state.cached.as_ref() else {
            state.refresher = false;
            return None;
        };
        if now >= c.usable_until {
            // Nothing good to hand out meanwhile: the next client that
            // needs a token fetches it (and starts the thread again).
            state.refresher = false;
            return None;
        }
        let due = state.retry_at.unwrap_or(c.refresh_at);
        if now < due {
            return Some(due);
        }
        if state.calling {
            // A client is fetching one: look again shortly.
            return Some(now + Duration::from_millis(50));
        }
        state.calling = true;
        drop(state);
        let outcome = self.call();
        let mut state = self.record(outcome.clone());
        let Err(failure) = outcome else {
            return Some(SystemTime::now());
        };
        let now = SystemTime::now();
        let left = state
            .cached
            .as_ref()
            .and_then(|c| c.usable_until.duration_since(now).ok())
            .unwrap_or_default();
        // Again after half of what is left, at most 10 s later (librdkafka's
        // pace after a failed refresh).
        let retry_at = now + (left / 2).min(RETRY_AFTER_FAILURE);
        state.retry_at = Some(retry_at);
        tracing::warn!(
            error = %failure.error(),
            "refreshing the OAUTHBEARER token failed; the last token stays in use until it \
             expires in {}",
            humantime(left)
        );
        Some(retry_at)
    }

    /// One provider call, checked.
    fn call(&self) -> std::result::Result<OAuthToken, Failure> {
        let asked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.provider)()));
        match asked {
            Ok(Ok(token)) => match token.problem(SystemTime::now()) {
                None => Ok(token),
                Some(why) => Err(Failure::Invalid(format!(
                    "the provider returned an unusable token: {why}"
                ))),
            },
            Ok(Err(e)) => Err(provider_failure(e)),
            Err(panic) => Err(Failure::Failed {
                fatal: true,
                cause: TokenProviderError(Arc::new(
                    format!("the token provider panicked: {}", panic_message(&*panic)).into(),
                )),
            }),
        }
    }

    /// Records the outcome of a call and wakes the callers waiting for it.
    fn record(&self, outcome: std::result::Result<OAuthToken, Failure>) -> MutexGuard<'_, State> {
        let mut state = self.lock();
        state.calling = false;
        state.calls += 1;
        match outcome {
            Ok(token) => {
                let now = SystemTime::now();
                let life = token.expires_at.duration_since(now).unwrap_or_default();
                state.cached = Some(Cached {
                    refresh_at: now + life.mul_f64(SOURCE_REFRESH_AT),
                    usable_until: token.expires_at - (life / 10).min(EXPIRY_MARGIN),
                    token,
                });
                state.failed = None;
                state.retry_at = None;
            }
            Err(failure) => state.failed = Some((state.calls, failure)),
        }
        self.done.notify_all();
        state
    }

    /// True when the last token given out is no longer fresh (see
    /// [`TokenSource::token`]), or none was given yet.
    #[cfg(test)]
    fn stale(&self) -> bool {
        self.lock()
            .cached
            .as_ref()
            .is_none_or(|c| SystemTime::now() >= c.refresh_at)
    }
}

/// The refresh thread of a token source: sleeps until the next refresh is
/// due (in steps of at most a second, holding the source only weakly, so it
/// ends soon after the source goes), then runs it.
fn refresh_loop(source: &Weak<TokenSource>) {
    const STEP: Duration = Duration::from_secs(1);
    loop {
        let next = match source.upgrade() {
            Some(s) => match s.refresh_step() {
                Some(next) => next,
                None => return,
            },
            None => return,
        };
        loop {
            let wait = next.duration_since(SystemTime::now()).unwrap_or_default();
            if wait.is_zero() {
                break;
            }
            std::thread::sleep(wait.min(STEP));
            if source.strong_count() == 0 {
                return;
            }
        }
    }
}

/// The failure of a provider that returned `e`: fatal when `e` is this
/// crate's fatal error, an invalid argument when it is this crate's invalid
/// argument, else transient; the cause is `e`.
fn provider_failure(e: OAuthTokenError) -> Failure {
    match e.downcast_ref::<Error>() {
        Some(Error::InvalidArgument(why)) => Failure::Invalid(why.clone()),
        core => Failure::Failed {
            fatal: core.is_some_and(|c| c.kind() == crate::ErrorKind::Fatal),
            cause: TokenProviderError(Arc::new(e)),
        },
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

    fn in_ms(ms: u64) -> SystemTime {
        SystemTime::now() + Duration::from_millis(ms)
    }

    /// A source whose provider gives tokens `t0`, `t1`, ... living `life_ms`,
    /// and the count of its calls.
    fn counting(life_ms: u64) -> (Arc<TokenSource>, Arc<AtomicU32>) {
        let calls = Arc::new(AtomicU32::new(0));
        let c = Arc::clone(&calls);
        let source = TokenSource::new(move || {
            let n = c.fetch_add(1, Ordering::SeqCst);
            Ok(OAuthToken::new(format!("t{n}"), in_ms(life_ms)).with_principal("p"))
        });
        (Arc::new(source), calls)
    }

    fn source<F>(f: F) -> Arc<TokenSource>
    where
        F: Fn() -> std::result::Result<OAuthToken, OAuthTokenError> + Send + Sync + 'static,
    {
        Arc::new(TokenSource::new(f))
    }

    #[test]
    fn a_token_is_shared_and_replaced_in_the_background_at_half_its_life() {
        let (long, calls) = counting(3_600_000);
        assert!(long.stale());
        assert_eq!(long.token().unwrap().value(), "t0");
        assert_eq!(long.token().unwrap().value(), "t0");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(!long.stale());

        // 800 ms tokens: the next one is fetched after 400 ms, without
        // anyone asking, so the clients asking at 80 % get a fresh one.
        let (short, calls) = counting(800);
        assert_eq!(short.token().unwrap().value(), "t0");
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert!(!short.stale());
        assert_eq!(short.token().unwrap().value(), "t1");
        // The refresh thread ends with the source.
        let weak = Arc::downgrade(&short);
        drop(short);
        assert!(weak.upgrade().is_none());
    }

    #[test]
    fn provider_errors_and_panics_are_errors_naming_the_provider() {
        #[derive(Debug)]
        struct IdpDown;
        impl fmt::Display for IdpDown {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("the identity provider said no")
            }
        }
        impl std::error::Error for IdpDown {}
        let e = source(|| Err(Box::new(IdpDown))).token().unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Transient, "{e}");
        assert_eq!(
            e.to_string(),
            "transient getting an OAUTHBEARER token from the token provider: the identity \
             provider said no"
        );
        // The provider's own error is the cause.
        let cause = std::error::Error::source(&e)
            .and_then(|c| c.downcast_ref::<TokenProviderError>())
            .expect("a TokenProviderError cause");
        assert!(cause.get_ref().downcast_ref::<IdpDown>().is_some());

        let fatal = source(|| Err(Box::new(Error::fatal("fetching a token", "revoked")) as _));
        let e = fatal.token().unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Fatal, "{e}");
        assert!(e.to_string().contains("revoked"), "{e}");
        let invalid =
            source(|| Err(Box::new(Error::InvalidArgument("a bad return value".into())) as _));
        let e = invalid.token().unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{e}");
        assert!(
            e.to_string()
                .ends_with("from the token provider: a bad return value"),
            "{e}"
        );
        let e = source(|| panic!("boom in the provider"))
            .token()
            .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Fatal, "{e}");
        assert!(e.to_string().contains("boom in the provider"), "{e}");
    }

    #[test]
    fn unusable_tokens_are_refused_without_showing_them() {
        for (token, why) in [
            (OAuthToken::new("", in_ms(60_000)), "empty"),
            (
                OAuthToken::new("secret part\u{1}x", in_ms(60_000)),
                "printable ASCII",
            ),
            (OAuthToken::new("secret with space", in_ms(60_000)), "' '"),
            (
                OAuthToken::new("secret", SystemTime::now() - Duration::from_secs(5)),
                "expired",
            ),
        ] {
            let e = source(move || Ok(token.clone())).token().unwrap_err();
            let msg = e.to_string();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{msg}");
            assert!(msg.contains(why), "{why}: {msg}");
            assert!(!msg.contains("secret"), "the token shows: {msg}");
        }
    }

    #[test]
    fn a_failed_refresh_keeps_the_last_token_while_it_is_good() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = Arc::clone(&calls);
        let source = source(move || {
            if c.fetch_add(1, Ordering::SeqCst) == 0 {
                Ok(OAuthToken::new("first", in_ms(800)))
            } else {
                Err("down".into())
            }
        });
        assert_eq!(source.token().unwrap().value(), "first");
        std::thread::sleep(Duration::from_millis(640));
        // The refreshes from 400 ms on failed: the token stays.
        assert!(calls.load(Ordering::SeqCst) >= 2, "asked again");
        assert_eq!(source.token().unwrap().value(), "first", "kept");
        // Past what may be handed out (720 ms): the provider is asked, and
        // its error shows.
        std::thread::sleep(Duration::from_millis(120));
        let e = source.token().unwrap_err();
        assert!(e.to_string().contains("down"), "{e}");
    }

    #[test]
    fn clients_waiting_for_a_failing_call_share_its_error() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = Arc::clone(&calls);
        let source = source(move || {
            c.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(300));
            Err("too slow, then no".into())
        });
        let start = Arc::new(std::sync::Barrier::new(4));
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let (source, start) = (Arc::clone(&source), Arc::clone(&start));
                std::thread::spawn(move || {
                    start.wait();
                    source.token().unwrap_err().to_string()
                })
            })
            .collect();
        for w in waiters {
            assert!(w.join().unwrap().contains("too slow, then no"));
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1, "one call for four clients");
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
