//! `krabka_client_lead`: the leader loop (the shared crate's `LeadHandle`,
//! over the core's `LeaderLoop`) with a C work function called on the
//! caller's thread, once per term. The rules (when to resign, how long to
//! back off, when to contend again) are the core's.

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use krabka_coordination_bindings::OnInterrupt;
use tokio_util::sync::CancellationToken;

use crate::client::{krabka_cancel, krabka_client, krabka_leadership_options, timeout_arg};
use crate::ffi::{cstr, guard, guard_value, input, krabka_error, krabka_result, Failure};
use crate::leadership::krabka_leadership;
use crate::runtime::{block, block_until, runtime};

/// The end of one term, as the work sees it (opaque, borrowed for the
/// work's call): `krabka_term_ended` polls it, `krabka_term_wait` waits for
/// it. It fires when the term ends (fenced, lease expired, resigned, a
/// fatal error) or the loop is stopped; the work must then return.
#[allow(non_camel_case_types)]
pub struct krabka_term_signal {
    ended: CancellationToken,
    number: u64,
}

/// The work of one term: called on the thread of `krabka_client_lead` with
/// the term's leadership and its end signal (both borrowed for the call:
/// never free them, never keep them past it) and the loop's `user_data`.
/// The leadership is the term's: its token, guarded writes, lease, resign
/// (which ends the term: `ended` fires).
///
/// It returns a `uint32_t` holding a `krabka_result` (a plain integer, so a
/// work written against an older or newer header stays ABI-compatible):
/// `KRABKA_RESULT_OK` (0) when the work is done (the role is resigned and
/// the member contends again), any other value when it failed (the role is
/// resigned and the loop returns that code). A nonzero value that is no
/// `krabka_result` the library knows becomes `KRABKA_RESULT_ERROR`, with
/// the value in the message.
#[allow(non_camel_case_types)]
pub type krabka_lead_work = Option<
    unsafe extern "C" fn(
        leadership: *const krabka_leadership,
        ended: *const krabka_term_signal,
        user_data: *mut c_void,
    ) -> u32,
>;

/// The code a work returned, as a result (`KRABKA_RESULT_ERROR` for a
/// value no result has).
fn work_result(code: u32) -> krabka_result {
    krabka_result::ALL
        .iter()
        .copied()
        .find(|r| *r as u32 == code)
        .unwrap_or(krabka_result::Error)
}

/// The leader loop: contends for `role` as `member` (NUL-terminated UTF-8,
/// borrowed for the call) and calls `work` for each term it wins, on the
/// calling thread, contending again after each, until `cancel` is fired.
/// The rules are the core's leader loop (Curator's `LeaderSelector` with
/// auto-requeue). Blocks the calling thread until the loop ends. `options`
/// may be NULL for the defaults; `work` must not be NULL (an exception to
/// the rule that a NULL callback means none); `user_data` is passed to
/// every call of `work` as it is.
///
/// `cancel` (NULL: the loop runs until a work fails or an error ends it)
/// stops it when fired from another thread (`krabka_cancel_fire`): a
/// waiting acquire deregisters the member, a running term's signal fires
/// and, once the work returns, the role is resigned (and the member
/// deregistered); the call then returns `KRABKA_RESULT_OK`. A cancellation
/// fired before the call returns `KRABKA_RESULT_OK` without contending.
///
/// After each term: when the work returned `KRABKA_RESULT_OK` the role is
/// resigned (an immediate hand-over) and the member contends again, from
/// the tail of the roster, after its backoff (doubling from the initial
/// backoff, starting over after a term of at least one lease); when the
/// term ended under it (fenced, lease expired: its signal fired) the
/// member contends again once it returns; when it returned another code
/// the role is resigned and the call returns that code, with `err` naming
/// the term and the value. A failure to acquire that a retry may mend (the
/// cluster unreachable) is retried after the backoff; any other ends the
/// loop with its code. The role, the member and the timings are checked
/// before any I/O (`KRABKA_RESULT_INVALID_ARGUMENT`), as are the pointers
/// (`KRABKA_RESULT_NULL_ARGUMENT`).
///
/// Any thread but an event callback's or a work's; `work` runs on this one.
#[no_mangle]
pub unsafe extern "C" fn krabka_client_lead(
    client: *const krabka_client,
    role: *const c_char,
    member: *const c_char,
    options: *const krabka_leadership_options,
    cancel: *const krabka_cancel,
    work: krabka_lead_work,
    user_data: *mut c_void,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let client = unsafe { input(client, "client") }?.get()?;
        let role = unsafe { cstr(role, "role") }?;
        let member = unsafe { cstr(member, "member") }?;
        let work = work.ok_or_else(|| Failure::null("work"))?;
        let args = unsafe { crate::client::leadership_args(options) }?;
        let handle = client.leader_loop(role, member, &args, None)?;
        let rt = runtime()?;
        // The caller's cancellation stops the loop; the relay ends with it.
        let over = CancellationToken::new();
        if let Some(c) = unsafe { cancel.as_ref() } {
            // Fired already: stopped before the first acquire starts (the
            // relay below might run only after it did).
            if c.token.is_cancelled() {
                handle.stop();
            }
            let (token, stop, done) = (c.token.clone(), handle.clone(), over.clone());
            rt.spawn(async move {
                tokio::select! {
                    _ = token.cancelled() => stop.stop(),
                    _ = done.cancelled() => {}
                }
            });
        }
        let outcome = drive(&handle, work, user_data);
        handle.end();
        over.cancel();
        outcome
    })
}

/// Runs the terms of `handle` until it yields none or a work fails.
fn drive(
    handle: &krabka_coordination_bindings::LeadHandle,
    work: unsafe extern "C" fn(
        *const krabka_leadership,
        *const krabka_term_signal,
        *mut c_void,
    ) -> u32,
    user_data: *mut c_void,
) -> Result<(), Failure> {
    while let Some(term) = block(handle.next_term())? {
        let signal = krabka_term_signal {
            ended: term.ended().clone(),
            number: term.number(),
        };
        let leadership = krabka_leadership::new(Arc::clone(term.leadership()), None);
        // SAFETY: the caller's work, with handles valid for the call. (A C
        // function cannot unwind; a Rust one that panics through `extern
        // "C"` aborts: the catch is for neither, but costs nothing.)
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
            work(&leadership, &signal, user_data)
        }));
        let finish = handle.finish(term);
        block(async move {
            finish.await;
            Ok(())
        })?;
        drop(leadership);
        match code {
            Ok(0) => {}
            Ok(code) => {
                let result = work_result(code);
                let name = result.name().to_string_lossy();
                let said = if result as u32 == code {
                    format!("{name} ({code})")
                } else {
                    format!("{code}, which is no krabka_result: {name}")
                };
                return Err(Failure::new(
                    result,
                    format!(
                        "the work of term {} returned {said}; the role was resigned",
                        signal.number
                    ),
                ));
            }
            Err(_) => {
                return Err(Failure::new(
                    krabka_result::Panic,
                    format!("the work of term {} panicked", signal.number),
                ))
            }
        }
    }
    Ok(())
}

/// True once the term ended or the loop was stopped: the work must return.
/// NULL is refused as ended (true). Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_term_ended(signal: *const krabka_term_signal) -> bool {
    guard_value(true, || {
        unsafe { signal.as_ref() }.is_none_or(|s| s.ended.is_cancelled())
    })
}

/// Waits until the term ends or the loop is stopped: `KRABKA_RESULT_OK`
/// once it has, `KRABKA_RESULT_TIMED_OUT` when `timeout` seconds passed
/// first (`KRABKA_NO_TIMEOUT`: no limit; 0 polls). Blocks the calling
/// thread at most `timeout`; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_term_wait(
    signal: *const krabka_term_signal,
    timeout: f64,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let ended = unsafe { input(signal, "signal") }?.ended.clone();
        let limit = timeout_arg(timeout)?;
        if ended.is_cancelled() {
            return Ok(());
        }
        block_until(
            async move {
                ended.cancelled().await;
                Ok(())
            },
            limit,
            OnInterrupt::Abort,
            None,
            "waiting for the term to end",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_work_code_is_its_result_or_the_generic_error() {
        assert_eq!(work_result(4), krabka_result::Fenced);
        assert_eq!(work_result(103), krabka_result::Panic);
        assert_eq!(work_result(11), krabka_result::Error);
        assert_eq!(work_result(7777), krabka_result::Error);
        assert_eq!(work_result(u32::MAX), krabka_result::Error);
    }
}
