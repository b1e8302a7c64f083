//! A served heap ([`RemoteHeap`], from [`Client::heap`](crate::Client::heap)):
//! `larder_heap::Heap`'s calls over the protocol. Metadata (allocation,
//! names, types, frees, growth) are requests the server executes and logs
//! with this process's credentials; an object's bytes are its file mapped
//! here `MAP_SHARED`, from the descriptor the server sends on the socket,
//! closed at once (docs/heap.md, "Sharing between processes").

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use larder_protocol::message::{HeapOperation, HeapPointer, Request, Response};
use parking_lot::{Mutex, RwLock};

use crate::connection::Connection;
use crate::error::{ClientError, Result};
use crate::heap_mapping::Mapping;

/// Least bytes reserved for an attached object (as the embedded heap).
const MIN_RESERVE_BYTES: u64 = 1 << 30;

/// The reservation for an object of `len` bytes.
fn reserve_for(len: u64) -> u64 {
    len.saturating_mul(2).max(MIN_RESERVE_BYTES)
}

/// An object mapped into this process.
#[derive(Debug)]
struct Attached {
    mapping: RwLock<Arc<Mapping>>,
    /// Mappings replaced when the object outgrew a reservation: kept until
    /// the object is closed, so raw pointers into them stay valid memory.
    retired: Mutex<Vec<Arc<Mapping>>>,
    size: AtomicU64,
    writable: bool,
}

impl Attached {
    fn check(&self, object: u64, offset: u64, len: u64) -> Result<()> {
        let size = self.size.load(Ordering::Acquire);
        match offset.checked_add(len) {
            Some(end) if end <= size => Ok(()),
            _ => Err(ClientError::Server {
                errno: libc::ERANGE,
                message: format!("{len} bytes at {offset} are outside object {object} ({size} bytes)"),
            }),
        }
    }
}

/// A heap the server holds open for this client. `Send + Sync`.
pub struct RemoteHeap {
    connection: Arc<Connection>,
    handle: u64,
    attached: RwLock<HashMap<u64, Arc<Attached>>>,
    /// Closed on the server by `close`.
    closed: bool,
}

impl Drop for RemoteHeap {
    fn drop(&mut self) {
        if !self.closed {
            // The server's handle is freed; a server that is gone has
            // nothing to free.
            let _ = self.connection.call(&Request::HeapClose { heap: self.handle, sync: false });
        }
    }
}

impl std::fmt::Debug for RemoteHeap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteHeap").field("handle", &self.handle).finish()
    }
}

fn unexpected(what: &'static str, response: Response) -> ClientError {
    ClientError::Unexpected { request: what, response: response.to_string() }
}

impl RemoteHeap {
    /// Opens the heap at `path` on the server (PSHFS's mfdopen).
    pub(crate) fn open(connection: Arc<Connection>, path: &str) -> Result<RemoteHeap> {
        match connection.call(&Request::HeapOpen { path: path.as_bytes().to_vec() })? {
            Response::Handle(handle) => {
                Ok(RemoteHeap { connection, handle, attached: RwLock::new(HashMap::new()), closed: false })
            }
            other => Err(unexpected("HeapOpen", other)),
        }
    }

    fn call(&self, operation: HeapOperation) -> Result<Response> {
        self.connection.call(&Request::Heap { heap: self.handle, operation })
    }

    fn done(&self, what: &'static str, operation: HeapOperation) -> Result<()> {
        match self.call(operation)? {
            Response::Done => Ok(()),
            other => Err(unexpected(what, other)),
        }
    }

    fn object(&self, what: &'static str, operation: HeapOperation) -> Result<u64> {
        match self.call(operation)? {
            Response::HeapObject(object) => Ok(object),
            other => Err(unexpected(what, other)),
        }
    }

    /// Allocates an object of `size` zero bytes and maps it (mfalloc).
    pub fn alloc(&self, size: u64) -> Result<u64> {
        let object = self.object("Heap.Alloc", HeapOperation::Alloc { size })?;
        self.attach(object)?;
        Ok(object)
    }

    /// Maps `object` if it is not, and returns it (mfgetobj). An object
    /// mapped already takes in a growth another process made.
    pub fn get(&self, object: u64) -> Result<u64> {
        let known = self.attached.read().get(&object).cloned();
        match known {
            None => {
                self.attach(object)?;
            }
            Some(attached) => {
                let size = self.server_size(object)?;
                self.grown(object, &attached, size)?;
            }
        }
        Ok(object)
    }

    /// The object's first byte in this process (mfdreference): valid until
    /// `close_object`, or until a growth past its reservation moves it.
    pub fn pointer(&self, object: u64) -> Result<*mut u8> {
        Ok(self.attached(object)?.mapping.read().base())
    }

    /// A persistent pointer to the object's first byte (mfnptr).
    pub fn nptr(&self, object: u64) -> Result<HeapPointer> {
        self.attached(object)?;
        Ok(HeapPointer { object, offset: 0, generation: 0 })
    }

    /// The object's size as this process knows it (mapped), else as the
    /// server says.
    pub fn size(&self, object: u64) -> Result<u64> {
        match self.attached.read().get(&object) {
            Some(attached) => Ok(attached.size.load(Ordering::Acquire)),
            None => self.server_size(object),
        }
    }

    /// Whether this process mapped the object writable.
    pub fn is_writable(&self, object: u64) -> Result<bool> {
        Ok(self.attached(object)?.writable)
    }

    /// Unmaps the object (mfcloseobj); its bytes stay in the file.
    pub fn close_object(&self, object: u64) -> Result<()> {
        self.attached.write().remove(&object);
        Ok(())
    }

    /// Copies `buf.len()` bytes of the object at `offset` into `buf`.
    pub fn read_at(&self, object: u64, offset: u64, buf: &mut [u8]) -> Result<()> {
        let attached = self.attached(object)?;
        attached.check(object, offset, buf.len() as u64)?;
        let mapping = attached.mapping.read().clone();
        #[allow(unsafe_code)]
        // SAFETY: `[offset, offset + len)` is inside the object's size,
        // which never exceeds the mapping's reservation (a growth past it
        // maps anew before the size is raised), and `mapping` keeps it
        // mapped for the copy. Other processes may store to these bytes:
        // the copy reads through raw pointers and forms no reference.
        unsafe {
            std::ptr::copy_nonoverlapping(mapping.base().add(offset as usize), buf.as_mut_ptr(), buf.len());
        }
        Ok(())
    }

    /// Copies `data` into the object at `offset` (a read-only mapping is
    /// EACCES).
    pub fn write_at(&self, object: u64, offset: u64, data: &[u8]) -> Result<()> {
        let attached = self.attached(object)?;
        if !attached.writable {
            return Err(ClientError::Server {
                errno: libc::EACCES,
                message: format!("object {object} is mapped read-only"),
            });
        }
        attached.check(object, offset, data.len() as u64)?;
        let mapping = attached.mapping.read().clone();
        #[allow(unsafe_code)]
        // SAFETY: as for `read_at`; the mapping is writable (checked).
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), mapping.base().add(offset as usize), data.len());
        }
        Ok(())
    }

    /// Grows the object to `new_size` bytes (never shrinks): the server
    /// extends the file and logs the size; a mapping here takes in the new
    /// pages at the same base, or is mapped anew past its reservation.
    pub fn grow(&self, object: u64, new_size: u64) -> Result<()> {
        self.done("Heap.Grow", HeapOperation::Grow { object, size: new_size })?;
        let known = self.attached.read().get(&object).cloned();
        if let Some(attached) = known {
            self.grown(object, &attached, new_size)?;
        }
        Ok(())
    }

    /// Names the object if the name is free (mfaddname): one of racing
    /// processes wins, the others get EEXIST.
    pub fn add_name(&self, object: u64, name: &str) -> Result<()> {
        self.done("Heap.AddName", HeapOperation::AddName { object, name: name.as_bytes().to_vec() })
    }

    /// The object a name names (mfgetobjbyname), or ENOENT; not mapped.
    pub fn get_by_name(&self, name: &str) -> Result<u64> {
        self.object("Heap.GetByName", HeapOperation::GetByName { name: name.as_bytes().to_vec() })
    }

    /// The object's names, in byte order.
    pub fn names(&self, object: u64) -> Result<Vec<String>> {
        match self.call(HeapOperation::Names { object })? {
            Response::Names(names) => Ok(names.into_iter().map(|n| String::from_utf8_lossy(&n).into_owned()).collect()),
            other => Err(unexpected("Heap.Names", other)),
        }
    }

    /// Frees the object and drops all its names (mffreeobj); unmapped here.
    pub fn free(&self, object: u64) -> Result<()> {
        self.done("Heap.Free", HeapOperation::Free { object })?;
        self.attached.write().remove(&object);
        Ok(())
    }

    /// A new object with the object's bytes and type (mfcopy).
    pub fn copy(&self, object: u64) -> Result<u64> {
        self.object("Heap.Copy", HeapOperation::Copy { object })
    }

    /// A deep copy through typed pointers (mfclone): the new root.
    pub fn clone(&self, object: u64) -> Result<u64> {
        self.object("Heap.Clone", HeapOperation::Clone { object })
    }

    /// A type whose pointer fields are at `offsets` (mfalloctype).
    pub fn alloc_type(&self, offsets: &[u64]) -> Result<u64> {
        match self.call(HeapOperation::AllocType { offsets: offsets.to_vec() })? {
            Response::HeapType(Some(type_id)) => Ok(type_id),
            other => Err(unexpected("Heap.AllocType", other)),
        }
    }

    /// Gives the object a type (mftypeatt).
    pub fn attach_type(&self, object: u64, type_id: u64) -> Result<()> {
        self.done("Heap.AttachType", HeapOperation::AttachType { object, type_id })
    }

    /// The object's type, if it has one.
    pub fn type_of(&self, object: u64) -> Result<Option<u64>> {
        match self.call(HeapOperation::TypeOf { object })? {
            Response::HeapType(type_id) => Ok(type_id),
            other => Err(unexpected("Heap.TypeOf", other)),
        }
    }

    /// Allocates a block of `size` bytes aligned to `align` (a power of
    /// two up to 4096) inside `object`, which this client must be allowed
    /// to write (else EACCES). The server's allocator may grow the object:
    /// its mapping here takes the growth in (in place inside the
    /// reservation, mapped anew past it), and the object is mapped if it
    /// was not, so `pointer` and `deref` reach the block at once. The block
    /// is durable at the next `sync`.
    pub fn alloc_in(&self, object: u64, size: u64, align: u64) -> Result<HeapPointer> {
        let (pointer, object_size) = match self.call(HeapOperation::AllocIn { object, size, align })? {
            Response::HeapBlock { pointer, object_size } => (pointer, object_size),
            other => return Err(unexpected("Heap.AllocIn", other)),
        };
        let block_end = pointer.offset.checked_add(size);
        if pointer.object != object || block_end.is_none_or(|end| end > object_size) {
            return Err(ClientError::Protocol(format!(
                "the server placed a {size}-byte block for object {object} at {pointer:?}, \
                 outside the object's {object_size} bytes"
            )));
        }
        let known = self.attached.read().get(&object).cloned();
        match known {
            Some(attached) => self.grown(object, &attached, object_size)?,
            None => {
                self.attach(object)?;
            }
        }
        Ok(pointer)
    }

    /// Frees a block `alloc_in` handed out: every process's `deref` of it
    /// is ESTALE from then on. A pointer that names no live block is
    /// ESTALE too.
    pub fn free_in(&self, pointer: HeapPointer) -> Result<()> {
        self.done("Heap.FreeIn", HeapOperation::FreeIn { pointer })
    }

    /// The address `pointer` names here: a whole `T` at its offset inside
    /// the mapped object and aligned (checked here), its object live and
    /// its generation live (the server's check). Maps the object if needed.
    pub fn deref<T>(&self, pointer: HeapPointer) -> Result<*mut T> {
        let len = std::mem::size_of::<T>() as u64;
        let bad = |reason: &str| ClientError::Server {
            errno: libc::EFAULT,
            message: format!("pointer to {} at {}: {reason}", pointer.object, pointer.offset),
        };
        if pointer.object == 0 {
            return Err(bad("null"));
        }
        if !pointer.offset.is_multiple_of(std::mem::align_of::<T>() as u64) {
            return Err(bad("misaligned for its type"));
        }
        self.done("Heap.Check", HeapOperation::Check { pointer, length: len })?;
        if !self.attached.read().contains_key(&pointer.object) {
            self.attach(pointer.object)?;
        }
        let attached = self.attached(pointer.object)?;
        if attached.check(pointer.object, pointer.offset, len).is_err() {
            // The server found the bytes inside the object: it grew since
            // this process looked (another client's `alloc_in` or `grow`).
            let size = self.server_size(pointer.object)?;
            self.grown(pointer.object, &attached, size)?;
            attached.check(pointer.object, pointer.offset, len)?;
        }
        let base = attached.mapping.read().base();
        #[allow(unsafe_code)]
        // SAFETY: `offset + size_of::<T>()` is inside the object (checked),
        // so the result stays inside the mapping `base` starts.
        let address = unsafe { base.add(pointer.offset as usize) };
        Ok(address.cast::<T>())
    }

    /// Returns once the heap's mapped bytes (this process's writes
    /// included: they are the file's pages) and its metadata are on disk.
    pub fn sync(&self) -> Result<()> {
        self.done("Heap.Sync", HeapOperation::Sync)
    }

    /// Syncs and closes the heap on the server and unmaps every object
    /// (mfclose). Dropping a heap without closing it closes it on the
    /// server without syncing, as an embedded heap dropped.
    pub fn close(mut self) -> Result<()> {
        self.attached.write().clear();
        self.closed = true;
        match self.connection.call(&Request::HeapClose { heap: self.handle, sync: true })? {
            Response::Done => Ok(()),
            other => Err(unexpected("HeapClose", other)),
        }
    }

    fn attached(&self, object: u64) -> Result<Arc<Attached>> {
        self.attached.read().get(&object).cloned().ok_or_else(|| ClientError::Server {
            errno: libc::EBADF,
            message: format!("object {object} is not attached in this process (get it first)"),
        })
    }

    fn server_size(&self, object: u64) -> Result<u64> {
        match self.call(HeapOperation::Size { object })? {
            Response::Length(size) => Ok(size),
            other => Err(unexpected("Heap.Size", other)),
        }
    }

    /// Asks the server for the object's descriptor and maps it.
    fn attach(&self, object: u64) -> Result<Arc<Attached>> {
        let (size, writable, mapping) = self.map_anew(object, 0)?;
        let attached = Arc::new(Attached {
            mapping: RwLock::new(Arc::new(mapping)),
            retired: Mutex::new(Vec::new()),
            size: AtomicU64::new(size),
            writable,
        });
        Ok(self.attached.write().entry(object).or_insert(attached).clone())
    }

    /// The object's file, mapped with a reservation for at least
    /// `at_least` bytes; its size and whether it is writable.
    fn map_anew(&self, object: u64, at_least: u64) -> Result<(u64, bool, Mapping)> {
        let heap = self.handle;
        let (response, descriptor) = self.connection.attach(|tag, received| Request::Heap {
            heap,
            operation: HeapOperation::Attach { object, write: true, tag, received },
        })?;
        let (size, writable) = match response {
            Response::HeapAttached { object: got, size, writable } if got == object => (size, writable),
            other => return Err(unexpected("Heap.Attach", other)),
        };
        let descriptor =
            descriptor.ok_or_else(|| ClientError::Protocol(format!("no descriptor came for object {object}")))?;
        let file = std::fs::File::from(descriptor);
        // The server checked the file; checked again here, since mapping a
        // file shorter than the object would fault (SIGBUS) on its tail.
        let file_len =
            file.metadata().map_err(|e| ClientError::Protocol(format!("stat of object {object}: {e}")))?.len();
        if file_len < size {
            return Err(ClientError::Server {
                errno: libc::EIO,
                message: format!("object {object}'s file has {file_len} bytes, below its size {size}"),
            });
        }
        let mapping = Mapping::map(file.as_fd(), reserve_for(size.max(at_least)), writable)?;
        // `file` closes here: no descriptor is kept per object.
        Ok((size, writable, mapping))
    }

    /// Takes in the object's growth to `new_size` (its file that long
    /// already): inside the reservation the size is raised; past it the
    /// object is mapped anew and the old mapping kept until close.
    fn grown(&self, object: u64, attached: &Attached, new_size: u64) -> Result<()> {
        let reserve = attached.mapping.read().reserve();
        if new_size > reserve {
            let (_, _, mapping) = self.map_anew(object, new_size)?;
            let old = std::mem::replace(&mut *attached.mapping.write(), Arc::new(mapping));
            attached.retired.lock().push(old);
        }
        attached.size.fetch_max(new_size, Ordering::AcqRel);
        Ok(())
    }
}
