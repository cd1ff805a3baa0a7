//! The decoders of the record layouts (the parent module's docs give the
//! layouts and the order of their checks): a fast path for well-formed
//! bytes, and a checked path that names what is wrong.

use super::{Key, KeyKind, Lease, Registration, VERSION};
use crate::error::{FormatError, Part};
use crate::token::FencingToken;

/// A cursor over one record part. Every failure names the part, the field and
/// the byte offset; messages are built on the (cold) failure path only.
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    part: Part,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(part: Part, data: &'a [u8]) -> Self {
        Reader { data, pos: 0, part }
    }

    #[cold]
    #[inline(never)]
    fn fail(&self, message: String) -> FormatError {
        FormatError::new(self.part, message)
    }

    #[cold]
    #[inline(never)]
    fn too_short(&self, what: &str, at: usize, needs: usize) -> FormatError {
        let left = self.data.len() - at;
        self.fail(format!(
            "too short for {what}: needs {needs} bytes at offset {at}, {left} left"
        ))
    }

    /// The next `N` bytes as an array.
    #[inline]
    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N], FormatError> {
        match self.data[self.pos..].first_chunk::<N>() {
            Some(b) => {
                self.pos += N;
                Ok(*b)
            }
            None => Err(self.too_short(field, self.pos, N)),
        }
    }

    #[inline]
    pub(crate) fn i16(&mut self, field: &str) -> Result<i16, FormatError> {
        self.array::<2>(field).map(i16::from_be_bytes)
    }

    #[inline]
    pub(crate) fn i64(&mut self, field: &str) -> Result<i64, FormatError> {
        self.array::<8>(field).map(i64::from_be_bytes)
    }

    /// The version field, which must be [`VERSION`].
    #[inline]
    pub(crate) fn version(&mut self) -> Result<(), FormatError> {
        let v = self.i16("version")?;
        if v != VERSION {
            return Err(self.fail(format!(
                "unsupported version {v} at offset 0, only {VERSION} is known"
            )));
        }
        Ok(())
    }

    /// A string without copying it: the length is present and not negative,
    /// its bytes are present, and they are UTF-8.
    #[inline]
    pub(crate) fn str(&mut self, field: &str) -> Result<&'a str, FormatError> {
        let at = self.pos;
        let Some(len) = self.data[at..].first_chunk::<2>() else {
            return Err(self.length_too_short(field, at));
        };
        let len = i16::from_be_bytes(*len);
        if len < 0 {
            return Err(self.fail(format!("negative {field} length {len} at offset {at}")));
        }
        let start = at + 2;
        let Some(bytes) = self.data[start..].get(..len as usize) else {
            return Err(self.too_short(field, start, len as usize));
        };
        let s = std::str::from_utf8(bytes).map_err(|e| self.not_utf8(field, start, e))?;
        self.pos = start + bytes.len();
        Ok(s)
    }

    #[cold]
    #[inline(never)]
    fn length_too_short(&self, field: &str, at: usize) -> FormatError {
        self.too_short(&format!("{field} length"), at, 2)
    }

    #[cold]
    #[inline(never)]
    fn not_utf8(&self, field: &str, at: usize, e: std::str::Utf8Error) -> FormatError {
        self.fail(format!(
            "{field} at offset {at} is not valid UTF-8: invalid byte at offset {}",
            at + e.valid_up_to()
        ))
    }

    /// A string that must not be empty.
    #[inline]
    pub(crate) fn non_empty_str(
        &mut self,
        field: &str,
        what: &str,
    ) -> Result<&'a str, FormatError> {
        let at = self.pos;
        let s = self.str(field)?;
        if s.is_empty() {
            return Err(self.fail(format!("{what} with an empty {field} at offset {at}")));
        }
        Ok(s)
    }

    /// No bytes may remain after the last field.
    #[inline]
    pub(crate) fn finish(&self, last_field: &str) -> Result<(), FormatError> {
        let rest = self.data.len() - self.pos;
        if rest != 0 {
            return Err(self.fail(format!(
                "{rest} trailing bytes at offset {} after the last field ({last_field})",
                self.pos
            )));
        }
        Ok(())
    }
}

/// The fields of a key, borrowed from its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyRef<'a> {
    pub(crate) kind: KeyKind,
    pub(crate) role: &'a str,
    pub(crate) member: &'a str,
}

impl KeyRef<'_> {
    /// The owned key.
    pub(crate) fn to_key(self) -> Key {
        Key {
            kind: self.kind,
            role: self.role.to_owned(),
            member: self.member.to_owned(),
        }
    }
}

// The decoders run a fast path first: it accepts exactly the valid encodings
// (version 0, kind 0 or 1, non-empty role, member by kind, non-empty value
// member, UTF-8, exact length) with a few straight-line checks, and gives up on
// anything else. Only then does the checked path below run, which reads field
// by field and names the first failure. Both accept the same set of inputs (a
// unit test mutates every byte of valid encodings to compare them), so the
// fast path changes the speed and never the answer.

/// A string at the front of `data`: its length is positive (or zero when
/// `allow_empty`), its bytes are present and UTF-8. Returns it and the rest.
#[inline]
fn fast_str(data: &[u8], allow_empty: bool) -> Option<(&str, &[u8])> {
    let (len, rest) = data.split_first_chunk::<2>()?;
    let len = i16::from_be_bytes(*len);
    if len < 0 || (len == 0 && !allow_empty) {
        return None;
    }
    let (s, rest) = rest.split_at_checked(len as usize)?;
    Some((std::str::from_utf8(s).ok()?, rest))
}

/// A value: version 0, a non-empty member, then exactly `N` bytes.
#[inline]
fn fast_value<const N: usize>(data: &[u8]) -> Option<(&str, &[u8; N])> {
    let ([0, 0], rest) = data.split_first_chunk::<2>()? else {
        return None;
    };
    let (member, rest) = fast_str(rest, false)?;
    Some((member, rest.try_into().ok()?))
}

#[inline]
pub(super) fn fast_key(data: &[u8]) -> Option<KeyRef<'_>> {
    let ([0, 0, 0, code], rest) = data.split_first_chunk::<4>()? else {
        return None;
    };
    let kind = KeyKind::from_code(i16::from(*code))?;
    let (role, rest) = fast_str(rest, false)?;
    let (member, rest) = fast_str(rest, kind == KeyKind::Lease)?;
    let member_ok = match kind {
        KeyKind::Registration => true, // non-empty, checked by fast_str
        KeyKind::Lease => member.is_empty(),
    };
    (member_ok && rest.is_empty()).then_some(KeyRef { kind, role, member })
}

#[inline]
pub(super) fn fast_registration(data: &[u8]) -> Option<(&str, i64)> {
    let (member, at) = fast_value::<8>(data)?;
    Some((member, i64::from_be_bytes(*at)))
}

#[inline]
pub(super) fn fast_lease(data: &[u8]) -> Option<(&str, FencingToken, i64, i64)> {
    let (member, t) = fast_value::<26>(data)?;
    let (id, t) = t.split_first_chunk::<8>()?;
    let (epoch, t) = t.split_first_chunk::<2>()?;
    let (granted_at, deadline) = t.split_first_chunk::<8>()?;
    let deadline: &[u8; 8] = deadline.try_into().ok()?;
    Some((
        member,
        FencingToken::new(i64::from_be_bytes(*id), i16::from_be_bytes(*epoch)),
        i64::from_be_bytes(*granted_at),
        i64::from_be_bytes(*deadline),
    ))
}

/// The checked path of a key: field by field, naming the first failure.
#[cold]
pub(super) fn checked_key(data: &[u8]) -> Result<KeyRef<'_>, FormatError> {
    let mut r = Reader::new(Part::Key, data);
    r.version()?;
    let code = r.i16("kind")?;
    let Some(kind) = KeyKind::from_code(code) else {
        return Err(r.fail(format!(
            "unknown kind {code} at offset 2, expected 0 (registration) or 1 (lease)"
        )));
    };
    let role = r.non_empty_str("role", "key")?;
    let member = match kind {
        KeyKind::Registration => r.non_empty_str("member", "registration key")?,
        KeyKind::Lease => {
            let at = r.pos;
            let member = r.str("member")?;
            if !member.is_empty() {
                return Err(r.fail(format!(
                    "lease key with a non-empty member ({} bytes) at offset {at}; a lease key's member is empty",
                    member.len()
                )));
            }
            member
        }
    };
    r.finish("member")?;
    Ok(KeyRef { kind, role, member })
}

#[cold]
pub(super) fn checked_registration(data: &[u8]) -> Result<(&str, i64), FormatError> {
    let mut r = Reader::new(Part::RegistrationValue, data);
    r.version()?;
    let member = r.non_empty_str("member", "registration value")?;
    let registered_at = r.i64("registered_at")?;
    r.finish("registered_at")?;
    Ok((member, registered_at))
}

#[cold]
pub(super) fn checked_lease(data: &[u8]) -> Result<(&str, FencingToken, i64, i64), FormatError> {
    let mut r = Reader::new(Part::LeaseValue, data);
    r.version()?;
    let member = r.non_empty_str("member", "lease value")?;
    let producer_id = r.i64("producer_id")?;
    let producer_epoch = r.i16("producer_epoch")?;
    let granted_at = r.i64("granted_at")?;
    let deadline = r.i64("deadline")?;
    r.finish("deadline")?;
    Ok((
        member,
        FencingToken::new(producer_id, producer_epoch),
        granted_at,
        deadline,
    ))
}

/// Decodes and checks a key without copying its strings (the same checks, in
/// the same order, as [`decode_key`]).
#[inline]
pub(crate) fn decode_key_ref(data: &[u8]) -> Result<KeyRef<'_>, FormatError> {
    match fast_key(data) {
        Some(k) => Ok(k),
        None => checked_key(data),
    }
}

/// Decodes a key.
pub fn decode_key(data: &[u8]) -> Result<Key, FormatError> {
    decode_key_ref(data).map(KeyRef::to_key)
}

/// Decodes a registration value without copying its member: `(member,
/// registered_at)`, with the same checks as [`decode_registration`]. For
/// callers that copy the member elsewhere anyway (a binding building a host
/// string).
#[inline]
pub fn decode_registration_ref(data: &[u8]) -> Result<(&str, i64), FormatError> {
    match fast_registration(data) {
        Some(v) => Ok(v),
        None => checked_registration(data),
    }
}

/// Decodes a lease value without copying its member: `(member, token,
/// granted_at, deadline)`, with the same checks as [`decode_lease`] (see
/// [`decode_registration_ref`]).
#[inline]
pub fn decode_lease_ref(data: &[u8]) -> Result<(&str, FencingToken, i64, i64), FormatError> {
    match fast_lease(data) {
        Some(v) => Ok(v),
        None => checked_lease(data),
    }
}

/// Decodes a registration value.
pub fn decode_registration(data: &[u8]) -> Result<Registration, FormatError> {
    let (member, registered_at) = decode_registration_ref(data)?;
    Ok(Registration {
        member: member.to_owned(),
        registered_at,
    })
}

/// Decodes a lease value.
pub fn decode_lease(data: &[u8]) -> Result<Lease, FormatError> {
    let (member, token, granted_at, deadline) = decode_lease_ref(data)?;
    Ok(Lease {
        member: member.to_owned(),
        token,
        granted_at,
        deadline,
    })
}
