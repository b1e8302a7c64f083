//! The checks made key by key, in index order.
//!
//! The maps sort store metadata (`0x01`) first, then omap (`0x10`), fmap,
//! dmap, xattr and orphans: by the time an fmap entry, a dentry, an xattr
//! or an orphan record is read, every onode and `next_object_id` are
//! already known, so each reference is checked as it is read and only
//! counts need a pass at the end (`namespace.rs`).

use std::collections::BTreeSet;

use larder_object::meta::{
    decode_counter, Dentry, ExtentMapEntry, Kind, Map, MetaKey, MetaLimits, Name, Onode, Orphan, XattrName, XattrValue,
    NEXT_OBJECT_ID,
};
use larder_object::ROOT_ID;

use crate::model::{Loc, Lookup, Model, ObjInfo, Problems};
use crate::problem::{ExtentOwner, Problem};

/// The key-by-key checks and what they build.
pub(crate) struct Visitor<'a> {
    pub(crate) limits: MetaLimits,
    /// Containers that exist.
    pub(crate) containers: BTreeSet<u64>,
    pub(crate) model: Model,
    pub(crate) problems: &'a mut Problems,
    /// The fmap entry read last: its object and where the entries of that
    /// object read so far end.
    last_fmap: Option<(u64, u64)>,
    /// The arena records of the heap object read last (key, value).
    arena: Option<ArenaRecords>,
}

/// One heap object's arena records: the object, and (arena key, bytes).
type ArenaRecords = (u64, Vec<(u64, Vec<u8>)>);

impl<'a> Visitor<'a> {
    pub(crate) fn new(limits: MetaLimits, containers: BTreeSet<u64>, problems: &'a mut Problems) -> Self {
        Visitor { limits, containers, model: Model::default(), problems, last_fmap: None, arena: None }
    }

    /// Checks the arena whose records were read last (call once the scan
    /// is over, too): they load as the heap loads them, the arena is
    /// consistent, and its claimed ranges lie inside the object.
    pub(crate) fn finish_arena(&mut self) {
        let Some((object, records)) = self.arena.take() else { return };
        self.model.counts.heap_arenas += 1;
        let arena = match larder_heap::arena::Arena::load(records.iter().map(|(k, v)| (*k, v.as_slice()))) {
            Ok(arena) => arena,
            Err(e) => return self.problems.push(Problem::HeapArenaBroken { object, what: e.to_string() }),
        };
        if let Err(what) = arena.verify() {
            return self.problems.push(Problem::HeapArenaBroken { object, what });
        }
        let size = self.model.objects.get(&object).map(|o| o.size);
        let end = arena.claimed_ranges().iter().map(|&(offset, len)| offset.saturating_add(len)).max();
        if let (Some(size), Some(end)) = (size, end) {
            if end > size {
                let what = format!("its claimed ranges end at {end}, past the object's size {size}");
                self.problems.push(Problem::HeapArenaBroken { object, what });
            }
        }
    }

    /// Checks one key and its value.
    pub(crate) fn visit(&mut self, key: &[u8], value: &[u8]) {
        self.model.counts.keys += 1;
        let key = match MetaKey::decode(key) {
            Ok(k) => k,
            Err(e) => return self.problems.push(Problem::BadKey { key: key.to_vec(), error: e.to_string() }),
        };
        match &key {
            MetaKey::Store(name) => self.store_entry(&key, name.as_bytes(), value),
            &MetaKey::Onode { object } => self.onode(&key, object, value),
            &MetaKey::Extent { object, offset } => self.fmap_entry(&key, object, offset, value),
            MetaKey::Dentry { parent, name } => self.dentry(&key, *parent, name, value),
            MetaKey::Xattr { object, name } => self.xattr(&key, *object, name, value),
            &MetaKey::Orphan { object } => self.orphan(&key, object, value),
            MetaKey::HeapRoot { .. }
            | MetaKey::HeapObject { .. }
            | MetaKey::HeapName { .. }
            | MetaKey::HeapType { .. }
            | MetaKey::HeapSpan { .. }
            | MetaKey::HeapImage { .. } => self.heap_record(&key, value),
            MetaKey::TreeCatalog { .. }
            | MetaKey::TreeNextId
            | MetaKey::TreeCount { .. }
            | MetaKey::TreeEntry { .. } => self.tree_record(&key, value),
        }
    }

    /// A heap record (docs/heap.md): its ids were allocated and its value
    /// decodes (an arena span's value is the arena's to check; a name
    /// record's value is empty).
    fn heap_record(&mut self, key: &MetaKey, value: &[u8]) {
        use larder_object::meta::{HeapObject, HeapPageImage, HeapRoot, HeapType};
        let decoded = match *key {
            MetaKey::HeapRoot { root } => {
                self.check_id(key, "heap root id", root);
                HeapRoot::decode(value)
                    .map(|r| {
                        self.model.heap_roots.insert(root, r);
                    })
                    .map_err(|e| e.to_string())
            }
            MetaKey::HeapObject { object } => {
                self.check_id(key, "object id", object);
                HeapObject::decode(value)
                    .map(|r| {
                        self.model.heap_objects.insert(object, r);
                    })
                    .map_err(|e| e.to_string())
            }
            MetaKey::HeapName { object, ref name } => {
                self.check_id(key, "object id", object);
                // Object records sort before name records: all are known.
                if !self.model.heap_objects.contains_key(&object) {
                    self.problems.push(Problem::HeapNameWithoutObject { object, name: name.clone() });
                }
                self.model.heap_names.push((object, name.clone()));
                if value.is_empty() {
                    Ok(())
                } else {
                    Err(format!("a name record's value is empty, found {} bytes", value.len()))
                }
            }
            MetaKey::HeapType { type_id } => {
                self.check_id(key, "type id", type_id);
                HeapType::decode(value).map(drop).map_err(|e| e.to_string())
            }
            MetaKey::HeapSpan { object, span } => {
                self.check_id(key, "object id", object);
                if !self.model.heap_objects.contains_key(&object) {
                    self.problems.push(Problem::HeapSpanWithoutObject { object, span });
                    return;
                }
                // An object's records are contiguous in key order: its
                // arena is checked whole once the next object's begin.
                if self.arena.as_ref().is_some_and(|(o, _)| *o != object) {
                    self.finish_arena();
                }
                self.arena.get_or_insert_with(|| (object, Vec::new())).1.push((span, value.to_vec()));
                Ok(())
            }
            MetaKey::HeapImage { object, .. } => {
                // Recovery writes every image into its file and deletes it
                // at open, so one is seen only in a store not opened since
                // a crash: it must decode, and its object may be gone.
                self.check_id(key, "object id", object);
                HeapPageImage::decode(value).map(drop).map_err(|e| e.to_string())
            }
            _ => Ok(()),
        };
        if let Err(e) = decoded {
            self.bad_value(key, e);
        }
    }

    pub(crate) fn bad_value(&mut self, key: &MetaKey, error: impl ToString) {
        self.problems.push(Problem::BadValue { key: key.clone(), error: error.to_string() });
    }

    /// Rule 3: `id` is the root or below `next_object_id`. Skipped when
    /// store metadata could not be read (the counter may be what was lost).
    fn check_id(&mut self, key: &MetaKey, field: &'static str, id: u64) {
        if !self.model.complete(&[Map::Store]) {
            return;
        }
        let next = self.model.next_object_id;
        // The root's id is fixed, not handed out by the allocator, so a
        // store whose only object is its root needs no counter.
        if id == ROOT_ID || (id != 0 && next.is_some_and(|n| id < n)) {
            return;
        }
        self.problems.push(Problem::IdNotAllocated { id, key: key.clone(), field, next_object_id: next });
    }

    /// Whether references to objects can be checked: every onode was read.
    fn omap_complete(&self) -> bool {
        self.model.complete(&[Map::Omap])
    }

    fn store_entry(&mut self, key: &MetaKey, name: &[u8], value: &[u8]) {
        if name != NEXT_OBJECT_ID.as_bytes() {
            let name = String::from_utf8_lossy(name).into_owned();
            return self.problems.push(Problem::UnknownStoreEntry { name });
        }
        match decode_counter(value) {
            Ok(n) => self.model.next_object_id = Some(n),
            Err(e) => {
                // The counter is unknown, as if its key could not be read:
                // checking ids against none would flag every object.
                self.model.incomplete.insert(Map::Store);
                self.bad_value(key, e);
            }
        }
    }

    fn onode(&mut self, key: &MetaKey, object: u64, value: &[u8]) {
        self.check_id(key, "object id", object);
        match Onode::decode(value, &self.limits) {
            Ok(onode) => {
                let info = ObjInfo::new(&onode);
                let counts = &mut self.model.counts;
                counts.objects += 1;
                counts.directories += u64::from(info.kind == Kind::Directory);
                counts.heap_objects += u64::from(info.loc == Loc::OwnFile);
                self.model.objects.insert(object, info);
            }
            Err(e) => {
                self.model.undecodable.insert(object);
                self.bad_value(key, e);
            }
        }
    }

    fn fmap_entry(&mut self, key: &MetaKey, object: u64, offset: u64, value: &[u8]) {
        self.model.counts.fmap_entries += 1;
        self.check_id(key, "object id", object);
        let entry = match ExtentMapEntry::decode(value, &self.limits).and_then(|e| e.check_at(offset).map(|()| e)) {
            Ok(e) => e,
            Err(e) => return self.bad_value(key, e),
        };
        // `check_at` passed, so the end does not overflow.
        let end = offset.saturating_add(entry.logical_len);
        if self.omap_complete() {
            match self.model.lookup(object) {
                Lookup::Missing => self.problems.push(Problem::FmapWithoutOnode { object, offset }),
                Lookup::Undecodable => {}
                Lookup::Found(o) if o.loc != Loc::Extents => {
                    let location = o.loc.describe();
                    self.problems.push(Problem::FmapNotExtents { object, offset, location });
                }
                Lookup::Found(o) if end > o.size => {
                    let size = o.size;
                    self.problems.push(Problem::FmapPastSize { object, offset, end, size });
                }
                Lookup::Found(_) => {}
            }
        }
        // Keys come in (object, offset) order, so the entries of one object
        // are ascending; each must start at or after the end of those before.
        let reach = match self.last_fmap {
            Some((o, previous_end)) if o == object => {
                if offset < previous_end {
                    self.problems.push(Problem::FmapOverlap { object, offset, previous_end });
                }
                previous_end.max(end)
            }
            _ => end,
        };
        self.last_fmap = Some((object, reach));
        let owner = ExtentOwner { object, offset, extent: entry.extent };
        if !self.containers.contains(&entry.extent.container) {
            return self.problems.push(Problem::ContainerMissing { owner });
        }
        self.model.counts.bytes_referenced += entry.extent.len;
        self.model.blocks += entry.blocks();
        self.model.extents.push(owner);
    }

    fn dentry(&mut self, key: &MetaKey, parent: u64, name: &Name, value: &[u8]) {
        self.model.counts.dentries += 1;
        self.check_id(key, "parent id", parent);
        let dentry = Dentry::decode(value);
        if let Ok(d) = &dentry {
            self.check_id(key, "child id", d.child);
        }
        if !self.omap_complete() {
            return;
        }
        // The key alone makes it an entry of its directory, even if its
        // value does not decode.
        match self.model.lookup(parent) {
            Lookup::Missing => self.problems.push(Problem::DentryParentMissing { parent, name: name.clone() }),
            Lookup::Undecodable => {}
            Lookup::Found(p) if p.kind != Kind::Directory => {
                let kind = p.kind;
                self.problems.push(Problem::DentryParentNotDirectory { parent, name: name.clone(), kind });
            }
            Lookup::Found(p) => {
                p.entries += 1;
                if dentry.as_ref().is_ok_and(|d| d.kind == Kind::Directory) {
                    p.subdirs += 1;
                }
            }
        }
        let dentry = match dentry {
            Ok(d) => d,
            Err(e) => return self.bad_value(key, e),
        };
        self.dentry_child(parent, name, dentry);
    }

    fn dentry_child(&mut self, parent: u64, name: &Name, dentry: Dentry) {
        let child = dentry.child;
        if child == ROOT_ID {
            self.problems.push(Problem::RootNamed { parent, name: name.clone() });
        }
        let c = match self.model.lookup(child) {
            Lookup::Missing => {
                return self.problems.push(Problem::DentryChildMissing { parent, name: name.clone(), child });
            }
            Lookup::Undecodable => return,
            Lookup::Found(c) => c,
        };
        c.names += 1;
        let mut found = Vec::new();
        if dentry.kind != c.kind {
            found.push(Problem::DentryKindMismatch {
                parent,
                name: name.clone(),
                child,
                dentry: dentry.kind,
                onode: c.kind,
            });
        }
        // The root's own rule (rule 2) covers a dentry naming it.
        if c.kind == Kind::Directory && child != ROOT_ID {
            match &c.first_name {
                Some(first) => found.push(Problem::DirectoryNamedTwice {
                    dir: child,
                    first: first.clone(),
                    second: (parent, name.clone()),
                }),
                None => c.first_name = Some((parent, name.clone())),
            }
            if let Some((recorded, _)) = c.dir.filter(|&(p, _)| p != parent) {
                found.push(Problem::DirectoryParentMismatch { dir: child, recorded, parent, name: name.clone() });
            }
        }
        for p in found {
            self.problems.push(p);
        }
    }

    fn xattr(&mut self, key: &MetaKey, object: u64, name: &XattrName, value: &[u8]) {
        self.model.counts.xattrs += 1;
        self.check_id(key, "object id", object);
        if let Err(e) = XattrValue::decode(value) {
            self.bad_value(key, e);
        }
        if self.omap_complete() && matches!(self.model.lookup(object), Lookup::Missing) {
            self.problems.push(Problem::XattrWithoutObject { object, name: name.clone() });
        }
    }

    fn orphan(&mut self, key: &MetaKey, object: u64, value: &[u8]) {
        self.model.counts.orphans += 1;
        self.check_id(key, "object id", object);
        if let Err(e) = Orphan::decode(value) {
            self.bad_value(key, e);
        }
        if object == ROOT_ID {
            self.problems.push(Problem::RootOrphan);
        }
        if !self.omap_complete() {
            return;
        }
        match self.model.lookup(object) {
            Lookup::Missing => self.problems.push(Problem::OrphanWithoutObject { object }),
            Lookup::Undecodable => {}
            Lookup::Found(o) => {
                o.orphan = true;
                if o.nlink != 0 && object != ROOT_ID {
                    let nlink = o.nlink;
                    self.problems.push(Problem::OrphanLinked { object, nlink });
                }
            }
        }
    }
}
