//! What a broker must speak for this client ([`Client::check_versions`]),
//! asked once before a member registers, so that a broker too old is a
//! clear error at start rather than a failure at the first resign or
//! describe.
//!
//! Kafka does not report its own version; what the broker speaks does
//! (the ApiVersions answer of every connection). The check reads it from
//! one bootstrap broker's connection: a cluster in the middle of an
//! upgrade may have brokers of two versions, and the others are met by the
//! requests themselves, which name the request and the versions.

use super::*;

/// A request the client sends, the lowest version it needs, and the Kafka
/// release that brought it.
struct Need {
    key: ApiKey,
    least: i16,
    since: &'static str,
}

/// Every request a member sends, at the versions the request modules ask.
const NEEDED: &[Need] = &[
    Need {
        key: ApiKey::FindCoordinator,
        least: 0,
        since: "0.11",
    },
    Need {
        key: ApiKey::Metadata,
        least: 1,
        since: "0.10",
    },
    Need {
        key: ApiKey::ListOffsets,
        least: 2,
        since: "0.11",
    },
    Need {
        key: ApiKey::Fetch,
        least: 4,
        since: "0.11",
    },
    Need {
        key: ApiKey::Produce,
        least: 3,
        since: "0.11",
    },
    Need {
        key: ApiKey::AddPartitionsToTxn,
        least: 0,
        since: "0.11",
    },
    Need {
        key: ApiKey::EndTxn,
        least: 0,
        since: "0.11",
    },
    // The resign's conditional epoch bump (KIP-360).
    Need {
        key: ApiKey::InitProducerId,
        least: 3,
        since: "2.5",
    },
    // The commit proof of a moved coordinator.
    Need {
        key: ApiKey::DescribeProducers,
        least: 0,
        since: "2.8",
    },
    // describe_leadership, the resign's check, the abort's proof.
    Need {
        key: ApiKey::DescribeTransactions,
        least: 0,
        since: "3.0",
    },
    // A guarded write's input offsets in its transaction.
    Need {
        key: ApiKey::AddOffsetsToTxn,
        least: 0,
        since: "0.11",
    },
    Need {
        key: ApiKey::TxnOffsetCommit,
        least: 0,
        since: "0.11",
    },
    // The committed offsets a new leader resumes from (`require_stable`).
    Need {
        key: ApiKey::OffsetFetch,
        least: 7,
        since: "2.5",
    },
];

/// Broker-side transaction verification (KIP-890 part 1): the partition
/// leader asks the coordinator whether a transactional write's partition
/// was added, so a write delayed in the network cannot land after its
/// transaction ended. Brokers advertise it as AddPartitionsToTxn v4
/// (Kafka 3.6).
const VERIFICATION: i16 = 4;

/// What [`Client::check_versions`] found of a broker that speaks every
/// request a member sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versions {
    /// The address of the bootstrap broker asked.
    pub broker: String,
    /// Whether it advertises broker-side transaction verification
    /// (AddPartitionsToTxn v4, Kafka 3.6). Kafka 3.6 and later can still
    /// have it turned off (`transaction.partition.verification.enable`),
    /// which only the broker's configuration shows.
    pub verification: bool,
}

impl Client {
    /// Refuses a cluster whose bootstrap broker does not speak a request a
    /// member sends ([`Error::Fatal`] naming the broker, each request with
    /// the version needed and the Kafka release that brought it), and
    /// returns what it speaks of the rest ([`Versions`]). An unreachable
    /// cluster is [`Error::Transient`] within the operation timeout.
    pub async fn check_versions(&self) -> Result<Versions> {
        let (deadline, budget) = self.deadline(self.inner.timeout);
        self.retrying(
            || "checking the request versions the brokers speak".to_owned(),
            deadline,
            budget,
            Backoff::LOOKUP,
            || {
                self.at_bootstrap(deadline, |at| async move {
                    let missing: Vec<String> = NEEDED
                        .iter()
                        .filter(|n| at.supports(n.key, (n.least, i16::MAX)).is_none())
                        .map(|n| format!("{:?} v{} or newer (Kafka {})", n.key, n.least, n.since))
                        .collect();
                    if !missing.is_empty() {
                        return Err(Attempt::Fail(Error::fatal(
                            format!("the broker at {}", at.addr),
                            format!(
                                "it does not speak {}: the cluster is too old for this client, \
                                 which needs Kafka 3.6 or newer",
                                missing.join(", ")
                            ),
                        )));
                    }
                    Ok(Versions {
                        broker: at.addr.clone(),
                        verification: at
                            .supports(ApiKey::AddPartitionsToTxn, (VERIFICATION, i16::MAX))
                            .is_some(),
                    })
                })
            },
        )
        .await
    }
}
