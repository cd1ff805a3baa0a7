//! [`KafkaClient`]: the transport's handle on the project's Kafka
//! protocol client ([`krabka_kafka::Client`]), in the core's terms: roles
//! checked as the record layout checks them, fencing tokens, the core's
//! errors. A third party that only checks who is authoritative for a role
//! uses it directly; the transport's mints, lease writers and resigns use
//! the client beneath ([`KafkaClient::kafka`]).

use std::time::Duration;

use super::client_settings;
use super::config::KafkaConfig;
use crate::error::Result;
use crate::token::{FencingToken, NO_EPOCH};

/// What the transaction coordinator reports about one transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionDescription {
    /// The transactional id (the role).
    pub transactional_id: String,
    /// The coordinator's state of the id: `Empty`, `Ongoing`, `PrepareCommit`,
    /// `PrepareAbort`, `CompleteCommit`, `CompleteAbort`, `PrepareEpochFence`
    /// or `Dead`.
    pub state: String,
    /// The transaction timeout the last InitProducerId gave (the lease
    /// duration), in milliseconds.
    pub timeout_ms: i32,
    /// When the open transaction started (epoch milliseconds), or -1.
    pub start_time_ms: i64,
    /// The current producer id and epoch: the role's fencing token.
    pub token: FencingToken,
    /// The partitions of the open transaction, by topic.
    pub topics: Vec<(String, Vec<i32>)>,
}

impl From<krabka_kafka::TransactionDescription> for TransactionDescription {
    fn from(d: krabka_kafka::TransactionDescription) -> Self {
        TransactionDescription {
            transactional_id: d.transactional_id,
            state: d.state,
            timeout_ms: d.timeout_ms,
            start_time_ms: d.start_time_ms,
            token: d.producer.into(),
            topics: d.topics,
        }
    }
}

/// The answer to [`KafkaClient::bump_if_current`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BumpAnswer {
    /// The token was current; the coordinator bumped it to this one.
    Bumped(FencingToken),
    /// A newer epoch already exists (the coordinator's error code is given):
    /// nothing was bumped.
    NotCurrent(String),
}

/// The project's Kafka protocol client in the core's terms: who holds the
/// newest epoch of a role (DescribeTransactions), the conditional bump of a
/// resign, and the client beneath ([`KafkaClient::kafka`]) through which the
/// transport mints epochs and every held epoch writes and commits.
///
/// Cheap to clone; clones share the cached coordinators and connections.
/// Needs a tokio runtime.
///
/// ```no_run
/// # async fn f() -> krabka_coordination::Result<()> {
/// use krabka_coordination::transport::kafka::{KafkaClient, KafkaConfig};
/// let client = KafkaClient::new(&KafkaConfig::new("127.0.0.1:9092"))?;
/// let token = client.describe_epoch("billing").await?;
/// println!("billing is led by epoch {token}");
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct KafkaClient {
    kafka: krabka_kafka::Client,
}

/// The former name of [`KafkaClient`], which named one of its uses: the
/// same type, kept so that code written against 0.1 builds.
#[deprecated(note = "the same type as `KafkaClient`: name that instead")]
pub type DescribeClient = KafkaClient;

impl KafkaClient {
    /// The most connections the client keeps to one broker: one while
    /// requests come one at a time, more while they overlap.
    pub const CONNECTIONS_PER_BROKER: usize = krabka_kafka::Client::CONNECTIONS_PER_BROKER;

    /// A client for the cluster of `config`. Connects lazily.
    ///
    /// Refuses, naming them, security settings the client cannot honour
    /// (see [`KafkaConfig::check_security`]) and a malformed bootstrap
    /// address. Reads the certificate and key files the settings name.
    pub fn new(config: &KafkaConfig) -> Result<Self> {
        Ok(KafkaClient {
            kafka: krabka_kafka::Client::new(&client_settings::settings(config)?)?,
        })
    }

    /// The Kafka client beneath.
    pub fn kafka(&self) -> &krabka_kafka::Client {
        &self.kafka
    }

    /// The current fencing token of `role`, or [`NO_EPOCH`] when the
    /// coordinator does not know it; confirmed as
    /// [`KafkaClient::describe_transaction`] says.
    pub async fn describe_epoch(&self, role: &str) -> Result<FencingToken> {
        Ok(self
            .describe_transaction(role)
            .await?
            .map(|d| d.token)
            .unwrap_or(NO_EPOCH))
    }

    /// Everything the coordinator reports about `role`, or `None` when it
    /// does not know it (`TRANSACTIONAL_ID_NOT_FOUND`).
    ///
    /// The answer is taken only once another broker of the cluster names
    /// the broker that answered as the role's coordinator
    /// ([`krabka_kafka::Client::describe_transaction_confirmed`]): a
    /// coordinator cut off from its peers and the controller answers from
    /// memory long after the cluster moved the role elsewhere. One
    /// DescribeTransactions and one FindCoordinator (at another broker),
    /// one after the other, and a Metadata once a minute; an answer no
    /// other broker confirms by the operation timeout is
    /// [`crate::Error::Transient`] saying so.
    pub async fn describe_transaction(&self, role: &str) -> Result<Option<TransactionDescription>> {
        crate::codec::check_role(role)?;
        Ok(self
            .kafka
            .describe_transaction_confirmed(role)
            .await?
            .map(Into::into))
    }

    /// The address (`host:port`) of the transaction coordinator of `role`.
    pub async fn coordinator_address(&self, role: &str) -> Result<String> {
        crate::codec::check_role(role)?;
        Ok(self.kafka.coordinator_address(role).await?)
    }

    /// Bumps the epoch of `role` only if `token` is still its current one
    /// (InitProducerId v3+ with the caller's producer id and epoch,
    /// KIP-360), within `within`. A resigning member supersedes its own
    /// term this way.
    pub async fn bump_if_current(
        &self,
        role: &str,
        token: FencingToken,
        transaction_timeout_ms: i32,
        within: Duration,
    ) -> Result<BumpAnswer> {
        crate::codec::check_role(role)?;
        Ok(
            match self
                .kafka
                .bump_if_current(role, token.into(), transaction_timeout_ms, within)
                .await?
            {
                krabka_kafka::BumpAnswer::Bumped(p) => BumpAnswer::Bumped(p.into()),
                krabka_kafka::BumpAnswer::NotCurrent(why) => BumpAnswer::NotCurrent(why),
            },
        )
    }

    /// How many Kafka requests this client and its clones have sent.
    pub fn requests_sent(&self) -> u64 {
        self.kafka.requests_sent()
    }

    /// How many DescribeTransactions requests this client and its clones
    /// have sent (the epochs and leases that share it send others).
    pub fn describes_sent(&self) -> u64 {
        self.kafka.describes_sent()
    }

    /// How many connections this client and its clones made. For tests.
    #[doc(hidden)]
    pub fn connections_made(&self) -> u64 {
        self.kafka.connections_made()
    }

    /// The SASL session lifetime (KIP-368) the broker gave the last
    /// connection made, if it gave one. For tests.
    #[doc(hidden)]
    pub fn sasl_session_lifetime(&self) -> Option<Duration> {
        self.kafka.sasl_session_lifetime()
    }
}

impl KafkaClient {
    /// What consumer group `group` has committed for `partitions` (by
    /// topic), in the order asked: only offsets of decided transactions
    /// (OffsetFetch with `require_stable`), waiting up to `within` while a
    /// pending commit of an open transaction holds one; then
    /// [`crate::Error::Transient`] naming the group and the partitions. Bad
    /// arguments ([`crate::transport::check_query`]) are
    /// [`crate::Error::InvalidArgument`], nothing sent.
    ///
    /// Read by a new leader, this is where it resumes only after its mint
    /// aborted the previous leader's open transaction: call
    /// [`crate::leadership::Leadership::committed_offsets`], which can only
    /// run then. Read from here, outside any term, an answer may be moved
    /// later by a transaction of the role's leader (or of one not fenced
    /// yet) whose offset commit was not sent when it was read.
    pub async fn committed_offsets(
        &self,
        group: &str,
        partitions: &[(String, Vec<i32>)],
        within: Duration,
    ) -> Result<Vec<crate::transport::CommittedOffset>> {
        crate::transport::check_query(group, partitions)?;
        let deadline = super::deadline_in(within);
        let found = self
            .kafka
            .committed_offsets(group, partitions, deadline)
            .await?;
        Ok(found.into_iter().map(committed_offset).collect())
    }
}

/// The core's view of one partition the protocol client read.
fn committed_offset(p: krabka_kafka::PartitionCommitted) -> crate::transport::CommittedOffset {
    let (offset, metadata) = match p.committed {
        // Kafka keeps a commit without metadata as an empty string.
        krabka_kafka::Committed::At { offset, metadata } => {
            (Some(offset), metadata.filter(|m| !m.is_empty()))
        }
        // `committed_offsets` waits out pending commits; none is left.
        krabka_kafka::Committed::Nothing | krabka_kafka::Committed::Pending => (None, None),
    };
    crate::transport::CommittedOffset {
        topic: p.topic,
        partition: p.partition,
        offset,
        metadata,
    }
}
