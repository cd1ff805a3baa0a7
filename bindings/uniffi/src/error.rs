//! The error enum of the bindings: one case per core error kind, chosen by
//! the kind and the record part ([`krabka_coordination_bindings::errors`]),
//! never by message text.
//!
//! In Kotlin it is the sealed class `KrabkaException` (`catch (e:
//! KrabkaException.Fenced)`), in Swift the enum `KrabkaError`. A fenced
//! leadership and each malformed record part are cases of their own; every
//! case carries the core's message in `detail`.

use krabka_coordination::{Error, Part};
use krabka_coordination_bindings::errors::{self, Caller};

/// Every error of the bindings (see the module documentation). The
/// descriptions are the shared table's (the shared table of error kinds).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, uniffi::Error)]
pub enum KrabkaError {
    /// Malformed bytes of a record key (the core's `FORMAT`, part "key"):
    /// the detail names the field, the byte offset and the reason.
    #[error("malformed key: {detail}")]
    MalformedKey {
        /// What failed, for people.
        detail: String,
    },
    /// Malformed bytes of a registration value (`FORMAT`, part
    /// "registration value").
    #[error("malformed registration value: {detail}")]
    MalformedRegistration {
        /// What failed, for people.
        detail: String,
    },
    /// Malformed bytes of a lease value (`FORMAT`, part "lease value").
    #[error("malformed lease value: {detail}")]
    MalformedLease {
        /// What failed, for people.
        detail: String,
    },
    /// A value the frozen record layout cannot hold (`ENCODE`): an empty or
    /// over-long role or member. Encoding refuses rather than truncating.
    #[error("cannot encode {part}: {detail}")]
    Encode {
        /// The record part: "key", "registration value" or "lease value".
        part: String,
        /// The field: "role" or "member".
        field: String,
        /// The core's message.
        detail: String,
    },
    /// An argument, option or setting that is refused (`INVALID_ARGUMENT`);
    /// the detail names it and the value.
    #[error("{detail}")]
    InvalidArgument {
        /// The core's message.
        detail: String,
    },
    /// A newer epoch of the role exists (`FENCED`): the broker rejected a
    /// write of this member's superseded epoch. Stop the work of the role.
    #[error("{detail}")]
    Fenced {
        /// The core's message.
        detail: String,
    },
    /// A transient failure (`TRANSIENT`): a broker unreachable, a timeout,
    /// a coordinator moving. The operation may be retried.
    #[error("{detail}")]
    Transient {
        /// The core's message, with its causes.
        detail: String,
    },
    /// A failure that retrying will not mend (`FATAL`): authorization,
    /// configuration, a topic of the wrong shape, a closed client.
    #[error("{detail}")]
    Fatal {
        /// The core's message, with its causes.
        detail: String,
    },
    /// The leadership was given up by resign (`RESIGNED`).
    #[error("{detail}")]
    Resigned {
        /// The core's message.
        detail: String,
    },
    /// The operation was cancelled before it finished (`CANCELLED`).
    #[error("{detail}")]
    Cancelled {
        /// The core's message.
        detail: String,
    },
    /// The leader's own lease ran out (`LEASE_EXPIRED`): a standby may have
    /// taken over. The term is over; stop the work of the role.
    #[error("{detail}")]
    LeaseExpired {
        /// The core's message.
        detail: String,
    },
    /// A write whose commit was sent but not confirmed (`OUTCOME_UNKNOWN`):
    /// it may or may not have committed.
    #[error("{detail}")]
    OutcomeUnknown {
        /// The core's message, with its causes.
        detail: String,
    },
}

/// The core's error kinds, as a plain enum (the kind of a [`TermEnd`]
/// reason, and of every `KrabkaException` through `errorKind`).
///
/// [`TermEnd`]: crate::TermEnd
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum ErrorKind {
    /// Malformed record bytes.
    Format,
    /// A value the record layout cannot hold.
    Encode,
    /// An invalid argument or option.
    InvalidArgument,
    /// A newer epoch exists: the broker fenced this member.
    Fenced,
    /// A failure that a retry may mend.
    Transient,
    /// A failure that a retry will not mend.
    Fatal,
    /// The leadership was resigned.
    Resigned,
    /// The operation was cancelled.
    Cancelled,
    /// The leader's own lease ran out.
    LeaseExpired,
    /// A write's commit was sent but not confirmed.
    OutcomeUnknown,
}

impl ErrorKind {
    /// The binding's kind of a core kind; a kind newer than this binding is
    /// [`ErrorKind::Fatal`].
    pub fn of(kind: krabka_coordination::ErrorKind) -> ErrorKind {
        use krabka_coordination::ErrorKind as K;
        match kind {
            K::Format => ErrorKind::Format,
            K::Encode => ErrorKind::Encode,
            K::InvalidArgument => ErrorKind::InvalidArgument,
            K::Fenced => ErrorKind::Fenced,
            K::Transient => ErrorKind::Transient,
            K::Fatal => ErrorKind::Fatal,
            K::Resigned => ErrorKind::Resigned,
            K::Cancelled => ErrorKind::Cancelled,
            K::LeaseExpired => ErrorKind::LeaseExpired,
            K::OutcomeUnknown => ErrorKind::OutcomeUnknown,
            _ => ErrorKind::Fatal,
        }
    }
}

/// The core's message of `e` with its causes (`transient renewing:
/// connection refused`), as every binding shows it.
fn message(e: &Error) -> String {
    let mut out = errors::message(e, Caller::Jvm);
    for cause in errors::causes(e) {
        let c = errors::message(cause, Caller::Jvm);
        if !out.contains(&c) {
            out.push_str(": ");
            out.push_str(&c);
        }
    }
    out
}

impl From<&Error> for KrabkaError {
    fn from(e: &Error) -> Self {
        let detail = message(e);
        match e {
            Error::Format(f) => {
                let detail = f.message.clone();
                match f.part {
                    Part::Key => KrabkaError::MalformedKey { detail },
                    Part::RegistrationValue => KrabkaError::MalformedRegistration { detail },
                    Part::LeaseValue => KrabkaError::MalformedLease { detail },
                }
            }
            // The message alone: it names the argument and the value, as in
            // every binding (`partitions must be an integer from 1 to ...`).
            Error::InvalidArgument(m) => KrabkaError::InvalidArgument { detail: m.clone() },
            Error::Encode(f) => KrabkaError::Encode {
                part: errors::part_name(f.part).to_owned(),
                field: f.field.to_owned(),
                detail: f.message.clone(),
            },
            _ => match ErrorKind::of(e.kind()) {
                ErrorKind::InvalidArgument => KrabkaError::InvalidArgument { detail },
                ErrorKind::Fenced => KrabkaError::Fenced { detail },
                ErrorKind::Transient => KrabkaError::Transient { detail },
                ErrorKind::Resigned => KrabkaError::Resigned { detail },
                ErrorKind::Cancelled => KrabkaError::Cancelled { detail },
                ErrorKind::LeaseExpired => KrabkaError::LeaseExpired { detail },
                ErrorKind::OutcomeUnknown => KrabkaError::OutcomeUnknown { detail },
                // Format and Encode are matched above by variant.
                ErrorKind::Format | ErrorKind::Encode | ErrorKind::Fatal => {
                    KrabkaError::Fatal { detail }
                }
            },
        }
    }
}

impl From<Error> for KrabkaError {
    fn from(e: Error) -> Self {
        KrabkaError::from(&e)
    }
}

impl From<krabka_coordination_bindings::ArgError> for KrabkaError {
    fn from(e: krabka_coordination_bindings::ArgError) -> Self {
        KrabkaError::InvalidArgument { detail: e.message }
    }
}

/// What a callback of the host (a `Logger`, an `OAuthTokenProvider`)
/// threw, other than a `KrabkaException` / `KrabkaError`: a transient
/// failure with its description.
impl From<uniffi::UnexpectedUniFFICallbackError> for KrabkaError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        KrabkaError::Transient { detail: e.reason }
    }
}

impl KrabkaError {
    /// The core kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            KrabkaError::MalformedKey { .. }
            | KrabkaError::MalformedRegistration { .. }
            | KrabkaError::MalformedLease { .. } => ErrorKind::Format,
            KrabkaError::Encode { .. } => ErrorKind::Encode,
            KrabkaError::InvalidArgument { .. } => ErrorKind::InvalidArgument,
            KrabkaError::Fenced { .. } => ErrorKind::Fenced,
            KrabkaError::Transient { .. } => ErrorKind::Transient,
            KrabkaError::Fatal { .. } => ErrorKind::Fatal,
            KrabkaError::Resigned { .. } => ErrorKind::Resigned,
            KrabkaError::Cancelled { .. } => ErrorKind::Cancelled,
            KrabkaError::LeaseExpired { .. } => ErrorKind::LeaseExpired,
            KrabkaError::OutcomeUnknown { .. } => ErrorKind::OutcomeUnknown,
        }
    }
}

/// The core kind of `error` (for code that handles kinds rather than cases).
#[uniffi::export]
pub fn error_kind(error: KrabkaError) -> ErrorKind {
    error.kind()
}

/// Whether retrying the operation that failed with an error of `kind` may
/// succeed (the shared table's answer: only transient failures).
#[uniffi::export]
pub fn is_retryable(kind: ErrorKind) -> bool {
    kind == ErrorKind::Transient
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_coordination::{EncodeError, FormatError};

    #[test]
    fn cases_follow_kinds_and_parts() {
        for (part, want) in [
            (Part::Key, "MalformedKey"),
            (Part::RegistrationValue, "MalformedRegistration"),
            (Part::LeaseValue, "MalformedLease"),
        ] {
            let e = KrabkaError::from(Error::from(FormatError::new(part, "short")));
            assert!(format!("{e:?}").starts_with(want), "{e:?}");
            assert_eq!(e.kind(), ErrorKind::Format);
        }
        let e = KrabkaError::from(Error::from(EncodeError {
            part: Part::Key,
            field: "role",
            message: "is empty".into(),
        }));
        assert_eq!(
            e,
            KrabkaError::Encode {
                part: "key".into(),
                field: "role".into(),
                detail: "is empty".into()
            }
        );
        let e = KrabkaError::from(Error::Fenced("newer epoch".into()));
        assert_eq!(e.kind(), ErrorKind::Fenced);
        assert_eq!(e.to_string(), "fenced: newer epoch");
        for kind in krabka_coordination::ErrorKind::ALL {
            let info = errors::info(kind).expect("in the table");
            assert_eq!(is_retryable(ErrorKind::of(kind)), info.retryable);
        }
    }

    #[test]
    fn causes_are_kept_in_the_detail() {
        let e = Error::transient("renewing", std::io::Error::other("connection refused"));
        let k = KrabkaError::from(&e);
        assert_eq!(k.kind(), ErrorKind::Transient);
        assert!(k.to_string().contains("connection refused"), "{k}");
    }
}
