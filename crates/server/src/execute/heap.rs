//! Heap requests (`HeapOpen`, `Heap`, `HeapClose`): each the
//! `larder_heap::Heap` call of the same name on the session's heap, which
//! acts with the client's credentials (docs/heap.md, "Sharing between
//! processes"). An attach sends the object's file descriptor on the
//! client's socket and keeps none open.

use std::os::fd::AsFd;

use larder_fs::FsError;
use larder_heap::{Credentials, Heap, HeapError, ObjectId, PPtr, TypeId};
use larder_protocol::message::{HeapOperation, HeapPointer, Response};

use super::{Call, Outcome, Refusal};
use crate::error::Violation;

/// The errno a heap error gives the client.
pub(crate) fn heap_error(error: HeapError) -> Refusal {
    let errno = match &error {
        HeapError::NotFound { .. } => libc::ENOENT,
        HeapError::AlreadyExists { .. } => libc::EEXIST,
        HeapError::Stale { .. } => libc::ESTALE,
        HeapError::Shrunk { .. } => libc::EIO,
        HeapError::PermissionDenied { .. } => libc::EACCES,
        HeapError::BadType { .. } | HeapError::InvalidArgument { .. } => libc::EINVAL,
        HeapError::BadPointer { .. } => libc::EFAULT,
        HeapError::OutOfBounds { .. } => libc::ERANGE,
        HeapError::NotAHeap { .. } => libc::ENOTDIR,
        HeapError::BigEndian => libc::EOPNOTSUPP,
        _ => libc::EIO,
    };
    Refusal::Fs(FsError::posix(errno, error.to_string()))
}

fn heap_result<T>(result: larder_heap::Result<T>) -> Result<T, Refusal> {
    result.map_err(heap_error)
}

/// `HeapOpen`: the heap at `path`, opened (created if absent) with the
/// client's credentials.
pub(super) fn open(call: &Call<'_>, path: &[u8]) -> Outcome {
    let path = std::str::from_utf8(path).map_err(|_| FsError::posix(libc::EINVAL, "a heap path must be UTF-8"))?;
    let heaps = call.session.heaps();
    heaps.reserve(call.session.limits().max_open_heaps)?;
    let credentials = Credentials { uid: call.cred.uid, gid: call.cred.gid, groups: call.session.groups().to_vec() };
    match Heap::open(call.fs.store(), path, credentials) {
        Ok(heap) => match heaps.fill(Some(heap)) {
            Some(handle) => Ok(Response::Handle(handle)),
            None => Err(FsError::posix(libc::EIO, "the heap's slot was lost").into()),
        },
        Err(e) => {
            heaps.fill(None);
            Err(heap_error(e))
        }
    }
}

/// `HeapClose`: drops the heap from the session, synced first if asked.
pub(super) fn close(call: &Call<'_>, handle: u64, sync: bool) -> Outcome {
    let heap = call.session.heaps().remove(handle)?;
    if sync {
        heap_result(heap.sync())?;
    }
    Ok(Response::Done)
}

/// `Heap`: one operation on an open heap.
pub(super) fn operation(call: &Call<'_>, handle: u64, operation: HeapOperation) -> Outcome {
    use HeapOperation as H;
    let heap = call.session.heaps().get(handle)?;
    let name = |bytes: &[u8]| -> Result<String, Refusal> {
        String::from_utf8(bytes.to_vec()).map_err(|_| FsError::posix(libc::EINVAL, "a heap name must be UTF-8").into())
    };
    match operation {
        H::Alloc { size } => {
            let object = heap_result(heap.alloc(size))?;
            // The server does not use the bytes: unmapped here, the
            // object stays in the set the heap's next sync makes durable.
            heap_result(heap.close_object(object))?;
            Ok(Response::HeapObject(object.0))
        }
        H::Attach { object, write, tag, received } => attach(call, &heap, object, write, tag, received),
        H::Size { object } => Ok(Response::Length(heap_result(size_of(&heap, object))?)),
        H::GetByName { name: n } => Ok(Response::HeapObject(heap_result(heap.get_by_name(&name(&n)?))?.0)),
        H::AddName { object, name: n } => {
            heap_result(heap.add_name(ObjectId(object), &name(&n)?))?;
            Ok(Response::Done)
        }
        H::Names { object } => {
            let names = heap_result(heap.names(ObjectId(object)))?;
            Ok(Response::Names(names.into_iter().map(String::into_bytes).collect()))
        }
        H::Free { object } => {
            heap_result(heap.free(ObjectId(object)))?;
            Ok(Response::Done)
        }
        H::Copy { object } => {
            let copy = heap_result(heap.copy(ObjectId(object)))?;
            unmap(&heap, &[object, copy.0]);
            Ok(Response::HeapObject(copy.0))
        }
        H::Clone { object } => {
            let clone = heap_result(Heap::clone(&heap, ObjectId(object)))?;
            unmap(&heap, &[object, clone.0]);
            Ok(Response::HeapObject(clone.0))
        }
        H::AllocType { offsets } => Ok(Response::HeapType(Some(heap_result(heap.alloc_type(&offsets))?.0))),
        H::AttachType { object, type_id } => {
            heap_result(heap.attach_type(ObjectId(object), TypeId(type_id)))?;
            Ok(Response::Done)
        }
        H::TypeOf { object } => Ok(Response::HeapType(heap_result(heap.type_of(ObjectId(object)))?.map(|t| t.0))),
        H::Grow { object, size } => {
            heap_result(heap.grow(ObjectId(object), size))?;
            unmap(&heap, &[object]);
            Ok(Response::Done)
        }
        H::Check { pointer, length } => {
            heap_result(heap.check(pptr(pointer), length))?;
            Ok(Response::Done)
        }
        H::Sync => {
            heap_result(heap.sync())?;
            Ok(Response::Done)
        }
        H::AllocIn { object, size, align } => {
            let id = ObjectId(object);
            // `alloc_in` maps the object: its size (the allocator may have
            // grown it) is read before it is unmapped again.
            let allocated = heap.alloc_in(id, size, align).and_then(|block| Ok((block, heap.size(id)?)));
            unmap(&heap, &[object]);
            let (block, object_size) = heap_result(allocated)?;
            let pointer = HeapPointer { object: block.object, offset: block.offset, generation: block.generation };
            Ok(Response::HeapBlock { pointer, object_size })
        }
        H::FreeIn { pointer } => {
            let freed = heap_result(heap.free_in(pptr(pointer)));
            unmap(&heap, &[pointer.object]);
            freed?;
            Ok(Response::Done)
        }
    }
}

fn pptr(pointer: HeapPointer) -> PPtr<()> {
    PPtr::from_bytes(&{
        let mut bytes = [0u8; 24];
        bytes[..8].copy_from_slice(&pointer.object.to_le_bytes());
        bytes[8..16].copy_from_slice(&pointer.offset.to_le_bytes());
        bytes[16..].copy_from_slice(&pointer.generation.to_le_bytes());
        bytes
    })
}

/// An object's size: attaches it (the heap's checks: in this heap, not
/// shrunk, readable by the client) and unmaps it again.
fn size_of(heap: &Heap, object: u64) -> larder_heap::Result<u64> {
    let id = heap.get(ObjectId(object))?;
    let size = heap.size(id);
    heap.close_object(id)?;
    size
}

/// Unmaps objects an operation mapped in the server (it never uses their
/// bytes itself); a failure leaves a mapping until the heap closes.
fn unmap(heap: &Heap, objects: &[u64]) {
    for &object in objects {
        let _ = heap.close_object(ObjectId(object));
    }
}

/// Attach: the heap's checks (the object is in this heap, its file is not
/// shorter than its size, the client may read it), then the file opened
/// read-write only if the client asked to write and may, sent on the
/// socket, and closed here.
fn attach(call: &Call<'_>, heap: &Heap, object: u64, write: bool, tag: u64, received: u64) -> Outcome {
    let heaps = call.session.heaps();
    let sent = heaps.sent();
    if received > sent {
        return Err(Violation::new(format!("claims {received} descriptors taken, {sent} were sent")).into());
    }
    let max = call.session.limits().max_heap_descriptors_in_flight;
    if sent - received >= max {
        return Err(FsError::posix(
            libc::EAGAIN,
            format!("{max} descriptors sent and not taken, the limit (max_heap_descriptors_in_flight)"),
        )
        .into());
    }
    let id = heap_result(heap.get(ObjectId(object)))?;
    let attached = (|| -> larder_heap::Result<(u64, bool)> { Ok((heap.size(id)?, heap.is_writable(id)?)) })();
    // Unmapped here whatever happens next; a writable object stays in the
    // set the heap's next sync makes durable (the client writes its pages).
    let closed = heap.close_object(id);
    let (size, may_write) = heap_result(attached)?;
    heap_result(closed)?;
    let writable = write && may_write;
    let path = call.fs.store().heap_file_path(id.0);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(writable)
        .open(&path)
        .map_err(|e| FsError::posix(e.raw_os_error().unwrap_or(libc::EIO), format!("open object {object}: {e}")))?;
    // Freed since the checks above: the file opened may be an emptied spare
    // the heap will rename to a new object (it reuses only files nothing
    // holds open, so once the record is seen here after the open, a later
    // free leaves this file alone).
    let freed = match call.fs.store().heap_object(id.0) {
        Ok(record) => record.is_none(),
        Err(e) => return Err(FsError::posix(libc::EIO, format!("object {object}'s record: {e}")).into()),
    };
    if freed {
        return Err(heap_error(HeapError::NotFound { what: format!("object {object}") }));
    }
    let file_len = file.metadata().map_err(|e| FsError::posix(libc::EIO, format!("stat object {object}: {e}")))?.len();
    if file_len < size {
        return Err(heap_error(HeapError::Shrunk { object, file_len, durable: size }));
    }
    heaps.send(tag, file.as_fd())?;
    // `file` closes here: the client holds the only descriptor.
    Ok(Response::HeapAttached { object, size, writable })
}
