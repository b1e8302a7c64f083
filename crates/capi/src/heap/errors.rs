//! The heap's errors as errno values, and the error query of the heap API
//! (`larder_mferrno`, `larder_mferror`).

use std::ffi::{c_char, c_int};

use larder_heap::HeapError;
use larder_io::IoError;
use larder_object::ObjectError;

use crate::status::{last_errno, Failure};

/// The errno of an I/O layer error: EBUSY for a store another process
/// holds, the operating system's errno where there is one, else EIO.
fn io_errno(e: &IoError) -> i32 {
    match e {
        IoError::Locked { .. } => libc::EBUSY,
        IoError::NotFound { .. } => libc::ENOENT,
        IoError::AlreadyExists { .. } => libc::EEXIST,
        IoError::InvalidInput { .. } => libc::EINVAL,
        other => other.errno().unwrap_or(libc::EIO),
    }
}

/// The errno of an object layer error.
fn object_errno(e: &ObjectError) -> i32 {
    if e.is_no_space() {
        return libc::ENOSPC;
    }
    match e {
        ObjectError::Io(io) => io_errno(io),
        ObjectError::NotAStore { .. } | ObjectError::NoSuchObject { .. } => libc::ENOENT,
        ObjectError::AlreadyExists { .. } => libc::EEXIST,
        ObjectError::InvalidName { .. } | ObjectError::InvalidOption { .. } | ObjectError::TooLarge { .. } => {
            libc::EINVAL
        }
        _ => libc::EIO,
    }
}

/// The errno a heap error sets; documented in docs/capi.md ("Heap errors").
pub(crate) fn heap_errno(e: &HeapError) -> i32 {
    match e {
        HeapError::NotFound { .. } => libc::ENOENT,
        HeapError::AlreadyExists { .. } => libc::EEXIST,
        HeapError::Stale { .. } => libc::ESTALE,
        HeapError::PermissionDenied { .. } => libc::EACCES,
        HeapError::BadType { .. } | HeapError::InvalidArgument { .. } | HeapError::NotAHeap { .. } => libc::EINVAL,
        HeapError::BadPointer { .. } | HeapError::OutOfBounds { .. } => libc::EFAULT,
        HeapError::BigEndian => libc::ENOSYS,
        HeapError::Object(o) => object_errno(o),
        HeapError::Io(io) => io_errno(io),
        HeapError::Namespace(_) | HeapError::Shrunk { .. } | HeapError::Arena { .. } => libc::EIO,
        _ => libc::EIO,
    }
}

impl From<HeapError> for Failure {
    fn from(e: HeapError) -> Failure {
        Failure::new(heap_errno(&e), e.to_string())
    }
}

impl From<ObjectError> for Failure {
    fn from(e: ObjectError) -> Failure {
        Failure::new(object_errno(&e), e.to_string())
    }
}

/// The errno of this thread's last failed call of the library (heap or
/// client), or 0 if none has failed. Unlike `errno`, no later libc call
/// changes it; a successful call leaves it too.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_mferrno() -> c_int {
    last_errno()
}

/// The message of this thread's last failed call of the library: the
/// function's name, then what went wrong; an empty string if none has
/// failed. Valid until the next failing call on this thread. Never NULL.
/// The same text as `larder_last_error()`.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_mferror() -> *const c_char {
    crate::status::larder_last_error()
}
