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
//! Every integer is big-endian and signed. A string is an `i16` byte length and
//! then UTF-8 bytes (Kafka's own string layout), so a string holds at most
//! [`MAX_STRING_LEN`] bytes. The layouts are byte-exact with the other ports;
//! `golden/records.json` is the contract.
//!
//! A tombstone is a record whose value is null. Readers treat a null value and
//! an empty value alike as a tombstone (Kafka compaction only deletes null).
//!
//! Encoders are append-style (`*_into` appends to a buffer) and refuse what the
//! layout cannot hold instead of truncating. Decoders report the first failure
//! with the [`Part`] it concerns.

use crate::error::{EncodeError, FormatError, Part};
use crate::token::FencingToken;

/// The longest string the layout holds, in UTF-8 bytes (`i16::MAX`).
pub const MAX_STRING_LEN: usize = i16::MAX as usize;

/// The only layout version this crate reads and writes.
pub const VERSION: i16 = 0;

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
        Key { kind: KeyKind::Registration, role: role.into(), member: member.into() }
    }

    /// The lease key of `role`.
    pub fn lease(role: impl Into<String>) -> Key {
        Key { kind: KeyKind::Lease, role: role.into(), member: String::new() }
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

// ---------------------------------------------------------------- encoding

fn put_string(buf: &mut Vec<u8>, part: Part, field: &'static str, s: &str) -> Result<(), EncodeError> {
    if s.len() > MAX_STRING_LEN {
        return Err(EncodeError {
            part,
            field,
            message: format!("is {} bytes of UTF-8, over the layout's limit of {MAX_STRING_LEN}", s.len()),
        });
    }
    buf.extend_from_slice(&(s.len() as i16).to_be_bytes());
    buf.extend_from_slice(s.as_bytes());
    Ok(())
}

fn require_non_empty(part: Part, field: &'static str, s: &str) -> Result<(), EncodeError> {
    if s.is_empty() {
        return Err(EncodeError { part, field, message: "must not be empty".into() });
    }
    Ok(())
}

/// Appends the encoded key to `buf`. On error `buf` is left as it was.
pub fn encode_key_into(key: &Key, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
    let part = Part::Key;
    require_non_empty(part, "role", &key.role)?;
    match key.kind {
        KeyKind::Registration => require_non_empty(part, "member", &key.member)?,
        KeyKind::Lease if !key.member.is_empty() => {
            return Err(EncodeError { part, field: "member", message: "must be empty in a lease key".into() })
        }
        KeyKind::Lease => {}
    }
    let start = buf.len();
    buf.reserve(8 + key.role.len() + key.member.len());
    buf.extend_from_slice(&VERSION.to_be_bytes());
    buf.extend_from_slice(&key.kind.code().to_be_bytes());
    let r = put_string(buf, part, "role", &key.role).and_then(|_| put_string(buf, part, "member", &key.member));
    if r.is_err() {
        buf.truncate(start);
    }
    r
}

/// Encodes a key.
pub fn encode_key(key: &Key) -> Result<Vec<u8>, EncodeError> {
    let mut buf = Vec::new();
    encode_key_into(key, &mut buf)?;
    Ok(buf)
}

/// Appends the encoded registration value to `buf`. On error `buf` is left as it was.
pub fn encode_registration_into(reg: &Registration, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
    let part = Part::RegistrationValue;
    require_non_empty(part, "member", &reg.member)?;
    let start = buf.len();
    buf.reserve(12 + reg.member.len());
    buf.extend_from_slice(&VERSION.to_be_bytes());
    if let Err(e) = put_string(buf, part, "member", &reg.member) {
        buf.truncate(start);
        return Err(e);
    }
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
    let part = Part::LeaseValue;
    require_non_empty(part, "member", &lease.member)?;
    let start = buf.len();
    buf.reserve(30 + lease.member.len());
    buf.extend_from_slice(&VERSION.to_be_bytes());
    if let Err(e) = put_string(buf, part, "member", &lease.member) {
        buf.truncate(start);
        return Err(e);
    }
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

// ---------------------------------------------------------------- decoding

/// A cursor over one record part that reports the first failure with its part,
/// the field and the byte offset.
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    part: Part,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(part: Part, data: &'a [u8]) -> Self {
        Reader { data, pos: 0, part }
    }

    fn err(&self, msg: String) -> FormatError {
        FormatError::new(self.part, msg)
    }

    fn take(&mut self, field: &str, n: usize) -> Result<&'a [u8], FormatError> {
        let rest = self.data.len() - self.pos;
        if rest < n {
            return Err(self.err(format!(
                "too short for {field}: needs {n} bytes at offset {}, {rest} left",
                self.pos
            )));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(crate) fn i16(&mut self, field: &str) -> Result<i16, FormatError> {
        let b = self.take(field, 2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn i64(&mut self, field: &str) -> Result<i64, FormatError> {
        let b = self.take(field, 8)?;
        Ok(i64::from_be_bytes(b.try_into().expect("8 bytes")))
    }

    pub(crate) fn version(&mut self) -> Result<(), FormatError> {
        let at = self.pos;
        let v = self.i16("version")?;
        if v != VERSION {
            return Err(self.err(format!("unsupported version {v} at offset {at}, only {VERSION} is known")));
        }
        Ok(())
    }

    /// A string without copying it.
    pub(crate) fn str(&mut self, field: &str) -> Result<&'a str, FormatError> {
        let at = self.pos;
        if self.data.len() - self.pos < 2 {
            let rest = self.data.len() - self.pos;
            return Err(self.err(format!(
                "too short for {field} length: needs 2 bytes at offset {at}, {rest} left"
            )));
        }
        let len = self.i16(field)?;
        if len < 0 {
            return Err(self.err(format!("negative {field} length {len} at offset {at}")));
        }
        let bytes = self.take(field, len as usize)?;
        std::str::from_utf8(bytes)
            .map_err(|e| self.err(format!("{field} at offset {} is not valid UTF-8: {e}", at + 2)))
    }

    pub(crate) fn finish(&self) -> Result<(), FormatError> {
        let rest = self.data.len() - self.pos;
        if rest != 0 {
            return Err(self.err(format!("{rest} trailing bytes after the last field at offset {}", self.pos)));
        }
        Ok(())
    }
}

/// The fields of a key, borrowed from its bytes.
pub(crate) struct KeyRef<'a> {
    pub(crate) kind: KeyKind,
    pub(crate) role: &'a str,
    pub(crate) member: &'a str,
}

pub(crate) fn decode_key_ref(data: &[u8]) -> Result<KeyRef<'_>, FormatError> {
    let mut r = Reader::new(Part::Key, data);
    r.version()?;
    let kind = match r.i16("kind")? {
        0 => KeyKind::Registration,
        1 => KeyKind::Lease,
        k => return Err(r.err(format!("unknown kind {k} at offset 2, expected 0 (registration) or 1 (lease)"))),
    };
    let role = r.str("role")?;
    let member = r.str("member")?;
    r.finish()?;
    if role.is_empty() {
        return Err(r.err("empty role".into()));
    }
    match kind {
        KeyKind::Registration if member.is_empty() => {
            return Err(r.err("registration key with an empty member".into()))
        }
        KeyKind::Lease if !member.is_empty() => {
            return Err(r.err(format!("lease key with a non-empty member {member:?}")))
        }
        _ => {}
    }
    Ok(KeyRef { kind, role, member })
}

/// Decodes a key.
pub fn decode_key(data: &[u8]) -> Result<Key, FormatError> {
    let k = decode_key_ref(data)?;
    Ok(Key { kind: k.kind, role: k.role.to_owned(), member: k.member.to_owned() })
}

/// Decodes a registration value.
pub fn decode_registration(data: &[u8]) -> Result<Registration, FormatError> {
    let mut r = Reader::new(Part::RegistrationValue, data);
    r.version()?;
    let member = r.str("member")?;
    let registered_at = r.i64("registered_at")?;
    r.finish()?;
    if member.is_empty() {
        return Err(r.err("empty member".into()));
    }
    Ok(Registration { member: member.to_owned(), registered_at })
}

/// Decodes a lease value.
pub fn decode_lease(data: &[u8]) -> Result<Lease, FormatError> {
    let mut r = Reader::new(Part::LeaseValue, data);
    r.version()?;
    let member = r.str("member")?;
    let producer_id = r.i64("producer_id")?;
    let producer_epoch = r.i16("producer_epoch")?;
    let granted_at = r.i64("granted_at")?;
    let deadline = r.i64("deadline")?;
    r.finish()?;
    if member.is_empty() {
        return Err(r.err("empty member".into()));
    }
    Ok(Lease {
        member: member.to_owned(),
        token: FencingToken { producer_id, producer_epoch },
        granted_at,
        deadline,
    })
}
