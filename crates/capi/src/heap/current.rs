//! PSHFS's calls with a `larder_` prefix, on the process's current heap:
//! `larder_mfdopen` attaches it, `larder_mfclose` detaches it, and every
//! other `larder_mf*` call acts on it.

use std::ffi::{c_char, c_int, c_void};
use std::path::Path;
use std::sync::Arc;

use parking_lot::{const_mutex, Mutex};

use super::open::{split_heap_path, OpenHeap};
use super::operations;
use super::{text, LarderMfobj, LarderMftype, LarderNptr, NULL_NPTR};
use crate::status::{boundary, Failure, Outcome};

/// The heap `larder_mfdopen` attached, if any.
static CURRENT: Mutex<Option<Arc<OpenHeap>>> = const_mutex(None);

/// The current heap, or EBADF.
fn current() -> Outcome<Arc<OpenHeap>> {
    CURRENT.lock().clone().ok_or_else(|| Failure::new(libc::EBADF, "no heap is attached (larder_mfdopen attaches one)"))
}

/// Attaches the heap `path` names as the current one.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[allow(unsafe_code)]
unsafe fn attach(path: *const c_char, create: bool) -> Outcome<c_int> {
    // SAFETY: the caller passes NULL or a NUL-terminated string.
    let path = unsafe { text(path, "path") }?;
    let (store, heap_path) = split_heap_path(path);
    let mut current = CURRENT.lock();
    if current.is_some() {
        return Err(Failure::new(
            libc::EBUSY,
            "a heap is attached already (one per process, as in PSHFS; larder_mfclose detaches it, \
             larder_heap_open opens more)",
        ));
    }
    *current = Some(Arc::new(OpenHeap::open(Path::new(store), heap_path, create)?));
    Ok(0)
}

/// Attaches a heap as this process's current one (PSHFS's mfdopen).
/// `path` is a store's directory, optionally followed by `:` and the
/// heap's path inside the store (`/srv/store:/apps/heap`); the default
/// heap is `/heap`. The heap is created if absent; the store must exist
/// (`larder_mfdopen_create` creates it). The store is opened embedded, by
/// this process, unless `larder serve` serves it: the heap is then the
/// server's (its calls are requests checked against this process's user,
/// objects mapped from descriptors the server sends, read-only where the
/// user may only read). Returns 0, or -1 with errno set: ENOENT (no store,
/// or the heap's parent directory missing), EBUSY (a heap is attached
/// already, or another process that is not a server has the store open),
/// EACCES, EINVAL (NULL, not UTF-8, not a heap).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_mfdopen(path: *const c_char) -> c_int {
    // SAFETY: the caller passes NULL or a NUL-terminated string.
    boundary("larder_mfdopen", -1, || unsafe { attach(path, false) })
}

/// As `larder_mfdopen`, but creates the store too if its directory holds
/// none (sized to the free space of its file system).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_mfdopen_create(path: *const c_char) -> c_int {
    // SAFETY: the caller passes NULL or a NUL-terminated string.
    boundary("larder_mfdopen_create", -1, || unsafe { attach(path, true) })
}

/// Detaches the current heap (PSHFS's mfclose): makes it durable (as
/// `larder_mfsync`), unmaps its objects, and closes the store if no other
/// heap of this process uses it. Every `larder_mfobj *` and
/// `larder_mftype *` of the heap is invalid afterwards. Returns 0, or -1
/// with errno set (EBADF: no heap attached).
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_mfclose() -> c_int {
    boundary("larder_mfclose", -1, || {
        let open = CURRENT.lock().take().ok_or_else(|| Failure::new(libc::EBADF, "no heap is attached"))?;
        open.close()?;
        Ok(0)
    })
}

/// Allocates an object of `size` zero bytes, attached (PSHFS's mfalloc).
/// Its `nptr` names it; it has no name until `larder_mfaddname`. Returns
/// the object, or NULL with errno set (EINVAL: too large; ENOSPC; EACCES).
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_mfalloc(size: usize) -> *mut LarderMfobj {
    boundary("larder_mfalloc", std::ptr::null_mut(), || operations::alloc(current()?.as_ref(), size))
}

/// The address of the object's first byte in this process (PSHFS's
/// mfdreference): `larder_mfsize` bytes, shared with every process that
/// maps the object. Valid until the object is closed or freed, the heap
/// closed, or `larder_mfgrow` moves it. Returns NULL with errno set for an
/// object that is not attached (EBADF: closed; ENOENT: freed; EINVAL: not
/// an mfobj of this heap).
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_mfdreference(object: *const LarderMfobj) -> *mut c_void {
    boundary("larder_mfdreference", std::ptr::null_mut(), || operations::dreference(current()?.as_ref(), object))
}

/// Gives the object the name `name` (PSHFS's mfaddname): 1-255 bytes of
/// UTF-8 without `/` or NUL, not `.` or `..`. An object may have many
/// names; a name names one object. Returns 0, or -1 with errno set
/// (EEXIST: the name is taken; EINVAL: a bad name or NULL).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_mfaddname(object: *const LarderMfobj, name: *const c_char) -> c_int {
    boundary("larder_mfaddname", -1, || {
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        let name = unsafe { text(name, "name") }?;
        operations::add_name(current()?.as_ref(), object, name)
    })
}

/// The object named `name`, attached (PSHFS's mfgetobjbyname). Returns
/// NULL with errno set (ENOENT: no such name).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_mfgetobjbyname(name: *const c_char) -> *mut LarderMfobj {
    boundary("larder_mfgetobjbyname", std::ptr::null_mut(), || {
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        let name = unsafe { text(name, "name") }?;
        operations::get_by_name(current()?.as_ref(), name)
    })
}

/// The object `nptr` points into, attached (PSHFS's mfgetobj); attaches
/// a closed object again. Returns NULL with errno set (ENOENT: no such
/// object, or it was freed; EINVAL: the null pointer).
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_mfgetobj(nptr: LarderNptr) -> *mut LarderMfobj {
    boundary("larder_mfgetobj", std::ptr::null_mut(), || operations::get(current()?.as_ref(), nptr))
}

/// The persistent pointer to the object's first byte (PSHFS's mfnptr;
/// the same as `object->nptr`). Returns the null pointer with errno set
/// (ENOENT: freed; EINVAL: not an mfobj of this heap).
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_mfnptr(object: *const LarderMfobj) -> LarderNptr {
    boundary("larder_mfnptr", NULL_NPTR, || operations::nptr(current()?.as_ref(), object))
}

/// Detaches the object from this process (PSHFS's mfcloseobj); it stays
/// in the heap, and `larder_mfgetobj` or `larder_mfgetobjbyname` attach it
/// again. Addresses into it become invalid. Returns 0, or -1 with errno
/// set (EBADF: closed already).
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_mfcloseobj(object: *mut LarderMfobj) -> c_int {
    boundary("larder_mfcloseobj", -1, || operations::close_object(current()?.as_ref(), object))
}

/// Frees the object (PSHFS's mffreeobj): removes it and all its names
/// from the heap and detaches it. Its nptr is stale from now on (ENOENT).
/// Returns 0, or -1 with errno set (ENOENT: freed already).
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_mffreeobj(object: *mut LarderMfobj) -> c_int {
    boundary("larder_mffreeobj", -1, || operations::free(current()?.as_ref(), object))
}

/// A copy of the object alone (PSHFS's mfcopy), attached: its bytes and
/// type under a new id; pointers in it are copied as they are, still
/// naming the original's targets. Returns NULL with errno set.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_mfcopy(object: *const LarderMfobj) -> *mut LarderMfobj {
    boundary("larder_mfcopy", std::ptr::null_mut(), || operations::copy(current()?.as_ref(), object))
}

/// A type listing `count` offsets of `larder_nptr` fields (PSHFS's
/// mfalloctype): ascending, multiples of 8, not overlapping; `offsets`
/// may be NULL when `count` is 0. Persistent. Returns NULL with errno set
/// (EINVAL: bad offsets).
///
/// # Safety
/// `offsets` is NULL or valid for reads of `count` `size_t`s.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_mfalloctype(offsets: *const usize, count: usize) -> *mut LarderMftype {
    boundary("larder_mfalloctype", std::ptr::null_mut(), || {
        // SAFETY: the caller passes NULL or `count` readable size_ts.
        let offsets = unsafe { operations::offsets(offsets, count) }?;
        operations::alloc_type(current()?.as_ref(), offsets)
    })
}

/// Attaches the type to the object (PSHFS's mftypeatt; persistent, unlike
/// PSHFS's). Its pointer fields must lie inside the object. Returns 0, or
/// -1 with errno set (EINVAL: a field past the object's end).
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_mftypeatt(object: *const LarderMfobj, mftype: *const LarderMftype) -> c_int {
    boundary("larder_mftypeatt", -1, || operations::attach_type(current()?.as_ref(), object, mftype))
}

/// A deep copy of the object (PSHFS's mfclone), attached: every object
/// reachable through the typed pointers is copied once (shared nodes and
/// cycles kept) and the copies' pointers name the copies; all or nothing.
/// Returns NULL with errno set (EFAULT: a pointer to no object of the
/// heap or past its target; EINVAL: a type's field past its object).
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_mfclone(object: *const LarderMfobj) -> *mut LarderMfobj {
    boundary("larder_mfclone", std::ptr::null_mut(), || operations::clone(current()?.as_ref(), object))
}

/// The address `nptr` names in this process, attaching its object if
/// needed: object, bounds and generation checked. Returns NULL with errno
/// set (ENOENT: the object was freed; ESTALE: the `larder_mfalloc_in`
/// block was freed; EFAULT: null, or past the object's end).
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_mfderef(nptr: LarderNptr) -> *mut c_void {
    boundary("larder_mfderef", std::ptr::null_mut(), || operations::deref(current()?.as_ref(), nptr))
}

/// Grows the object to `size` bytes (zeros past the old end); objects
/// never shrink. Addresses into it stay valid unless it outgrows its
/// reservation (1 GiB, or twice its size when attached). Returns 0, or -1
/// with errno set (EINVAL: smaller than it is).
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_mfgrow(object: *const LarderMfobj, size: usize) -> c_int {
    boundary("larder_mfgrow", -1, || operations::grow(current()?.as_ref(), object, size))
}

/// The object's size in bytes, or -1 with errno set.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_mfsize(object: *const LarderMfobj) -> i64 {
    boundary("larder_mfsize", -1, || operations::size(current()?.as_ref(), object))
}

/// Makes the current heap durable: returns once every object's mapped
/// bytes and the heap's metadata are on disk, in that order. Returns 0,
/// or -1 with errno set.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_mfsync() -> c_int {
    boundary("larder_mfsync", -1, || operations::sync(current()?.as_ref()))
}

/// Allocates a block of `size` bytes aligned to `align` (a power of two
/// up to 4096) inside the attached object, for small objects that PSHFS
/// would have given a page each; the object grows by whole pages when its
/// allocator needs room. Returns the block's persistent pointer (its
/// generation set, so `larder_mfderef` refuses it once freed), or the
/// null pointer with errno set (EINVAL: a size of 0, a bad alignment).
/// Durable at the next `larder_mfsync`.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_mfalloc_in(object: *const LarderMfobj, size: usize, align: usize) -> LarderNptr {
    boundary("larder_mfalloc_in", NULL_NPTR, || operations::alloc_in(current()?.as_ref(), object, size, align))
}

/// Frees a block `larder_mfalloc_in` handed out. Returns 0, or -1 with
/// errno set (ESTALE: no live block there, freed already; EINVAL: null).
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_mffree_in(nptr: LarderNptr) -> c_int {
    boundary("larder_mffree_in", -1, || operations::free_in(current()?.as_ref(), nptr))
}
