//! The child of `krabka run`: started in a process group of its own, bound
//! to the life of `krabka`, and stopped by a deadline.
//!
//! Two things end the child when `krabka` dies without stopping it (SIGKILL,
//! the OOM killer, a crash):
//!
//! * the parent-death signal: the child is started with
//!   `PR_SET_PDEATHSIG = SIGKILL`, so the kernel kills it the moment
//!   `krabka` is gone;
//! * a guard: a small process outside the child's group (forked from
//!   `krabka`, it runs no Rust code after the fork but `read`, `kill` and
//!   `_exit`) that holds the read end of a pipe whose write end only
//!   `krabka` holds. When `krabka` dies, the kernel closes that end, the
//!   guard's read returns end-of-file and it SIGKILLs the child's whole
//!   group: what the child started (`sh -c 'a; b'` forks) dies too. A
//!   normal stop disarms the guard first (one byte down the pipe).
//!
//! What neither covers: a process of the group that moved itself into
//! another group or session (a daemon's double fork).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use tokio::process::{Child, Command};

/// A started child: its process, its group and its guard.
pub struct Supervised {
    child: Child,
    /// The child's process group (its pid: it leads the group). Kept
    /// here because [`Child::id`] forgets the pid once the child is reaped,
    /// and what the child started may still run.
    group: libc::pid_t,
    guard: Option<Guard>,
}

impl Supervised {
    /// Starts `command` in a process group of its own, with the parent-death
    /// signal set and a guard watching `krabka`.
    ///
    /// The parent-death signal fires when the *thread* that spawned the
    /// child ends: `krabka run` spawns from the thread that runs the
    /// runtime's `block_on`, the main thread, which lives as long as the
    /// process.
    pub fn start(mut command: Command) -> io::Result<Supervised> {
        // SAFETY: getpid(2) cannot fail.
        let parent = unsafe { libc::getpid() };
        command.process_group(0).kill_on_drop(true);
        // SAFETY: the closure runs in the forked child before exec and calls
        // only prctl(2), getppid(2) and _exit(2), which are async-signal-safe;
        // it allocates nothing and takes no lock.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                ) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                // krabka died between the fork and the prctl: the signal
                // would never come.
                if libc::getppid() != parent {
                    libc::_exit(137);
                }
                Ok(())
            });
        }
        let child = command.spawn()?;
        let group = child
            .id()
            .and_then(|pid| libc::pid_t::try_from(pid).ok())
            .ok_or_else(|| io::Error::other("the child has no pid"))?;
        let guard = match Guard::watch(group) {
            Ok(g) => Some(g),
            Err(e) => {
                // The parent-death signal still ends the child itself.
                eprintln!(
                    "krabka: cannot start the guard of the child's process group ({e}); \
                     a SIGKILL of krabka ends the child but not what it started"
                );
                None
            }
        };
        Ok(Supervised {
            child,
            group,
            guard,
        })
    }

    /// The child's status when it has exited, without waiting.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits for the child to exit.
    pub async fn wait(&mut self) -> Option<ExitStatus> {
        self.child.wait().await.ok()
    }

    /// Sends `sig` to the child's process group.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on the process group made for the child. After the
        // child is reaped the group lives on while any member does; with
        // none left the call fails with ESRCH.
        unsafe {
            libc::kill(-self.group, sig);
        }
    }

    /// Stops the child: SIGTERM to its group, then SIGKILL once `kill` (a
    /// deadline) resolves if it has not exited by then; anything left in
    /// the group after the child exits is SIGKILLed too. Returns the
    /// child's status and whether SIGKILL was needed.
    pub async fn stop(
        &mut self,
        kill: impl std::future::Future<Output = ()>,
    ) -> (Option<ExitStatus>, bool) {
        if let Some(status) = self.try_wait() {
            self.signal(libc::SIGKILL);
            return (Some(status), false);
        }
        self.signal(libc::SIGTERM);
        tokio::pin!(kill);
        let mut killed = false;
        let status = tokio::select! {
            status = self.child.wait() => status.ok(),
            _ = &mut kill => {
                killed = true;
                self.signal(libc::SIGKILL);
                let _ = self.child.start_kill();
                self.child.wait().await.ok()
            }
        };
        // What the child started and left behind ends with it.
        self.signal(libc::SIGKILL);
        (status, killed)
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        // Disarmed before the child is reaped (Child's kill_on_drop), so the
        // guard never signals a group whose number was given to another.
        if let Some(g) = self.guard.take() {
            g.disarm();
        }
        // Nothing of the group outlives the term it ran in.
        self.signal(libc::SIGKILL);
    }
}

/// The guard process of a child's group (see the module's documentation).
struct Guard {
    pid: libc::pid_t,
    /// The write end of the guard's pipe: `krabka` holds it alone (it is
    /// close-on-exec, so the child does not inherit it).
    pipe: OwnedFd,
}

impl Guard {
    /// Forks the guard of process group `group`.
    fn watch(group: libc::pid_t) -> io::Result<Guard> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2(2) fills the two descriptors on success.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both are open descriptors this function owns from here.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fork(2) in a multi-threaded process; the forked process
        // calls only async-signal-safe functions (`guard_main`) and ends with
        // _exit(2): it never returns into Rust code, allocates or locks.
        match unsafe { libc::fork() } {
            -1 => Err(io::Error::last_os_error()),
            0 => unsafe { guard_main(read.as_raw_fd(), group) },
            pid => {
                drop(read);
                Ok(Guard { pid, pipe: write })
            }
        }
    }

    /// Tells the guard to exit without signalling, and reaps it.
    fn disarm(self) {
        let byte = [1u8];
        // SAFETY: write(2) of one byte from a live buffer to our pipe end.
        unsafe {
            libc::write(self.pipe.as_raw_fd(), byte.as_ptr().cast(), 1);
        }
        drop(self.pipe);
        // The guard exits as soon as it reads: reap it, but never hang here
        // (a guard someone stopped is left to init).
        for _ in 0..200 {
            let mut status = 0;
            // SAFETY: waitpid(2) on our own child, without blocking.
            let r = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
            if r != 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        eprintln!(
            "krabka: the guard process {} did not exit when disarmed",
            self.pid
        );
    }
}

/// The guard's whole life, in the forked process: only async-signal-safe
/// calls.
///
/// # Safety
///
/// Must be called only in a process just forked, with `read` the read end
/// of the guard's pipe.
unsafe fn guard_main(read: libc::c_int, group: libc::pid_t) -> ! {
    // SAFETY (every call below): async-signal-safe system calls on this
    // process's own descriptors and signal dispositions.
    unsafe {
        // Out of krabka's process group: the terminal's ^C is krabka's to
        // handle; signals that stop a service ask krabka, which disarms.
        libc::setpgid(0, 0);
        // `ps` and `top` show it as what it is.
        libc::prctl(libc::PR_SET_NAME, c"krabka-guard".as_ptr(), 0, 0, 0);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(sig, libc::SIG_IGN);
        }
        // Hold nothing of krabka's: not its sockets (a connection krabka
        // closes must close), not the pipe's write end. The read end
        // becomes descriptor 0.
        if libc::dup2(read, 0) < 0 {
            libc::_exit(1);
        }
        if libc::syscall(libc::SYS_close_range, 1u32, u32::MAX, 0u32) != 0 {
            for fd in 1..4096 {
                libc::close(fd);
            }
        }
        let mut byte = 0u8;
        loop {
            let n = libc::read(0, (&mut byte as *mut u8).cast(), 1);
            if n > 0 {
                // Disarmed.
                libc::_exit(0);
            }
            if n == 0 {
                break;
            }
            if *libc::__errno_location() != libc::EINTR {
                break;
            }
        }
        // End of file: krabka is gone.
        libc::kill(-group, libc::SIGKILL);
        libc::_exit(0);
    }
}

/// Checks that `program` names a file this process may execute, found as
/// `execvp` finds it: a name with a `/` as a path, any other name in the
/// directories of `$PATH`. Returns the reason otherwise, naming the
/// program (and `$PATH` when it was searched).
pub fn check_command(program: &str) -> Result<(), String> {
    if program.contains('/') {
        return executable(Path::new(program))
            .map_err(|why| format!("cannot run {program:?}: {why}"));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut found = None;
    for dir in std::env::split_paths(&path) {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        match executable(&dir.join(program)) {
            Ok(()) => return Ok(()),
            Err(why) if why != NOT_FOUND => found = found.or(Some((dir, why))),
            Err(_) => {}
        }
    }
    Err(match found {
        Some((dir, why)) => format!(
            "cannot run {program:?}: {} {why}",
            dir.join(program).display()
        ),
        None => format!(
            "cannot run {program:?}: no such command in $PATH ({})",
            path.to_string_lossy()
        ),
    })
}

/// [`executable`]'s reason for a path that does not exist.
const NOT_FOUND: &str = "does not exist";

/// Ok when `path` is a file this process may execute, or why not.
fn executable(path: &Path) -> Result<(), &'static str> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(NOT_FOUND),
        Err(_) => return Err("cannot be read"),
    };
    if meta.is_dir() {
        return Err("is a directory");
    }
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return Err(NOT_FOUND);
    };
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    if unsafe { libc::access(c.as_ptr(), libc::X_OK) } != 0 {
        return Err("is not executable");
    }
    Ok(())
}

/// The shell's exit code of a status: the code, or 128 + the signal.
pub fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => c.clamp(0, 255) as u8,
        (None, Some(sig)) => (128 + sig).clamp(0, 255) as u8,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGKILL)), 137);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGTERM)), 143);
    }

    #[test]
    fn a_command_that_cannot_run_is_named_with_why() {
        assert_eq!(check_command("sh"), Ok(()));
        assert_eq!(check_command("/bin/sh"), Ok(()));
        let e = check_command("/no/such/binary").unwrap_err();
        assert!(e.contains("\"/no/such/binary\": does not exist"), "{e}");
        let e = check_command("no-such-command-krabka").unwrap_err();
        assert!(e.contains("no such command in $PATH"), "{e}");
        let e = check_command("/").unwrap_err();
        assert!(e.contains("is a directory"), "{e}");
        let file = std::env::temp_dir().join(format!("krabka-not-exec-{}", std::process::id()));
        std::fs::write(&file, "#!/bin/sh\n").unwrap();
        let e = check_command(file.to_str().unwrap()).unwrap_err();
        std::fs::remove_file(&file).unwrap();
        assert!(e.contains("is not executable"), "{e}");
    }
}
