//! The one jittered back-off of krabka-coordination.
//!
//! The Kafka client's retry loop (`krabka_kafka::client::retry`, which
//! re-exports [`Backoff`]) and the core's members (the acquire loop, the
//! renewal task, the observer) pause by it. It is a crate of its own, with
//! no dependencies, so that the core's build without the Kafka client has
//! it too.
//!
//! [`Backoff`] promises:
//!
//! - the `n`-th pause in a row ([`Backoff::take`], from 1) is nominally
//!   `first × 2^(n-1)`, never more than `max` (and `max` is the bound from
//!   the pause that reaches it on); [`Backoff::reset`] starts over from
//!   `first`;
//! - each pause is its nominal value scaled by a factor in [0.8, 1.2)
//!   ([`jittered`]), drawn afresh for every pause, so that processes (or
//!   roles of one process) that failed together do not retry in lockstep;
//! - it only computes pauses: the caller sleeps, on its own clock.

use std::time::Duration;

/// Pauses between tries: from `first`, doubling up to `max`, each jittered
/// (see the crate docs for what it promises).
///
/// A value is both a schedule and a place in it: the constants
/// ([`Backoff::LOOKUP`], [`Backoff::TRANSACTION`]) and [`Backoff::new`]
/// are at its start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    /// The pause after the first failed try (before jitter).
    pub first: Duration,
    /// The longest pause (before jitter).
    pub max: Duration,
    /// The next pause (before jitter).
    next: Duration,
}

impl Backoff {
    /// The Kafka client's lookups and questions (FindCoordinator, Metadata,
    /// DescribeTransactions, the ACL check): 20 ms, doubling up to 500 ms.
    pub const LOOKUP: Backoff = Backoff::new(Duration::from_millis(20), Duration::from_millis(500));
    /// The requests of a held epoch (InitProducerId, AddPartitionsToTxn,
    /// Produce, EndTxn): 2 ms, doubling up to 200 ms. A term's writes wait
    /// for nothing longer than they must.
    pub const TRANSACTION: Backoff =
        Backoff::new(Duration::from_millis(2), Duration::from_millis(200));

    /// A back-off at its start: the first [`Backoff::take`] is `first`
    /// (jittered). A `first` above `max` is taken as is once, then `max`.
    pub const fn new(first: Duration, max: Duration) -> Self {
        Backoff {
            first,
            max,
            next: first,
        }
    }

    /// The next pause, jittered; the one after it is twice as long (before
    /// jitter), up to `max`.
    pub fn take(&mut self) -> Duration {
        let d = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        jittered(d)
    }

    /// Starts over: the next [`Backoff::take`] is `first` (jittered).
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

/// `d` scaled by a factor in [0.8, 1.2), drawn afresh at each call.
///
/// The randomness is a fresh `RandomState` (seeded differently each time)
/// over the process id and the wall clock's nanoseconds: enough to spread
/// retries, without a dependency. Not for anything that needs unpredictable
/// numbers.
pub fn jittered(d: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |t| t.as_nanos()),
    );
    let unit = (h.finish() % 1_000) as f64 / 1_000.0;
    d.mul_f64(0.8 + 0.4 * unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_a_fifth() {
        for _ in 0..1_000 {
            let j = jittered(Duration::from_millis(100));
            assert!(
                j >= Duration::from_millis(80) && j < Duration::from_millis(120),
                "{j:?}"
            );
        }
    }

    #[test]
    fn pauses_double_to_the_bound_each_within_a_fifth() {
        let (initial, max) = (Duration::from_millis(100), Duration::from_secs(5));
        let mut b = Backoff::new(initial, max);
        let nominal = [100u64, 200, 400, 800, 1_600, 3_200, 5_000, 5_000];
        for n in nominal {
            let d = b.take().as_secs_f64() * 1_000.0;
            let n = n as f64;
            assert!((0.8 * n..1.2 * n).contains(&d), "{d} ms for {n} ms");
        }
        b.reset();
        let d = b.take();
        assert!(
            d >= initial.mul_f64(0.8) && d < initial.mul_f64(1.2),
            "{d:?}"
        );
    }

    #[test]
    fn members_that_fail_together_do_not_retry_in_lockstep() {
        let first: Vec<Duration> = (0..20)
            .map(|_| Backoff::new(Duration::from_secs(1), Duration::from_secs(5)).take())
            .collect();
        let distinct: std::collections::HashSet<_> = first.iter().collect();
        assert!(distinct.len() > 10, "{first:?}");
    }

    #[test]
    fn the_constants_start_at_their_first_pause() {
        let mut b = Backoff::TRANSACTION;
        let d = b.take();
        assert!(
            d >= Duration::from_micros(1_600) && d < Duration::from_micros(2_400),
            "{d:?}"
        );
        assert_eq!(Backoff::LOOKUP.first, Duration::from_millis(20));
        assert_eq!(Backoff::LOOKUP.max, Duration::from_millis(500));
    }
}
