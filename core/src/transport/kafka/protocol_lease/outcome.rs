//! The errors of the lease writer, and every mapping between its layers.
//!
//! One error type per boundary, each mapped here and nowhere else:
//!
//! | From (layer)                                   | To                   | Mapping |
//! |------------------------------------------------|----------------------|---------|
//! | [`krabka_kafka::Error`] (the client)           | the crate's [`Error`] | kind for kind, message and cause kept (`From` in `crate::error`) |
//! | [`krabka_kafka::TxnError`] (a transactional request) | [`TxnError`] | the same variant, its refusal as the crate's [`Error`] ([`retrying`]) |
//! | the client's `retry::Tried` (a retried request) | [`Tried`]           | the same variant, its failure as a [`TxnError`] ([`retrying`]) |
//! | [`TxnError`] that ends a step                  | [`Outcome`]          | [`ending`]: `Fenced` → `Drop(Fenced)`, "the epoch is superseded"; `Broken(e)` → `Drop(e)`; `Refused(e)` → `Keep(e)`; `Retry`, `Busy`, `Moved` → `Keep(Transient)` |
//! | a commit's [`Error`] when it may have been carried out | [`Error::OutcomeUnknown`] | [`outcome_unknown`]: the cause kept as its source |
//! | [`TxnError`], as words                         | a reason (`String`)  | [`reason`]: its message, or its error's |
//! | a placing or writable check's [`Error`]        | the write's [`Error`] | [`unsent`]: a transient one names the write and says nothing was sent; others as they are |
//! | [`Once`] (one try of a write)                  | [`Outcome`]          | `Ended(o)` → `o`; `Again` → the write's second try |
//! | [`Outcome`] (the writer's answer)              | the epoch's answer   | [`Outcome::at_epoch`]: `Keep(e)` → `e`, the writer stays; `Drop(e)` → `e`, the writer is dropped and every later write fails with [`Gone::error`] |
//! | the [`Outcome`] of aborting a transaction opened ahead, before a supersede | the supersede's answer | in `epoch.rs`: `Drop` of a fence → already superseded; any other → its error, the writer stays |
//!
//! What an error says, and its kind, is decided where it is made; a mapping
//! here adds context, never changes a kind.

use krabka_kafka::client::retry;
use tokio::time::Instant;

use crate::error::Error;

/// A transactional request's failure, its refusals in the crate's errors.
pub(crate) type TxnError = krabka_kafka::TxnError<Error>;

/// How a retried request ended within its deadline: the client's, its
/// refusals in the crate's errors.
pub(crate) type Tried<T> = retry::Tried<T, TxnError>;

/// How one failed step ends the write.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The epoch's writer is unusable: drop it and return this error.
    Drop(Error),
    /// The writer stays; return this error.
    Keep(Error),
}

/// How one try of a write ended short of success.
pub(crate) enum Once {
    /// The write ends so.
    Ended(Outcome),
    /// A partition refused the epoch's sequence and the transaction was
    /// aborted: try once more.
    Again,
}

impl From<Outcome> for Once {
    fn from(o: Outcome) -> Once {
        Once::Ended(o)
    }
}

/// Why an epoch's writer was dropped, for every later write of the epoch.
#[derive(Clone, Debug)]
pub(crate) enum Gone {
    /// Fenced: a newer epoch of the role exists.
    Fenced(String),
    /// Ended by an error the epoch cannot write past.
    Fatal(String),
}

impl Gone {
    /// The error of the write `what` of `role` after the writer was
    /// dropped: [`Error::Fenced`] with the fence's words, or
    /// [`Error::Fatal`] naming what ended the writer.
    pub(crate) fn error(&self, role: &str, what: &str) -> Error {
        match self {
            Gone::Fenced(why) => Error::Fenced(why.clone()),
            Gone::Fatal(why) => Error::fatal(
                context(role, what),
                format!("the epoch's producer was dropped after: {why}"),
            ),
        }
    }
}

impl Outcome {
    /// The epoch's answer for this outcome: the error returned to the
    /// caller, and, when the writer is dropped, why (fenced when the error
    /// means fenced, fatal otherwise).
    pub(crate) fn at_epoch(self) -> (Error, Option<Gone>) {
        match self {
            Outcome::Keep(e) => (e, None),
            Outcome::Drop(e) => {
                let gone = if e.means_fenced() {
                    Gone::Fenced(e.to_string())
                } else {
                    Gone::Fatal(e.to_string())
                };
                (e, Some(gone))
            }
        }
    }
}

/// Sends a transactional request again through the client's one retry loop
/// (after [`TxnError::Retry`] and [`TxnError::Busy`]) until `deadline`,
/// with the back-off of a held epoch's requests; its refusals come back as
/// the crate's errors.
pub(crate) async fn retrying<T, F, Fut>(deadline: Instant, request: F) -> Tried<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, krabka_kafka::TxnError>>,
{
    match retry::retry(deadline, retry::Backoff::TRANSACTION, request).await {
        retry::Tried::Done(v) => Tried::Done(v),
        retry::Tried::OutOfTime(why) => Tried::OutOfTime(why),
        retry::Tried::Failed(e) => Tried::Failed(e.map_err(Error::from)),
    }
}

/// The context of every error of the write `what` of `role`.
pub(crate) fn context(role: &str, what: &str) -> String {
    format!("{what} for role {}", crate::error::quote(role))
}

/// The error of a failure that ends the write (see the module's table).
pub(crate) fn ending(role: &str, what: &str, e: TxnError) -> Outcome {
    match e {
        TxnError::Fenced(why) => Outcome::Drop(Error::Fenced(format!(
            "{}: the epoch is superseded ({why})",
            context(role, what)
        ))),
        TxnError::Broken(e) => Outcome::Drop(e),
        TxnError::Refused(e) => Outcome::Keep(e),
        TxnError::Retry(why) | TxnError::Busy(why) | TxnError::Moved(why) => {
            Outcome::Keep(Error::transient(context(role, what), why))
        }
    }
}

/// The error of a commit of the write `what` of `role` whose outcome is
/// not known (an [`Error::OutcomeUnknown`] with `e` as its cause): it may
/// or may not have been carried out.
pub(crate) fn outcome_unknown(role: &str, what: &str, e: Error) -> Error {
    Error::OutcomeUnknown {
        context: format!("{}: commit", context(role, what)),
        source: Box::new(e),
    }
}

/// The reason of a failed request, in words.
pub(crate) fn reason(e: TxnError) -> String {
    match e {
        TxnError::Fenced(why)
        | TxnError::Retry(why)
        | TxnError::Busy(why)
        | TxnError::Moved(why) => why,
        TxnError::Refused(e) | TxnError::Broken(e) => e.to_string(),
    }
}

/// The error of a write that failed before it sent anything (placing its
/// records, or checking their partitions writable): a transient one names
/// the write and says nothing was sent; any other is returned as it is.
pub(crate) fn unsent(role: &str, what: &str, e: Error) -> Error {
    match e {
        Error::Transient { context: c, source } => Error::Transient {
            context: format!("{}: {c}; nothing was sent", context(role, what)),
            source,
        },
        other => other,
    }
}
