//! The metrics registry leaves nothing locked in a forked child.
//!
//! Every describe, acquire and renewal registers its series in the
//! process's registry under a lock; a host that forks while another thread
//! holds it (Python's `os.fork` beside a thread that describes) must not
//! hand the child a lock that no thread of the child will ever release: the
//! child's first metric would hang.
//! Here the forking thread holds the lock itself across the fork, which
//! leaves it held in the child every time; the child must register a series
//! and render within two seconds.
#![cfg(target_os = "linux")]

use std::time::{Duration, Instant};

use krabka_coordination_bindings::metrics::Registry;

#[test]
fn a_forked_child_registers_while_the_parent_held_the_registry() {
    let registry = Registry::default();
    metrics::with_local_recorder(&registry, || {
        metrics::counter!("parent_total").increment(1);
    });
    let held = registry.hold_series_lock_for_tests();
    // SAFETY: the child only registers a series in a registry, renders it
    // and calls _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        metrics::with_local_recorder(&registry, || {
            metrics::counter!("child_total").increment(1);
        });
        let text = registry.render();
        // The child's registry is its own: the parent's series stay behind.
        let own = text.contains("child_total 1") && !text.contains("parent_total");
        let code = if own { 0 } else { 1 };
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    drop(held);
    let until = Instant::now() + Duration::from_secs(2);
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child without blocking.
        let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if done == pid {
            break;
        }
        if Instant::now() > until {
            // SAFETY: our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            panic!("the forked child hung on the registry's lock");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's registry was not its own (status {status})"
    );
    assert!(registry.render().contains("parent_total 1"));
}
