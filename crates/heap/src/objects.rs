//! Whole objects: allocate, find, map, grow, free (PSHFS's mfalloc,
//! mfgetobj, mfdreference, mfnptr, mfcloseobj, mffreeobj), and safe copies
//! in and out of their bytes.

use larder_io::{MapAccess, SharedRegion};
use larder_namespace::NamespaceTxn;
use larder_object::meta::{heap_name_key, heap_name_prefix, prefix_end, HeapObject, Name};
use larder_object::{Durability, LockRequest, ObjectError, SpareFill, Transaction};

use crate::credentials::Owner;
use crate::error::{invalid, not_found, HeapError, Result};
use crate::heap::OBJECT_MODE;
use crate::limits::{FILE_WRITE_BYTES, MAX_OBJECT_BYTES};
use crate::{Heap, ObjectId, PPtr};

/// A free's transaction: failed, or must run again because the object's
/// names changed between reading them and locking them.
enum FreeFailure {
    Failed(HeapError),
    NamesChanged,
}

impl From<ObjectError> for FreeFailure {
    fn from(e: ObjectError) -> Self {
        FreeFailure::Failed(e.into())
    }
}

/// What a new object's bytes are when [`Heap::make_object`] runs its
/// `fill`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NewBytes {
    /// Zeros.
    Zeros,
    /// The bytes `copy_of` exposes, written to the file.
    Copied,
    /// Whatever the spare it took kept: `fill` stores every byte.
    Unset,
}

impl Heap {
    /// Allocates an object of `size` bytes (zeros), its file `heap/<id>`,
    /// attached to this process (PSHFS's mfalloc). The object is named by
    /// its id in `objects/` only; [`Heap::add_name`] gives it a name.
    pub fn alloc(&self, size: u64) -> Result<ObjectId> {
        if size > MAX_OBJECT_BYTES {
            return Err(invalid(format!("size {size} is above the largest object ({MAX_OBJECT_BYTES} bytes)")));
        }
        self.check_writable("allocate an object")?;
        let record = HeapObject { heap: self.shared.root, type_id: 0, durable_size: 0, flags: 0 };
        self.make_object(size, record, &[], None, |_, _, _, _| Ok(()))
    }

    /// Makes a new object of `size` bytes with `record`, attached to this
    /// process, in one transaction that also holds `locks` and runs `fill`
    /// (with the new id, its mapping, and what its bytes are) once the
    /// object's file exists and is mapped. A freed object's spare file is
    /// reused when there is one (a rename already done: no inode
    /// allocated). With `copy_of` (the mapping of an object to copy), a
    /// spare that kept enough bytes is left for `fill` to overwrite through
    /// the mappings, and another is filled from `copy_of`; without, and in
    /// a new file, the bytes are zeros.
    pub(crate) fn make_object(
        &self,
        size: u64,
        record: HeapObject,
        locks: &[LockRequest],
        copy_of: Option<&SharedRegion>,
        fill: impl FnOnce(&mut Transaction<'_>, u64, &SharedRegion, NewBytes) -> Result<()>,
    ) -> Result<ObjectId> {
        // A spare file is already named by the id issued for it.
        let spare = self.shared.pending.lock().take_spare(size, copy_of.is_some());
        let id = match &spare {
            Some(spare) => spare.id,
            None => self.shared.store.allocate_object_id()?,
        };
        let name = Heap::object_name(id)?;
        let mut requests = vec![
            LockRequest::Exclusive(id),
            LockRequest::Shared(self.shared.objects_dir),
            LockRequest::Name(self.shared.objects_dir, name.as_bytes().to_vec()),
        ];
        requests.extend_from_slice(locks);
        let owner = (OBJECT_MODE, self.credentials.uid, self.credentials.gid);
        // Read before the transaction: see `Heap::insert_attached`.
        let frees = self.shared.frees.load(std::sync::atomic::Ordering::SeqCst);
        let made = self.shared.store.transact_locked(&requests, Durability::Buffered, |txn| -> Result<_> {
            let reserve = crate::attach::reserve_for(size);
            let kept = spare.as_ref().map(|s| s.kept);
            let mapped = spare.and_then(|s| s.region).filter(|r| r.reserve() >= reserve);
            let made = match mapped {
                Some(region) => {
                    let (spare_fill, bytes) = match copy_of {
                        Some(_) if kept.unwrap_or(0) >= size => (SpareFill::Overwrite, NewBytes::Unset),
                        Some(source) => (SpareFill::CopyFrom(source), NewBytes::Copied),
                        None => (SpareFill::Zeros, NewBytes::Zeros),
                    };
                    let spare = (&region, kept.unwrap_or(0));
                    match txn.create_heap_object_in_mapped_spare(id, size, owner, &record, spare, spare_fill) {
                        Ok(()) => Some((region, true, bytes)),
                        // Removed behind the heap's back: a new file, then.
                        Err(ObjectError::Io(e)) if e.is_not_found() => None,
                        Err(e) => return Err(e.into()),
                    }
                }
                None => None,
            };
            let (region, recycled, bytes) = match made {
                Some(made) => made,
                None => {
                    let access = (reserve, MapAccess::ReadWrite);
                    let (region, recycled) = txn.create_heap_object_mapped(id, size, owner, &record, kept, access)?;
                    (region, recycled, NewBytes::Zeros)
                }
            };
            let onode = txn.onode(id)?.ok_or_else(|| not_found(format!("object {id}")))?;
            {
                let mut pending = self.shared.pending.lock();
                pending.files.insert(id);
                pending.created.insert(id);
                pending.dir_changed = true;
                pending.renamed |= recycled;
            }
            txn.link_in(self.shared.objects_dir, &name, id)?;
            fill(txn, id, &region, bytes)?;
            Ok((region, Owner::of(&onode)))
        });
        let ((region, owner), _) = match made {
            Ok(made) => made,
            Err(e) => {
                // The transaction did not commit: its file is a leftover.
                let _ = self.shared.store.remove_heap_file(id);
                return Err(e);
            }
        };
        let len = region.len();
        self.insert_attached(id, std::sync::Arc::new(region), len, MapAccess::ReadWrite, owner, frees)?;
        Ok(ObjectId(id))
    }

    /// Attaches `object` (if it is not) and returns it (PSHFS's mfgetobj).
    /// Accepts an id or a persistent pointer into the object.
    pub fn get(&self, object: impl Into<ObjectId>) -> Result<ObjectId> {
        let id = object.into().0;
        self.attach(id)?;
        Ok(ObjectId(id))
    }

    /// The address of `object`'s first byte in this process, attaching it
    /// if needed (PSHFS's mfdreference). Valid for [`Heap::size`] bytes
    /// until the object is closed or freed or the heap closed; it moves
    /// only if [`Heap::grow`] outgrows the object's reservation (1 GiB or
    /// twice the size at attach). Writable only if the caller may write the
    /// object (otherwise a store through it faults). The bytes are shared:
    /// callers coordinate their own access to them.
    pub fn pointer(&self, object: ObjectId) -> Result<*mut u8> {
        Ok(self.attach(object.0)?.base())
    }

    /// A persistent pointer to `object`'s first byte (PSHFS's mfnptr).
    pub fn nptr(&self, object: ObjectId) -> Result<PPtr<()>> {
        self.attach(object.0)?;
        Ok(PPtr::new(object.0, 0, 0))
    }

    /// The object's size in bytes.
    pub fn size(&self, object: ObjectId) -> Result<u64> {
        Ok(self.attach(object.0)?.size())
    }

    /// Whether this process maps `object` writable.
    pub fn is_writable(&self, object: ObjectId) -> Result<bool> {
        Ok(self.attach(object.0)?.access == MapAccess::ReadWrite)
    }

    /// Closes `object` in this process (PSHFS's mfcloseobj); its bytes
    /// are kept (durable at the next [`Heap::sync`]). Pointers from
    /// [`Heap::pointer`] into it become invalid. Its mapping may be kept a
    /// while (at most [`crate::limits::CLOSED_MAPPINGS`] per heap), so that
    /// attaching it again is cheap; that attach checks the object and its
    /// file as a first one does.
    pub fn close_object(&self, object: ObjectId) -> Result<()> {
        self.detach(object.0)
    }

    /// Copies `buf.len()` bytes of `object` at `offset` into `buf`.
    pub fn read_at(&self, object: ObjectId, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.attach(object.0)?.read(offset, buf)
    }

    /// Copies `data` into `object` at `offset`. A write of at least
    /// [`crate::limits::FILE_WRITE_BYTES`] into a real mapping goes to the object's file
    /// (pwrite; the page cache is the mapping's, so every mapping sees the
    /// bytes at once): it takes no page fault per page, and its pages are
    /// written back at `sync` without being write-protected in the mapping
    /// first. Durable at the next [`Heap::sync`] either way.
    pub fn write_at(&self, object: ObjectId, offset: u64, data: &[u8]) -> Result<()> {
        let attached = self.attach(object.0)?;
        if data.len() < FILE_WRITE_BYTES || attached.region().is_emulated() {
            return attached.write(offset, data);
        }
        if attached.access != MapAccess::ReadWrite {
            return Err(HeapError::PermissionDenied { what: format!("write object {} (mapped read-only)", object.0) });
        }
        attached.check(offset, data.len() as u64)?;
        let file = match self.shared.store.open_heap_file(object.0, true) {
            Ok(file) => file,
            // Freed and removed since it was attached.
            Err(ObjectError::Io(e)) if e.is_not_found() => return Err(not_found(format!("object {}", object.0))),
            Err(e) => return Err(e.into()),
        };
        larder_io::write_all_at(&*file, data, offset)?;
        // Written outside the mapping: its file is synced at the next sync.
        self.shared.pending.lock().files.insert(object.0);
        Ok(())
    }

    /// Grows `object` to `new_size` bytes (zeros past the old size). Objects
    /// never shrink: a smaller size is refused.
    pub fn grow(&self, object: ObjectId, new_size: u64) -> Result<()> {
        let id = object.0;
        if new_size > MAX_OBJECT_BYTES {
            return Err(invalid(format!("size {new_size} is above the largest object")));
        }
        let attached = self.attach(id)?;
        if attached.access != MapAccess::ReadWrite {
            return Err(HeapError::PermissionDenied { what: format!("grow object {id}") });
        }
        // The allocator's changes go with the new size: a span it claimed
        // below `new_size` must be committed with it, or a crash would
        // leave those pages neither user bytes nor the allocator's. Its lock
        // is held throughout, so `alloc_in` cannot grow the object meanwhile.
        let slot = self.arena(id)?;
        // Before the allocator's lock, as `sync` takes them: no sync puts
        // images of this object between the flush and the commit below.
        let _one = self.shared.sync_lock.lock();
        let mut arena = slot.arena.lock();
        // The records name blocks handed out since the last sync: their
        // bytes first (no allocation can happen meanwhile: the lock).
        self.flush_before_records(&attached)?;
        let stale_images = self.images_made_stale(id)?;
        let staged = Some(Heap::stage_locked(&slot, &mut arena));
        let grown = self.shared.store.transact_locked(
            &[LockRequest::Exclusive(id)],
            Durability::Buffered,
            |txn| -> Result<()> {
                let mut onode = txn.onode(id)?.ok_or_else(|| not_found(format!("object {id}")))?;
                let mut record = txn.heap_object(id)?.ok_or_else(|| not_found(format!("object {id}")))?;
                let current = onode.size.max(attached.size());
                if new_size < current {
                    return Err(invalid(format!("object {id} has {current} bytes; objects never shrink")));
                }
                self.shared.store.extend_heap_file(id, new_size)?;
                self.shared.pending.lock().files.insert(id);
                onode.size = new_size;
                onode.generation = onode.generation.wrapping_add(1);
                txn.put_onode(id, &onode)?;
                if let Some(staged) = &staged {
                    self.write_staged(txn, id, staged)?;
                    if staged.claimed && !record.has_arena() {
                        record.flags |= larder_object::meta::HEAP_OBJECT_ARENA;
                        txn.put_heap_object(id, &record)?;
                    }
                }
                stale_images.write(txn, id)
            },
        );
        self.after_images_deleted(id, grown.is_ok());
        if let Err(e) = grown {
            self.restage_arenas([id]);
            return Err(e);
        }
        arena.records_durable();
        attached.grown(self, new_size)
    }

    /// The names of `object`, in byte order.
    pub fn names(&self, object: ObjectId) -> Result<Vec<String>> {
        Ok(self.name_records(object.0)?.iter().map(|n| String::from_utf8_lossy(n.as_bytes()).into_owned()).collect())
    }

    /// The names of object `id` as its name records list them.
    pub(crate) fn name_records(&self, id: u64) -> Result<Vec<Name>> {
        Ok(self.shared.store.heap_names(id)?)
    }

    /// Frees `object` (PSHFS's mffreeobj): drops every name and its entry
    /// in `objects/`, in one transaction; it is unmapped from this process.
    /// Its file is removed, or kept emptied for a later [`Heap::alloc`]
    /// to reuse, once the free is durable (at the next [`Heap::sync`] at
    /// the latest). A racing [`Heap::get_by_name`] sees the object or
    /// `NotFound`.
    pub fn free(&self, object: ObjectId) -> Result<()> {
        let id = object.0;
        self.check_writable("free an object")?;
        loop {
            let names = self.name_records(id)?;
            match self.free_once(id, &names) {
                Ok(lsn) => {
                    // Counted and out of the maps in one section of the
                    // gate (see `Shared::frees`).
                    {
                        let _gate = self.shared.free_gate.write();
                        self.shared.frees.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        self.shared.attached.write().remove(&id);
                        self.shared.readers.write().remove(&id);
                    }
                    // Its closed mapping goes too (unmapped here, outside
                    // the lock): an attach would refuse it anyway, the
                    // object's record being gone.
                    let kept = self.shared.closed.lock().take(id);
                    drop(kept);
                    self.drop_arena(id);
                    let spares_low = {
                        let mut pending = self.shared.pending.lock();
                        pending.files.remove(&id);
                        pending.created.remove(&id);
                        pending.removals.push((lsn, id));
                        pending.removals.len() >= crate::limits::SPARE_SYNC_SOON_FREES
                            && pending.mapped_spares() < crate::limits::SPARE_MAPPINGS / 2
                    };
                    if spares_low {
                        self.shared.store.sync_soon();
                    }
                    self.remove_files_freed_durably();
                    return Ok(());
                }
                Err(FreeFailure::NamesChanged) => continue,
                Err(FreeFailure::Failed(e)) => return Err(e),
            }
        }
    }

    /// One attempt at freeing `id` whose names were read as `names`.
    fn free_once(&self, id: u64, names: &[Name]) -> std::result::Result<u64, FreeFailure> {
        let failed = |e: HeapError| FreeFailure::Failed(e);
        let entry = Heap::object_name(id).map_err(failed)?;
        let mut locks = vec![
            LockRequest::Exclusive(id),
            LockRequest::Shared(self.shared.objects_dir),
            LockRequest::Name(self.shared.objects_dir, entry.as_bytes().to_vec()),
            LockRequest::Shared(self.shared.names_dir),
        ];
        locks.extend(names.iter().map(|n| LockRequest::Name(self.shared.names_dir, n.as_bytes().to_vec())));
        let ((), lsn) = self.shared.store.transact_locked(&locks, Durability::Buffered, |txn| {
            let record = txn.heap_object(id)?.filter(|r| r.heap == self.shared.root);
            if record.is_none() {
                return Err(failed(not_found(format!("object {id}"))));
            }
            let onode = txn.onode(id)?.ok_or_else(|| failed(not_found(format!("object {id}"))))?;
            if !self.credentials.may_write(&onode) {
                return Err(failed(HeapError::PermissionDenied { what: format!("free object {id}") }));
            }
            let prefix = heap_name_prefix(id);
            let end = prefix_end(&prefix).unwrap_or_default();
            if txn.scan(&prefix, &end, true, names.len() + 1)?.len() != names.len() {
                return Err(FreeFailure::NamesChanged);
            }
            for name in names {
                if txn.get(&heap_name_key(id, name))?.is_none() {
                    return Err(FreeFailure::NamesChanged);
                }
            }
            // The names are the ones locked: the object layer's free (the
            // one `larder heap rm` runs too) drops them, the `objects/`
            // entry, the records and the onode.
            txn.free_heap_object(self.shared.root, id)?;
            Ok(())
        })?;
        Ok(lsn)
    }
}

impl<T> From<PPtr<T>> for ObjectId {
    fn from(p: PPtr<T>) -> Self {
        ObjectId(p.object)
    }
}
