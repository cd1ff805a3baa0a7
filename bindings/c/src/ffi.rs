//! The calling conventions every export follows: the result codes, the
//! caller-owned error record, the panic boundary, and the checks of raw
//! pointers and lengths.
//!
//! Every export runs its body inside [`guard`]: a panic becomes
//! `KRABKA_RESULT_PANIC`, a refusal its result code, and the error record the
//! caller passed (if any) receives the message and the record part. Raw
//! pointers are read only through the helpers here, each of which refuses
//! NULL (`KRABKA_RESULT_NULL_ARGUMENT`) and a length no object can have
//! before anything is dereferenced.

use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use krabka_coordination::{Error, ErrorKind, Part};
use krabka_coordination_bindings::args::ArgError;
use krabka_coordination_bindings::errors::{details, Caller};

/// The result of every fallible function: `KRABKA_RESULT_OK` (0), one of the
/// core's error kinds (1 to 10, the values of the core's `ErrorKind`), or one
/// of the ABI's own (100 and up). The values never change meaning; new codes
/// may be added, so keep a default branch when switching on one.
#[allow(non_camel_case_types)]
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum krabka_result {
    /// Success.
    Ok = 0,
    /// FORMAT: malformed record bytes. The error record's `part` names the
    /// record part that failed to decode; the message the field, the byte
    /// offset and the reason.
    Format = 1,
    /// ENCODE: a value the frozen record layout cannot hold (an empty or
    /// over-long role or member). The error record's `part` names the part;
    /// the message the field.
    Encode = 2,
    /// INVALID_ARGUMENT: an argument, option or setting that is refused; the
    /// message names it and the value.
    InvalidArgument = 3,
    /// FENCED: a newer epoch of the role exists; stop the role's work.
    Fenced = 4,
    /// TRANSIENT: a broker unreachable, a timeout, a coordinator moving; the
    /// operation may be retried.
    Transient = 5,
    /// FATAL: a failure retrying will not mend (authorization, configuration,
    /// a topic of the wrong shape, a handle used in a forked child).
    Fatal = 6,
    /// RESIGNED: the leadership was given up by `krabka_leadership_resign`.
    Resigned = 7,
    /// CANCELLED: the operation was cancelled before it finished.
    Cancelled = 8,
    /// LEASE_EXPIRED: the leader's own lease ran out; stop the role's work,
    /// including work done outside Kafka.
    LeaseExpired = 9,
    /// OUTCOME_UNKNOWN: a write whose commit was sent but not confirmed: it
    /// may or may not have committed.
    OutcomeUnknown = 10,
    /// An error of a kind the core added after this library was built.
    Error = 99,
    /// The ABI's own: a pointer argument that must not be NULL was NULL
    /// (the message names it). Nothing was read or written.
    NullArgument = 100,
    /// The ABI's own: an output buffer is too small; its length
    /// out-parameter holds the size needed. Nothing was written to it.
    BufferTooSmall = 101,
    /// The ABI's own: a wait with a timeout ended before what it waited for
    /// (an acquire that was not won in time, a leadership still held).
    TimedOut = 102,
    /// The ABI's own: the library panicked; the message says where. A bug:
    /// please report it. The handles passed stay valid to free.
    Panic = 103,
}

impl krabka_result {
    /// The code of a core error kind (`Error` for one newer than this ABI).
    pub fn of_kind(kind: ErrorKind) -> krabka_result {
        match kind {
            ErrorKind::Format => krabka_result::Format,
            ErrorKind::Encode => krabka_result::Encode,
            ErrorKind::InvalidArgument => krabka_result::InvalidArgument,
            ErrorKind::Fenced => krabka_result::Fenced,
            ErrorKind::Transient => krabka_result::Transient,
            ErrorKind::Fatal => krabka_result::Fatal,
            ErrorKind::Resigned => krabka_result::Resigned,
            ErrorKind::Cancelled => krabka_result::Cancelled,
            ErrorKind::LeaseExpired => krabka_result::LeaseExpired,
            ErrorKind::OutcomeUnknown => krabka_result::OutcomeUnknown,
            _ => krabka_result::Error,
        }
    }

    /// Every code, in value order.
    pub(crate) const ALL: [krabka_result; 16] = [
        krabka_result::Ok,
        krabka_result::Format,
        krabka_result::Encode,
        krabka_result::InvalidArgument,
        krabka_result::Fenced,
        krabka_result::Transient,
        krabka_result::Fatal,
        krabka_result::Resigned,
        krabka_result::Cancelled,
        krabka_result::LeaseExpired,
        krabka_result::OutcomeUnknown,
        krabka_result::Error,
        krabka_result::NullArgument,
        krabka_result::BufferTooSmall,
        krabka_result::TimedOut,
        krabka_result::Panic,
    ];

    /// The stable name, NUL-terminated: the core kind's name for its codes
    /// (`FENCED`), the ABI's own otherwise (`NULL_ARGUMENT`).
    pub fn name(self) -> &'static CStr {
        match self {
            krabka_result::Ok => c"OK",
            krabka_result::Format => c"FORMAT",
            krabka_result::Encode => c"ENCODE",
            krabka_result::InvalidArgument => c"INVALID_ARGUMENT",
            krabka_result::Fenced => c"FENCED",
            krabka_result::Transient => c"TRANSIENT",
            krabka_result::Fatal => c"FATAL",
            krabka_result::Resigned => c"RESIGNED",
            krabka_result::Cancelled => c"CANCELLED",
            krabka_result::LeaseExpired => c"LEASE_EXPIRED",
            krabka_result::OutcomeUnknown => c"OUTCOME_UNKNOWN",
            krabka_result::Error => c"ERROR",
            krabka_result::NullArgument => c"NULL_ARGUMENT",
            krabka_result::BufferTooSmall => c"BUFFER_TOO_SMALL",
            krabka_result::TimedOut => c"TIMED_OUT",
            krabka_result::Panic => c"PANIC",
        }
    }
}

/// The record part a FORMAT or ENCODE error concerns.
#[allow(non_camel_case_types)]
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum krabka_part {
    /// No record part (every other error, and success).
    None = 0,
    /// The record key.
    Key = 1,
    /// The value of a registration record.
    RegistrationValue = 2,
    /// The value of a lease record.
    LeaseValue = 3,
}

impl krabka_part {
    /// The part of a core record part.
    pub fn of(part: Part) -> krabka_part {
        match part {
            Part::Key => krabka_part::Key,
            Part::RegistrationValue => krabka_part::RegistrationValue,
            Part::LeaseValue => krabka_part::LeaseValue,
        }
    }

    /// The part's name as the golden vectors spell it (`"key"`,
    /// `"registration value"`, `"lease value"`), `""` for none.
    pub fn name(self) -> &'static CStr {
        match self {
            krabka_part::None => c"",
            krabka_part::Key => c"key",
            krabka_part::RegistrationValue => c"registration value",
            krabka_part::LeaseValue => c"lease value",
        }
    }
}

/// Where a fallible function reports what went wrong: a record the caller
/// owns (on its stack, typically) and passes as the last argument, or NULL
/// for no report.
///
/// The caller sets `message` and `capacity`; the function sets the rest.
/// On failure the message (UTF-8) is copied into `message`, cut at a
/// character boundary to fit `capacity - 1` bytes, and NUL-terminated;
/// `length` is the whole message's length in bytes (so `length >= capacity`
/// means it was cut), and `part` the record part of a FORMAT or ENCODE
/// error. On success `length` is 0, `part` is `KRABKA_PART_NONE` and
/// `message` holds `""`. `message` may be NULL with `capacity` 0 (only
/// `length` and `part` are reported). The library keeps no pointer to the
/// record or its buffer after the call returns.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug)]
pub struct krabka_error {
    /// The caller's buffer for the message, or NULL.
    pub message: *mut c_char,
    /// The size of `message` in bytes, its final NUL included.
    pub capacity: usize,
    /// Set by the call: the whole message's length in bytes (without a NUL).
    pub length: usize,
    /// Set by the call: the record part of a FORMAT or ENCODE error.
    pub part: krabka_part,
}

/// A refusal or an error, on its way to the caller.
#[derive(Debug)]
pub struct Failure {
    /// The code the call returns.
    pub code: krabka_result,
    /// The record part of a format or encode error.
    pub part: krabka_part,
    /// The message.
    pub message: String,
}

impl Failure {
    /// A failure with no record part.
    pub fn new(code: krabka_result, message: impl Into<String>) -> Failure {
        Failure {
            code,
            part: krabka_part::None,
            message: message.into(),
        }
    }

    /// `{what} must not be NULL`.
    pub fn null(what: &str) -> Failure {
        Failure::new(
            krabka_result::NullArgument,
            format!("{what} must not be NULL"),
        )
    }

    /// The failure of a core error: its kind's code, its part, its message
    /// (which carries its causes).
    pub fn core(e: &Error) -> Failure {
        let d = details(e);
        Failure {
            code: krabka_result::of_kind(d.kind),
            part: d
                .part
                .and_then(Part::from_name)
                .map_or(krabka_part::None, krabka_part::of),
            message: krabka_coordination_bindings::errors::message(e, Caller::C),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::core(&e)
    }
}

impl From<ArgError> for Failure {
    fn from(e: ArgError) -> Self {
        Failure::core(&Error::from(e))
    }
}

impl From<krabka_coordination::FormatError> for Failure {
    fn from(e: krabka_coordination::FormatError) -> Self {
        Failure::core(&Error::Format(e))
    }
}

impl From<krabka_coordination::EncodeError> for Failure {
    fn from(e: krabka_coordination::EncodeError) -> Self {
        Failure::core(&Error::Encode(e))
    }
}

/// What a body returns.
pub type Outcome = Result<(), Failure>;

/// Runs an export's body: catches a panic, reports into `err`, returns the
/// code. `err` is the export's own argument, under the export's contract
/// (every export is an `unsafe extern "C" fn`): NULL or the caller's record.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn guard(err: *mut krabka_error, body: impl FnOnce() -> Outcome) -> krabka_result {
    let outcome = catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|payload| {
        Err(Failure::new(
            krabka_result::Panic,
            format!(
                "krabka_coordination panicked: {}",
                krabka_coordination_bindings::blocking::panic_message(payload)
            ),
        ))
    });
    // SAFETY: `err` is NULL or the caller's record (the documented contract).
    let reported = catch_unwind(AssertUnwindSafe(|| unsafe {
        report(err, outcome.as_ref().err())
    }));
    drop(reported);
    match outcome {
        Ok(()) => krabka_result::Ok,
        Err(f) => f.code,
    }
}

/// Runs an export whose result is not a code (a `*_free`, a name lookup):
/// a panic yields `fallback`.
pub fn guard_value<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

/// Writes `failure` (or success) into the caller's error record.
///
/// # Safety
/// `err` is NULL or points at a `krabka_error` whose `message` is NULL or
/// points at `capacity` writable bytes.
pub unsafe fn report(err: *mut krabka_error, failure: Option<&Failure>) {
    // SAFETY: the caller's contract.
    let Some(err) = (unsafe { err.as_mut() }) else {
        return;
    };
    let (message, part) = match failure {
        Some(f) => (f.message.as_str(), f.part),
        None => ("", krabka_part::None),
    };
    err.length = message.len();
    err.part = part;
    // SAFETY: the caller's contract on `message` and `capacity`.
    unsafe { copy_text(message, err.message, err.capacity) };
}

/// Copies `text` into `buf` (of `capacity` bytes), cut at a character
/// boundary to leave room for the NUL, and NUL-terminates it. Nothing is
/// written when `buf` is NULL or `capacity` is 0.
///
/// # Safety
/// `buf` is NULL or points at `capacity` writable bytes.
pub unsafe fn copy_text(text: &str, buf: *mut c_char, capacity: usize) {
    if buf.is_null() || capacity == 0 {
        return;
    }
    let mut n = text.len().min(capacity - 1);
    while !text.is_char_boundary(n) {
        n -= 1;
    }
    // SAFETY: `n + 1 <= capacity` bytes of `buf` are writable.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
        *buf.add(n) = 0;
    }
}

/// The longest length a buffer may have: no object is larger than
/// `isize::MAX` bytes.
pub(crate) const MAX_LEN: usize = isize::MAX as usize;

fn check_len(len: usize, what: &str) -> Result<(), Failure> {
    if len > MAX_LEN {
        return Err(ArgError::invalid(
            what,
            &format!("at most {MAX_LEN} (isize::MAX, the largest object)"),
            len,
        )
        .into());
    }
    Ok(())
}

/// The bytes at `ptr` of `len` bytes: NULL is refused whatever the length.
///
/// # Safety
/// A non-NULL `ptr` points at `len` readable bytes that stay unchanged for
/// `'a`.
pub unsafe fn bytes<'a>(ptr: *const u8, len: usize, what: &str) -> Result<&'a [u8], Failure> {
    if ptr.is_null() {
        return Err(Failure::null(what));
    }
    check_len(len, &format!("{what}_len"))?;
    // SAFETY: non-NULL, a length no larger than an object, the caller's
    // contract for the rest.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Optional bytes: NULL with length 0 is "absent"; NULL with another length
/// is refused.
///
/// # Safety
/// As [`bytes`].
pub unsafe fn opt_bytes<'a>(
    ptr: *const u8,
    len: usize,
    what: &str,
) -> Result<Option<&'a [u8]>, Failure> {
    if ptr.is_null() && len == 0 {
        return Ok(None);
    }
    // SAFETY: the caller's contract.
    unsafe { bytes(ptr, len, what) }.map(Some)
}

fn utf8<'a>(b: &'a [u8], what: &str) -> Result<&'a str, Failure> {
    std::str::from_utf8(b).map_err(|e| {
        ArgError::invalid(
            what,
            "valid UTF-8",
            format!("an invalid byte sequence at byte {}", e.valid_up_to()),
        )
        .into()
    })
}

/// UTF-8 text of `len` bytes at `ptr` (it may hold NUL bytes).
///
/// # Safety
/// As [`bytes`].
pub unsafe fn text<'a>(ptr: *const c_char, len: usize, what: &str) -> Result<&'a str, Failure> {
    // SAFETY: the caller's contract.
    let b = unsafe { bytes(ptr.cast::<u8>(), len, what) }?;
    utf8(b, what)
}

/// Optional text: NULL with length 0 is `""`.
///
/// # Safety
/// As [`bytes`].
pub unsafe fn opt_text<'a>(ptr: *const c_char, len: usize, what: &str) -> Result<&'a str, Failure> {
    // SAFETY: the caller's contract.
    match unsafe { opt_bytes(ptr.cast::<u8>(), len, what) }? {
        None => Ok(""),
        Some(b) => utf8(b, what),
    }
}

/// A NUL-terminated UTF-8 string.
///
/// # Safety
/// A non-NULL `ptr` points at a NUL-terminated string that stays unchanged
/// for `'a`.
pub unsafe fn cstr<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if ptr.is_null() {
        return Err(Failure::null(what));
    }
    // SAFETY: the caller's contract.
    let c = unsafe { CStr::from_ptr(ptr) };
    utf8(c.to_bytes(), what)
}

/// The object behind a handle or an input pointer.
///
/// # Safety
/// A non-NULL `ptr` points at a live `T` for `'a`.
pub unsafe fn input<'a, T>(ptr: *const T, what: &str) -> Result<&'a T, Failure> {
    // SAFETY: the caller's contract.
    unsafe { ptr.as_ref() }.ok_or_else(|| Failure::null(what))
}

/// An out-parameter.
///
/// # Safety
/// A non-NULL `ptr` points at a writable `T` (its old value is overwritten,
/// not dropped: only plain data is written through it).
pub unsafe fn output<'a, T>(ptr: *mut T, what: &str) -> Result<&'a mut T, Failure> {
    // SAFETY: the caller's contract.
    unsafe { ptr.as_mut() }.ok_or_else(|| Failure::null(what))
}

/// Copies `data` into the caller's buffer `out` of `capacity` bytes and sets
/// `*out_len` to its length; `BUFFER_TOO_SMALL` (with `*out_len` the size
/// needed) when it does not fit.
///
/// # Safety
/// `out` is NULL or points at `capacity` writable bytes; `out_len` is NULL
/// or writable.
pub unsafe fn copy_out(
    data: &[u8],
    out: *mut u8,
    capacity: usize,
    out_len: *mut usize,
    what: &str,
) -> Outcome {
    // SAFETY: the caller's contract.
    let out_len = unsafe { output(out_len, "out_len") }?;
    if out.is_null() {
        return Err(Failure::null(what));
    }
    check_len(capacity, &format!("{what}_capacity"))?;
    *out_len = data.len();
    if data.len() > capacity {
        return Err(Failure::new(
            krabka_result::BufferTooSmall,
            format!(
                "{what}: the buffer holds {capacity} bytes, {} are needed",
                data.len()
            ),
        ));
    }
    // SAFETY: `data.len() <= capacity` bytes of `out` are writable.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), out, data.len()) };
    Ok(())
}

/// Moves `value` to the heap and hands the caller its pointer.
pub fn into_handle<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// Takes back and drops a handle made by [`into_handle`]; NULL is a no-op.
///
/// # Safety
/// `ptr` is NULL or came from [`into_handle`] for `T` and is not used again.
pub unsafe fn free_handle<T>(ptr: *mut T) {
    if !ptr.is_null() {
        // SAFETY: the caller's contract.
        drop(unsafe { Box::from_raw(ptr) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_kinds_keep_their_values() {
        for kind in ErrorKind::ALL {
            let code = krabka_result::of_kind(kind);
            assert_eq!(code as u32, kind as u32, "{kind}");
            assert_eq!(code.name().to_str().unwrap(), kind.name());
        }
        for (i, code) in krabka_result::ALL.iter().enumerate() {
            assert!(i == 0 || (krabka_result::ALL[i - 1] as u32) < (*code as u32));
        }
    }

    #[test]
    fn part_names_are_the_cores() {
        for (part, name) in krabka_coordination_bindings::errors::PARTS {
            assert_eq!(krabka_part::of(part).name().to_str().unwrap(), name);
        }
    }

    #[test]
    fn messages_are_cut_at_a_character_boundary() {
        let mut buf = [0x55 as c_char; 6];
        // SAFETY: a 6-byte buffer.
        unsafe { copy_text("ab\u{e9}\u{e9}", buf.as_mut_ptr(), 6) };
        // "ab" + "é" (2 bytes) = 4 bytes, the next "é" does not fit in 5.
        let got = unsafe { CStr::from_ptr(buf.as_ptr()) };
        assert_eq!(got.to_str().unwrap(), "ab\u{e9}");
        let mut one = [0x55 as c_char; 1];
        unsafe { copy_text("abc", one.as_mut_ptr(), 1) };
        assert_eq!(one[0], 0);
    }

    #[test]
    fn a_panic_is_a_code_and_a_message() {
        let mut buf = [0 as c_char; 128];
        let mut err = krabka_error {
            message: buf.as_mut_ptr(),
            capacity: buf.len(),
            length: 0,
            part: krabka_part::None,
        };
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let r = guard(&mut err, || panic!("boom"));
        std::panic::set_hook(prev);
        assert_eq!(r, krabka_result::Panic);
        let got = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
        assert_eq!(got, "krabka_coordination panicked: boom");
        assert_eq!(err.length, got.len());
    }
}
