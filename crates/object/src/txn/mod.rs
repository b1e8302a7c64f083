//! Transactions: any number of updates committed atomically, isolated by
//! per-object locks, seeing their own writes.
//!
//! `Store::transact(objects, durability, f)` locks `objects` exclusively
//! (`Store::transact_locked` takes any [`LockRequest`]s: shared object
//! locks and name locks too), in a fixed order, runs `f` with a
//! [`Transaction`] that reads the store as of now plus its own pending
//! writes, and commits everything `f` wrote as one intent-log record (one
//! index batch) before the locks are released. If `f` returns an error
//! nothing is written.
//!
//! What each lock allows: an exclusive object lock any change of the
//! object; a shared one reading it and, for a directory, changing its entry
//! count blindly ([`Transaction::change_dir`]); a name lock creating,
//! replacing or removing that one dentry. Objects the transaction creates
//! are its own, exclusively.

mod dir_deltas;
pub(crate) mod ids;
pub(crate) mod locks;

use std::collections::BTreeMap;
use std::ops::Bound;

use larder_index::WriteBatch;
use larder_log::Dependency;
use larder_space::Extent;

use crate::error::{ObjectError, Result};
use crate::meta::{
    apply_dir_delta, encode_dir_delta, onode_key, Dentry, DentryKey, DirDelta, Kind, MetaLimits, Name, Onode,
    DIR_ENTRIES_OPERATOR,
};
use crate::store::Store;
use dir_deltas::DirDeltas;
pub use locks::LockRequest;

/// Bytes of operations a transaction's batch has room for from the
/// start: a create's three puts (its dentry, its onode and its
/// directory's onode) with a name of up to about 100 bytes. Grown from
/// its header instead, the batch would be reallocated five or six times
/// per create, each a copy and a call into malloc, which through a FUSE
/// mount runs with the caches cold after the kernel's work between two
/// requests.
const TXN_BATCH_BYTES: usize = 256;

/// An open transaction (see the module doc).
pub struct Transaction<'a> {
    store: &'a Store,
    /// Objects held exclusively (sorted), including those created here.
    exclusive: Vec<u64>,
    /// Objects held shared (sorted).
    shared: Vec<u64>,
    /// Objects created in bulk here: ranges of fresh ids, held exclusively.
    created: Vec<std::ops::Range<u64>>,
    /// Names held: (directory, name), sorted (a batch may hold thousands).
    names: Vec<(u64, Vec<u8>)>,
    batch: WriteBatch,
    /// Pending writes by key: `None` for a delete. Later ones win.
    pending: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Entry-count deltas written as merge operands, by directory, for
    /// directories whose onode this transaction has not written whole.
    entry_deltas: DirDeltas,
    /// Container files holding data this transaction's record refers to:
    /// made durable no later than the record.
    deps: Vec<Dependency>,
    /// Space allocated for this transaction: returned if it fails before
    /// its record is committed.
    allocated: Vec<Extent>,
    /// Space the committed record stops referencing: freed at its LSN.
    frees: Vec<Extent>,
    /// The commit waits for durability: large writes start writing their
    /// data to the device at once rather than leave it to the page cache.
    durable: bool,
}

/// A pending write as the scan sees it: the key and `None` for a delete.
type PendingEntry<'p> = (&'p Vec<u8>, &'p Option<Vec<u8>>);

/// What a finished transaction leaves for its commit.
pub(crate) struct Finished {
    pub(crate) batch: WriteBatch,
    pub(crate) deps: Vec<Dependency>,
    pub(crate) allocated: Vec<Extent>,
    pub(crate) frees: Vec<Extent>,
    /// Directories whose entry count this transaction changed by operand.
    pub(crate) merged_dirs: Vec<u64>,
}

impl<'a> Transaction<'a> {
    pub(crate) fn new(store: &'a Store, requests: &[LockRequest], durable: bool) -> Self {
        let (mut exclusive, mut shared, mut names) = (Vec::new(), Vec::new(), Vec::new());
        for r in requests {
            match r {
                LockRequest::Exclusive(id) => exclusive.push(*id),
                LockRequest::Shared(id) => shared.push(*id),
                LockRequest::Name(dir, name) => names.push((*dir, name.clone())),
            }
        }
        for v in [&mut exclusive, &mut shared] {
            v.sort_unstable();
            v.dedup();
        }
        names.sort_unstable();
        names.dedup();
        Transaction {
            store,
            exclusive,
            shared,
            created: Vec::new(),
            names,
            batch: WriteBatch::with_capacity(TXN_BATCH_BYTES),
            pending: BTreeMap::new(),
            entry_deltas: DirDeltas::default(),
            deps: Vec::new(),
            allocated: Vec::new(),
            frees: Vec::new(),
            durable,
        }
    }

    /// Sets a raw index key.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.batch.put(key, value);
        self.pending.insert(key.to_vec(), Some(value.to_vec()));
    }

    /// [`Transaction::put`] of a value the caller built for it: kept as
    /// this transaction's pending value without a second copy (an inline
    /// object's onode is its bytes and more).
    pub(crate) fn put_owned(&mut self, key: &[u8], value: Vec<u8>) {
        self.batch.put(key, &value);
        self.pending.insert(key.to_vec(), Some(value));
    }

    /// Removes a raw index key.
    pub fn delete(&mut self, key: &[u8]) {
        self.batch.delete(key);
        self.pending.insert(key.to_vec(), None);
    }

    /// Removes every live key that starts with `prefix` (found as
    /// [`Transaction::scan`] finds them: this transaction's writes
    /// included).
    pub fn delete_prefix(&mut self, prefix: &[u8]) -> Result<()> {
        let end = crate::meta::prefix_end(prefix).unwrap_or_default();
        for (key, _) in self.scan(prefix, &end, true, usize::MAX)? {
            self.delete(&key);
        }
        Ok(())
    }

    /// Reads a raw key: this transaction's own write if it made one, else
    /// the store's committed value.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.pending.get(key) {
            Some(v) => Ok(v.clone()),
            None => Ok(self.store.index().get(key)?),
        }
    }

    /// Live keys in `[start, end)` in order (backward when `!forward`),
    /// this transaction's own writes merged over the store's committed
    /// state, at most `limit` of them. The index is read lazily, so a small
    /// limit costs a seek, not a scan.
    pub fn scan(&self, start: &[u8], end: &[u8], forward: bool, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut left = limit;
        self.scan_until(start, end, forward, |_| {
            left -= 1;
            left == 0
        })
    }

    /// Live keys in `[start, end)` in order (backward when `!forward`), as
    /// [`Transaction::scan`] reads them, up to and including the first for
    /// which `last` (given its key) says true: a scan that stops on what it
    /// finds, reading the index no further.
    pub fn scan_until(
        &self,
        start: &[u8],
        end: &[u8],
        forward: bool,
        mut last: impl FnMut(&[u8]) -> bool,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        if start >= end {
            return Ok(out);
        }
        let mut index = self.store.index().range(Bound::Included(start), Bound::Excluded(end), forward)?.peekable();
        let range = self.pending.range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)));
        let mut pending: Box<dyn Iterator<Item = PendingEntry<'_>>> =
            if forward { Box::new(range) } else { Box::new(range.rev()) };
        let mut next_pending = pending.next();
        loop {
            let found = out.len();
            // Which source holds the next key in scan order; on a tie the
            // pending write wins and the index's value is skipped. Decided
            // on the peeked key in place (no copy of it per step).
            let (take_pending, skip_index) = match (&next_pending, index.peek()) {
                (_, Some(Err(_))) => match index.next() {
                    Some(Err(e)) => return Err(e.into()),
                    _ => (next_pending.is_some(), false),
                },
                (None, None) => break,
                (Some(_), None) => (true, false),
                (None, Some(Ok(_))) => (false, false),
                (Some((pk, _)), Some(Ok((ik, _)))) => {
                    if pk.as_slice() == ik.as_slice() {
                        (true, true)
                    } else {
                        ((pk.as_slice() < ik.as_slice()) == forward, false)
                    }
                }
            };
            if skip_index {
                index.next();
            }
            if take_pending {
                if let Some((k, Some(v))) = next_pending {
                    out.push((k.clone(), v.clone()));
                }
                next_pending = pending.next();
            } else if let Some(kv) = index.next() {
                out.push(kv?);
            }
            if out.len() > found && out.last().is_some_and(|(k, _)| last(k)) {
                break;
            }
        }
        Ok(out)
    }

    /// This transaction's own writes to keys in `[start, end)`, in key
    /// order: `None` for a delete.
    pub(crate) fn pending_in<'p>(&'p self, start: &[u8], end: &[u8]) -> impl Iterator<Item = PendingEntry<'p>> + 'p {
        let range =
            (start < end).then(|| self.pending.range::<[u8], _>((Bound::Included(start), Bound::Excluded(end))));
        range.into_iter().flatten()
    }

    /// Makes `dep` a dependency of the record: durable no later than the
    /// record (in the log's round that writes the record).
    pub(crate) fn add_dependency(&mut self, dep: Dependency) {
        Dependency::merge_into(&mut self.deps, &dep);
    }

    /// Records space allocated for this transaction (returned on failure).
    pub(crate) fn note_allocated(&mut self, extent: Extent) {
        self.allocated.push(extent);
    }

    /// Records space the record stops referencing (freed at its LSN).
    pub(crate) fn free_after_commit(&mut self, extent: Extent) {
        self.frees.push(extent);
    }

    /// Whether the commit waits for durability.
    pub(crate) fn is_durable(&self) -> bool {
        self.durable
    }

    /// The store this transaction runs on.
    pub(crate) fn store(&self) -> &'a Store {
        self.store
    }

    /// Refuses unless `object` is held exclusively.
    pub(crate) fn check_locked(&self, object: u64) -> Result<()> {
        if self.exclusive.binary_search(&object).is_err() && !self.created.iter().any(|r| r.contains(&object)) {
            return Err(ObjectError::NotLocked { object });
        }
        Ok(())
    }

    /// Whether this transaction may remove `object`, named `name` in `dir`:
    /// it holds the object exclusively (a lock, or created here) and the
    /// name (its name lock, or `dir` exclusively).
    pub fn holds_entry(&self, dir: u64, name: &Name, object: u64) -> bool {
        self.check_locked(object).is_ok() && self.check_name(dir, name).is_ok()
    }

    /// Refuses unless `object` is held, shared or exclusively.
    fn check_held(&self, object: u64) -> Result<()> {
        if self.shared.binary_search(&object).is_err() {
            return self.check_locked(object);
        }
        Ok(())
    }

    /// Refuses unless the name `name` in `dir` is held (by its name lock or
    /// by holding `dir` exclusively).
    fn check_name(&self, dir: u64, name: &Name) -> Result<()> {
        let wanted = (dir, name.as_bytes());
        if self.names.binary_search_by(|(d, n)| (*d, n.as_slice()).cmp(&wanted)).is_ok() {
            return Ok(());
        }
        self.check_locked(dir).map_err(|_| ObjectError::NameNotLocked {
            dir,
            name: String::from_utf8_lossy(name.as_bytes()).into_owned(),
        })
    }

    /// Creates an object of `kind` in this transaction and returns its id,
    /// held exclusively from now on: size 0, no links (the namespace adds
    /// them), generation 1, every time now. The object has no name: link it
    /// in the same transaction (the namespace's `create` does), or write an
    /// orphan record for it (the KV writer does), or it is never freed
    /// (fsck reports an object with neither). `mode` holds the permission
    /// bits, with or without `kind`'s type bits. A directory is its own
    /// parent until the namespace links it.
    pub fn create_object(&mut self, kind: Kind, mode: u32, uid: u32, gid: u32) -> Result<u64> {
        self.create_object_as(kind, mode, uid, gid, |_| ())
    }

    /// [`Transaction::create_object`], with `shape` setting the new onode's
    /// fields before it is written once (the namespace gives a new object
    /// its first name this way, without reading the onode back).
    pub fn create_object_as(
        &mut self,
        kind: Kind,
        mode: u32,
        uid: u32,
        gid: u32,
        shape: impl FnOnce(&mut Onode),
    ) -> Result<u64> {
        let id = self.store.allocate_object_id()?;
        if let Err(at) = self.exclusive.binary_search(&id) {
            // A fresh id: nobody else can know it, so nobody else locks it.
            self.exclusive.insert(at, id);
        }
        let mut onode = Onode::new(kind, mode, uid, gid, id);
        shape(&mut onode);
        self.put_onode(id, &onode)?;
        Ok(id)
    }

    /// Allocates `count` consecutive object ids (one high-water update at
    /// most) for objects this transaction creates blind: it holds them
    /// exclusively, and writes their onodes without reading them back.
    pub(crate) fn allocate_blind(&mut self, count: u64) -> Result<std::ops::Range<u64>> {
        let ids = self.store.allocate_object_ids(count)?;
        self.created.push(ids.clone());
        Ok(ids)
    }

    /// Writes into `batch` (empty) instead of a new one: a large
    /// transaction reusing the allocation of the one before.
    pub(crate) fn use_batch(&mut self, batch: WriteBatch) {
        debug_assert!(batch.is_empty() && self.batch.is_empty());
        self.batch = batch;
    }

    /// Makes room in this transaction's batch for `bytes` more bytes of
    /// keys and values, for a caller about to write many (a bulk create):
    /// one allocation instead of a doubling series, each copying what the
    /// batch holds.
    pub fn reserve_batch(&mut self, bytes: usize) {
        self.batch.reserve(bytes);
    }

    /// Puts the onode of an object created blind ([`Transaction::allocate_blind`]).
    pub(crate) fn put_onode_blind(&mut self, object: u64, onode: &Onode, limits: &MetaLimits) -> Result<()> {
        self.put_encoded_onode_blind(object, &onode.encode(limits)?);
        Ok(())
    }

    /// [`Transaction::put_onode_blind`] of an onode already encoded (and
    /// so checked).
    pub(crate) fn put_encoded_onode_blind(&mut self, object: u64, encoded: &[u8]) {
        self.batch.put(onode_key(object), encoded);
    }

    /// Sets the dentry `name` in `dir` (the name held) blind: this
    /// transaction does not read it back (see
    /// [`Transaction::create_files_blind`]).
    pub fn put_dentry_blind(&mut self, dir: u64, name: &Name, dentry: &Dentry) -> Result<()> {
        self.check_name(dir, name)?;
        self.batch.put(DentryKey::of(dir, name).as_bytes(), dentry.encode()?);
        Ok(())
    }

    /// As [`Transaction::onode`], the committed onode read through `path`
    /// (a path entry leading to `object`, [`crate::Store::derived_for_read`]):
    /// the value the entry holds while no batch wrote the onode since it
    /// was read, else the metadata cache's or the index's. The value is
    /// current: this transaction holds the object, and a commit writing
    /// it moved its stripe epoch before releasing its locks.
    pub(crate) fn onode_via(&self, path: &crate::store::DerivedPath, object: u64) -> Result<Option<Onode>> {
        let key = onode_key(object);
        if self.pending.contains_key(&key[..]) || self.entry_deltas.contains(object) {
            return self.onode(object);
        }
        self.check_held(object)?;
        // Decoded here rather than through the value's decoded form, which
        // a path entry's weight does not count.
        let (value, _) = self.store.reach(path, &key)?;
        value.map(|v| Onode::decode(&v, &self.limits())).transpose()
    }

    /// The onode of a held object (shared or exclusive), if it exists,
    /// with this transaction's own changes.
    pub fn onode(&self, object: u64) -> Result<Option<Onode>> {
        self.check_held(object)?;
        let key = onode_key(object);
        let mut onode = match self.pending.get(&key[..]) {
            Some(v) => v.as_deref().map(|v| Onode::decode(v, &self.limits())).transpose()?,
            // The committed onode through the metadata cache, decoded once:
            // every commit that changed it updated the cache before
            // releasing its locks, and this transaction holds the object.
            None => self.store.stat(object)?,
        };
        if let (Some(o), Some(d)) = (onode.as_mut(), self.entry_deltas.get(object)) {
            apply_dir_delta(o, d)?;
        }
        Ok(onode)
    }

    /// Adds `delta` to the entry count of directory `dir` (held shared or
    /// exclusively), and to its link count the subdirectories it adds or
    /// removes. Written as a merge operand unless this transaction already
    /// wrote the onode whole, so concurrent creates in one directory do not
    /// wait for each other.
    pub fn change_dir(&mut self, dir: u64, delta: DirDelta) -> Result<()> {
        self.check_held(dir)?;
        let key = onode_key(dir);
        if self.pending.contains_key(&key[..]) {
            let mut onode = self.onode(dir)?.ok_or(ObjectError::NoSuchObject { object: dir })?;
            apply_dir_delta(&mut onode, delta)?;
            return self.put_onode(dir, &onode);
        }
        // Summed here and written as one operand at the end (`finish`), so
        // a transaction creating many names adds one operand, not many.
        self.entry_deltas.add(dir, delta);
        Ok(())
    }

    /// The dentry `name` in directory `dir` (held), with this
    /// transaction's own changes.
    pub fn dentry(&self, dir: u64, name: &Name) -> Result<Option<Dentry>> {
        self.check_held(dir).or_else(|_| self.check_name(dir, name))?;
        // Built on the stack: a key only looked up is never kept.
        let key = DentryKey::of(dir, name);
        let key = key.as_bytes();
        match self.pending.get(key) {
            Some(v) => v.as_deref().map(Dentry::decode).transpose(),
            // The committed dentry through the metadata cache, as onodes
            // are read: every commit that changed it updated the cache
            // before releasing its locks, and this transaction holds the
            // name (or its directory). Not kept on a miss, so the check of
            // a new name does not fill the cache with absent names; a
            // name just looked up or just removed (its absence written
            // through) is a hit rather than a memtable search (a tenth of
            // an unlink, and of a create over a removed name).
            None => self.store.get_meta_unkept(key)?.map(|v| Dentry::decode(&v)).transpose(),
        }
    }

    /// Sets the dentry `name` in `dir` (the name held). Link counts and
    /// entry counts are the caller's (the namespace's) to keep.
    pub fn put_dentry(&mut self, dir: u64, name: &Name, dentry: &Dentry) -> Result<()> {
        self.check_name(dir, name)?;
        let value = dentry.encode()?;
        self.put(DentryKey::of(dir, name).as_bytes(), &value);
        Ok(())
    }

    /// Removes the dentry `name` in `dir` (the name held).
    pub fn delete_dentry(&mut self, dir: u64, name: &Name) -> Result<()> {
        self.check_name(dir, name)?;
        self.delete(DentryKey::of(dir, name).as_bytes());
        Ok(())
    }

    /// The most bytes an object of this store holds in its onode: larger
    /// ones go to container space, never into this transaction's batch.
    pub fn inline_max_bytes(&self) -> u32 {
        self.limits().inline_max_bytes
    }

    pub(crate) fn limits(&self) -> MetaLimits {
        MetaLimits::from_superblock(self.store.superblock())
    }

    /// Writes the onode of an object held exclusively (whole: it replaces
    /// any entry-count delta this transaction wrote before).
    pub fn put_onode(&mut self, object: u64, onode: &Onode) -> Result<()> {
        self.check_locked(object)?;
        let bytes = onode.encode(&self.limits())?;
        self.put_owned(&onode_key(object), bytes);
        self.entry_deltas.remove(object);
        Ok(())
    }

    /// Removes the onode of an object held exclusively.
    pub fn delete_onode(&mut self, object: u64) -> Result<()> {
        self.check_locked(object)?;
        self.delete(&onode_key(object));
        self.entry_deltas.remove(object);
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Finished {
        let mut merged_dirs = Vec::new();
        for (dir, delta) in self.entry_deltas.iter() {
            if !delta.is_zero() {
                self.batch.merge(DIR_ENTRIES_OPERATOR, onode_key(dir), encode_dir_delta(delta));
                merged_dirs.push(dir);
            }
        }
        Finished { batch: self.batch, deps: self.deps, allocated: self.allocated, frees: self.frees, merged_dirs }
    }
}
