//! The pure election step.

use std::time::Duration;

/// The options of an election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionOptions {
    /// The partition count of `__coordination_state` (default 16).
    pub partitions: i32,
    /// How long a lease lasts (default 30 s).
    pub lease_duration: Duration,
    /// How often the holder renews (default 10 s).
    pub renew_interval: Duration,
    /// The delay between ranks of challengers (default 5 s).
    pub challenge_stagger: Duration,
}

/// One step of the election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Register (the member is not in the roster).
    Register,
}
