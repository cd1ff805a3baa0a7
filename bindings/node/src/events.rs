//! The leadership event stream in JavaScript: the native stream behind
//! `Leadership.events()` and the `Leadership` emitter.
//!
//! An event is a plain object made from the core's event, flattened by the
//! shared crate (`EventView`): `kind` is the core's stable name
//! (`'elected'`, `'renewed'`, `'fenced'`, ...), `role`, `member` and `at`
//! (the member's clock, epoch ms, a `bigint`) are always set, and the kind's
//! own fields (`token`, `deadline`, `rank`, `offset`, `failures`, `error`,
//! ...) are set for the kinds that have them and absent otherwise.
//!
//! The stream is the shared `EventStream`: it yields the member's events
//! from the subscription on and ends with the term. Its `next()` is one
//! promise; the stream sits behind an async mutex, so no event is lost.
//!
//! `_AcquireEvents` is the stream of an acquire's `onEvent` option, the
//! shared `AcquireEventStream`: the member's events from its registration
//! on (`registered`, `waiting`, `challenging`, ... while it acquires), then,
//! once it won, the term's, ending with the term; after a failed acquire it
//! ends with the acquire's last event.

use std::sync::Arc;

use krabka_coordination::events::Event;
use krabka_coordination::leadership::Leadership;
use krabka_coordination_bindings::{
    AcquireEventStream, AcquireFeed, EventStream, EventView, ProcessBound,
};
use napi::bindgen_prelude::{BigInt, Null, Object};
use napi::{sys, Env};
use napi_derive::napi;

use crate::error::error_value;
use crate::runtime::{js, promise, runtime};
use crate::values::token_to_js;

/// The event stream of one leadership. Internal: the package wraps it.
#[napi(js_name = "_EventStream")]
pub struct NativeEventStream {
    stream: ProcessBound<Arc<tokio::sync::Mutex<EventStream>>>,
}

impl NativeEventStream {
    /// Subscribes to `leadership` from now on.
    pub fn subscribe(leadership: &Arc<Leadership>) -> napi::Result<Self> {
        let handle = runtime()?.handle().clone();
        let stream = {
            let _entered = handle.enter();
            EventStream::subscribe(leadership)
        };
        Ok(NativeEventStream {
            stream: ProcessBound::new(
                "event stream",
                Arc::new(tokio::sync::Mutex::new(stream)),
                Some(handle),
            ),
        })
    }
}

/// The JavaScript object of an event (see the module documentation).
pub fn event_object(env: &Env, event: &Event) -> napi::Result<sys::napi_value> {
    let v = EventView::from(event);
    let mut o = Object::new(env)?;
    o.set("kind", v.kind)?;
    o.set("role", &*v.role)?;
    o.set("member", &*v.member)?;
    o.set("at", BigInt::from(v.at))?;
    if let Some(p) = v.partition {
        o.set("partition", p)?;
    }
    if let Some(off) = v.offset {
        o.set("offset", BigInt::from(off))?;
    }
    if let Some(rank) = v.rank {
        o.set("rank", rank as f64)?;
    }
    if let Some(at) = v.challenge_at {
        o.set("challengeAt", BigInt::from(at))?;
    }
    if let Some(token) = v.token {
        let token = token_to_js(env, token)?;
        // SAFETY: a value made in this env.
        o.set("token", unsafe {
            napi::bindgen_prelude::Unknown::from_raw_unchecked(env.raw(), token)
        })?;
    }
    if let Some(holder) = &v.holder {
        o.set("holder", &**holder)?;
    }
    if let Some(at) = v.granted_at {
        o.set("grantedAt", BigInt::from(at))?;
    }
    if let Some(d) = v.deadline {
        o.set("deadline", BigInt::from(d))?;
    }
    if let Some(f) = v.failures {
        o.set("failures", f)?;
    }
    if let Some(what) = &v.what {
        o.set("what", &**what)?;
    }
    if let Some(a) = v.attempt {
        o.set("attempt", a)?;
    }
    if let Some(r) = v.retry_in {
        o.set("retryIn", r.as_secs_f64())?;
    }
    if let Some(e) = &v.error {
        let value = error_value(env, e)?;
        // SAFETY: a value made in this env.
        o.set("error", unsafe {
            napi::bindgen_prelude::Unknown::from_raw_unchecked(env.raw(), value)
        })?;
    }
    if let Some(c) = v.cleared {
        o.set("cleared", c)?;
    }
    if let Some(c) = v.committed {
        o.set("committed", c)?;
    }
    js(env, o)
}

#[napi]
impl NativeEventStream {
    /// A promise of the next event, or of `null` once the term ended and
    /// its last events were delivered.
    #[napi(ts_return_type = "Promise<LeadershipEvent | null>")]
    pub fn next<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let stream = Arc::clone(
            self.stream
                .get()
                .map_err(|e| crate::error::to_napi(env, &e))?,
        );
        promise(
            env,
            async move {
                let mut stream = stream.lock().await;
                Ok(stream.next().await)
            },
            |env, event| match event {
                Some(event) => event_object(env, &event),
                None => js(env, Null),
            },
        )
    }
}

/// The events of one acquire and of the term it wins (see the module
/// documentation). Internal: the package makes one for `onEvent`.
#[napi(js_name = "_AcquireEvents")]
pub struct AcquireEvents {
    feed: ProcessBound<Arc<tokio::sync::Mutex<AcquireEventStream>>>,
    senders: std::sync::Mutex<Option<AcquireFeed>>,
}

#[napi]
impl AcquireEvents {
    /// A stream for one acquire, which takes its senders.
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> napi::Result<Self> {
        let (feed, stream) = AcquireEventStream::channel();
        let handle = runtime()?.handle().clone();
        Ok(AcquireEvents {
            feed: ProcessBound::new(
                "event stream",
                Arc::new(tokio::sync::Mutex::new(stream)),
                Some(handle),
            ),
            senders: std::sync::Mutex::new(Some(feed)),
        })
    }

    /// A promise of the next event, or of `null` once the acquire failed,
    /// or the term it won ended, and the last events were delivered.
    #[napi(ts_return_type = "Promise<LeadershipEvent | null>")]
    pub fn next<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let feed = Arc::clone(
            self.feed
                .get()
                .map_err(|e| crate::error::to_napi(env, &e))?,
        );
        promise(
            env,
            async move { Ok(feed.lock().await.next().await) },
            |env, event| match event {
                Some(event) => event_object(env, &event),
                None => js(env, Null),
            },
        )
    }
}

impl AcquireEvents {
    /// The senders, for the one acquire that uses this stream (`None` once
    /// taken).
    pub fn take(&self) -> Option<AcquireFeed> {
        self.senders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}
