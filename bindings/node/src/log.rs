//! The core's log events in JavaScript: the package's `logger` (an
//! `EventEmitter` emitting `'log'`, `lib/logger.js`).
//!
//! The shared crate's forward layer is this addon's global `tracing`
//! subscriber, installed once per process by the first environment that
//! loads the package (`_installLogging`). An event on a tokio worker or a
//! librdkafka thread is queued by the shared `Forwarder` without blocking
//! (a full queue drops it and counts it); the forwarder's own thread
//! (`krabka-log`) hands each batch to a thread-safe function, without
//! blocking either (its queue is unbounded), and the batch is delivered on
//! the JavaScript thread. The thread-safe function is weak (unref'd): it
//! never keeps the process alive by itself.
//!
//! Which levels are forwarded at all is the shared `LevelSwitch`, set by the
//! package (`_setLogLevel`): off while the logger has no `'log'` listener,
//! else the level the application chose (`'warn'` by default), so a
//! disabled level costs one atomic load.

use std::sync::Mutex;

use krabka_coordination_bindings::log::{
    self, ForwardSubscriber, Forwarder, LevelSwitch, LogRecord,
};
use napi::bindgen_prelude::{Function, Object, ToNapiValue};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{sys, Env, Status};
use napi_derive::napi;
use tracing::Level;

/// The levels forwarded: none until the package sets them.
static SWITCH: LevelSwitch = LevelSwitch::new(None);

/// The queue and the thread that hand records to the JavaScript thread.
static FORWARDER: Forwarder = Forwarder::new("krabka-log", 10_000, deliver);

/// A batch of records, made into an array of record objects on the
/// JavaScript thread.
pub struct Batch(pub Vec<LogRecord>);

/// The thread-safe function that delivers batches: weak (it keeps nothing
/// alive), called without a leading error argument.
type Deliver = ThreadsafeFunction<Batch, (), Batch, Status, false, true, 0>;

/// The delivering function of the environment that installed the layer.
static DELIVER: Mutex<Option<Deliver>> = Mutex::new(None);

fn sink(record: LogRecord) {
    FORWARDER.send(record);
}

/// Hands a batch to the JavaScript thread (on the forwarder's thread). Never
/// blocks: the thread-safe function's queue is unbounded. Once the
/// environment is gone the records are dropped.
fn deliver(batch: Vec<LogRecord>) {
    let guard = DELIVER.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(f) = guard.as_ref() {
        let _ = f.call(Batch(batch), ThreadsafeFunctionCallMode::NonBlocking);
    }
}

/// The package's name of a level.
pub fn level_name(level: Level) -> &'static str {
    match level {
        Level::ERROR => "error",
        Level::WARN => "warn",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        Level::TRACE => "trace",
    }
}

fn pairs_object<'e>(env: &'e Env, pairs: &[(String, String)]) -> napi::Result<Object<'e>> {
    let mut o = Object::new(env)?;
    for (k, v) in pairs {
        o.set(k, v)?;
    }
    Ok(o)
}

impl ToNapiValue for Batch {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let env = Env::from_raw(env);
        let mut out = Vec::with_capacity(val.0.len());
        for r in val.0 {
            let mut o = Object::new(&env)?;
            o.set("level", level_name(r.level))?;
            o.set("target", &r.target)?;
            o.set("message", &r.message)?;
            o.set("text", r.text())?;
            o.set("fields", pairs_object(&env, &r.fields)?)?;
            o.set("context", pairs_object(&env, &r.context)?)?;
            if let Some(file) = &r.file {
                o.set("file", file)?;
            }
            if let Some(line) = r.line {
                o.set("line", line)?;
            }
            out.push(o);
        }
        // SAFETY: an array of objects of this env.
        unsafe { ToNapiValue::to_napi_value(env.raw(), out) }
    }
}

/// Installs the forward layer as the process's `tracing` subscriber and
/// makes `deliver` (called on this environment's JavaScript thread with an
/// array of records) the receiver of every record. Once per process: false
/// when another environment (a worker thread) installed it first, whose
/// logger then gets the records.
#[napi(js_name = "_installLogging", skip_typescript)]
pub fn install_logging(deliver: Function<Batch, ()>) -> napi::Result<bool> {
    let mut slot = DELIVER.lock().unwrap_or_else(|e| e.into_inner());
    if slot.is_some() {
        return Ok(false);
    }
    let f: Deliver = deliver
        .build_threadsafe_function::<Batch>()
        .weak::<true>()
        .callee_handled::<false>()
        .build_callback(|ctx| Ok(ctx.value))?;
    *slot = Some(f);
    drop(slot);
    log::install(ForwardSubscriber::new(&SWITCH, sink));
    Ok(true)
}

/// Parses a level name of the package.
pub fn parse_level(name: &str) -> Option<Level> {
    match name {
        "error" => Some(Level::ERROR),
        "warn" => Some(Level::WARN),
        "info" => Some(Level::INFO),
        "debug" => Some(Level::DEBUG),
        "trace" => Some(Level::TRACE),
        _ => None,
    }
}

/// Forwards `level` and everything more severe (`null`: nothing). The
/// package checks the name.
#[napi(js_name = "_setLogLevel", skip_typescript)]
pub fn set_log_level(level: Option<String>) {
    SWITCH.set(level.as_deref().and_then(parse_level));
}

/// Logs `message` from the core's side at `level` inside a member span of
/// `role` and `member`, as the core's own events are. Internal: tests the
/// bridge without a Kafka.
#[napi(js_name = "_logFromCore", skip_typescript)]
pub fn log_from_core(
    level: String,
    message: String,
    role: String,
    member: String,
) -> napi::Result<()> {
    let span = tracing::info_span!("member", role, member);
    let _in = span.enter();
    match level.as_str() {
        "error" => tracing::error!(probe = true, "{message}"),
        "warn" => tracing::warn!(probe = true, "{message}"),
        "info" => tracing::info!(probe = true, "{message}"),
        "debug" => tracing::debug!(probe = true, "{message}"),
        "trace" => tracing::trace!(probe = true, "{message}"),
        other => {
            return Err(napi::Error::from_reason(format!(
                "unknown level {other:?}: error, warn, info, debug, trace"
            )))
        }
    }
    Ok(())
}
