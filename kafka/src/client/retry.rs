//! The client's one retry loop: how long to pause between tries, and when
//! to stop.
//!
//! Every retried request of the client, and every transactional request the
//! caller retries (a lease writer sends each one once, then asks [`retry`]),
//! runs through [`retry`]. It promises:
//!
//! - the first try always starts; no later one starts once the deadline
//!   leaves less than [`LAST_TRY`], and no try runs past the deadline (it
//!   is cut there, as unanswered);
//! - the pause after a failed try is [`Backoff`]'s, doubling from its first
//!   pause to its largest, scaled by a random factor in [0.8, 1.2) so that
//!   clients that failed together do not retry in lockstep, and never more
//!   than half the time left, so a last try still has time;
//! - a [`Next::Soon`] failure (`CONCURRENT_TRANSACTIONS`: the previous
//!   transaction's markers are being written) pauses by [`busy_pause`]
//!   instead: one millisecond at first, then a few, since markers take
//!   that long.
//!
//! It never retries a [`Next::Stop`], and never sleeps past the deadline.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// Below this much time left, no try is worth making.
pub const LAST_TRY: Duration = Duration::from_millis(10);

/// The first pauses after CONCURRENT_TRANSACTIONS: a successor that read
/// its predecessor's commit asks for its epoch while the coordinator
/// writes the transaction's last state, one replicated write (about a
/// millisecond on a warm cluster) after the markers it read.
const BUSY_FIRST: Duration = Duration::from_millis(1);
/// How many CONCURRENT_TRANSACTIONS answers in a row get [`BUSY_FIRST`].
const BUSY_FIRST_TRIES: u32 = 3;
/// The pause after CONCURRENT_TRANSACTIONS once [`BUSY_FIRST`] was not
/// enough: the previous transaction's markers take a few milliseconds on a
/// healthy cluster.
const BUSY_PAUSE: Duration = Duration::from_millis(3);
/// How many CONCURRENT_TRANSACTIONS answers in a row get a short pause
/// ([`BUSY_FIRST`] or [`BUSY_PAUSE`]).
const BUSY_TRIES: u32 = 10;
/// The longest pause after CONCURRENT_TRANSACTIONS.
const BUSY_MAX: Duration = Duration::from_millis(100);

use krabka_backoff::jittered;
/// The pauses between tries: from `first`, doubling up to `max`, each
/// jittered; the one back-off of the project (the `krabka-backoff` crate,
/// which the core's members use too). [`Backoff::LOOKUP`] and
/// [`Backoff::TRANSACTION`] are the client's schedules.
pub use krabka_backoff::Backoff;

/// What a failed try asks of [`retry`].
#[derive(Debug)]
pub enum Next<E> {
    /// Try again after the back-off pause; the reason, for the last error.
    Again(String),
    /// Try again soon (see [`busy_pause`]); the reason.
    Soon(String),
    /// Stop: this is the outcome.
    Stop(E),
}

/// How [`retry`] ended.
#[derive(Debug)]
pub enum Tried<T, E> {
    /// A try answered.
    Done(T),
    /// The deadline came first; the last try's reason.
    OutOfTime(String),
    /// A try failed for good.
    Failed(E),
}

/// The pause after the `tries`-th CONCURRENT_TRANSACTIONS answer in a row
/// (from 1): 1 ms for the first three, 3 ms up to the tenth (24 ms in all,
/// what markers take on a healthy cluster), then doubling up to 100 ms, so
/// markers held up by a lost partition leader (seconds) are not asked
/// about hundreds of times a second by every role that waits for them.
///
/// On the hand-over's path: the successor's InitProducerId is usually
/// answered CONCURRENT_TRANSACTIONS once (`docs/benchmarks/leadership.md`)
/// while the resign's markers are written, so the first pauses are the
/// shortest: a longer first pause would only delay the hand-over.
pub fn busy_pause(tries: u32) -> Duration {
    if tries <= BUSY_FIRST_TRIES {
        return BUSY_FIRST;
    }
    match tries.checked_sub(BUSY_TRIES) {
        None | Some(0) => BUSY_PAUSE,
        Some(n) => BUSY_PAUSE.saturating_mul(1u32 << n.min(8)).min(BUSY_MAX),
    }
}

/// Runs `attempt` until it answers, fails for good, or `deadline` leaves no
/// time for another try (see the module docs). `attempt`'s failures are
/// anything that says what comes next ([`Next`]): the client's own, or a
/// [`crate::TxnError`].
pub async fn retry<T, E, N, F, Fut>(
    deadline: Instant,
    backoff: Backoff,
    mut attempt: F,
) -> Tried<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, N>>,
    N: Into<Next<E>>,
{
    let mut backoff = backoff;
    let mut busy = 0u32;
    // The reason of the try before, for a last try that ran out of time
    // with less to say (no answer at all, no broker reached in the little
    // time left): the earlier reason is often the one that explains.
    let mut before: Option<String> = None;
    let out_of_time = |why: String, before: Option<String>| match before {
        Some(b) if b != why => Tried::OutOfTime(format!("{why} (the try before: {b})")),
        _ => Tried::OutOfTime(why),
    };
    loop {
        let next = match tokio::time::timeout_at(deadline, attempt()).await {
            Err(_) => return out_of_time("no answer in time".into(), before),
            Ok(Ok(v)) => return Tried::Done(v),
            Ok(Err(n)) => n.into(),
        };
        let (wait, why) = match next {
            Next::Stop(e) => return Tried::Failed(e),
            Next::Again(why) => {
                busy = 0;
                (backoff.take(), why)
            }
            Next::Soon(why) => {
                busy += 1;
                (jittered(busy_pause(busy)), why)
            }
        };
        let Some(wait) = pause_within(wait, deadline) else {
            return out_of_time(why, before);
        };
        tracing::debug!(%why, retry_in = ?wait, "Kafka request tried again");
        before = Some(why);
        tokio::time::sleep(wait).await;
    }
}

/// The pause before the next try: `wait` (already jittered), and at most
/// half the time left before `deadline`; `None` once less than [`LAST_TRY`]
/// is left.
pub(crate) fn pause_within(wait: Duration, deadline: Instant) -> Option<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    (left >= LAST_TRY).then(|| wait.min(left / 2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn busy_pauses_stay_short_then_back_off_to_a_bound() {
        let pauses: Vec<u64> = (1..=20).map(|t| busy_pause(t).as_millis() as u64).collect();
        assert_eq!(&pauses[..3], &[1, 1, 1], "{pauses:?}");
        assert!(pauses[3..10].iter().all(|p| *p == 3), "{pauses:?}");
        assert_eq!(&pauses[10..16], &[6, 12, 24, 48, 96, 100], "{pauses:?}");
        assert_eq!(busy_pause(u32::MAX), BUSY_MAX);
    }

    /// Pauses double from `first` to `max` (with jitter), a Stop ends at
    /// once, and the deadline ends the loop with the last reason.
    #[tokio::test(start_paused = true)]
    async fn backs_off_and_stops_at_the_deadline() {
        let start = Instant::now();
        let tries = Cell::new(Vec::new());
        let b = Backoff::new(Duration::from_millis(100), Duration::from_millis(400));
        let out: Tried<(), ()> = retry(start + Duration::from_secs(2), b.clone(), || {
            let mut t = tries.take();
            t.push(start.elapsed());
            let n = t.len();
            tries.set(t);
            async move { Err::<(), _>(Next::Again(format!("try {n}"))) }
        })
        .await;
        let tries = tries.take();
        match out {
            Tried::OutOfTime(why) => assert_eq!(
                why,
                format!(
                    "try {} (the try before: try {})",
                    tries.len(),
                    tries.len() - 1
                )
            ),
            other => panic!("{other:?}"),
        }
        let gaps: Vec<u128> = tries
            .windows(2)
            .map(|w| (w[1] - w[0]).as_millis())
            .collect();
        let want = [100u128, 200, 400, 400];
        // The pause is want x [0.8, 1.2); a busy machine adds its
        // scheduling delay to the gap, never takes from it.
        for (gap, want) in gaps.iter().zip(want) {
            assert!(
                *gap >= want * 8 / 10 && *gap < want * 12 / 10 + 40,
                "{gaps:?}"
            );
        }
        assert!(
            start.elapsed() <= Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );

        let stopped: Tried<(), &str> = retry(start + Duration::from_secs(60), b, || async {
            Err::<(), _>(Next::Stop("refused"))
        })
        .await;
        assert!(matches!(stopped, Tried::Failed("refused")));
    }

    /// A try that does not answer is cut at the deadline.
    #[tokio::test(start_paused = true)]
    async fn a_try_never_runs_past_the_deadline() {
        let start = Instant::now();
        let out: Tried<(), ()> = retry(start + Duration::from_secs(1), Backoff::LOOKUP, || async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<(), Next<()>>(())
        })
        .await;
        assert!(matches!(out, Tried::OutOfTime(_)), "{out:?}");
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }

    /// A last try that hears nothing reports the try before's reason too.
    #[tokio::test(start_paused = true)]
    async fn a_last_try_without_an_answer_keeps_the_reason_of_the_one_before() {
        let start = Instant::now();
        let tries = Cell::new(0u32);
        let out: Tried<(), ()> = retry(start + Duration::from_millis(500), Backoff::LOOKUP, || {
            tries.set(tries.get() + 1);
            let n = tries.get();
            async move {
                if n == 1 {
                    Err::<(), _>(Next::Again("the read failed at 127.0.0.1:9".into()))
                } else {
                    // The next try hears nothing before the deadline.
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    Err(Next::Again("unreachable".into()))
                }
            }
        })
        .await;
        match out {
            Tried::OutOfTime(why) => assert_eq!(
                why,
                "no answer in time (the try before: the read failed at 127.0.0.1:9)"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(tries.get(), 2);
    }

    /// Soon failures pause 3 ms, not the back-off.
    #[tokio::test(start_paused = true)]
    async fn busy_tries_pause_briefly() {
        let start = Instant::now();
        let n = Cell::new(0u32);
        let out: Tried<u32, ()> = retry(start + Duration::from_secs(1), Backoff::LOOKUP, || {
            n.set(n.get() + 1);
            let k = n.get();
            async move {
                if k < 5 {
                    Err(Next::Soon("CONCURRENT_TRANSACTIONS".into()))
                } else {
                    Ok(k)
                }
            }
        })
        .await;
        assert!(matches!(out, Tried::Done(5)), "{out:?}");
        assert!(
            start.elapsed() < Duration::from_millis(20),
            "{:?}",
            start.elapsed()
        );
    }
}
