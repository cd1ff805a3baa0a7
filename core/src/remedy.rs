//! What mends an error, as an action rather than as any language's call.
//!
//! An error whose message tells the caller what to do next (create the
//! state topic) carries a [`Remedy`] in its cause chain, wrapped in
//! [`Remedied`]. Its text names the call in the caller's own language: each
//! binding supplies a [`Spelling`] and renders the whole message with
//! [`render`]; Rust callers, and `Display`, get [`RustSpelling`].

use std::error::Error as StdError;
use std::fmt;

/// An action that mends an error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Remedy {
    /// Create the (compacted) state topic `topic` with `partitions`
    /// partitions, the client's partition count, before members join.
    EnsureStateTopic {
        /// The state topic's name.
        topic: String,
        /// The partition count every member uses, when the error knows it
        /// (a reader of one partition does not).
        partitions: Option<i32>,
    },
}

/// How a caller's language spells the calls a [`Remedy`] names.
pub trait Spelling {
    /// The call that creates the state topic with the production defaults,
    /// on a client of `partitions` partitions (`None`: the client's count,
    /// not known where the error arose).
    fn ensure_state_topic(&self, partitions: Option<i32>) -> String;
    /// The same call for a single-broker development cluster.
    fn ensure_state_topic_development(&self, partitions: Option<i32>) -> String;
}

/// Rust's calls (the core's API).
#[derive(Debug, Clone, Copy, Default)]
pub struct RustSpelling;

impl Spelling for RustSpelling {
    fn ensure_state_topic(&self, partitions: Option<i32>) -> String {
        match partitions {
            Some(n) => {
                format!("Client::ensure_state_topic(TopicSpec::default().with_partitions({n}))")
            }
            None => "Client::ensure_state_topic(TopicSpec::default())".into(),
        }
    }
    fn ensure_state_topic_development(&self, partitions: Option<i32>) -> String {
        match partitions {
            Some(n) => format!("TopicSpec::development().with_partitions({n})"),
            None => "TopicSpec::development()".into(),
        }
    }
}

impl Remedy {
    /// What to do, naming the call as `spelling` writes it.
    pub fn text(&self, spelling: &dyn Spelling) -> String {
        match self {
            Remedy::EnsureStateTopic { topic, partitions } => format!(
                "create it before members join, with {} ({} on a single broker), or with \
                 kafka-topics.sh --create --topic {topic} --partitions {} --config \
                 cleanup.policy=compact",
                spelling.ensure_state_topic(*partitions),
                spelling.ensure_state_topic_development(*partitions),
                partitions.map_or("<the client's partition count>".to_owned(), |n| n
                    .to_string()),
            ),
        }
    }
}

/// A [`Remedy`] as the cause of an error. `Display` spells it in Rust;
/// [`render`] in the caller's language.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remedied(pub Remedy);

impl fmt::Display for Remedied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.text(&RustSpelling))
    }
}

impl StdError for Remedied {}

/// `e` with the partition count filled into its state-topic remedy when the
/// error did not know it (a reader of one partition): the caller that knows
/// the client's count (an observer) gives it. Any other error is returned as
/// it is.
pub fn with_partitions(e: crate::Error, partitions: i32) -> crate::Error {
    match e {
        crate::Error::Fatal { context, source } => {
            let source = match source.downcast::<Remedied>() {
                Ok(r) => match *r {
                    Remedied(Remedy::EnsureStateTopic {
                        topic,
                        partitions: None,
                    }) => Box::new(Remedied(Remedy::EnsureStateTopic {
                        topic,
                        partitions: Some(partitions),
                    })),
                    other => Box::new(other),
                },
                Err(other) => other,
            };
            crate::Error::Fatal { context, source }
        }
        other => other,
    }
}

/// The first [`Remedy`] in the cause chain of `e` (`e` included), if any.
pub fn remedy_of<'a>(e: &'a (dyn StdError + 'static)) -> Option<&'a Remedy> {
    std::iter::successors(Some(e), |c: &&(dyn StdError + 'static)| (*c).source())
        .find_map(|c| c.downcast_ref::<Remedied>())
        .map(|r| &r.0)
}

/// The message of `e` (its `Display`, which includes its causes) with every
/// remedy in its chain naming the call as `spelling` writes it.
pub fn render(e: &(dyn StdError + 'static), spelling: &dyn Spelling) -> String {
    let mut out = e.to_string();
    for link in std::iter::successors(Some(e), |c: &&(dyn StdError + 'static)| (*c).source()) {
        if let Some(r) = link.downcast_ref::<Remedied>() {
            out = out.replace(&r.to_string(), &r.0.text(spelling));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    struct Python;
    impl Spelling for Python {
        fn ensure_state_topic(&self, _: Option<i32>) -> String {
            "client.ensure_state_topic()".into()
        }
        fn ensure_state_topic_development(&self, _: Option<i32>) -> String {
            "client.ensure_state_topic(development=True)".into()
        }
    }

    fn missing() -> Error {
        Error::fatal(
            "state topic t does not exist",
            Remedied(Remedy::EnsureStateTopic {
                topic: "t".into(),
                partitions: Some(16),
            }),
        )
    }

    #[test]
    fn a_remedy_names_the_callers_own_call() {
        let e = missing();
        let rust = e.to_string();
        assert!(rust.contains("Client::ensure_state_topic("), "{rust}");
        let python = render(&e, &Python);
        assert!(
            python.contains("with client.ensure_state_topic() ("),
            "{python}"
        );
        assert!(
            python.contains("client.ensure_state_topic(development=True)"),
            "{python}"
        );
        assert!(
            !python.contains("::") && !python.contains("TopicSpec"),
            "{python}"
        );
        assert!(python.contains("--partitions 16"), "{python}");
    }

    #[test]
    fn a_reader_s_remedy_gets_the_client_s_partition_count() {
        let e = Error::fatal(
            "state topic t does not exist",
            Remedied(Remedy::EnsureStateTopic {
                topic: "t".into(),
                partitions: None,
            }),
        );
        assert!(
            e.to_string().contains("<the client's partition count>"),
            "{e}"
        );
        let e = with_partitions(e, 4);
        assert_eq!(
            remedy_of(&e),
            Some(&Remedy::EnsureStateTopic {
                topic: "t".into(),
                partitions: Some(4)
            })
        );
        assert!(e.to_string().contains("--partitions 4 "), "{e}");
        assert_eq!(
            with_partitions(Error::Cancelled, 4).kind(),
            crate::ErrorKind::Cancelled
        );
    }

    #[test]
    fn a_remedy_is_found_below_shared_and_wrapping_errors() {
        let shared = crate::SharedError(std::sync::Arc::new(missing()));
        let outer = Error::transient("acquiring role r", shared);
        assert_eq!(
            remedy_of(&outer),
            Some(&Remedy::EnsureStateTopic {
                topic: "t".into(),
                partitions: Some(16)
            })
        );
        let python = render(&outer, &Python);
        assert!(
            python.starts_with("transient acquiring role r: "),
            "{python}"
        );
        assert!(!python.contains("TopicSpec"), "{python}");
        assert_eq!(remedy_of(&Error::Cancelled), None);
    }
}
