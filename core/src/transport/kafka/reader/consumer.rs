//! [`StateConsumer`]: the transport's one read_committed consumer of the
//! state topic, with the transport's read settings, shared by its
//! partition readers.

use super::*;

/// How often the state consumer asks Metadata of the state topic (unless
/// `topic.metadata.refresh.interval.ms` is set): see [`StateConsumer::new`].
const METADATA_REFRESH: Duration = Duration::from_secs(3);

/// The transport's state consumer, shared by its [`PartitionReader`]s.
///
/// A task awaits the consumer's main queue, as librdkafka needs for its
/// events; with every read partition split off onto its own queue, records
/// reach it only in the moment between a partition's assign and its split,
/// and the reader's seek after the split fetches those again.
pub(crate) struct StateConsumer {
    pub(super) consumer: Arc<StreamConsumer<TransportContext>>,
    stop: tokio_util::sync::CancellationToken,
}

impl StateConsumer {
    /// The consumer, with the transport's read settings. Needs a tokio
    /// runtime.
    pub(crate) fn new(config: &KafkaConfig, client_suffix: &str) -> Result<Self> {
        let mut cc = config.client_config(&format!("{client_suffix}-reader"));
        let user_wait = config.get("fetch.wait.max.ms").is_some();
        if !user_wait {
            cc.set(
                "fetch.wait.max.ms",
                config.fetch_wait().as_millis().to_string(),
            );
        }
        // A partition leader cut off from its peers and from the controller
        // answers Fetch without an error from its stale log, so nothing
        // makes librdkafka ask Metadata again for as long as the cut lasts
        // (its default: every 5 minutes). Asked every few seconds, a broker
        // that the controller told of the move names the new leader; an
        // answer with an older leader epoch is not taken (librdkafka >= 2.1).
        if config.get("topic.metadata.refresh.interval.ms").is_none() {
            cc.set(
                "topic.metadata.refresh.interval.ms",
                METADATA_REFRESH.as_millis().to_string(),
            );
        }
        // librdkafka's assign() needs a group handle, so the consumer names a
        // group; it never joins it (no subscribe) and never commits to it.
        cc.set("group.id", reader_group(config));
        // The transport's own settings win over user values.
        cc.set("isolation.level", "read_committed");
        cc.set("enable.partition.eof", "true");
        cc.set("enable.auto.commit", "false");
        cc.set("enable.auto.offset.store", "false");
        // An offset outside the log is the caller's error, not a silent jump.
        cc.set("auto.offset.reset", "error");
        let consumer: StreamConsumer<TransportContext> = cc
            .create_with_context(TransportContext::new(config))
            .map_err(|e| kafka_error("creating the state consumer", e))?;
        let consumer = Arc::new(consumer);
        // Between reads nothing else polls the consumer, where librdkafka
        // asks for a new OAUTHBEARER token.
        oauth::keep_fresh(&consumer);
        let stop = tokio_util::sync::CancellationToken::new();
        let (main, stopped) = (Arc::clone(&consumer), stop.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stopped.cancelled() => break,
                    got = main.recv() => match got {
                        Ok(m) => tracing::trace!(
                            partition = m.partition(),
                            offset = m.offset(),
                            "a record before its partition's split; the reader's seek fetches it again"
                        ),
                        Err(e) => tracing::debug!(error = %e, "state consumer event"),
                    },
                }
            }
            // Dropping a consumer joins librdkafka's threads.
            drop_off_thread(main);
        });
        Ok(StateConsumer { consumer, stop })
    }
}

impl Drop for StateConsumer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
