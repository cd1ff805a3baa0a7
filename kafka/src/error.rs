//! The errors of the Kafka client: what failed, and whether a retry may
//! mend it.
//!
//! The kinds are the ones a caller acts on: [`Error::InvalidArgument`] (a
//! bad input or setting, named), [`Error::Transient`] (a retry may pass),
//! [`Error::Fatal`] (no retry mends it: an authorization, a refused
//! credential, an untrusted certificate) and [`Error::Fenced`] (a newer
//! producer epoch exists). Every message names what was being done and the
//! broker's answer; none shows a password or a token.

use std::fmt;

/// A specialised `Result` of the client.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error of the Kafka client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument or setting is invalid; the message names the value.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A newer producer epoch of the transactional id exists
    /// (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING).
    #[error("fenced: {0}")]
    Fenced(String),
    /// A failure a retry may mend (a broker unreachable, a timeout, a
    /// coordinator moving).
    #[error("transient {context}: {source}")]
    Transient {
        /// What was being done.
        context: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A failure no retry mends (an authorization, a refused credential, an
    /// untrusted certificate, a broker too old).
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
    /// A transient error with `cause`.
    pub fn transient(
        context: impl Into<String>,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Error::Transient {
            context: context.into(),
            source: cause.into(),
        }
    }

    /// A fatal error with `cause`.
    pub fn fatal(
        context: impl Into<String>,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Error::Fatal {
            context: context.into(),
            source: cause.into(),
        }
    }

    /// True when retrying may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Transient { .. })
    }
}

/// `s` as Rust's debug quoting writes it, cut after its first 64 characters
/// (with the full length said): messages quote long inputs only in part.
pub fn quote(s: &str) -> String {
    const SHOWN: usize = 64;
    match s.char_indices().nth(SHOWN) {
        None => format!("{s:?}"),
        Some((cut, _)) => format!("{:?}... ({} bytes)", &s[..cut], s.len()),
    }
}

/// A producer id and epoch, as the transaction coordinator mints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProducerEpoch {
    /// The producer id of the transactional id.
    pub producer_id: i64,
    /// The epoch within that producer id.
    pub producer_epoch: i16,
}

impl ProducerEpoch {
    /// The producer id and epoch given.
    pub const fn new(producer_id: i64, producer_epoch: i16) -> Self {
        ProducerEpoch {
            producer_id,
            producer_epoch,
        }
    }
}

impl fmt::Display for ProducerEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.producer_id, self.producer_epoch)
    }
}

/// Refuses a consumer group id the group requests cannot carry: empty (the
/// group coordinator answers INVALID_GROUP_ID) or longer than a protocol
/// string ([`Error::InvalidArgument`] naming it).
pub fn check_group_id(group: &str) -> Result<()> {
    let why = if group.is_empty() {
        "must not be empty".to_owned()
    } else if group.len() > i16::MAX as usize {
        format!(
            "is {} bytes of UTF-8, over the limit of {}",
            group.len(),
            i16::MAX
        )
    } else {
        return Ok(());
    };
    Err(Error::InvalidArgument(format!(
        "consumer group id {} {why}",
        quote(group)
    )))
}

/// Refuses a transactional id the protocol cannot carry: empty, over
/// 32,767 bytes, or with a NUL byte ([`Error::InvalidArgument`] naming it).
pub fn check_transactional_id(id: &str) -> Result<()> {
    let why = if id.is_empty() {
        "must not be empty".to_owned()
    } else if id.len() > i16::MAX as usize {
        format!(
            "is {} bytes of UTF-8, over the limit of {}",
            id.len(),
            i16::MAX
        )
    } else if let Some(at) = id.find('\0') {
        format!("contains a NUL byte (at byte {at})")
    } else {
        return Ok(());
    };
    Err(Error::InvalidArgument(format!(
        "transactional id {} {why}",
        quote(id)
    )))
}
