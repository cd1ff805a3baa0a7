//! The binding's tokio runtime (the shared crate's per-process holder) and
//! how an async export runs a core future on it.
//!
//! uniffi polls an exported future from the foreign side's executor (a
//! Kotlin coroutine, a Swift task); the core's futures need tokio. So every
//! operation is spawned on this runtime and the export awaits its
//! `JoinHandle`, which any executor may poll. A task keeps running when the
//! caller stops waiting for it: a guarded write or a resign never stops
//! halfway; an acquire is stopped through its cancellation token
//! ([`CancelOnDrop`]).

use std::future::Future;

use krabka_coordination::Result as CoreResult;
use krabka_coordination_bindings::RuntimeHolder;
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

use crate::error::KrabkaError;

/// The runtime of this process: I/O-bound work, two workers so that a long
/// poll never delays a renewal.
static RUNTIME: RuntimeHolder = RuntimeHolder::new("krabka-uniffi", 2);

/// The runtime, built on first use.
pub(crate) fn runtime() -> Result<&'static Runtime, KrabkaError> {
    RUNTIME.get().map_err(|e| KrabkaError::Fatal {
        detail: format!("cannot start the krabka_coordination runtime: {e}"),
    })
}

/// Runs `fut` on the runtime and waits for its result.
pub(crate) async fn run<T, F>(fut: F) -> Result<T, KrabkaError>
where
    F: Future<Output = CoreResult<T>> + Send + 'static,
    T: Send + 'static,
{
    let task = runtime()?.spawn(fut);
    match task.await {
        Ok(result) => result.map_err(|e| KrabkaError::from(&e)),
        Err(e) if e.is_panic() => Err(KrabkaError::Fatal {
            detail: "a krabka_coordination task panicked".into(),
        }),
        Err(_) => Err(KrabkaError::Cancelled {
            detail: "the runtime stopped the task".into(),
        }),
    }
}

/// Fires a cancellation token when dropped before [`CancelOnDrop::disarm`]:
/// an export's future dropped by a cancelled Kotlin coroutine or Swift task
/// stops the core operation.
pub(crate) struct CancelOnDrop(Option<CancellationToken>);

impl CancelOnDrop {
    /// A guard of `token`.
    pub(crate) fn new(token: CancellationToken) -> Self {
        CancelOnDrop(Some(token))
    }

    /// The operation finished: nothing to cancel.
    pub(crate) fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(token) = self.0.take() {
            token.cancel();
        }
    }
}
