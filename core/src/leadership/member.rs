//! What a member of a role needs, shared by the acquire loop, the renewal
//! task and the [`super::Leadership`] handle: its keys and partition, its
//! options, retries with back-off, the follower of its partition, and where
//! its events and diagnostics go.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::LeadershipOptions;
use crate::codec::{encode_key, encode_lease, encode_registration, Key, Lease, Registration};
use crate::error::{Error, Result};
use crate::events::{Event, EventKind, EventSink};
use crate::partition::role_partition;
use crate::state::RoleState;
use crate::token::FencingToken;
use crate::transport::{ReadBatch, StateRecord, Transport};

pub(crate) use crate::clock::Backoff;

pub(super) fn millis(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

/// One member of one role.
pub(super) struct Member {
    pub(super) transport: Arc<dyn Transport>,
    pub(super) role: String,
    pub(super) member: String,
    pub(super) partition: i32,
    pub(super) lease_key: Vec<u8>,
    pub(super) registration_key: Vec<u8>,
    pub(super) options: LeadershipOptions,
    pub(super) events: EventSink,
    /// The member's diagnostics span: role and member are its fields, so log
    /// events inside it do not repeat them.
    pub(super) span: tracing::Span,
    role_arc: Arc<str>,
    member_arc: Arc<str>,
    /// What the member's metrics need beyond its events.
    timings: crate::metrics::Timings,
}

impl Member {
    pub(super) fn new(
        transport: Arc<dyn Transport>,
        role: &str,
        member: &str,
        options: LeadershipOptions,
    ) -> Result<Self> {
        options.validate()?;
        crate::codec::check_role(role)?;
        crate::codec::check_member_id(member)?;
        let registration_key = encode_key(&Key::registration(role, member))?;
        let lease_key = encode_key(&Key::lease(role))?;
        let partition = role_partition(role, options.election.partitions)?;
        let events = EventSink::default();
        if let Some(tx) = &options.events {
            events.subscribe(tx.clone());
        }
        Ok(Member {
            transport,
            span: tracing::info_span!("member", role, member, partition),
            role: role.to_owned(),
            member: member.to_owned(),
            role_arc: Arc::from(role),
            member_arc: Arc::from(member),
            partition,
            lease_key,
            registration_key,
            timings: crate::metrics::Timings {
                started: options.clock.boot_millis(),
                ..Default::default()
            },
            options,
            events,
        })
    }

    /// The wall clock (epoch ms): what lease records carry.
    pub(super) fn now(&self) -> i64 {
        self.options.clock.now_millis()
    }

    /// The local deadline clock (ms): monotonic, and counting the time the
    /// machine was suspended ([`crate::Clock::boot_millis`]). The local lease
    /// deadline, and every span compared with a lease, is measured on it.
    /// Timers may not count suspended time, so a wait for an instant of this
    /// clock reads it again when it wakes.
    pub(super) fn mono(&self) -> i64 {
        self.options.clock.boot_millis()
    }

    /// Sends `kind` to the member's subscribers, stamped with the member's
    /// clock, after counting it in the metrics.
    pub(super) fn emit(&self, kind: EventKind) {
        self.count(&kind);
        self.send(kind);
    }

    /// Counts `kind` in the metrics ([`crate::metrics`]) without sending
    /// it: for a step whose metrics must be in place before anyone can see
    /// the step (the end of a term, before its waiters wake).
    pub(super) fn count(&self, kind: &EventKind) {
        crate::metrics::on_event(
            &self.role,
            &self.member,
            kind,
            &self.timings,
            self.mono(),
            self.now(),
        );
    }

    /// Sends `kind` to the member's subscribers, stamped with the member's
    /// clock, without counting it (see [`Member::count`]).
    pub(super) fn send(&self, kind: EventKind) {
        self.events.emit(Event {
            role: Arc::clone(&self.role_arc),
            member: Arc::clone(&self.member_arc),
            at: self.now(),
            kind,
        });
    }

    /// The lease record of `token` granted now.
    pub(super) fn lease_record(&self, token: FencingToken) -> Result<(StateRecord, Lease)> {
        let now = self.now();
        let lease = Lease {
            member: self.member.clone(),
            token,
            granted_at: now,
            deadline: now.saturating_add(millis(self.options.election.lease_duration)),
        };
        let record = StateRecord {
            partition: self.partition,
            key: self.lease_key.clone(),
            value: Some(encode_lease(&lease)?),
        };
        Ok((record, lease))
    }

    /// The member's deregistration record: the registration's key with no
    /// value, on the role's partition. The same record whether the
    /// registrar appends it or a resign writes it in its tombstone's
    /// transaction.
    pub(super) fn deregistration(&self) -> StateRecord {
        StateRecord {
            partition: self.partition,
            key: self.registration_key.clone(),
            value: None,
        }
    }

    /// The tombstone of the role's lease.
    pub(super) fn lease_tombstone(&self) -> StateRecord {
        StateRecord {
            partition: self.partition,
            key: self.lease_key.clone(),
            value: None,
        }
    }

    pub(super) async fn register(&self) -> Result<i64> {
        let value = encode_registration(&Registration {
            member: self.member.clone(),
            registered_at: self.now(),
        })?;
        let offset = self
            .transport
            .append(StateRecord {
                partition: self.partition,
                key: self.registration_key.clone(),
                value: Some(value),
            })
            .await?;
        tracing::info!(offset, "registered");
        self.emit(EventKind::Registered {
            partition: self.partition,
            offset,
        });
        Ok(offset)
    }

    pub(super) async fn deregister(&self) -> Result<()> {
        self.append_deregistration().await?;
        self.emit(EventKind::Deregistered);
        Ok(())
    }

    /// Appends the registration tombstone; no event (a resign emits
    /// `deregistered` after `resigned`, whichever write finished first).
    pub(super) async fn append_deregistration(&self) -> Result<()> {
        self.transport.append(self.deregistration()).await?;
        tracing::info!("deregistered");
        Ok(())
    }

    /// Runs `op` until it succeeds or fails with a non-transient error,
    /// backing off on the member's clock between tries. Stops when `cancel`
    /// fires.
    pub(super) async fn retry<T, F, Fut>(
        &self,
        what: &str,
        cancel: &CancellationToken,
        mut op: F,
    ) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut backoff = Backoff::new(self.options.initial_backoff, self.options.max_backoff);
        // Failures in a row: each retry is reported as an event with it.
        let mut attempt: u32 = 0;
        loop {
            let r = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(Error::Cancelled),
                r = op() => r,
            };
            match r {
                Err(e) if e.is_transient() => {
                    let d = backoff.take();
                    tracing::warn!(error = %e, retry_in = ?d, "{what} failed; retrying");
                    // Every retry is an event too, not only a log line.
                    attempt = attempt.saturating_add(1);
                    self.emit(EventKind::Retrying {
                        what: Arc::from(what),
                        attempt,
                        retry_in: d,
                        error: Arc::new(e),
                    });
                    self.pause(d, cancel).await?;
                }
                other => return other,
            }
        }
    }

    /// Sleeps `d` on the member's clock, or ends with `Cancelled`.
    pub(super) async fn pause(&self, d: Duration, cancel: &CancellationToken) -> Result<()> {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => Err(Error::Cancelled),
            _ = self.options.clock.sleep(d) => Ok(()),
        }
    }
}

/// The follower of a role's partition: a state kept current from a long poll.
pub(super) struct Follower {
    pub(super) state: RoleState,
    next_offset: i64,
    /// Polls failed in a row (for `EventKind::Retrying`).
    failures: u32,
}

impl Follower {
    pub(super) async fn start(m: &Member, cancel: &CancellationToken) -> Result<Self> {
        let read = m
            .retry("reading the state partition", cancel, || {
                m.transport.read_state(m.partition)
            })
            .await?;
        let next_offset = read.records.last().map_or(0, |r| r.offset + 1);
        let next_offset = next_offset.max(read.next_offset);
        let state = RoleState::build(m.role.clone(), &read.records)?;
        Ok(Follower {
            state,
            next_offset,
            failures: 0,
        })
    }

    /// Starts over from `kept` (what the transport keeps of the partition,
    /// [`crate::transport::StateReader::kept_state`]) when it reaches
    /// further than this follower read by more offsets than it has records
    /// (then building from it costs less than reading on); true if it did.
    /// The state built from it is, in all an election reads, the one built
    /// from every record.
    pub(super) fn skip_to(&mut self, m: &Member, kept: &ReadBatch) -> Result<bool> {
        let ahead = kept.next_offset.saturating_sub(self.next_offset);
        if ahead <= i64::try_from(kept.records.len()).unwrap_or(i64::MAX) {
            return Ok(false);
        }
        self.state = RoleState::build(m.role.clone(), &kept.records)?;
        self.next_offset = kept.next_offset;
        Ok(true)
    }

    /// The offset the follower reads from next: every record below it has
    /// been read (committed ones applied; aborted ones and transaction
    /// markers skipped).
    pub(super) fn position(&self) -> i64 {
        self.next_offset
    }

    /// One poll: waits up to `wait` for new committed records and applies them.
    pub(super) async fn poll(&mut self, m: &Member, wait: Duration) -> Result<usize> {
        let batch = m
            .transport
            .poll_partition(m.partition, self.next_offset, wait)
            .await?;
        let n = batch.records.len();
        for r in &batch.records {
            self.state.apply(r)?;
        }
        self.next_offset = self.next_offset.max(batch.next_offset);
        if let Some(last) = batch.records.last() {
            self.next_offset = self.next_offset.max(last.offset + 1);
        }
        Ok(n)
    }

    /// One poll that rides out a transient error: it is reported and
    /// followed by a backoff pause, and the poll then counts as empty.
    pub(super) async fn poll_or_back_off(
        &mut self,
        m: &Member,
        wait: Duration,
        cancel: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Result<usize> {
        let r = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(Error::Cancelled),
            r = self.poll(m, wait) => r,
        };
        match r {
            Ok(n) => {
                backoff.reset();
                // The failures in a row end.
                self.failures = 0;
                Ok(n)
            }
            Err(e) if e.is_transient() => {
                let d = backoff.take();
                tracing::warn!(error = %e, retry_in = ?d, "following the state partition failed; retrying");
                // Every retry is reported as an event.
                self.failures = self.failures.saturating_add(1);
                m.emit(EventKind::Retrying {
                    what: Arc::from("following the state partition"),
                    attempt: self.failures,
                    retry_in: d,
                    error: Arc::new(e),
                });
                m.pause(d, cancel).await.map(|()| 0)
            }
            Err(e) => Err(e),
        }
    }

    /// Polls until the record at `offset` has been read. A wait longer than
    /// the lease (an open transaction of another role holding the
    /// partition's committed end back, which Kafka aborts after its
    /// timeout) is reported once, naming the offsets; failed polls are
    /// reported each ([`Follower::poll_or_back_off`]). The wait is measured
    /// on the local deadline clock ([`Member::mono`]), so a step of the wall
    /// clock neither raises the report nor holds it back.
    pub(super) async fn catch_up(
        &mut self,
        m: &Member,
        offset: i64,
        cancel: &CancellationToken,
    ) -> Result<()> {
        let mut backoff = Backoff::new(m.options.initial_backoff, m.options.max_backoff);
        let started = m.mono();
        let report_after = millis(m.options.election.lease_duration);
        let mut reported = false;
        while self.next_offset <= offset {
            self.poll_or_back_off(m, m.options.poll_wait, cancel, &mut backoff)
                .await?;
            let waited = m.mono().saturating_sub(started);
            if !reported && waited > report_after {
                reported = true;
                tracing::warn!(
                    offset,
                    read_up_to = self.next_offset,
                    waited_ms = waited,
                    "the record this member wrote is not readable yet (read_committed): an open \
                     transaction may hold the partition back until it ends or times out; still waiting"
                );
            }
        }
        Ok(())
    }
}
