//! The committed entry count of each tree, kept in memory for write
//! transactions: every write transaction that inserts or removes needs its
//! trees' counts, and reading each from the index (a key rewritten by every
//! commit) was one more point read per tree per transaction.
//!
//! Only a holder of the writer lock reads or changes it: the committed
//! counts cannot change under it, so what it finds here is what the index
//! holds. A count missing here is read from the index.

use std::collections::HashMap;

use parking_lot::Mutex;

/// Committed counts by tree id (see the module doc).
#[derive(Default)]
pub(crate) struct CommittedCounts {
    counts: Mutex<HashMap<u64, u64>>,
}

impl CommittedCounts {
    /// The committed count of `tree`, if known.
    pub(crate) fn get(&self, tree: u64) -> Option<u64> {
        self.counts.lock().get(&tree).copied()
    }

    /// Records `tree`'s committed count (read from the index, or just
    /// committed).
    pub(crate) fn set(&self, tree: u64, count: u64) {
        self.counts.lock().insert(tree, count);
    }

    /// Forgets the counts of `trees` (a commit that failed may or may not
    /// have changed them; a deleted tree has none).
    pub(crate) fn forget(&self, trees: impl IntoIterator<Item = u64>) {
        let mut counts = self.counts.lock();
        for tree in trees {
            counts.remove(&tree);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CommittedCounts;

    #[test]
    fn set_get_and_forget() {
        let counts = CommittedCounts::default();
        assert_eq!(counts.get(3), None);
        counts.set(3, 7);
        counts.set(4, 0);
        assert_eq!(counts.get(3), Some(7));
        counts.forget([3]);
        assert_eq!(counts.get(3), None);
        assert_eq!(counts.get(4), Some(0));
    }
}
