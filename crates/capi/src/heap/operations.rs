//! What each heap call does, on an open heap: shared by the PSHFS-named
//! calls on the process's current heap (current.rs) and the calls on a
//! `larder_heap` handle (handles.rs).

use std::ffi::{c_int, c_void};

use larder_heap::limits;

use super::handed::ObjectState;
use super::open::OpenHeap;
use super::{LarderMfobj, LarderMftype, LarderNptr};
use crate::status::{Failure, Outcome};

/// A size from C as the heap's 64-bit size.
fn size64(size: usize) -> u64 {
    // usize is at most 64 bits on every target Rust supports for this.
    size as u64
}

/// mfalloc: a new object of `size` zero bytes, attached.
pub(crate) fn alloc(open: &OpenHeap, size: usize) -> Outcome<*mut LarderMfobj> {
    open.with(|heap, handed| {
        let id = heap.alloc(size64(size))?;
        Ok(handed.lock().hand_out(id))
    })
}

/// mfdreference: the address of the attached object's first byte.
pub(crate) fn dreference(open: &OpenHeap, object: *const LarderMfobj) -> Outcome<*mut c_void> {
    open.with(|heap, handed| {
        let id = handed.lock().open(object)?;
        Ok(heap.pointer(id)?.cast::<c_void>())
    })
}

/// mfaddname: gives the object the name `name` if no object has it.
pub(crate) fn add_name(open: &OpenHeap, object: *const LarderMfobj, name: &str) -> Outcome<c_int> {
    open.with(|heap, handed| {
        let id = handed.lock().open(object)?;
        heap.add_name(id, name)?;
        Ok(0)
    })
}

/// mfgetobjbyname: the object named `name`, attached.
pub(crate) fn get_by_name(open: &OpenHeap, name: &str) -> Outcome<*mut LarderMfobj> {
    open.with(|heap, handed| {
        let id = heap.get_by_name(name)?;
        Ok(handed.lock().hand_out(id))
    })
}

/// mfgetobj: the object `nptr` points into, attached.
pub(crate) fn get(open: &OpenHeap, nptr: LarderNptr) -> Outcome<*mut LarderMfobj> {
    if nptr.object == 0 {
        return Err(Failure::invalid("the nptr is null (object 0)"));
    }
    open.with(|heap, handed| {
        let id = heap.get(nptr.object)?;
        Ok(handed.lock().hand_out(id))
    })
}

/// mfnptr: the persistent pointer to the object's first byte.
pub(crate) fn nptr(open: &OpenHeap, object: *const LarderMfobj) -> Outcome<LarderNptr> {
    open.with(|_, handed| {
        let id = handed.lock().live(object)?;
        Ok(LarderNptr { object: id, offset: 0, generation: 0 })
    })
}

/// mfcloseobj: detaches the object; it stays in the heap.
pub(crate) fn close_object(open: &OpenHeap, object: *mut LarderMfobj) -> Outcome<c_int> {
    open.with(|heap, handed| {
        let id = handed.lock().open(object)?;
        heap.close_object(id)?;
        handed.lock().set_state(id, ObjectState::Closed);
        Ok(0)
    })
}

/// mffreeobj: removes the object and every name of it.
pub(crate) fn free(open: &OpenHeap, object: *mut LarderMfobj) -> Outcome<c_int> {
    open.with(|heap, handed| {
        let id = handed.lock().live(object)?;
        heap.free(id)?;
        handed.lock().set_state(id, ObjectState::Freed);
        Ok(0)
    })
}

/// mfcopy: a copy of the object alone, attached.
pub(crate) fn copy(open: &OpenHeap, object: *const LarderMfobj) -> Outcome<*mut LarderMfobj> {
    open.with(|heap, handed| {
        let id = handed.lock().open(object)?;
        let copy = heap.copy(id)?;
        Ok(handed.lock().hand_out(copy))
    })
}

/// mfclone: a deep copy through typed pointers, its root attached.
pub(crate) fn clone(open: &OpenHeap, object: *const LarderMfobj) -> Outcome<*mut LarderMfobj> {
    open.with(|heap, handed| {
        let id = handed.lock().open(object)?;
        let copy = heap.clone(id)?;
        Ok(handed.lock().hand_out(copy))
    })
}

/// mfalloctype: a type whose pointer fields are at `offsets`.
pub(crate) fn alloc_type(open: &OpenHeap, offsets: &[usize]) -> Outcome<*mut LarderMftype> {
    let offsets: Vec<u64> = offsets.iter().map(|&o| size64(o)).collect();
    open.with(|heap, handed| {
        let id = heap.alloc_type(&offsets)?;
        Ok(handed.lock().hand_out_type(id, offsets.len()))
    })
}

/// mftypeatt: attaches the type to the object.
pub(crate) fn attach_type(open: &OpenHeap, object: *const LarderMfobj, mftype: *const LarderMftype) -> Outcome<c_int> {
    open.with(|heap, handed| {
        let (id, type_id) = {
            let handed = handed.lock();
            (handed.open(object)?, handed.type_id(mftype)?)
        };
        heap.attach_type(id, type_id)?;
        Ok(0)
    })
}

/// Grows the object to `size` bytes (never shrinks).
pub(crate) fn grow(open: &OpenHeap, object: *const LarderMfobj, size: usize) -> Outcome<c_int> {
    open.with(|heap, handed| {
        let id = handed.lock().open(object)?;
        heap.grow(id, size64(size))?;
        Ok(0)
    })
}

/// The object's size in bytes.
pub(crate) fn size(open: &OpenHeap, object: *const LarderMfobj) -> Outcome<i64> {
    open.with(|heap, handed| {
        let id = handed.lock().open(object)?;
        let size = heap.size(id)?;
        // Objects are at most 2^63 - 1 bytes (limits::MAX_OBJECT_BYTES).
        i64::try_from(size).map_err(|_| Failure::new(libc::EOVERFLOW, format!("object {id} has {size} bytes")))
    })
}

/// Makes every change to the heap so far durable.
pub(crate) fn sync(open: &OpenHeap) -> Outcome<c_int> {
    open.with(|heap, _| {
        heap.sync()?;
        Ok(0)
    })
}

/// The address `nptr` names, its object, bounds and generation checked.
pub(crate) fn deref(open: &OpenHeap, nptr: LarderNptr) -> Outcome<*mut c_void> {
    open.with(|heap, _| Ok(heap.deref(nptr)?.cast::<c_void>()))
}

/// A block of `size` bytes aligned to `align` inside the object, from
/// its allocator.
pub(crate) fn alloc_in(open: &OpenHeap, object: *const LarderMfobj, size: usize, align: usize) -> Outcome<LarderNptr> {
    open.with(|heap, handed| {
        let id = handed.lock().open(object)?;
        heap.alloc_in(id, size64(size), size64(align))
    })
}

/// Frees a block `alloc_in` handed out.
pub(crate) fn free_in(open: &OpenHeap, nptr: LarderNptr) -> Outcome<c_int> {
    if nptr.object == 0 {
        return Err(Failure::invalid("the nptr is null (object 0)"));
    }
    open.with(|heap, _| {
        heap.free_in(nptr)?;
        Ok(0)
    })
}

/// A type's offsets from C: `count` of them at `offsets` (NULL only with
/// a count of 0), at most the heap's limit.
///
/// # Safety
/// `offsets` is NULL or valid for reads of `count` `size_t`s that no one
/// changes during the call.
#[allow(unsafe_code)]
pub(crate) unsafe fn offsets<'a>(offsets: *const usize, count: usize) -> Outcome<&'a [usize]> {
    if count == 0 {
        return Ok(&[]);
    }
    if offsets.is_null() {
        return Err(Failure::invalid(format!("the offsets are NULL with a count of {count}")));
    }
    if count > limits::MAX_TYPE_POINTERS {
        return Err(Failure::invalid(format!(
            "{count} offsets: a type has at most {} pointers",
            limits::MAX_TYPE_POINTERS
        )));
    }
    if !offsets.is_aligned() {
        return Err(Failure::invalid("the offsets are not aligned for size_t"));
    }
    // SAFETY: not NULL, aligned (checked), `count` is small (checked), and
    // the caller guarantees `count` readable size_ts for the call.
    Ok(unsafe { std::slice::from_raw_parts(offsets, count) })
}
