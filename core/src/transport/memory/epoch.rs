//! [`MemoryEpoch`]: a held epoch of the in-memory cluster, the
//! [`LeaseWriter`] whose every write the coordinator checks against the
//! role's current token.

use super::*;

/// A held epoch of the in-memory cluster: writes are checked against the
/// coordinator's current token of the role.
#[derive(Debug)]
pub struct MemoryEpoch {
    pub(super) transport: MemoryTransport,
    pub(super) id: u64,
    pub(super) role: String,
    pub(super) token: FencingToken,
    /// The fate of this epoch's write whose commit went unconfirmed.
    pub(super) pending: Mutex<Option<bool>>,
    /// See [`LeaseWriter::take_resolved`].
    pub(super) resolved: Mutex<Option<bool>>,
}

impl MemoryEpoch {
    /// Writes a lease record inside a transaction that then aborts: the record
    /// takes an offset but is never read.
    pub fn write_lease_aborted(&self, record: StateRecord) -> Result<()> {
        self.write_state(record, EntryState::Aborted)
    }

    /// Writes a lease record inside a transaction left **open**, as a holder
    /// that stalls mid-transaction: it holds the partition's last stable
    /// offset back until this epoch's next write commits it or a newer mint
    /// of the role aborts it.
    pub fn write_lease_open(&self, record: StateRecord) -> Result<()> {
        self.write_state(record, EntryState::Open(self.role.clone(), self.token))
    }

    /// Appends one state record through this epoch; wakes pollers for a
    /// committed one. Commits what this epoch left open first.
    fn write_state(&self, record: StateRecord, state: EntryState) -> Result<()> {
        self.write_states(vec![record], state)
    }

    /// Appends `records` through this epoch in one transaction (one entry
    /// of the cluster's lock: no other write comes between them, and they
    /// share `state`); wakes pollers for committed ones. Commits what this
    /// epoch left open first.
    fn write_states(&self, records: Vec<StateRecord>, state: EntryState) -> Result<()> {
        let cluster = &self.transport.cluster;
        let mut inner = cluster.enter("write_lease")?;
        self.check_epoch(&inner)?;
        self.complete_pending(&mut inner);
        MemoryCluster::decide_open(&mut inner, &self.role, EntryState::Committed);
        let committed = state == EntryState::Committed;
        let topic = cluster.state_topic.clone();
        for record in records {
            let StateRecord {
                partition,
                key,
                value,
            } = record;
            let writer = Some((self.role.clone(), self.token));
            MemoryCluster::append(
                &mut inner,
                &topic,
                partition,
                key,
                value,
                state.clone(),
                writer,
            );
        }
        drop(inner);
        cluster.decided.notify_waiters();
        if committed {
            cluster.changed.notify_waiters();
        }
        Ok(())
    }

    /// Completes a commit that went unconfirmed, as the first step of the
    /// next write.
    fn complete_pending(&self, inner: &mut Inner) {
        let fate = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(committed) = fate {
            let to = if committed {
                EntryState::Committed
            } else {
                EntryState::Aborted
            };
            MemoryCluster::decide_open(inner, &self.role, to);
            *self.resolved.lock().unwrap_or_else(|e| e.into_inner()) = Some(committed);
        }
    }

    /// A guarded write of `records`, with `offsets` committed in its
    /// transaction: both commit, or both stay pending while its commit is
    /// unconfirmed; a fenced epoch writes neither.
    async fn guarded(
        &self,
        records: Vec<OutRecord>,
        offsets: Option<ConsumedOffsets>,
        within: Duration,
    ) -> Result<()> {
        self.transport.gate("write_guarded").await?;
        let cluster = &self.transport.cluster;
        check_guarded(&records, &cluster.state_topic)?;
        let topics: Vec<&str> = records.iter().map(|r| r.topic.as_str()).collect();
        cluster
            .wait_unstalled(&topics, within, "write_guarded")
            .await?;
        let mut inner = cluster.enter("write_guarded")?;
        self.check_epoch(&inner)?;
        self.complete_pending(&mut inner);
        MemoryCluster::decide_open(&mut inner, &self.role, EntryState::Committed);
        let unknown = inner.commit_unknown.take();
        let state = match unknown {
            Some(_) => EntryState::Open(self.role.clone(), self.token),
            None => EntryState::Committed,
        };
        if let Some(offsets) = offsets {
            MemoryCluster::stage_offsets(&mut inner, &self.role, offsets, unknown.is_none());
        }
        for r in records {
            let partition = r.partition.unwrap_or(0);
            MemoryCluster::append(
                &mut inner,
                &r.topic,
                partition,
                r.key.unwrap_or_default(),
                r.value,
                state.clone(),
                Some((self.role.clone(), self.token)),
            );
        }
        drop(inner);
        cluster.changed.notify_waiters();
        cluster.decided.notify_waiters();
        if let Some(committed) = unknown {
            *self.pending.lock().unwrap_or_else(|e| e.into_inner()) = Some(committed);
            return Err(Error::OutcomeUnknown {
                context: format!("a guarded write for role {:?}: commit", self.role),
                source: "the commit was sent but not confirmed".into(),
            });
        }
        Ok(())
    }

    /// Answers `Fenced` when the coordinator's token of the role is no longer
    /// this epoch's.
    fn check_epoch(&self, inner: &Inner) -> Result<()> {
        let current = inner.epochs.get(&self.role).copied().unwrap_or(NO_EPOCH);
        if current != self.token {
            return Err(Error::Fenced(format!(
                "role {:?}: producer {} superseded by {current} (PRODUCER_FENCED)",
                self.role, self.token
            )));
        }
        Ok(())
    }
}

impl Drop for MemoryEpoch {
    fn drop(&mut self) {
        self.transport
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(id, _, _)| *id != self.id);
    }
}

#[async_trait]
impl LeaseWriter for MemoryEpoch {
    fn role(&self) -> &str {
        &self.role
    }

    fn token(&self) -> FencingToken {
        self.token
    }

    async fn write_lease(&self, record: StateRecord, within: Duration) -> Result<()> {
        self.transport.gate("write_lease").await?;
        let cluster = &self.transport.cluster;
        cluster
            .wait_unstalled(&[cluster.state_topic.as_str()], within, "write_lease")
            .await?;
        self.write_state(record, EntryState::Committed)
    }

    async fn write_lease_and_deregister(
        &self,
        tombstone: StateRecord,
        deregistration: StateRecord,
        within: Duration,
    ) -> Result<()> {
        check_tombstone_and_deregistration(&tombstone, &deregistration)?;
        self.transport.gate("write_lease_and_deregister").await?;
        let cluster = &self.transport.cluster;
        cluster
            .wait_unstalled(
                &[cluster.state_topic.as_str()],
                within,
                "write_lease_and_deregister",
            )
            .await?;
        self.write_states(vec![tombstone, deregistration], EntryState::Committed)
    }

    async fn write_guarded(&self, records: Vec<OutRecord>, within: Duration) -> Result<()> {
        self.guarded(records, None, within).await
    }

    async fn write_guarded_with_offsets(
        &self,
        records: Vec<OutRecord>,
        offsets: ConsumedOffsets,
        within: Duration,
    ) -> Result<()> {
        check_offsets(&offsets)?;
        let offsets = (!offsets.offsets.is_empty()).then_some(offsets);
        self.guarded(records, offsets, within).await
    }

    async fn committed_offsets(
        &self,
        group: &str,
        partitions: &[(String, Vec<i32>)],
        within: Duration,
    ) -> Result<Vec<CommittedOffset>> {
        self.transport.gate("committed_offsets").await?;
        self.transport
            .cluster
            .committed_offsets(group, partitions, within)
            .await
    }

    fn take_resolved(&self) -> Option<bool> {
        self.resolved
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    async fn supersede(&self, _within: Duration) -> Result<Superseded> {
        self.transport.gate("supersede").await?;
        let mut inner = self.transport.cluster.enter("supersede")?;
        if self.check_epoch(&inner).is_err() {
            return Ok(Superseded::AlreadySuperseded);
        }
        Ok(Superseded::Bumped(MemoryCluster::bump(
            &mut inner, &self.role,
        )))
    }
}
