//! Attached objects: an object's file mapped into this process
//! (`larder_io::SharedRegion`), at a base that stays put while the object
//! grows inside its reservation.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use larder_io::{IoError, MapAccess, SharedRegion};
use larder_object::meta::DataLocation;
use parking_lot::{Mutex, RwLock};

use crate::closed::ClosedMapping;
use crate::credentials::Owner;
use crate::error::{not_found, HeapError, Result};
use crate::limits::MIN_RESERVE_BYTES;
use crate::Heap;

/// An object mapped into this process.
#[derive(Debug)]
pub(crate) struct Attached {
    pub(crate) id: u64,
    /// The mapping handed out now.
    region: RwLock<Arc<SharedRegion>>,
    /// Mappings replaced when the object outgrew a reservation: kept until
    /// the object is closed, so raw pointers into them stay valid memory.
    retired: Mutex<Vec<Arc<SharedRegion>>>,
    /// The object's size: every access is bounded by it.
    size: AtomicU64,
    pub(crate) access: MapAccess,
    /// Owner and mode when attached: which handles may use this mapping.
    pub(crate) owner: Owner,
}

/// The reservation for an object of `len` bytes.
pub(crate) fn reserve_for(len: u64) -> u64 {
    len.saturating_mul(2).max(MIN_RESERVE_BYTES)
}

impl Attached {
    /// The current mapping.
    pub(crate) fn region(&self) -> Arc<SharedRegion> {
        self.region.read().clone()
    }

    /// The object's size.
    pub(crate) fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    /// The object's first byte in memory now.
    pub(crate) fn base(&self) -> *mut u8 {
        self.region.read().as_ptr()
    }

    /// Refuses `[offset, offset + len)` unless it lies inside the object.
    pub(crate) fn check(&self, offset: u64, len: u64) -> Result<()> {
        let size = self.size();
        match offset.checked_add(len) {
            Some(end) if end <= size => Ok(()),
            _ => Err(HeapError::OutOfBounds { object: self.id, offset, len, size }),
        }
    }

    /// Copies the object's bytes at `offset` into `buf`.
    pub(crate) fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.check(offset, buf.len() as u64)?;
        let region = self.region();
        #[allow(unsafe_code)]
        // SAFETY: `[offset, offset + len)` is inside the object's size, which
        // never exceeds the region's length (the file is extended and the
        // region grown before the size is raised), and `region` keeps the
        // mapping alive for the copy. The bytes are shared memory other
        // threads may store to: the copy reads them through raw pointers,
        // forming no reference to them.
        unsafe {
            std::ptr::copy_nonoverlapping(region.as_ptr().add(offset as usize), buf.as_mut_ptr(), buf.len());
        }
        Ok(())
    }

    /// Copies `data` into the object at `offset`.
    pub(crate) fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        if self.access != MapAccess::ReadWrite {
            return Err(HeapError::PermissionDenied { what: format!("write object {} (mapped read-only)", self.id) });
        }
        self.check(offset, data.len() as u64)?;
        let region = self.region();
        #[allow(unsafe_code)]
        // SAFETY: as for `read`; the region is writable (checked above).
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), region.as_ptr().add(offset as usize), data.len());
        }
        Ok(())
    }

    /// Writes the mapped bytes back to the file (msync, or the emulated
    /// region's write-back).
    pub(crate) fn flush(&self) -> Result<()> {
        let region = self.region();
        Ok(region.flush(0, region.len())?)
    }

    /// Takes in the object's growth to `new_size`, its file already that
    /// long: the region grows in place, or the object is mapped anew at a
    /// bigger reservation when it outgrew this one.
    pub(crate) fn grown(&self, heap: &Heap, new_size: u64) -> Result<()> {
        let mut region = self.region.write();
        if new_size > region.len() {
            if new_size <= region.reserve() {
                region.grow_to(new_size)?;
            } else {
                // An emulated region holds bytes the file does not have yet.
                region.flush(0, region.len())?;
                let bigger = heap.shared.store.map_heap_file(self.id, reserve_for(new_size), self.access)?;
                let old = std::mem::replace(&mut *region, Arc::new(bigger));
                // Syncs write back through the new region's descriptor.
                old.release_descriptor();
                self.retired.lock().push(old);
            }
        }
        self.size.fetch_max(new_size, Ordering::AcqRel);
        Ok(())
    }
}

impl Heap {
    /// The object `id` of this heap, mapped (attaching it if it is not).
    /// Fails with `NotFound` for an object that does not exist, is not in
    /// this heap, or was freed; `Shrunk` for a file shorter than the
    /// object's durable size or its size; `PermissionDenied` when the
    /// caller may not even read it.
    pub(crate) fn attach(&self, id: u64) -> Result<Arc<Attached>> {
        if let Some(a) = self.shared.attached.read().get(&id) {
            if self.credentials.may_write_owned(a.owner) {
                return Ok(a.clone());
            }
        }
        if let Some(a) = self.shared.readers.read().get(&id) {
            if self.credentials.may_read_owned(a.owner) && !self.credentials.may_write_owned(a.owner) {
                return Ok(a.clone());
            }
        }
        let missing = || not_found(format!("object {id}"));
        // Not an object of this heap (any more): a mapping kept at its
        // close goes (unmapped once dropped here).
        let gone = || {
            let kept = self.shared.closed.lock().take(id);
            drop(kept);
            missing()
        };
        // Read before the object's records: see the check after the insert.
        let frees = self.shared.frees.load(Ordering::SeqCst);
        let onode = self.shared.store.stat(id)?.ok_or_else(gone)?;
        if onode.location != (DataLocation::OwnFile { file: id }) {
            return Err(gone());
        }
        let record = self.shared.store.heap_object(id)?.ok_or_else(gone)?;
        if record.heap != self.shared.root {
            return Err(gone());
        }
        let access = if self.credentials.may_write(&onode) {
            MapAccess::ReadWrite
        } else if self.credentials.may_read(&onode) {
            MapAccess::ReadOnly
        } else {
            return Err(HeapError::PermissionDenied { what: format!("map object {id}") });
        };
        let owner = Owner::of(&onode);
        let kept = self.shared.closed.lock().take(id);
        let reused = match kept {
            Some(kept) => self.reuse_closed(id, kept, access, owner)?,
            None => None,
        };
        let (region, file_len) = match reused {
            Some(reused) => reused,
            None => {
                let region = match self.map_file(id, access) {
                    Ok(region) => region,
                    // Freed and removed since the record was read.
                    Err(HeapError::Object(larder_object::ObjectError::Io(e))) if e.is_not_found() => {
                        return Err(missing())
                    }
                    Err(e) => return Err(e),
                };
                // The region is the file's length when it was mapped.
                let file_len = region.len();
                (Arc::new(region), file_len)
            }
        };
        if file_len < record.durable_size || file_len < onode.size {
            let durable = record.durable_size.max(onode.size);
            return Err(HeapError::Shrunk { object: id, file_len, durable });
        }
        // The allocator of this heap may have grown the file past the
        // committed size (committed at the next sync).
        let size = if self.has_arena(id) { onode.size.max(file_len) } else { onode.size };
        self.insert_attached(id, region, size, access, owner, frees)
    }

    /// Makes `region` object `id`'s mapping in this process (of `size`
    /// bytes), unless a free of this heap committed since `frees` was read
    /// (before the object's records were) and the object is gone; returns
    /// the mapping attached (another thread's, if it attached first).
    pub(crate) fn insert_attached(
        &self,
        id: u64,
        region: Arc<SharedRegion>,
        size: u64,
        access: MapAccess,
        owner: Owner,
        frees: u64,
    ) -> Result<Arc<Attached>> {
        let missing = || not_found(format!("object {id}"));
        let attached = Arc::new(Attached {
            id,
            region: RwLock::new(region),
            retired: Mutex::new(Vec::new()),
            size: AtomicU64::new(size),
            access,
            owner,
        });
        let map = match access {
            MapAccess::ReadWrite => &self.shared.attached,
            MapAccess::ReadOnly => &self.shared.readers,
        };
        // A free that committed while this mapped the file: not attached.
        // A free counts itself and removes its object from the maps under
        // the gate, held exclusively; the insert happens under it, shared.
        // So either the free's section came first, and the count moved
        // since it was read above (the object is then not inserted), or
        // this insert came first and the free removes it (the object then
        // reads as got before it was freed). Never is a freed object in the
        // maps after its free returned, even for a moment. Frees come only
        // through this heap's handles in this process (the store is this
        // process's alone); other removals are caught by the record reads.
        let gate = self.shared.free_gate.read();
        if self.shared.frees.load(Ordering::SeqCst) != frees && self.shared.store.heap_object(id)?.is_none() {
            drop(gate);
            return Err(missing());
        }
        let attached = map.write().entry(id).or_insert(attached).clone();
        drop(gate);
        Ok(attached)
    }

    /// Maps object `id`'s file in a reservation for its length: one open
    /// of the file (the mapping tells its length), a second only for a file
    /// longer than half the smallest reservation.
    fn map_file(&self, id: u64, access: MapAccess) -> Result<SharedRegion> {
        let store = &self.shared.store;
        match store.map_heap_file(id, MIN_RESERVE_BYTES, access) {
            Ok(region) if reserve_for(region.len()) <= region.reserve() => Ok(region),
            Ok(region) => {
                let len = region.len();
                drop(region);
                Ok(store.map_heap_file(id, reserve_for(len), access)?)
            }
            // Longer than the reservation: its length first.
            Err(larder_object::ObjectError::Io(IoError::InvalidInput { .. })) => {
                let len = store.open_heap_file(id, false)?.len()?;
                Ok(store.map_heap_file(id, reserve_for(len), access)?)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The mapping kept at object `id`'s close, if it may be handed out
    /// again, with the file's length now: made for the access and owner
    /// the caller gets now, of the file that `heap/<id>` names now (one
    /// `stat`: a file replaced under the name is mapped anew), not longer
    /// than that file (one shrunk behind the heap's back is mapped anew,
    /// and refused if shorter than the object), and reserved for twice its
    /// length, as an attach promises. A file grown since (through the
    /// object layer, or by a thread still holding the object's old handle)
    /// is taken into the region in place. `None`: map the file anew (the
    /// kept region is dropped, so unmapped, on return). The object's
    /// records were checked by the caller: a freed object never gets here.
    fn reuse_closed(
        &self,
        id: u64,
        kept: ClosedMapping,
        access: MapAccess,
        owner: Owner,
    ) -> Result<Option<(Arc<SharedRegion>, u64)>> {
        if kept.access != access || kept.owner != owner {
            return Ok(None);
        }
        let Some(identity) = kept.region.identity() else { return Ok(None) };
        let status = match self.shared.store.heap_file_status(id) {
            Ok(status) => status,
            // Removed since the record was read (freed, or by hand).
            Err(larder_object::ObjectError::Io(e)) if e.is_not_found() => {
                return Err(not_found(format!("object {id}")));
            }
            Err(e) => return Err(e.into()),
        };
        let region = kept.region;
        if status.identity != Some(identity) || status.len < region.len() || reserve_for(status.len) > region.reserve()
        {
            return Ok(None);
        }
        if status.len > region.len() {
            region.grow_to(status.len)?;
        }
        Ok(Some((region, status.len)))
    }

    /// Closes object `id` for this handle: a read-only mapping, or the
    /// writable one every handle that may write shares. The mapping is kept
    /// among the heap's closed ones (`closed::ClosedMappings`) when it may
    /// be, else unmapped once no caller holds it; bytes an emulated region
    /// holds are written back first and synced at the next `sync`, as a
    /// real mapping's dirty pages are.
    pub(crate) fn detach(&self, id: u64) -> Result<()> {
        let writer = self.shared.attached.read().get(&id).is_some_and(|a| self.credentials.may_write_owned(a.owner));
        // Held while the object leaves its map and joins the closed ones,
        // so a `free` (which takes it after removing the object from the
        // maps) either finds the object in the maps or among the closed.
        let mut closed = self.shared.closed.lock();
        let map = if writer { &self.shared.attached } else { &self.shared.readers };
        let Some(attached) = map.write().remove(&id) else { return Ok(()) };
        if attached.access == MapAccess::ReadWrite {
            if attached.region().is_emulated() {
                attached.flush()?;
            }
            self.shared.pending.lock().files.insert(id);
        }
        let unmapped = closed.keep(id, attached.region(), attached.access, attached.owner);
        drop(closed);
        // Unmapped outside the lock (if no caller holds them still).
        drop(unmapped);
        drop(attached);
        Ok(())
    }
}
