//! [`ProcessBound`]: a value usable only in the process that made it.
//!
//! A handle on Kafka clients (a client, a held leadership) owns librdkafka
//! threads and tokio tasks of the process that made it. A forked child
//! inherits the handle's memory but none of those threads: using it would
//! hang, and dropping it would wait for threads that are not there. A
//! `ProcessBound` value refuses every use outside its process with an error
//! that says what to do, and in another process it is leaked instead of
//! dropped.
//!
//! In its own process it is dropped inside the runtime it was bound to, so
//! that the Kafka clients it owns hand their (blocking) destruction to the
//! runtime's blocking pool instead of the host's thread.

use std::mem::ManuallyDrop;

use krabka_coordination::Error;
use tokio::runtime::Handle;

/// A value usable only in the process that made it (see the module
/// documentation).
pub struct ProcessBound<T> {
    value: ManuallyDrop<T>,
    pid: u32,
    what: &'static str,
    handle: Option<Handle>,
}

impl<T: std::fmt::Debug> std::fmt::Debug for ProcessBound<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("ProcessBound");
        d.field("what", &self.what).field("pid", &self.pid);
        if self.pid == std::process::id() {
            d.field("value", &*self.value);
        }
        d.finish()
    }
}

impl<T> ProcessBound<T> {
    /// Binds `value` (a `what`, as errors name it: `"Client"`,
    /// `"Leadership"`) to this process; it is dropped inside the runtime of
    /// `handle` when given.
    pub fn new(what: &'static str, value: T, handle: Option<Handle>) -> Self {
        ProcessBound {
            value: ManuallyDrop::new(value),
            pid: std::process::id(),
            what,
            handle,
        }
    }

    /// The value, or [`Error::Fatal`] in another process (a forked child).
    pub fn get(&self) -> Result<&T, Error> {
        let here = std::process::id();
        if here == self.pid {
            Ok(&self.value)
        } else {
            Err(Error::fatal(
                format!("using a {} in process {here}", self.what),
                format!(
                    "it was made by process {} and belongs to it; a forked child must make its own",
                    self.pid
                ),
            ))
        }
    }

    /// The pid of the process that made the value.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// True in the process that made the value.
    pub fn is_home(&self) -> bool {
        self.pid == std::process::id()
    }
}

impl<T> Drop for ProcessBound<T> {
    fn drop(&mut self) {
        if self.pid != std::process::id() {
            // Leaked: its threads are another process's.
            return;
        }
        let _entered = self.handle.as_ref().map(Handle::enter);
        // SAFETY: dropped once, here, and never used again.
        unsafe { ManuallyDrop::drop(&mut self.value) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[derive(Debug)]
    struct Probe {
        dropped: Arc<AtomicBool>,
        in_runtime: Arc<AtomicBool>,
    }

    impl Drop for Probe {
        fn drop(&mut self) {
            self.dropped.store(true, Ordering::SeqCst);
            self.in_runtime
                .store(Handle::try_current().is_ok(), Ordering::SeqCst);
        }
    }

    fn probe() -> (Probe, Arc<AtomicBool>, Arc<AtomicBool>) {
        let dropped = Arc::new(AtomicBool::new(false));
        let in_runtime = Arc::new(AtomicBool::new(false));
        (
            Probe {
                dropped: dropped.clone(),
                in_runtime: in_runtime.clone(),
            },
            dropped,
            in_runtime,
        )
    }

    #[test]
    fn usable_at_home_and_dropped_inside_its_runtime() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (p, dropped, in_runtime) = probe();
        let bound = ProcessBound::new("Probe", p, Some(rt.handle().clone()));
        assert!(bound.get().is_ok());
        assert!(bound.is_home());
        assert_eq!(bound.pid(), std::process::id());
        drop(bound);
        assert!(dropped.load(Ordering::SeqCst));
        assert!(
            in_runtime.load(Ordering::SeqCst),
            "dropped outside the runtime"
        );
    }

    #[test]
    fn refused_and_leaked_in_another_process() {
        let (p, dropped, _) = probe();
        let mut bound = ProcessBound::new("Leadership", p, None);
        // What a forked child sees: a value made by another pid.
        bound.pid = std::process::id().wrapping_add(1);
        let err = bound.get().unwrap_err();
        assert_eq!(err.kind(), krabka_coordination::ErrorKind::Fatal);
        let message = err.to_string();
        assert!(
            message.contains("using a Leadership in process"),
            "{message}"
        );
        let chain = std::error::Error::source(&err)
            .map(|s| s.to_string())
            .unwrap_or_default();
        assert!(
            chain.contains("a forked child must make its own"),
            "{chain}"
        );
        assert!(!bound.is_home());
        drop(bound);
        assert!(
            !dropped.load(Ordering::SeqCst),
            "a foreign value must be leaked"
        );
    }
}
