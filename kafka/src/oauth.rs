//! SASL/OAUTHBEARER with tokens the caller supplies (KIP-255, RFC 7628).
//!
//! The caller gives a token provider: a function returning an
//! [`OAuthToken`] (the token, when it expires, and the principal it names),
//! wrapped in a [`TokenSource`]. Every client made from one source takes its
//! tokens from it: this crate's connections (SaslHandshake OAUTHBEARER,
//! then SaslAuthenticate with `n,,\x01auth=Bearer <token>\x01\x01`), and
//! any other client the caller builds (the coordination core hands the same
//! source to its librdkafka clients, each through a [`ClientToken`]).
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

mod token;

use token::humantime;
pub use token::OAuthToken;

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

/// After a failed refresh, the next try (librdkafka waits 10 s too).
pub const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(10);

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
pub struct TokenSource {
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
    /// A source that asks `provider` for tokens.
    pub fn new<F>(provider: F) -> TokenSource
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
    pub fn token(self: &Arc<Self>) -> Result<OAuthToken> {
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
            fatal: core.is_some_and(|c| matches!(c, Error::Fatal { .. })),
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
pub struct ClientToken {
    source: Arc<TokenSource>,
    /// When the token set on the client is 80 % through its life; `None`
    /// before the first.
    refresh_at: Mutex<Option<SystemTime>>,
}

impl ClientToken {
    /// The view of `source` of one new client.
    pub fn new(source: Arc<TokenSource>) -> ClientToken {
        ClientToken {
            source,
            refresh_at: Mutex::new(None),
        }
    }

    /// A token for the client, from the shared source; remembers when to
    /// replace it.
    pub fn token(&self) -> Result<OAuthToken> {
        let token = self.source.token()?;
        let now = SystemTime::now();
        let life = token.expires_at.duration_since(now).unwrap_or_default();
        *self.refresh_at.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(now + life.mul_f64(REFRESH_AT));
        Ok(token)
    }

    /// True when the client has no token yet or should replace the one it
    /// has.
    pub fn due(&self) -> bool {
        self.next_refresh().is_none_or(|at| SystemTime::now() >= at)
    }

    /// When the client's token should be replaced; `None` before the first.
    pub fn next_refresh(&self) -> Option<SystemTime> {
        *self.refresh_at.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests;
