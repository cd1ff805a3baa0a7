//! [`MemoryTransport`]: one member's handle on a [`MemoryCluster`], and
//! the four transport traits on it.

use super::*;

/// One member's handle on a [`MemoryCluster`]; implements the four transport traits.
#[derive(Clone, Debug)]
pub struct MemoryTransport {
    pub(super) cluster: MemoryCluster,
    /// The epochs this handle minted whose [`MemoryEpoch`] is still alive:
    /// (epoch id, role, token).
    pub(super) live: Arc<Mutex<Vec<(u64, String, FencingToken)>>>,
    pub(super) next_epoch_id: Arc<std::sync::atomic::AtomicU64>,
    /// What a test does to this process (see [`faults`]).
    pub(super) faults: Arc<Faults>,
}

impl MemoryTransport {
    /// The cluster this handle talks to.
    pub fn cluster(&self) -> &MemoryCluster {
        &self.cluster
    }

    /// The faults of this handle's process, shared by its clones and its
    /// epochs: cut it off, pause, crash, fail for a while (see [`faults`]).
    pub fn faults(&self) -> &Arc<Faults> {
        &self.faults
    }

    /// Waits or fails as this handle's process state says (see [`faults`]).
    pub(super) async fn gate(&self, what: &str) -> Result<()> {
        self.faults
            .gate(what, self.cluster.clock.now_millis())
            .await
    }

    /// The tokens of the epochs of `role` that this handle minted and whose
    /// [`MemoryEpoch`] is still alive, oldest first.
    pub fn held(&self, role: &str) -> Vec<FencingToken> {
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, r, _)| r == role)
            .map(|(_, _, t)| *t)
            .collect()
    }
}

#[async_trait]
impl Describer for MemoryTransport {
    async fn describe_epoch(&self, role: &str) -> Result<FencingToken> {
        self.gate("describe_epoch").await?;
        let inner = self.cluster.enter("describe_epoch")?;
        Ok(inner.epochs.get(role).copied().unwrap_or(NO_EPOCH))
    }
}

impl MemoryTransport {
    /// Mints the epoch of `role` like [`Coordinator::acquire_epoch`] and
    /// returns the concrete [`MemoryEpoch`], for tests that need its
    /// inherent methods ([`MemoryEpoch::write_lease_aborted`]).
    pub fn mint(&self, role: &str) -> Result<MemoryEpoch> {
        let mut inner = self.cluster.enter("acquire_epoch")?;
        let token = MemoryCluster::bump(&mut inner, role);
        drop(inner);
        // The bump aborted what the previous epoch left open.
        self.cluster.decided.notify_waiters();
        let id = self
            .next_epoch_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, role.to_owned(), token));
        Ok(MemoryEpoch {
            transport: self.clone(),
            id,
            role: role.to_owned(),
            token,
            pending: Mutex::new(None),
            resolved: Mutex::new(None),
        })
    }
}

#[async_trait]
impl Coordinator for MemoryTransport {
    async fn acquire_epoch(
        &self,
        role: &str,
        _lease_duration: Duration,
    ) -> Result<Box<dyn LeaseWriter>> {
        self.gate("acquire_epoch").await?;
        Ok(Box::new(self.mint(role)?))
    }

    async fn check_member(
        &self,
        _role: &str,
        options: &crate::election::ElectionOptions,
    ) -> Result<()> {
        self.gate("check_member").await?;
        drop(self.cluster.enter("check_member")?);
        match self.cluster.lock().min_lease_duration {
            Some(min) if options.lease_duration < min => Err(Error::InvalidArgument(format!(
                "lease duration {} is below this transport's minimum {}",
                crate::human::duration(options.lease_duration),
                crate::human::duration(min)
            ))),
            _ => Ok(()),
        }
    }
}

#[async_trait]
impl StateReader for MemoryTransport {
    async fn read_partition(&self, partition: i32) -> Result<Vec<Record>> {
        self.gate("read_partition").await?;
        drop(self.cluster.enter("read_partition")?);
        Ok(self.cluster.committed(&self.cluster.state_topic, partition))
    }

    async fn poll_partition(
        &self,
        partition: i32,
        from: i64,
        max_wait: Duration,
    ) -> Result<ReadBatch> {
        let deadline = self.cluster.clock.sleep(max_wait);
        tokio::pin!(deadline);
        loop {
            // Register for a wake-up before looking, so no append is missed.
            let changed = self.cluster.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            self.gate("poll_partition").await?;
            {
                let inner = self.cluster.enter("poll_partition")?;
                let key = (self.cluster.state_topic.clone(), partition);
                if let Some(log) = inner.partitions.get(&key) {
                    let start = from.max(0) as usize;
                    let stable = last_stable(log);
                    if start < stable {
                        let records = log[start..stable]
                            .iter()
                            .filter(|e| e.state == EntryState::Committed)
                            .map(|e| e.record.clone())
                            .collect();
                        return Ok(ReadBatch {
                            records,
                            next_offset: stable as i64,
                        });
                    }
                }
            }
            tokio::select! {
                _ = &mut changed => {}
                _ = &mut deadline => return Ok(ReadBatch { records: Vec::new(), next_offset: from }),
            }
        }
    }

    async fn held_back(&self, partition: i32, position: i64) -> Result<Backlog> {
        self.held_back_now(partition, position).await
    }

    async fn read_past_stable(&self, partition: i32, position: i64) -> Result<Option<PastStable>> {
        if position < 0 {
            return Err(Error::InvalidArgument(format!(
                "read position must not be negative, got {position}"
            )));
        }
        self.gate("read_past_stable").await?;
        let inner = self.cluster.enter("read_past_stable")?;
        let key = (self.cluster.state_topic.clone(), partition);
        let Some(log) = inner.partitions.get(&key) else {
            return Ok(None);
        };
        let (end, stable) = (log.len(), last_stable(log));
        let from = usize::try_from(position).unwrap_or(usize::MAX);
        // Nothing open, decided records unread below the position, or a
        // position past the end.
        if stable >= end || from < stable || from > end {
            return Ok(None);
        }
        let mut past = PastStable {
            end: end as i64,
            ..PastStable::default()
        };
        for e in &log[from..] {
            match e.state {
                EntryState::Committed => past.committed.push(e.record.clone()),
                EntryState::Open(..) => past.open.push(e.record.clone()),
                EntryState::Aborted => {}
            }
        }
        Ok(Some(past))
    }
}

impl MemoryTransport {
    /// The end of the log (open entries included) against `position`, and
    /// the last stable offset, read together.
    async fn held_back_now(&self, partition: i32, position: i64) -> Result<Backlog> {
        if position < 0 {
            return Err(Error::InvalidArgument(format!(
                "read position must not be negative, got {position}"
            )));
        }
        self.gate("held_back").await?;
        let inner = self.cluster.enter("held_back")?;
        let key = (self.cluster.state_topic.clone(), partition);
        let (end, stable) = inner
            .partitions
            .get(&key)
            .map_or((0, 0), |log| (log.len() as i64, last_stable(log) as i64));
        Ok(Backlog::of(position, end, stable))
    }
}

#[async_trait]
impl Registrar for MemoryTransport {
    fn is_gone(&self) -> bool {
        self.faults.state() == ProcessState::Crashed
    }

    async fn append(&self, record: StateRecord) -> Result<i64> {
        self.gate("append").await?;
        let mut inner = self.cluster.enter("append")?;
        let topic = self.cluster.state_topic.clone();
        let StateRecord {
            partition,
            key,
            value,
        } = record;
        let offset = MemoryCluster::append(
            &mut inner,
            &topic,
            partition,
            key,
            value,
            EntryState::Committed,
            None,
        );
        drop(inner);
        self.cluster.changed.notify_waiters();
        Ok(offset)
    }
}
