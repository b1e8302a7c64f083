//! Types: lists of offsets of persistent pointer fields, persisted with the
//! objects they are attached to (PSHFS's mfalloctype and mftypeatt, which
//! kept types per process).

use larder_object::meta::{heap_type_key, HeapType};
use larder_object::{Durability, LockRequest};

use crate::error::{not_found, HeapError, Result};
use crate::{Heap, ObjectId, TypeId};

impl Heap {
    /// Records a type whose objects hold persistent pointers ([`crate::PPtr`],
    /// 24 bytes) at `offsets`: increasing, multiples of 8, not overlapping,
    /// at most [`crate::limits::MAX_TYPE_POINTERS`].
    pub fn alloc_type(&self, offsets: &[u64]) -> Result<TypeId> {
        if let Some(reason) = HeapType::offsets_error(offsets) {
            return Err(HeapError::BadType { reason });
        }
        self.check_writable("allocate a type")?;
        let encoded = HeapType { offsets: offsets.to_vec() }.encode()?;
        let id = self.shared.store.allocate_object_id()?;
        self.shared.store.transact_locked(
            &[LockRequest::Exclusive(id)],
            Durability::Buffered,
            |txn| -> Result<()> {
                txn.put(&heap_type_key(id), &encoded);
                Ok(())
            },
        )?;
        Ok(TypeId(id))
    }

    /// The pointer offsets of type `type_id`.
    pub fn type_offsets(&self, type_id: TypeId) -> Result<Vec<u64>> {
        let bytes = self
            .shared
            .store
            .index()
            .get(&heap_type_key(type_id.0))?
            .ok_or_else(|| HeapError::BadType { reason: format!("no type {}", type_id.0) })?;
        Ok(HeapType::decode(&bytes)?.offsets)
    }

    /// Attaches type `type_id` to `object` (PSHFS's mftypeatt): its
    /// pointer fields must fit inside the object. Replaces any type it had.
    pub fn attach_type(&self, object: ObjectId, type_id: TypeId) -> Result<()> {
        let id = object.0;
        let offsets = self.type_offsets(type_id)?;
        let needed = HeapType { offsets }.min_object_bytes();
        self.check_writable("attach a type")?;
        // The allocator may have grown the object past the committed size
        // (committed at the next sync), as `check` counts. Read before the
        // object's lock: `grow` holds the allocator's lock while it waits
        // for that one. Objects never shrink, so an early read is safe.
        let claimed = self.arena_claimed_end(id);
        self.shared.store.transact_locked(
            &[LockRequest::Exclusive(id)],
            Durability::Buffered,
            |txn| -> Result<()> {
                let mut record = txn
                    .heap_object(id)?
                    .filter(|r| r.heap == self.shared.root)
                    .ok_or_else(|| not_found(format!("object {id}")))?;
                let committed = txn.onode(id)?.map_or(0, |o| o.size);
                let size = committed.max(claimed);
                if needed > size {
                    return Err(HeapError::BadType {
                        reason: format!("type {} needs {needed} bytes; object {id} has {size}", type_id.0),
                    });
                }
                record.type_id = type_id.0;
                txn.put_heap_object(id, &record)?;
                Ok(())
            },
        )?;
        Ok(())
    }

    /// The type attached to `object`, if any.
    pub fn type_of(&self, object: ObjectId) -> Result<Option<TypeId>> {
        let record = self
            .shared
            .store
            .heap_object(object.0)?
            .filter(|r| r.heap == self.shared.root)
            .ok_or_else(|| not_found(format!("object {}", object.0)))?;
        Ok((record.type_id != 0).then_some(TypeId(record.type_id)))
    }
}
