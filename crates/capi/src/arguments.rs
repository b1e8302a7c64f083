//! Turning a C caller's pointers into Rust values: NULL and lengths are
//! checked here, once, and refused with EINVAL.

use std::ffi::{c_char, c_void, CStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::status::{Failure, Outcome};

/// The object behind `pointer`, which a C caller passed as `what`.
///
/// # Safety
/// `pointer` is NULL or points to a live `T` that no one changes during
/// the call (the C API's contract for its opaque objects and in-structs).
#[allow(unsafe_code)]
pub(crate) unsafe fn object<'a, T>(pointer: *const T, what: &str) -> Outcome<&'a T> {
    // SAFETY: the caller guarantees a non-NULL pointer is valid for reads
    // of a `T` for the call; NULL gives none.
    unsafe { pointer.as_ref() }.ok_or_else(|| Failure::invalid(format!("{what} is NULL")))
}

/// The place behind `pointer` to write a result into, passed as `what`.
///
/// # Safety
/// `pointer` is NULL or points to writable memory for a `T` that nothing
/// else reads or writes during the call.
#[allow(unsafe_code)]
pub(crate) unsafe fn place<'a, T>(pointer: *mut T, what: &str) -> Outcome<&'a mut T> {
    // SAFETY: the caller guarantees a non-NULL pointer is valid and not
    // aliased for the call; NULL gives none.
    unsafe { pointer.as_mut() }.ok_or_else(|| Failure::invalid(format!("{what} is NULL")))
}

/// The bytes of a NUL-terminated C string, passed as `what`.
///
/// # Safety
/// `pointer` is NULL or points to a NUL-terminated string that stays
/// unchanged during the call.
#[allow(unsafe_code)]
pub(crate) unsafe fn string<'a>(pointer: *const c_char, what: &str) -> Outcome<&'a [u8]> {
    if pointer.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    // SAFETY: not NULL, and the caller guarantees a NUL-terminated string
    // that lives and stays unchanged for the call.
    Ok(unsafe { CStr::from_ptr(pointer) }.to_bytes())
}

/// A path given as a C string.
///
/// # Safety
/// As for [`string`].
#[allow(unsafe_code)]
pub(crate) unsafe fn path<'a>(pointer: *const c_char, what: &str) -> Outcome<&'a Path> {
    // SAFETY: the caller's guarantee is the one `string` needs.
    let bytes = unsafe { string(pointer, what) }?;
    Ok(Path::new(std::ffi::OsStr::from_bytes(bytes)))
}

/// `length` bytes to read from `pointer`, passed as `what`.
///
/// # Safety
/// `pointer` is NULL or valid for reads of `length` bytes that no one
/// changes during the call.
#[allow(unsafe_code)]
pub(crate) unsafe fn bytes<'a>(pointer: *const c_void, length: usize, what: &str) -> Outcome<&'a [u8]> {
    if pointer.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    check_length(length, what)?;
    // SAFETY: not NULL, at most isize::MAX bytes (checked above), and the
    // caller guarantees `length` readable bytes for the call. A byte slice
    // needs no alignment.
    Ok(unsafe { std::slice::from_raw_parts(pointer.cast::<u8>(), length) })
}

/// `length` bytes to write at `pointer`, passed as `what`.
///
/// # Safety
/// `pointer` is NULL or valid for writes of `length` bytes that nothing
/// else reads or writes during the call.
#[allow(unsafe_code)]
pub(crate) unsafe fn bytes_mut<'a>(pointer: *mut c_void, length: usize, what: &str) -> Outcome<&'a mut [u8]> {
    if pointer.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    check_length(length, what)?;
    // SAFETY: not NULL, at most isize::MAX bytes (checked above), and the
    // caller guarantees `length` writable, unaliased bytes for the call.
    Ok(unsafe { std::slice::from_raw_parts_mut(pointer.cast::<u8>(), length) })
}

/// A length that a slice (and a signed byte count) can hold.
pub(crate) fn check_length(length: usize, what: &str) -> Outcome<()> {
    if length > isize::MAX as usize {
        return Err(Failure::invalid(format!("{what}: a length of {length} bytes is more than SSIZE_MAX")));
    }
    Ok(())
}

/// A file offset given as a signed 64-bit number (as `off_t`): negative
/// ones are EINVAL, as `pread(2)` has them.
pub(crate) fn offset(offset: i64) -> Outcome<u64> {
    u64::try_from(offset).map_err(|_| Failure::invalid(format!("a negative offset ({offset})")))
}
