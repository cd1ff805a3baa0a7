//! `_Client`: the core client, built once from the `kafka` settings dict,
//! behind the package's `Client` and `AsyncClient`.
//!
//! One `_Client` owns one set of Kafka clients (the state-partition reader,
//! the registration producer, the DescribeTransactions connections), shared
//! by every role it acquires or describes; only a held role's epoch-bound
//! producer is per role. Every operation checks its arguments when called
//! and returns a [`PyPending`].
//!
//! An acquire is stopped through the core's cancellation token, not by
//! dropping its future: Ctrl-C (blocking) or cancelling the awaiting task
//! fires the token, and the core deregisters the member (the blocking form
//! waits up to [`ACQUIRE_GRACE`] for that before it raises). A leadership
//! won in the instant of the cancel is resigned, by the core or, when the
//! win had already been delivered, by the binding ([`crate::leadership::Acquired`]).

use std::sync::Mutex;
use std::time::Duration;

use krabka_coordination::Error;
use krabka_coordination_bindings::args::SecondsBound;
use krabka_coordination_bindings::{
    options, Field, KafkaClient, LeadershipArgs, OnInterrupt, ProcessBound, TimeoutArgs, TopicArgs,
};
use pyo3::prelude::*;
use tokio_util::sync::CancellationToken;

use crate::convert::{int_value, kafka_config, seconds_arg, seconds_value, str_field};
use crate::error::{error_to_py, IntoPyResult};
use crate::lead::PyLeaderLoop;
use crate::leadership::{Acquired, MaybeAcquired, FINISH_GRACE};
use crate::observe::PyObserver;
use crate::pending::{Outcome, PyPending};
use crate::reports::{PyLeadershipStatus, PyRoleStateReport, PyTopicReport};
use crate::runtime::runtime;

/// How long an interrupted blocking acquire waits for the core to
/// deregister the member before it raises anyway.
pub const ACQUIRE_GRACE: Duration = Duration::from_secs(10);

/// The core client of one `kafka` settings dict (see the module
/// documentation).
#[pyclass(module = "krabka_coordination._native", name = "_Client", frozen)]
pub struct PyClient {
    /// `None` once closed.
    inner: Mutex<Option<ProcessBound<KafkaClient>>>,
    partitions: i32,
}

impl PyClient {
    /// The `_Client` of `client`, already built (a test-kit process's).
    pub fn on(client: KafkaClient) -> PyResult<PyClient> {
        let partitions = client.partitions();
        let handle = runtime()?.handle().clone();
        Ok(PyClient {
            inner: Mutex::new(Some(ProcessBound::new("Client", client, Some(handle)))),
            partitions,
        })
    }

    /// The core client (a cheap clone), or an error when closed or used in
    /// a forked child.
    fn client(&self, py: Python<'_>) -> PyResult<KafkaClient> {
        let guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match guard.as_ref() {
            Some(bound) => bound.get().cloned().into_py_result(py),
            None => Err(error_to_py(
                py,
                &Error::InvalidArgument("the client is closed".into()),
            )),
        }
    }
}

#[pymethods]
impl PyClient {
    /// Builds the shared Kafka clients from `kafka` (librdkafka settings)
    /// for a state topic of `partitions` partitions, named `state_topic`
    /// (`__coordination_state` by default). `connect_timeout` (seconds,
    /// default 10) bounds the first contact with the cluster,
    /// `operation_timeout` (seconds, default 30) each blocking client
    /// operation; the shared crate checks both (`TimeoutArgs`).
    /// `oauth_token`, a callable, supplies the OAUTHBEARER tokens
    /// ([`crate::oauth`]). The core refuses a setting librdkafka rejects;
    /// nothing connects yet.
    #[new]
    #[pyo3(signature = (kafka, partitions=None, state_topic=None, *, connect_timeout=None, operation_timeout=None, oauth_token=None))]
    fn new(
        py: Python<'_>,
        kafka: &Bound<'_, PyAny>,
        partitions: Option<&Bound<'_, PyAny>>,
        state_topic: Option<&Bound<'_, PyAny>>,
        connect_timeout: Option<&Bound<'_, PyAny>>,
        operation_timeout: Option<&Bound<'_, PyAny>>,
        oauth_token: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let partitions = int_value(partitions, "partitions", 1, i32::MAX.into())?
            .map(options::partitions)
            .transpose()
            .into_py_result(py)?
            .unwrap_or(krabka_coordination::ElectionOptions::DEFAULT_PARTITIONS);
        let timeouts = TimeoutArgs {
            connect_timeout: seconds_value(connect_timeout, Field::ConnectTimeout.name())?,
            operation_timeout: seconds_value(operation_timeout, Field::OperationTimeout.name())?,
        };
        let mut config = kafka_config(kafka)?;
        if let Some(topic) = state_topic.filter(|t| !t.is_none()) {
            config = config.with_state_topic(str_field(topic, "state_topic")?);
        }
        if let Some(provider) = oauth_token.filter(|p| !p.is_none()) {
            config = config.with_oauth_token_provider(crate::oauth::token_provider(provider)?);
        }
        let config = timeouts.apply(config).into_py_result(py)?;
        crate::logging::sync_level(py)?;
        let handle = runtime()?.handle().clone();
        let client = py
            .detach(|| KafkaClient::new(config, partitions))
            .into_py_result(py)?;
        Ok(PyClient {
            inner: Mutex::new(Some(ProcessBound::new("Client", client, Some(handle)))),
            partitions,
        })
    }

    /// The partition count of the state topic.
    #[getter]
    fn partitions(&self) -> i32 {
        self.partitions
    }

    /// The name of the state topic.
    #[getter]
    fn state_topic(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.client(py)?.state_topic().to_owned())
    }

    /// Acquires `role` as `member`: registers, waits for the turn, mints the
    /// epoch, writes the first lease. `None` timings keep the core's
    /// defaults. With a `timeout` (seconds), an acquire that has not won by
    /// then is cancelled (the member deregisters; a role won in that instant
    /// is resigned) and the operation yields `None`. `on_event`, a callable,
    /// gets each of the member's events from its registration on, on the
    /// `krabka-events` thread or, given an `event_loop`, on that loop
    /// ([`crate::callbacks`]).
    #[pyo3(signature = (role, member, lease_duration=None, renew_interval=None, challenge_stagger=None, timeout=None, on_event=None, event_loop=None))]
    #[allow(clippy::too_many_arguments)]
    fn acquire(
        &self,
        py: Python<'_>,
        role: &Bound<'_, PyAny>,
        member: &Bound<'_, PyAny>,
        lease_duration: Option<&Bound<'_, PyAny>>,
        renew_interval: Option<&Bound<'_, PyAny>>,
        challenge_stagger: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
        on_event: Option<&Bound<'_, PyAny>>,
        event_loop: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyPending> {
        let role = str_field(role, "role")?;
        let member = str_field(member, "member")?;
        let args = timings(lease_duration, renew_interval, challenge_stagger)?;
        let limit = seconds_arg(timeout, "timeout", SecondsBound::NonNegative)?;
        let client = self.client(py)?;
        let events = crate::callbacks::subscribe(on_event, event_loop)?;
        let cancel = CancellationToken::new();
        let acquire = client
            .acquire(role, member, &args, cancel.clone(), events)
            .into_py_result(py)?;
        let Some(limit) = limit else {
            return Ok(PyPending::new(
                async move { acquire.await.map(|l| MaybeAcquired(Some(Acquired(l)))) },
                OnInterrupt::Cancel(cancel, ACQUIRE_GRACE),
            ));
        };
        let on_time = cancel.clone();
        Ok(PyPending::new(
            async move {
                tokio::pin!(acquire);
                tokio::select! {
                    biased;
                    won = &mut acquire => won.map(|l| MaybeAcquired(Some(Acquired(l)))),
                    _ = tokio::time::sleep(limit) => {
                        // Out of time: cancel, and let the acquire deregister.
                        on_time.cancel();
                        match acquire.await {
                            // Won in that very instant: nobody takes it.
                            Ok(l) => {
                                if let Some(resign) = Box::new(Acquired(l)).abandon() {
                                    resign.await;
                                }
                                Ok(MaybeAcquired(None))
                            }
                            Err(Error::Cancelled) => Ok(MaybeAcquired(None)),
                            Err(e) => Err(e),
                        }
                    }
                }
            },
            OnInterrupt::Cancel(cancel, ACQUIRE_GRACE),
        ))
    }

    /// A leader loop of `member` in `role` (the shared crate's
    /// `LeadHandle`, the core's `LeaderLoop`): the timings are checked now,
    /// before any I/O; nothing starts until the first `next_term`.
    /// `on_event` and `event_loop` as for `acquire`, for every term.
    #[pyo3(signature = (role, member, lease_duration=None, renew_interval=None, challenge_stagger=None, on_event=None, event_loop=None))]
    #[allow(clippy::too_many_arguments)]
    fn leader_loop(
        &self,
        py: Python<'_>,
        role: &Bound<'_, PyAny>,
        member: &Bound<'_, PyAny>,
        lease_duration: Option<&Bound<'_, PyAny>>,
        renew_interval: Option<&Bound<'_, PyAny>>,
        challenge_stagger: Option<&Bound<'_, PyAny>>,
        on_event: Option<&Bound<'_, PyAny>>,
        event_loop: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyLeaderLoop> {
        let role = str_field(role, "role")?;
        let member = str_field(member, "member")?;
        let args = timings(lease_duration, renew_interval, challenge_stagger)?;
        let client = self.client(py)?;
        let events = crate::callbacks::subscribe(on_event, event_loop)?;
        let handle = client
            .leader_loop(&role, &member, &args, events)
            .into_py_result(py)?;
        PyLeaderLoop::new(handle)
    }

    /// The role's current token at its transaction coordinator.
    fn describe_leadership(&self, py: Python<'_>, role: &Bound<'_, PyAny>) -> PyResult<PyPending> {
        let role = str_field(role, "role")?;
        let fut = self.client(py)?.describe_leadership(role);
        Ok(PyPending::plain(
            async move { fut.await.map(PyLeadershipStatus) },
            OnInterrupt::Abort,
        ))
    }

    /// The roster and the lease of `role`.
    fn describe_role_state(&self, py: Python<'_>, role: &Bound<'_, PyAny>) -> PyResult<PyPending> {
        let role = str_field(role, "role")?;
        let fut = self.client(py)?.describe_role_state(role);
        Ok(PyPending::plain(
            async move { fut.await.map(PyRoleStateReport) },
            OnInterrupt::Abort,
        ))
    }

    /// Watches `roles` (a sequence of `str`) without joining them, through
    /// this client's state reader; `renewals` reports each renewal too. The
    /// core checks the roles here (none, or one the record layout cannot
    /// hold: `InvalidArgumentError`) and starts the reads on the runtime;
    /// nothing blocks on Kafka.
    #[pyo3(signature = (roles, renewals=false))]
    fn observe(
        &self,
        py: Python<'_>,
        roles: &Bound<'_, PyAny>,
        renewals: bool,
    ) -> PyResult<Py<PyAny>> {
        let roles = roles
            .try_iter()?
            .map(|r| str_field(&r?, "role"))
            .collect::<PyResult<Vec<String>>>()?;
        let start = self.client(py)?.observe(roles, renewals);
        let rt = runtime()?.handle().clone();
        // The core's observe only checks and spawns the readers (no I/O):
        // run at once, so a refusal raises at the call, blocking or asyncio.
        PyPending::plain(
            async move { start.await.map(|h| PyObserver::new(h, rt)) },
            OnInterrupt::Abort,
        )
        .wait(py)
    }

    /// Creates the state topic unless it exists, then checks it.
    #[pyo3(signature = (development=false, replication_factor=None, min_insync_replicas=None))]
    fn ensure_state_topic(
        &self,
        py: Python<'_>,
        development: bool,
        replication_factor: Option<&Bound<'_, PyAny>>,
        min_insync_replicas: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyPending> {
        let max = i64::from(i16::MAX);
        let args = TopicArgs {
            development,
            replication_factor: int_value(replication_factor, "replication_factor", 1, max)?,
            min_insync_replicas: int_value(min_insync_replicas, "min_insync_replicas", 1, max)?,
        };
        let fut = self
            .client(py)?
            .ensure_state_topic(&args)
            .into_py_result(py)?;
        Ok(PyPending::plain(
            async move { fut.await.map(PyTopicReport) },
            OnInterrupt::Abort,
        ))
    }

    /// Checks the state topic: it exists, is compacted and has this
    /// client's partition count.
    fn check_state_topic(&self, py: Python<'_>) -> PyResult<PyPending> {
        let fut = self.client(py)?.check_state_topic();
        Ok(PyPending::plain(
            async move { fut.await.map(PyTopicReport) },
            OnInterrupt::Abort,
        ))
    }

    /// DescribeTransactions requests sent so far by this client (for tests
    /// of the request cost).
    fn _describe_requests(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.client(py)?.describe_requests())
    }

    /// Closes the client: every later operation raises
    /// `InvalidArgumentError` ("the client is closed") at once; the pending
    /// operation resigns every leadership the client holds (all at once,
    /// each bounded by its lease), cancels its acquires (they raise
    /// `Cancelled`), stops its leader loops and ends its observers
    /// (the shared crate's `KafkaClient::close`), then lets go of the
    /// shared Kafka clients. An interrupted wait lets the close finish
    /// within a grace period. Idempotent: a later call settles at once
    /// (in a forked child too: the child closes nothing of its parent's).
    fn close(&self) -> PyPending {
        let taken = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
        let client = taken.as_ref().and_then(|bound| bound.get().ok().cloned());
        drop(taken);
        PyPending::plain(
            async move {
                if let Some(client) = client {
                    client.close().await;
                }
                Ok(())
            },
            OnInterrupt::Finish(FINISH_GRACE),
        )
    }

    /// True once closed.
    #[getter]
    fn closed(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }
}

/// The timings of an acquire or a leader loop, each named in its error.
fn timings(
    lease_duration: Option<&Bound<'_, PyAny>>,
    renew_interval: Option<&Bound<'_, PyAny>>,
    challenge_stagger: Option<&Bound<'_, PyAny>>,
) -> PyResult<LeadershipArgs> {
    Ok(LeadershipArgs {
        lease_duration: seconds_value(lease_duration, "lease_duration")?,
        renew_interval: seconds_value(renew_interval, "renew_interval")?,
        challenge_stagger: seconds_value(challenge_stagger, "challenge_stagger")?,
    })
}
