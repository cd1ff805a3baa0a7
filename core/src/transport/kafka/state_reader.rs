//! The state reader of the Kafka transport: read_committed reads of a
//! state partition through the transport's librdkafka consumer (the
//! `reader` module), and the look at the partition's ends (the high
//! watermark, the last stable offset) through the protocol client.
//!
//! Each partition read has a reader ([`KafkaTransport::reader`]), created
//! on first use and kept current by [`keep_readers_up`] while idle.
//!
//! A whole-partition read first waits, at most [`MARKER_WAIT`], for the
//! markers of a commit acknowledged a moment ago, so a read right after a
//! write sees it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use async_trait::async_trait;

use super::reader::{PartitionReader, StateConsumer};
use super::{check_partition, deadline_in, KafkaTransport, ReaderSlot};
use crate::error::{Error, Result};
use crate::transport::{Backlog, PastStable, ReadBatch, Record, StateReader};

/// How long a read of a whole partition waits for the markers of a
/// commit that was acknowledged a moment ago (see
/// `KafkaTransport::wait_for_markers`).
const MARKER_WAIT: Duration = Duration::from_millis(250);

/// Between two looks at the last stable offset while waiting for markers.
const MARKER_POLL: Duration = Duration::from_millis(5);

#[async_trait]
impl StateReader for KafkaTransport {
    async fn read_partition(&self, partition: i32) -> Result<Vec<Record>> {
        let mut reader = self.whole_partition_reader(partition).await?;
        reader
            .as_mut()
            .expect("reader() creates it")
            .read_all()
            .await
    }

    async fn read_state(&self, partition: i32) -> Result<ReadBatch> {
        let mut reader = self.whole_partition_reader(partition).await?;
        reader
            .as_mut()
            .expect("reader() creates it")
            .read_state()
            .await
    }

    async fn kept_state(&self, partition: i32) -> Option<ReadBatch> {
        let slot = {
            let readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(readers.get(&partition)?)
        };
        let reader = slot.lock().await;
        reader.as_ref()?.kept_state()
    }

    async fn poll_partition(
        &self,
        partition: i32,
        from: i64,
        max_wait: Duration,
    ) -> Result<ReadBatch> {
        let mut reader = self.reader(partition).await?;
        reader
            .as_mut()
            .expect("reader() creates it")
            .poll(from, max_wait)
            .await
    }

    async fn held_back(&self, partition: i32, position: i64) -> Result<Backlog> {
        self.held_back_now(partition, position).await
    }

    async fn read_past_stable(&self, partition: i32, position: i64) -> Result<Option<PastStable>> {
        self.read_past_stable_now(partition, position).await
    }
}

impl KafkaTransport {
    /// The high watermark of `partition` (the end of the log, records of
    /// open transactions included), read with ListOffsets.
    async fn high_watermark(&self, partition: i32) -> Result<i64> {
        let deadline = deadline_in(self.config.operation_timeout());
        Ok(self
            .client
            .kafka()
            .end_offset(self.config.state_topic(), partition, false, deadline)
            .await?)
    }

    /// Waits, at most [`MARKER_WAIT`], until the last stable offset of
    /// `partition` reaches the high watermark read first.
    ///
    /// The coordinator acknowledges a commit once it has logged it, before
    /// the transaction markers reach the partition; until they do, the last
    /// stable offset stays below the committed records, and a read_committed
    /// read misses them. A read right after a commit (a describe right
    /// after an acquire returned, in this process or another) waits for
    /// them, so it sees what was acknowledged. A transaction really held
    /// open only costs the bound; errors are left to the read that follows.
    async fn wait_for_markers(&self, partition: i32) {
        let Ok(high) = self.high_watermark(partition).await else {
            return;
        };
        let until = tokio::time::Instant::now() + MARKER_WAIT;
        loop {
            let stable = match self.reader(partition).await {
                Ok(reader) => match reader
                    .as_ref()
                    .expect("reader() creates it")
                    .watermarks()
                    .await
                {
                    Ok((_, stable)) => stable,
                    Err(_) => return,
                },
                Err(_) => return,
            };
            if stable >= high || tokio::time::Instant::now() >= until {
                return;
            }
            tokio::time::sleep(MARKER_POLL).await;
        }
    }

    /// One read of the high watermark (ListOffsets read_uncommitted: the
    /// end of the log, records of open transactions and transaction markers
    /// included) decides. A read_committed reader's position after
    /// an end-of-partition event is the last stable offset, markers
    /// included, so with nothing open a reader that has read everything
    /// stands at the high watermark. Only when the high watermark lies past
    /// `position` does the last stable offset (a second read) tell an open
    /// transaction from records not read yet.
    async fn held_back_now(&self, partition: i32, position: i64) -> Result<Backlog> {
        check_partition(partition)?;
        if position < 0 {
            return Err(Error::InvalidArgument(format!(
                "read position must not be negative, got {position}"
            )));
        }
        let high = self.high_watermark(partition).await?;
        if high <= position {
            return Ok(Backlog::CaughtUp);
        }
        // The second read, the last stable offset: ListOffsets read_committed.
        let deadline = deadline_in(self.config.operation_timeout());
        let stable = self
            .client
            .kafka()
            .end_offset(self.config.state_topic(), partition, true, deadline)
            .await?;
        Ok(Backlog::of(position, high, stable))
    }
}

impl KafkaTransport {
    /// The partition's reader for a read of the whole partition: once the
    /// cluster is reached (an unreachable one fails here within the connect
    /// timeout; the consumer would wait out its operation timeout, twice)
    /// and the markers of a commit acknowledged a moment ago are waited
    /// for. Errors as [`Self::reader`] and the client's `ensure_reached`.
    async fn whole_partition_reader(
        &self,
        partition: i32,
    ) -> Result<tokio::sync::OwnedMutexGuard<Option<PartitionReader>>> {
        self.client.kafka().ensure_reached().await?;
        self.wait_for_markers(partition).await;
        self.reader(partition).await
    }

    /// The partition's reader, locked for one call, created on first use.
    pub(super) async fn reader(
        &self,
        partition: i32,
    ) -> Result<tokio::sync::OwnedMutexGuard<Option<PartitionReader>>> {
        check_partition(partition)?;
        let slot: ReaderSlot = {
            let mut readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(readers.entry(partition).or_default())
        };
        let mut guard = slot.lock_owned().await;
        if guard.is_none() {
            let shared = match self.state_consumer.get() {
                Some(c) => c,
                None => {
                    let made = StateConsumer::new(&self.config, &self.client_suffix)?;
                    // Another reader may have made one first: keep that one.
                    // The first one made starts the task that keeps the
                    // readers' views current: here, where a runtime runs
                    // (the bindings build transports outside one).
                    if self.state_consumer.set(made).is_ok() {
                        tokio::spawn(keep_readers_up(Arc::downgrade(&self.readers)));
                    }
                    self.state_consumer.get().expect("set above")
                }
            };
            *guard = Some(PartitionReader::new(
                shared,
                &self.config,
                partition,
                Arc::clone(&self.seeks),
            ));
        }
        Ok(guard)
    }
}

/// How often [`keep_readers_up`] takes in what the readers' partitions
/// brought.
const KEEP_UP_EVERY: Duration = Duration::from_secs(1);

/// Every [`KEEP_UP_EVERY`] from the first read of the state topic, takes
/// into each idle reader's kept view what librdkafka fetched of its
/// partition since its last read ([`PartitionReader::keep_up`]), until the
/// transport is dropped. A leader's follower stands where the term began;
/// its resign asks whether another member is registered, and starts from
/// the view ([`StateReader::kept_state`]) rather than reading every
/// renewal of the partition's other roles since. The cost grows with the
/// records written, each taken in once per process.
async fn keep_readers_up(readers: std::sync::Weak<StdMutex<HashMap<i32, ReaderSlot>>>) {
    loop {
        tokio::time::sleep(KEEP_UP_EVERY).await;
        let Some(readers) = readers.upgrade() else {
            return;
        };
        let slots: Vec<ReaderSlot> = readers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        drop(readers);
        for slot in slots {
            // A reader in use is current anyway.
            if let Ok(mut reader) = slot.try_lock() {
                if let Some(r) = reader.as_mut() {
                    r.keep_up().await;
                }
            }
        }
    }
}
