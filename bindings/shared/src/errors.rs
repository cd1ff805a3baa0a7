//! The error-kind table every binding maps from: a binding chooses its
//! exception (class, code, enum value) by [`ErrorKind`], never by message
//! text, and documents it with the same description.
//!
//! * [`KINDS`]: each kind's stable name (`FENCED`), a description for
//!   documentation and docstrings, and whether retrying may help.
//! * [`details`]: the structured parts of an error that a binding attaches
//!   to its exception (the record part and field of a format or encode
//!   error).
//! * [`PARTS`]: the record parts, as every binding spells them.
//! * [`causes`]: the `source()` chain of an error, for bindings that rebuild
//!   it (Python's `__cause__`).
//! * [`message`]: an error's text in the caller's terms: the calls it names
//!   spelt in the binding's language ([`Caller`]), no kind word that the
//!   binding's class already says.

use std::error::Error as StdError;

use krabka_coordination::remedy::{render, Spelling};
use krabka_coordination::{Error, ErrorKind, Part};

/// What every binding says about one [`ErrorKind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindInfo {
    /// The kind.
    pub kind: ErrorKind,
    /// The stable upper-case name ([`ErrorKind::name`]).
    pub name: &'static str,
    /// One description for every binding's documentation.
    pub description: &'static str,
    /// True when retrying the operation may succeed.
    pub retryable: bool,
}

/// Every kind the core has, in value order.
pub const KINDS: [KindInfo; 10] = [
    KindInfo {
        kind: ErrorKind::Format,
        name: "FORMAT",
        description: "Malformed record bytes. The error names the record part that failed to \
                      decode (\"key\", \"registration value\" or \"lease value\"), and its message \
                      the field, the byte offset and the reason.",
        retryable: false,
    },
    KindInfo {
        kind: ErrorKind::Encode,
        name: "ENCODE",
        description: "A value the frozen record layout cannot hold (an empty or over-long role \
                      or member). The error names the record part and the field; encoding \
                      refuses rather than truncating.",
        retryable: false,
    },
    KindInfo {
        kind: ErrorKind::InvalidArgument,
        name: "INVALID_ARGUMENT",
        description: "An argument, option or setting that is refused; the message names it and \
                      the value.",
        retryable: false,
    },
    KindInfo {
        kind: ErrorKind::Fenced,
        name: "FENCED",
        description: "A newer epoch of the role exists: the broker rejected a write of this \
                      member's superseded epoch, or the member lost its epoch otherwise. Stop the \
                      work of the role.",
        retryable: false,
    },
    KindInfo {
        kind: ErrorKind::Transient,
        name: "TRANSIENT",
        description: "A transient failure (a broker unreachable, a timeout, a coordinator \
                      moving); the operation may be retried. The cause is attached.",
        retryable: true,
    },
    KindInfo {
        kind: ErrorKind::Fatal,
        name: "FATAL",
        description: "A failure that retrying will not mend (authorization, configuration, a \
                      topic of the wrong shape, a handle used in a process that did not make \
                      it). The cause is attached.",
        retryable: false,
    },
    KindInfo {
        kind: ErrorKind::Resigned,
        name: "RESIGNED",
        description: "The leadership was given up by resign.",
        retryable: false,
    },
    KindInfo {
        kind: ErrorKind::Cancelled,
        name: "CANCELLED",
        description: "The operation was cancelled before it finished.",
        retryable: false,
    },
    KindInfo {
        kind: ErrorKind::LeaseExpired,
        name: "LEASE_EXPIRED",
        description: "The leader's own lease ran out: no renewal committed within the lease \
                      duration (on the monotonic clock), so a standby may have taken over. The \
                      term is over; stop the work of the role, including work done outside Kafka.",
        retryable: false,
    },
    KindInfo {
        kind: ErrorKind::OutcomeUnknown,
        name: "OUTCOME_UNKNOWN",
        description: "A write whose commit was sent but not confirmed (a timeout, a fence at \
                      the commit): it may or may not have committed. The cause is attached; a \
                      fenced cause means a newer epoch exists.",
        retryable: false,
    },
];

/// What a binding says about a kind this table does not know yet (a kind
/// added to the core after the binding was built): the base error.
pub const UNKNOWN_KIND: &str = "An error of a kind this binding does not know yet.";

/// The table entry of `kind`, or `None` for a kind newer than this table.
pub fn info(kind: ErrorKind) -> Option<&'static KindInfo> {
    KINDS.iter().find(|k| k.kind == kind)
}

/// Every record part and its name, as the golden vectors and every binding
/// spell it.
pub const PARTS: [(Part, &str); 3] = [
    (Part::Key, "key"),
    (Part::RegistrationValue, "registration value"),
    (Part::LeaseValue, "lease value"),
];

/// The name of a record part (`"key"`, `"registration value"`, `"lease value"`).
pub fn part_name(part: Part) -> &'static str {
    part.as_str()
}

/// The structured parts of an error a binding attaches to its exception.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Details {
    /// The error's kind.
    pub kind: ErrorKind,
    /// The record part of a format or encode error.
    pub part: Option<&'static str>,
    /// The field of an encode error (`"role"`, `"member"`).
    pub field: Option<&'static str>,
}

/// The kind, part and field of `e`.
pub fn details(e: &Error) -> Details {
    let (part, field) = match e {
        Error::Format(f) => (Some(part_name(f.part)), None),
        Error::Encode(f) => (Some(part_name(f.part)), Some(f.field)),
        _ => (None, None),
    };
    Details {
        kind: e.kind(),
        part,
        field,
    }
}

/// The argument an [`Error::InvalidArgument`] refused, when its message is
/// about one argument: the message starts with a field's name and a space
/// (`role must not be empty`, `partitions must be at least 1`). A refusal of
/// how several relate (`lease duration (3 s) must exceed ...`) and any other
/// kind give `None`.
pub fn argument_field(e: &Error) -> Option<&'static str> {
    let Error::InvalidArgument(message) = e else {
        return None;
    };
    let first = message.split(' ').next()?;
    crate::args::Field::ALL
        .iter()
        .map(|f| f.name())
        .find(|name| *name == first && message.len() > first.len())
}

/// The `source()` chain below `e` (not `e` itself), outermost first.
pub fn causes<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(e.source(), |c| (*c).source())
}

/// The language a binding's caller writes: how a message spells the calls
/// it names (a [`krabka_coordination::Remedy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// The Python binding.
    Python,
    /// The Node binding (JavaScript and TypeScript).
    Node,
    /// The C ABI.
    C,
    /// The Kotlin and Java API (bindings/uniffi).
    Jvm,
    /// The `krabka` command line.
    Cli,
}

impl Spelling for Caller {
    fn ensure_state_topic(&self, partitions: Option<i32>) -> String {
        match self {
            Caller::Python => "client.ensure_state_topic()".into(),
            Caller::Node | Caller::Jvm => "client.ensureStateTopic()".into(),
            Caller::C => "krabka_client_ensure_state_topic()".into(),
            Caller::Cli => format!("krabka topic ensure{}", cli_partitions(partitions)),
        }
    }

    fn ensure_state_topic_development(&self, partitions: Option<i32>) -> String {
        match self {
            Caller::Python => "client.ensure_state_topic(development=True)".into(),
            Caller::Node => "client.ensureStateTopic({ development: true })".into(),
            Caller::Jvm => "client.ensureStateTopic(TopicOptions(development = true))".into(),
            Caller::C => {
                "krabka_client_ensure_state_topic() with options.development = true".into()
            }
            Caller::Cli => format!(
                "krabka topic ensure{} --replication-factor 1 --min-insync-replicas 1",
                cli_partitions(partitions)
            ),
        }
    }
}

/// ` --partitions N` when the count is known.
fn cli_partitions(partitions: Option<i32>) -> String {
    partitions.map_or(String::new(), |n| format!(" --partitions {n}"))
}

/// The text of `e` for `caller`: its message with its causes, every call it
/// names in the caller's language, and without the `invalid argument: `
/// that the binding's class (`InvalidArgumentError`) already says.
pub fn message(e: &(dyn StdError + 'static), caller: Caller) -> String {
    if let Some(Error::InvalidArgument(m)) = e.downcast_ref::<Error>() {
        return m.clone();
    }
    render(e, &caller)
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_coordination::{EncodeError, FormatError, SharedError};
    use std::sync::Arc;

    #[test]
    fn the_table_covers_every_kind_in_value_order() {
        assert_eq!(KINDS.len(), ErrorKind::ALL.len());
        for (info, kind) in KINDS.iter().zip(ErrorKind::ALL) {
            assert_eq!(info.kind, kind);
            assert_eq!(info.name, kind.name());
            assert!(info.description.ends_with('.'), "{}", info.name);
            assert!(
                !info.description.contains("  "),
                "{}: double space",
                info.name
            );
            assert_eq!(super::info(kind), Some(info));
        }
        let retryable: Vec<_> = KINDS
            .iter()
            .filter(|k| k.retryable)
            .map(|k| k.name)
            .collect();
        assert_eq!(retryable, ["TRANSIENT"]);
    }

    #[test]
    fn an_argument_refusal_names_its_field_when_it_is_about_one() {
        let invalid = |m: &str| Error::InvalidArgument(m.into());
        assert_eq!(
            argument_field(&invalid("role must not be empty")),
            Some("role")
        );
        assert_eq!(
            argument_field(&invalid("min_insync_replicas must be at most 3")),
            Some("min_insync_replicas")
        );
        assert_eq!(
            argument_field(&invalid(
                "lease duration (3s) must exceed the renew interval (10s)"
            )),
            None
        );
        assert_eq!(argument_field(&invalid("role")), None);
        assert_eq!(argument_field(&Error::Resigned), None);
    }

    #[test]
    fn parts_are_spelled_as_the_core_spells_them() {
        for (part, name) in PARTS {
            assert_eq!(part_name(part), name);
            assert_eq!(Part::from_name(name), Some(part));
        }
    }

    #[test]
    fn details_of_each_kind() {
        let format: Error = FormatError::new(Part::LeaseValue, "short").into();
        assert_eq!(
            details(&format),
            Details {
                kind: ErrorKind::Format,
                part: Some("lease value"),
                field: None
            }
        );
        let encode: Error = EncodeError {
            part: Part::Key,
            field: "role",
            message: "empty".into(),
        }
        .into();
        assert_eq!(
            details(&encode),
            Details {
                kind: ErrorKind::Encode,
                part: Some("key"),
                field: Some("role")
            }
        );
        let fenced = Error::Fenced("newer epoch".into());
        assert_eq!(
            details(&fenced),
            Details {
                kind: ErrorKind::Fenced,
                part: None,
                field: None
            }
        );
    }

    #[test]
    fn causes_walks_the_whole_chain() {
        let root = Error::transient("renewing", std::io::Error::other("connection refused"));
        let outer = Error::fatal("the leadership ended", SharedError(Arc::new(root)));
        let chain: Vec<String> = causes(&outer).map(|c| c.to_string()).collect();
        assert_eq!(
            chain,
            [
                "transient renewing: connection refused",
                "connection refused"
            ]
        );
        assert_eq!(causes(&Error::Cancelled).count(), 0);
    }

    fn missing_state_topic() -> Error {
        krabka_coordination::Error::fatal(
            "state topic t does not exist",
            krabka_coordination::Remedied(krabka_coordination::Remedy::EnsureStateTopic {
                topic: "t".into(),
                partitions: Some(16),
            }),
        )
    }

    #[test]
    fn each_caller_reads_its_own_call() {
        let e = missing_state_topic();
        for (caller, call) in [
            (Caller::Python, "client.ensure_state_topic()"),
            (Caller::Node, "client.ensureStateTopic()"),
            (Caller::Jvm, "client.ensureStateTopic()"),
            (Caller::C, "krabka_client_ensure_state_topic()"),
            (Caller::Cli, "krabka topic ensure --partitions 16"),
        ] {
            let m = message(&e, caller);
            assert!(m.contains(&format!("with {call} (")), "{caller:?}: {m}");
            assert!(
                !m.contains("::") && !m.contains("TopicSpec") && !m.contains("with_"),
                "{caller:?}: {m}"
            );
        }
    }

    #[test]
    fn an_invalid_argument_is_not_prefixed_with_its_kind() {
        let e = Error::InvalidArgument("role must not be empty".into());
        assert_eq!(message(&e, Caller::Python), "role must not be empty");
        let wrapped = Error::fatal("starting", e);
        assert_eq!(
            message(&wrapped, Caller::Node),
            "fatal starting: invalid argument: role must not be empty"
        );
    }
}
