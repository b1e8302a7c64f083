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

use larder_index::WriteBatch;

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
}

impl<'a> Transaction<'a> {
    pub(crate) fn new(store: &'a Store, mut locked: Vec<u64>) -> Self {
        locked.sort_unstable();
        locked.dedup();
        Transaction { store, locked, batch: WriteBatch::new(), pending: BTreeMap::new() }
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

    fn check_locked(&self, object: u64) -> Result<()> {
        if self.locked.binary_search(&object).is_err() {
            return Err(ObjectError::NotLocked { object });
        }
        Ok(())
    }

    fn limits(&self) -> MetaLimits {
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

    pub(crate) fn into_batch(self) -> WriteBatch {
        self.batch
    }
}
