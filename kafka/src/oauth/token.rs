//! [`OAuthToken`]: a bearer token as a token provider returns it, and the
//! checks it passes before any client sends it.

use std::fmt;
use std::time::{Duration, SystemTime};

use super::*;

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
/// use krabka_kafka::oauth::OAuthToken;
/// let token = OAuthToken::new("eyJhbGciOi...", SystemTime::now() + Duration::from_secs(3600))
///     .with_principal("billing");
/// assert_eq!(token.principal(), "billing");
/// assert!(!format!("{token:?}").contains("eyJ"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct OAuthToken {
    pub(super) value: String,
    pub(super) expires_at: SystemTime,
    pub(super) principal: String,
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
    pub fn expires_at_ms(&self) -> i64 {
        self.expires_at
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }

    /// What is wrong with the token for SASL/OAUTHBEARER, if anything
    /// (never quoting the token).
    pub(super) fn problem(&self, now: SystemTime) -> Option<String> {
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

/// `d` in seconds, for messages.
pub(super) fn humantime(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}
