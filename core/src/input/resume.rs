//! A term's reader and the consumer group's offsets: where a new leader's
//! reader starts ([`InputReader::resume`], from the offsets the last leader
//! committed with its outputs) and what its guarded writes commit
//! ([`InputReader::consumed`], for [`Leadership::write_with_offsets`]).

use std::sync::Arc;

use super::{start_positions, InputOptions, InputReader, Reset};
use crate::error::Result;
use crate::leadership::Leadership;
use crate::transport::kafka::KafkaClient;
use crate::transport::{ConsumedOffsets, InputOffset};

impl InputReader {
    /// A reader for the term of `leadership` that starts where consumer
    /// group `group` last committed for each of `partitions` (topic,
    /// partition numbers), in their order: the offsets a leader committed
    /// with its outputs ([`Leadership::committed_offsets`], which waits for
    /// a pending commit), and where `otherwise` says for a partition the
    /// group has committed nothing for ([`Reset::Earliest`] for a pipeline
    /// that must process its whole input).
    ///
    /// Errors: those of [`Leadership::committed_offsets`] (bounded by the
    /// lease duration), of [`start_positions`] (bounded by
    /// [`InputOptions::timeout`]) and of [`InputReader::new`]; the term's
    /// error when the term ended meanwhile.
    pub async fn resume(
        client: &KafkaClient,
        leadership: Arc<Leadership>,
        group: &str,
        partitions: &[(String, Vec<i32>)],
        otherwise: Reset,
        options: InputOptions,
    ) -> Result<InputReader> {
        let committed = leadership.committed_offsets(group, partitions).await?;
        let assigned: Vec<(String, i32, Option<i64>)> = committed
            .into_iter()
            .map(|c| (c.topic, c.partition, c.offset))
            .collect();
        let start = start_positions(client, &assigned, otherwise, options.timeout).await?;
        InputReader::new(client, leadership, start, options)
    }

    /// What a guarded write commits with the outputs of every record
    /// returned so far: [`InputReader::positions`] as consumer group
    /// `group`'s offsets, for [`Leadership::write_with_offsets`]. The next
    /// leader's [`InputReader::resume`] starts there.
    pub fn consumed(&self, group: impl Into<String>) -> ConsumedOffsets {
        let offsets = self
            .positions()
            .iter()
            .map(|p| InputOffset::new(p.topic.clone(), p.partition, p.offset))
            .collect();
        ConsumedOffsets::new(group, offsets)
    }
}
