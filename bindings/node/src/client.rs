//! `_Client`: the core client, built once from the Kafka settings object,
//! behind the package's `Client` (`lib/client.js`).
//!
//! One `_Client` owns one set of Kafka clients (the state-partition reader,
//! the registration producer, the DescribeTransactions connections), shared
//! by every role it acquires or describes; only a held role's epoch-bound
//! producer is per role. Every operation checks its arguments when called
//! (a bad argument throws at the call, before any I/O) and returns a
//! promise of work done on the runtime.
//!
//! An acquire is stopped through the core's cancellation token
//! ([`CancelToken`], fired by the package when the caller's `AbortSignal`
//! aborts): the core deregisters the member, and resigns a role won in the
//! instant of the cancel.

use std::sync::Mutex;

use krabka_coordination::{ElectionOptions, Error};
use krabka_coordination_bindings::args::SecondsBound;
use krabka_coordination_bindings::ArgError;
use krabka_coordination_bindings::{
    options, Field, KafkaClient, LeadershipArgs, ProcessBound, TimeoutArgs, TopicArgs,
};
use napi::bindgen_prelude::{Array, Function, Object, Unknown};
use napi::{Env, JsValue, ValueType};
use napi_derive::napi;
use tokio_util::sync::CancellationToken;

use crate::convert::{
    bool_value, is_nullish, kafka_config, opt_int_value, opt_object, prop, seconds_arg,
    seconds_value, str_arg, type_name,
};
use crate::error::{arg_napi, to_napi, OrThrow};
use crate::events::AcquireEvents;
use crate::lead::NativeLeaderLoop;
use crate::leadership::NativeLeadership;
use crate::oauth::{token_provider, TokenRequest};
use crate::observe::NativeObserver;
use crate::reports::{LeadershipStatus, RoleStateReport, TopicReport};
use crate::runtime::{js, promise, runtime};

/// A cancellation token for one acquire. Internal: the package fires it
/// when the caller's `AbortSignal` aborts.
#[napi(js_name = "_CancelToken")]
pub struct CancelToken {
    token: CancellationToken,
}

#[napi]
impl CancelToken {
    /// A token not yet fired.
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        CancelToken {
            token: CancellationToken::new(),
        }
    }

    /// Fires the token (idempotent).
    #[napi]
    pub fn cancel(&self) {
        self.token.cancel();
    }

    /// True once fired.
    #[napi(getter)]
    pub fn cancelled(&self) -> bool {
        self.token.is_cancelled()
    }
}

/// The timings of an acquire's or a loop's `options` (seconds; left out:
/// the core's defaults). Each is checked on its own here (the shared
/// crate's rule), so a refusal names its option in `field`; how they relate
/// is the core's to check when the timings are applied.
fn leadership_args(env: &Env, options: Option<&Unknown<'_>>) -> napi::Result<LeadershipArgs> {
    let options = opt_object(env, options, "options")?;
    let o = options.as_ref();
    let checked = |name: &str, field: Field, bound: SecondsBound| -> napi::Result<Option<f64>> {
        let v = prop(o, name)?;
        seconds_arg(env, v.as_ref(), field.name(), bound)?;
        seconds_value(env, v.as_ref(), field.name())
    };
    Ok(LeadershipArgs {
        lease_duration: checked(
            "leaseDuration",
            Field::LeaseDuration,
            SecondsBound::Positive,
        )?,
        renew_interval: checked(
            "renewInterval",
            Field::RenewInterval,
            SecondsBound::Positive,
        )?,
        challenge_stagger: checked(
            "challengeStagger",
            Field::ChallengeStagger,
            SecondsBound::NonNegative,
        )?,
    })
}

/// The core client of one Kafka settings object (see the module
/// documentation).
#[napi(js_name = "_Client")]
pub struct NativeClient {
    /// `None` once closed.
    inner: Mutex<Option<ProcessBound<KafkaClient>>>,
    partitions: i32,
}

impl NativeClient {
    /// The `_Client` of `client`, already built (a test-kit process's).
    pub fn on(client: KafkaClient) -> napi::Result<NativeClient> {
        let partitions = client.partitions();
        let handle = runtime()?.handle().clone();
        Ok(NativeClient {
            inner: Mutex::new(Some(ProcessBound::new("Client", client, Some(handle)))),
            partitions,
        })
    }

    /// The core client (a cheap clone), or `InvalidArgumentError` once
    /// closed.
    fn client(&self, env: &Env) -> napi::Result<KafkaClient> {
        let guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match guard.as_ref() {
            Some(bound) => bound.get().cloned().or_throw(env),
            None => Err(to_napi(
                env,
                &Error::InvalidArgument("the client is closed".into()),
            )),
        }
    }
}

#[napi]
impl NativeClient {
    /// Builds the shared Kafka clients from `kafka` (librdkafka settings).
    /// `options`: `partitions` (of the state topic, default 16),
    /// `stateTopic` (default `__coordination_state`), `connectTimeout`
    /// (seconds, default 10) and `operationTimeout` (seconds, default 30),
    /// checked by the shared crate, and `oauthToken` (the package's wrapper
    /// of the OAUTHBEARER token function, [`crate::oauth`]). The core
    /// refuses a setting librdkafka rejects; nothing connects yet.
    #[napi(
        constructor,
        ts_args_type = "kafka: KafkaSettings, options?: ClientOptions"
    )]
    pub fn new(env: Env, kafka: Unknown<'_>, options: Option<Unknown<'_>>) -> napi::Result<Self> {
        let options = opt_object(&env, options.as_ref(), "options")?;
        let o = options.as_ref();
        let partitions = opt_int_value(
            &env,
            prop(o, "partitions")?.as_ref(),
            Field::Partitions.name(),
            1,
            i32::MAX.into(),
        )?
        .map(options::partitions)
        .transpose()
        .or_throw(&env)?
        .unwrap_or(ElectionOptions::DEFAULT_PARTITIONS);
        let timeouts = TimeoutArgs {
            connect_timeout: seconds_value(
                &env,
                prop(o, "connectTimeout")?.as_ref(),
                Field::ConnectTimeout.name(),
            )?,
            operation_timeout: seconds_value(
                &env,
                prop(o, "operationTimeout")?.as_ref(),
                Field::OperationTimeout.name(),
            )?,
        };
        let mut config = kafka_config(&env, &kafka)?;
        if let Some(topic) = prop(o, "stateTopic")? {
            config = config.with_state_topic(str_arg(&env, &topic, "state_topic")?);
        }
        let mut config = timeouts.apply(config).or_throw(&env)?;
        if let Some(f) = prop(o, "oauthToken")?.filter(|f| !is_nullish(f)) {
            if f.get_type()? != ValueType::Function {
                return Err(arg_napi(
                    &env,
                    ArgError::wrong_type(Field::OAuthToken.name(), "a function", &type_name(&f)),
                ));
            }
            // SAFETY: a function value of this env.
            let f = unsafe { f.cast::<Function<'_, TokenRequest, ()>>() }?;
            let timeout = config.connect_timeout();
            config = config.with_oauth_token_provider(token_provider(&f, timeout)?);
        }
        let handle = runtime()?.handle().clone();
        let client = {
            // librdkafka's clients are made inside the runtime.
            let _entered = handle.enter();
            KafkaClient::new(config, partitions).or_throw(&env)?
        };
        Ok(NativeClient {
            inner: Mutex::new(Some(ProcessBound::new("Client", client, Some(handle)))),
            partitions,
        })
    }

    /// The partition count of the state topic.
    #[napi(getter)]
    pub fn partitions(&self) -> i32 {
        self.partitions
    }

    /// The name of the state topic.
    #[napi(getter)]
    pub fn state_topic(&self, env: Env) -> napi::Result<String> {
        Ok(self.client(&env)?.state_topic().to_owned())
    }

    /// Acquires `role` as `member`: registers, waits for the turn, mints the
    /// epoch, writes the first lease. `options`: `leaseDuration`,
    /// `renewInterval`, `challengeStagger` (seconds; left out: the core's
    /// defaults). Firing `cancel` stops a waiting acquire. `events`, when
    /// given, receives the member's events from its registration on (one
    /// acquire per stream).
    #[napi(
        ts_args_type = "role: string, member: string, options: AcquireOptions | undefined, cancel: _CancelToken, events?: _AcquireEvents",
        ts_return_type = "Promise<_Leadership>"
    )]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        role: Unknown<'_>,
        member: Unknown<'_>,
        options: Option<Unknown<'_>>,
        cancel: &CancelToken,
        events: Option<&AcquireEvents>,
    ) -> napi::Result<Object<'env>> {
        let role = str_arg(env, &role, "role")?;
        let member = str_arg(env, &member, "member")?;
        let args = leadership_args(env, options.as_ref())?;
        let feed = match events {
            Some(e) => Some(e.take().ok_or_else(|| {
                to_napi(
                    env,
                    &Error::InvalidArgument(
                        "this event stream was given to an acquire already".into(),
                    ),
                )
            })?),
            None => None,
        };
        let acquire = self
            .client(env)?
            .acquire_with_feed(role, member, &args, cancel.token.clone(), feed)
            .or_throw(env)?;
        promise(env, acquire, |env, leadership| {
            js(env, NativeLeadership::new(leadership)?)
        })
    }

    /// A leader loop of `member` in `role` (the shared crate's
    /// `LeadHandle`): the role, the member and the timings of `options`
    /// (as for `acquire`) are checked now, before any I/O; nothing starts
    /// until the first `nextTerm`. `events`: the loop keeps every term's
    /// events for `nextEvent`.
    #[napi(
        js_name = "_lead",
        ts_args_type = "role: string, member: string, options: LeadOptions | undefined, events: boolean",
        ts_return_type = "_LeaderLoop"
    )]
    pub fn lead(
        &self,
        env: Env,
        role: Unknown<'_>,
        member: Unknown<'_>,
        options: Option<Unknown<'_>>,
        events: bool,
    ) -> napi::Result<NativeLeaderLoop> {
        let role = str_arg(&env, &role, "role")?;
        let member = str_arg(&env, &member, "member")?;
        let args = leadership_args(&env, options.as_ref())?;
        let client = self.client(&env)?;
        if events {
            let (handle, stream) = client
                .leader_loop_with_events(&role, &member, &args)
                .or_throw(&env)?;
            NativeLeaderLoop::new(handle, Some(stream))
        } else {
            let handle = client
                .leader_loop(&role, &member, &args, None)
                .or_throw(&env)?;
            NativeLeaderLoop::new(handle, None)
        }
    }

    /// Watches `roles` (an array of role names) without joining them;
    /// `renewals` reports each renewal too. The core refuses no role, an
    /// empty role, one with a NUL byte or one too long here, before any
    /// read.
    #[napi(
        js_name = "_observe",
        ts_args_type = "roles: string[], renewals: boolean | undefined",
        ts_return_type = "_Observer"
    )]
    pub fn observe(
        &self,
        env: Env,
        roles: Unknown<'_>,
        renewals: Unknown<'_>,
    ) -> napi::Result<NativeObserver> {
        if !roles.is_array()? {
            return Err(arg_napi(
                &env,
                ArgError::wrong_type(
                    "roles",
                    "a string or an array of strings",
                    &type_name(&roles),
                ),
            ));
        }
        // SAFETY: an array value of this env.
        let array = unsafe { roles.cast::<Array<'_>>() }?;
        let mut names = Vec::with_capacity(array.len() as usize);
        for i in 0..array.len() {
            let item: Unknown<'_> = array.get(i)?.ok_or_else(|| {
                arg_napi(&env, ArgError::wrong_type("role", "a string", "undefined"))
            })?;
            names.push(str_arg(&env, &item, "role")?);
        }
        let renewals = bool_value(&env, Some(&renewals), "renewals")?;
        NativeObserver::open(&env, &self.client(&env)?, names, renewals)
    }

    /// The role's current token at its transaction coordinator.
    #[napi(
        ts_args_type = "role: string",
        ts_return_type = "Promise<LeadershipStatus>"
    )]
    pub fn describe_leadership<'env>(
        &self,
        env: &'env Env,
        role: Unknown<'_>,
    ) -> napi::Result<Object<'env>> {
        let role = str_arg(env, &role, "role")?;
        let fut = self.client(env)?.describe_leadership(role);
        promise(env, fut, |env, inner| js(env, LeadershipStatus { inner }))
    }

    /// The roster and the lease of `role`.
    #[napi(
        ts_args_type = "role: string",
        ts_return_type = "Promise<RoleStateReport>"
    )]
    pub fn describe_role_state<'env>(
        &self,
        env: &'env Env,
        role: Unknown<'_>,
    ) -> napi::Result<Object<'env>> {
        let role = str_arg(env, &role, "role")?;
        let fut = self.client(env)?.describe_role_state(role);
        promise(env, fut, |env, inner| js(env, RoleStateReport { inner }))
    }

    /// Creates the state topic unless it exists, then checks it. `options`:
    /// `development` (one broker: replication factor 1, min ISR 1),
    /// `replicationFactor`, `minInsyncReplicas`.
    #[napi(
        ts_args_type = "options?: TopicOptions",
        ts_return_type = "Promise<TopicReport>"
    )]
    pub fn ensure_state_topic<'env>(
        &self,
        env: &'env Env,
        options: Option<Unknown<'_>>,
    ) -> napi::Result<Object<'env>> {
        let options = opt_object(env, options.as_ref(), "options")?;
        let o = options.as_ref();
        let max = i64::from(i16::MAX);
        let args = TopicArgs {
            development: bool_value(env, prop(o, "development")?.as_ref(), "development")?,
            replication_factor: opt_int_value(
                env,
                prop(o, "replicationFactor")?.as_ref(),
                Field::ReplicationFactor.name(),
                1,
                max,
            )?,
            min_insync_replicas: opt_int_value(
                env,
                prop(o, "minInsyncReplicas")?.as_ref(),
                Field::MinInsyncReplicas.name(),
                1,
                max,
            )?,
        };
        let fut = self.client(env)?.ensure_state_topic(&args).or_throw(env)?;
        promise(env, fut, |env, report| js(env, TopicReport::from(report)))
    }

    /// Checks the state topic: it exists, is compacted and has this
    /// client's partition count.
    #[napi(ts_return_type = "Promise<TopicReport>")]
    pub fn check_state_topic<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let fut = self.client(env)?.check_state_topic();
        promise(env, fut, |env, report| js(env, TopicReport::from(report)))
    }

    /// DescribeTransactions requests sent so far by this client (for tests
    /// of the request cost).
    #[napi(js_name = "_describeRequests")]
    pub fn describe_requests(&self, env: Env) -> napi::Result<f64> {
        Ok(self.client(&env)?.describe_requests() as f64)
    }

    /// Closes the client: every later operation throws
    /// `InvalidArgumentError` ("the client is closed") at once; the promise
    /// resolves once the shared crate's `KafkaClient::close` has resigned
    /// every leadership the client holds (all at once, each bounded by its
    /// lease), cancelled its acquires (they reject with `CancelledError`),
    /// stopped its leader loops and ended its observers. Nothing of the
    /// client then keeps the event loop alive. Idempotent: a later call
    /// resolves at once (in a forked child too).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let taken = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
        let client = taken.as_ref().and_then(|bound| bound.get().ok().cloned());
        drop(taken);
        promise(
            env,
            async move {
                if let Some(client) = client {
                    client.close().await;
                }
                Ok(())
            },
            |env, ()| js(env, ()),
        )
    }

    /// True once closed.
    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }
}
