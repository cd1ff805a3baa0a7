//! The conformance surface: the three record parts, the partition of a
//! role, fencing tokens. Each function checks its pointers, calls the core
//! function of the same name and copies the result out; none re-implements
//! a layout, a hash or an order.

use std::ffi::{c_char, CStr};

use krabka_coordination as core;
use krabka_coordination::{FencingToken, Key, KeyKind, Lease, Registration};
use krabka_coordination_bindings::args::ArgError;

use crate::ffi::{
    bytes, copy_out, free_handle, guard, guard_value, input, into_handle, krabka_error,
    krabka_part, krabka_result, opt_text, output, text,
};

/// The kind of a record key. The values are the layout's own kind codes.
#[allow(non_camel_case_types)]
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum krabka_key_kind {
    /// A member's registration (role and member).
    Registration = 0,
    /// A role's lease (role only; the member is empty).
    Lease = 1,
}

/// A fencing token: the producer id and producer epoch Kafka's transaction
/// coordinator minted for the role. A plain value: copy it freely. Compare
/// tokens with `krabka_fencing_token_compare` (producer id first, then
/// epoch), never by the epoch alone.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct krabka_fencing_token {
    /// The producer id the coordinator assigned to the role.
    pub producer_id: i64,
    /// The producer epoch within that producer id.
    pub producer_epoch: i16,
}

impl From<FencingToken> for krabka_fencing_token {
    fn from(t: FencingToken) -> Self {
        krabka_fencing_token {
            producer_id: t.producer_id,
            producer_epoch: t.producer_epoch,
        }
    }
}

impl From<krabka_fencing_token> for FencingToken {
    fn from(t: krabka_fencing_token) -> Self {
        FencingToken::new(t.producer_id, t.producer_epoch)
    }
}

/// The fields of a record key: what `krabka_encode_key` reads and
/// `krabka_key_get_fields` fills.
///
/// Strings are UTF-8 of the given length in bytes, not NUL-terminated (they
/// may hold NUL bytes). As an input, `role` and `member` are borrowed for the
/// call only; a NULL string with length 0 is the empty string. As an output,
/// they point into the `krabka_key` they were read from and stay valid until
/// it is freed.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct krabka_key_fields {
    /// A `krabka_key_kind` value: 0 registration, 1 lease.
    pub kind: u32,
    /// The role name.
    pub role: *const c_char,
    /// Its length in bytes.
    pub role_len: usize,
    /// The member id of a registration key; empty for a lease key.
    pub member: *const c_char,
    /// Its length in bytes.
    pub member_len: usize,
}

/// The fields of a registration value (see `krabka_key_fields` for how the
/// string is passed and borrowed).
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct krabka_registration_fields {
    /// The registering member.
    pub member: *const c_char,
    /// Its length in bytes.
    pub member_len: usize,
    /// When the member registered, in epoch milliseconds.
    pub registered_at: i64,
}

/// The fields of a lease value (see `krabka_key_fields` for how the string
/// is passed and borrowed).
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct krabka_lease_fields {
    /// The member that holds the lease.
    pub member: *const c_char,
    /// Its length in bytes.
    pub member_len: usize,
    /// The holder's fencing token.
    pub token: krabka_fencing_token,
    /// When the lease was written, in epoch milliseconds of the holder's clock.
    pub granted_at: i64,
    /// When a standby may stop waiting, in epoch milliseconds of the holder's clock.
    pub deadline: i64,
}

/// A decoded record key (opaque). Made by `krabka_decode_key`, read with
/// `krabka_key_get_fields`, freed with `krabka_key_free`. Immutable: any number
/// of threads may read one at once; freeing it must not race with a read.
#[allow(non_camel_case_types)]
pub struct krabka_key {
    key: Key,
}

/// A decoded registration value (opaque); like `krabka_key`.
#[allow(non_camel_case_types)]
pub struct krabka_registration {
    registration: Registration,
}

/// A decoded lease value (opaque); like `krabka_key`.
#[allow(non_camel_case_types)]
pub struct krabka_lease {
    lease: Lease,
}

fn key_kind(kind: u32) -> Result<KeyKind, crate::ffi::Failure> {
    i16::try_from(kind)
        .ok()
        .and_then(KeyKind::from_code)
        .ok_or_else(|| {
            ArgError::invalid(
                "kind",
                "0 (KRABKA_KEY_KIND_REGISTRATION) or 1 (KRABKA_KEY_KIND_LEASE)",
                kind,
            )
            .into()
        })
}

fn kind_code(kind: KeyKind) -> u32 {
    match kind {
        KeyKind::Registration => krabka_key_kind::Registration as u32,
        KeyKind::Lease => krabka_key_kind::Lease as u32,
    }
}

/// Encodes a record key into the caller's buffer `out` of `out_capacity`
/// bytes; `*out_len` receives the encoded length (also when the buffer is
/// too small: then the result is `KRABKA_RESULT_BUFFER_TOO_SMALL` and nothing
/// is written). A key the layout cannot hold (an empty role, an empty member
/// in a registration key, a member in a lease key, a string over 32767
/// bytes) is `KRABKA_RESULT_ENCODE` with `err->part == KRABKA_PART_KEY`;
/// text that is not UTF-8 is `KRABKA_RESULT_INVALID_ARGUMENT`.
///
/// `key` and `out` are borrowed for the call. Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_encode_key(
    key: *const krabka_key_fields,
    out: *mut u8,
    out_capacity: usize,
    out_len: *mut usize,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        // SAFETY: the documented contract of every pointer argument.
        let f = unsafe { input(key, "key") }?;
        let kind = key_kind(f.kind)?;
        let role = unsafe { opt_text(f.role, f.role_len, "key.role") }?;
        let member = unsafe { opt_text(f.member, f.member_len, "key.member") }?;
        let key = Key {
            kind,
            role: role.to_owned(),
            member: member.to_owned(),
        };
        let encoded = core::encode_key(&key)?;
        unsafe { copy_out(&encoded, out, out_capacity, out_len, "out") }
    })
}

/// Decodes a record key from `data` (`data_len` bytes, borrowed for the
/// call). On success `*out` receives a new `krabka_key` the caller owns and
/// frees with `krabka_key_free`; on failure `*out` is set to NULL (when `out`
/// is not NULL). Malformed bytes are `KRABKA_RESULT_FORMAT` with
/// `err->part == KRABKA_PART_KEY`. Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_decode_key(
    data: *const u8,
    data_len: usize,
    out: *mut *mut krabka_key,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        *out = std::ptr::null_mut();
        let data = unsafe { bytes(data, data_len, "data") }?;
        let key = core::decode_key(data)?;
        *out = into_handle(krabka_key { key });
        Ok(())
    })
}

/// Reads the fields of a decoded key into `*out`; the strings point into
/// `key` and stay valid until `krabka_key_free(key)`. Does not block; any
/// thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_key_get_fields(
    key: *const krabka_key,
    out: *mut krabka_key_fields,
) -> krabka_result {
    guard(std::ptr::null_mut(), || {
        let key = &unsafe { input(key, "key") }?.key;
        let out = unsafe { output(out, "out") }?;
        *out = krabka_key_fields {
            kind: kind_code(key.kind),
            role: key.role.as_ptr().cast(),
            role_len: key.role.len(),
            member: key.member.as_ptr().cast(),
            member_len: key.member.len(),
        };
        Ok(())
    })
}

/// Frees a key made by `krabka_decode_key`. NULL is a no-op. The key and
/// every string read from it are invalid afterwards.
#[no_mangle]
pub unsafe extern "C" fn krabka_key_free(key: *mut krabka_key) {
    guard_value((), || unsafe { free_handle(key) })
}

/// Encodes a registration value (see `krabka_encode_key` for the buffer and
/// the errors; the part is `KRABKA_PART_REGISTRATION_VALUE`).
#[no_mangle]
pub unsafe extern "C" fn krabka_encode_registration(
    registration: *const krabka_registration_fields,
    out: *mut u8,
    out_capacity: usize,
    out_len: *mut usize,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let f = unsafe { input(registration, "registration") }?;
        let member = unsafe { opt_text(f.member, f.member_len, "registration.member") }?;
        let reg = Registration {
            member: member.to_owned(),
            registered_at: f.registered_at,
        };
        let encoded = core::encode_registration(&reg)?;
        unsafe { copy_out(&encoded, out, out_capacity, out_len, "out") }
    })
}

/// Decodes a registration value (see `krabka_decode_key`; the part is
/// `KRABKA_PART_REGISTRATION_VALUE`, the handle is freed with
/// `krabka_registration_free`).
#[no_mangle]
pub unsafe extern "C" fn krabka_decode_registration(
    data: *const u8,
    data_len: usize,
    out: *mut *mut krabka_registration,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        *out = std::ptr::null_mut();
        let data = unsafe { bytes(data, data_len, "data") }?;
        let registration = core::decode_registration(data)?;
        *out = into_handle(krabka_registration { registration });
        Ok(())
    })
}

/// Reads the fields of a decoded registration value (see
/// `krabka_key_get_fields`).
#[no_mangle]
pub unsafe extern "C" fn krabka_registration_get_fields(
    registration: *const krabka_registration,
    out: *mut krabka_registration_fields,
) -> krabka_result {
    guard(std::ptr::null_mut(), || {
        let r = &unsafe { input(registration, "registration") }?.registration;
        let out = unsafe { output(out, "out") }?;
        *out = krabka_registration_fields {
            member: r.member.as_ptr().cast(),
            member_len: r.member.len(),
            registered_at: r.registered_at,
        };
        Ok(())
    })
}

/// Frees a registration value; NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn krabka_registration_free(registration: *mut krabka_registration) {
    guard_value((), || unsafe { free_handle(registration) })
}

/// Encodes a lease value (see `krabka_encode_key` for the buffer and the
/// errors; the part is `KRABKA_PART_LEASE_VALUE`).
#[no_mangle]
pub unsafe extern "C" fn krabka_encode_lease(
    lease: *const krabka_lease_fields,
    out: *mut u8,
    out_capacity: usize,
    out_len: *mut usize,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let f = unsafe { input(lease, "lease") }?;
        let member = unsafe { opt_text(f.member, f.member_len, "lease.member") }?;
        let lease = Lease {
            member: member.to_owned(),
            token: f.token.into(),
            granted_at: f.granted_at,
            deadline: f.deadline,
        };
        let encoded = core::encode_lease(&lease)?;
        unsafe { copy_out(&encoded, out, out_capacity, out_len, "out") }
    })
}

/// Decodes a lease value (see `krabka_decode_key`; the part is
/// `KRABKA_PART_LEASE_VALUE`, the handle is freed with `krabka_lease_free`).
#[no_mangle]
pub unsafe extern "C" fn krabka_decode_lease(
    data: *const u8,
    data_len: usize,
    out: *mut *mut krabka_lease,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        *out = std::ptr::null_mut();
        let data = unsafe { bytes(data, data_len, "data") }?;
        let lease = core::decode_lease(data)?;
        *out = into_handle(krabka_lease { lease });
        Ok(())
    })
}

/// The fields of a lease (the strings borrowed from `lease`).
pub fn lease_fields(lease: &Lease) -> krabka_lease_fields {
    krabka_lease_fields {
        member: lease.member.as_ptr().cast(),
        member_len: lease.member.len(),
        token: lease.token.into(),
        granted_at: lease.granted_at,
        deadline: lease.deadline,
    }
}

/// A new lease handle of `lease`, the caller's to free.
pub fn lease_handle(lease: Lease) -> *mut krabka_lease {
    into_handle(krabka_lease { lease })
}

/// Reads the fields of a decoded lease value (see `krabka_key_get_fields`).
#[no_mangle]
pub unsafe extern "C" fn krabka_lease_get_fields(
    lease: *const krabka_lease,
    out: *mut krabka_lease_fields,
) -> krabka_result {
    guard(std::ptr::null_mut(), || {
        let l = &unsafe { input(lease, "lease") }?.lease;
        let out = unsafe { output(out, "out") }?;
        *out = lease_fields(l);
        Ok(())
    })
}

/// Frees a lease value; NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn krabka_lease_free(lease: *mut krabka_lease) {
    guard_value((), || unsafe { free_handle(lease) })
}

/// The partition of `role` (`role_len` bytes of UTF-8, borrowed for the
/// call) among `partitions`: Kafka's murmur2 of the role's bytes, masked with
/// `toPositive`, modulo the count. An empty role or a count below 1 is
/// `KRABKA_RESULT_INVALID_ARGUMENT`. Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_role_partition(
    role: *const c_char,
    role_len: usize,
    partitions: i32,
    out: *mut i32,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        let role = unsafe { text(role, role_len, "role") }?;
        *out = core::role_partition(role, partitions)?;
        Ok(())
    })
}

/// Kafka's murmur2 hash (`Utils.murmur2`) of `data_len` bytes at `data`, as a
/// signed 32-bit number. Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_murmur2(
    data: *const u8,
    data_len: usize,
    out: *mut i32,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let out = unsafe { output(out, "out") }?;
        let data = unsafe { bytes(data, data_len, "data") }?;
        *out = core::murmur2(data);
        Ok(())
    })
}

/// Compares two tokens as the core orders them (producer id first, then
/// epoch, both signed): `*out_order` is -1, 0 or 1 as `a` is below, equal to
/// or above `b`. Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_fencing_token_compare(
    a: *const krabka_fencing_token,
    b: *const krabka_fencing_token,
    out_order: *mut i32,
) -> krabka_result {
    guard(std::ptr::null_mut(), || {
        let a: FencingToken = (*unsafe { input(a, "a") }?).into();
        let b: FencingToken = (*unsafe { input(b, "b") }?).into();
        let out = unsafe { output(out_order, "out_order") }?;
        *out = a.cmp(&b) as i32;
        Ok(())
    })
}

/// Sets `*out` to NoEpoch, the token of a role no member has taken (producer
/// id -1, epoch -1). It ranks below every minted token and is never
/// authoritative.
#[no_mangle]
pub unsafe extern "C" fn krabka_fencing_token_no_epoch(
    out: *mut krabka_fencing_token,
) -> krabka_result {
    guard(std::ptr::null_mut(), || {
        *unsafe { output(out, "out") }? = core::NO_EPOCH.into();
        Ok(())
    })
}

/// Sets `*out` to whether `token` is NoEpoch.
#[no_mangle]
pub unsafe extern "C" fn krabka_fencing_token_is_no_epoch(
    token: *const krabka_fencing_token,
    out: *mut bool,
) -> krabka_result {
    guard(std::ptr::null_mut(), || {
        let t: FencingToken = (*unsafe { input(token, "token") }?).into();
        *unsafe { output(out, "out") }? = t.is_no_epoch();
        Ok(())
    })
}

/// Parses `text`, a token's wire form, into `*out`: `PRODUCER_ID/EPOCH` in
/// decimal (`"4001/7"`, what `krabka_token_format`, the CLI and
/// `KRABKA_TOKEN` write) or `"NoEpoch"`. The core's parser decides, as in
/// every binding: no spaces, no `+`, both numbers within their types.
/// Malformed text is KRABKA_RESULT_INVALID_ARGUMENT, `*out` untouched, the
/// message quoting the text and naming the expected form; text that is not
/// UTF-8 likewise. Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_token_parse(
    text: *const c_char,
    out: *mut krabka_fencing_token,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let text = unsafe { crate::ffi::cstr(text, "text") }?;
        let out = unsafe { output(out, "out") }?;
        *out = krabka_coordination_bindings::args::token(text)?.into();
        Ok(())
    })
}

/// The longest wire form of a token, its final NUL included
/// (`"-9223372036854775808/-32768"`): a buffer of this size always holds
/// what `krabka_token_format` writes.
pub const KRABKA_TOKEN_TEXT_MAX: usize = 28;

/// Writes the wire form of `*token` into `buf` (`capacity` bytes),
/// NUL-terminated: `PRODUCER_ID/EPOCH` in decimal, or `NoEpoch` for NoEpoch;
/// `krabka_token_parse` reads it back. `*out_len` (when not NULL) gets the
/// text's length without the NUL, even when the buffer is too small
/// (KRABKA_RESULT_BUFFER_TOO_SMALL, nothing written). A buffer of
/// KRABKA_TOKEN_TEXT_MAX bytes always suffices. Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_token_format(
    token: *const krabka_fencing_token,
    buf: *mut c_char,
    capacity: usize,
    out_len: *mut usize,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let t: FencingToken = (*unsafe { input(token, "token") }?).into();
        let mut text = t.to_string().into_bytes();
        let len = text.len();
        if !out_len.is_null() {
            // SAFETY: a non-NULL `out_len` is writable (the contract).
            unsafe { *out_len = len };
        }
        // The NUL is copied with the text: a buffer without room for it is
        // too small.
        text.push(0);
        let mut needed = 0;
        unsafe { copy_out(&text, buf.cast::<u8>(), capacity, &mut needed, "buf") }
    })
}

/// Fills `*err` to receive messages in `message` (`capacity` bytes, its NUL
/// included; NULL with 0 for none): `length` 0, `part` KRABKA_PART_NONE and
/// `message` holding `""` when it has room. Fill every `krabka_error` this
/// way (or set its fields by name), never with a positional `{...}` list: a
/// field added later (at the end) gets its default here, so code written
/// this way keeps its meaning. Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_error_init(
    err: *mut krabka_error,
    message: *mut c_char,
    capacity: usize,
) -> krabka_result {
    guard(std::ptr::null_mut(), || {
        let e = unsafe { output(err, "err") }?;
        *e = krabka_error {
            message,
            capacity,
            length: 0,
            part: krabka_part::None,
        };
        // SAFETY: `message` is NULL or holds `capacity` bytes (the contract).
        unsafe { crate::ffi::copy_text("", message, capacity) };
        Ok(())
    })
}

/// The stable name of a result code (`"FENCED"`, `"NULL_ARGUMENT"`, ...), a
/// static NUL-terminated string (never freed); `"UNKNOWN"` for a value no
/// code has.
#[no_mangle]
pub extern "C" fn krabka_result_name(result: u32) -> *const c_char {
    guard_value(c"UNKNOWN".as_ptr(), || {
        crate::ffi::krabka_result::ALL
            .iter()
            .find(|r| **r as u32 == result)
            .map_or(c"UNKNOWN", |r| r.name())
            .as_ptr()
    })
}

/// The name of a record part as the golden vectors spell it (`"key"`,
/// `"registration value"`, `"lease value"`; `""` for `KRABKA_PART_NONE`),
/// a static NUL-terminated string; `"UNKNOWN"` for a value no part has.
#[no_mangle]
pub extern "C" fn krabka_part_name(part: u32) -> *const c_char {
    guard_value(c"UNKNOWN".as_ptr(), || {
        [
            krabka_part::None,
            krabka_part::Key,
            krabka_part::RegistrationValue,
            krabka_part::LeaseValue,
        ]
        .iter()
        .find(|p| **p as u32 == part)
        .map_or(c"UNKNOWN", |p| p.name())
        .as_ptr()
    })
}

/// The library's version (`"0.1.0"`), a static NUL-terminated string.
#[no_mangle]
pub extern "C" fn krabka_version() -> *const c_char {
    const VERSION: &CStr =
        match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
            Ok(v) => v,
            Err(_) => c"unknown",
        };
    VERSION.as_ptr()
}
