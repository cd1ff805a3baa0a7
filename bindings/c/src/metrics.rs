//! The core's metrics, read from C: `krabka_metrics_prometheus` renders
//! every series (the Prometheus text format, version 0.0.4) for the
//! program's own `/metrics` endpoint.
//!
//! The shared recorder (`krabka_coordination_bindings::metrics`) is made
//! the library's `metrics` recorder once, by the first client (as Python's
//! import does), so every member of the process counts from then on. See
//! the table of metrics in docs/metrics.md.

use std::ffi::c_char;

use krabka_coordination_bindings::metrics::install_global;

use crate::ffi::{guard, krabka_error, krabka_result, output, Failure, MAX_LEN};

/// Makes the shared recorder the library's (once; from the first client).
/// The library carries its own copy of the `metrics` crate, so nothing but
/// this library installs its recorder: it cannot fail, but if it did, the
/// rendered text would be empty.
pub(crate) fn install() {
    let _ = install_global();
}

/// Renders every series of the core's metrics in this process (counters,
/// gauges, and histograms of durations in seconds, ordered by name, then
/// labels) in the Prometheus text format, version 0.0.4, NUL-terminated,
/// into `buf` of `len` bytes. `*needed` gets the size the text needs, its
/// NUL included, even when it does not fit (`KRABKA_RESULT_BUFFER_TOO_SMALL`,
/// nothing written; the text may grow before the next call, so allow some
/// room). `buf` may be NULL with `len` 0 to ask the size. Metrics are
/// recorded from the first `krabka_client_new` of the process on; before
/// it the text is empty. Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_metrics_prometheus(
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let needed = unsafe { output(needed, "needed") }?;
        if buf.is_null() && len != 0 {
            return Err(Failure::null("buf"));
        }
        if len > MAX_LEN {
            return Err(Failure::core(&krabka_coordination::Error::InvalidArgument(
                format!(
                    "len must be at most {MAX_LEN} (isize::MAX, the largest object), got {len}"
                ),
            )));
        }
        let text = install_global().map(|r| r.render()).unwrap_or_default();
        *needed = text.len() + 1;
        if text.len() + 1 > len {
            return Err(Failure::new(
                krabka_result::BufferTooSmall,
                format!(
                    "buf: the buffer holds {len} bytes, {} are needed",
                    text.len() + 1
                ),
            ));
        }
        // SAFETY: `text.len() + 1 <= len` bytes of `buf` are writable.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
            *buf.add(text.len()) = 0;
        }
        Ok(())
    })
}
