//! Errors of the core.
//!
//! The one place where the errors of the project's Kafka client
//! (`krabka_kafka::Error`, feature `kafka-client`) and the crate's meet,
//! both ways:
//!
//! | `krabka_kafka::Error`            | the crate's `Error`                   | way         |
//! |----------------------------------|---------------------------------------|-------------|
//! | `InvalidArgument(m)`             | `InvalidArgument(m)`                  | both        |
//! | `Fenced(m)`                      | `Fenced(m)`                           | client→core |
//! | `Transient { context, source }`  | `Transient { context, source }`       | client→core |
//! | `Fatal { context, source }`      | `Fatal { context, source }`           | both        |
//! | a kind the client adds later     | `Fatal` ("a Kafka client request", it) | client→core |
//! | (none)                           | any other kind: stays the crate's     | core→client |
//!
//! Client to core (`From<krabka_kafka::Error> for Error`) is every answer of
//! the client the transport passes on. Core to client
//! (`Error::into_kafka_client`, feature `kafka`) is an error a binding's token provider
//! returns to the client: only the kinds the client acts on (a fatal error
//! is not retried, an invalid argument is reported as such) become its own.

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
    /// The leader's own lease ran out: no renewal committed within the lease
    /// duration (measured on the monotonic clock from the send time of the
    /// last committed renewal), so a standby may have taken over; or a
    /// resign, which stops the renewals, did not finish before then. Work
    /// done outside Kafka must stop.
    #[error("the lease expired: {0}")]
    LeaseExpired(String),
    /// A write whose commit was sent but not confirmed (a timeout, a fence
    /// raised at the commit): it may or may not have committed. Distinct
    /// from an error before the commit, where nothing was written.
    #[error("outcome unknown {context}: {source}")]
    OutcomeUnknown {
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

/// The stable kind of an [`Error`]: what every binding maps, never the
/// message text.
///
/// The values are part of the API (the C ABI returns them, the Node binding
/// exposes [`ErrorKind::name`] as `code`): a value never changes meaning, and a
/// new kind gets a new value. New kinds are not a breaking change; match with a
/// fallback arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Malformed record bytes ([`Error::Format`]).
    Format = 1,
    /// A value the record layout cannot hold ([`Error::Encode`]).
    Encode = 2,
    /// An invalid argument or option ([`Error::InvalidArgument`]).
    InvalidArgument = 3,
    /// A newer epoch exists: the broker fenced this member ([`Error::Fenced`]).
    Fenced = 4,
    /// A failure that a retry may mend ([`Error::Transient`]).
    Transient = 5,
    /// A failure that a retry will not mend ([`Error::Fatal`]).
    Fatal = 6,
    /// The leadership was resigned ([`Error::Resigned`]).
    Resigned = 7,
    /// The operation was cancelled ([`Error::Cancelled`]).
    Cancelled = 8,
    /// The leader's own lease ran out ([`Error::LeaseExpired`]).
    LeaseExpired = 9,
    /// A write's commit was sent but not confirmed ([`Error::OutcomeUnknown`]).
    OutcomeUnknown = 10,
}

impl ErrorKind {
    /// Every kind, in value order (for bindings that build a mapping table).
    pub const ALL: [ErrorKind; 10] = [
        ErrorKind::Format,
        ErrorKind::Encode,
        ErrorKind::InvalidArgument,
        ErrorKind::Fenced,
        ErrorKind::Transient,
        ErrorKind::Fatal,
        ErrorKind::Resigned,
        ErrorKind::Cancelled,
        ErrorKind::LeaseExpired,
        ErrorKind::OutcomeUnknown,
    ];

    /// The stable upper-case name: `FORMAT`, `ENCODE`, `INVALID_ARGUMENT`,
    /// `FENCED`, `TRANSIENT`, `FATAL`, `RESIGNED`, `CANCELLED`, `LEASE_EXPIRED`,
    /// `OUTCOME_UNKNOWN`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Format => "FORMAT",
            ErrorKind::Encode => "ENCODE",
            ErrorKind::InvalidArgument => "INVALID_ARGUMENT",
            ErrorKind::Fenced => "FENCED",
            ErrorKind::Transient => "TRANSIENT",
            ErrorKind::Fatal => "FATAL",
            ErrorKind::Resigned => "RESIGNED",
            ErrorKind::Cancelled => "CANCELLED",
            ErrorKind::LeaseExpired => "LEASE_EXPIRED",
            ErrorKind::OutcomeUnknown => "OUTCOME_UNKNOWN",
        }
    }

    /// The kind of a value, or `None` for a value no kind has.
    pub fn from_u32(value: u32) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| *k as u32 == value)
    }

    /// The kind of a name written by [`ErrorKind::name`].
    pub fn from_name(name: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `s` as Rust's debug quoting writes it, cut after its first 64 characters
/// (with the full length said): error messages quote long inputs only in
/// part.
pub fn quote(s: &str) -> String {
    const SHOWN: usize = 64;
    match s.char_indices().nth(SHOWN) {
        None => format!("{s:?}"),
        Some((cut, _)) => format!("{:?}... ({} bytes)", &s[..cut], s.len()),
    }
}

/// The error of every call of a client whose process crashed (a test
/// kit's [`crate::testing::TestProcess::crash`]): the client's closed error
/// ([`Error::InvalidArgument`], "the client is closed"), naming the crash.
/// A call pending at the crash ends with it, and so does every later one.
pub(crate) fn process_crashed() -> Error {
    Error::InvalidArgument("the client is closed: its process crashed".into())
}

/// An error shared by several owners (the reason a leadership ended), usable
/// as the cause of another error so the chain is kept.
#[derive(Debug, Clone)]
pub struct SharedError(pub std::sync::Arc<Error>);

impl fmt::Display for SharedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl std::error::Error for SharedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl Error {
    /// The stable kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Format(_) => ErrorKind::Format,
            Error::Encode(_) => ErrorKind::Encode,
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::Fenced(_) => ErrorKind::Fenced,
            Error::Resigned => ErrorKind::Resigned,
            Error::Cancelled => ErrorKind::Cancelled,
            Error::Transient { .. } => ErrorKind::Transient,
            Error::Fatal { .. } => ErrorKind::Fatal,
            Error::LeaseExpired(_) => ErrorKind::LeaseExpired,
            Error::OutcomeUnknown { .. } => ErrorKind::OutcomeUnknown,
        }
    }

    /// True for [`Error::Fenced`].
    pub fn is_fenced(&self) -> bool {
        matches!(self, Error::Fenced(_))
    }

    /// True when a newer epoch exists: [`Error::Fenced`], or an
    /// [`Error::OutcomeUnknown`] whose commit the broker fenced.
    pub fn means_fenced(&self) -> bool {
        match self {
            Error::Fenced(_) => true,
            Error::OutcomeUnknown { source, .. } => source
                .downcast_ref::<Error>()
                .is_some_and(Error::means_fenced),
            _ => false,
        }
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

#[cfg(feature = "kafka-client")]
impl From<krabka_kafka::Error> for Error {
    /// The Kafka client's error as the crate's, kind for kind, its message
    /// and cause kept (the table of this module's docs).
    fn from(e: krabka_kafka::Error) -> Self {
        match e {
            krabka_kafka::Error::InvalidArgument(m) => Error::InvalidArgument(m),
            krabka_kafka::Error::Fenced(m) => Error::Fenced(m),
            krabka_kafka::Error::Transient { context, source } => {
                Error::Transient { context, source }
            }
            krabka_kafka::Error::Fatal { context, source } => Error::Fatal { context, source },
            // The client's error is non-exhaustive: a kind it adds later is
            // fatal here until this crate learns it.
            other => Error::fatal("a Kafka client request", other),
        }
    }
}

// Only the Kafka transport hands errors to the client (a token provider's).
#[cfg(feature = "kafka")]
impl Error {
    /// The crate's error as the Kafka client's own kind where the client
    /// has one it acts on: [`Error::Fatal`] and [`Error::InvalidArgument`],
    /// message and cause kept. Any other kind comes back unchanged as the
    /// `Err`, for the caller to pass on as it is (the table of this
    /// module's docs).
    pub(crate) fn into_kafka_client(self) -> std::result::Result<krabka_kafka::Error, Error> {
        match self {
            Error::Fatal { context, source } => Ok(krabka_kafka::Error::Fatal { context, source }),
            Error::InvalidArgument(m) => Ok(krabka_kafka::Error::InvalidArgument(m)),
            other => Err(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row of the module docs' table of the Kafka client boundary.
    #[cfg(feature = "kafka")]
    #[test]
    fn the_kafka_client_boundary_maps_as_the_table_says() {
        use krabka_kafka::Error as K;
        let cause = || Box::<dyn std::error::Error + Send + Sync>::from("cause");
        let core = |e: K| Error::from(e);
        assert!(
            matches!(core(K::InvalidArgument("m".into())), Error::InvalidArgument(m) if m == "m")
        );
        assert!(matches!(core(K::Fenced("m".into())), Error::Fenced(m) if m == "m"));
        let transient = K::Transient {
            context: "c".into(),
            source: cause(),
        };
        assert!(matches!(core(transient), Error::Transient { context, .. } if context == "c"));
        let fatal = K::Fatal {
            context: "c".into(),
            source: cause(),
        };
        assert!(matches!(core(fatal), Error::Fatal { context, .. } if context == "c"));

        let client = |e: Error| e.into_kafka_client();
        assert!(
            matches!(client(Error::InvalidArgument("m".into())), Ok(K::InvalidArgument(m)) if m == "m")
        );
        assert!(
            matches!(client(Error::fatal("c", "cause")), Ok(K::Fatal { context, .. }) if context == "c")
        );
        assert!(matches!(
            client(Error::transient("c", "cause")),
            Err(Error::Transient { .. })
        ));
        assert!(matches!(
            client(Error::Fenced("m".into())),
            Err(Error::Fenced(_))
        ));
    }

    #[test]
    fn kinds_have_stable_values_and_names() {
        let expected = [
            (1, "FORMAT"),
            (2, "ENCODE"),
            (3, "INVALID_ARGUMENT"),
            (4, "FENCED"),
            (5, "TRANSIENT"),
            (6, "FATAL"),
            (7, "RESIGNED"),
            (8, "CANCELLED"),
            (9, "LEASE_EXPIRED"),
            (10, "OUTCOME_UNKNOWN"),
        ];
        assert_eq!(ErrorKind::ALL.len(), expected.len());
        for (kind, (value, name)) in ErrorKind::ALL.into_iter().zip(expected) {
            assert_eq!(kind as u32, value);
            assert_eq!(kind.name(), name);
            assert_eq!(ErrorKind::from_u32(value), Some(kind));
            assert_eq!(ErrorKind::from_name(name), Some(kind));
        }
        assert_eq!(ErrorKind::from_u32(0), None);
        assert_eq!(ErrorKind::from_name("fenced"), None);
    }

    #[test]
    fn every_variant_has_its_kind() {
        let cases: Vec<(Error, ErrorKind)> = vec![
            (FormatError::new(Part::Key, "x").into(), ErrorKind::Format),
            (
                EncodeError {
                    part: Part::Key,
                    field: "role",
                    message: "x".into(),
                }
                .into(),
                ErrorKind::Encode,
            ),
            (
                Error::InvalidArgument("x".into()),
                ErrorKind::InvalidArgument,
            ),
            (Error::Fenced("x".into()), ErrorKind::Fenced),
            (Error::transient("x", "y"), ErrorKind::Transient),
            (Error::fatal("x", "y"), ErrorKind::Fatal),
            (Error::Resigned, ErrorKind::Resigned),
            (Error::Cancelled, ErrorKind::Cancelled),
            (Error::LeaseExpired("x".into()), ErrorKind::LeaseExpired),
            (
                Error::OutcomeUnknown {
                    context: "x".into(),
                    source: "y".into(),
                },
                ErrorKind::OutcomeUnknown,
            ),
        ];
        for (e, kind) in cases {
            assert_eq!(e.kind(), kind, "{e}");
        }
    }

    #[test]
    fn quote_cuts_long_inputs() {
        assert_eq!(quote("billing"), "\"billing\"");
        let long = "r".repeat(40_000);
        let q = quote(&long);
        assert!(q.len() < 100, "{q}");
        assert!(q.ends_with("... (40000 bytes)"), "{q}");
    }

    #[test]
    fn a_shared_error_keeps_the_cause_chain() {
        let inner = Error::transient("renewing", std::io::Error::other("connection refused"));
        let outer = Error::fatal(
            "the leadership ended",
            SharedError(std::sync::Arc::new(inner)),
        );
        let chain: Vec<String> =
            std::iter::successors(Some(&outer as &(dyn std::error::Error + 'static)), |e| {
                e.source()
            })
            .map(|e| e.to_string())
            .collect();
        assert!(chain.iter().any(|s| s == "connection refused"), "{chain:?}");
    }
}
