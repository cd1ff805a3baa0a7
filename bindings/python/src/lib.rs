//! `krabka_coordination._native`: the Python binding of the
//! `krabka-coordination` core.
//!
//! The binding translates; it never re-implements. Every encode, decode,
//! partition and comparison calls the core crate. The Python package
//! `krabka_coordination` (python/krabka_coordination) re-exports these names.
//!
//! * [`values`]: the value classes (`Key`, `Registration`, `Lease`, `FencingToken`).
//! * [`functions`]: the codec and partitioning functions.
//! * [`error`]: the exception classes and the one mapping of core errors.
//! * [`leadership`]: acquire, hold, write, resign and describe a role's
//!   leadership on Kafka (asyncio and blocking forms).
//! * [`runtime`]: the fork-safe tokio runtime for asynchronous calls.
//! * [`convert`]: argument conversion with messages that name the field.
#![warn(missing_docs)]

pub mod convert;
pub mod error;
pub mod functions;
pub mod leadership;
pub mod runtime;
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
    use crate::leadership::{
        _describe_requests, acquire_leadership, acquire_leadership_blocking, describe_leadership,
        describe_leadership_blocking, describe_role_state, describe_role_state_blocking,
        ensure_state_topic, ensure_state_topic_blocking, PyLeadership, PyLeadershipStatus,
        PyOutRecord, PyRoleStateReport, PyRosterEntry, PyTopicReport,
    };

    #[pymodule_export]
    use crate::runtime::{
        _reset_runtime_after_fork, _runtime_alive_tasks, _runtime_ping, _runtime_ping_async,
    };

    #[pymodule_export]
    use crate::error::_raise_core_error;

    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        super::init(m)
    }
}

/// Adds what the declarative module cannot: the exception classes (made at
/// run time), the `NO_EPOCH` constant, and the fork hook of the runtime.
fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
    error::register(m)?;
    m.add(
        "NO_EPOCH",
        values::PyFencingToken(krabka_coordination::NO_EPOCH),
    )?;
    runtime::install_fork_hook(m)?;
    Ok(())
}
