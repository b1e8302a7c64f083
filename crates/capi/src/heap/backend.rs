//! The heap behind a C handle: embedded (this process holds the store and
//! its heap) or served (`larder serve` holds them; metadata calls are
//! requests, objects are mapped from the descriptors the server sends).
//! Each call of the C API is one method here, so the PSHFS calls act the
//! same on either: the served heap's call attaches what the embedded
//! heap's attaches (an object found by name or copied is mapped at once).

use client::{Client, HeapPointer, RemoteHeap};
use larder_heap::{Heap, ObjectId, PPtr, TypeId};

use super::LarderNptr;
use crate::status::Outcome;

/// An open heap of either kind.
pub(crate) enum Backend {
    /// The store is open in this process.
    Embedded(Heap),
    /// The store is served; `_client` keeps the connection's client side
    /// (its lease thread, if any) for as long as the heap.
    Served { heap: RemoteHeap, _client: Client },
}

fn pptr(nptr: LarderNptr) -> PPtr<u8> {
    PPtr::new(nptr.object, nptr.offset, nptr.generation)
}

fn heap_pointer(nptr: LarderNptr) -> HeapPointer {
    HeapPointer { object: nptr.object, offset: nptr.offset, generation: nptr.generation }
}

impl Backend {
    /// mfalloc: a new object of `size` zero bytes, attached.
    pub(crate) fn alloc(&self, size: u64) -> Outcome<u64> {
        Ok(match self {
            Backend::Embedded(heap) => heap.alloc(size)?.0,
            Backend::Served { heap, .. } => heap.alloc(size)?,
        })
    }

    /// The attached object's first byte in this process.
    pub(crate) fn pointer(&self, object: u64) -> Outcome<*mut u8> {
        Ok(match self {
            Backend::Embedded(heap) => heap.pointer(ObjectId(object))?,
            Backend::Served { heap, .. } => heap.pointer(object)?,
        })
    }

    /// Names the object if no object has the name.
    pub(crate) fn add_name(&self, object: u64, name: &str) -> Outcome<()> {
        match self {
            Backend::Embedded(heap) => heap.add_name(ObjectId(object), name)?,
            Backend::Served { heap, .. } => heap.add_name(object, name)?,
        }
        Ok(())
    }

    /// The object named `name`, attached.
    pub(crate) fn get_by_name(&self, name: &str) -> Outcome<u64> {
        Ok(match self {
            Backend::Embedded(heap) => heap.get_by_name(name)?.0,
            Backend::Served { heap, .. } => heap.get(heap.get_by_name(name)?)?,
        })
    }

    /// Attaches the object (if it is not).
    pub(crate) fn get(&self, object: u64) -> Outcome<u64> {
        Ok(match self {
            Backend::Embedded(heap) => heap.get(ObjectId(object))?.0,
            Backend::Served { heap, .. } => heap.get(object)?,
        })
    }

    /// Detaches the object; it stays in the heap.
    pub(crate) fn close_object(&self, object: u64) -> Outcome<()> {
        match self {
            Backend::Embedded(heap) => heap.close_object(ObjectId(object))?,
            Backend::Served { heap, .. } => heap.close_object(object)?,
        }
        Ok(())
    }

    /// Frees the object and drops all its names.
    pub(crate) fn free(&self, object: u64) -> Outcome<()> {
        match self {
            Backend::Embedded(heap) => heap.free(ObjectId(object))?,
            Backend::Served { heap, .. } => heap.free(object)?,
        }
        Ok(())
    }

    /// mfcopy: a copy of the object alone, attached.
    pub(crate) fn copy(&self, object: u64) -> Outcome<u64> {
        Ok(match self {
            Backend::Embedded(heap) => heap.get(heap.copy(ObjectId(object))?)?.0,
            Backend::Served { heap, .. } => heap.get(heap.copy(object)?)?,
        })
    }

    /// mfclone: a deep copy through typed pointers, its root attached.
    pub(crate) fn clone(&self, object: u64) -> Outcome<u64> {
        Ok(match self {
            Backend::Embedded(heap) => heap.get(heap.clone(ObjectId(object))?)?.0,
            Backend::Served { heap, .. } => heap.get(heap.clone(object)?)?,
        })
    }

    /// A type whose pointer fields are at `offsets`.
    pub(crate) fn alloc_type(&self, offsets: &[u64]) -> Outcome<u64> {
        Ok(match self {
            Backend::Embedded(heap) => heap.alloc_type(offsets)?.0,
            Backend::Served { heap, .. } => heap.alloc_type(offsets)?,
        })
    }

    /// Attaches type `type_id` to the object.
    pub(crate) fn attach_type(&self, object: u64, type_id: u64) -> Outcome<()> {
        match self {
            Backend::Embedded(heap) => heap.attach_type(ObjectId(object), TypeId(type_id))?,
            Backend::Served { heap, .. } => heap.attach_type(object, type_id)?,
        }
        Ok(())
    }

    /// Grows the object to `size` bytes.
    pub(crate) fn grow(&self, object: u64, size: u64) -> Outcome<()> {
        match self {
            Backend::Embedded(heap) => heap.grow(ObjectId(object), size)?,
            Backend::Served { heap, .. } => heap.grow(object, size)?,
        }
        Ok(())
    }

    /// The object's size in bytes.
    pub(crate) fn size(&self, object: u64) -> Outcome<u64> {
        Ok(match self {
            Backend::Embedded(heap) => heap.size(ObjectId(object))?,
            Backend::Served { heap, .. } => heap.size(object)?,
        })
    }

    /// Makes every change to the heap so far durable.
    pub(crate) fn sync(&self) -> Outcome<()> {
        match self {
            Backend::Embedded(heap) => heap.sync()?,
            Backend::Served { heap, .. } => heap.sync()?,
        }
        Ok(())
    }

    /// The address `nptr` names, its object, bounds and generation checked.
    pub(crate) fn deref(&self, nptr: LarderNptr) -> Outcome<*mut u8> {
        Ok(match self {
            Backend::Embedded(heap) => heap.deref(pptr(nptr))?,
            Backend::Served { heap, .. } => heap.deref::<u8>(heap_pointer(nptr))?,
        })
    }

    /// A block of `size` bytes aligned to `align` inside the object.
    pub(crate) fn alloc_in(&self, object: u64, size: u64, align: u64) -> Outcome<LarderNptr> {
        Ok(match self {
            Backend::Embedded(heap) => {
                let block = heap.alloc_in(ObjectId(object), size, align)?;
                LarderNptr { object: block.object, offset: block.offset, generation: block.generation }
            }
            Backend::Served { heap, .. } => {
                let block = heap.alloc_in(object, size, align)?;
                LarderNptr { object: block.object, offset: block.offset, generation: block.generation }
            }
        })
    }

    /// Frees a block `alloc_in` handed out.
    pub(crate) fn free_in(&self, nptr: LarderNptr) -> Outcome<()> {
        match self {
            Backend::Embedded(heap) => heap.free_in(pptr(nptr))?,
            Backend::Served { heap, .. } => heap.free_in(heap_pointer(nptr))?,
        }
        Ok(())
    }

    /// Syncs and closes the heap (for a served one: on the server).
    pub(crate) fn close(self) -> Outcome<()> {
        match self {
            Backend::Embedded(heap) => heap.close()?,
            Backend::Served { heap, .. } => heap.close()?,
        }
        Ok(())
    }
}
