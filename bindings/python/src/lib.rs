//! `krabka_coordination._native`: the Python binding of the
//! `krabka-coordination` core.
//!
//! The binding translates; it never re-implements. Every encode, decode,
//! partition and comparison calls the core crate, every leadership operation
//! is the core `Client`'s, and everything a binding of any language needs
//! (the fork-aware runtime, process-bound handles, interruptible blocking,
//! argument wording, the error-kind table, the event stream, log
//! forwarding) is the shared crate's (`krabka_coordination_bindings`). What
//! is left here is about Python: the GIL, signals, asyncio, exception
//! classes and `logging`. The package `krabka_coordination`
//! (python/krabka_coordination) re-exports the public names and adds the
//! thin blocking and asyncio classes (`Client`, `AsyncClient`, ...).
//!
//! * [`values`], [`functions`]: the conformance surface (records, tokens,
//!   partitions).
//! * [`client`], [`leadership`], [`events`], [`records`], [`reports`]: the
//!   leadership API, each operation once, as a [`pending::PyPending`];
//!   [`offsets`]: the input offsets a guarded write commits with its records.
//! * [`lead`]: the leader loop (`Client.lead`), a term at a time.
//! * [`callbacks`]: `on_event=` callbacks, called from one thread.
//! * [`observe`]: the observer of roles (`Client.observe`) and its views.
//! * [`pending`], [`asyncio`]: waiting for an operation, blocking or awaited.
//! * [`runtime`]: the runtime holder and the fork hook; [`exit`]: the
//!   package's threads kept out of Python once the interpreter exits.
//! * [`error`], [`convert`]: exceptions and argument conversion;
//!   [`oauth`]: a callable as the OAUTHBEARER token provider.
//! * [`testing`]: the core's test kit (an in-memory cluster, a manual
//!   clock, processes to crash or pause), behind `krabka_coordination.testing`.
//! * [`logging`]: the core's log events in Python's `logging`;
//!   [`metrics`]: the core's metrics, read as dicts or Prometheus text.

pub mod asyncio;
pub mod callbacks;
pub mod client;
pub mod convert;
pub mod error;
pub mod events;
pub mod exit;
pub mod fence;
pub mod functions;
pub mod lead;
pub mod leadership;
pub mod logging;
pub mod metrics;
pub mod oauth;
pub mod observe;
pub mod offsets;
pub mod pending;
pub mod records;
pub mod reports;
pub mod runtime;
pub mod testing;
pub mod values;

use pyo3::prelude::*;

/// The native module. Its public names are re-exported by the package
/// `krabka_coordination`.
#[pymodule(name = "_native")]
mod native {
    use pyo3::prelude::*;

    #[pymodule_export]
    use crate::values::{PyFencingToken, PyKey, PyLease, PyRegistration};

    #[pymodule_export]
    use crate::functions::{
        decode_key, decode_lease, decode_registration, encode_key, encode_lease,
        encode_registration, murmur2, role_partition,
    };

    #[pymodule_export]
    use crate::client::PyClient;

    #[pymodule_export]
    use crate::leadership::PyLeadership;

    #[pymodule_export]
    use crate::lead::{PyLeaderLoop, PyTerm};

    #[pymodule_export]
    use crate::events::{PyEvent, PyEventStream};

    #[pymodule_export]
    use crate::observe::{PyObserver, PyRoleView};

    #[pymodule_export]
    use crate::pending::PyPending;

    #[pymodule_export]
    use crate::records::PyOutRecord;

    #[pymodule_export]
    use crate::offsets::{PyCommittedOffset, PyConsumedOffsets, PyInputOffset};

    #[pymodule_export]
    use crate::reports::{PyLeadershipStatus, PyRoleStateReport, PyRosterEntry, PyTopicReport};

    #[pymodule_export]
    use crate::testing::{PyGuardedWrite, PyTestCluster, PyTestProcess};

    #[pymodule_export]
    use crate::runtime::{_reset_runtime_after_fork, _runtime_alive_tasks, _runtime_ping};

    #[pymodule_export]
    use crate::error::_raise_core_error;

    #[pymodule_export]
    use crate::logging::{_log_from_core, _sync_log_level};

    #[pymodule_export]
    use crate::metrics::{metrics, metrics_text};

    #[pymodule_export]
    use crate::exit::before_exit;

    #[pymodule_export]
    use crate::fence::{_fence_check, _fence_error, _fence_proven, _fence_sql, _fence_verdict};

    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        super::init(m)
    }
}

/// Adds what the declarative module cannot: the exception classes (made at
/// run time), the `NO_EPOCH` constant, the fork hook of the runtime, the
/// log bridge, and the metrics recorder.
fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
    error::register(m)?;
    m.add(
        "NO_EPOCH",
        values::PyFencingToken(krabka_coordination::NO_EPOCH),
    )?;
    runtime::install_fork_hook(m)?;
    logging::install(m.py())?;
    metrics::install();
    Ok(())
}
