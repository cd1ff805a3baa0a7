//! What one attempt's answer means: [`Attempt`], and the error codes read
//! as attempts by the one table of [`crate::codes`].

use crate::client::retry::Next;
use crate::client::*;

/// Why one attempt did not answer, and what the next one does.
#[derive(Debug)]
pub(crate) enum Attempt {
    /// The target is elsewhere, or could not be reached: it is forgotten
    /// (see [`Client::at`]), and the next attempt looks it up again.
    Moved(String),
    /// The request was sent and got no answer in time (or its connection
    /// died): it may or may not have been carried out. The target is
    /// forgotten too.
    NoAnswer(String),
    /// The same broker may answer later: try again after a pause.
    Again(String),
    /// CONCURRENT_TRANSACTIONS: try again soon.
    Busy(String),
    /// Failed for good.
    Fail(Error),
}

impl From<Attempt> for Next<Error> {
    fn from(a: Attempt) -> Self {
        match a {
            Attempt::Moved(why) | Attempt::NoAnswer(why) | Attempt::Again(why) => Next::Again(why),
            Attempt::Busy(why) => Next::Soon(why),
            Attempt::Fail(e) => Next::Stop(e),
        }
    }
}

/// What an error code of `api` means for the attempt, by the table of
/// [`codes::meaning`]: a moved coordinator or leader is
/// [`Attempt::Moved`]; what may pass is [`Attempt::Again`] (or
/// [`Attempt::Busy`]); an authorization failure is [`Attempt::Fail`]
/// naming the resource; anything else is refused. `what` names the request
/// and the broker.
pub(in crate::client) fn attempt_for(api: ApiKey, code: i16, what: String) -> Attempt {
    let said = || format!("{what}: {}", code_name(code));
    match codes::meaning(api, code) {
        Meaning::CoordinatorMoved | Meaning::LeaderMoved => Attempt::Moved(said()),
        Meaning::Ok | Meaning::AlreadyWritten | Meaning::Retry => Attempt::Again(said()),
        Meaning::OutcomeUnknown => Attempt::NoAnswer(said()),
        Meaning::Busy => Attempt::Busy(said()),
        Meaning::Denied(resource) => Attempt::Fail(Error::fatal(said(), denied(resource))),
        Meaning::Missing(Resource::Topic) => Attempt::Fail(Error::InvalidArgument(format!(
            "{}: the topic does not exist",
            said()
        ))),
        Meaning::GroupHasMembers => Attempt::Fail(Error::fatal(said(), GROUP_HAS_MEMBERS)),
        Meaning::Fenced
        | Meaning::Missing(_)
        | Meaning::NoOpenTransaction
        | Meaning::BrokenSequence
        | Meaning::Invalid
        | Meaning::NotAttempted
        | Meaning::OutOfRange
        | Meaning::Refused => Attempt::Fail(Error::fatal(said(), "the broker refused the request")),
    }
}

/// One partition's error code in the answer to a request at a
/// partition's leader that reads the topic: nothing for no error,
/// [`Attempt::Fail`] naming `acl` when the principal may not read the
/// topic, else what the table says ([`attempt_for`]).
pub(in crate::client) fn read_answer(
    api: ApiKey,
    code: i16,
    what: String,
    acl: &str,
) -> Result<(), Attempt> {
    match codes::meaning(api, code) {
        Meaning::Ok => Ok(()),
        Meaning::Denied(Resource::Topic) => Err(Attempt::Fail(Error::fatal(
            what,
            format!("not authorized to read the topic ({acl})"),
        ))),
        _ => Err(attempt_for(api, code, what)),
    }
}

/// What a refusal meaning [`Meaning::GroupHasMembers`] asks of the caller.
pub(in crate::client) const GROUP_HAS_MEMBERS: &str =
    "the consumer group has members of its own (consumers that joined it with subscribe): \
     offsets are committed here without group membership, which the group coordinator \
     refuses while they hold it; use a group id that no consumer joins";

/// What an authorization failure on a `resource` needs.
pub(in crate::client) fn denied(resource: Resource) -> &'static str {
    match resource {
        Resource::TransactionalId => {
            "not authorized on the transactional id (the role): an ACL allowing DESCRIBE on \
             TransactionalId <role> is needed (and WRITE to lead it)"
        }
        Resource::Cluster => "not authorized on the cluster resource (kafka-cluster)",
        Resource::Topic => "not authorized on the topic",
        Resource::Group => "not authorized on the group",
    }
}
