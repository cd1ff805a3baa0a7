//! Tests of the system clock and the manual clock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use krabka_coordination::clock::Sleep;
use krabka_coordination::{Clock, ManualClock, SystemClock};

/// A waker that records its label in a shared log when woken.
struct Recorder {
    label: &'static str,
    log: Arc<Mutex<Vec<&'static str>>>,
}

impl Wake for Recorder {
    fn wake(self: Arc<Self>) {
        self.log.lock().unwrap().push(self.label);
    }
}

fn recorder(label: &'static str, log: &Arc<Mutex<Vec<&'static str>>>) -> Waker {
    Waker::from(Arc::new(Recorder {
        label,
        log: Arc::clone(log),
    }))
}

fn poll_with(f: &mut Sleep, waker: &Waker) -> Poll<()> {
    f.as_mut().poll(&mut Context::from_waker(waker))
}

fn poll_noop(f: &mut Sleep) -> Poll<()> {
    poll_with(f, Waker::noop())
}

#[test]
fn manual_clock_reads_what_it_is_set_to() {
    let clock = ManualClock::new(1_000);
    assert_eq!(clock.now_millis(), 1_000);
    clock.advance(Duration::from_millis(250));
    assert_eq!(clock.now_millis(), 1_250);
    clock.set(-5);
    assert_eq!(clock.now_millis(), -5);
    // Clones share the time.
    let other = clock.clone();
    other.advance(Duration::from_secs(1));
    assert_eq!(clock.now_millis(), 995);
    clock.set(i64::MAX - 1);
    clock.advance(Duration::from_secs(10));
    assert_eq!(clock.now_millis(), i64::MAX, "advance saturates");
    assert_eq!(ManualClock::default().now_millis(), 0);
}

#[test]
fn timers_fire_in_deadline_order_then_registration_order() {
    let clock = ManualClock::new(0);
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut c = clock.sleep_until(30);
    let mut a = clock.sleep_until(10);
    let mut b1 = clock.sleep_until(20);
    let mut b2 = clock.sleep_until(20);
    let c_waker = recorder("c30", &log);
    assert!(poll_with(&mut c, &c_waker).is_pending());
    assert!(poll_with(&mut a, &recorder("a10", &log)).is_pending());
    assert!(poll_with(&mut b1, &recorder("b20-first", &log)).is_pending());
    assert!(poll_with(&mut b2, &recorder("b20-second", &log)).is_pending());
    assert_eq!(clock.pending_timers(), 4);
    assert_eq!(clock.next_deadline(), Some(10));

    clock.set(9);
    assert!(log.lock().unwrap().is_empty(), "nothing is due at 9");

    clock.set(20);
    assert_eq!(*log.lock().unwrap(), vec!["a10", "b20-first", "b20-second"]);
    assert_eq!(clock.pending_timers(), 1);
    assert_eq!(clock.next_deadline(), Some(30));
    assert!(poll_noop(&mut a).is_ready());
    assert!(poll_noop(&mut b1).is_ready());
    assert!(poll_noop(&mut b2).is_ready());
    assert!(poll_with(&mut c, &c_waker).is_pending());

    clock.advance(Duration::from_millis(10));
    assert_eq!(log.lock().unwrap().last(), Some(&"c30"));
    assert!(poll_noop(&mut c).is_ready());
    assert_eq!(clock.pending_timers(), 0);
    assert_eq!(clock.next_deadline(), None);
}

#[test]
fn a_due_instant_is_ready_without_registering() {
    let clock = ManualClock::new(100);
    let mut at = clock.sleep_until(100);
    let mut past = clock.sleep_until(50);
    assert!(poll_noop(&mut at).is_ready());
    assert!(poll_noop(&mut past).is_ready());
    assert_eq!(clock.pending_timers(), 0);
    let mut zero = clock.sleep(Duration::ZERO);
    assert!(poll_noop(&mut zero).is_ready());
}

#[test]
fn sleep_is_relative_to_the_clock_time() {
    let clock = ManualClock::new(1_000);
    let mut s = clock.sleep(Duration::from_millis(500));
    assert!(poll_noop(&mut s).is_pending());
    assert_eq!(clock.next_deadline(), Some(1_500));
    clock.set(1_499);
    assert!(poll_noop(&mut s).is_pending());
    clock.set(1_500);
    assert!(poll_noop(&mut s).is_ready());
}

#[test]
fn setting_the_time_backwards_fires_nothing() {
    let clock = ManualClock::new(100);
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut s = clock.sleep_until(150);
    let waker = recorder("s", &log);
    assert!(poll_with(&mut s, &waker).is_pending());
    clock.set(10);
    assert!(log.lock().unwrap().is_empty());
    assert_eq!(clock.pending_timers(), 1);
    assert!(poll_with(&mut s, &waker).is_pending());
    clock.set(149);
    assert!(log.lock().unwrap().is_empty());
    clock.set(150);
    assert_eq!(*log.lock().unwrap(), vec!["s"]);
}

#[test]
fn a_fired_timer_stays_fired_when_time_goes_back() {
    let clock = ManualClock::new(0);
    let mut s = clock.sleep_until(10);
    assert!(poll_noop(&mut s).is_pending());
    clock.set(10);
    clock.set(0);
    assert!(
        poll_noop(&mut s).is_ready(),
        "the timer fired at 10; going back does not un-fire it"
    );
    assert_eq!(clock.pending_timers(), 0);
}

#[test]
fn dropping_a_sleep_unregisters_it() {
    let clock = ManualClock::new(0);
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut kept = clock.sleep_until(20);
    let mut dropped = clock.sleep_until(10);
    assert!(poll_with(&mut kept, &recorder("kept", &log)).is_pending());
    assert!(poll_with(&mut dropped, &recorder("dropped", &log)).is_pending());
    assert_eq!(clock.pending_timers(), 2);
    assert_eq!(clock.next_deadline(), Some(10));
    drop(dropped);
    assert_eq!(clock.pending_timers(), 1);
    assert_eq!(clock.next_deadline(), Some(20));
    clock.set(100);
    assert_eq!(*log.lock().unwrap(), vec!["kept"]);
    // A sleep that was never polled never registered.
    let never = clock.sleep_until(1_000);
    assert_eq!(clock.pending_timers(), 0);
    drop(never);
    // Dropping a fired sleep is harmless.
    drop(kept);
    assert_eq!(clock.pending_timers(), 0);
}

#[test]
fn repolling_with_a_new_waker_wakes_the_new_one() {
    let clock = ManualClock::new(0);
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut s = clock.sleep_until(5);
    assert!(poll_with(&mut s, &recorder("old", &log)).is_pending());
    assert!(poll_with(&mut s, &recorder("new", &log)).is_pending());
    assert_eq!(
        clock.pending_timers(),
        1,
        "a re-poll does not register twice"
    );
    clock.set(5);
    assert_eq!(*log.lock().unwrap(), vec!["new"]);
}

#[test]
fn advance_to_next_deadline_moves_to_the_earliest_timer() {
    let clock = ManualClock::new(0);
    assert_eq!(clock.advance_to_next_deadline(), None);
    assert_eq!(clock.now_millis(), 0);
    let mut a = clock.sleep_until(40);
    let mut b = clock.sleep_until(70);
    assert!(poll_noop(&mut a).is_pending());
    assert!(poll_noop(&mut b).is_pending());
    assert_eq!(clock.advance_to_next_deadline(), Some(40));
    assert_eq!(clock.now_millis(), 40);
    assert!(poll_noop(&mut a).is_ready());
    assert!(poll_noop(&mut b).is_pending());
    assert_eq!(clock.advance_to_next_deadline(), Some(70));
    assert!(poll_noop(&mut b).is_ready());
}

#[tokio::test]
async fn wait_for_sleepers_sees_a_spawned_task_block() {
    let clock = ManualClock::new(1_000);
    let c = clock.clone();
    let task = tokio::spawn(async move {
        c.sleep_until(1_200).await;
        let woke_at = c.now_millis();
        c.sleep(Duration::from_millis(300)).await;
        (woke_at, c.now_millis())
    });
    clock.wait_for_sleepers(1).await;
    assert_eq!(clock.next_deadline(), Some(1_200));
    clock.set(1_200);
    // The task wakes, then blocks on its second timer.
    clock.wait_for_sleepers(1).await;
    assert_eq!(clock.next_deadline(), Some(1_500));
    assert!(!task.is_finished());
    clock.advance(Duration::from_millis(300));
    assert_eq!(task.await.unwrap(), (1_200, 1_500));
}

#[tokio::test]
async fn wait_for_sleepers_counts_several_tasks() {
    let clock = ManualClock::new(0);
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for at in [30, 10, 20] {
        let c = clock.clone();
        let done = Arc::clone(&done);
        tasks.push(tokio::spawn(async move {
            c.sleep_until(at).await;
            done.fetch_add(1, Ordering::SeqCst);
        }));
    }
    clock.wait_for_sleepers(3).await;
    assert_eq!(clock.pending_timers(), 3);
    assert_eq!(done.load(Ordering::SeqCst), 0);
    clock.set(20);
    tasks.remove(1).await.unwrap();
    tasks.remove(1).await.unwrap();
    assert_eq!(done.load(Ordering::SeqCst), 2);
    assert_eq!(clock.pending_timers(), 1);
    clock.set(30);
    tasks.remove(0).await.unwrap();
    assert_eq!(done.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn wait_for_sleepers_of_zero_is_immediate() {
    let clock = ManualClock::new(0);
    clock.wait_for_sleepers(0).await;
}

/// A waker that, when woken, uses the clock: reads the time, registers a new
/// timer and reads the timer count. Firing under the clock's lock would
/// deadlock (or panic) here.
struct Reentrant {
    clock: ManualClock,
    seen: Mutex<Vec<(i64, usize)>>,
    follow_up: Mutex<Option<Sleep>>,
}

impl Wake for Reentrant {
    fn wake(self: Arc<Self>) {
        let now = self.clock.now_millis();
        let mut next = self.clock.sleep_until(now + 100);
        let _ = poll_noop(&mut next);
        let pending = self.clock.pending_timers();
        let _ = self.clock.next_deadline();
        self.seen.lock().unwrap().push((now, pending));
        *self.follow_up.lock().unwrap() = Some(next);
    }
}

#[test]
fn timers_fire_outside_the_clock_lock() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let clock = ManualClock::new(0);
        let r = Arc::new(Reentrant {
            clock: clock.clone(),
            seen: Mutex::new(Vec::new()),
            follow_up: Mutex::new(None),
        });
        let waker = Waker::from(Arc::clone(&r));
        let mut s = clock.sleep_until(10);
        assert!(poll_with(&mut s, &waker).is_pending());
        clock.set(10);
        // Dropping the follow-up sleep (taking the lock in Drop) from here is fine too.
        let follow_up = r.follow_up.lock().unwrap().take();
        let seen = r.seen.lock().unwrap().clone();
        let pending_before_drop = clock.pending_timers();
        drop(follow_up);
        tx.send((seen, pending_before_drop, clock.pending_timers()))
            .unwrap();
    });
    // Only a failure waits this long: the thread finishes at once unless it deadlocked.
    let (seen, before, after) = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("firing a timer whose waker re-enters the clock deadlocked");
    assert_eq!(
        seen,
        vec![(10, 1)],
        "the waker saw the new time and its own new timer"
    );
    assert_eq!(before, 1);
    assert_eq!(after, 0);
}

#[test]
fn system_clock_reads_the_wall_clock() {
    let before = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let now = SystemClock.now_millis();
    let after = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert!(
        before <= now && now <= after,
        "{before} <= {now} <= {after}"
    );
}

#[test]
fn system_clock_sleep_until_a_past_instant_is_ready_at_once() {
    let now = SystemClock.now_millis();
    let mut s = SystemClock.sleep_until(now - 1_000);
    // No runtime is needed: a past instant creates no tokio timer.
    assert!(poll_noop(&mut s).is_ready());
}

#[tokio::test(start_paused = true)]
async fn system_clock_sleep_until_a_future_instant_is_pending() {
    let now = SystemClock.now_millis();
    let mut s = SystemClock.sleep_until(now + 3_600_000);
    assert!(poll_noop(&mut s).is_pending());
}

#[test]
fn a_suspend_moves_the_wall_and_boot_clocks_but_fires_no_monotonic_timer() {
    let clock = ManualClock::new(1_000);
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut mono = clock.sleep(Duration::from_millis(500));
    let mut wall = clock.sleep_until(1_500);
    assert!(poll_with(&mut mono, &recorder("mono", &log)).is_pending());
    assert!(poll_with(&mut wall, &recorder("wall", &log)).is_pending());

    clock.suspend(Duration::from_secs(60));
    assert_eq!(clock.now_millis(), 61_000);
    assert_eq!(
        clock.boot_millis(),
        60_000,
        "the boot clock counts the suspend"
    );
    assert_eq!(clock.elapsed_millis(), 0, "the monotonic clock stood still");
    assert_eq!(
        *log.lock().unwrap(),
        vec!["wall"],
        "only the wall timer fired"
    );
    assert!(poll_noop(&mut wall).is_ready());
    assert!(poll_with(&mut mono, &recorder("mono", &log)).is_pending());

    // Time that passes after the resume moves all three clocks.
    clock.advance(Duration::from_millis(500));
    assert_eq!(log.lock().unwrap().last(), Some(&"mono"));
    assert!(poll_noop(&mut mono).is_ready());
    assert_eq!(
        (
            clock.now_millis(),
            clock.boot_millis(),
            clock.elapsed_millis()
        ),
        (61_500, 60_500, 500)
    );
}

#[test]
fn a_wall_step_moves_neither_the_monotonic_nor_the_boot_clock() {
    let clock = ManualClock::new(1_000);
    clock.step_wall(3_600_000);
    clock.set(0);
    assert_eq!((clock.elapsed_millis(), clock.boot_millis()), (0, 0));
    clock.set(250);
    assert_eq!((clock.elapsed_millis(), clock.boot_millis()), (250, 250));
}

#[test]
fn system_clock_boot_time_never_goes_back_and_keeps_up_with_the_monotonic_clock() {
    let (boot0, mono0) = (SystemClock.boot_millis(), SystemClock.elapsed_millis());
    std::thread::sleep(Duration::from_millis(30));
    let (boot1, mono1) = (SystemClock.boot_millis(), SystemClock.elapsed_millis());
    assert!(boot1 - boot0 >= 30, "{boot0} then {boot1}");
    // The boot clock counts at least what the monotonic one does (more only
    // if the machine was suspended in between).
    assert!(
        boot1 - boot0 + 2 >= mono1 - mono0,
        "boot {boot0}..{boot1}, monotonic {mono0}..{mono1}"
    );
}

/// On Linux the boot clock is `CLOCK_BOOTTIME`: it moves with the kernel's
/// own reading of that clock.
#[cfg(target_os = "linux")]
#[test]
fn system_clock_boot_time_is_clock_boottime_on_linux() {
    fn boottime() -> i64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec.
        assert_eq!(
            unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) },
            0
        );
        ts.tv_sec * 1_000 + ts.tv_nsec / 1_000_000
    }
    let (k0, b0) = (boottime(), SystemClock.boot_millis());
    std::thread::sleep(Duration::from_millis(20));
    let (b1, k1) = (SystemClock.boot_millis(), boottime());
    assert!(
        b1 - b0 <= k1 - k0 + 1 && b1 - b0 + 1 >= 20,
        "ours {b0}..{b1}, the kernel's {k0}..{k1}"
    );
}
