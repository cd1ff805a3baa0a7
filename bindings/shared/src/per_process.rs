//! [`PerProcess`]: a value made once per process, found without a lock, and
//! never shared with a forked child.
//!
//! `fork()` copies memory but only the calling thread. A value whose threads
//! were the parent's (a tokio runtime, a channel drained by a thread) is
//! useless in the child, and a lock that another thread held at the instant
//! of the fork stays locked in the child forever. So the cell:
//!
//! * records the pid that made its value, and makes a new value when asked
//!   from another process;
//! * takes no lock: the slot is an atomic pointer swapped with
//!   compare-and-swap, so a fork at any instant leaves nothing locked;
//! * never frees a value: the value of this process lives until the process
//!   ends (hence `&'static`), and an inherited one is leaked on purpose,
//!   since dropping it would wait for threads that do not exist in the child.

use std::sync::atomic::{AtomicPtr, Ordering};

struct Entry<T> {
    pid: u32,
    value: T,
}

/// A value of type `T` per process (see the module documentation).
pub struct PerProcess<T: Send + Sync + 'static> {
    slot: AtomicPtr<Entry<T>>,
}

impl<T: Send + Sync + 'static> Default for PerProcess<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Send + Sync + 'static> PerProcess<T> {
    /// An empty cell (usable in a `static`).
    pub const fn new() -> Self {
        PerProcess {
            slot: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The value of this process, if one was made.
    pub fn get(&self) -> Option<&'static T> {
        let entry = self.slot.load(Ordering::Acquire);
        // SAFETY: a non-null slot points at an entry that is never freed
        // (see the module documentation).
        let entry: &'static Entry<T> = unsafe { entry.as_ref()? };
        (entry.pid == std::process::id()).then_some(&entry.value)
    }

    /// The value of this process, made by `init` when there is none (the
    /// first use, or the first use in a forked child).
    ///
    /// Two threads that race to make the first value both run `init`; one
    /// value is kept and the other dropped, so `init` must be harmless to run
    /// twice and its value harmless to drop.
    pub fn get_or_try_init<E>(&self, init: impl FnOnce() -> Result<T, E>) -> Result<&'static T, E> {
        if let Some(value) = self.get() {
            return Ok(value);
        }
        let pid = std::process::id();
        let made = Box::into_raw(Box::new(Entry {
            pid,
            value: init()?,
        }));
        let mut current = self.slot.load(Ordering::Acquire);
        loop {
            // SAFETY: as in `get`.
            if let Some(entry) = unsafe { current.as_ref() } {
                if entry.pid == pid {
                    // Another thread of this process won the race.
                    // SAFETY: `made` came from Box::into_raw and was never
                    // published.
                    drop(unsafe { Box::from_raw(made) });
                    return Ok(&entry.value);
                }
            }
            match self
                .slot
                .compare_exchange(current, made, Ordering::AcqRel, Ordering::Acquire)
            {
                // An inherited entry that was in the slot is leaked.
                // SAFETY: `made` is now published and never freed.
                Ok(_) => return Ok(unsafe { &(*made).value }),
                Err(now) => current = now,
            }
        }
    }

    /// [`PerProcess::get_or_try_init`] for an `init` that cannot fail.
    pub fn get_or_init(&self, init: impl FnOnce() -> T) -> &'static T {
        match self.get_or_try_init(|| Ok::<T, std::convert::Infallible>(init())) {
            Ok(value) => value,
            Err(never) => match never {},
        }
    }

    /// The pid that made the value in the cell, if any (possibly another
    /// process's, before this process made its own).
    pub fn maker_pid(&self) -> Option<u32> {
        // SAFETY: as in `get`.
        unsafe { self.slot.load(Ordering::Acquire).as_ref() }.map(|e| e.pid)
    }

    /// Empties the cell if it holds another process's value (leaking it).
    /// Returns true when it did. A forked child may call it right after the
    /// fork; the next [`PerProcess::get_or_try_init`] would replace the value
    /// anyway.
    pub fn forget_inherited(&self) -> bool {
        let current = self.slot.load(Ordering::Acquire);
        // SAFETY: as in `get`.
        match unsafe { current.as_ref() } {
            Some(entry) if entry.pid != std::process::id() => self
                .slot
                .compare_exchange(
                    current,
                    std::ptr::null_mut(),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    #[test]
    fn makes_one_value_and_returns_it_every_time() {
        let cell: PerProcess<String> = PerProcess::new();
        assert!(cell.get().is_none());
        assert_eq!(cell.maker_pid(), None);
        let first = cell.get_or_init(|| "a".to_owned());
        let second = cell.get_or_init(|| "b".to_owned());
        assert!(std::ptr::eq(first, second));
        assert_eq!(second, "a");
        assert_eq!(cell.maker_pid(), Some(std::process::id()));
        // The value of this process is not "inherited".
        assert!(!cell.forget_inherited());
        assert_eq!(cell.get().map(String::as_str), Some("a"));
    }

    #[test]
    fn a_failed_init_leaves_the_cell_empty() {
        let cell: PerProcess<u32> = PerProcess::new();
        assert_eq!(cell.get_or_try_init(|| Err::<u32, _>("no")), Err("no"));
        assert!(cell.get().is_none());
        assert_eq!(cell.get_or_try_init(|| Ok::<_, ()>(7)), Ok(&7));
    }

    #[test]
    fn racing_threads_agree_on_one_value() {
        static CELL: PerProcess<usize> = PerProcess::new();
        let made = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let made = Arc::clone(&made);
                std::thread::spawn(move || {
                    let v = CELL.get_or_init(|| {
                        made.fetch_add(1, Ordering::SeqCst);
                        i
                    });
                    v as *const usize as usize
                })
            })
            .collect();
        let addresses: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(addresses.windows(2).all(|w| w[0] == w[1]), "{addresses:?}");
        assert!(made.load(Ordering::SeqCst) >= 1);
    }

    #[test]
    fn a_value_made_by_another_pid_is_replaced_and_leaked() {
        let cell: PerProcess<&'static str> = PerProcess::new();
        // Plant the entry a parent process would have left behind.
        let inherited = Box::into_raw(Box::new(Entry {
            pid: std::process::id().wrapping_add(1),
            value: "parent",
        }));
        cell.slot.store(inherited, Ordering::Release);
        assert!(
            cell.get().is_none(),
            "a parent's value is not this process's"
        );
        assert_eq!(cell.maker_pid(), Some(std::process::id().wrapping_add(1)));
        assert_eq!(*cell.get_or_init(|| "child"), "child");
        // The parent's entry was not freed (it is still readable).
        assert_eq!(unsafe { (*inherited).value }, "parent");

        let cell: PerProcess<&'static str> = PerProcess::new();
        cell.slot.store(inherited, Ordering::Release);
        assert!(cell.forget_inherited());
        assert_eq!(cell.maker_pid(), None);
    }
}
