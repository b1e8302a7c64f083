//! Transactions: any number of updates committed atomically, isolated by
//! per-object locks, seeing their own writes.
//!
//! `Store::transact(objects, durability, f)` locks `objects` (in a fixed
//! order), runs `f` with a [`Transaction`] that reads the store as of now
//! plus its own pending writes, and commits everything `f` wrote as one
//! intent-log record (one index batch) before the locks are released. If
//! `f` returns an error nothing is written.

pub(crate) mod ids;
pub(crate) mod locks;

use std::collections::BTreeMap;
use std::ops::Bound;

use larder_index::WriteBatch;
use larder_io::FileRef;
use larder_space::Extent;

use crate::error::{ObjectError, Result};
use crate::meta::{onode_key, MetaLimits, Onode};
use crate::store::Store;

/// An open transaction (see the module doc).
pub struct Transaction<'a> {
    store: &'a Store,
    locked: Vec<u64>,
    batch: WriteBatch,
    /// Pending writes by key: `None` for a delete. Later ones win.
    pending: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Container files holding data this transaction's record refers to:
    /// made durable no later than the record.
    deps: Vec<FileRef>,
    /// Space allocated for this transaction: returned if it fails before
    /// its record is committed.
    allocated: Vec<Extent>,
    /// Space the committed record stops referencing: freed at its LSN.
    frees: Vec<Extent>,
}

/// A pending write as the scan sees it: the key and `None` for a delete.
type PendingEntry<'p> = (&'p Vec<u8>, &'p Option<Vec<u8>>);

/// What a finished transaction leaves for its commit.
pub(crate) struct Finished {
    pub(crate) batch: WriteBatch,
    pub(crate) deps: Vec<FileRef>,
    pub(crate) allocated: Vec<Extent>,
    pub(crate) frees: Vec<Extent>,
}

impl<'a> Transaction<'a> {
    pub(crate) fn new(store: &'a Store, mut locked: Vec<u64>) -> Self {
        locked.sort_unstable();
        locked.dedup();
        Transaction {
            store,
            locked,
            batch: WriteBatch::new(),
            pending: BTreeMap::new(),
            deps: Vec::new(),
            allocated: Vec::new(),
            frees: Vec::new(),
        }
    }

    /// Sets a raw index key.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.batch.put(key, value);
        self.pending.insert(key.to_vec(), Some(value.to_vec()));
    }

    /// Removes a raw index key.
    pub fn delete(&mut self, key: &[u8]) {
        self.batch.delete(key);
        self.pending.insert(key.to_vec(), None);
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
        let mut out = Vec::new();
        if start >= end || limit == 0 {
            return Ok(out);
        }
        let mut index = self.store.index().range(Bound::Included(start), Bound::Excluded(end), forward)?.peekable();
        let range = self.pending.range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)));
        let mut pending: Box<dyn Iterator<Item = PendingEntry<'_>>> =
            if forward { Box::new(range) } else { Box::new(range.rev()) };
        let mut next_pending = pending.next();
        while out.len() < limit {
            let from_index = match index.peek() {
                Some(Ok((k, _))) => Some(k.clone()),
                Some(Err(_)) => match index.next() {
                    Some(Err(e)) => return Err(e.into()),
                    _ => None,
                },
                None => None,
            };
            // Which source holds the next key in scan order; on a tie the
            // pending write wins and the index's value is skipped.
            let take_pending = match (&next_pending, &from_index) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some((pk, _)), Some(ik)) => {
                    if pk.as_slice() == ik.as_slice() {
                        index.next();
                        true
                    } else {
                        (pk.as_slice() < ik.as_slice()) == forward
                    }
                }
            };
            if take_pending {
                if let Some((k, Some(v))) = next_pending {
                    out.push((k.clone(), v.clone()));
                }
                next_pending = pending.next();
            } else if let Some(kv) = index.next() {
                out.push(kv?);
            }
        }
        Ok(out)
    }

    /// Makes `file` a dependency of the record: it is synced no later than
    /// the record becomes durable (concurrently with the log for a durable
    /// commit, before the append for a buffered one).
    pub(crate) fn add_dependency(&mut self, file: FileRef) {
        if !self.deps.iter().any(|f| f.path() == file.path()) {
            self.deps.push(file);
        }
    }

    /// Records space allocated for this transaction (returned on failure).
    pub(crate) fn note_allocated(&mut self, extent: Extent) {
        self.allocated.push(extent);
    }

    /// Records space the record stops referencing (freed at its LSN).
    pub(crate) fn free_after_commit(&mut self, extent: Extent) {
        self.frees.push(extent);
    }

    /// The store this transaction runs on.
    pub(crate) fn store(&self) -> &'a Store {
        self.store
    }

    pub(crate) fn check_locked(&self, object: u64) -> Result<()> {
        if self.locked.binary_search(&object).is_err() {
            return Err(ObjectError::NotLocked { object });
        }
        Ok(())
    }

    pub(crate) fn limits(&self) -> MetaLimits {
        MetaLimits::from_options(&self.store.superblock().options)
    }

    /// The onode of a locked object, if it exists.
    pub fn onode(&self, object: u64) -> Result<Option<Onode>> {
        self.check_locked(object)?;
        self.get(&onode_key(object))?.map(|v| Onode::decode(&v, &self.limits())).transpose()
    }

    /// Writes the onode of a locked object.
    pub fn put_onode(&mut self, object: u64, onode: &Onode) -> Result<()> {
        self.check_locked(object)?;
        let bytes = onode.encode(&self.limits())?;
        self.put(&onode_key(object), &bytes);
        Ok(())
    }

    /// Removes the onode of a locked object.
    pub fn delete_onode(&mut self, object: u64) -> Result<()> {
        self.check_locked(object)?;
        self.delete(&onode_key(object));
        Ok(())
    }

    pub(crate) fn finish(self) -> Finished {
        Finished { batch: self.batch, deps: self.deps, allocated: self.allocated, frees: self.frees }
    }
}
