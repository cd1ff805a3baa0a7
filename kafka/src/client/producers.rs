//! What a partition's leader knows of a producer (DescribeProducers v0,
//! Kafka 2.8 or newer): the epoch of the producer's last batch or
//! transaction marker on the partition, and whether a transaction of it is
//! open there.
//!
//! A transaction marker carries the epoch of the coordinator's EndTxn: the
//! producer's own when it committed or aborted, a newer one when the
//! coordinator ended the transaction itself (a transaction timeout, or a
//! new holder's InitProducerId, each bumps the epoch before it aborts). So
//! a partition whose last marker of the producer has the producer's epoch,
//! with no transaction of it open, was last ended by that epoch's own
//! EndTxn. DescribeProducers needs READ on the topic.

use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::{
    ApiKey, DescribeProducersRequest, DescribeProducersResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use super::*;

/// What a partition's leader reports of one producer id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveProducer {
    /// The epoch of the producer's last batch or marker on the partition.
    pub producer_epoch: i32,
    /// The last sequence the partition holds from the producer.
    pub last_sequence: i32,
    /// The offset where the producer's open transaction on the partition
    /// began, or `None` when none is open.
    pub open_transaction_from: Option<i64>,
}

impl Client {
    /// What the leader of `topic`/`partition` reports of `producer_id`
    /// (DescribeProducers), or `None` when it holds no state of it (the
    /// producer never wrote there, or its state expired). Retries a moved
    /// leader and a broken connection until `deadline`; then
    /// [`Error::Transient`]. A topic the principal may not READ is
    /// [`Error::Fatal`]; a broker older than Kafka 2.8 is [`Error::Fatal`]
    /// too.
    pub async fn active_producer(
        &self,
        topic: &str,
        partition: i32,
        producer_id: i64,
        deadline: Instant,
    ) -> Result<Option<ActiveProducer>> {
        let context = || {
            format!(
                "DescribeProducers of {}/{partition}",
                crate::error::quote(topic)
            )
        };
        let budget = deadline.saturating_duration_since(Instant::now());
        self.retrying(context, deadline, budget, Backoff::LOOKUP, || {
            self.at(
                Target::Leader(topic, partition),
                deadline,
                |at| async move {
                    let version = at.version(
                        ApiKey::DescribeProducers,
                        (0, 0),
                        "Kafka 2.8 or newer is needed",
                    )?;
                    let mut t = TopicRequest::default();
                    t.name = TopicName(StrBytes::from_string(topic.to_owned()));
                    t.partition_indexes = vec![partition];
                    let mut req = DescribeProducersRequest::default();
                    req.topics = vec![t];
                    let resp: DescribeProducersResponse = self
                        .exchange(&at, ApiKey::DescribeProducers, version, &req)
                        .await?;
                    let what = || format!("{} at {}", context(), at.addr);
                    let Some(p) = resp
                        .topics
                        .iter()
                        .flat_map(|t| t.partitions.iter())
                        .find(|p| p.partition_index == partition)
                    else {
                        return Err(Attempt::Again(format!("{} answered no partition", what())));
                    };
                    read_answer(
                        ApiKey::DescribeProducers,
                        p.error_code,
                        what(),
                        "DescribeProducers needs READ on it",
                    )?;
                    Ok(p.active_producers
                        .iter()
                        .find(|s| s.producer_id.0 == producer_id)
                        .map(|s| ActiveProducer {
                            producer_epoch: s.producer_epoch,
                            last_sequence: s.last_sequence,
                            open_transaction_from: (s.current_txn_start_offset >= 0)
                                .then_some(s.current_txn_start_offset),
                        }))
                },
            )
        })
        .await
    }
}
