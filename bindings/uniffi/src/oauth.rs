//! An [`OAuthTokenProvider`] of the host as the core's OAUTHBEARER token
//! provider (`KafkaConfig::with_oauth_token_provider`), given in
//! `ClientOptions(oauthTokenProvider = ...)`, as Python's `oauth_token=`
//! callable is.
//!
//! Everything but the translation is the core's: when the provider is
//! called (a client's first connect, then half-way through each token's
//! life, shared by every Kafka client of the `Client`), what a token may
//! hold (not expired, printable, no spaces), and how a failure is
//! reported. It is called on a background thread (librdkafka's, the
//! core's refresh thread, or the runtime's blocking pool), never on the
//! caller's; it may block (an HTTP request to the identity provider).
//!
//! What it throws fails the operation that needed the token with an error
//! naming the token provider: `KrabkaException.Fatal` when it threw a
//! `KrabkaException.Fatal` (no retry mends it: revoked credentials), else
//! `KrabkaException.Transient` with the exception's description. SASL
//! extensions are not supported by the core, so a token has none.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use krabka_coordination::transport::kafka::{OAuthToken as CoreToken, OAuthTokenError};
use krabka_coordination::Error;
use krabka_coordination_bindings::ArgError;

use crate::error::KrabkaError;

/// An OAUTHBEARER token, as an [`OAuthTokenProvider`] returns it.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct OAuthToken {
    /// The token (often a JWT): printable ASCII without spaces.
    pub token: String,
    /// When it expires, in milliseconds since the Unix epoch (librdkafka's
    /// and Kafka's `lifetimeMs`): `System.currentTimeMillis() + 3_600_000`.
    pub lifetime_ms: i64,
    /// The principal it names, for the clients' logs (the broker reads the
    /// principal from the token itself).
    #[uniffi(default = None)]
    pub principal: Option<String>,
}

/// Supplies OAUTHBEARER tokens (see the module documentation). Give it in
/// `ClientOptions` with `security.protocol` `SASL_SSL` (or
/// `SASL_PLAINTEXT`) and `sasl.mechanism` `OAUTHBEARER`.
#[uniffi::export(with_foreign)]
pub trait OAuthTokenProvider: Send + Sync {
    /// A valid token, fetched now. Called on a background thread.
    fn token(&self) -> Result<OAuthToken, KrabkaError>;
}

/// The token's expiry as a point in time.
fn core_token(t: OAuthToken) -> Result<CoreToken, ArgError> {
    let ms = u64::try_from(t.lifetime_ms)
        .ok()
        .filter(|&ms| ms > 0)
        .ok_or_else(|| {
            ArgError::invalid(
                "the token's lifetime_ms",
                "a time in milliseconds since the Unix epoch",
                t.lifetime_ms,
            )
        })?;
    let mut token = CoreToken::new(t.token, UNIX_EPOCH + Duration::from_millis(ms));
    if let Some(p) = t.principal {
        token = token.with_principal(p);
    }
    Ok(token)
}

/// The core's token provider of `provider`.
pub(crate) fn token_provider(
    provider: Arc<dyn OAuthTokenProvider>,
) -> impl Fn() -> Result<CoreToken, OAuthTokenError> + Send + Sync + 'static {
    move || match provider.token() {
        Ok(t) => core_token(t).map_err(|e| Box::new(Error::from(e)) as OAuthTokenError),
        Err(KrabkaError::Fatal { detail }) => Err(Box::new(Error::fatal(
            "the OAuth token provider threw",
            KrabkaError::Fatal { detail },
        ))),
        Err(e) => Err(Box::new(e)),
    }
}
