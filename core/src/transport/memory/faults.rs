//! What a test does to one process of an in-memory cluster: the state of a
//! [`MemoryTransport`](super::MemoryTransport) handle and of the clock its
//! process runs on ([`ProcessClock`]).
//!
//! | state                   | a call of the handle                         | a timer of the process          |
//! | ----------------------- | -------------------------------------------- | ------------------------------- |
//! | [`ProcessState::Running`] | goes through                               | fires at its instant            |
//! | [`ProcessState::CutOff`]  | fails at once, TRANSIENT                   | fires at its instant            |
//! | [`ProcessState::Paused`]  | waits, then goes through once resumed      | fires once resumed, if due      |
//! | [`ProcessState::Crashed`] | never answers                              | never fires                     |
//!
//! Transitions: any state to any other, except out of `Crashed` (a crash
//! is for good, as a SIGKILL is). A paused process is a SIGSTOPped one: its
//! clocks go on (the monotonic time counts the pause), so on resume its
//! timers that came due fire and the calls it had sent reach the cluster,
//! where a newer epoch fences them. The calls go first: a timer of the
//! process waits until no call of it waits at the gate, so a write in
//! flight across the pause meets the cluster (and is fenced there) before
//! the process's own lease timer can end its term, whatever the runtime.
//!
//! Besides the state, [`Faults::fail_until`] makes every call fail with a
//! transient error until an instant of the cluster's clock (a broker that
//! refuses for a while).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{watch, Notify};

use crate::clock::{Clock, ManualClock, Sleep};
use crate::error::{Error, Result};

/// The state of one process of an in-memory cluster (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessState {
    /// Calls go through; timers fire.
    Running,
    /// Every call fails at once with a transient error (a cut network).
    CutOff,
    /// Calls and timers wait for the resume (SIGSTOP).
    Paused,
    /// Nothing answers and nothing fires, for good (SIGKILL).
    Crashed,
}

/// The faults of one handle: shared by its clones, by the epochs it mints
/// and by its [`ProcessClock`].
#[derive(Debug)]
pub struct Faults {
    state: watch::Sender<ProcessState>,
    /// How many calls of the process wait at the gate (paused), and a
    /// wake-up each time that number falls.
    gated: AtomicUsize,
    gate_left: Notify,
    /// Calls fail with a transient error until this wall instant (epoch ms
    /// of the cluster's clock).
    failing_until: Mutex<Option<i64>>,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            state: watch::Sender::new(ProcessState::Running),
            gated: AtomicUsize::new(0),
            gate_left: Notify::new(),
            failing_until: Mutex::new(None),
        }
    }
}

impl Faults {
    /// The current state.
    pub fn state(&self) -> ProcessState {
        *self.state.borrow()
    }

    /// Moves the process to `to`. A crashed process stays crashed: the call
    /// then returns [`Error::InvalidArgument`].
    pub fn set(&self, to: ProcessState) -> Result<()> {
        let mut refused = false;
        self.state.send_if_modified(|s| {
            if *s == ProcessState::Crashed && to != ProcessState::Crashed {
                refused = true;
                return false;
            }
            let changed = *s != to;
            *s = to;
            changed
        });
        if refused {
            return Err(Error::InvalidArgument(
                "the process has crashed: a crash is for good".into(),
            ));
        }
        Ok(())
    }

    /// Makes every call fail with a transient error until `until` (epoch ms
    /// on the cluster's clock); `None` ends that at once.
    pub fn fail_until(&self, until: Option<i64>) {
        *self.failing_until.lock().unwrap_or_else(|e| e.into_inner()) = until;
    }

    /// Waits while the process is paused, forever when it crashed; fails
    /// at once when it is cut off or failing at `now`.
    pub(crate) async fn gate(&self, what: &str, now: i64) -> Result<()> {
        if !self.is_open() {
            self.gated.fetch_add(1, Ordering::SeqCst);
            let _left = GateLeft(self);
            self.wait_running_or_cut().await;
        }
        if self.state() == ProcessState::CutOff {
            return Err(Error::transient(
                what.to_owned(),
                "this process is cut off from the in-memory cluster",
            ));
        }
        let failing = *self.failing_until.lock().unwrap_or_else(|e| e.into_inner());
        if failing.is_some_and(|until| now < until) {
            return Err(Error::transient(
                what.to_owned(),
                "the in-memory cluster fails this process's calls for a while",
            ));
        }
        Ok(())
    }

    fn is_open(&self) -> bool {
        matches!(self.state(), ProcessState::Running | ProcessState::CutOff)
    }

    /// Returns once no call of the process waits at the gate.
    async fn calls_through(&self) {
        loop {
            let left = self.gate_left.notified();
            tokio::pin!(left);
            left.as_mut().enable();
            if self.gated.load(Ordering::SeqCst) == 0 {
                return;
            }
            left.await;
        }
    }

    /// Returns once the process is running or cut off (a cut-off process
    /// still runs its own code); never for a crashed one.
    async fn wait_running_or_cut(&self) {
        let mut rx = self.state.subscribe();
        loop {
            match *rx.borrow_and_update() {
                ProcessState::Running | ProcessState::CutOff => return,
                ProcessState::Paused | ProcessState::Crashed => {}
            }
            if rx.changed().await.is_err() {
                // The sender lives in `self`, which the caller borrows.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// The clock of one process on an in-memory cluster: the cluster's
/// [`ManualClock`], whose timers wait while the process is paused and
/// never fire once it crashed (see the module docs). Reading the time is
/// never held up.
#[derive(Clone, Debug)]
pub struct ProcessClock {
    shared: ManualClock,
    faults: Arc<Faults>,
}

impl ProcessClock {
    /// The clock of the process whose faults are `faults`.
    pub fn new(shared: ManualClock, faults: Arc<Faults>) -> Self {
        ProcessClock { shared, faults }
    }

    fn gated(&self, timer: Sleep) -> Sleep {
        let faults = Arc::clone(&self.faults);
        Box::pin(async move {
            timer.await;
            faults.wait_running_or_cut().await;
            // The calls held across a pause go first (see the module docs).
            faults.calls_through().await;
        })
    }
}

impl Clock for ProcessClock {
    fn now_millis(&self) -> i64 {
        self.shared.now_millis()
    }

    fn elapsed_millis(&self) -> i64 {
        self.shared.elapsed_millis()
    }

    fn boot_millis(&self) -> i64 {
        self.shared.boot_millis()
    }

    fn sleep_until(&self, at_millis: i64) -> Sleep {
        self.gated(self.shared.sleep_until(at_millis))
    }

    fn sleep(&self, d: Duration) -> Sleep {
        self.gated(self.shared.sleep(d))
    }
}

/// Counts a call out of the gate when it leaves, however it leaves (a
/// dropped future too).
struct GateLeft<'a>(&'a Faults);

impl Drop for GateLeft<'_> {
    fn drop(&mut self) {
        self.0.gated.fetch_sub(1, Ordering::SeqCst);
        self.0.gate_left.notify_waiters();
    }
}
