//! `_Observer`: the core's observer (`krabka_coordination::observe`)
//! through the shared handle (`ObserverHandle`), behind the package's
//! `Observer` (`lib/observer.js`: the async iterator, the emitter, the
//! `AbortSignal`).
//!
//! `client._observe(roles, renewals)` returns the handle at once: the core
//! checks the roles (none, empty, a NUL byte, too long) before any read, so
//! a bad role throws at the call. `next()` is a promise of the next view or
//! of `null` once closed; an error ends the observer (later calls give
//! `null`). `close()` wakes a pending `next()` with `null`.
//!
//! A view is a plain object: `role`, `partition`, `change` (the core's
//! stable name: `'initial'`, `'elected'`, `'renewed'`, `'cleared'`,
//! `'lapsed'`, `'roster'`), `leader` and `lapsed` (a `Lease` or `null`),
//! `roster` (`RosterEntry`s in rank order), `position` and `at` (`bigint`s).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use krabka_coordination::observe::RoleView;
use krabka_coordination::Result as CoreResult;
use krabka_coordination_bindings::{KafkaClient, ProcessBound};
use napi::bindgen_prelude::{BigInt, Null, Object, Unknown};
use napi::{sys, Env};
use napi_derive::napi;
use tokio_util::sync::CancellationToken;

use crate::error::OrThrow;
use crate::reports::RosterEntry;
use crate::runtime::{js, promise, runtime};
use crate::values::lease_to_js;

type Opening =
    Pin<Box<dyn Future<Output = CoreResult<krabka_coordination_bindings::ObserverHandle>> + Send>>;

/// Where the observer is: open, or (should the core's open ever wait) still
/// opening, or failed to open (its error was delivered once).
enum State {
    Opening(Opening),
    Open(krabka_coordination_bindings::ObserverHandle),
    Failed,
}

/// The observer of one or more roles (see the module documentation).
/// Internal: the package wraps it.
#[napi(js_name = "_Observer")]
pub struct NativeObserver {
    state: ProcessBound<Arc<tokio::sync::Mutex<State>>>,
    closed: CancellationToken,
    roles: Vec<String>,
}

impl NativeObserver {
    /// Opens an observer of `roles`: the core's checks run now, on the
    /// JavaScript thread (they come before any read and never wait), so a
    /// refused role throws here.
    pub fn open(
        env: &Env,
        client: &KafkaClient,
        roles: Vec<String>,
        renewals: bool,
    ) -> napi::Result<Self> {
        let rt = runtime()?;
        let mut fut: Opening = Box::pin(client.observe(roles.clone(), renewals));
        let first = {
            let _entered = rt.enter();
            fut.as_mut().poll(&mut Context::from_waker(Waker::noop()))
        };
        let (state, roles) = match first {
            Poll::Ready(opened) => {
                let h = opened.or_throw(env)?;
                let roles = h.roles().to_vec();
                (State::Open(h), roles)
            }
            // Not open yet: the first next() finishes the opening.
            Poll::Pending => (State::Opening(fut), roles),
        };
        Ok(NativeObserver {
            state: ProcessBound::new(
                "Observer",
                Arc::new(tokio::sync::Mutex::new(state)),
                Some(rt.handle().clone()),
            ),
            closed: CancellationToken::new(),
            roles,
        })
    }
}

/// The JavaScript object of a view (see the module documentation).
pub fn view_object(env: &Env, v: RoleView) -> napi::Result<sys::napi_value> {
    let mut o = Object::new(env)?;
    o.set("role", &*v.role)?;
    o.set("partition", v.partition)?;
    o.set("change", v.change.name())?;
    for (name, lease) in [("leader", v.leader), ("lapsed", v.lapsed)] {
        match lease {
            Some(l) => {
                let value = lease_to_js(env, l)?;
                // SAFETY: a value made in this env.
                o.set(name, unsafe {
                    Unknown::from_raw_unchecked(env.raw(), value)
                })?;
            }
            None => o.set(name, Null)?,
        }
    }
    let roster: Vec<RosterEntry> = v
        .roster
        .into_iter()
        .enumerate()
        .map(|(rank, e)| RosterEntry {
            member: e.member,
            rank: u32::try_from(rank).unwrap_or(u32::MAX),
            offset: BigInt::from(e.offset),
            registered_at: BigInt::from(e.registered_at),
        })
        .collect();
    o.set("roster", roster)?;
    o.set("position", BigInt::from(v.position))?;
    o.set("at", BigInt::from(v.at))?;
    js(env, o)
}

#[napi]
impl NativeObserver {
    /// A promise of the next view of any watched role, or of `null` once
    /// the observer is closed or ended; rejects with the error that ended
    /// it (later calls resolve `null`).
    #[napi(ts_return_type = "Promise<RoleView | null>")]
    pub fn next<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let state = Arc::clone(self.state.get().or_throw(env)?);
        let closed = self.closed.clone();
        promise(
            env,
            async move {
                let handle = {
                    let mut s = state.lock().await;
                    if let State::Opening(fut) = &mut *s {
                        match fut.await {
                            Ok(h) => *s = State::Open(h),
                            Err(e) => {
                                *s = State::Failed;
                                return Err(e);
                            }
                        }
                    }
                    match &*s {
                        State::Open(h) => h.clone(),
                        _ => return Ok(None),
                    }
                };
                if closed.is_cancelled() {
                    handle.close();
                }
                handle.next().await
            },
            |env, view| match view {
                Some(v) => view_object(env, v),
                None => js(env, Null),
            },
        )
    }

    /// Stops the reads; a pending and every later `next()` resolve `null`.
    /// Idempotent.
    #[napi]
    pub fn close(&self, env: Env) -> napi::Result<()> {
        self.closed.cancel();
        let state = Arc::clone(self.state.get().or_throw(&env)?);
        // The lock is free unless a next() is opening the observer; that
        // next() sees the closed flag.
        if let Ok(s) = state.try_lock() {
            if let State::Open(h) = &*s {
                h.close();
            }
        }
        Ok(())
    }

    /// The roles watched, sorted, each once.
    #[napi(getter)]
    pub fn roles(&self) -> Vec<String> {
        self.roles.clone()
    }

    /// True once `close()` was called.
    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.closed.is_cancelled()
    }
}
