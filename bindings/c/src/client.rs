//! `krabka_client`: the core client built from Kafka settings, and what it
//! does: acquire, describe, the role state, the state topic.

use std::ffi::{c_char, c_void};
use std::sync::Arc;
use std::time::Duration;

use krabka_coordination::leadership::{Leadership, LeadershipOptions, RoleStateReport};
use krabka_coordination::testing::TestProcess;
use krabka_coordination::transport::kafka::KafkaConfig;
use krabka_coordination::{ElectionOptions, Error};
use krabka_coordination_bindings::args::{seconds, SecondsBound};
use krabka_coordination_bindings::blocking::BoxFuture;
use krabka_coordination_bindings::{
    options, AcquireEventStream, Field, KafkaClient, LeadershipArgs, OnInterrupt, ProcessBound,
    TimeoutArgs, TopicArgs,
};
use tokio_util::sync::CancellationToken;

use crate::codec::{krabka_fencing_token, krabka_lease_fields, lease_fields};
use crate::events::{krabka_event_callback, Dispatch};
use crate::ffi::{
    cstr, free_handle, guard, guard_value, input, into_handle, krabka_error, krabka_result, output,
    Failure,
};
use crate::leadership::krabka_leadership;
use crate::oauth::{krabka_oauth_token_callback, krabka_user_data_free, TokenCallback};
use crate::options::Versioned;
use crate::runtime::{block, block_until, runtime};

/// A timeout that means "no limit".
pub const KRABKA_NO_TIMEOUT: f64 = -1.0;

/// How long an acquire that timed out waits for the core to deregister its
/// member before it returns anyway.
pub(crate) const ACQUIRE_GRACE: Duration = Duration::from_secs(10);

/// The client-wide options. Fill them with `KRABKA_CLIENT_OPTIONS_INIT(&o)`
/// (or `krabka_client_options_init`), then change what you need by name.
/// `struct_size` follows the size rule of the header's preamble.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct krabka_client_options {
    /// `sizeof(krabka_client_options)` as the caller was compiled with; set
    /// by the init function (see the size rule).
    pub struct_size: usize,
    /// The partition count of the state topic (default 16). Every member of
    /// a role must pass the topic's real count.
    pub partitions: i32,
    /// The state topic's name, NUL-terminated, borrowed for the call; NULL
    /// for `__coordination_state`.
    pub state_topic: *const c_char,
    /// Seconds the first contact with the cluster may take (default 10):
    /// with no broker answering within it, an acquire or a describe fails
    /// with `KRABKA_RESULT_TRANSIENT` naming the bootstrap address.
    pub connect_timeout: f64,
    /// Seconds one client operation may take once the cluster answered
    /// (default 30).
    pub operation_timeout: f64,
    /// The OAUTHBEARER token callback (with `sasl.mechanism` `OAUTHBEARER`),
    /// or NULL (the default) for none: see `krabka_oauth_token_callback`.
    /// It is called with `oauth_user_data` on the library's threads, any of
    /// them, so both must be usable from any thread. Added in version 2 of
    /// the struct.
    pub oauth_token: krabka_oauth_token_callback,
    /// Passed to `oauth_token` as it is.
    pub oauth_user_data: *mut c_void,
    /// Called once with `oauth_user_data` when the library no longer needs
    /// the callback (see `krabka_client_new`); NULL: nothing is called.
    pub oauth_user_data_free: krabka_user_data_free,
}

/// The timings of an acquire, in seconds. Fill them with
/// `KRABKA_LEADERSHIP_OPTIONS_INIT(&o)` (the core's defaults: a 30 s lease
/// renewed every 10 s, 5 s between ranks of challengers). `struct_size`
/// follows the size rule of the header's preamble.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct krabka_leadership_options {
    /// `sizeof(krabka_leadership_options)` as the caller was compiled with;
    /// set by the init function (see the size rule).
    pub struct_size: usize,
    /// How long a lease lasts.
    pub lease_duration: f64,
    /// How often the holder renews (below the lease duration).
    pub renew_interval: f64,
    /// The delay between ranks of challengers (0 allowed).
    pub challenge_stagger: f64,
}

/// The shape of the state topic `krabka_client_ensure_state_topic` creates.
/// Fill it with `KRABKA_TOPIC_OPTIONS_INIT(&o)` (the production defaults:
/// `development` false, replication factor and `min.insync.replicas` 0, the
/// defaults). `struct_size` follows the size rule of the header's preamble.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct krabka_topic_options {
    /// `sizeof(krabka_topic_options)` as the caller was compiled with; set by
    /// the init function (see the size rule).
    pub struct_size: usize,
    /// True for a single-broker development cluster: the defaults become a
    /// replication factor of 1 and `min.insync.replicas` 1 (else 3 and 2).
    pub development: bool,
    /// The replication factor, or 0 for the default.
    pub replication_factor: i32,
    /// `min.insync.replicas`, or 0 for the default.
    pub min_insync_replicas: i32,
}

/// The authority of a role as its transaction coordinator reported it.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct krabka_leadership_status {
    /// The newest token the coordinator minted for the role (NoEpoch when no
    /// member has taken it).
    pub token: krabka_fencing_token,
}

/// One member of a role's roster. `member` points into the
/// `krabka_role_state` it was read from (valid until that is freed), UTF-8
/// of `member_len` bytes, not NUL-terminated.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct krabka_roster_entry {
    /// The member id.
    pub member: *const c_char,
    /// Its length in bytes.
    pub member_len: usize,
    /// The member's place in the roster (0 first).
    pub rank: u64,
    /// The offset of its latest registration record.
    pub offset: i64,
    /// When it registered, in epoch milliseconds of its clock.
    pub registered_at: i64,
}

/// A client (opaque): one set of Kafka clients shared by every role it
/// acquires or describes. Made by `krabka_client_new`, freed by
/// `krabka_client_free`.
///
/// Thread safety: every function taking a `const krabka_client *` may be
/// called from any number of threads at once. Freeing must not race with
/// another call on the same client. A client belongs to the process that
/// made it: in a forked child every call returns `KRABKA_RESULT_FATAL`.
#[allow(non_camel_case_types)]
pub struct krabka_client {
    inner: ProcessBound<KafkaClient>,
}

impl krabka_client {
    /// A client handle on a test-kit process's core client.
    pub(crate) fn on_test_process(process: &TestProcess) -> krabka_client {
        krabka_client {
            inner: ProcessBound::new("krabka_client", KafkaClient::on_test_process(process), None),
        }
    }

    pub(crate) fn get(&self) -> Result<KafkaClient, Failure> {
        Ok(self.inner.get()?.clone())
    }
}

/// A role's roster and lease (opaque), from
/// `krabka_client_describe_role_state`; freed by `krabka_role_state_free`.
/// Immutable: any number of threads may read one at once.
#[allow(non_camel_case_types)]
pub struct krabka_role_state {
    report: RoleStateReport,
}

impl Versioned for krabka_client_options {
    const NAME: &'static str = "krabka_client_options";
    // The first version ended with `operation_timeout`.
    const FIRST_SIZE: usize = std::mem::offset_of!(krabka_client_options, oauth_token);
    fn defaults() -> Self {
        krabka_client_options {
            struct_size: std::mem::size_of::<Self>(),
            partitions: ElectionOptions::DEFAULT_PARTITIONS,
            state_topic: std::ptr::null(),
            connect_timeout: KafkaConfig::DEFAULT_CONNECT_TIMEOUT.as_secs_f64(),
            operation_timeout: KafkaConfig::DEFAULT_OPERATION_TIMEOUT.as_secs_f64(),
            oauth_token: None,
            oauth_user_data: std::ptr::null_mut(),
            oauth_user_data_free: None,
        }
    }
}

impl Versioned for krabka_leadership_options {
    const NAME: &'static str = "krabka_leadership_options";
    const FIRST_SIZE: usize = std::mem::size_of::<krabka_leadership_options>();
    fn defaults() -> Self {
        let d = LeadershipOptions::default().election;
        krabka_leadership_options {
            struct_size: std::mem::size_of::<Self>(),
            lease_duration: d.lease_duration.as_secs_f64(),
            renew_interval: d.renew_interval.as_secs_f64(),
            challenge_stagger: d.challenge_stagger.as_secs_f64(),
        }
    }
}

impl Versioned for krabka_topic_options {
    const NAME: &'static str = "krabka_topic_options";
    const FIRST_SIZE: usize = std::mem::size_of::<krabka_topic_options>();
    fn defaults() -> Self {
        krabka_topic_options {
            struct_size: std::mem::size_of::<Self>(),
            development: false,
            replication_factor: 0,
            min_insync_replicas: 0,
        }
    }
}

/// Writes the client defaults into `*o`, a struct of `caller_size` bytes
/// (`sizeof *o` as the caller was compiled: use
/// `KRABKA_CLIENT_OPTIONS_INIT(o)`), and sets `o->struct_size` to it: 16
/// partitions, the state topic `__coordination_state` (NULL), a 10 s
/// connect timeout, a 30 s operation timeout. At most `caller_size` bytes
/// are written; past this library's size they are zeroed. `o` NULL is
/// `KRABKA_RESULT_NULL_ARGUMENT`; a `caller_size` below the first
/// version's size `KRABKA_RESULT_INVALID_ARGUMENT` (nothing written). Does
/// not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_client_options_init(
    o: *mut krabka_client_options,
    caller_size: usize,
) -> krabka_result {
    guard(std::ptr::null_mut(), || unsafe {
        crate::options::init(o, caller_size)
    })
}

/// Fills `*out` with the client defaults (as `krabka_client_options_init`)
/// and sets `struct_size` to the first version's size: it writes only the
/// first version's fields, so it never overruns a struct of an older
/// header; a field added in a later version keeps its default even if set
/// afterwards. Prefer `KRABKA_CLIENT_OPTIONS_INIT`.
#[no_mangle]
pub unsafe extern "C" fn krabka_client_options_default(
    out: *mut krabka_client_options,
) -> krabka_result {
    guard(std::ptr::null_mut(), || unsafe {
        crate::options::init(out, <krabka_client_options as Versioned>::FIRST_SIZE)
            .map_err(|_| Failure::null("out"))
    })
}

/// Writes the core's default timings (30, 10 and 5 seconds) into `*o`, a
/// struct of `caller_size` bytes (use `KRABKA_LEADERSHIP_OPTIONS_INIT(o)`),
/// and sets `o->struct_size` to it, as `krabka_client_options_init` does.
/// Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_leadership_options_init(
    o: *mut krabka_leadership_options,
    caller_size: usize,
) -> krabka_result {
    guard(std::ptr::null_mut(), || unsafe {
        crate::options::init(o, caller_size)
    })
}

/// Fills `*out` with the core's default timings (30, 10 and 5 seconds), the
/// first version's fields only, `struct_size` the first version's size (as
/// `krabka_client_options_default`). Prefer
/// `KRABKA_LEADERSHIP_OPTIONS_INIT`.
#[no_mangle]
pub unsafe extern "C" fn krabka_leadership_options_default(
    out: *mut krabka_leadership_options,
) -> krabka_result {
    guard(std::ptr::null_mut(), || unsafe {
        crate::options::init(out, <krabka_leadership_options as Versioned>::FIRST_SIZE)
            .map_err(|_| Failure::null("out"))
    })
}

/// Writes the production defaults of the state topic (`development` false,
/// replication factor and `min.insync.replicas` 0: 3 and 2) into `*o`, a
/// struct of `caller_size` bytes (use `KRABKA_TOPIC_OPTIONS_INIT(o)`), and
/// sets `o->struct_size` to it, as `krabka_client_options_init` does. Does
/// not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_topic_options_init(
    o: *mut krabka_topic_options,
    caller_size: usize,
) -> krabka_result {
    guard(std::ptr::null_mut(), || unsafe {
        crate::options::init(o, caller_size)
    })
}

/// The leadership arguments of the caller's options (NULL: the defaults).
pub(crate) unsafe fn leadership_args(
    options: *const krabka_leadership_options,
) -> Result<LeadershipArgs, Failure> {
    // SAFETY: the caller's contract.
    Ok(match unsafe { crate::options::read(options) }? {
        None => LeadershipArgs::default(),
        Some(o) => LeadershipArgs {
            lease_duration: Some(o.lease_duration),
            renew_interval: Some(o.renew_interval),
            challenge_stagger: Some(o.challenge_stagger),
        },
    })
}

/// Builds a client from `count` Kafka settings, `keys[i]` = `values[i]`
/// (librdkafka's keys: `bootstrap.servers`, `security.protocol`, `sasl.*`,
/// `ssl.*`, ...), each passed unchanged to the core's Kafka configuration.
/// `options` may be NULL for the defaults. Every string is NUL-terminated
/// UTF-8, borrowed for the call; `keys` and `values` may be NULL only when
/// `count` is 0.
///
/// A setting the core refuses (a missing bootstrap address, a key
/// librdkafka does not know, `transactional.id`, an `ssl.*`/`sasl.*` key it
/// cannot honour) is `KRABKA_RESULT_INVALID_ARGUMENT` naming it. Nothing
/// connects yet. On success `*out` is a new client the caller owns (free it
/// with `krabka_client_free`); on failure it is NULL.
///
/// With `options->oauth_token` set, the client takes its OAUTHBEARER tokens
/// from the callback, and `options->oauth_user_data_free` is called once
/// when the callback is no longer needed: after the client and every handle
/// made with it are freed, or before this call returns when it fails (but
/// not when `out` is NULL or `options->struct_size` is refused: the options
/// are not read then). `sasl.mechanism` `OAUTHBEARER` without a callback is
/// `KRABKA_RESULT_INVALID_ARGUMENT`.
///
/// Blocks briefly (it builds librdkafka clients); any thread. The first
/// client of a process starts the library's runtime threads (`krabka-rt`).
#[no_mangle]
pub unsafe extern "C" fn krabka_client_new(
    keys: *const *const c_char,
    values: *const *const c_char,
    count: usize,
    options: *const krabka_client_options,
    out: *mut *mut krabka_client,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        *out = std::ptr::null_mut();
        // SAFETY: NULL (the defaults) or the caller's options.
        let o = unsafe { crate::options::read(options) }?
            .unwrap_or_else(krabka_client_options::defaults);
        // Held from here, so that a failure below frees the user data.
        let oauth = TokenCallback::new(o.oauth_token, o.oauth_user_data, o.oauth_user_data_free);
        let mut settings = Vec::with_capacity(count.min(1024));
        if count > 0 {
            if keys.is_null() {
                return Err(Failure::null("keys"));
            }
            if values.is_null() {
                return Err(Failure::null("values"));
            }
            if count > crate::ffi::MAX_LEN / std::mem::size_of::<*const c_char>() {
                return Err(Failure::core(&Error::InvalidArgument(format!(
                    "count must be the number of settings, got {count}"
                ))));
            }
            for i in 0..count {
                // SAFETY: `keys` and `values` hold `count` pointers.
                let (k, v) = unsafe { (*keys.add(i), *values.add(i)) };
                let k = unsafe { cstr(k, &format!("keys[{i}]")) }?;
                let v = unsafe { cstr(v, &format!("values[{i}]")) }?;
                settings.push((k, v));
            }
        }
        let partitions = options::partitions(o.partitions.into())?;
        let mut config = oauth.apply(options::kafka_config(settings));
        if !o.state_topic.is_null() {
            config = config.with_state_topic(unsafe { cstr(o.state_topic, "state_topic") }?);
        }
        let config = TimeoutArgs {
            connect_timeout: Some(o.connect_timeout),
            operation_timeout: Some(o.operation_timeout),
        }
        .apply(config)?;
        // The runtime is started now, so that a failure to start it is
        // reported here rather than at the first operation.
        runtime()?;
        // Metrics are recorded from the first client on (as from Python's
        // import).
        crate::metrics::install();
        let client = KafkaClient::new(config, partitions)?;
        *out = into_handle(krabka_client {
            inner: ProcessBound::new("krabka_client", client, None),
        });
        Ok(())
    })
}

/// Closes a client and ends everything it started: resigns every leadership
/// acquired through it that is still held (all at once, each bounded by its
/// lease, so the standbys take over at once), makes its acquires under way
/// return `KRABKA_RESULT_CANCELLED`, stops its leader loops and ends its
/// observers. Blocks the calling thread until that is done (at most the
/// longest lease). Every later call on the client fails with
/// `KRABKA_RESULT_INVALID_ARGUMENT` ("the client is closed"); the
/// leadership handles it made stay valid (their term has ended) and must
/// still be freed. NULL is a no-op; idempotent; any thread, also while other
/// threads wait in calls on the client (that is how to stop them). In a
/// forked child it closes nothing of the parent's. The client of a crashed
/// test-kit process (`krabka_test_process_crash`) is not closed: it returns
/// at once.
#[no_mangle]
pub unsafe extern "C" fn krabka_client_close(client: *const krabka_client) {
    guard_value((), || {
        // SAFETY: NULL or a live handle (the documented contract).
        let Some(client) = (unsafe { client.as_ref() }) else {
            return;
        };
        let Ok(core) = client.get() else {
            return;
        };
        // The close itself cannot fail; a runtime that cannot start has
        // nothing of this client's to end.
        let _ = block(async move {
            core.close().await;
            Ok(())
        });
    })
}

/// Closes a client as `krabka_client_close` does (ending what it started),
/// then frees it; NULL is a no-op. Blocks the calling thread until the close
/// is done and while the librdkafka clients it alone holds close (they are
/// closed here, not left to a background thread, so a program that frees its
/// handles before it exits leaves nothing running); must not race with
/// another call on the client (call `krabka_client_close` first to stop the
/// calls of other threads, then free once they returned).
#[no_mangle]
pub unsafe extern "C" fn krabka_client_free(client: *mut krabka_client) {
    guard_value((), || unsafe {
        krabka_client_close(client);
        free_handle(client)
    })
}

/// A cancellation (opaque): fire it to stop the acquires it was given, from
/// any thread (typically a thread that waits for SIGTERM with `sigwait`).
/// Made by `krabka_cancel_new`, freed by `krabka_cancel_free`. Thread safety:
/// any number of threads may fire it and pass it to acquires at once;
/// freeing it must not race with those. Firing is not async-signal-safe:
/// do not call it from a signal handler.
pub struct krabka_cancel {
    pub(crate) token: CancellationToken,
}

/// Makes a cancellation, not fired; `*out` is the caller's to free with
/// `krabka_cancel_free`. Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_cancel_new(out: *mut *mut krabka_cancel) -> krabka_result {
    guard(std::ptr::null_mut(), || {
        let out = unsafe { output(out, "out") }?;
        *out = into_handle(krabka_cancel {
            token: CancellationToken::new(),
        });
        Ok(())
    })
}

/// Fires the cancellation: every acquire it was given that is still waiting
/// stops, its member deregistered (a role won in that instant is resigned),
/// and returns `KRABKA_RESULT_CANCELLED`; an acquire given it later returns
/// that at once. Idempotent. Does not block; any thread, but not a signal
/// handler.
#[no_mangle]
pub unsafe extern "C" fn krabka_cancel_fire(cancel: *const krabka_cancel) -> krabka_result {
    guard(std::ptr::null_mut(), || {
        unsafe { input(cancel, "cancel") }?.token.cancel();
        Ok(())
    })
}

/// Frees a cancellation; NULL is a no-op. An acquire still using it keeps
/// what it needs.
#[no_mangle]
pub unsafe extern "C" fn krabka_cancel_free(cancel: *mut krabka_cancel) {
    guard_value((), || unsafe { free_handle(cancel) })
}

fn settle_acquired(won: Result<Leadership, Error>) -> Option<BoxFuture> {
    let leadership = won.ok()?;
    Some(Box::pin(async move {
        // Nobody takes a leadership won after the timeout: hand it on.
        let _ = leadership.resign().await;
    }))
}

/// Acquires `role` as `member` (NUL-terminated UTF-8, borrowed for the
/// call): registers, waits for its turn, mints the role's epoch, writes the
/// first lease. Blocks the calling thread until the role is won, an error
/// ends the attempt, or `timeout` seconds pass (`KRABKA_NO_TIMEOUT`: no
/// limit; 0 and up otherwise). At the timeout the attempt is cancelled, the
/// core deregisters the member (waiting up to 10 s for it; a role won in
/// that instant is resigned) and the call returns `KRABKA_RESULT_TIMED_OUT`.
/// `options` may be NULL for the defaults. `cancel` (NULL: none) stops the
/// attempt when fired from another thread: the member is deregistered and
/// the call returns `KRABKA_RESULT_CANCELLED`.
///
/// On success `*out` is a new `krabka_leadership` the caller owns (free it
/// with `krabka_leadership_free`); on failure it is NULL. A client refuses a
/// second acquire of a role it is acquiring or holding
/// (`KRABKA_RESULT_INVALID_ARGUMENT`).
///
/// `callback`, if not NULL, receives the member's events from its
/// registration on: on one thread the library starts for this acquire
/// (named `krabka-events`), never on the caller's thread and never two at
/// once, in the order they happened. `user_data` is passed to every call as
/// it is; the caller keeps it valid, and usable from that thread, until the
/// events end. They end after the term's last event (`fenced`,
/// `lease_expired`, `ended`, or `resigned` then `deregistered`), when the
/// acquire fails (all of its events are delivered before this function
/// returns), or at `krabka_leadership_free` (which waits for a callback in
/// progress, unless called from the callback itself). A callback may call
/// any function of the library.
///
/// Any thread, except a callback's when it would wait on its own events.
#[no_mangle]
pub unsafe extern "C" fn krabka_client_acquire(
    client: *const krabka_client,
    role: *const c_char,
    member: *const c_char,
    options: *const krabka_leadership_options,
    timeout: f64,
    cancel: *const krabka_cancel,
    callback: krabka_event_callback,
    user_data: *mut c_void,
    out: *mut *mut krabka_leadership,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        *out = std::ptr::null_mut();
        let client = unsafe { input(client, "client") }?.get()?;
        let role = unsafe { cstr(role, "role") }?.to_owned();
        let member = unsafe { cstr(member, "member") }?.to_owned();
        let limit = timeout_arg(timeout)?;
        let args = unsafe { leadership_args(options) }?;
        let rt = runtime()?;
        // The acquire's own token: fired at the timeout, or with the
        // caller's cancellation (its parent).
        let cancel = match unsafe { cancel.as_ref() } {
            Some(c) => c.token.child_token(),
            None => CancellationToken::new(),
        };
        let (events, mut dispatch) = match callback {
            Some(cb) => {
                let (feed, stream) = AcquireEventStream::channel();
                (
                    Some(feed.events),
                    Some(Dispatch::start(rt, stream, feed.outcome, cb, user_data)?),
                )
            }
            None => (None, None),
        };
        let what = format!(
            "acquiring role {} as {}",
            krabka_coordination::error::quote(&role),
            krabka_coordination::error::quote(&member)
        );
        let acquired = client
            .acquire(role, member, &args, cancel.clone(), events)
            .map_err(Failure::from)
            .and_then(|fut| {
                block_until(
                    fut,
                    limit,
                    OnInterrupt::Cancel(cancel, ACQUIRE_GRACE),
                    Some(settle_acquired),
                    &what,
                )
            });
        match acquired {
            Ok(leadership) => {
                let leadership = Arc::new(leadership);
                if let Some(d) = dispatch.as_mut() {
                    d.acquired(Some(Arc::clone(&leadership)));
                }
                *out = into_handle(krabka_leadership::new(leadership, dispatch));
                Ok(())
            }
            Err(e) => {
                if let Some(d) = dispatch {
                    d.finish();
                }
                Err(e)
            }
        }
    })
}

/// A timeout argument: `KRABKA_NO_TIMEOUT` is none, else the shared check.
pub fn timeout_arg(timeout: f64) -> Result<Option<Duration>, Failure> {
    if timeout == KRABKA_NO_TIMEOUT {
        return Ok(None);
    }
    Ok(Some(seconds(
        Field::Timeout.name(),
        timeout,
        SecondsBound::NonNegative,
    )?))
}

/// Asks the role's transaction coordinator for the role's current token
/// (one DescribeTransactions request once the coordinator is known) into
/// `*out`. A read at one instant, not a fence: check a writer with
/// `krabka_leadership_status_authoritative`. Blocks until the coordinator
/// answers or the client's timeouts run out (`KRABKA_RESULT_TRANSIENT`);
/// any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_client_describe_leadership(
    client: *const krabka_client,
    role: *const c_char,
    out: *mut krabka_leadership_status,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        let client = unsafe { input(client, "client") }?.get()?;
        let role = unsafe { cstr(role, "role") }?.to_owned();
        let status = block(client.describe_leadership(role))?;
        *out = krabka_leadership_status {
            token: status.token.into(),
        };
        Ok(())
    })
}

/// Sets `*out` to whether `token` is the role's current token in `status`
/// (equality, the core's check): its holder was authoritative when the
/// coordinator answered. NoEpoch never is. Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_leadership_status_authoritative(
    status: *const krabka_leadership_status,
    token: *const krabka_fencing_token,
    out: *mut bool,
) -> krabka_result {
    guard(std::ptr::null_mut(), || {
        let status = unsafe { input(status, "status") }?;
        let token = unsafe { input(token, "token") }?;
        let out = unsafe { output(out, "out") }?;
        let status = krabka_coordination::leadership::LeadershipStatus {
            token: status.token.into(),
        };
        *out = status.authoritative(&(*token).into());
        Ok(())
    })
}

/// Reads the roster and the lease of `role` from its state partition. On
/// success `*out` is a new `krabka_role_state` the caller owns (free it with
/// `krabka_role_state_free`); on failure NULL. Blocks until the partition is
/// read or the client's timeouts run out; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_client_describe_role_state(
    client: *const krabka_client,
    role: *const c_char,
    out: *mut *mut krabka_role_state,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        *out = std::ptr::null_mut();
        let client = unsafe { input(client, "client") }?.get()?;
        let role = unsafe { cstr(role, "role") }?.to_owned();
        let report = block(client.describe_role_state(role))?;
        *out = into_handle(krabka_role_state { report });
        Ok(())
    })
}

/// The partition of the state topic that holds the role.
#[no_mangle]
pub unsafe extern "C" fn krabka_role_state_partition(
    state: *const krabka_role_state,
    out: *mut i32,
) -> krabka_result {
    guard(std::ptr::null_mut(), || {
        let s = unsafe { input(state, "state") }?;
        *unsafe { output(out, "out") }? = s.report.partition;
        Ok(())
    })
}

/// The number of members in the roster.
#[no_mangle]
pub unsafe extern "C" fn krabka_role_state_roster_len(
    state: *const krabka_role_state,
    out: *mut usize,
) -> krabka_result {
    guard(std::ptr::null_mut(), || {
        let s = unsafe { input(state, "state") }?;
        *unsafe { output(out, "out") }? = s.report.roster.len();
        Ok(())
    })
}

/// The member of rank `index` (0 first; below the roster's length, else
/// `KRABKA_RESULT_INVALID_ARGUMENT`). The member string points into `state`.
#[no_mangle]
pub unsafe extern "C" fn krabka_role_state_roster_entry(
    state: *const krabka_role_state,
    index: usize,
    out: *mut krabka_roster_entry,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let s = unsafe { input(state, "state") }?;
        let out = unsafe { output(out, "out") }?;
        let len = s.report.roster.len();
        let e = s.report.roster.get(index).ok_or_else(|| {
            Failure::core(&Error::InvalidArgument(format!(
                "index must be below the roster's length ({len}), got {index}"
            )))
        })?;
        *out = krabka_roster_entry {
            member: e.member.as_ptr().cast(),
            member_len: e.member.len(),
            rank: index as u64,
            offset: e.offset,
            registered_at: e.registered_at,
        };
        Ok(())
    })
}

/// Sets `*has_lease` to whether the role has a lease (none: never taken, or
/// cleared by a resign) and, when it has, `*out` to its fields (the member
/// string points into `state`).
#[no_mangle]
pub unsafe extern "C" fn krabka_role_state_lease(
    state: *const krabka_role_state,
    has_lease: *mut bool,
    out: *mut krabka_lease_fields,
) -> krabka_result {
    guard(std::ptr::null_mut(), || {
        let s = unsafe { input(state, "state") }?;
        let has = unsafe { output(has_lease, "has_lease") }?;
        let out = unsafe { output(out, "out") }?;
        *has = s.report.lease.is_some();
        if let Some(l) = &s.report.lease {
            *out = lease_fields(l);
        }
        Ok(())
    })
}

/// Frees a role state; NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn krabka_role_state_free(state: *mut krabka_role_state) {
    guard_value((), || unsafe { free_handle(state) })
}

/// Creates the state topic (the client's partition count, compacted, the
/// shape of `options`; NULL: the production defaults, replication factor 3
/// and `min.insync.replicas` 2) unless it exists, then checks it. `*created`
/// says whether this call created it. Blocks until the brokers answer or the
/// client's timeouts run out; any thread. Needs CREATE on the topic: an
/// operator's step.
#[no_mangle]
pub unsafe extern "C" fn krabka_client_ensure_state_topic(
    client: *const krabka_client,
    options: *const krabka_topic_options,
    created: *mut bool,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let created = unsafe { output(created, "created") }?;
        let client = unsafe { input(client, "client") }?.get()?;
        let args = match unsafe { crate::options::read(options) }? {
            None => TopicArgs::default(),
            Some(o) => TopicArgs {
                development: o.development,
                replication_factor: (o.replication_factor != 0)
                    .then_some(o.replication_factor.into()),
                min_insync_replicas: (o.min_insync_replicas != 0)
                    .then_some(o.min_insync_replicas.into()),
            },
        };
        let report = block(client.ensure_state_topic(&args)?)?;
        *created = report.created;
        Ok(())
    })
}

/// What `krabka_client_check_state_topic` found (opaque): read it with
/// `krabka_topic_report_get_fields` and `krabka_topic_report_warning`, free it
/// with `krabka_topic_report_free`. Immutable: any number of threads may
/// read one at once.
#[allow(non_camel_case_types)]
pub struct krabka_topic_report {
    topic: std::ffi::CString,
    cleanup_policy: std::ffi::CString,
    warnings: Vec<std::ffi::CString>,
    partitions: i32,
    replication_factor: i32,
    min_insync_replicas: Option<i32>,
}

/// The shape of the state topic as the cluster reports it. The strings
/// (NUL-terminated UTF-8) point into the `krabka_topic_report` they were
/// read from, valid until it is freed.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct krabka_topic_report_fields {
    /// The topic's name.
    pub topic: *const c_char,
    /// Its partition count (the client's: a topic of another count is
    /// refused, not reported).
    pub partitions: i32,
    /// The replica count of partition 0.
    pub replication_factor: i32,
    /// Its `cleanup.policy` (always `compact` in a report).
    pub cleanup_policy: *const c_char,
    /// Whether the broker reported `min.insync.replicas`.
    pub has_min_insync_replicas: bool,
    /// `min.insync.replicas` (0 when not reported).
    pub min_insync_replicas: i32,
    /// The number of warnings (advice for the operator, also logged at
    /// WARN), such as a `min.insync.replicas` below 2.
    pub warning_count: usize,
}

fn c_string(s: &str) -> std::ffi::CString {
    std::ffi::CString::new(s.replace('\0', "\\0")).unwrap_or_default()
}

/// Checks the client's state topic without changing it (the core's check,
/// as every acquire makes it): it exists, has the client's partition count
/// and `cleanup.policy=compact`; a topic of another shape is
/// `KRABKA_RESULT_FATAL` naming the topic and both values (the topic's
/// partition count and the client's), a missing authorization (DESCRIBE,
/// DESCRIBE_CONFIGS) `KRABKA_RESULT_FATAL` naming the topic, a cluster that
/// does not answer within the connect timeout `KRABKA_RESULT_TRANSIENT`.
/// On success `*out` is a new `krabka_topic_report` the caller owns (free
/// it with `krabka_topic_report_free`); on failure NULL. Its warnings are
/// logged at WARN as well (`krabka_set_log_callback`). Blocks until the
/// brokers answer or the client's timeouts run out; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_client_check_state_topic(
    client: *const krabka_client,
    out: *mut *mut krabka_topic_report,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        *out = std::ptr::null_mut();
        let client = unsafe { input(client, "client") }?.get()?;
        let report = block(client.check_state_topic())?;
        *out = into_handle(krabka_topic_report {
            topic: c_string(&report.topic),
            cleanup_policy: c_string(&report.cleanup_policy),
            warnings: report.warnings.iter().map(|w| c_string(w)).collect(),
            partitions: report.partitions,
            replication_factor: report.replication_factor,
            min_insync_replicas: report.min_insync_replicas,
        });
        Ok(())
    })
}

/// The report's fields, into `*out` (strings borrowed from `report`). Does
/// not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_topic_report_get_fields(
    report: *const krabka_topic_report,
    out: *mut krabka_topic_report_fields,
) -> krabka_result {
    guard(std::ptr::null_mut(), || {
        let r = unsafe { input(report, "report") }?;
        *unsafe { output(out, "out") }? = krabka_topic_report_fields {
            topic: r.topic.as_ptr(),
            partitions: r.partitions,
            replication_factor: r.replication_factor,
            cleanup_policy: r.cleanup_policy.as_ptr(),
            has_min_insync_replicas: r.min_insync_replicas.is_some(),
            min_insync_replicas: r.min_insync_replicas.unwrap_or(0),
            warning_count: r.warnings.len(),
        };
        Ok(())
    })
}

/// Warning `index` of the report (below `warning_count`, else
/// `KRABKA_RESULT_INVALID_ARGUMENT`) into `*out`: NUL-terminated UTF-8
/// borrowed from `report`. Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_topic_report_warning(
    report: *const krabka_topic_report,
    index: usize,
    out: *mut *const c_char,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let r = unsafe { input(report, "report") }?;
        let out = unsafe { output(out, "out") }?;
        let len = r.warnings.len();
        let w = r.warnings.get(index).ok_or_else(|| {
            Failure::core(&Error::InvalidArgument(format!(
                "index must be below the report's warning count ({len}), got {index}"
            )))
        })?;
        *out = w.as_ptr();
        Ok(())
    })
}

/// Frees a topic report; NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn krabka_topic_report_free(report: *mut krabka_topic_report) {
    guard_value((), || unsafe { free_handle(report) })
}
