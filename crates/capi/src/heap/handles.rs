//! Heaps as handles: `larder_heap_open` opens any number of heaps (of one
//! store or several), and the `larder_heap_*` calls take the handle; each
//! does what the `larder_mf*` call of the same name does on the current
//! heap.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::path::Path;
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;

use super::open::{OpenHeap, DEFAULT_HEAP_PATH};
use super::operations;
use super::{text, LarderHeap, LarderMfobj, LarderMftype, LarderNptr, LARDER_HEAP_CREATE, NULL_NPTR};
use crate::arguments;
use crate::status::{boundary, Failure, Outcome};

/// The open handles, by the address of their `LarderHeap` (from
/// `Box::into_raw`). A handle C passes is looked up here, never read.
static HANDLES: LazyLock<Mutex<HashMap<usize, Arc<OpenHeap>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// The heap behind `heap`: EINVAL for NULL, EBADF for a handle that is not
/// open.
fn handle(heap: *const LarderHeap) -> Outcome<Arc<OpenHeap>> {
    if heap.is_null() {
        return Err(Failure::invalid("the heap is NULL"));
    }
    HANDLES
        .lock()
        .get(&(heap as usize))
        .cloned()
        .ok_or_else(|| Failure::new(libc::EBADF, "not an open larder_heap (closed, or never opened)"))
}

/// Opens the heap `heap_path` (NULL: `/heap`) of the store in the
/// directory `store`, embedded or through the server that serves the
/// store (as `larder_mfdopen`), creating the heap if absent; with
/// `LARDER_HEAP_CREATE` in `flags`, the store too. Any number of heaps may
/// be open at once, of one store or several. Returns the heap, or NULL
/// with errno set (as `larder_mfdopen`, and EINVAL for unknown flags).
///
/// # Safety
/// `store` and `heap_path` are NULL or NUL-terminated strings.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_heap_open(
    store: *const c_char,
    heap_path: *const c_char,
    flags: c_int,
) -> *mut LarderHeap {
    boundary("larder_heap_open", std::ptr::null_mut(), || {
        if flags & !LARDER_HEAP_CREATE != 0 {
            return Err(Failure::invalid(format!("flags {flags:#x}: only LARDER_HEAP_CREATE is known")));
        }
        // SAFETY: the caller passes NULL or NUL-terminated strings.
        let store = unsafe { arguments::path(store, "store") }?;
        let heap_path = if heap_path.is_null() {
            DEFAULT_HEAP_PATH
        } else {
            // SAFETY: as above.
            unsafe { text(heap_path, "heap_path") }?
        };
        let open = Arc::new(OpenHeap::open(Path::new(store), heap_path, flags & LARDER_HEAP_CREATE != 0)?);
        let address = Box::into_raw(Box::new(LarderHeap { _unique: 0 }));
        HANDLES.lock().insert(address as usize, open);
        Ok(address)
    })
}

/// Closes a heap opened by `larder_heap_open` (as `larder_mfclose`): makes
/// it durable, unmaps its objects, frees the handle and its mfobj and
/// mftype structs, and closes the store with its last heap. Returns 0, or
/// -1 with errno set (EBADF: not open).
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_heap_close(heap: *mut LarderHeap) -> c_int {
    boundary("larder_heap_close", -1, || {
        if heap.is_null() {
            return Err(Failure::invalid("the heap is NULL"));
        }
        let (address, open) = HANDLES
            .lock()
            .remove_entry(&(heap as usize))
            .ok_or_else(|| Failure::new(libc::EBADF, "not an open larder_heap (closed, or never opened)"))?;
        // SAFETY: the address was a key of HANDLES, so it came from
        // `Box::into_raw` in larder_heap_open; taking it out of the map
        // above makes this the one place that frees it.
        drop(unsafe { Box::from_raw(address as *mut LarderHeap) });
        open.close()?;
        Ok(0)
    })
}

/// `larder_mfalloc` on `heap`.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_heap_alloc(heap: *const LarderHeap, size: usize) -> *mut LarderMfobj {
    boundary("larder_heap_alloc", std::ptr::null_mut(), || operations::alloc(handle(heap)?.as_ref(), size))
}

/// `larder_mfdreference` on `heap`.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_heap_dreference(heap: *const LarderHeap, object: *const LarderMfobj) -> *mut c_void {
    boundary("larder_heap_dreference", std::ptr::null_mut(), || operations::dreference(handle(heap)?.as_ref(), object))
}

/// `larder_mfaddname` on `heap`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_heap_addname(
    heap: *const LarderHeap,
    object: *const LarderMfobj,
    name: *const c_char,
) -> c_int {
    boundary("larder_heap_addname", -1, || {
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        let name = unsafe { text(name, "name") }?;
        operations::add_name(handle(heap)?.as_ref(), object, name)
    })
}

/// `larder_mfgetobjbyname` on `heap`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_heap_getobjbyname(heap: *const LarderHeap, name: *const c_char) -> *mut LarderMfobj {
    boundary("larder_heap_getobjbyname", std::ptr::null_mut(), || {
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        let name = unsafe { text(name, "name") }?;
        operations::get_by_name(handle(heap)?.as_ref(), name)
    })
}

/// `larder_mfgetobj` on `heap`.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_heap_getobj(heap: *const LarderHeap, nptr: LarderNptr) -> *mut LarderMfobj {
    boundary("larder_heap_getobj", std::ptr::null_mut(), || operations::get(handle(heap)?.as_ref(), nptr))
}

/// `larder_mfnptr` on `heap`.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_heap_nptr(heap: *const LarderHeap, object: *const LarderMfobj) -> LarderNptr {
    boundary("larder_heap_nptr", NULL_NPTR, || operations::nptr(handle(heap)?.as_ref(), object))
}

/// `larder_mfcloseobj` on `heap`.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_heap_closeobj(heap: *const LarderHeap, object: *mut LarderMfobj) -> c_int {
    boundary("larder_heap_closeobj", -1, || operations::close_object(handle(heap)?.as_ref(), object))
}

/// `larder_mffreeobj` on `heap`.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_heap_freeobj(heap: *const LarderHeap, object: *mut LarderMfobj) -> c_int {
    boundary("larder_heap_freeobj", -1, || operations::free(handle(heap)?.as_ref(), object))
}

/// `larder_mfcopy` on `heap`.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_heap_copy(heap: *const LarderHeap, object: *const LarderMfobj) -> *mut LarderMfobj {
    boundary("larder_heap_copy", std::ptr::null_mut(), || operations::copy(handle(heap)?.as_ref(), object))
}

/// `larder_mfalloctype` on `heap`.
///
/// # Safety
/// `offsets` is NULL or valid for reads of `count` `size_t`s.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub unsafe extern "C" fn larder_heap_alloctype(
    heap: *const LarderHeap,
    offsets: *const usize,
    count: usize,
) -> *mut LarderMftype {
    boundary("larder_heap_alloctype", std::ptr::null_mut(), || {
        // SAFETY: the caller passes NULL or `count` readable size_ts.
        let offsets = unsafe { operations::offsets(offsets, count) }?;
        operations::alloc_type(handle(heap)?.as_ref(), offsets)
    })
}

/// `larder_mftypeatt` on `heap`.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_heap_typeatt(
    heap: *const LarderHeap,
    object: *const LarderMfobj,
    mftype: *const LarderMftype,
) -> c_int {
    boundary("larder_heap_typeatt", -1, || operations::attach_type(handle(heap)?.as_ref(), object, mftype))
}

/// `larder_mfclone` on `heap`.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_heap_clone(heap: *const LarderHeap, object: *const LarderMfobj) -> *mut LarderMfobj {
    boundary("larder_heap_clone", std::ptr::null_mut(), || operations::clone(handle(heap)?.as_ref(), object))
}

/// `larder_mfderef` on `heap`.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_heap_deref(heap: *const LarderHeap, nptr: LarderNptr) -> *mut c_void {
    boundary("larder_heap_deref", std::ptr::null_mut(), || operations::deref(handle(heap)?.as_ref(), nptr))
}

/// `larder_mfgrow` on `heap`.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_heap_grow(heap: *const LarderHeap, object: *const LarderMfobj, size: usize) -> c_int {
    boundary("larder_heap_grow", -1, || operations::grow(handle(heap)?.as_ref(), object, size))
}

/// `larder_mfsize` on `heap`.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_heap_size(heap: *const LarderHeap, object: *const LarderMfobj) -> i64 {
    boundary("larder_heap_size", -1, || operations::size(handle(heap)?.as_ref(), object))
}

/// `larder_mfsync` on `heap`.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_heap_sync(heap: *const LarderHeap) -> c_int {
    boundary("larder_heap_sync", -1, || operations::sync(handle(heap)?.as_ref()))
}

/// `larder_mfalloc_in` on `heap`.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_heap_alloc_in(
    heap: *const LarderHeap,
    object: *const LarderMfobj,
    size: usize,
    align: usize,
) -> LarderNptr {
    boundary("larder_heap_alloc_in", NULL_NPTR, || operations::alloc_in(handle(heap)?.as_ref(), object, size, align))
}

/// `larder_mffree_in` on `heap`.
#[allow(unsafe_code)]
// SAFETY: `no_mangle` exports the symbol under its own name; every
// exported name of this library starts with `larder_`, so none clashes.
#[no_mangle]
pub extern "C" fn larder_heap_free_in(heap: *const LarderHeap, nptr: LarderNptr) -> c_int {
    boundary("larder_heap_free_in", -1, || operations::free_in(handle(heap)?.as_ref(), nptr))
}
