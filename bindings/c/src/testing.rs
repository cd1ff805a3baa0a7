//! `krabka_test_cluster`, `krabka_test_process`, `krabka_test_writes`: the
//! core's test kit (`krabka_coordination::testing`) in C.
//!
//! A process's client is a `krabka_client` like any other (the shared
//! crate's `KafkaClient::on_test_process`), so every `krabka_client_*` call
//! works on it unchanged. The members' tasks run on the library's
//! multi-thread runtime; the cluster's time calls (advance, settle,
//! describe) block the caller's thread on it as the other blocking calls
//! do, and the core's settle sees the multi-thread flavour and waits until
//! the members are quiet.

use std::ffi::c_char;
use std::time::Duration;

use krabka_coordination::testing::{TestCluster, TestProcess};
use krabka_coordination::transport::memory::CommittedWrite;
use krabka_coordination::{Error, NO_EPOCH};
use krabka_coordination_bindings::args::{seconds, SecondsBound};
use krabka_coordination_bindings::options;

use crate::client::{krabka_client, krabka_leadership_status};
use crate::codec::krabka_fencing_token;
use crate::ffi::{
    cstr, free_handle, guard, guard_value, input, into_handle, krabka_error, krabka_result, output,
    Failure,
};
use crate::runtime::{block, runtime};

/// An in-memory cluster and its manual clock (opaque): the core's state
/// log and transaction coordinator with Kafka's epochs and fencing, no
/// broker. Made by `krabka_test_cluster_new`, freed by
/// `krabka_test_cluster_free` (its processes and their clients stay valid
/// to use and must still be freed).
///
/// Thread safety: every function taking a `const krabka_test_cluster *`
/// may be called from any number of threads at once; freeing must not race
/// with another call on it.
#[allow(non_camel_case_types)]
pub struct krabka_test_cluster {
    cluster: TestCluster,
}

/// One process of a test cluster (opaque): the faults the test puts it
/// through. Its client is the `krabka_client` that
/// `krabka_test_cluster_process` returned with it. Freed by
/// `krabka_test_process_free` (which frees nothing of the client's). Any
/// thread.
#[allow(non_camel_case_types)]
pub struct krabka_test_process {
    process: TestProcess,
}

/// The guarded writes a test cluster had committed (opaque), from
/// `krabka_test_cluster_guarded_writes`; freed by `krabka_test_writes_free`.
/// Immutable: any number of threads may read one at once.
#[allow(non_camel_case_types)]
pub struct krabka_test_writes {
    writes: Vec<CommittedWrite>,
}

/// One guarded write a test cluster committed. The pointers point into the
/// `krabka_test_writes` it was read from (valid until that is freed), not
/// NUL-terminated.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct krabka_test_write {
    /// Its place in the cluster's commit order (from 0, counting the state
    /// topic's records too).
    pub commit: u64,
    /// The topic, UTF-8 of `topic_len` bytes.
    pub topic: *const c_char,
    /// The topic's length in bytes.
    pub topic_len: usize,
    /// The partition.
    pub partition: i32,
    /// The offset in the partition.
    pub offset: i64,
    /// The key, of `key_len` bytes (length 0 when it had none).
    pub key: *const u8,
    /// The key's length in bytes.
    pub key_len: usize,
    /// The value, of `value_len` bytes; NULL for a tombstone.
    pub value: *const u8,
    /// The value's length in bytes (0 for a tombstone).
    pub value_len: usize,
    /// The role whose term wrote it, UTF-8 of `role_len` bytes.
    pub role: *const c_char,
    /// The role's length in bytes.
    pub role_len: usize,
    /// The token of the term that wrote it.
    pub token: krabka_fencing_token,
}

/// Makes a test cluster whose state topic has `partitions` partitions (0:
/// the default 16; below 0 `KRABKA_RESULT_INVALID_ARGUMENT`), its clock at
/// 2026-01-01T00:00:00Z (epoch ms 1767225600000). On success `*out` is a
/// new cluster the caller owns (free it with `krabka_test_cluster_free`);
/// on failure NULL. Starts the library's runtime threads if none run yet.
/// Does not block otherwise; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_test_cluster_new(
    partitions: i32,
    out: *mut *mut krabka_test_cluster,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        *out = std::ptr::null_mut();
        let cluster = if partitions == 0 {
            TestCluster::new()
        } else {
            TestCluster::with_partitions(options::partitions(partitions.into())?)?
        };
        runtime()?;
        *out = into_handle(krabka_test_cluster { cluster });
        Ok(())
    })
}

/// Frees a test cluster; NULL is a no-op. Its processes and their clients
/// stay usable until freed themselves.
#[no_mangle]
pub unsafe extern "C" fn krabka_test_cluster_free(cluster: *mut krabka_test_cluster) {
    guard_value((), || unsafe { free_handle(cluster) })
}

/// Adds a process named `name` (for messages; the member id is what
/// `krabka_client_acquire` is given) to the cluster. On success
/// `*out_client` is a new `krabka_client` on the cluster and its clock
/// (every `krabka_client_*` call works on it; free it with
/// `krabka_client_free`) and `*out_process` the new process to put through
/// faults (free it with `krabka_test_process_free`); on failure both are
/// NULL. Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_test_cluster_process(
    cluster: *const krabka_test_cluster,
    name: *const c_char,
    out_client: *mut *mut krabka_client,
    out_process: *mut *mut krabka_test_process,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out_client = unsafe { output(out_client, "out_client") }?;
        *out_client = std::ptr::null_mut();
        let out_process = unsafe { output(out_process, "out_process") }?;
        *out_process = std::ptr::null_mut();
        let cluster = unsafe { input(cluster, "cluster") }?;
        let name = unsafe { cstr(name, "name") }?;
        let _rt = runtime()?.enter();
        let process = cluster.cluster.process(name);
        *out_client = into_handle(krabka_client::on_test_process(&process));
        *out_process = into_handle(krabka_test_process { process });
        Ok(())
    })
}

/// A span of the cluster's time from the caller's seconds.
fn span(secs: f64) -> Result<Duration, Failure> {
    Ok(seconds("seconds", secs, SecondsBound::NonNegative)?)
}

/// Moves the cluster's clock forward by `seconds` (non-negative, else
/// `KRABKA_RESULT_INVALID_ARGUMENT`), deadline by deadline: at each timer's
/// instant on the way the members act (the cluster settles before and
/// after), then to the end. Blocks the calling thread until done; any
/// thread but the library's own.
#[no_mangle]
pub unsafe extern "C" fn krabka_test_cluster_advance(
    cluster: *const krabka_test_cluster,
    seconds: f64,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let cluster = unsafe { input(cluster, "cluster") }?.cluster.clone();
        let d = span(seconds)?;
        block(async move {
            cluster.advance(d).await;
            Ok(())
        })
    })
}

/// Moves the clock to the earliest instant a member waits for and lets the
/// members act there: `*moved` true and `*at_ms` that instant (epoch ms);
/// with nobody waiting, `*moved` false and `*at_ms` the unmoved clock.
/// Blocks the calling thread until done; any thread but the library's own.
#[no_mangle]
pub unsafe extern "C" fn krabka_test_cluster_advance_to_next_deadline(
    cluster: *const krabka_test_cluster,
    at_ms: *mut i64,
    moved: *mut bool,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let at_ms = unsafe { output(at_ms, "at_ms") }?;
        let moved = unsafe { output(moved, "moved") }?;
        let cluster = unsafe { input(cluster, "cluster") }?.cluster.clone();
        let now = cluster.now_millis();
        let at = block(async move { Ok(cluster.advance_to_next_deadline().await) })?;
        *moved = at.is_some();
        *at_ms = at.unwrap_or(now);
        Ok(())
    })
}

/// Returns once the members have nothing left to do at the current
/// instant (on the library's multi-thread runtime: no member made a call or
/// set a timer for a few consecutive milliseconds of real time). Call it
/// after starting an acquire or a write on another thread, before moving
/// the clock. Blocks the calling thread; any thread but the library's own.
#[no_mangle]
pub unsafe extern "C" fn krabka_test_cluster_settle(
    cluster: *const krabka_test_cluster,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let cluster = unsafe { input(cluster, "cluster") }?.cluster.clone();
        block(async move {
            cluster.settle().await;
            Ok(())
        })
    })
}

/// Sets `*out` to the cluster's wall time (epoch ms). Does not block; any
/// thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_test_cluster_now_ms(
    cluster: *const krabka_test_cluster,
    out: *mut i64,
) -> krabka_result {
    guard(std::ptr::null_mut(), || {
        let cluster = unsafe { input(cluster, "cluster") }?;
        *unsafe { output(out, "out") }? = cluster.cluster.now_millis();
        Ok(())
    })
}

/// What the role's transaction coordinator says now, into `*out` (as
/// `krabka_client_describe_leadership` answers it), asked by a process of
/// the cluster's own that no fault touches. Blocks the calling thread
/// briefly; any thread but the library's own.
#[no_mangle]
pub unsafe extern "C" fn krabka_test_cluster_describe_leadership(
    cluster: *const krabka_test_cluster,
    role: *const c_char,
    out: *mut krabka_leadership_status,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        let cluster = unsafe { input(cluster, "cluster") }?.cluster.clone();
        let role = unsafe { cstr(role, "role") }?.to_owned();
        let status = block(async move { cluster.describe_leadership(&role).await })?;
        *out = krabka_leadership_status {
            token: status.token.into(),
        };
        Ok(())
    })
}

/// Every guarded write the cluster committed so far (every topic but the
/// state topic), in commit order, each with the token of the term that
/// wrote it. On success `*out` is a new `krabka_test_writes` the caller
/// owns (read it with `krabka_test_writes_len` and `krabka_test_writes_get`,
/// free it with `krabka_test_writes_free`); on failure NULL. Does not block;
/// any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_test_cluster_guarded_writes(
    cluster: *const krabka_test_cluster,
    out: *mut *mut krabka_test_writes,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        *out = std::ptr::null_mut();
        let cluster = unsafe { input(cluster, "cluster") }?;
        *out = into_handle(krabka_test_writes {
            writes: cluster.cluster.guarded_writes(),
        });
        Ok(())
    })
}

/// Sets `*out` to what consumer group `group` has committed for
/// `topic`/`partition` on the cluster (the offset of the next record to
/// read), or `KRABKA_NO_OFFSET` (-1) when nothing: the input position that
/// guarded writes with offsets (`krabka_leadership_write_with_offsets`)
/// committed; a commit still pending does not count. Does not block; any
/// thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_test_cluster_committed_offset(
    cluster: *const krabka_test_cluster,
    group: *const c_char,
    topic: *const c_char,
    partition: i32,
    out: *mut i64,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        let cluster = unsafe { input(cluster, "cluster") }?;
        let group = unsafe { cstr(group, "group") }?;
        let topic = unsafe { cstr(topic, "topic") }?;
        *out = cluster
            .cluster
            .committed_offset(group, topic, partition)
            .unwrap_or(crate::offsets::KRABKA_NO_OFFSET);
        Ok(())
    })
}

/// Sets `*out` to the number of writes in `writes`. Does not block; any
/// thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_test_writes_len(
    writes: *const krabka_test_writes,
    out: *mut usize,
) -> krabka_result {
    guard(std::ptr::null_mut(), || {
        let w = unsafe { input(writes, "writes") }?;
        *unsafe { output(out, "out") }? = w.writes.len();
        Ok(())
    })
}

/// Fills `*out` with the write at `index` in commit order (0 first; below
/// the count, else `KRABKA_RESULT_INVALID_ARGUMENT`). Its pointers point
/// into `writes`. Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_test_writes_get(
    writes: *const krabka_test_writes,
    index: usize,
    out: *mut krabka_test_write,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let w = unsafe { input(writes, "writes") }?;
        let out = unsafe { output(out, "out") }?;
        let len = w.writes.len();
        let e = w.writes.get(index).ok_or_else(|| {
            Failure::core(&Error::InvalidArgument(format!(
                "index must be below the number of writes ({len}), got {index}"
            )))
        })?;
        let role = e.role.as_deref().unwrap_or("");
        *out = krabka_test_write {
            commit: e.commit,
            topic: e.topic.as_ptr().cast(),
            topic_len: e.topic.len(),
            partition: e.partition,
            offset: e.offset,
            key: e.key.as_ptr(),
            key_len: e.key.len(),
            value: e.value.as_ref().map_or(std::ptr::null(), |v| v.as_ptr()),
            value_len: e.value.as_ref().map_or(0, Vec::len),
            role: role.as_ptr().cast(),
            role_len: role.len(),
            token: e.token.unwrap_or(NO_EPOCH).into(),
        };
        Ok(())
    })
}

/// Frees a set of writes; NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn krabka_test_writes_free(writes: *mut krabka_test_writes) {
    guard_value((), || unsafe { free_handle(writes) })
}

/// Runs `f` on the process behind the handle.
unsafe fn with_process(
    process: *const krabka_test_process,
    f: impl FnOnce(&TestProcess),
) -> krabka_result {
    guard(std::ptr::null_mut(), || {
        f(&unsafe { input(process, "process") }?.process);
        Ok(())
    })
}

/// Kills the process (SIGKILL): it never answers or wakes again, so it
/// neither renews nor resigns nor sends anything; for good (a later resume,
/// heal or cut does nothing). Its client counts as closed: a call of it
/// pending on another thread (an acquire, a write, a resign, a leader loop)
/// returns at once `KRABKA_RESULT_INVALID_ARGUMENT` ("the client is closed:
/// its process crashed"), as does every later call; a term it held ends
/// with that code as its reason (`krabka_leadership_wait` returns), and an
/// observer of it gets it in `on_error`. `krabka_client_close` and
/// `krabka_client_free` of it end nothing (as the system frees a killed
/// process's resources) and return at once. Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_test_process_crash(
    process: *const krabka_test_process,
) -> krabka_result {
    unsafe { with_process(process, TestProcess::crash) }
}

/// Stops the process (SIGSTOP): its calls and timers wait (a thread blocked
/// in a call of its client stays blocked). Its clocks go on, so on
/// `krabka_test_process_resume` what came due fires at once and a write it
/// had in flight reaches the cluster, which fences it if another member
/// took the role meanwhile. Nothing for a crashed process. Does not block;
/// any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_test_process_pause(
    process: *const krabka_test_process,
) -> krabka_result {
    unsafe { with_process(process, TestProcess::pause) }
}

/// Resumes a paused process (SIGCONT). Nothing for a crashed process. Does
/// not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_test_process_resume(
    process: *const krabka_test_process,
) -> krabka_result {
    unsafe { with_process(process, TestProcess::resume) }
}

/// Cuts the process off from the cluster: each call of its client fails
/// as transient (its timers still run) until `krabka_test_process_heal`.
/// Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_test_process_cut_off(
    process: *const krabka_test_process,
) -> krabka_result {
    unsafe { with_process(process, TestProcess::cut_off) }
}

/// Ends a cut (the same as `krabka_test_process_resume`). Does not block;
/// any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_test_process_heal(
    process: *const krabka_test_process,
) -> krabka_result {
    unsafe { with_process(process, TestProcess::heal) }
}

/// Makes each call of the process fail as transient for `seconds`
/// (non-negative, else `KRABKA_RESULT_INVALID_ARGUMENT`) of the cluster's
/// time from now: a renewal or a guarded write that fails for a while,
/// then goes through. Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_test_process_fail_for(
    process: *const krabka_test_process,
    seconds: f64,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let p = unsafe { input(process, "process") }?;
        p.process.fail_for(span(seconds)?);
        Ok(())
    })
}

/// Frees a process handle; NULL is a no-op. Frees nothing of its client's,
/// and the process keeps its state (a paused one stays paused).
#[no_mangle]
pub unsafe extern "C" fn krabka_test_process_free(process: *mut krabka_test_process) {
    guard_value((), || unsafe { free_handle(process) })
}
