//! The core's log events (`tracing`) delivered to a C callback:
//! `krabka_set_log_callback`.
//!
//! The shared crate's [`ForwardSubscriber`] is the library's global `tracing`
//! subscriber, installed by the first `krabka_set_log_callback`. Its
//! [`LevelSwitch`] is off until a callback is set (an event then costs one
//! atomic load), and the [`Forwarder`] queues records (bounded; what does
//! not fit is counted and reported in a later record) and delivers them
//! from a thread of its own, `krabka-log`: the runtime's workers and
//! librdkafka's threads never wait for the callback.

use std::cell::Cell;
use std::ffi::{c_char, c_void, CString};
use std::sync::{Mutex, OnceLock};

use krabka_coordination_bindings::args::ArgError;
use krabka_coordination_bindings::log::{
    self, ForwardSubscriber, Forwarder, LevelSwitch, LogRecord,
};

use crate::ffi::{guard, krabka_error, krabka_result, Failure};

/// A log level. `min_level` of `krabka_set_log_callback` is the least
/// severe level delivered (`KRABKA_LOG_LEVEL_WARN`: errors and warnings).
#[allow(non_camel_case_types)]
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum krabka_log_level {
    /// Nothing (as a `min_level`: no record is delivered).
    Off = 0,
    /// An error.
    Error = 1,
    /// A warning: something an operator should look at (a topic without a
    /// quorum, renewals failing, a broker unreachable).
    Warn = 2,
    /// What the library does (terms beginning and ending).
    Info = 3,
    /// Detail for debugging.
    Debug = 4,
    /// Every step.
    Trace = 5,
}

// The `tracing` levels by name (`tracing::Level` parses and prints them),
// so that this crate needs no `tracing` dependency of its own.
fn level_code(level: &str) -> krabka_log_level {
    match level {
        "ERROR" => krabka_log_level::Error,
        "WARN" => krabka_log_level::Warn,
        "INFO" => krabka_log_level::Info,
        "DEBUG" => krabka_log_level::Debug,
        _ => krabka_log_level::Trace,
    }
}

/// The name of the least severe level `min_level` lets through (None: off).
fn switch_level(min_level: u32) -> Result<Option<&'static str>, Failure> {
    Ok(match min_level {
        0 => None,
        1 => Some("ERROR"),
        2 => Some("WARN"),
        3 => Some("INFO"),
        4 => Some("DEBUG"),
        5 => Some("TRACE"),
        other => {
            return Err(ArgError::invalid(
                "min_level",
                "a krabka_log_level, 0 (OFF) to 5 (TRACE)",
                other,
            )
            .into())
        }
    })
}

/// One field of a log record: `key` and `value`, NUL-terminated UTF-8.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct krabka_log_field {
    /// The field's name (`role`, `member`, `error`, ...).
    pub key: *const c_char,
    /// Its value, as text.
    pub value: *const c_char,
}

/// One log record of the library, passed to the log callback. Every
/// pointer in it (strings NUL-terminated UTF-8) is valid only during the
/// call: copy what you keep.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug)]
pub struct krabka_log_record {
    /// The level.
    pub level: krabka_log_level,
    /// The module that logged it (`krabka_coordination::...`), or
    /// `librdkafka`.
    pub target: *const c_char,
    /// The message alone.
    pub message: *const c_char,
    /// The source file of the log statement, or NULL when unknown.
    pub file: *const c_char,
    /// Its line, or 0 when unknown.
    pub line: u32,
    /// The event's own fields (`error`, `retry_in`, ...), in the order
    /// they were recorded (NULL when `field_count` is 0).
    pub fields: *const krabka_log_field,
    /// The number of `fields`.
    pub field_count: usize,
    /// The member context the event happened in, outermost first (the
    /// member's `role`, `member` and `partition`; NULL when
    /// `context_count` is 0).
    pub context: *const krabka_log_field,
    /// The number of `context` fields.
    pub context_count: usize,
    /// The whole record as one line: `role=r member=m: message key=value`.
    pub text: *const c_char,
}

/// The log callback: called with each record, on the library's log thread
/// (`krabka-log`), one at a time, never on a thread of the caller's.
#[allow(non_camel_case_types)]
pub type krabka_log_callback =
    Option<unsafe extern "C" fn(record: *const krabka_log_record, user_data: *mut c_void)>;

struct Callback {
    cb: unsafe extern "C" fn(*const krabka_log_record, *mut c_void),
    user_data: *mut c_void,
}

// SAFETY: the caller made `user_data` usable from the log thread (the
// documented contract of `krabka_set_log_callback`).
unsafe impl Send for Callback {}

/// The levels forwarded: none until a callback is set.
static SWITCH: LevelSwitch = LevelSwitch::new(None);

/// The queue and the thread that deliver records.
static FORWARDER: Forwarder = Forwarder::new("krabka-log", 10_000, deliver);

/// The callback; held during the delivery of a batch, so that removing it
/// waits for a call in progress.
static CALLBACK: Mutex<Option<Callback>> = Mutex::new(None);

/// Whether the forward layer is this library's `tracing` subscriber.
static INSTALLED: OnceLock<bool> = OnceLock::new();

thread_local! {
    /// True on the log thread while it delivers.
    static DELIVERING: Cell<bool> = const { Cell::new(false) };
}

fn sink(record: LogRecord) {
    FORWARDER.send(record);
}

/// Text for C: a NUL inside becomes `\0`.
fn c_text(s: &str) -> CString {
    CString::new(s.replace('\0', "\\0")).unwrap_or_default()
}

fn c_pairs(pairs: &[(String, String)]) -> Vec<(CString, CString)> {
    pairs.iter().map(|(k, v)| (c_text(k), c_text(v))).collect()
}

fn views(pairs: &[(CString, CString)]) -> Vec<krabka_log_field> {
    pairs
        .iter()
        .map(|(k, v)| krabka_log_field {
            key: k.as_ptr(),
            value: v.as_ptr(),
        })
        .collect()
}

fn call(cb: &Callback, r: &LogRecord) {
    let target = c_text(&r.target);
    let message = c_text(&r.message);
    let file = r.file.as_deref().map(c_text);
    let text = c_text(&r.text());
    let fields = c_pairs(&r.fields);
    let context = c_pairs(&r.context);
    let (field_views, context_views) = (views(&fields), views(&context));
    let ptr_of = |v: &Vec<krabka_log_field>| {
        if v.is_empty() {
            std::ptr::null()
        } else {
            v.as_ptr()
        }
    };
    let record = krabka_log_record {
        level: level_code(r.level.as_str()),
        target: target.as_ptr(),
        message: message.as_ptr(),
        file: file.as_ref().map_or(std::ptr::null(), |f| f.as_ptr()),
        line: r.line.unwrap_or(0),
        fields: ptr_of(&field_views),
        field_count: field_views.len(),
        context: ptr_of(&context_views),
        context_count: context_views.len(),
        text: text.as_ptr(),
    };
    // SAFETY: the caller's callback, with a record valid for the call.
    unsafe { (cb.cb)(&record, cb.user_data) };
}

/// Delivers a batch (on the forwarder's thread).
fn deliver(batch: Vec<LogRecord>) {
    DELIVERING.with(|d| d.set(true));
    {
        let held = CALLBACK.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cb) = held.as_ref() {
            for r in &batch {
                // A C callback cannot unwind; the catch is for the
                // conversion, which must not take the log thread down.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(cb, r)));
            }
        }
    }
    DELIVERING.with(|d| d.set(false));
}

/// Sets the log callback: the library's log records from `min_level` up
/// (`KRABKA_LOG_LEVEL_WARN`: errors and warnings; `KRABKA_LOG_LEVEL_OFF`:
/// none; above `KRABKA_LOG_LEVEL_TRACE` is
/// `KRABKA_RESULT_INVALID_ARGUMENT`) go to `callback(record, user_data)`.
/// NULL removes it (and `min_level` is ignored). By default there is no
/// callback and nothing is recorded; Python's binding forwards from
/// WARN up by default, so WARN is the level to start from.
///
/// The callback runs on the library's log thread (`krabka-log`, started
/// with the first record): never on a thread of the caller's, never two
/// calls at once, in the order the records were made. Records are queued
/// (up to 10000; what does not fit is dropped and counted in a later WARN
/// record) so that no thread of the library waits for the callback. The
/// record and every pointer in it are valid only during the call. A record
/// queued before the callback changed goes to the callback set when it is
/// delivered. The callback may be called until `krabka_set_log_callback`
/// with another callback or NULL returns (which waits for a call in
/// progress), never after; the caller keeps `user_data` valid, and usable
/// from the log thread, until then. It may call any function of the
/// library but this one (`KRABKA_RESULT_INVALID_ARGUMENT` from the log
/// thread).
///
/// Process-wide (one callback per process; a forked child has none of the
/// parent's records but keeps its callback setting). Does not block but
/// for a call in progress; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_set_log_callback(
    callback: krabka_log_callback,
    user_data: *mut c_void,
    min_level: u32,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        if DELIVERING.with(|d| d.get()) {
            return Err(Failure::core(&krabka_coordination::Error::InvalidArgument(
                "krabka_set_log_callback must not be called from the log callback".into(),
            )));
        }
        let Some(cb) = callback else {
            SWITCH.set(None);
            *CALLBACK.lock().unwrap_or_else(|e| e.into_inner()) = None;
            return Ok(());
        };
        let level = switch_level(min_level)?;
        if !*INSTALLED.get_or_init(|| log::install(ForwardSubscriber::new(&SWITCH, sink))) {
            return Err(Failure::new(
                krabka_result::Fatal,
                "another tracing subscriber is installed in this process: the library's log records cannot be forwarded",
            ));
        }
        *CALLBACK.lock().unwrap_or_else(|e| e.into_inner()) = Some(Callback { cb, user_data });
        SWITCH.set(level.and_then(|name| name.parse().ok()));
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_checked_and_ordered() {
        assert_eq!(switch_level(0).unwrap(), None);
        assert_eq!(switch_level(2).unwrap(), Some("WARN"));
        assert_eq!(switch_level(5).unwrap(), Some("TRACE"));
        // Every name is one `tracing::Level` parses, and prints back.
        for code in 1..=5 {
            let name = switch_level(code).unwrap().unwrap();
            let switch = LevelSwitch::new(None);
            switch.set(name.parse().ok());
            let all = ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"];
            let enabled: Vec<_> = all
                .iter()
                .filter(|n| switch.enabled(&n.parse().unwrap()))
                .collect();
            assert_eq!(enabled.len(), code as usize, "{name}");
            assert_eq!(level_code(name) as u32, code);
        }
        let e = switch_level(6).unwrap_err();
        assert_eq!(e.code, krabka_result::InvalidArgument);
        assert!(e.message.contains("min_level"), "{}", e.message);
    }

    #[test]
    fn text_with_a_nul_stays_whole() {
        assert_eq!(c_text("a\0b").to_str().unwrap(), "a\\0b");
    }
}
