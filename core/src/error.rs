//! Errors of the core.

use std::fmt;

/// A specialised `Result` for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The record part that a [`FormatError`] or [`EncodeError`] concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Part {
    /// The record key (registration or lease kind).
    Key,
    /// The value of a registration record.
    RegistrationValue,
    /// The value of a lease record.
    LeaseValue,
}

impl Part {
    /// The part's name as the golden vectors and every binding spell it:
    /// `"key"`, `"registration value"` or `"lease value"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Part::Key => "key",
            Part::RegistrationValue => "registration value",
            Part::LeaseValue => "lease value",
        }
    }

    /// Parses the name written by [`Part::as_str`].
    pub fn from_name(name: &str) -> Option<Part> {
        match name {
            "key" => Some(Part::Key),
            "registration value" => Some(Part::RegistrationValue),
            "lease value" => Some(Part::LeaseValue),
            _ => None,
        }
    }
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Malformed bytes: decoding a record part failed.
///
/// `part` names the record part, `message` says what failed (which field, at
/// which byte offset, and why).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed {part}: {message}")]
pub struct FormatError {
    /// The record part that failed to decode.
    pub part: Part,
    /// What failed, for people.
    pub message: String,
}

impl FormatError {
    /// A format error of `part` with the given message.
    pub fn new(part: Part, message: impl Into<String>) -> Self {
        FormatError {
            part,
            message: message.into(),
        }
    }
}

/// A value the frozen layout cannot hold (an over-long string, an empty role
/// or member). Encoding refuses it rather than truncating.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot encode {part}: {field} {message}")]
pub struct EncodeError {
    /// The record part being encoded.
    pub part: Part,
    /// The field that cannot be encoded (`"role"`, `"member"`).
    pub field: &'static str,
    /// Why, for people.
    pub message: String,
}

/// Every error of the crate.
///
/// Match [`Error::Fenced`] by variant: it is the one signal the election reads.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Malformed record bytes.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// A value the record layout cannot hold.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// An argument or option is invalid; the message names the values.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The broker rejected a write of a superseded epoch (codes 47
    /// INVALID_PRODUCER_EPOCH and 90 PRODUCER_FENCED), or the member otherwise
    /// lost its epoch. The producer that was fenced is dropped.
    #[error("fenced: {0}")]
    Fenced(String),
    /// The leadership was given up by `resign`.
    #[error("the leadership was resigned")]
    Resigned,
    /// The operation was cancelled before it finished.
    #[error("cancelled")]
    Cancelled,
    /// A transient failure (broker unreachable, timeout, coordinator moving);
    /// the operation may be retried.
    #[error("transient {context}: {source}")]
    Transient {
        /// What was being done.
        context: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A failure that retrying will not mend (authorization, bad
    /// configuration, a topic of the wrong shape).
    #[error("fatal {context}: {source}")]
    Fatal {
        /// What was being done.
        context: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

impl Error {
    /// True for [`Error::Fenced`].
    pub fn is_fenced(&self) -> bool {
        matches!(self, Error::Fenced(_))
    }

    /// True when retrying the operation may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Transient { .. })
    }

    /// A transient error with a plain message as its cause.
    pub fn transient(
        context: impl Into<String>,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Error::Transient {
            context: context.into(),
            source: cause.into(),
        }
    }

    /// A fatal error with a plain message as its cause.
    pub fn fatal(
        context: impl Into<String>,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Error::Fatal {
            context: context.into(),
            source: cause.into(),
        }
    }
}
