//! The size rule of the caller-filled option structs
//! (`krabka_client_options`, `krabka_leadership_options`,
//! `krabka_topic_options`, `krabka_consumed_offsets`): each begins with `size_t struct_size`, the size
//! of the struct the caller was compiled with, so that fields can be added
//! at the end without breaking a compiled caller.
//!
//! * `struct_size` 0 or below the first version's size: refused
//!   (`INVALID_ARGUMENT` naming the struct and both sizes); between the
//!   sizes of two versions: refused, naming the versions' sizes;
//! * below this library's size (an older caller): the fields past it keep
//!   their defaults;
//! * above this library's size (a newer caller): the bytes past what this
//!   library knows must be zero (fields left unset), else refused naming the
//!   struct.
//!
//! A field added later must start at or after the previous version's
//! `sizeof` (never in its trailing padding), since an older caller's bytes
//! there are not the library's to read.

use krabka_coordination::Error;

use crate::ffi::{Failure, MAX_LEN};

/// A caller-filled struct with a leading `struct_size`.
pub(crate) trait Versioned: Copy {
    /// The C name, for messages (`krabka_client_options`).
    const NAME: &'static str;
    /// The size of the first version: the smallest `struct_size` accepted.
    const FIRST_SIZE: usize;
    /// The sizes of the versions between the first and this library's, in
    /// order: below this library's size only these and the first are
    /// accepted (a size between two versions' would cut a field in two).
    const BETWEEN_SIZES: &'static [usize] = &[];
    /// The defaults, `struct_size` set to this library's size.
    fn defaults() -> Self;
}

fn invalid(message: String) -> Failure {
    Failure::core(&Error::InvalidArgument(message))
}

/// Checks a `struct_size` (of a struct the caller passes or asks to fill).
pub(crate) fn check_size<T: Versioned>(size: usize) -> Result<(), Failure> {
    let known = std::mem::size_of::<T>();
    if size > T::FIRST_SIZE && size < known && !T::BETWEEN_SIZES.contains(&size) {
        let versions: Vec<String> = std::iter::once(T::FIRST_SIZE)
            .chain(T::BETWEEN_SIZES.iter().copied())
            .chain(std::iter::once(known))
            .map(|n| n.to_string())
            .collect();
        return Err(invalid(format!(
            "{}.struct_size is {size}, between the sizes of two versions of the struct ({}): fill it with {}_init or the {} macro",
            T::NAME,
            versions.join(", "),
            T::NAME,
            T::NAME.to_ascii_uppercase() + "_INIT",
        )));
    }
    if size < T::FIRST_SIZE || size > MAX_LEN {
        return Err(invalid(format!(
            "{}.struct_size must be from {} (the first version's size; this library's is {}) to {MAX_LEN}, got {size}: fill it with {}_init or the {} macro",
            T::NAME,
            T::FIRST_SIZE,
            std::mem::size_of::<T>(),
            T::NAME,
            T::NAME.to_ascii_uppercase() + "_INIT",
        )));
    }
    Ok(())
}

/// Reads the caller's struct at `ptr` (NULL: none) under the size rule:
/// the fields the caller's version has, the defaults for the rest.
///
/// # Safety
/// A non-NULL `ptr` points at a struct whose leading `size_t` is readable
/// and which holds at least that many readable bytes.
pub(crate) unsafe fn read<T: Versioned>(ptr: *const T) -> Result<Option<T>, Failure> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: every version begins with a `size_t` (the caller's contract).
    let size = unsafe { std::ptr::read_unaligned(ptr.cast::<usize>()) };
    check_size::<T>(size)?;
    let known = std::mem::size_of::<T>();
    if size > known {
        // SAFETY: `size` bytes are readable (the caller's contract).
        let tail = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>().add(known), size - known) };
        if let Some(i) = tail.iter().position(|b| *b != 0) {
            return Err(invalid(format!(
                "{}.struct_size is {size}, above this library's {known}, and byte {} past what it knows is not zero: a field of a newer version is set that this library does not have (leave it zero, or link a newer library)",
                T::NAME,
                known + i
            )));
        }
    }
    let mut value = T::defaults();
    let n = size.min(known);
    // SAFETY: `n` bytes are readable at `ptr` and writable in `value`; every
    // field is plain data (numbers, pointers, bools the caller set, function
    // pointers or NULL).
    unsafe {
        std::ptr::copy_nonoverlapping(ptr.cast::<u8>(), (&mut value as *mut T).cast::<u8>(), n)
    };
    Ok(Some(value))
}

/// Writes the defaults into the caller's struct of `caller_size` bytes: at
/// most `caller_size` bytes of them, zeroes past this library's size, and
/// `struct_size = caller_size`.
///
/// # Safety
/// A non-NULL `out` points at `caller_size` writable bytes.
pub(crate) unsafe fn init<T: Versioned>(out: *mut T, caller_size: usize) -> Result<(), Failure> {
    if out.is_null() {
        return Err(Failure::null("o"));
    }
    check_size::<T>(caller_size)?;
    let known = std::mem::size_of::<T>();
    let value = T::defaults();
    let n = caller_size.min(known);
    let dst = out.cast::<u8>();
    // SAFETY: `caller_size` bytes are writable at `out` (the contract).
    unsafe {
        std::ptr::copy_nonoverlapping((&value as *const T).cast::<u8>(), dst, n);
        if caller_size > known {
            std::ptr::write_bytes(dst.add(known), 0, caller_size - known);
        }
        std::ptr::write_unaligned(dst.cast::<usize>(), caller_size);
    }
    Ok(())
}
