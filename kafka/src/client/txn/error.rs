//! What a transactional request's answer means: [`TxnError`], what the
//! writer does next, read from the error codes by the table of
//! [`crate::codes`].

use super::*;
use crate::client::retry::Next;

/// How a transactional request failed, and what the writer does next. `E`
/// is the error type of the refusals; a caller with errors of its own maps
/// them with [`TxnError::map_err`].
#[derive(Debug)]
pub enum TxnError<E = Error> {
    /// A newer epoch of the transactional id exists (INVALID_PRODUCER_EPOCH,
    /// PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING): the term is over.
    Fenced(String),
    /// No answer, or an answer that may change (a moved leader or
    /// coordinator, too few in-sync replicas): the request may or may not
    /// have been carried out; send the same request again after a pause.
    Retry(String),
    /// CONCURRENT_TRANSACTIONS: the epoch's previous transaction is being
    /// completed (its markers written), which takes milliseconds; send the
    /// request again after a short pause.
    Busy(String),
    /// Refused, and certainly not carried out (no authorization, an unknown
    /// topic, a record the broker will not take): the transaction must be
    /// aborted; the epoch stays usable.
    Refused(E),
    /// The epoch cannot write any more (a broken sequence): the term ends.
    Broken(E),
    /// An EndTxn pinned to the broker that accepted the transaction found
    /// the transactional id's coordinator at another broker: nothing was
    /// sent. The message names both addresses.
    Moved(String),
}

impl<E> TxnError<E> {
    /// The same failure, its error mapped with `f`.
    pub fn map_err<F>(self, f: impl FnOnce(E) -> F) -> TxnError<F> {
        match self {
            TxnError::Fenced(why) => TxnError::Fenced(why),
            TxnError::Retry(why) => TxnError::Retry(why),
            TxnError::Busy(why) => TxnError::Busy(why),
            TxnError::Moved(why) => TxnError::Moved(why),
            TxnError::Refused(e) => TxnError::Refused(f(e)),
            TxnError::Broken(e) => TxnError::Broken(f(e)),
        }
    }
}

impl<E> From<TxnError<E>> for Next<TxnError<E>> {
    fn from(e: TxnError<E>) -> Self {
        match e {
            TxnError::Retry(why) => Next::Again(why),
            TxnError::Busy(why) => Next::Soon(why),
            other => Next::Stop(other),
        }
    }
}

impl From<Attempt> for TxnError {
    /// A request that did not get to an answer: what may pass is
    /// [`TxnError::Retry`] (the layer forgot a coordinator or leader that
    /// moved), a failure for good is [`TxnError::Refused`].
    fn from(a: Attempt) -> Self {
        match a {
            Attempt::Moved(why) | Attempt::NoAnswer(why) | Attempt::Again(why) => {
                TxnError::Retry(why)
            }
            Attempt::Busy(why) => TxnError::Busy(why),
            Attempt::Fail(e) => TxnError::Refused(e),
        }
    }
}

/// One attempt's result: the request layer's failures, or the request's
/// own answer (which may be a [`TxnError`]).
pub(in crate::client) type Answered<T> = Result<Result<T, TxnError>, Attempt>;

/// The answer of an [`Client::at`] attempt, flattened.
pub(in crate::client) fn settle<T>(answered: Answered<T>) -> Result<T, TxnError> {
    answered.unwrap_or_else(|a| Err(a.into()))
}

/// What error `code` of a request `api` to the coordinator means for the
/// writer; a coordinator that moved is [`Attempt::Moved`], so the layer
/// forgets it, and CONCURRENT_TRANSACTIONS is [`Attempt::Busy`], so the
/// layer keeps count of it.
pub(in crate::client) fn txn_error(
    api: ApiKey,
    code: i16,
    what: String,
) -> Result<TxnError, Attempt> {
    let said = || format!("{what}: {}", code_name(code));
    Ok(match codes::meaning(api, code) {
        Meaning::CoordinatorMoved => return Err(Attempt::Moved(said())),
        Meaning::Fenced => TxnError::Fenced(said()),
        // At the layer, so it counts how long the coordinator has been busy
        // (`Client::note_busy`); it reaches the caller as TxnError::Busy.
        Meaning::Busy => return Err(Attempt::Busy(said())),
        Meaning::Retry | Meaning::OutcomeUnknown | Meaning::LeaderMoved => TxnError::Retry(said()),
        Meaning::NoOpenTransaction => TxnError::Refused(Error::transient(
            what,
            format!(
                "{}: the coordinator has no such open transaction",
                code_name(code)
            ),
        )),
        Meaning::Missing(Resource::Topic) => TxnError::Refused(Error::InvalidArgument(said())),
        Meaning::Denied(Resource::Topic) => TxnError::Refused(Error::fatal(
            what,
            "not authorized to write a topic of the transaction (an ACL allowing WRITE on it is \
             needed)",
        )),
        Meaning::Denied(resource) => TxnError::Refused(Error::fatal(said(), denied(resource))),
        Meaning::GroupHasMembers => TxnError::Refused(Error::fatal(said(), GROUP_HAS_MEMBERS)),
        Meaning::Ok
        | Meaning::AlreadyWritten
        | Meaning::Missing(_)
        | Meaning::BrokenSequence
        | Meaning::Invalid
        | Meaning::NotAttempted
        | Meaning::OutOfRange
        | Meaning::Refused => {
            TxnError::Refused(Error::fatal(said(), "the broker refused the request"))
        }
    })
}
