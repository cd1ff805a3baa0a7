//! The options of a member: election options, clock, waits, back-off,
//! cancellation and the event subscription.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, SystemClock};
use crate::election::ElectionOptions;
use crate::error::{Error, Result};
use crate::events::EventSender;

/// Options of [`acquire_leadership`](super::acquire_leadership): the election options, the clock, and
/// how the member waits and retries.
#[derive(Clone)]
pub struct LeadershipOptions {
    /// Partitions, lease duration, renew interval and challenge stagger.
    pub election: ElectionOptions,
    /// The clock that lease instants and every wait use.
    pub clock: Arc<dyn Clock>,
    /// The longest one poll of the state partition waits for new records.
    pub poll_wait: Duration,
    /// The first retry delay after a transient error; doubles up to
    /// [`LeadershipOptions::max_backoff`]. Each delay is scaled by a random
    /// factor in [0.8, 1.2), so members that failed together spread out.
    pub initial_backoff: Duration,
    /// The longest retry delay.
    pub max_backoff: Duration,
    /// Cancels a waiting [`acquire_leadership`](super::acquire_leadership) (dropping its future does too).
    pub cancel: CancellationToken,
    /// Where the member's [`crate::events::Event`]s go, from its
    /// registration on (more subscribers: [`Leadership::subscribe`](super::Leadership::subscribe)).
    pub events: Option<EventSender>,
}

impl std::fmt::Debug for LeadershipOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeadershipOptions")
            .field("election", &self.election)
            .field("poll_wait", &self.poll_wait)
            .field("initial_backoff", &self.initial_backoff)
            .field("max_backoff", &self.max_backoff)
            .field("events", &self.events.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for LeadershipOptions {
    /// The defaults (16 partitions, 30 s lease, 10 s renew interval,
    /// 5 s stagger), the system clock, 1 s polls, backoff from 100 ms to 5 s.
    fn default() -> Self {
        LeadershipOptions {
            election: ElectionOptions::default(),
            clock: Arc::new(SystemClock),
            poll_wait: Duration::from_secs(1),
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            cancel: CancellationToken::new(),
            events: None,
        }
    }
}

impl LeadershipOptions {
    /// The partition count of `__coordination_state`.
    pub fn with_partitions(mut self, partitions: i32) -> Self {
        self.election = self.election.with_partitions(partitions);
        self
    }

    /// How long a lease lasts.
    pub fn with_lease_duration(mut self, d: Duration) -> Self {
        self.election = self.election.with_lease_duration(d);
        self
    }

    /// How often the holder renews.
    pub fn with_renew_interval(mut self, d: Duration) -> Self {
        self.election = self.election.with_renew_interval(d);
        self
    }

    /// The delay between ranks of challengers.
    pub fn with_challenge_stagger(mut self, d: Duration) -> Self {
        self.election = self.election.with_challenge_stagger(d);
        self
    }

    /// The clock (inject a [`crate::ManualClock`] in tests).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The longest one poll of the state partition waits.
    pub fn with_poll_wait(mut self, d: Duration) -> Self {
        self.poll_wait = d;
        self
    }

    /// The retry backoff after transient errors.
    pub fn with_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max;
        self
    }

    /// A token that cancels a waiting [`acquire_leadership`](super::acquire_leadership).
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }

    /// Sends the member's events, from its registration on, to `events`
    /// (see [`crate::events`]).
    pub fn with_events(mut self, events: EventSender) -> Self {
        self.events = Some(events);
        self
    }

    /// Checks every option and their relationships; the error names the values.
    pub fn validate(&self) -> Result<()> {
        self.election.validate()?;
        if self.poll_wait.is_zero() {
            return Err(Error::InvalidArgument(
                "poll wait must be above zero, got 0 ms".into(),
            ));
        }
        if self.initial_backoff.is_zero() || self.max_backoff < self.initial_backoff {
            return Err(Error::InvalidArgument(format!(
                "backoff must be above zero with max ({}) at least the initial ({})",
                crate::human::duration(self.max_backoff),
                crate::human::duration(self.initial_backoff)
            )));
        }
        Ok(())
    }
}
