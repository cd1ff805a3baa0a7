//! `_TestCluster` and `_TestProcess`: the core's test kit
//! (`krabka_coordination::testing`) behind the package's
//! `krabka-coordination/testing` (`lib/testing.js`, typed by `testing.d.ts`).
//!
//! A process's client is a `_Client` like any other (the shared crate's
//! `KafkaClient::on_test_process`), so the package's `Client` wraps it
//! unchanged. The cluster's time operations (`advance`,
//! `advanceToNextDeadline`, `settle`) and its `describeLeadership` return
//! promises of work done on the package's multi-thread runtime, where the
//! members' tasks run; the core's `settle` sees that flavour and waits until
//! the members are quiet. Durations are seconds, as everywhere in the
//! package.

use krabka_coordination::testing::{TestCluster, TestProcess};
use krabka_coordination::transport::memory::{CommittedWrite, ProcessState};
use krabka_coordination_bindings::args::{SecondsBound, SECONDS_TYPE};
use krabka_coordination_bindings::{options, ArgError, KafkaClient};
use napi::bindgen_prelude::{Array, BigInt, Buffer, Object, Unknown};
use napi::Env;
use napi_derive::napi;

use crate::client::NativeClient;
use crate::convert::{int_arg, opt_int_value, seconds_arg, str_arg, I32};
use crate::error::{arg_napi, OrThrow};
use crate::reports::LeadershipStatus;
use crate::runtime::{js, promise, runtime};
use crate::values::{token_arg, token_to_js, Made};

/// A span of the cluster's time: a non-negative number of seconds
/// (`undefined` and `null` are refused as of the wrong type).
fn span(env: &Env, seconds: &Unknown<'_>) -> napi::Result<std::time::Duration> {
    seconds_arg(env, Some(seconds), "seconds", SecondsBound::NonNegative)?.ok_or_else(|| {
        arg_napi(
            env,
            ArgError::wrong_type("seconds", SECONDS_TYPE, &crate::convert::type_name(seconds)),
        )
    })
}

/// An in-memory cluster and its manual clock (the core's `TestCluster`).
/// Internal: `lib/testing.js` wraps it.
#[napi(js_name = "_TestCluster")]
pub struct NativeTestCluster {
    cluster: TestCluster,
}

#[napi]
impl NativeTestCluster {
    /// A cluster whose state topic has `partitions` partitions (16 when
    /// left out); below 1 throws an `InvalidArgumentError`.
    #[napi(constructor, ts_args_type = "partitions?: number")]
    pub fn new(env: Env, partitions: Option<Unknown<'_>>) -> napi::Result<Self> {
        let cluster =
            match opt_int_value(&env, partitions.as_ref(), "partitions", 1, i32::MAX.into())? {
                None => TestCluster::new(),
                Some(n) => options::partitions(n)
                    .map_err(krabka_coordination::Error::from)
                    .and_then(TestCluster::with_partitions)
                    .or_throw(&env)?,
            };
        Ok(NativeTestCluster { cluster })
    }

    /// A new process named `name`.
    #[napi(ts_args_type = "name: string")]
    pub fn process(&self, env: Env, name: Unknown<'_>) -> napi::Result<NativeTestProcess> {
        let name = str_arg(&env, &name, "name")?;
        let _rt = runtime()?.enter();
        Ok(NativeTestProcess {
            process: self.cluster.process(&name),
        })
    }

    /// The cluster's wall time (epoch ms).
    #[napi(getter)]
    pub fn now_millis(&self) -> i64 {
        self.cluster.now_millis()
    }

    /// Moves the clock forward by `seconds` (a non-negative number),
    /// deadline by deadline, letting the members act at each.
    #[napi(ts_args_type = "seconds: number", ts_return_type = "Promise<void>")]
    pub fn advance<'env>(
        &self,
        env: &'env Env,
        seconds: Unknown<'_>,
    ) -> napi::Result<Object<'env>> {
        let d = span(env, &seconds)?;
        let cluster = self.cluster.clone();
        promise(
            env,
            async move {
                cluster.advance(d).await;
                Ok(())
            },
            |env, ()| js(env, ()),
        )
    }

    /// Moves the clock to the earliest deadline a member waits for; resolves
    /// with that instant (epoch ms), or `null` when nobody waits.
    #[napi(ts_return_type = "Promise<number | null>")]
    pub fn advance_to_next_deadline<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let cluster = self.cluster.clone();
        promise(
            env,
            async move { Ok(cluster.advance_to_next_deadline().await) },
            |env, at: Option<i64>| js(env, at.map(|ms| ms as f64)),
        )
    }

    /// Resolves once the members have nothing left to do at this instant.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn settle<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let cluster = self.cluster.clone();
        promise(
            env,
            async move {
                cluster.settle().await;
                Ok(())
            },
            |env, ()| js(env, ()),
        )
    }

    /// Every guarded write the cluster committed, in commit order: objects
    /// `{ commit, topic, partition, offset, key, value, role, token }`.
    #[napi(ts_return_type = "Array<object>")]
    pub fn guarded_writes<'env>(&self, env: &'env Env) -> napi::Result<Array<'env>> {
        let writes = self.cluster.guarded_writes();
        let mut out = env.create_array(writes.len() as u32)?;
        for (i, w) in writes.iter().enumerate() {
            out.set(i as u32, write_object(env, w)?)?;
        }
        Ok(out)
    }

    /// What consumer group `group` committed for `topic`/`partition` (the
    /// core's `TestCluster::committed_offset`): a `bigint`, or `null`.
    #[napi(
        ts_args_type = "group: string, topic: string, partition: number",
        ts_return_type = "bigint | null"
    )]
    pub fn committed_offset(
        &self,
        env: Env,
        group: Unknown<'_>,
        topic: Unknown<'_>,
        partition: Unknown<'_>,
    ) -> napi::Result<Option<BigInt>> {
        let group = str_arg(&env, &group, "group")?;
        let topic = str_arg(&env, &topic, "topic")?;
        let partition = int_arg(&env, &partition, "partition", I32)? as i32;
        Ok(self
            .cluster
            .committed_offset(&group, &topic, partition)
            .map(BigInt::from))
    }

    /// Sets the coordinator's current token of `role` (the core's
    /// `MemoryCluster::set_epoch`): the next mint bumps its epoch, or
    /// rotates to the cluster's next producer id when the epoch is
    /// exhausted.
    #[napi(ts_args_type = "role: string, token: FencingToken | string")]
    pub fn set_epoch(&self, env: Env, role: Unknown<'_>, token: Unknown<'_>) -> napi::Result<()> {
        let role = str_arg(&env, &role, "role")?;
        let token = token_arg(&env, &token, "token")?;
        self.cluster.memory().set_epoch(&role, token);
        Ok(())
    }

    /// What the role's transaction coordinator says now.
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
        let cluster = self.cluster.clone();
        promise(
            env,
            async move { cluster.describe_leadership(&role).await },
            |env, inner| js(env, LeadershipStatus { inner }),
        )
    }
}

/// The JavaScript object of one committed guarded write.
fn write_object<'env>(env: &'env Env, w: &CommittedWrite) -> napi::Result<Object<'env>> {
    let mut o = Object::new(env)?;
    // Exact up to 2^53, which no test's count of records reaches.
    o.set("commit", w.commit as f64)?;
    o.set("topic", &w.topic)?;
    o.set("partition", w.partition)?;
    o.set("offset", BigInt::from(w.offset))?;
    o.set("key", Buffer::from(w.key.clone()))?;
    match &w.value {
        Some(v) => o.set("value", Buffer::from(v.clone()))?,
        None => o.set("value", ())?,
    }
    o.set("role", w.role.as_deref().unwrap_or_default())?;
    let token = w.token.unwrap_or(krabka_coordination::NO_EPOCH);
    o.set("token", Made(token_to_js(env, token)?))?;
    Ok(o)
}

/// One process of a test cluster (the core's `TestProcess`). Internal:
/// `lib/testing.js` wraps it.
#[napi(js_name = "_TestProcess")]
pub struct NativeTestProcess {
    process: TestProcess,
}

#[napi]
impl NativeTestProcess {
    /// The process's name.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.process.name().to_owned()
    }

    /// `'running'`, `'cutOff'`, `'paused'` or `'crashed'`.
    #[napi(getter)]
    pub fn state(&self) -> &'static str {
        match self.process.state() {
            ProcessState::Running => "running",
            ProcessState::CutOff => "cutOff",
            ProcessState::Paused => "paused",
            ProcessState::Crashed => "crashed",
        }
    }

    /// A `_Client` on the process's core client (every call returns one on
    /// the same core client: closing one closes them all).
    #[napi]
    pub fn client(&self) -> napi::Result<NativeClient> {
        NativeClient::on(KafkaClient::on_test_process(&self.process))
    }

    /// SIGKILL: no renewal, no resign, for good.
    #[napi]
    pub fn crash(&self) {
        self.process.crash();
    }

    /// SIGSTOP: calls and timers wait until `resume`.
    #[napi]
    pub fn pause(&self) {
        self.process.pause();
    }

    /// SIGCONT; nothing for a crashed process.
    #[napi]
    pub fn resume(&self) {
        self.process.resume();
    }

    /// Each call fails as transient until `heal`.
    #[napi]
    pub fn cut_off(&self) {
        self.process.cut_off();
    }

    /// Ends a cut.
    #[napi]
    pub fn heal(&self) {
        self.process.heal();
    }

    /// Each call fails as transient for `seconds` of the cluster's time.
    #[napi(ts_args_type = "seconds: number")]
    pub fn fail_for(&self, env: Env, seconds: Unknown<'_>) -> napi::Result<()> {
        let d = span(&env, &seconds)?;
        self.process.fail_for(d);
        Ok(())
    }
}
