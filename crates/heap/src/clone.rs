//! Copies of objects: one object (PSHFS's mfcopy) or every object reachable
//! through typed pointers (mfclone), each copied once, pointers rewritten,
//! all in one transaction.

use std::collections::{HashMap, VecDeque};

use larder_io::write_all_at;
use larder_namespace::NamespaceTxn;
use larder_object::meta::{heap_span_key, HeapObject, HEAP_OBJECT_ARENA, HEAP_OBJECT_RECYCLED};
use larder_object::{Durability, LockRequest};

use crate::error::{HeapError, Result};
use crate::heap::OBJECT_MODE;
use crate::limits::{MAX_CLONE_OBJECTS, POINTER_BYTES};
use crate::objects::NewBytes;
use crate::{Heap, ObjectId, PPtr};

/// Bytes one copy adds to its transaction, about: onode, object record,
/// `objects/` entry and directory count, and room for allocator records.
const COPY_RECORD_BYTES: u64 = 512;

/// An object to copy, as read.
struct Source {
    id: u64,
    record: HeapObject,
    /// Its bytes, pointers rewritten once the copies have ids.
    bytes: Vec<u8>,
    /// Offsets of its non-null pointers (deep copies only).
    pointers: Vec<u64>,
    /// Its allocator's records as they were just before its bytes were
    /// read (so the bytes cover every range they claim).
    spans: Vec<(u64, Vec<u8>)>,
}

impl Heap {
    /// A copy of `object` alone (PSHFS's mfcopy): its bytes, type and
    /// allocator state, under a new id. Pointers in it are not followed.
    ///
    /// The copy is made as [`Heap::alloc`] makes an object (a freed
    /// object's spare file reused when there is one) and attached to this
    /// process. Its bytes are written to the copy's file straight from
    /// the source's mapping (one `pwrite`, no page fault on the copy's
    /// mapping), or, into a small spare that kept its freed object's
    /// pages, stored from mapping to mapping; they are durable at the next
    /// [`Heap::sync`] like any other object's bytes.
    pub fn copy(&self, object: ObjectId) -> Result<ObjectId> {
        let id = object.0;
        self.check_writable("copy an object")?;
        let source = self.attach(id)?;
        let found = self.shared.store.heap_object(id)?.filter(|r| r.heap == self.shared.root);
        let record = found.ok_or_else(|| crate::error::not_found(format!("object {id}")))?;
        // The allocator's records before the bytes, so the bytes cover
        // every range they claim.
        let spans = self.span_records_now(id, &record)?;
        let span_bytes: u64 = spans.iter().map(|(_, v)| 32 + v.len() as u64).sum();
        if COPY_RECORD_BYTES + span_bytes > larder_namespace::bulk::record_budget(&self.shared.store) {
            // Too many records for one log record: an index run of its own.
            return self.duplicate(id, false).map(ObjectId);
        }
        let mut flags = record.flags & !HEAP_OBJECT_RECYCLED;
        if !spans.is_empty() {
            flags |= HEAP_OBJECT_ARENA;
        }
        let copy = HeapObject { heap: self.shared.root, type_id: record.type_id, durable_size: 0, flags };
        let size = source.size();
        let root = self.shared.root;
        let store = &self.shared.store;
        // Checked before its file is read (its lock is held then): still
        // an object of this heap.
        let in_heap = |txn: &mut larder_object::Transaction<'_>| -> Result<()> {
            match txn.heap_object(id)?.filter(|r| r.heap == root) {
                Some(_) => Ok(()),
                None => Err(crate::error::not_found(format!("object {id}"))),
            }
        };
        let source_region = source.region();
        let locks = [LockRequest::Shared(id)];
        self.make_object(size, copy, &locks, Some(&source_region), |txn, new, region, bytes| {
            in_heap(txn)?;
            match bytes {
                NewBytes::Copied => {}
                // Through a new real mapping each page would fault.
                NewBytes::Zeros if !region.is_emulated() => store.write_heap_file_from(&source_region, new, size)?,
                // A small spare kept its pages, so stores into them
                // allocate nothing; an emulated mapping's bytes reach its
                // file when flushed.
                NewBytes::Unset | NewBytes::Zeros => region.copy_from(&source_region, size)?,
            }
            for (key, value) in &spans {
                txn.put(&heap_span_key(new, *key), value);
            }
            Ok(())
        })
    }

    /// A deep copy of `object` (PSHFS's mfclone): every object reachable
    /// from it through the pointer fields of the objects' types is copied
    /// once (shared nodes and cycles stay shared and cyclic), each pointer
    /// rewritten to the copy of its target, all committed in one
    /// transaction. A pointer field past its object's size, or a pointer
    /// to no object of this heap or past its target, is an error and
    /// leaves nothing behind. Returns the copy of `object`.
    pub fn clone(&self, object: ObjectId) -> Result<ObjectId> {
        self.duplicate(object.0, true).map(ObjectId)
    }

    /// Reads object `id` for copying; with `deep`, its pointers too.
    fn read_source(&self, id: u64, deep: bool) -> Result<Source> {
        let attached = self.attach(id)?;
        let record =
            self.shared.store.heap_object(id)?.ok_or_else(|| crate::error::not_found(format!("object {id}")))?;
        let spans = self.span_records_now(id, &record)?;
        let mut bytes = vec![0u8; usize::try_from(attached.size()).map_err(|_| crate::error::invalid("too large"))?];
        attached.read(0, &mut bytes)?;
        let mut pointers = Vec::new();
        if deep && record.type_id != 0 {
            for offset in self.type_offsets(crate::TypeId(record.type_id))? {
                let field = bytes.get(offset as usize..(offset + POINTER_BYTES) as usize).ok_or_else(|| {
                    HeapError::BadType {
                        reason: format!("pointer field at {offset} is past object {id}'s {} bytes", bytes.len()),
                    }
                })?;
                let mut raw = [0u8; 24];
                raw.copy_from_slice(field);
                if !PPtr::<()>::from_bytes(&raw).is_null() {
                    pointers.push(offset);
                }
            }
        }
        Ok(Source { id, record, bytes, pointers, spans })
    }

    /// The pointer stored at `offset` of `source`.
    fn pointer_at(source: &Source, offset: u64) -> PPtr<()> {
        let mut raw = [0u8; 24];
        raw.copy_from_slice(&source.bytes[offset as usize..(offset + POINTER_BYTES) as usize]);
        PPtr::from_bytes(&raw)
    }

    /// Walks from `root` (breadth first), then copies what it reached.
    fn duplicate(&self, root: u64, deep: bool) -> Result<u64> {
        self.check_writable("copy an object")?;
        let mut sources: Vec<Source> = Vec::new();
        let mut position: HashMap<u64, usize> = HashMap::new();
        let mut queue = VecDeque::from([root]);
        position.insert(root, 0);
        while let Some(id) = queue.pop_front() {
            let source = self.read_source(id, deep)?;
            for &offset in &source.pointers {
                let target = Heap::pointer_at(&source, offset);
                if !position.contains_key(&target.object) {
                    if position.len() >= MAX_CLONE_OBJECTS {
                        return Err(crate::error::invalid(format!(
                            "clone reaches more than {MAX_CLONE_OBJECTS} objects"
                        )));
                    }
                    position.insert(target.object, position.len());
                    queue.push_back(target.object);
                }
                let size = match self.attach(target.object) {
                    Ok(a) => a.size(),
                    Err(HeapError::NotFound { .. }) => {
                        return Err(HeapError::BadPointer {
                            object: target.object,
                            offset: target.offset,
                            reason: format!("object {id} at {offset} points to no object of this heap"),
                        })
                    }
                    Err(e) => return Err(e),
                };
                if target.offset > size {
                    return Err(HeapError::BadPointer {
                        object: target.object,
                        offset: target.offset,
                        reason: format!("past its target's {size} bytes"),
                    });
                }
            }
            sources.push(source);
        }
        let ids = self.shared.store.allocate_object_ids(sources.len() as u64)?;
        let new_ids: Vec<u64> = ids.collect();
        for source in &mut sources {
            for offset in source.pointers.clone() {
                let mut target = Heap::pointer_at(source, offset);
                target.object = new_ids[position[&target.object]];
                source.bytes[offset as usize..(offset + POINTER_BYTES) as usize].copy_from_slice(&target.to_bytes());
            }
        }
        match self.commit_copies(&sources, &new_ids) {
            Ok(()) => Ok(new_ids[0]),
            Err(e) => {
                for &id in &new_ids {
                    let _ = self.shared.store.remove_heap_file(id);
                }
                Err(e)
            }
        }
    }

    /// Creates every copy (file with its bytes, records, arena state, entry
    /// in `objects/`) in one transaction.
    fn commit_copies(&self, sources: &[Source], new_ids: &[u64]) -> Result<()> {
        let mut locks = vec![LockRequest::Shared(self.shared.objects_dir)];
        let mut names = Vec::with_capacity(new_ids.len());
        for &id in new_ids {
            let name = Heap::object_name(id)?;
            locks.push(LockRequest::Exclusive(id));
            locks.push(LockRequest::Name(self.shared.objects_dir, name.as_bytes().to_vec()));
            names.push(name);
        }
        locks.extend(sources.iter().map(|s| LockRequest::Shared(s.id)));
        let owner = (OBJECT_MODE, self.credentials.uid, self.credentials.gid);
        let create = |txn: &mut larder_object::Transaction<'_>| -> Result<()> {
            for ((source, &id), name) in sources.iter().zip(new_ids).zip(&names) {
                let spans = &source.spans;
                let mut record = HeapObject { heap: self.shared.root, durable_size: 0, ..source.record };
                if !spans.is_empty() {
                    record.flags |= larder_object::meta::HEAP_OBJECT_ARENA;
                }
                txn.create_heap_object(id, source.bytes.len() as u64, owner, &record)?;
                {
                    let mut pending = self.shared.pending.lock();
                    pending.files.insert(id);
                    pending.dir_changed = true;
                }
                let file = self.shared.store.open_heap_file(id, true)?;
                write_all_at(&*file, &source.bytes, 0)?;
                txn.link_in(self.shared.objects_dir, name, id)?;
                for (key, value) in spans {
                    txn.put(&heap_span_key(id, *key), value);
                }
            }
            Ok(())
        };
        // One transaction either way: a log record when it fits one, else
        // an index run of its own (atomic too, and durable at once).
        let span_bytes: u64 = sources.iter().flat_map(|s| &s.spans).map(|(_, v)| 32 + v.len() as u64).sum();
        let estimate = sources.len() as u64 * COPY_RECORD_BYTES + span_bytes;
        if estimate <= larder_namespace::bulk::record_budget(&self.shared.store) {
            self.shared.store.transact_locked(&locks, Durability::Buffered, create)?;
        } else {
            self.shared.store.transact_as_run(&locks, create)?;
        }
        Ok(())
    }
}
