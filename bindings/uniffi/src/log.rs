//! The core's `tracing` events, handed to a [`Logger`] of the host
//! (Kotlin's `setLogger(logger, LogLevel.WARN)`, Swift's `setLogger(logger:
//! minLevel:)`), over the shared crate's forward layer and forwarder
//! ([`krabka_coordination_bindings::log`]).
//!
//! The first `set_logger` installs the forward layer as this library's
//! global `tracing` subscriber (once per process; it stays). Events happen
//! on the runtime's tokio workers and librdkafka's threads, which never
//! call into the host: each record is queued (10 000 at most; what does not
//! fit is counted and reported by a record of its own) and delivered, in
//! order, from the library's own log thread, named `krabka-log`. A logger
//! that blocks holds up only that thread (and, once the queue is full,
//! drops records); one that throws loses that record only.
//!
//! Only events at `min_level` or more severe are turned into records at
//! all, and a logger is given none below its own level (records queued
//! under a logger set before it, at a more verbose level, are skipped);
//! `set_logger(None, _)` forwards nothing (records queued but not yet
//! delivered are dropped).

use std::sync::{Arc, RwLock};

use krabka_coordination_bindings::log::{
    self as shared, ForwardSubscriber, Forwarder, LevelSwitch,
};
use tracing::Level;

use crate::error::KrabkaError;

/// The severity of a log record, most severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum LogLevel {
    /// A failure the member did not recover from by itself.
    Error,
    /// Something an operator should know: renewals failing, a broker
    /// unreachable, a state topic of a risky shape.
    Warn,
    /// The member's milestones.
    Info,
    /// Details for debugging.
    Debug,
    /// Everything, librdkafka's chatter included.
    Trace,
}

impl LogLevel {
    fn of(level: Level) -> LogLevel {
        match level {
            Level::ERROR => LogLevel::Error,
            Level::WARN => LogLevel::Warn,
            Level::INFO => LogLevel::Info,
            Level::DEBUG => LogLevel::Debug,
            Level::TRACE => LogLevel::Trace,
        }
    }

    fn level(self) -> Level {
        match self {
            LogLevel::Error => Level::ERROR,
            LogLevel::Warn => Level::WARN,
            LogLevel::Info => Level::INFO,
            LogLevel::Debug => Level::DEBUG,
            LogLevel::Trace => Level::TRACE,
        }
    }
}

/// A field of a log record: its name and its value as text.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct LogField {
    /// The field's name (`error`, `retry_in`, `role`, ...).
    pub name: String,
    /// Its value, as text.
    pub value: String,
}

fn fields(pairs: Vec<(String, String)>) -> Vec<LogField> {
    pairs
        .into_iter()
        .map(|(name, value)| LogField { name, value })
        .collect()
}

/// One log event of the core.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct LogRecord {
    /// The level.
    pub level: LogLevel,
    /// The Rust module that logged it
    /// (`krabka_coordination::transport::kafka::topic`), or `librdkafka`.
    pub target: String,
    /// The message.
    pub message: String,
    /// The event's other fields, in the order they were recorded.
    pub fields: Vec<LogField>,
    /// The fields of the spans it happened in, outermost first: the
    /// member's `role`, `member` and `partition` when it happened inside a
    /// member.
    pub context: Vec<LogField>,
    /// The record as one line: `role=r member=m: message key=value ...`.
    pub text: String,
    /// The Rust source file of the log statement, when known.
    pub file: Option<String>,
    /// Its line, when known (signed, as Java's `Integer`).
    pub line: Option<i32>,
}

impl From<shared::LogRecord> for LogRecord {
    fn from(r: shared::LogRecord) -> Self {
        let text = r.text();
        LogRecord {
            level: LogLevel::of(r.level),
            target: r.target,
            message: r.message,
            fields: fields(r.fields),
            context: fields(r.context),
            text,
            file: r.file,
            line: r.line.map(crate::events::saturating_i32),
        }
    }
}

/// Where the core's log records go (see the module documentation): called
/// on the library's log thread, `krabka-log`, one record at a time, in
/// order. What it throws is ignored: that record is lost, the next ones
/// are delivered.
#[uniffi::export(callback_interface)]
pub trait Logger: Send + Sync {
    /// Takes one record.
    fn log(&self, record: LogRecord) -> Result<(), KrabkaError>;
}

/// The levels forwarded: nothing until a logger is set.
static SWITCH: LevelSwitch = LevelSwitch::new(None);

/// The queue and the `krabka-log` thread.
static FORWARDER: Forwarder = Forwarder::new("krabka-log", 10_000, deliver);

/// The logger records go to, and its level.
static LOGGER: RwLock<Option<(Arc<dyn Logger>, Level)>> = RwLock::new(None);

fn sink(record: shared::LogRecord) {
    FORWARDER.send(record);
}

/// Delivers a batch, on the `krabka-log` thread.
fn deliver(batch: Vec<shared::LogRecord>) {
    let current = LOGGER.read().unwrap_or_else(|e| e.into_inner()).clone();
    let Some((logger, min_level)) = current else {
        return;
    };
    for record in batch {
        // Queued under a more verbose level set before: this logger never
        // sees a record below its own level.
        if record.level > min_level {
            continue;
        }
        let record = LogRecord::from(record);
        // A logger that throws loses this record only. (A panic cannot
        // come from it: uniffi turns every exception into an error.)
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| logger.log(record)));
    }
}

/// Sends the core's log records at `min_level` (null/nil: `WARN`) or more
/// severe to `logger` from now on, or none when `logger` is null/nil;
/// replaces the logger set before. Records are delivered on the library's log thread, `krabka-log`,
/// never on the caller's thread or a worker of the runtime (see the module
/// documentation).
#[uniffi::export(default(min_level = None))]
pub fn set_logger(logger: Option<Box<dyn Logger>>, min_level: Option<LogLevel>) {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        shared::install(ForwardSubscriber::new(&SWITCH, sink));
    });
    let level = min_level.unwrap_or(LogLevel::Warn).level();
    let logger: Option<(Arc<dyn Logger>, Level)> = logger.map(|l| (Arc::from(l), level));
    let on = logger.is_some();
    *LOGGER.write().unwrap_or_else(|e| e.into_inner()) = logger;
    SWITCH.set(on.then_some(level));
}
