//! The core's log events in Python's `logging`, on the logger
//! `krabka_coordination`.
//!
//! The shared crate's forward layer is this extension's global `tracing`
//! subscriber (installed at import). Records are queued and delivered from
//! a thread of their own (`krabka-log`), which takes the GIL to call
//! `logger.log(level, ...)`; the runtime's workers never wait for the GIL.
//!
//! Levels: `ERROR` 40, `WARN` 30 (`WARNING`), `INFO` 20, `DEBUG` 10, and
//! `TRACE` 5 (below `DEBUG`; shows only when the logger is set to 5 or
//! lower). Which levels are forwarded at all follows the logger's effective
//! level, read at import, whenever a client is made, and after every batch
//! delivered; by default Python's root level, `WARNING`, so that a member
//! that cannot reach Kafka, or whose renewals fail, is not silent.
//!
//! Each record carries the extra attributes `krabka_target` (the Rust
//! module, or `librdkafka`), `krabka_fields` (the event's fields) and
//! `krabka_context` (the member's `role`, `member` and `partition`, when the
//! event happened inside a member), each field a `str`.

use krabka_coordination_bindings::log::{
    self, ForwardSubscriber, Forwarder, LevelSwitch, LogRecord,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tracing::Level;

/// The logger every record goes to.
pub const LOGGER: &str = "krabka_coordination";

/// The levels forwarded; set from the logger's effective level.
static SWITCH: LevelSwitch = LevelSwitch::new(Some(Level::WARN));

/// The queue and the thread that deliver records to Python.
static FORWARDER: Forwarder = Forwarder::new("krabka-log", 10_000, deliver);

fn sink(record: LogRecord) {
    FORWARDER.send(record);
}

/// Python's level number of a `tracing` level.
pub fn python_level(level: Level) -> i32 {
    match level {
        Level::ERROR => 40,
        Level::WARN => 30,
        Level::INFO => 20,
        Level::DEBUG => 10,
        Level::TRACE => 5,
    }
}

/// The most verbose `tracing` level a Python level lets through.
fn switch_level(python: i64) -> Option<Level> {
    match python {
        i64::MIN..=5 => Some(Level::TRACE),
        6..=10 => Some(Level::DEBUG),
        11..=20 => Some(Level::INFO),
        21..=30 => Some(Level::WARN),
        31..=40 => Some(Level::ERROR),
        _ => None,
    }
}

/// Reads the logger's effective level into the switch.
pub fn sync_level(py: Python<'_>) -> PyResult<()> {
    let level: i64 = logger(py)?.call_method0("getEffectiveLevel")?.extract()?;
    SWITCH.set(switch_level(level));
    Ok(())
}

fn logger(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    py.import("logging")?.call_method1("getLogger", (LOGGER,))
}

fn log_one(py: Python<'_>, logger: &Bound<'_, PyAny>, r: LogRecord) -> PyResult<()> {
    let text = r.text();
    let as_dict = |pairs: Vec<(String, String)>| -> PyResult<Bound<'_, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in pairs {
            d.set_item(k, v)?;
        }
        Ok(d)
    };
    let extra = PyDict::new(py);
    extra.set_item("krabka_target", &r.target)?;
    extra.set_item("krabka_fields", as_dict(r.fields)?)?;
    extra.set_item("krabka_context", as_dict(r.context)?)?;
    // The record names the Rust source of the event, not this module.
    let level = python_level(r.level);
    if !logger.call_method1("isEnabledFor", (level,))?.is_truthy()? {
        return Ok(());
    }
    let file = r.file.unwrap_or(r.target);
    let record = logger.call_method1(
        "makeRecord",
        (
            LOGGER,
            level,
            file,
            r.line.unwrap_or(0),
            "%s",
            (text,),
            py.None(),
            py.None(),
            extra,
        ),
    )?;
    logger.call_method1("handle", (record,))?;
    Ok(())
}

/// Delivers a batch (on the forwarder's thread). During interpreter
/// shutdown the records are dropped.
fn deliver(batch: Vec<LogRecord>) {
    crate::exit::attach(|py| {
        let Ok(logger) = logger(py) else {
            return;
        };
        for record in batch {
            if let Err(e) = log_one(py, &logger, record) {
                // A handler that raises: Python's logging reports its own
                // handler errors; this is the conversion failing.
                e.write_unraisable(py, Some(&logger));
            }
        }
        let _ = sync_level(py);
    });
}

/// Installs the forward layer and reads the logger's level (at import).
pub fn install(py: Python<'_>) -> PyResult<()> {
    log::install(ForwardSubscriber::new(&SWITCH, sink));
    sync_level(py)
}

/// Reads the `krabka_coordination` logger's effective level again, so that
/// a level set after import takes effect (clients call it when made).
#[pyfunction]
pub fn _sync_log_level(py: Python<'_>) -> PyResult<()> {
    sync_level(py)
}

/// Logs `message` from the core's side at `level` (`"error"`, `"warn"`,
/// `"info"`, `"debug"`, `"trace"`) inside a member span of `role` and
/// `member`, as the core's own events are.
///
/// Internal: tests the bridge without a Kafka.
#[pyfunction]
pub fn _log_from_core(level: &str, message: &str, role: &str, member: &str) -> PyResult<()> {
    let span = tracing::info_span!("member", role, member);
    let _in = span.enter();
    match level {
        "error" => tracing::error!(probe = true, "{message}"),
        "warn" => tracing::warn!(probe = true, "{message}"),
        "info" => tracing::info!(probe = true, "{message}"),
        "debug" => tracing::debug!(probe = true, "{message}"),
        "trace" => tracing::trace!(probe = true, "{message}"),
        other => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "unknown level {other:?}: error, warn, info, debug, trace"
            )))
        }
    }
    Ok(())
}
