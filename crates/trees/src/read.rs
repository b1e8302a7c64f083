//! Read transactions: one index snapshot, stable while writes go on.

use std::sync::Arc;

use larder_index::Snapshot;
use larder_object::meta::{decode_tree_record, tree_count_key, TreeRecordKind};

use crate::iter::TreeIter;
use crate::tree::{check_key, with_entry_key};
use crate::{KeyRange, Result, Shared, Tree};

/// Decodes a count record read back (absent: 0).
pub(crate) fn committed_count(value: &Option<Vec<u8>>) -> Result<u64> {
    match value {
        Some(v) => Ok(decode_tree_record(TreeRecordKind::Count, v)?),
        None => Ok(0),
    }
}

/// A read transaction: every read sees the trees as they were when it
/// began. `Send`, `'static`; it pins the index's state as of its start
/// (memtables and runs), so drop it when done.
pub struct ReadTransaction {
    shared: Arc<Shared>,
    snapshot: Snapshot,
}

impl ReadTransaction {
    pub(crate) fn new(shared: Arc<Shared>) -> ReadTransaction {
        let snapshot = shared.store.index().snapshot();
        ReadTransaction { shared, snapshot }
    }

    /// The value of `key` in `tree`.
    pub fn get(&self, tree: &Tree, key: &[u8]) -> Result<Option<Vec<u8>>> {
        check_key(key)?;
        Ok(with_entry_key(tree.id(), key, |k| self.snapshot.get(k))?)
    }

    /// The value of `key` in `tree` copied into `out` (true), or false and
    /// `out` left as it was (see [`Tree::get_into`]). After an error `out`
    /// may hold anything.
    pub fn get_into(&self, tree: &Tree, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        check_key(key)?;
        Ok(with_entry_key(tree.id(), key, |k| self.snapshot.get_into(k, out))?)
    }

    /// The number of entries in `tree` (exact).
    pub fn len(&self, tree: &Tree) -> Result<u64> {
        committed_count(&self.snapshot.get(&tree_count_key(tree.id()))?)
    }

    /// Whether `tree` has no entries.
    pub fn is_empty(&self, tree: &Tree) -> Result<bool> {
        Ok(self.len(tree)? == 0)
    }

    /// The entries of `tree` in `range`, forward or backward.
    pub fn range(&self, tree: &Tree, range: KeyRange<'_>, forward: bool) -> Result<TreeIter> {
        TreeIter::new(&self.snapshot, &self.shared.serial, tree.id(), range, forward, None)
    }

    /// Every entry of `tree`, forward or backward.
    pub fn iter(&self, tree: &Tree, forward: bool) -> Result<TreeIter> {
        self.range(tree, (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded), forward)
    }

    /// The index sequence number (LSN) the transaction reads at.
    pub fn seq(&self) -> u64 {
        self.snapshot.seq()
    }
}
