//! Bounds check of Kafka response frames before `kafka-protocol` decodes them.
//!
//! [`check_response`] walks a response body field by field, per the layout
//! `kafka-protocol` 0.18 decodes for that API and version, and refuses it if
//! any array count, string or bytes length or tagged-field size exceeds the
//! bytes left, a length is negative (other than the null marker of a
//! nullable field), a varint does not fit 32 bits, the body is truncated, or
//! bytes follow its end. Known tagged fields are checked within their size;
//! unknown ones are skipped by size. It accepts every body `kafka-protocol`
//! encodes for a covered (API, version) and refuses every (API, version) not
//! listed by [`covered`]. It never decodes values (record sets are not looked
//! into), never allocates in proportion to a length read from the frame, and
//! never panics. [`check_response_header`] does the same for the header.

mod schema;

use schema::{Schema, Tag, Ty, APIS, RESPONSE_HEADER};

/// Why a frame was refused.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The walker has no layout for this API and version.
    #[error("the frame check does not know the response of API key {api_key} version {version}")]
    Unknown {
        /// The API key asked for.
        api_key: i16,
        /// The version asked for.
        version: i16,
    },
    /// A response body does not fit its layout.
    #[error("{api} (key {api_key}) v{version} response, field {field}: {problem}")]
    Body {
        /// The API's name.
        api: &'static str,
        /// The API key.
        api_key: i16,
        /// The response version.
        version: i16,
        /// Where in the body, e.g. `responses[0].partitions[2].records`.
        field: String,
        /// What is wrong there.
        problem: Problem,
    },
    /// A response header does not fit its layout.
    #[error("response header (flexible: {flexible}), field {field}: {problem}")]
    Header {
        /// Whether the header was checked as a flexible (v1) header.
        flexible: bool,
        /// Where in the header.
        field: String,
        /// What is wrong there.
        problem: Problem,
    },
}

/// What is wrong at a field of a refused frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// The field needs more bytes than are left.
    #[error("needs {needed} bytes, {left} left")]
    Truncated {
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left in the frame (or in the enclosing tagged field).
        left: usize,
    },
    /// An array or tagged-field count exceeds the bytes left (each element
    /// takes at least one byte).
    #[error("count {count} exceeds the {left} bytes left")]
    CountTooLarge {
        /// The count read.
        count: u64,
        /// Bytes left after the count.
        left: usize,
    },
    /// A string, bytes or tagged-field length exceeds the bytes left.
    #[error("length {len} exceeds the {left} bytes left")]
    LengthTooLarge {
        /// The length read.
        len: u64,
        /// Bytes left after the length.
        left: usize,
    },
    /// A negative length or count other than the null marker -1.
    #[error("negative length or count {0}")]
    Negative(i32),
    /// The null marker in a field that is not nullable.
    #[error("null, but the field is not nullable")]
    Null,
    /// An unsigned varint longer than 5 bytes or above `u32::MAX`.
    #[error("unsigned varint does not fit 32 bits")]
    Varint,
    /// A known tag in a version that does not have it.
    #[error("tag {tag} is not valid in this version")]
    TagVersion {
        /// The tag.
        tag: u32,
    },
    /// A known tagged field whose value does not fill its declared size.
    #[error("tag {tag} declares {size} bytes, its value takes {used}")]
    TagSize {
        /// The tag.
        tag: u32,
        /// The declared size.
        size: usize,
        /// The bytes its value takes.
        used: usize,
    },
    /// Bytes after the end of the body or header layout.
    #[error("{0} bytes after the end")]
    Trailing(usize),
}

/// Every (API key, version) pair [`check_response`] knows.
pub fn covered() -> impl Iterator<Item = (i16, i16)> {
    APIS.iter()
        .flat_map(|api| api.covered.iter().map(move |&version| (api.key, version)))
}

/// Checks the body of a response (the bytes after its header) of API
/// `api_key` at `version`; `Ok` means `kafka-protocol` may decode it.
pub fn check_response(api_key: i16, version: i16, body: &[u8]) -> Result<(), FrameError> {
    let api = APIS
        .iter()
        .find(|api| api.key == api_key && api.covered.contains(&version))
        .ok_or(FrameError::Unknown { api_key, version })?;
    let ctx = Ctx {
        version,
        flexible: version >= api.flexible_from,
    };
    walk_all(body, &api.body, ctx).map_err(|fault| FrameError::Body {
        api: api.name,
        api_key,
        version,
        field: fault.path,
        problem: fault.problem,
    })
}

/// Checks the response header at the start of `frame` (v1, with tagged
/// fields, if `flexible`) and returns its length: the body follows it.
pub fn check_response_header(flexible: bool, frame: &[u8]) -> Result<usize, FrameError> {
    let ctx = Ctx {
        version: i16::from(flexible),
        flexible,
    };
    let mut cursor = Cursor { buf: frame };
    walk_struct(&mut cursor, &RESPONSE_HEADER, ctx)
        .map(|()| frame.len() - cursor.buf.len())
        .map_err(|fault| FrameError::Header {
            flexible,
            field: fault.path,
            problem: fault.problem,
        })
}

const TAGGED_FIELDS: &str = "tagged_fields";
const END: &str = "(end)";

/// Walks `buf` as one `schema` struct that must take all of it.
fn walk_all(buf: &[u8], schema: &Schema, ctx: Ctx) -> Result<(), Fault> {
    let mut cursor = Cursor { buf };
    walk_struct(&mut cursor, schema, ctx)?;
    match cursor.buf.len() {
        0 => Ok(()),
        left => Err(Fault::from(Problem::Trailing(left)).within(END)),
    }
}

#[derive(Debug, Clone, Copy)]
struct Ctx {
    version: i16,
    flexible: bool,
}

/// The bytes not walked yet.
struct Cursor<'a> {
    buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, needed: usize) -> Result<&'a [u8], Problem> {
        let left = self.buf.len();
        if needed > left {
            return Err(Problem::Truncated { needed, left });
        }
        let (head, tail) = self.buf.split_at(needed);
        self.buf = tail;
        Ok(head)
    }

    fn i16(&mut self) -> Result<i16, Problem> {
        let bytes = self.take(2)?;
        Ok(i16::from_be_bytes([bytes[0], bytes[1]]))
    }

    fn i32(&mut self) -> Result<i32, Problem> {
        let bytes = self.take(4)?;
        Ok(i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn uvarint(&mut self) -> Result<u32, Problem> {
        let mut value = 0u32;
        for i in 0..5 {
            let byte = self.take(1)?[0];
            if i == 4 && byte > 0x0f {
                return Err(Problem::Varint);
            }
            value |= u32::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(Problem::Varint)
    }

    /// A length or count prefix (`None`: the null marker), compact in
    /// flexible versions, else an `i32` if `wide`, an `i16` if not.
    fn length(&mut self, ctx: Ctx, wide: bool) -> Result<Option<u64>, Problem> {
        if ctx.flexible {
            return Ok(self.uvarint()?.checked_sub(1).map(u64::from));
        }
        let n = if wide {
            self.i32()?
        } else {
            i32::from(self.i16()?)
        };
        match n {
            -1 => Ok(None),
            n if n < 0 => Err(Problem::Negative(n)),
            n => Ok(Some(n as u64)),
        }
    }

    fn left(&self) -> u64 {
        self.buf.len() as u64
    }
}

/// A problem and where it is, the path built on the way out.
struct Fault {
    path: String,
    problem: Problem,
}

impl From<Problem> for Fault {
    fn from(problem: Problem) -> Self {
        Fault {
            path: String::new(),
            problem,
        }
    }
}

impl Fault {
    fn within(mut self, name: &str) -> Self {
        if !self.path.is_empty() && !self.path.starts_with('[') {
            self.path.insert(0, '.');
        }
        self.path.insert_str(0, name);
        self
    }
}

fn walk_struct(cursor: &mut Cursor, schema: &Schema, ctx: Ctx) -> Result<(), Fault> {
    for field in schema.fields {
        if field.versions.contains(ctx.version) {
            walk(cursor, field.ty, ctx).map_err(|fault| fault.within(field.name))?;
        }
    }
    if ctx.flexible {
        walk_tags(cursor, schema.tags, ctx)?;
    }
    Ok(())
}

fn walk(cursor: &mut Cursor, ty: Ty, ctx: Ctx) -> Result<(), Fault> {
    let (wide, nullable) = match ty {
        Ty::Int8 => return Ok(cursor.take(1).map(drop)?),
        Ty::Int16 => return Ok(cursor.take(2).map(drop)?),
        Ty::Int32 => return Ok(cursor.take(4).map(drop)?),
        Ty::Int64 => return Ok(cursor.take(8).map(drop)?),
        Ty::Uuid => return Ok(cursor.take(16).map(drop)?),
        Ty::Bool => return Ok(cursor.take(1).map(drop)?),
        Ty::Struct(schema) => return walk_struct(cursor, schema, ctx),
        Ty::Array(elem) => return walk_array(cursor, elem, false, ctx),
        Ty::NullableArray(elem) => return walk_array(cursor, elem, true, ctx),
        Ty::Str => (false, false),
        Ty::NullableStr => (false, true),
        Ty::Bytes => (true, false),
        Ty::Records => (true, true),
    };
    match cursor.length(ctx, wide)? {
        None if nullable => Ok(()),
        None => Err(Problem::Null.into()),
        Some(len) if len > cursor.left() => Err(Problem::LengthTooLarge {
            len,
            left: cursor.buf.len(),
        }
        .into()),
        Some(len) => Ok(cursor.take(len as usize).map(drop)?),
    }
}

fn walk_array(cursor: &mut Cursor, elem: &Ty, nullable: bool, ctx: Ctx) -> Result<(), Fault> {
    let count = match cursor.length(ctx, true)? {
        None if nullable => return Ok(()),
        None => return Err(Problem::Null.into()),
        Some(count) => count,
    };
    if count > cursor.left() {
        let left = cursor.buf.len();
        return Err(Problem::CountTooLarge { count, left }.into());
    }
    for i in 0..count {
        walk(cursor, *elem, ctx).map_err(|fault| fault.within(&format!("[{i}]")))?;
    }
    Ok(())
}

fn walk_tags(cursor: &mut Cursor, tags: &[Tag], ctx: Ctx) -> Result<(), Fault> {
    let section = |problem: Problem| Fault::from(problem).within(TAGGED_FIELDS);
    let count = cursor.uvarint().map_err(section)?;
    if u64::from(count) > cursor.left() {
        let (count, left) = (u64::from(count), cursor.buf.len());
        return Err(section(Problem::CountTooLarge { count, left }));
    }
    for _ in 0..count {
        let tag = cursor.uvarint().map_err(section)?;
        let size = cursor.uvarint().map_err(section)?;
        if u64::from(size) > cursor.left() {
            let (len, left) = (u64::from(size), cursor.buf.len());
            let fault = Fault::from(Problem::LengthTooLarge { len, left });
            return Err(fault.within(&format!("[tag {tag}]")).within(TAGGED_FIELDS));
        }
        let value = cursor.take(size as usize).map_err(section)?;
        let Some(known) = tags.iter().find(|known| known.tag == tag) else {
            continue;
        };
        let at_tag = |fault: Fault| fault.within(known.name);
        if !known.versions.contains(ctx.version) {
            return Err(at_tag(Problem::TagVersion { tag }.into()));
        }
        let mut inner = Cursor { buf: value };
        walk(&mut inner, known.ty, ctx).map_err(at_tag)?;
        if !inner.buf.is_empty() {
            let (size, used) = (value.len(), value.len() - inner.buf.len());
            return Err(at_tag(Problem::TagSize { tag, size, used }.into()));
        }
    }
    Ok(())
}
