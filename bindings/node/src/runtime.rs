//! The package's tokio runtime, and promises of work done on it.
//!
//! The runtime is the shared crate's holder: built by the first call that
//! needs it (a process that only encodes and decodes never has runtime
//! threads), one per process. Its threads never keep Node's event loop
//! alive: only a promise that is still pending does (N-API's thread-safe
//! function behind it), so a process whose operations have all settled
//! exits by itself.
//!
//! [`promise`] runs a future on the runtime and settles a JavaScript
//! promise with its outcome on the JavaScript thread: the value is made
//! there by the caller's `convert`, a core error becomes its JavaScript
//! error there ([`crate::error`]), a panic a `FatalError`.

use std::future::Future;

use krabka_coordination::Error;
use krabka_coordination_bindings::blocking::panic_message;
use krabka_coordination_bindings::RuntimeHolder;
use napi::bindgen_prelude::{Object, ToNapiValue};
use napi::{sys, Env};
use tokio::runtime::Runtime;

use crate::error::to_napi;

/// The name of the runtime's threads (visible in `ps -T`, debuggers).
pub const THREAD_NAME: &str = "krabka-rt";

/// The runtime's worker threads. The work is I/O-bound; more than one
/// keeps a long poll from delaying a renewal.
pub const WORKER_THREADS: usize = 4;

/// The runtime of this process.
pub static RUNTIME: RuntimeHolder = RuntimeHolder::new(THREAD_NAME, WORKER_THREADS);

/// The runtime of this process, built on first use.
pub fn runtime() -> napi::Result<&'static Runtime> {
    RUNTIME.get().map_err(|e| {
        napi::Error::from_reason(format!("cannot start the krabka-coordination runtime: {e}"))
    })
}

/// What makes a promise's value on the JavaScript thread.
type MakeValue = Box<dyn FnOnce(&Env) -> napi::Result<sys::napi_value> + Send>;

/// A value made on the JavaScript thread when a promise settles.
pub struct Settle(MakeValue);

impl ToNapiValue for Settle {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        (val.0)(&Env::from_raw(env))
    }
}

/// A promise of `fut`, run on the runtime; its value is made by `convert`
/// on the JavaScript thread. `on_dropped` gets a value nobody can take (the
/// environment went away before the promise settled).
pub fn promise<'env, T, F, C>(env: &'env Env, fut: F, convert: C) -> napi::Result<Object<'env>>
where
    T: Send + 'static,
    F: Future<Output = Result<T, Error>> + Send + 'static,
    C: FnOnce(&Env, T) -> napi::Result<sys::napi_value> + Send + 'static,
{
    let rt = runtime()?;
    let (deferred, promise) = env.create_deferred()?;
    let task = rt.spawn(fut);
    rt.spawn(async move {
        let outcome = task.await;
        deferred.resolve(move |_env: Env| {
            Ok(Settle(Box::new(move |env: &Env| match outcome {
                Ok(Ok(value)) => convert(env, value),
                Ok(Err(e)) => Err(to_napi(env, &e)),
                Err(joined) => {
                    let why = if joined.is_panic() {
                        panic_message(joined.into_panic())
                    } else {
                        "the task was aborted".to_owned()
                    };
                    Err(to_napi(
                        env,
                        &Error::fatal("a krabka-coordination task", why),
                    ))
                }
            })))
        });
    });
    Ok(promise)
}

/// `value` as a JavaScript value of `env`.
pub fn js<T: ToNapiValue>(env: &Env, value: T) -> napi::Result<sys::napi_value> {
    // SAFETY: made in this env, on its thread.
    unsafe { T::to_napi_value(env.raw(), value) }
}
