//! `krabka_leadership`: the held leadership of a role, the core's handle.

use std::ffi::c_char;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use krabka_coordination::leadership::Leadership;
use krabka_coordination::transport::OutRecord;
use krabka_coordination_bindings::args::i32_in_range;
use krabka_coordination_bindings::{Field, OnInterrupt, ProcessBound};

use crate::client::timeout_arg;
use crate::codec::krabka_fencing_token;
use crate::events::Dispatch;
use crate::ffi::{
    cstr, free_handle, guard, guard_value, input, krabka_error, krabka_result, opt_bytes, output,
    Failure,
};
use crate::runtime::{block, block_until};

/// The partition value that lets the producer's partitioner choose.
pub const KRABKA_ANY_PARTITION: i32 = -1;

/// One header of a guarded record: `name` NUL-terminated UTF-8, `value` of
/// `value_len` bytes (NULL with length 0: a null value). Borrowed for the
/// call.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct krabka_header {
    /// The header's name.
    pub name: *const c_char,
    /// The header's value.
    pub value: *const u8,
    /// Its length in bytes.
    pub value_len: usize,
}

/// One record of a guarded write, borrowed for the call.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct krabka_record {
    /// The topic, NUL-terminated UTF-8 (never the state topic).
    pub topic: *const c_char,
    /// The partition, or `KRABKA_ANY_PARTITION` (-1) for the partitioner.
    pub partition: i32,
    /// The key, or NULL with `key_len` 0 for none.
    pub key: *const u8,
    /// The key's length in bytes.
    pub key_len: usize,
    /// The value, or NULL with `value_len` 0 for a tombstone (a null value).
    pub value: *const u8,
    /// The value's length in bytes.
    pub value_len: usize,
    /// `header_count` headers, or NULL when `header_count` is 0.
    pub headers: *const krabka_header,
    /// The number of headers.
    pub header_count: usize,
}

/// Fills `*rec` for `topic`: partition `KRABKA_ANY_PARTITION`, no key, a
/// null value, no headers; then set the fields you need by name
/// (`rec.value = ...; rec.value_len = ...;`), never with a positional
/// `{...}` list: a field added later (at the end) gets its default here, so
/// code written this way keeps its meaning. `topic` is stored as given
/// (borrowed, may be NULL to set later). Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_record_init(
    rec: *mut krabka_record,
    topic: *const c_char,
) -> krabka_result {
    guard(std::ptr::null_mut(), || {
        *unsafe { output(rec, "rec") }? = krabka_record {
            topic,
            partition: KRABKA_ANY_PARTITION,
            key: std::ptr::null(),
            key_len: 0,
            value: std::ptr::null(),
            value_len: 0,
            headers: std::ptr::null(),
            header_count: 0,
        };
        Ok(())
    })
}

/// The held leadership of a role (opaque), from `krabka_client_acquire`.
/// The library renews the lease in the background until the term ends
/// (fenced, lease expired, resigned, or a fatal error).
///
/// Thread safety: every function taking a `const krabka_leadership *` may be
/// called from any number of threads at once (guarded writes are serialised
/// with each other and with the renewals). `krabka_leadership_free` must not
/// race with another call on the same leadership. A leadership belongs to
/// the process that acquired it: in a forked child every call returns
/// `KRABKA_RESULT_FATAL`.
#[allow(non_camel_case_types)]
pub struct krabka_leadership {
    // Declared first: stopped (and its thread joined) before the core handle
    // is dropped, so no callback runs after the free returns.
    dispatch: Mutex<Option<Dispatch>>,
    inner: ProcessBound<Arc<Leadership>>,
}

impl krabka_leadership {
    /// Wraps a won leadership (and the dispatch of its events). It is
    /// dropped on the thread that frees it, outside the runtime: what only
    /// it holds is closed before the free returns.
    pub fn new(leadership: Arc<Leadership>, dispatch: Option<Dispatch>) -> krabka_leadership {
        krabka_leadership {
            dispatch: Mutex::new(dispatch),
            inner: ProcessBound::new("krabka_leadership", leadership, None),
        }
    }

    /// The core's leadership, in the process that acquired it only.
    pub(crate) fn core(&self) -> Result<&Arc<Leadership>, Failure> {
        Ok(self.inner.get()?)
    }
}

impl Drop for krabka_leadership {
    fn drop(&mut self) {
        let dispatch = self
            .dispatch
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(d) = dispatch {
            if self.inner.is_home() {
                d.stop();
            } else {
                // A forked child has no such thread: leak it.
                std::mem::forget(d);
            }
        }
    }
}

/// The fencing token of this term, into `*out`. Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_leadership_token(
    leadership: *const krabka_leadership,
    out: *mut krabka_fencing_token,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        let l = unsafe { input(leadership, "leadership") }?.core()?;
        *out = l.token().into();
        Ok(())
    })
}

/// Sets `*out` to true until the role ends. Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_leadership_is_held(
    leadership: *const krabka_leadership,
    out: *mut bool,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        let l = unsafe { input(leadership, "leadership") }?.core()?;
        *out = l.is_held();
        Ok(())
    })
}

/// Sets `*out` to the lease time left on this member's monotonic clock, in
/// seconds (0 once the term ended). Work done outside Kafka should stop
/// before it reaches 0. Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_leadership_lease_left(
    leadership: *const krabka_leadership,
    out: *mut f64,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        let l = unsafe { input(leadership, "leadership") }?.core()?;
        *out = l.lease_left().as_secs_f64();
        Ok(())
    })
}

/// Sets `*out` to the partition of the state topic that holds the role.
/// Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_leadership_partition(
    leadership: *const krabka_leadership,
    out: *mut i32,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        let l = unsafe { input(leadership, "leadership") }?.core()?;
        *out = l.partition();
        Ok(())
    })
}

/// Sets `*out` to how many renewals in a row have failed with a transient
/// error (0 while they commit). Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_leadership_renewal_failures(
    leadership: *const krabka_leadership,
    out: *mut u32,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        let l = unsafe { input(leadership, "leadership") }?.core()?;
        *out = l.renewal_failures();
        Ok(())
    })
}

/// The last lease this member wrote: `*out` is a new `krabka_lease` the
/// caller owns (read it with `krabka_lease_get_fields`, free it with
/// `krabka_lease_free`); NULL on failure. Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_leadership_lease(
    leadership: *const krabka_leadership,
    out: *mut *mut crate::codec::krabka_lease,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        *out = std::ptr::null_mut();
        let l = unsafe { input(leadership, "leadership") }?.core()?;
        *out = crate::codec::lease_handle(l.lease());
        Ok(())
    })
}

/// Why the role ended, into `*out_reason`: `KRABKA_RESULT_OK` while it is
/// held, else the code of the reason (`FENCED`, `LEASE_EXPIRED`,
/// `RESIGNED`, `FATAL`, ...), whose message goes to `err` although the call
/// itself succeeded (returns `KRABKA_RESULT_OK`).
fn reason(l: &Leadership, out_reason: &mut krabka_result) -> Result<Option<Failure>, Failure> {
    Ok(match l.err() {
        None => {
            *out_reason = krabka_result::Ok;
            None
        }
        Some(e) => {
            let f = Failure::core(&e);
            *out_reason = f.code;
            Some(f)
        }
    })
}

/// Sets `*out_reason` to why the role ended: `KRABKA_RESULT_OK` while it is
/// held, else the reason's code (`FENCED`, `LEASE_EXPIRED`, `RESIGNED`,
/// `FATAL`, ...). The call returns `KRABKA_RESULT_OK`; when the role ended,
/// `err` receives the reason's message and part all the same. Does not
/// block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_leadership_reason(
    leadership: *const krabka_leadership,
    out_reason: *mut krabka_result,
    err: *mut krabka_error,
) -> krabka_result {
    let mut ended = None;
    let r = guard(err, || {
        let out = unsafe { output(out_reason, "out_reason") }?;
        let l = unsafe { input(leadership, "leadership") }?.core()?;
        ended = reason(l, out)?;
        Ok(())
    });
    if r == krabka_result::Ok {
        // SAFETY: `err` is NULL or the caller's record.
        unsafe { crate::ffi::report(err, ended.as_ref()) };
    }
    r
}

/// Blocks the calling thread until the role ends or `timeout` seconds pass
/// (`KRABKA_NO_TIMEOUT`: no limit; 0 only looks). Returns
/// `KRABKA_RESULT_OK` when the role ended, with `*out_reason` and `err` as
/// `krabka_leadership_reason` sets them; `KRABKA_RESULT_TIMED_OUT` while it
/// is still held (`*out_reason` is `KRABKA_RESULT_OK`). Any thread; a
/// callback may call it for another leadership.
#[no_mangle]
pub unsafe extern "C" fn krabka_leadership_wait(
    leadership: *const krabka_leadership,
    timeout: f64,
    out_reason: *mut krabka_result,
    err: *mut krabka_error,
) -> krabka_result {
    let mut ended = None;
    let r = guard(err, || {
        let out = unsafe { output(out_reason, "out_reason") }?;
        *out = krabka_result::Ok;
        let l = unsafe { input(leadership, "leadership") }?.core()?;
        let limit = timeout_arg(timeout)?;
        if limit != Some(Duration::ZERO) {
            let done = l.done();
            block_until(
                async move {
                    done.await;
                    Ok(())
                },
                limit,
                OnInterrupt::Abort,
                None,
                "waiting for the end of the role",
            )?;
        }
        ended = reason(l, out)?;
        if ended.is_none() {
            return Err(Failure::new(
                krabka_result::TimedOut,
                "the role is still held",
            ));
        }
        Ok(())
    });
    if r == krabka_result::Ok {
        // SAFETY: `err` is NULL or the caller's record.
        unsafe { crate::ffi::report(err, ended.as_ref()) };
    }
    r
}

/// The core's records of the caller's `count` records at `records` (NULL
/// with 0: none), each field checked and named.
pub(crate) fn records(
    records: *const krabka_record,
    count: usize,
) -> Result<Vec<OutRecord>, Failure> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if records.is_null() {
        return Err(Failure::null("records"));
    }
    if count > crate::ffi::MAX_LEN / std::mem::size_of::<krabka_record>() {
        return Err(Failure::core(&krabka_coordination::Error::InvalidArgument(
            format!("count must be the number of records, got {count}"),
        )));
    }
    // SAFETY: `records` holds `count` records (the caller's contract).
    let records = unsafe { std::slice::from_raw_parts(records, count) };
    let mut out = Vec::with_capacity(count);
    for (i, r) in records.iter().enumerate() {
        let at = |f: &str| format!("records[{i}].{f}");
        let topic = unsafe { cstr(r.topic, &at(Field::Topic.name())) }?.to_owned();
        let partition = if r.partition == KRABKA_ANY_PARTITION {
            None
        } else {
            Some(i32_in_range(
                &at(Field::Partition.name()),
                r.partition.into(),
                0,
                i32::MAX,
            )?)
        };
        let key =
            unsafe { opt_bytes(r.key, r.key_len, &at(Field::Key.name())) }?.map(<[u8]>::to_vec);
        let value = unsafe { opt_bytes(r.value, r.value_len, &at(Field::Value.name())) }?
            .map(<[u8]>::to_vec);
        let mut headers = Vec::with_capacity(r.header_count.min(1024));
        if r.header_count > 0 {
            if r.headers.is_null() {
                return Err(Failure::null(&at(Field::Headers.name())));
            }
            if r.header_count > crate::ffi::MAX_LEN / std::mem::size_of::<krabka_header>() {
                return Err(Failure::core(&krabka_coordination::Error::InvalidArgument(
                    format!(
                        "{} must be the number of headers, got {}",
                        at("header_count"),
                        r.header_count
                    ),
                )));
            }
            // SAFETY: `headers` holds `header_count` headers.
            let hs = unsafe { std::slice::from_raw_parts(r.headers, r.header_count) };
            for (j, h) in hs.iter().enumerate() {
                let name = unsafe { cstr(h.name, &at(&format!("headers[{j}].name"))) }?;
                let value = unsafe {
                    opt_bytes(h.value, h.value_len, &at(&format!("headers[{j}].value")))
                }?;
                headers.push((name.to_owned(), value.unwrap_or_default().to_vec()));
            }
        }
        out.push(OutRecord {
            topic,
            partition,
            key,
            value,
            headers,
        });
    }
    Ok(out)
}

/// A guarded write: `count` records (borrowed for the call) in one
/// transaction of this term's epoch. All of them become visible, or none. A
/// deposed leader's write is refused by the broker: `KRABKA_RESULT_FENCED`,
/// and the term ends. `KRABKA_RESULT_OUTCOME_UNKNOWN`: the commit was sent
/// but not confirmed. Blocks the calling thread for at most one renew
/// interval (never past the lease); any thread (writes are serialised).
#[no_mangle]
pub unsafe extern "C" fn krabka_leadership_write(
    leadership: *const krabka_leadership,
    records: *const krabka_record,
    count: usize,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let l = Arc::clone(unsafe { input(leadership, "leadership") }?.core()?);
        let records = self::records(records, count)?;
        block(async move { l.write(records).await })
    })
}

/// Gives the role up without ever fencing a successor: stops renewing,
/// clears the lease, supersedes the token, deregisters. The next standby
/// takes over at once. Blocks the calling thread until it is done (each step
/// bounded by the lease duration); the term has ended when it returns,
/// whatever it returns. Idempotent; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_leadership_resign(
    leadership: *const krabka_leadership,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let l = Arc::clone(unsafe { input(leadership, "leadership") }?.core()?);
        block(async move { l.resign().await })
    })
}

/// Frees a leadership; NULL is a no-op. Stops the event callback (none
/// starts after this returns; one in progress is waited for unless this is
/// called from it) and the renewals, without resigning: standbys take over
/// when the lease runs out (call `krabka_leadership_resign` first to hand
/// over at once). Must not race with another call on the leadership.
#[no_mangle]
pub unsafe extern "C" fn krabka_leadership_free(leadership: *mut krabka_leadership) {
    guard_value((), || unsafe { free_handle(leadership) })
}
