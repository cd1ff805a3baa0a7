//! Exactly-once input for a leader that consumes and produces: guarded
//! writes that commit the consumer group's input offsets in their own
//! transaction (`krabka_leadership_write_with_offsets`), and the offsets a
//! new leader resumes from (`krabka_leadership_committed_offsets`). Both
//! translate the core's `Leadership::write_with_offsets_owned` and
//! `Leadership::committed_offsets`: every check of a group, a topic, a
//! partition or an offset is the core's, with its wording.

use std::collections::HashMap;
use std::ffi::c_char;
use std::sync::Arc;

use krabka_coordination::transport::{CommittedOffset, ConsumedOffsets, InputOffset};

use crate::ffi::{cstr, guard, input, krabka_error, krabka_result, output, Failure, MAX_LEN};
use crate::leadership::{krabka_leadership, krabka_record};
use crate::options::Versioned;
use crate::runtime::block;

/// The `offset` of a `krabka_committed_offset` for a partition the group
/// has committed nothing for (start where your reset policy says).
pub const KRABKA_NO_OFFSET: i64 = -1;

/// One input partition's position in a guarded write, borrowed for the
/// call: the offset of the next record to read there (the last one
/// processed, plus one), as a Kafka consumer commits it.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct krabka_input_offset {
    /// The topic read, NUL-terminated UTF-8 (not empty).
    pub topic: *const c_char,
    /// Its partition (0 or more).
    pub partition: i32,
    /// The offset of the next record to read (0 or more).
    pub offset: i64,
    /// NUL-terminated UTF-8 kept with the offset and returned with it, or
    /// NULL for none; at most the brokers' `offset.metadata.max.bytes`
    /// (4096 by default), or the commit is refused.
    pub metadata: *const c_char,
}

/// Fills `*o` with the position `offset` of `topic`/`partition` and no
/// metadata; then set other fields by name (`o.metadata = "...";`), never
/// with a positional `{...}` list. `topic` is stored as given (borrowed,
/// may be NULL to set later); nothing is checked here (the write checks).
/// Does not block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_input_offset_init(
    o: *mut krabka_input_offset,
    topic: *const c_char,
    partition: i32,
    offset: i64,
) -> krabka_result {
    guard(std::ptr::null_mut(), || {
        *unsafe { output(o, "o") }? = krabka_input_offset {
            topic,
            partition,
            offset,
            metadata: std::ptr::null(),
        };
        Ok(())
    })
}

/// The input a guarded write consumed: the offsets to commit for consumer
/// group `group` with the write's records, in its transaction.
/// `struct_size` follows the size rule of the header's preamble: fill it
/// with `KRABKA_CONSUMED_OFFSETS_INIT`, then set the fields by name.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct krabka_consumed_offsets {
    /// `sizeof(krabka_consumed_offsets)` as the caller was compiled with;
    /// set by the init function (see the size rule).
    pub struct_size: usize,
    /// The consumer group whose offsets are committed, NUL-terminated UTF-8
    /// (not empty). The leader commits without joining it: a group with
    /// members of its own (consumers that `subscribe`d) refuses the commit.
    pub group: *const c_char,
    /// `offset_count` positions, one per input partition (each
    /// topic-partition at most once), or NULL when `offset_count` is 0.
    pub offsets: *const krabka_input_offset,
    /// The number of positions.
    pub offset_count: usize,
}

impl Versioned for krabka_consumed_offsets {
    const NAME: &'static str = "krabka_consumed_offsets";
    const FIRST_SIZE: usize = std::mem::size_of::<krabka_consumed_offsets>();
    fn defaults() -> Self {
        krabka_consumed_offsets {
            struct_size: std::mem::size_of::<Self>(),
            group: std::ptr::null(),
            offsets: std::ptr::null(),
            offset_count: 0,
        }
    }
}

/// Writes the defaults (no group, no offsets) into `*o`, a struct of
/// `caller_size` bytes (use `KRABKA_CONSUMED_OFFSETS_INIT(o)`), and sets
/// `o->struct_size` to it, as `krabka_client_options_init` does. Does not
/// block; any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_consumed_offsets_init(
    o: *mut krabka_consumed_offsets,
    caller_size: usize,
) -> krabka_result {
    guard(std::ptr::null_mut(), || unsafe {
        crate::options::init(o, caller_size)
    })
}

/// A topic-partition of a committed-offsets question, borrowed for the
/// call.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct krabka_topic_partition {
    /// The topic, NUL-terminated UTF-8 (not empty).
    pub topic: *const c_char,
    /// The partition (0 or more).
    pub partition: i32,
}

/// What a consumer group has committed for one partition, written by
/// `krabka_leadership_committed_offsets` into the caller's array.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct krabka_committed_offset {
    /// The topic: the pointer the question's entry gave (borrowed from the
    /// caller, as long as that string lives).
    pub topic: *const c_char,
    /// The partition.
    pub partition: i32,
    /// The offset of the next record to read, or `KRABKA_NO_OFFSET` (-1)
    /// when the group has committed nothing for the partition.
    pub offset: i64,
    /// The metadata committed with the offset, NUL-terminated UTF-8 in the
    /// caller's metadata buffer, or NULL when there is none (Kafka answers
    /// an offset committed without metadata with an empty text).
    pub metadata: *const c_char,
    /// The metadata's length in bytes (without the NUL; 0 when NULL).
    pub metadata_len: usize,
}

/// The length of a caller's array of `T`, refused past the largest object.
fn array_len<T>(count: usize, what: &str) -> Result<(), Failure> {
    if count > MAX_LEN / std::mem::size_of::<T>().max(1) {
        return Err(Failure::core(&krabka_coordination::Error::InvalidArgument(
            format!("{what} must be the number of entries, got {count}"),
        )));
    }
    Ok(())
}

/// The caller's array of `count` entries at `ptr` (NULL with count 0: empty).
///
/// # Safety
/// A non-NULL `ptr` points at `count` readable entries for `'a`.
unsafe fn array<'a, T>(ptr: *const T, count: usize, what: &str) -> Result<&'a [T], Failure> {
    if count == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Failure::null(what));
    }
    array_len::<T>(count, &format!("the count of {what}"))?;
    // SAFETY: `ptr` holds `count` entries (the caller's contract).
    Ok(unsafe { std::slice::from_raw_parts(ptr, count) })
}

/// The core's offsets of the caller's struct (read under the size rule).
///
/// # Safety
/// `offsets` is NULL or the caller's struct, whose pointers hold what its
/// fields say.
unsafe fn consumed(offsets: *const krabka_consumed_offsets) -> Result<ConsumedOffsets, Failure> {
    let o = unsafe { crate::options::read(offsets) }?.ok_or_else(|| Failure::null("offsets"))?;
    let group = unsafe { cstr(o.group, "offsets.group") }?.to_owned();
    let list = unsafe { array(o.offsets, o.offset_count, "offsets.offsets") }?;
    let mut out = Vec::with_capacity(list.len());
    for (i, e) in list.iter().enumerate() {
        let at = |f: &str| format!("offsets.offsets[{i}].{f}");
        let topic = unsafe { cstr(e.topic, &at("topic")) }?.to_owned();
        let metadata = if e.metadata.is_null() {
            None
        } else {
            Some(unsafe { cstr(e.metadata, &at("metadata")) }?.to_owned())
        };
        out.push(InputOffset {
            topic,
            partition: e.partition,
            offset: e.offset,
            metadata,
        });
    }
    Ok(ConsumedOffsets {
        group,
        offsets: out,
    })
}

/// A guarded write that also commits the input it consumed: `count`
/// records (borrowed for the call; NULL with 0 for none, then only the
/// offsets commit) and the positions in `*offsets` for its consumer group,
/// in one transaction of this term's epoch. The records become visible to
/// `read_committed` readers and the group's offsets move together, or
/// neither happens: a deposed leader's write is `KRABKA_RESULT_FENCED`
/// (the term ends), none of its records become visible and the group's
/// offsets stay where the last leader committed them.
///
/// Everything `krabka_leadership_write` says holds: `KRABKA_RESULT_RESIGNED`
/// after a resign, `KRABKA_RESULT_OUTCOME_UNKNOWN` when the commit was sent
/// but not confirmed (the offsets then moved exactly when the records
/// became visible), the same bounds. `KRABKA_RESULT_INVALID_ARGUMENT`
/// naming the value, nothing sent: an empty group, an input offset with an
/// empty topic, a negative partition or offset, a topic-partition named
/// twice, or a `struct_size` the size rule refuses. A group that consumers
/// joined with `subscribe` refuses the commit (`KRABKA_RESULT_FATAL`):
/// read the input with assign and seek. `offsets` NULL is
/// `KRABKA_RESULT_NULL_ARGUMENT`. Blocks the calling thread for at most
/// one renew interval (never past the lease); any thread (writes are
/// serialised).
#[no_mangle]
pub unsafe extern "C" fn krabka_leadership_write_with_offsets(
    leadership: *const krabka_leadership,
    records: *const krabka_record,
    count: usize,
    offsets: *const krabka_consumed_offsets,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let l = Arc::clone(unsafe { input(leadership, "leadership") }?.core()?);
        let records = crate::leadership::records(records, count)?;
        let offsets = unsafe { consumed(offsets) }?;
        // The core's checks (a resign, the offsets) run at this call.
        let write = l.write_with_offsets_owned(records, offsets);
        block(write)
    })
}

/// The question of the caller's entries, one entry per topic in the
/// order of its first appearance (the core answers each partition once).
///
/// # Safety
/// `partitions` holds `count` entries whose topics are NUL-terminated.
unsafe fn question(
    partitions: *const krabka_topic_partition,
    count: usize,
) -> Result<Vec<(String, Vec<i32>)>, Failure> {
    let asked = unsafe { array(partitions, count, "partitions") }?;
    let mut by_topic: Vec<(String, Vec<i32>)> = Vec::new();
    for (i, p) in asked.iter().enumerate() {
        let topic = unsafe { cstr(p.topic, &format!("partitions[{i}].topic")) }?;
        match by_topic.iter_mut().find(|(t, _)| t == topic) {
            Some((_, parts)) => parts.push(p.partition),
            None => by_topic.push((topic.to_owned(), vec![p.partition])),
        }
    }
    Ok(by_topic)
}

/// The bytes the metadata of `found` take in the caller's buffer, each
/// text with its NUL.
fn metadata_size(found: &[CommittedOffset]) -> usize {
    found
        .iter()
        .filter_map(|c| c.metadata.as_ref())
        .map(|m| m.len() + 1)
        .sum()
}

/// What consumer group `group` has committed for the `count`
/// topic-partitions at `partitions`: where the new leader resumes reading
/// its input. Only offsets of decided transactions are returned
/// (read_committed): an offset an open transaction's pending commit holds
/// is waited for, at most one lease duration (then
/// `KRABKA_RESULT_TRANSIENT` naming the group and the partitions).
///
/// `out` is the caller's array of `count` entries: entry i answers
/// `partitions[i]` (its `topic` is that entry's pointer), its `offset`
/// `KRABKA_NO_OFFSET` when the group committed nothing there. The metadata
/// texts go NUL-terminated into the caller's buffer `metadata` of
/// `metadata_capacity` bytes (may be NULL with capacity 0), in the order of
/// `out`, and `*metadata_len` gets the bytes they need (each with its NUL)
/// even when the buffer is too small: then `KRABKA_RESULT_BUFFER_TOO_SMALL`
/// and nothing is written to `out` (ask again with a buffer that large;
/// the offsets may have moved meanwhile). Kafka answers an offset committed
/// without metadata with an empty text, which takes one byte: `count`
/// bytes plus the lengths of the metadata the writes commit suffice.
///
/// `KRABKA_RESULT_INVALID_ARGUMENT` naming the value, nothing sent: an
/// empty group or topic, a negative partition, a topic-partition asked
/// twice. A principal without DESCRIBE on the group or the topic is
/// `KRABKA_RESULT_FATAL`. Blocks the calling thread (at most one lease
/// duration); any thread.
#[no_mangle]
pub unsafe extern "C" fn krabka_leadership_committed_offsets(
    leadership: *const krabka_leadership,
    group: *const c_char,
    partitions: *const krabka_topic_partition,
    count: usize,
    out: *mut krabka_committed_offset,
    metadata: *mut c_char,
    metadata_capacity: usize,
    metadata_len: *mut usize,
    err: *mut krabka_error,
) -> krabka_result {
    guard(err, || {
        let l = Arc::clone(unsafe { input(leadership, "leadership") }?.core()?);
        let group = unsafe { cstr(group, "group") }?.to_owned();
        let asked_by_topic = unsafe { question(partitions, count) }?;
        let metadata_len = unsafe { output(metadata_len, "metadata_len") }?;
        if count > 0 && out.is_null() {
            return Err(Failure::null("out"));
        }
        if metadata.is_null() && metadata_capacity > 0 {
            return Err(Failure::null("metadata"));
        }
        array_len::<u8>(metadata_capacity, "metadata_capacity")?;
        let found = block(async move { l.committed_offsets(&group, &asked_by_topic).await })?;
        let needed = metadata_size(&found);
        *metadata_len = needed;
        if needed > metadata_capacity {
            return Err(Failure::new(
                krabka_result::BufferTooSmall,
                format!(
                    "metadata: the buffer holds {metadata_capacity} bytes, {needed} are needed"
                ),
            ));
        }
        // SAFETY: the caller's arrays, checked non-NULL above when used.
        let asked = unsafe { array(partitions, count, "partitions") }?;
        let by_key: HashMap<(&str, i32), &CommittedOffset> = found
            .iter()
            .map(|c| ((c.topic.as_str(), c.partition), c))
            .collect();
        let mut at = 0usize;
        for (i, p) in asked.iter().enumerate() {
            let topic = unsafe { cstr(p.topic, "topic") }?;
            let c = by_key.get(&(topic, p.partition)).ok_or_else(|| {
                Failure::new(
                    krabka_result::Error,
                    format!("the answer lacks {topic}/{}", p.partition),
                )
            })?;
            let (text, len) = match &c.metadata {
                None => (std::ptr::null(), 0),
                Some(m) => {
                    // SAFETY: `needed <= metadata_capacity` bytes are
                    // writable, and `at + m.len() + 1 <= needed`.
                    unsafe {
                        let dst = metadata.add(at);
                        std::ptr::copy_nonoverlapping(m.as_ptr(), dst.cast::<u8>(), m.len());
                        *dst.add(m.len()) = 0;
                        at += m.len() + 1;
                        (dst.cast_const(), m.len())
                    }
                }
            };
            // SAFETY: `out` holds `count` writable entries.
            unsafe {
                out.add(i).write(krabka_committed_offset {
                    topic: p.topic,
                    partition: p.partition,
                    offset: c.offset.unwrap_or(KRABKA_NO_OFFSET),
                    metadata: text,
                    metadata_len: len,
                })
            };
        }
        Ok(())
    })
}
