//! The persistent heap's C API, `include/larder_heap.h`: paper 003's PSHFS
//! calls with a `larder_` prefix over the Rust crate `larder-heap`, so
//! PSHFS programs port by renaming (docs/capi.md, "The heap").
//!
//! `larder_mfdopen("STORE_DIR[:HEAP_PATH]")` attaches the process's
//! current heap (one at a time, as PSHFS had it); the `larder_mf*` calls
//! act on it. `larder_heap_open(store, heap_path, flags)` opens a heap as
//! a handle instead, any number of them, and the `larder_heap_*` calls
//! take the handle. The store is opened embedded (this process holds it),
//! or, when `larder serve` serves it, the heap is the server's: metadata
//! calls are requests checked against this process's credentials, and
//! objects are mapped from the descriptors the server sends (read-only
//! where the process may only read).
//!
//! Errors are the library's: a call that fails returns -1, NULL or the
//! null `larder_nptr` (all zeros), sets `errno`, and `larder_mferrno()`
//! and `larder_mferror()` give this thread's last failure. No panic
//! crosses into C. Pointers C passes back (`larder_mfobj *`,
//! `larder_mftype *`, `larder_heap *`) are looked up, never trusted: one
//! that is not live is EINVAL or EBADF, not undefined behaviour.

use std::ffi::{c_char, c_int};

use crate::arguments;
use crate::status::{Failure, Outcome};

mod backend;
mod current;
mod errors;
mod handed;
mod handles;
mod open;
mod operations;
mod stores;

pub use current::{
    larder_mfaddname, larder_mfalloc, larder_mfalloc_in, larder_mfalloctype, larder_mfclone, larder_mfclose,
    larder_mfcloseobj, larder_mfcopy, larder_mfderef, larder_mfdopen, larder_mfdopen_create, larder_mfdreference,
    larder_mffree_in, larder_mffreeobj, larder_mfgetobj, larder_mfgetobjbyname, larder_mfgrow, larder_mfnptr,
    larder_mfsize, larder_mfsync, larder_mftypeatt,
};
pub use errors::{larder_mferrno, larder_mferror};
pub use handles::{
    larder_heap_addname, larder_heap_alloc, larder_heap_alloc_in, larder_heap_alloctype, larder_heap_clone,
    larder_heap_close, larder_heap_closeobj, larder_heap_copy, larder_heap_deref, larder_heap_dreference,
    larder_heap_free_in, larder_heap_freeobj, larder_heap_getobj, larder_heap_getobjbyname, larder_heap_grow,
    larder_heap_nptr, larder_heap_open, larder_heap_size, larder_heap_sync, larder_heap_typeatt,
};

/// A persistent pointer (PSHFS's `nptr`): an object, a byte offset in it
/// and a generation (0 for an object's own bytes). Holds no address, so
/// it is valid in any process and after a reboot; store it in objects.
/// 24 bytes, the layout of the Rust heap's `PPtr`. All zeros is null.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LarderNptr {
    /// The object's id (never 0 for a real object).
    pub object: u64,
    /// The byte offset in the object.
    pub offset: u64,
    /// The block's generation for a block of `larder_mfalloc_in`, else 0.
    pub generation: u64,
}

const _: () = {
    assert!(std::mem::size_of::<LarderNptr>() == std::mem::size_of::<larder_heap::PPtr<u8>>());
    assert!(std::mem::offset_of!(LarderNptr, object) == std::mem::offset_of!(larder_heap::PPtr<u8>, object));
    assert!(std::mem::offset_of!(LarderNptr, offset) == std::mem::offset_of!(larder_heap::PPtr<u8>, offset));
    assert!(std::mem::offset_of!(LarderNptr, generation) == std::mem::offset_of!(larder_heap::PPtr<u8>, generation));
};

/// An object of a heap as C holds it (PSHFS's `mfobj`): `obj->nptr` is
/// its persistent pointer. One struct per object and heap: every call
/// returning this object returns the same pointer. Read-only for C; it
/// stays readable until the heap is closed.
#[repr(C)]
#[derive(Debug)]
pub struct LarderMfobj {
    /// The persistent pointer to the object's first byte.
    pub nptr: LarderNptr,
}

/// A type (PSHFS's `mftype`): where an object's persistent pointers are,
/// for `larder_mfclone`. Persistent with the objects it is attached to.
/// Read-only for C; valid until the heap is closed.
#[repr(C)]
#[derive(Debug)]
pub struct LarderMftype {
    /// The type's id in the store.
    pub id: u64,
    /// How many pointer offsets it lists.
    pub pointers: usize,
}

/// A heap opened with `larder_heap_open`; opaque.
#[derive(Debug)]
pub struct LarderHeap {
    /// Makes each handle a distinct allocation (its address is its name).
    _unique: u8,
}

/// `larder_heap_open` flag: create the store if its directory holds none.
pub const LARDER_HEAP_CREATE: c_int = 1;

/// A C string that must be UTF-8 (a path inside the store, a name).
///
/// # Safety
/// As for [`arguments::string`]: NULL or a NUL-terminated string.
#[allow(unsafe_code)]
unsafe fn text<'a>(pointer: *const c_char, what: &str) -> Outcome<&'a str> {
    // SAFETY: the caller's guarantee is the one `string` needs.
    let bytes = unsafe { arguments::string(pointer, what) }?;
    std::str::from_utf8(bytes).map_err(|_| Failure::invalid(format!("{what} is not UTF-8")))
}

/// The null persistent pointer, what the calls returning one give on
/// failure.
const NULL_NPTR: LarderNptr = LarderNptr { object: 0, offset: 0, generation: 0 };
