//! `_LeaderLoop` and `_Term`: the shared crate's leader loop
//! (`LeadHandle`, over the core's `LeaderLoop`) behind the package's
//! `client.lead(role, member, work, options)` (`lib/client.js`).
//!
//! The package drives it one term at a time: `nextTerm()` (a promise of the
//! next term once this member leads, or `null` once stopped), the user's
//! work with the term's leadership and an `AbortSignal` aborted when
//! `term.ended()` resolves, then `finish(term)` (resigns a role still held,
//! owes the backoff). The rules are the core's; nothing here decides when
//! to resign or how long to wait.

use std::sync::Arc;

use krabka_coordination::leadership::Term;
use krabka_coordination_bindings::{LeadHandle, LoopEventStream, ProcessBound};
use napi::bindgen_prelude::{Null, Object};
use napi::Env;
use napi_derive::napi;

use crate::error::OrThrow;
use crate::events::event_object;
use crate::leadership::NativeLeadership;
use crate::runtime::{js, promise, runtime};

/// A leader loop (see the module documentation). Internal: the package's
/// `client.lead` drives it.
#[napi(js_name = "_LeaderLoop")]
pub struct NativeLeaderLoop {
    handle: ProcessBound<LeadHandle>,
    events: Option<ProcessBound<Arc<tokio::sync::Mutex<LoopEventStream>>>>,
}

impl NativeLeaderLoop {
    /// Wraps a loop and, when asked for, its event stream.
    pub fn new(handle: LeadHandle, events: Option<LoopEventStream>) -> napi::Result<Self> {
        let rt = runtime()?.handle().clone();
        Ok(NativeLeaderLoop {
            handle: ProcessBound::new("leader loop", handle, Some(rt.clone())),
            events: events.map(|e| {
                ProcessBound::new(
                    "leader loop events",
                    Arc::new(tokio::sync::Mutex::new(e)),
                    Some(rt),
                )
            }),
        })
    }
}

#[napi]
impl NativeLeaderLoop {
    /// A promise of the next term once this member leads (after the backoff
    /// a previous term left owed), or of `null` once stopped; an error the
    /// core does not retry rejects it.
    #[napi(ts_return_type = "Promise<_Term | null>")]
    pub fn next_term<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let next = self.handle.get().or_throw(env)?.next_term();
        promise(env, next, |env, term| match term {
            Some(term) => js(env, NativeTerm::new(term)?),
            None => js(env, Null),
        })
    }

    /// Ends `term` once its work returned: resigns the role if still held
    /// and owes the backoff before the next term.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn finish<'env>(&self, env: &'env Env, term: &NativeTerm) -> napi::Result<Object<'env>> {
        let term = term.term.get().or_throw(env)?.clone();
        let finish = self.handle.get().or_throw(env)?.finish(term);
        promise(
            env,
            async move {
                finish.await;
                Ok(())
            },
            |env, ()| js(env, ()),
        )
    }

    /// Stops the loop: a waiting `nextTerm` deregisters and resolves with
    /// `null`, a running term's `ended()` resolves. Idempotent.
    #[napi]
    pub fn stop(&self, env: Env) -> napi::Result<()> {
        self.handle.get().or_throw(&env)?.stop();
        Ok(())
    }

    /// The package's loop is over: stops it and ends its event stream after
    /// the events sent so far. Idempotent.
    #[napi]
    pub fn end(&self, env: Env) -> napi::Result<()> {
        self.handle.get().or_throw(&env)?.end();
        Ok(())
    }

    /// A promise of the loop's next event (every term's, in order), or of
    /// `null` once the loop is over and every event was delivered (or when
    /// the loop was made without events).
    #[napi(ts_return_type = "Promise<LeadershipEvent | null>")]
    pub fn next_event<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let events = match &self.events {
            Some(e) => Some(Arc::clone(e.get().or_throw(env)?)),
            None => None,
        };
        promise(
            env,
            async move {
                Ok(match events {
                    Some(e) => e.lock().await.next().await,
                    None => None,
                })
            },
            |env, event| match event {
                Some(event) => event_object(env, &event),
                None => js(env, Null),
            },
        )
    }
}

/// One term of a leader loop. Internal: the package hands its leadership
/// and an `AbortSignal` of `ended()` to the work.
#[napi(js_name = "_Term")]
pub struct NativeTerm {
    term: ProcessBound<Term>,
}

impl NativeTerm {
    fn new(term: Term) -> napi::Result<Self> {
        let rt = runtime()?.handle().clone();
        Ok(NativeTerm {
            term: ProcessBound::new("term", term, Some(rt)),
        })
    }
}

#[napi]
impl NativeTerm {
    /// The term's number in its loop, from 1.
    #[napi(getter)]
    pub fn number(&self, env: Env) -> napi::Result<f64> {
        Ok(self.term.get().or_throw(&env)?.number() as f64)
    }

    /// The term's held leadership (a new handle on it each call).
    #[napi(getter)]
    pub fn leadership(&self, env: Env) -> napi::Result<NativeLeadership> {
        let l = Arc::clone(self.term.get().or_throw(&env)?.leadership());
        NativeLeadership::new(l)
    }

    /// A promise that resolves when the term ends (fenced, lease expired,
    /// resigned, a fatal error) or the loop is stopped.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn ended<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let ended = self.term.get().or_throw(env)?.ended().clone();
        promise(
            env,
            async move {
                ended.cancelled().await;
                Ok(())
            },
            |env, ()| js(env, ()),
        )
    }
}
