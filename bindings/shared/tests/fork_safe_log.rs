//! The log subscriber leaves nothing locked in a forked child.
//!
//! A host forks at any instant (Python's `os.fork`, `multiprocessing`, a C
//! daemon), while other threads log, start and end. `tracing_subscriber`'s
//! `Registry`, which the bindings used before, hands thread ids out and
//! takes them back under process-wide mutexes as threads first log and
//! exit; a fork while one was held left it locked in the child, whose first
//! thread to log then hung (about one fork in 300 here; a forked Python
//! child met it in CI). The parent here churns threads that log inside a
//! span and end, and forks again and again; each child starts a thread that
//! logs inside a span of its own and must report back within two seconds.
//!
//! The threads are raw pthreads, not `std::thread`s: the standard library
//! takes a process-wide lock of its own as a `std::thread` starts and ends
//! in a Rust binary (its stack-overflow bookkeeping), which a binding's
//! library loaded by a host (no Rust `main`) takes only as a thread ends.
//! The bindings' runtimes keep their threads for the life of the process
//! for that reason; this test is about the subscriber alone.
#![cfg(target_os = "linux")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use krabka_coordination_bindings::log::{self, ForwardSubscriber, LevelSwitch, LogRecord};

static SWITCH: LevelSwitch = LevelSwitch::new(Some(tracing::Level::INFO));
static LOGGED: AtomicBool = AtomicBool::new(false);

fn sink(_record: LogRecord) {}

/// Logs one event inside a span, as a member's task does.
fn log_in_a_span(role: &str) {
    let span = tracing::info_span!("member", role);
    let _in = span.enter();
    tracing::info!("renewed");
}

extern "C" fn churn_once(_: *mut libc::c_void) -> *mut libc::c_void {
    log_in_a_span("parent");
    std::ptr::null_mut()
}

extern "C" fn churn(_: *mut libc::c_void) -> *mut libc::c_void {
    loop {
        let t = spawn_raw(churn_once);
        // SAFETY: `t` was created joinable and is joined once.
        unsafe { libc::pthread_join(t, std::ptr::null_mut()) };
    }
}

extern "C" fn child_logs(_: *mut libc::c_void) -> *mut libc::c_void {
    log_in_a_span("child");
    LOGGED.store(true, Ordering::SeqCst);
    std::ptr::null_mut()
}

fn spawn_raw(f: extern "C" fn(*mut libc::c_void) -> *mut libc::c_void) -> libc::pthread_t {
    // SAFETY: pthread_create with default attributes and a valid routine;
    // the routine takes no argument.
    unsafe {
        let mut t: libc::pthread_t = std::mem::zeroed();
        let rc = libc::pthread_create(&mut t, std::ptr::null(), f, std::ptr::null_mut());
        assert_eq!(rc, 0, "pthread_create");
        t
    }
}

#[test]
fn a_forked_child_logs_while_the_parents_threads_come_and_go() {
    assert!(log::install(ForwardSubscriber::new(&SWITCH, sink)));
    for _ in 0..2 {
        spawn_raw(churn);
    }
    let forks = 3000;
    let mut hung = 0;
    for _ in 0..forks {
        // SAFETY: the child only starts a thread, waits for a flag and
        // calls _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let t = spawn_raw(child_logs);
            let until = Instant::now() + Duration::from_secs(2);
            while !LOGGED.load(Ordering::SeqCst) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(1));
            }
            let code = if LOGGED.load(Ordering::SeqCst) { 0 } else { 1 };
            let _ = t;
            // SAFETY: ends the child without running the parent's atexit
            // handlers or destructors.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
            hung += 1;
        }
    }
    assert_eq!(hung, 0, "{hung} of {forks} forked children could not log");
}
