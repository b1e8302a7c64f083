//! Freeing a heap object in one transaction: its entry in the heap's
//! `objects/`, every name it has in `names/`, its records (object, names,
//! arena spans) and its onode. The heap's `free` and `larder heap rm` both
//! run this, so the two can never disagree on what a free removes.
//!
//! The file `heap/<id>` is removed only once the free is durable (a free
//! lost in a crash must not leave its object without bytes): the caller
//! removes it after a durable commit, or leaves it to the next open, which
//! removes files without an object record.

use std::ops::Bound;

use crate::error::{ObjectError, Result};
use crate::meta::{
    decode_heap_key, heap_kind_prefix, heap_name_prefix, heap_object_key, heap_root_key, prefix_end, DirDelta,
    HeapObject, HeapRecord, HeapRoot, MetaKey, Name,
};
use crate::store::{Durability, Store};
use crate::txn::{LockRequest, Transaction};

/// What [`Transaction::free_heap_object`] removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FreedHeapObject {
    /// The object freed (its file `heap/<id>` is left to remove).
    pub object: u64,
    /// The names it had in the heap's `names/` directory, in byte order.
    pub names: Vec<Name>,
}

impl Transaction<'_> {
    /// Frees heap object `object` of the heap whose root directory is
    /// `heap_root`, in this transaction (see the module doc). The
    /// transaction must hold `object` and the heap's `objects/` and
    /// `names/` directories exclusively ([`Store::free_heap_object`] takes
    /// those locks). Refused, changing nothing, when `heap_root` has no
    /// heap root record or `object` no object record of that heap. A name
    /// record whose `names/` entry is missing or names another object
    /// (damage fsck reports) is dropped without touching that entry.
    pub fn free_heap_object(&mut self, heap_root: u64, object: u64) -> Result<FreedHeapObject> {
        let root = self
            .get(&heap_root_key(heap_root))?
            .map(|v| HeapRoot::decode(&v))
            .transpose()?
            .ok_or(ObjectError::NotInHeap { object, heap: heap_root, what: "no heap has this root directory" })?;
        let record = self
            .get(&heap_object_key(object))?
            .map(|v| HeapObject::decode(&v))
            .transpose()?
            .ok_or(ObjectError::NotInHeap { object, heap: heap_root, what: "the object is not a heap object" })?;
        if record.heap != heap_root {
            return Err(ObjectError::NotInHeap { object, heap: heap_root, what: "the object belongs to another heap" });
        }
        let prefix = heap_name_prefix(object);
        let end = prefix_end(&prefix).unwrap_or_default();
        let mut names = Vec::new();
        for (key, _) in self.scan(&prefix, &end, true, usize::MAX)? {
            let MetaKey::HeapName { name, .. } = decode_heap_key(&key)? else {
                return Err(ObjectError::BadRecord { record: "heap name key", what: "not a name record".into() });
            };
            self.remove_entry_of(root.names_dir, &name, object)?;
            names.push(name);
        }
        let id_name = Name::new(object.to_string())?;
        self.remove_entry_of(root.objects_dir, &id_name, object)?;
        // The object's records (names, spans, table entry) and onode.
        self.delete_object(object)?;
        Ok(FreedHeapObject { object, names })
    }

    /// Removes the entry `name` of `dir` if it names `object`.
    fn remove_entry_of(&mut self, dir: u64, name: &Name, object: u64) -> Result<()> {
        if self.dentry(dir, name)?.is_some_and(|d| d.child == object) {
            self.delete_dentry(dir, name)?;
            self.change_dir(dir, DirDelta { entries: -1, links: 0 })?;
        }
        Ok(())
    }
}

impl Store {
    /// The root record of the heap whose root directory is `root`, if any.
    pub fn heap_root(&self, root: u64) -> Result<Option<HeapRoot>> {
        self.index().get(&heap_root_key(root))?.map(|v| HeapRoot::decode(&v)).transpose()
    }

    /// Every heap root record, in root directory id order.
    pub fn heap_roots(&self) -> Result<Vec<(u64, HeapRoot)>> {
        let start = heap_kind_prefix(HeapRecord::Root);
        let end = prefix_end(&start).unwrap_or_default();
        let mut out = Vec::new();
        for kv in self.index().range(Bound::Included(&start[..]), Bound::Excluded(&end[..]), true)? {
            let (k, v) = kv?;
            let MetaKey::HeapRoot { root } = decode_heap_key(&k)? else {
                return Err(ObjectError::BadRecord { record: "heap key", what: "not a root record".into() });
            };
            out.push((root, HeapRoot::decode(&v)?));
        }
        Ok(out)
    }

    /// The names heap object `object` has (its name records), in byte order.
    pub fn heap_names(&self, object: u64) -> Result<Vec<Name>> {
        let start = heap_name_prefix(object);
        let end = prefix_end(&start).unwrap_or_default();
        let mut out = Vec::new();
        for kv in self.index().range(Bound::Included(&start[..]), Bound::Excluded(&end[..]), true)? {
            let (k, _) = kv?;
            let MetaKey::HeapName { name, .. } = decode_heap_key(&k)? else {
                return Err(ObjectError::BadRecord { record: "heap key", what: "not a name record".into() });
            };
            out.push(name);
        }
        Ok(out)
    }

    /// Frees heap object `object` of the heap rooted at `heap_root` in one
    /// transaction committed with `durability`
    /// ([`Transaction::free_heap_object`], with its locks taken here). With
    /// [`Durability::Durable`] its file is then removed and the removal
    /// synced; a buffered free leaves the file to the next open.
    pub fn free_heap_object(&self, heap_root: u64, object: u64, durability: Durability) -> Result<FreedHeapObject> {
        let root = self.heap_root(heap_root)?.ok_or(ObjectError::NotInHeap {
            object,
            heap: heap_root,
            what: "no heap has this root directory",
        })?;
        let locks = [
            LockRequest::Exclusive(root.objects_dir),
            LockRequest::Exclusive(root.names_dir),
            LockRequest::Exclusive(object),
        ];
        let (freed, _) = self.transact_locked(&locks, durability, |txn| txn.free_heap_object(heap_root, object))?;
        if durability == Durability::Durable {
            self.remove_heap_file(object)?;
            self.sync_heap_dir()?;
        }
        Ok(freed)
    }
}
