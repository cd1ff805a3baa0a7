//! The frozen record layouts of `__coordination_state`.
//!
//! ```text
//! key:                 version i16 = 0, kind i16 (0 registration, 1 lease),
//!                      role string, member string (empty for the lease kind)
//! registration value:  version i16 = 0, member string, registered_at i64
//! lease value:         version i16 = 0, member string, producer_id i64,
//!                      producer_epoch i16, granted_at i64, deadline i64
//! ```
//!
//! Every integer is big-endian and signed (two's complement). A string is an
//! `i16` byte length and then that many bytes of UTF-8 (Kafka's own string
//! layout, without a null form), so a string holds at most [`MAX_STRING_LEN`]
//! bytes. The layouts are byte-exact with the other ports; `golden/records.json`
//! is the contract and `golden/README.md` describes it.
//!
//! # Tombstones
//!
//! A tombstone is a record whose value is null. Writers write null (Kafka's
//! compaction only ever deletes a null value); readers treat a null value and
//! an empty value alike as a tombstone ([`is_tombstone`]). A tombstone's value
//! is never handed to a decoder: an empty byte string is not a valid
//! registration or lease value, and the decoders refuse it.
//!
//! # Encoding
//!
//! Encoders are append-style (`*_into` appends to a buffer) and refuse with an
//! [`EncodeError`] what the layout cannot hold instead of truncating it: a
//! string over [`MAX_STRING_LEN`] bytes, an empty role, an empty member, and a
//! lease key whose member is not empty. A string of exactly [`MAX_STRING_LEN`]
//! bytes is fine. The fields are checked in layout order and, within a field,
//! emptiness before length; every check happens before the first byte is
//! written, so on error the buffer is left as it was.
//!
//! # Decoding and the order of checks
//!
//! A decoder returns a [`FormatError`](crate::FormatError) whose `part` is the record part it
//! decodes (`key`, `registration value`, `lease value`) and whose `message`
//! names the field, the byte offset and what failed. It reads the fields in
//! layout order and checks each field completely when it reaches it; the
//! first failing check is the one reported:
//!
//! 1. the field's bytes are present ("too short"); for a string: the two length
//!    bytes are present, then the length is not negative, then that many bytes
//!    are present;
//! 2. a string is valid UTF-8;
//! 3. the field's own rule: the version is 0; the kind is 0 or 1; the role is
//!    not empty; a registration key's member is not empty; a lease key's member
//!    is empty; a value's member is not empty;
//!
//! and after the last field:
//!
//! 4. no bytes remain ("trailing bytes").
//!
//! The other ports reproduce the `part` of every failure (the golden vectors
//! assert it); the wording of `message` is this port's own.
//!
//! Decoding a value allocates only its owned member string; decoding a key
//! allocates its role and member. Messages are formatted on failure only.

use crate::error::{EncodeError, Part};
use crate::token::FencingToken;

mod decode;

pub(crate) use decode::decode_key_ref;
#[cfg(test)]
use decode::{
    checked_key, checked_lease, checked_registration, fast_key, fast_lease, fast_registration,
};
pub use decode::{
    decode_key, decode_lease, decode_lease_ref, decode_registration, decode_registration_ref,
};

/// The longest string the layout holds, in UTF-8 bytes (`i16::MAX`).
pub const MAX_STRING_LEN: usize = i16::MAX as usize;

/// The only layout version this crate reads and writes.
pub const VERSION: i16 = 0;

/// Refuses a role name no member can take: empty, over
/// [`MAX_STRING_LEN`] bytes of UTF-8 (the layout's and Kafka's string
/// limit), or containing a NUL byte (the role is the producer's
/// `transactional.id`, which librdkafka takes as a C string).
///
/// The error is [`crate::Error::InvalidArgument`] and quotes the role only
/// in part ([`crate::error::quote`]). Members, the client and the Kafka
/// transport check every role with it before anything is written.
pub fn check_role(role: &str) -> crate::Result<()> {
    check_name("role", role)
}

/// Refuses a member id the layout cannot hold, like [`check_role`] does a
/// role: empty, over [`MAX_STRING_LEN`] bytes, or containing a NUL byte.
pub fn check_member_id(member: &str) -> crate::Result<()> {
    check_name("member id", member)
}

fn check_name(what: &str, value: &str) -> crate::Result<()> {
    let why = if value.is_empty() {
        "must not be empty".to_owned()
    } else if value.len() > MAX_STRING_LEN {
        format!(
            "is {} bytes of UTF-8, over the limit of {MAX_STRING_LEN}",
            value.len()
        )
    } else if let Some(at) = value.find('\0') {
        format!("contains a NUL byte (at byte {at})")
    } else {
        return Ok(());
    };
    Err(crate::Error::InvalidArgument(format!(
        "{what} {} {why}",
        crate::error::quote(value)
    )))
}

/// The kind of a record, from its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyKind {
    /// A member's registration (kind 0).
    Registration,
    /// A role's lease (kind 1).
    Lease,
}

impl KeyKind {
    /// The wire value of the kind.
    pub fn code(self) -> i16 {
        match self {
            KeyKind::Registration => 0,
            KeyKind::Lease => 1,
        }
    }

    /// The kind of a wire value, `None` for anything but 0 and 1.
    pub fn from_code(code: i16) -> Option<KeyKind> {
        match code {
            0 => Some(KeyKind::Registration),
            1 => Some(KeyKind::Lease),
            _ => None,
        }
    }

    /// The kind's name: `"registration"` or `"lease"`.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyKind::Registration => "registration",
            KeyKind::Lease => "lease",
        }
    }
}

/// The key of a state record.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// Registration or lease.
    pub kind: KeyKind,
    /// The role name.
    pub role: String,
    /// The member id for a registration key, empty for a lease key.
    pub member: String,
}

impl Key {
    /// The registration key of `member` in `role`.
    pub fn registration(role: impl Into<String>, member: impl Into<String>) -> Key {
        Key {
            kind: KeyKind::Registration,
            role: role.into(),
            member: member.into(),
        }
    }

    /// The lease key of `role`.
    pub fn lease(role: impl Into<String>) -> Key {
        Key {
            kind: KeyKind::Lease,
            role: role.into(),
            member: String::new(),
        }
    }
}

/// The value of a registration record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Registration {
    /// The registering member (equal to the key's member).
    pub member: String,
    /// When the member registered, in epoch milliseconds (informational; rank
    /// comes from the record's offset, not from this time).
    pub registered_at: i64,
}

/// The value of a lease record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Lease {
    /// The member that holds the lease.
    pub member: String,
    /// The holder's fencing token.
    pub token: FencingToken,
    /// When the lease was written, in epoch milliseconds of the holder's clock.
    pub granted_at: i64,
    /// When a standby may stop waiting, in epoch milliseconds of the holder's clock.
    pub deadline: i64,
}

/// True when a record value is a tombstone: null, or (as readers must also
/// accept) empty.
pub fn is_tombstone(value: Option<&[u8]>) -> bool {
    value.is_none_or(<[u8]>::is_empty)
}

// ---------------------------------------------------------------- encoding

/// The encoded size of a key, a registration value and a lease value, less
/// their strings' bytes.
const KEY_FIXED: usize = 2 + 2 + 2 + 2;
const REGISTRATION_FIXED: usize = 2 + 2 + 8;
const LEASE_FIXED: usize = 2 + 2 + 8 + 2 + 8 + 8;

#[cold]
#[inline(never)]
fn encode_error(part: Part, field: &'static str, message: String) -> EncodeError {
    EncodeError {
        part,
        field,
        message,
    }
}

/// Checks a string field before anything is written: not empty (when
/// `non_empty`), and short enough for its `i16` length.
#[inline]
fn check_string(
    part: Part,
    field: &'static str,
    s: &str,
    non_empty: bool,
) -> Result<(), EncodeError> {
    if non_empty && s.is_empty() {
        return Err(encode_error(part, field, "must not be empty".to_owned()));
    }
    if s.len() > MAX_STRING_LEN {
        return Err(encode_error(
            part,
            field,
            format!(
                "is {} bytes of UTF-8, over the layout's limit of {MAX_STRING_LEN}",
                s.len()
            ),
        ));
    }
    Ok(())
}

/// Appends a string already checked by [`check_string`].
#[inline]
fn put_string(buf: &mut Vec<u8>, s: &str) {
    debug_assert!(s.len() <= MAX_STRING_LEN);
    buf.extend_from_slice(&(s.len() as u16).to_be_bytes());
    buf.extend_from_slice(s.as_bytes());
}

/// Appends the encoded key to `buf`. On error `buf` is left as it was.
pub fn encode_key_into(key: &Key, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
    let part = Part::Key;
    check_string(part, "role", &key.role, true)?;
    match key.kind {
        KeyKind::Registration => check_string(part, "member", &key.member, true)?,
        KeyKind::Lease if !key.member.is_empty() => {
            return Err(encode_error(
                part,
                "member",
                format!(
                    "must be empty in a lease key, is {} bytes",
                    key.member.len()
                ),
            ));
        }
        KeyKind::Lease => {}
    }
    buf.reserve(KEY_FIXED + key.role.len() + key.member.len());
    buf.extend_from_slice(&VERSION.to_be_bytes());
    buf.extend_from_slice(&key.kind.code().to_be_bytes());
    put_string(buf, &key.role);
    put_string(buf, &key.member);
    Ok(())
}

/// Encodes a key.
pub fn encode_key(key: &Key) -> Result<Vec<u8>, EncodeError> {
    let mut buf = Vec::new();
    encode_key_into(key, &mut buf)?;
    Ok(buf)
}

/// Appends the encoded registration value to `buf`. On error `buf` is left as it was.
pub fn encode_registration_into(reg: &Registration, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
    check_string(Part::RegistrationValue, "member", &reg.member, true)?;
    buf.reserve(REGISTRATION_FIXED + reg.member.len());
    buf.extend_from_slice(&VERSION.to_be_bytes());
    put_string(buf, &reg.member);
    buf.extend_from_slice(&reg.registered_at.to_be_bytes());
    Ok(())
}

/// Encodes a registration value.
pub fn encode_registration(reg: &Registration) -> Result<Vec<u8>, EncodeError> {
    let mut buf = Vec::new();
    encode_registration_into(reg, &mut buf)?;
    Ok(buf)
}

/// Appends the encoded lease value to `buf`. On error `buf` is left as it was.
pub fn encode_lease_into(lease: &Lease, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
    check_string(Part::LeaseValue, "member", &lease.member, true)?;
    buf.reserve(LEASE_FIXED + lease.member.len());
    buf.extend_from_slice(&VERSION.to_be_bytes());
    put_string(buf, &lease.member);
    buf.extend_from_slice(&lease.token.producer_id.to_be_bytes());
    buf.extend_from_slice(&lease.token.producer_epoch.to_be_bytes());
    buf.extend_from_slice(&lease.granted_at.to_be_bytes());
    buf.extend_from_slice(&lease.deadline.to_be_bytes());
    Ok(())
}

/// Encodes a lease value.
pub fn encode_lease(lease: &Lease) -> Result<Vec<u8>, EncodeError> {
    let mut buf = Vec::new();
    encode_lease_into(lease, &mut buf)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::FormatError;

    fn string(s: &[u8]) -> Vec<u8> {
        let mut v = (s.len() as i16).to_be_bytes().to_vec();
        v.extend_from_slice(s);
        v
    }

    fn key_bytes(version: i16, kind: i16, role: &[u8], member: &[u8]) -> Vec<u8> {
        let mut v = version.to_be_bytes().to_vec();
        v.extend(kind.to_be_bytes());
        v.extend(string(role));
        v.extend(string(member));
        v
    }

    fn lease() -> Lease {
        Lease {
            member: "m-1".into(),
            token: FencingToken::new(0x0102_0304_0506_0708, 0x0a0b),
            granted_at: -2,
            deadline: i64::MAX,
        }
    }

    /// Asserts the part and that the message mentions every fragment.
    fn assert_fails(r: Result<impl std::fmt::Debug, FormatError>, part: Part, fragments: &[&str]) {
        let e = r.expect_err("decoding should fail");
        assert_eq!(e.part, part, "{e}");
        for f in fragments {
            assert!(e.message.contains(f), "message {:?} lacks {f:?}", e.message);
        }
    }

    #[test]
    fn layout_is_big_endian_with_i16_string_lengths() {
        let k = encode_key(&Key::registration("ab", "é")).unwrap();
        assert_eq!(k, [0, 0, 0, 0, 0, 2, b'a', b'b', 0, 2, 0xc3, 0xa9]);
        let k = encode_key(&Key::lease("r")).unwrap();
        assert_eq!(k, [0, 0, 0, 1, 0, 1, b'r', 0, 0]);
        let v = encode_registration(&Registration {
            member: "m".into(),
            registered_at: -1,
        })
        .unwrap();
        assert_eq!(
            v,
            [0, 0, 0, 1, b'm', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
        );
        let v = encode_lease(&lease()).unwrap();
        #[rustfmt::skip]
        let want = [
            0, 0, 0, 3, b'm', b'-', b'1',
            1, 2, 3, 4, 5, 6, 7, 8,
            0x0a, 0x0b,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
            0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        ];
        assert_eq!(v, want);
        assert_eq!(decode_lease(&v).unwrap(), lease());
    }

    #[test]
    fn key_failures_name_the_key_part() {
        let p = Part::Key;
        assert_fails(decode_key(&[]), p, &["too short for version", "offset 0"]);
        assert_fails(decode_key(&[0]), p, &["too short for version", "1 left"]);
        assert_fails(
            decode_key(&key_bytes(1, 0, b"r", b"m")),
            p,
            &["unsupported version 1"],
        );
        assert_fails(
            decode_key(&key_bytes(-1, 0, b"r", b"m")),
            p,
            &["unsupported version -1"],
        );
        assert_fails(
            decode_key(&[0, 0, 0]),
            p,
            &["too short for kind", "offset 2"],
        );
        assert_fails(
            decode_key(&key_bytes(0, 2, b"r", b"m")),
            p,
            &["unknown kind 2"],
        );
        assert_fails(
            decode_key(&key_bytes(0, -1, b"r", b"")),
            p,
            &["unknown kind -1"],
        );
        assert_fails(
            decode_key(&[0, 0, 0, 0, 0]),
            p,
            &["too short for role length", "offset 4"],
        );
        assert_fails(
            decode_key(&[0, 0, 0, 0, 0xff, 0xff]),
            p,
            &["negative role length -1", "offset 4"],
        );
        assert_fails(
            decode_key(&[0, 0, 0, 1, 0x80, 0x00]),
            p,
            &["negative role length -32768"],
        );
        assert_fails(
            decode_key(&[0, 0, 0, 0, 0, 3, b'a']),
            p,
            &["too short for role", "needs 3", "1 left"],
        );
        assert_fails(
            decode_key(&key_bytes(0, 0, b"\xff", b"m")),
            p,
            &["role at offset 6 is not valid UTF-8"],
        );
        assert_fails(
            decode_key(&key_bytes(0, 0, b"", b"m")),
            p,
            &["empty role", "offset 4"],
        );
        assert_fails(
            decode_key(&[0, 0, 0, 0, 0, 1, b'r']),
            p,
            &["too short for member length", "offset 7"],
        );
        assert_fails(
            decode_key(&[0, 0, 0, 0, 0, 1, b'r', 0xff, 0xfe]),
            p,
            &["negative member length -2"],
        );
        assert_fails(
            decode_key(&[0, 0, 0, 0, 0, 1, b'r', 0, 2, b'm']),
            p,
            &["too short for member"],
        );
        assert_fails(
            decode_key(&key_bytes(0, 0, b"r", b"a\xc3")),
            p,
            &["member at offset 9 is not valid UTF-8"],
        );
        assert_fails(
            decode_key(&key_bytes(0, 0, b"r", b"")),
            p,
            &["registration key with an empty member"],
        );
        assert_fails(
            decode_key(&key_bytes(0, 1, b"r", b"m")),
            p,
            &["lease key with a non-empty member (1 bytes)"],
        );
        let mut trailing = key_bytes(0, 1, b"r", b"");
        trailing.push(0);
        assert_fails(decode_key(&trailing), p, &["1 trailing bytes at offset 9"]);
    }

    #[test]
    fn value_failures_name_their_parts() {
        let r = Part::RegistrationValue;
        let good = encode_registration(&Registration {
            member: "m".into(),
            registered_at: 5,
        })
        .unwrap();
        assert_fails(decode_registration(&[]), r, &["too short for version"]);
        assert_fails(
            decode_registration(&[0, 7, 0, 1, b'm']),
            r,
            &["unsupported version 7"],
        );
        assert_fails(
            decode_registration(&good[..good.len() - 1]),
            r,
            &["too short for registered_at", "7 left"],
        );
        assert_fails(
            decode_registration(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            r,
            &["empty member"],
        );
        assert_fails(
            decode_registration(&[0, 0, 0xff, 0xff]),
            r,
            &["negative member length -1"],
        );
        let mut trailing = good.clone();
        trailing.extend([1, 2]);
        assert_fails(
            decode_registration(&trailing),
            r,
            &["2 trailing bytes", "(registered_at)"],
        );

        let l = Part::LeaseValue;
        let good = encode_lease(&lease()).unwrap();
        for (cut, field) in [
            (1, "version"),
            (3, "member length"),
            (6, "member"),
            (14, "producer_id"),
            (16, "producer_epoch"),
        ] {
            assert_fails(
                decode_lease(&good[..cut]),
                l,
                &[&format!("too short for {field}:")],
            );
        }
        assert_fails(
            decode_lease(&good[..good.len() - 8]),
            l,
            &["too short for deadline"],
        );
        assert_fails(
            decode_lease(&good[..good.len() - 9]),
            l,
            &["too short for granted_at"],
        );
        let mut bad = good.clone();
        bad[4] = 0xff;
        assert_fails(
            decode_lease(&bad),
            l,
            &["member at offset 4 is not valid UTF-8"],
        );
        let mut trailing = good.clone();
        trailing.push(0);
        assert_fails(
            decode_lease(&trailing),
            l,
            &["1 trailing bytes", "(deadline)"],
        );
        assert_fails(
            decode_lease(&[0, 0, 0, 0]),
            l,
            &["lease value with an empty member"],
        );
    }

    #[test]
    fn the_first_failure_in_layout_order_is_reported() {
        // Bad version and bad kind: the version is reported.
        assert_fails(
            decode_key(&key_bytes(3, 9, b"r", b"m")),
            Part::Key,
            &["unsupported version 3"],
        );
        // Bad kind and an empty role: the kind.
        assert_fails(
            decode_key(&key_bytes(0, 9, b"", b"")),
            Part::Key,
            &["unknown kind 9"],
        );
        // Invalid UTF-8 in an empty-role position cannot happen; an empty role and
        // a non-empty lease member: the role.
        assert_fails(
            decode_key(&key_bytes(0, 1, b"", b"m")),
            Part::Key,
            &["empty role"],
        );
        // A non-empty lease member and trailing bytes: the member.
        let mut b = key_bytes(0, 1, b"r", b"m");
        b.push(7);
        assert_fails(decode_key(&b), Part::Key, &["non-empty member"]);
        // Invalid UTF-8 in the member of a lease key: UTF-8 before the kind rule.
        assert_fails(
            decode_key(&key_bytes(0, 1, b"r", b"\x80")),
            Part::Key,
            &["not valid UTF-8"],
        );
        // An empty member and a truncated tail: the member.
        assert_fails(
            decode_lease(&[0, 0, 0, 0, 1]),
            Part::LeaseValue,
            &["empty member"],
        );
    }

    #[test]
    fn tombstones_are_null_or_empty() {
        assert!(is_tombstone(None));
        assert!(is_tombstone(Some(&[])));
        assert!(!is_tombstone(Some(&[0])));
        // An empty value is never a valid record value either.
        assert_fails(
            decode_registration(&[]),
            Part::RegistrationValue,
            &["too short"],
        );
        assert_fails(decode_lease(&[]), Part::LeaseValue, &["too short"]);
    }

    #[test]
    fn encoding_refuses_what_the_layout_cannot_hold() {
        let long = "x".repeat(MAX_STRING_LEN + 1);
        let max = "y".repeat(MAX_STRING_LEN);
        let mut buf = vec![9u8];
        let e = encode_key_into(&Key::registration(long.as_str(), "m"), &mut buf).unwrap_err();
        assert_eq!((e.part, e.field), (Part::Key, "role"));
        assert!(e.message.contains("32768 bytes"), "{e}");
        assert_eq!(buf, [9], "a failed encode leaves the buffer as it was");
        let e = encode_key_into(&Key::registration("r", long.as_str()), &mut buf).unwrap_err();
        assert_eq!((e.part, e.field), (Part::Key, "member"));
        assert_eq!(buf, [9]);
        let e = encode_key(&Key::registration("", "m")).unwrap_err();
        assert_eq!(
            (e.part, e.field, e.message.as_str()),
            (Part::Key, "role", "must not be empty")
        );
        let e = encode_key(&Key::registration("r", "")).unwrap_err();
        assert_eq!((e.part, e.field), (Part::Key, "member"));
        let e = encode_key(&Key::lease("")).unwrap_err();
        assert_eq!((e.part, e.field), (Part::Key, "role"));
        let e = encode_key(&Key {
            kind: KeyKind::Lease,
            role: "r".into(),
            member: "m".into(),
        })
        .unwrap_err();
        assert_eq!((e.part, e.field), (Part::Key, "member"));
        assert!(e.message.contains("must be empty in a lease key"), "{e}");
        let e = encode_registration_into(
            &Registration {
                member: long.clone(),
                registered_at: 0,
            },
            &mut buf,
        )
        .unwrap_err();
        assert_eq!((e.part, e.field), (Part::RegistrationValue, "member"));
        let e = encode_registration(&Registration {
            member: String::new(),
            registered_at: 0,
        })
        .unwrap_err();
        assert_eq!((e.part, e.field), (Part::RegistrationValue, "member"));
        let mut l = lease();
        l.member = long;
        let e = encode_lease_into(&l, &mut buf).unwrap_err();
        assert_eq!((e.part, e.field), (Part::LeaseValue, "member"));
        l.member = String::new();
        let e = encode_lease(&l).unwrap_err();
        assert_eq!((e.part, e.field), (Part::LeaseValue, "member"));
        assert_eq!(buf, [9]);

        // Exactly the limit is fine, and round-trips.
        let key = Key::registration(max.as_str(), max.as_str());
        let bytes = encode_key(&key).unwrap();
        assert_eq!(bytes.len(), 8 + 2 * MAX_STRING_LEN);
        assert_eq!(&bytes[4..6], &[0x7f, 0xff]);
        assert_eq!(decode_key(&bytes).unwrap(), key);
        let mut l = lease();
        l.member = max;
        assert_eq!(decode_lease(&encode_lease(&l).unwrap()).unwrap(), l);
    }

    #[test]
    fn into_appends_after_existing_bytes() {
        let mut buf = vec![1, 2, 3];
        encode_lease_into(&lease(), &mut buf).unwrap();
        assert_eq!(&buf[..3], &[1, 2, 3]);
        assert_eq!(decode_lease(&buf[3..]).unwrap(), lease());
    }

    /// Every single-byte change (and every cut) of valid encodings: the fast
    /// path accepts exactly what the checked path accepts, with the same fields.
    #[test]
    fn fast_and_checked_paths_accept_the_same_inputs() {
        let keys = [
            encode_key(&Key::registration("r", "m")).unwrap(),
            encode_key(&Key::registration("rôle", "🦀")).unwrap(),
            encode_key(&Key::lease("role")).unwrap(),
            key_bytes(0, 1, b"r", b""),
        ];
        let regs = [encode_registration(&Registration {
            member: "mé".into(),
            registered_at: -7,
        })
        .unwrap()];
        let leases = [encode_lease(&lease()).unwrap()];
        let mut inputs = Vec::new();
        for good in keys.iter().chain(&regs).chain(&leases) {
            for i in 0..good.len() {
                inputs.push(good[..i].to_vec());
                for v in 0..=255u8 {
                    let mut b = good.clone();
                    b[i] = v;
                    inputs.push(b);
                }
            }
            let mut longer = good.clone();
            longer.push(0);
            inputs.push(longer);
        }
        let (mut accepted, mut refused) = (0, 0);
        for b in &inputs {
            let (f, c) = (fast_key(b), checked_key(b));
            assert_eq!(
                f.is_some(),
                c.is_ok(),
                "key {b:?}: fast {f:?}, checked {c:?}"
            );
            if let Some(f) = f {
                assert_eq!(Ok(f), c);
            }
            let (f, c) = (fast_registration(b), checked_registration(b));
            assert_eq!(
                f.is_some(),
                c.is_ok(),
                "registration {b:?}: fast {f:?}, checked {c:?}"
            );
            if let Some(f) = f {
                assert_eq!(Ok(f), c);
            }
            let (f, c) = (fast_lease(b), checked_lease(b));
            assert_eq!(
                f.is_some(),
                c.is_ok(),
                "lease {b:?}: fast {f:?}, checked {c:?}"
            );
            if let Some(f) = f {
                assert_eq!(Ok(f), c);
                accepted += 1;
            } else {
                refused += 1;
            }
        }
        // Both outcomes occur, so the comparison covers both.
        assert!(
            accepted > 100 && refused > 100,
            "{accepted} accepted, {refused} refused"
        );
    }

    #[test]
    fn key_ref_borrows_the_same_fields() {
        let bytes = encode_key(&Key::registration("role-ü", "member-🦀")).unwrap();
        let k = decode_key_ref(&bytes).unwrap();
        assert_eq!(
            (k.kind, k.role, k.member),
            (KeyKind::Registration, "role-ü", "member-🦀")
        );
        assert_eq!(k.to_key(), decode_key(&bytes).unwrap());
        assert_eq!(KeyKind::from_code(1), Some(KeyKind::Lease));
        assert_eq!(KeyKind::from_code(2), None);
    }
}
