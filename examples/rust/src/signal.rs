//! The signals the harness sends to member processes, by their `libc`
//! names (never hand-declared numbers, which differ between platforms).

use std::io;

/// A signal the harness sends to a member process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT (ctrl-c): the member resigns (or deregisters) and exits 0.
    Interrupt,
    /// SIGTERM: like SIGINT.
    Terminate,
    /// SIGSTOP: the process freezes; its lease runs out while it cannot
    /// renew.
    Stop,
    /// SIGCONT: a stopped process runs again (and learns it was fenced).
    Continue,
    /// SIGKILL: the process dies at once; no clean-up runs in it.
    Kill,
}

impl Signal {
    /// The platform's number of the signal.
    pub fn number(self) -> libc::c_int {
        match self {
            Signal::Interrupt => libc::SIGINT,
            Signal::Terminate => libc::SIGTERM,
            Signal::Stop => libc::SIGSTOP,
            Signal::Continue => libc::SIGCONT,
            Signal::Kill => libc::SIGKILL,
        }
    }

    /// The signal's name (`SIGTERM`, ...), for messages.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
            Signal::Stop => "SIGSTOP",
            Signal::Continue => "SIGCONT",
            Signal::Kill => "SIGKILL",
        }
    }
}

/// Sends `signal` to the process `pid`; the error names the signal and the
/// process.
pub fn send(pid: u32, signal: Signal) -> io::Result<()> {
    let target = libc::pid_t::try_from(pid).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("pid {pid} is out of range"),
        )
    })?;
    // SAFETY: kill(2) has no memory effects in this process; `target` is a
    // positive pid, never 0 or -1 (which would address process groups).
    let r = unsafe { libc::kill(target, signal.number()) };
    if r == 0 {
        Ok(())
    } else {
        let e = io::Error::last_os_error();
        Err(io::Error::new(
            e.kind(),
            format!("sending {} to process {pid}: {e}", signal.name()),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_the_platforms() {
        assert_eq!(Signal::Terminate.number(), libc::SIGTERM);
        assert_eq!(Signal::Stop.number(), libc::SIGSTOP);
        assert_ne!(Signal::Stop.number(), Signal::Continue.number());
    }

    #[test]
    fn a_signal_to_a_child_that_is_gone_names_it() {
        let mut child = std::process::Command::new("true").spawn().expect("true");
        let pid = child.id();
        child.wait().expect("reap");
        let e = send(pid, Signal::Continue).expect_err("the process was reaped");
        assert!(e.to_string().contains("SIGCONT"), "{e}");
        assert!(e.to_string().contains(&pid.to_string()), "{e}");
    }
}
