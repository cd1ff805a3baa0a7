//! The epochs of the Kafka transport: the mint of a role's epoch
//! (InitProducerId, one at a time per role) and the [`Coordinator`] and
//! [`Describer`] on it.

use super::*;

impl KafkaTransport {
    /// Mints the epoch of `role` (InitProducerId with `transactional.id =
    /// role` and the lease as the transaction timeout) and returns it as a
    /// [`KafkaEpoch`] owned by the caller. [`Coordinator::acquire_epoch`] is
    /// this, boxed.
    ///
    /// The mint runs in its own task under the role's mint lock: an epoch
    /// minted for a caller that stopped waiting is released at once.
    pub async fn mint_epoch(&self, role: &str, lease_duration: Duration) -> Result<KafkaEpoch> {
        check_role(role)?;
        let lease_ms = lease_millis(lease_duration)?;
        let locks = self.mint_locks.clone();
        let (config, client, minted) = (
            self.config.clone(),
            self.client.clone(),
            Arc::clone(&self.minted),
        );
        let role = role.to_owned();
        let (tx, rx) = tokio::sync::oneshot::channel::<Result<KafkaEpoch>>();
        tokio::spawn(async move {
            let _serialised = locks.lock(&role).await;
            let deadline = deadline_in(config.operation_timeout());
            let timeout_ms = i32::try_from(lease_ms).unwrap_or(i32::MAX);
            let result = client
                .kafka()
                .init_producer_id(&role, timeout_ms, deadline)
                .await
                .map_err(Error::from)
                .map(|producer| {
                    let token = FencingToken::from(producer);
                    tracing::debug!(role, %token, "epoch minted");
                    minted.fetch_add(1, Ordering::Relaxed);
                    KafkaEpoch::new(
                        &config,
                        client.clone(),
                        role.clone(),
                        lease_ms,
                        ProtocolLease::new(
                            client.kafka().clone(),
                            token,
                            protocol_lease::max_batch_bytes(&config),
                        ),
                    )
                });
            // A caller that gave up drops the receiver: the epoch it minted
            // is released here (KafkaEpoch's drop), nothing else.
            let _ = tx.send(result);
        });
        rx.await
            .map_err(|e| Error::fatal("an acquire_epoch task", e))?
    }
}

#[async_trait]
impl Describer for KafkaTransport {
    async fn describe_epoch(&self, role: &str) -> Result<FencingToken> {
        check_role(role)?;
        self.client.describe_epoch(role).await
    }
}

#[async_trait]
impl Coordinator for KafkaTransport {
    async fn acquire_epoch(
        &self,
        role: &str,
        lease_duration: Duration,
    ) -> Result<Box<dyn LeaseWriter>> {
        Ok(Box::new(self.mint_epoch(role, lease_duration).await?))
    }

    /// See [`KafkaTransport::preflight`]: the same checks, with each
    /// warning logged once per transport.
    async fn check_member(
        &self,
        role: &str,
        options: &crate::election::ElectionOptions,
    ) -> Result<()> {
        self.preflight
            .check(&self.config, &self.client, role, options)
            .await
    }
}
