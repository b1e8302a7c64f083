//! A handle on one tree: its reads see the latest committed state, its
//! writes are one-operation transactions.

use std::sync::Arc;

use larder_object::meta::{tree_count_key, tree_entry_key, tree_entry_prefix, TREE_ENTRY_PREFIX_BYTES};

use crate::iter::TreeIter;
use crate::write::WriteTransaction;
use crate::{KeyRange, Result, Shared, TreesError, MAX_KEY_BYTES, MAX_VALUE_BYTES};

/// A handle on one tree (cheap to clone, `Send` and `Sync`). It names the
/// tree by id: once the tree is deleted, writes through the handle fail
/// with [`TreesError::NoSuchTree`], even if a tree of the same name is
/// made again.
#[derive(Clone)]
pub struct Tree {
    shared: Arc<Shared>,
    name: Arc<str>,
    id: u64,
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tree").field("name", &self.name).field("id", &self.id).finish()
    }
}

/// Refuses a key over [`MAX_KEY_BYTES`].
pub(crate) fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_BYTES {
        return Err(TreesError::KeyTooLarge { len: key.len(), limit: MAX_KEY_BYTES });
    }
    Ok(())
}

/// Refuses a value over [`MAX_VALUE_BYTES`].
pub(crate) fn check_value(value: &[u8]) -> Result<()> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(TreesError::ValueTooLarge { len: value.len(), limit: MAX_VALUE_BYTES });
    }
    Ok(())
}

/// The index key of `key` in tree `tree`.
pub(crate) fn entry_key(tree: u64, key: &[u8]) -> Vec<u8> {
    tree_entry_key(tree, key)
}

/// Index keys of at most this many bytes are built on the stack by
/// [`with_entry_key`].
const STACK_KEY_BYTES: usize = 128;

/// Calls `f` with the index key of `key` in tree `tree`, built on the
/// stack when it is short: a point read then allocates only the value it
/// returns.
pub(crate) fn with_entry_key<T>(tree: u64, key: &[u8], f: impl FnOnce(&[u8]) -> T) -> T {
    let len = TREE_ENTRY_PREFIX_BYTES + key.len();
    if len > STACK_KEY_BYTES {
        return f(&entry_key(tree, key));
    }
    let mut buf = [0u8; STACK_KEY_BYTES];
    buf[..TREE_ENTRY_PREFIX_BYTES].copy_from_slice(&tree_entry_prefix(tree));
    buf[TREE_ENTRY_PREFIX_BYTES..len].copy_from_slice(key);
    f(&buf[..len])
}

impl Tree {
    pub(crate) fn new(shared: Arc<Shared>, name: &str, id: u64) -> Tree {
        Tree { shared, name: name.into(), id }
    }

    /// The tree's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tree's id (never reused).
    pub fn id(&self) -> u64 {
        self.id
    }

    fn write(&self) -> Result<WriteTransaction<'_>> {
        WriteTransaction::begin(&self.shared, self.shared.durability)
    }

    /// The committed value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        check_key(key)?;
        Ok(with_entry_key(self.id, key, |k| self.shared.store.index().get(k))?)
    }

    /// The committed value of `key` copied into `out` (true), or false and
    /// `out` left as it was: [`Tree::get`] without allocating the value
    /// when `out` has the room. After an error `out` may hold anything
    /// (a damaged block found once its bytes were copied).
    pub fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        check_key(key)?;
        Ok(with_entry_key(self.id, key, |k| self.shared.store.index().get_into(k, out))?)
    }

    /// Sets `key` to `value`: one transaction, with the default durability.
    pub fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut tx = self.write()?;
        tx.insert(self, key, value)?;
        tx.commit()
    }

    /// Removes `key`: one transaction, with the default durability.
    pub fn remove(&self, key: &[u8]) -> Result<()> {
        let mut tx = self.write()?;
        tx.remove(self, key)?;
        tx.commit()
    }

    /// Removes every entry: one transaction, with the default durability.
    pub fn clear(&self) -> Result<()> {
        let mut tx = self.write()?;
        tx.clear(self)?;
        tx.commit()
    }

    /// The number of entries as last committed. Exact: every commit keeps
    /// a count record per tree (the name follows redb and Garage, whose
    /// engines may estimate).
    pub fn approximate_len(&self) -> Result<u64> {
        crate::read::committed_count(&self.shared.store.index().get(&tree_count_key(self.id))?)
    }

    /// Whether the tree has no entries.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.first()?.is_none())
    }

    /// The first entry in key order.
    pub fn first(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let serial = &self.shared.serial;
        // As for a scan from the start (see `range`): the watch first.
        let watch = serial.hints.watch(self.id);
        let snapshot = self.shared.store.index().snapshot();
        TreeIter::first(&snapshot, serial, self.id, watch)
    }

    /// The last entry in key order.
    pub fn last(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.iter_rev()?.next().transpose()
    }

    /// The first entry whose key is greater than `key`.
    pub fn get_gt(&self, key: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        use std::ops::Bound;
        self.range((Bound::Excluded(key), Bound::Unbounded), true)?.next().transpose()
    }

    /// The entries in `range`, forward or backward, from a snapshot taken
    /// now: later commits are invisible to the iterator, which owns what it
    /// reads (`'static`, `Send`).
    pub fn range(&self, range: KeyRange<'_>, forward: bool) -> Result<TreeIter> {
        let serial = &self.shared.serial;
        // A forward scan from the start can teach the tree's start hint;
        // its watch must exist before its snapshot.
        let watch = (forward && matches!(range.0, std::ops::Bound::Unbounded)).then(|| serial.hints.watch(self.id));
        let snapshot = self.shared.store.index().snapshot();
        TreeIter::new(&snapshot, serial, self.id, range, forward, watch)
    }

    /// Every entry in key order, from a snapshot taken now.
    pub fn iter(&self) -> Result<TreeIter> {
        self.range((std::ops::Bound::Unbounded, std::ops::Bound::Unbounded), true)
    }

    /// Every entry in reverse key order, from a snapshot taken now.
    pub fn iter_rev(&self) -> Result<TreeIter> {
        self.range((std::ops::Bound::Unbounded, std::ops::Bound::Unbounded), false)
    }
}
