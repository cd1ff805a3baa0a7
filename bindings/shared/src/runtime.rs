//! The tokio runtime of a binding: built on first use, one per process,
//! rebuilt in a forked child.
//!
//! A binding keeps one [`RuntimeHolder`] in a `static`. Nothing starts when
//! the host loads the binding; the first call that needs the runtime builds
//! it. A forked child inherits the holder but not the runtime's worker
//! threads; the holder notices (it records the pid that built the runtime)
//! and builds a new runtime in the child, leaking the inherited one (dropping
//! it would join threads that do not exist). The holder takes no lock, so a
//! fork at any instant, by any thread, leaves nothing locked in the child.

use std::io;

use tokio::runtime::Runtime;

use crate::per_process::PerProcess;

/// A runtime that shuts down without waiting when dropped: only a runtime
/// that lost the race to be the process's runtime is ever dropped, possibly
/// on a thread that must not block.
struct Owned(Option<Runtime>);

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// The most threads of the runtime's blocking pool (tokio's default is
/// 512). The core runs librdkafka's blocking calls there (a state reader's
/// assign, seek and offset queries, a client's destruction, a token
/// refresh): a process acquiring a thousand roles at once would otherwise
/// start a thread for each call in flight, up to dozens. Calls past the
/// bound wait for a thread; each takes a broker round trip or, at worst,
/// its own timeout.
pub const BLOCKING_THREADS: usize = 32;

/// How long an idle thread of the blocking pool is kept (tokio's default
/// is 10 s): for the life of the process, in effect. When a Rust thread
/// ends, the standard library takes a process-wide lock (its stack-overflow
/// bookkeeping); a host that forks at that instant leaves it locked in the
/// child, where the first Rust thread to end then hangs. Threads that never
/// end cannot be caught so; the pool is bounded by [`BLOCKING_THREADS`].
pub const BLOCKING_KEEP_ALIVE: std::time::Duration =
    std::time::Duration::from_secs(365 * 24 * 3600);

/// The per-process runtime of a binding (see the module documentation).
pub struct RuntimeHolder {
    cell: PerProcess<Owned>,
    thread_name: &'static str,
    workers: usize,
}

impl RuntimeHolder {
    /// A holder whose runtime has `workers` worker threads named
    /// `thread_name` (visible in `ps -T`, profilers and debuggers).
    pub const fn new(thread_name: &'static str, workers: usize) -> Self {
        RuntimeHolder {
            cell: PerProcess::new(),
            thread_name,
            workers,
        }
    }

    /// The runtime of this process, built on first use and after a fork.
    pub fn get(&self) -> io::Result<&'static Runtime> {
        let owned = self.cell.get_or_try_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(self.workers.max(1))
                .max_blocking_threads(BLOCKING_THREADS)
                .thread_keep_alive(BLOCKING_KEEP_ALIVE)
                .thread_name(self.thread_name)
                .enable_all()
                .build()
                .map(|rt| Owned(Some(rt)))
        })?;
        Ok(owned
            .0
            .as_ref()
            .expect("a published runtime is never taken"))
    }

    /// The runtime of this process if it was built, without building it.
    pub fn current(&self) -> Option<&'static Runtime> {
        self.cell.get().and_then(|o| o.0.as_ref())
    }

    /// The pid that built the runtime in the holder, if any: another
    /// process's right after a fork, until this process builds its own.
    pub fn built_by(&self) -> Option<u32> {
        self.cell.maker_pid()
    }

    /// Forgets a runtime inherited through `fork()` (for a host's at-fork
    /// hook); returns true when there was one. Harmless in the process that
    /// built the runtime.
    pub fn forget_inherited(&self) -> bool {
        self.cell.forget_inherited()
    }

    /// The number of tasks alive on this process's runtime (0 when it was
    /// not built). For tests that check a cancelled call left nothing behind.
    pub fn alive_tasks(&self) -> usize {
        self.current()
            .map_or(0, |rt| rt.metrics().num_alive_tasks())
    }

    /// The name of the runtime's threads.
    pub fn thread_name(&self) -> &'static str {
        self.thread_name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_lazily_and_runs_tasks_on_named_threads() {
        static HOLDER: RuntimeHolder = RuntimeHolder::new("test-rt", 2);
        assert!(HOLDER.current().is_none());
        assert_eq!(HOLDER.alive_tasks(), 0);
        let rt = HOLDER.get().unwrap();
        assert!(std::ptr::eq(rt, HOLDER.get().unwrap()));
        assert_eq!(HOLDER.built_by(), Some(std::process::id()));
        let name = rt
            .block_on(rt.spawn(async { std::thread::current().name().map(str::to_owned) }))
            .unwrap();
        assert_eq!(name.as_deref(), Some("test-rt"));
        assert_eq!(HOLDER.thread_name(), "test-rt");
        assert!(!HOLDER.forget_inherited());
        assert!(HOLDER.current().is_some());
    }

    #[test]
    fn the_blocking_pool_is_bounded() {
        static HOLDER: RuntimeHolder = RuntimeHolder::new("test-blocking", 2);
        let rt = HOLDER.get().unwrap();
        let calls = BLOCKING_THREADS + 8;
        let threads = rt.block_on(async {
            let mut tasks = Vec::new();
            for _ in 0..calls {
                tasks.push(tokio::task::spawn_blocking(|| {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                    std::thread::current().id()
                }));
            }
            let mut ids = std::collections::HashSet::new();
            for t in tasks {
                ids.insert(t.await.unwrap());
            }
            ids.len()
        });
        assert_eq!(
            threads, BLOCKING_THREADS,
            "{calls} blocking calls at once run on the pool's {BLOCKING_THREADS} threads"
        );
    }
}
