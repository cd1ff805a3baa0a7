//! The task that watches one role for an [`Observer`]: it reads the
//! role's partition, folds it into the role's state, and reports what
//! changed (a new leader, a lapse, a roster change) as a [`RoleView`].

use super::*;

/// The reader of one watched role.
pub(super) struct RoleWatch {
    pub(super) transport: Arc<dyn Transport>,
    pub(super) role: Arc<str>,
    pub(super) partition: i32,
    /// The client's partition count (for the advice of a missing topic).
    pub(super) partitions: i32,
    pub(super) options: ObserveOptions,
    pub(super) tx: mpsc::UnboundedSender<Result<RoleView>>,
}

/// What the last view said, to tell what changed.
#[derive(Default)]
struct Shown {
    leader: Option<Lease>,
    lapsed: Option<Lease>,
    roster: Vec<String>,
    /// The lease record read last (token, granted at) and when it was first
    /// read, on the boot clock ([`crate::Clock::boot_millis`]).
    seen: Option<(crate::FencingToken, i64, i64)>,
}

impl RoleWatch {
    pub(super) async fn run(&self) -> Result<()> {
        let mut backoff = Backoff::new(self.options.initial_backoff, self.options.max_backoff);
        // The start: what the transport keeps (or every record), then polls
        // until nothing decided is left unread.
        let read = loop {
            match self.transport.read_state(self.partition).await {
                Ok(read) => break read,
                Err(e) => {
                    self.back_off(e, "reading the state partition", &mut backoff)
                        .await?
                }
            }
        };
        let mut state = RoleState::build(self.role.to_string(), &read.records)?;
        let mut position = read
            .next_offset
            .max(read.records.last().map_or(0, |r| r.offset + 1));
        loop {
            match self.transport.held_back(self.partition, position).await {
                Ok(Backlog::Unread) => {}
                Ok(_) => break,
                Err(e) => {
                    self.back_off(e, "checking the state partition", &mut backoff)
                        .await?;
                    continue;
                }
            }
            match self.poll(&mut state, &mut position, None).await {
                Ok(()) => backoff.reset(),
                Err(e) => {
                    self.back_off(e, "following the state partition", &mut backoff)
                        .await?
                }
            }
        }
        let mut shown = Shown::default();
        self.show(&state, position, Change::Initial, &mut shown)?;
        if self.lapse_due(&state, &mut shown) {
            self.check_lapse(&state, position, &mut shown).await?;
        }
        loop {
            // The deadline of the lease as read, which renewals move even
            // when they are not reported.
            let due = match shown.leader {
                Some(_) => self.deadline(&state, &mut shown),
                None => None,
            };
            let polled = match due {
                Some(at) if self.options.clock.now_millis() < at => {
                    tokio::select! {
                        r = self.poll(&mut state, &mut position, Some(&mut shown)) => Some(r),
                        _ = self.options.clock.sleep_until(at) => None,
                    }
                }
                _ => Some(self.poll(&mut state, &mut position, Some(&mut shown)).await),
            };
            match polled {
                Some(Ok(())) => backoff.reset(),
                Some(Err(e)) => {
                    self.back_off(e, "following the state partition", &mut backoff)
                        .await?;
                    continue;
                }
                None => {}
            }
            if self.lapse_due(&state, &mut shown) {
                if let Err(e) = self.check_lapse(&state, position, &mut shown).await {
                    self.back_off(e, "checking the state partition", &mut backoff)
                        .await?;
                }
            }
        }
    }

    /// A transient error is logged and waited out; any other ends the watch.
    async fn back_off(&self, e: Error, what: &str, backoff: &mut Backoff) -> Result<()> {
        if !e.is_transient() {
            return Err(e);
        }
        let d = backoff.take();
        tracing::warn!(error = %e, retry_in = ?d, "{what} failed; retrying");
        self.options.clock.sleep(d).await;
        Ok(())
    }

    /// One poll; each record of this role is applied alone and, once
    /// `shown` is given (after the first view), reported if it changed
    /// what the last view said.
    async fn poll(
        &self,
        state: &mut RoleState,
        position: &mut i64,
        mut shown: Option<&mut Shown>,
    ) -> Result<()> {
        let batch = self
            .transport
            .poll_partition(self.partition, *position, self.options.poll_wait)
            .await?;
        for r in &batch.records {
            state.apply(r)?;
            *position = (*position).max(r.offset + 1);
            if let Some(shown) = shown.as_deref_mut() {
                if state.is_own_key(&r.key) {
                    if let Some(change) = self.change(state, shown) {
                        self.show(state, *position, change, shown)?;
                    }
                }
            }
        }
        *position = (*position).max(batch.next_offset);
        Ok(())
    }

    /// What `state` changed from the last view, if anything worth a view.
    fn change(&self, state: &RoleState, shown: &Shown) -> Option<Change> {
        let lease = state.lease();
        let same_term = |a: &Lease, b: &Lease| a.member == b.member && a.token == b.token;
        match (lease, &shown.leader, &shown.lapsed) {
            (Some(now), Some(was), _) if same_term(now, was) => {
                if self.options.renewals && now != was {
                    Some(Change::Renewed)
                } else {
                    // Without renewals a moved deadline is not a view.
                    self.roster_change(state, shown)
                }
            }
            // The lapsed lease itself, read again: still no leader.
            (Some(now), None, Some(lapsed)) if now == lapsed => self.roster_change(state, shown),
            (Some(_), _, _) => Some(Change::Elected),
            (None, Some(_), _) => Some(Change::Cleared),
            (None, None, _) => self.roster_change(state, shown),
        }
    }

    fn roster_change(&self, state: &RoleState, shown: &Shown) -> Option<Change> {
        let roster = state.roster().map(|e| &e.member);
        (!roster.eq(shown.roster.iter())).then_some(Change::Roster)
    }

    /// Reports the view of `state` for `change` and remembers it.
    fn show(
        &self,
        state: &RoleState,
        position: i64,
        change: Change,
        shown: &mut Shown,
    ) -> Result<()> {
        let lease = state.lease().cloned();
        let (leader, lapsed) = match change {
            Change::Lapsed => (None, lease),
            // A roster change while the lease stays lapsed keeps it lapsed.
            _ if shown.lapsed.is_some() && lease == shown.lapsed => (None, lease),
            _ => (lease, None),
        };
        shown.leader.clone_from(&leader);
        shown.lapsed.clone_from(&lapsed);
        shown.roster = state.roster().map(|e| e.member.clone()).collect();
        let view = RoleView {
            role: Arc::clone(&self.role),
            partition: self.partition,
            change,
            leader,
            lapsed,
            roster: state.roster().cloned().collect(),
            position,
            at: self.options.clock.now_millis(),
        };
        tracing::debug!(change = change.name(), position, "role view");
        self.tx.send(Ok(view)).map_err(|_| Error::Cancelled)
    }

    /// True when the last view names a leader whose lease, as the state
    /// has it, is past its deadline ([`RoleWatch::deadline`]).
    fn lapse_due(&self, state: &RoleState, shown: &mut Shown) -> bool {
        shown.leader.is_some()
            && self
                .deadline(state, shown)
                .is_some_and(|at| at <= self.options.clock.now_millis())
    }

    /// When the lease of `state` lapses on the observer's wall clock: its
    /// deadline, but never later than its own duration (deadline minus
    /// granted at) after the observer first read it, so that a holder whose
    /// clock runs far ahead cannot keep a dead leader in the views (the
    /// rule a standby follows, with the lease's own duration in place of
    /// the standby's).
    fn deadline(&self, state: &RoleState, shown: &mut Shown) -> Option<i64> {
        let l = state.lease()?;
        let clock = &self.options.clock;
        // The boot clock, as the standby's: a lease read before a suspend
        // ran on while this machine slept.
        let mono = clock.boot_millis();
        if shown
            .seen
            .is_none_or(|(t, g, _)| (t, g) != (l.token, l.granted_at))
        {
            shown.seen = Some((l.token, l.granted_at, mono));
        }
        let (_, _, first_seen) = shown.seen.expect("set above");
        let duration = l.deadline.saturating_sub(l.granted_at).max(0);
        let cap = clock
            .now_millis()
            .saturating_add(first_seen.saturating_add(duration).saturating_sub(mono));
        Some(l.deadline.min(cap))
    }

    /// Reports [`Change::Lapsed`] when the view at `position` is complete:
    /// nothing is left unread, or only another role's open transaction is
    /// (read past it: no record of this role is open, and the committed
    /// ones do not renew the lease). Otherwise the next polls decide.
    async fn check_lapse(&self, state: &RoleState, position: i64, shown: &mut Shown) -> Result<()> {
        let complete = match self.transport.held_back(self.partition, position).await? {
            Backlog::CaughtUp => true,
            Backlog::Unread => false,
            Backlog::HeldBack => match self
                .transport
                .read_past_stable(self.partition, position)
                .await?
            {
                Some(past) if !past.open.iter().any(|r| state.is_own_key(&r.key)) => {
                    let mut view = state.clone();
                    for r in &past.committed {
                        view.apply(r)?;
                    }
                    view.lease() == state.lease()
                }
                _ => false,
            },
        };
        if complete {
            self.show(state, position, Change::Lapsed, shown)?;
        } else {
            // Not decided yet: the next poll (at most one poll wait away)
            // reads on, and the check comes again after it.
            tracing::debug!(
                position,
                "the lease is past its deadline; the view is not complete yet"
            );
        }
        Ok(())
    }
}
