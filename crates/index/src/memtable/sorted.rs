//! Immutable sorted arrays of memtable entries, merged pairwise as in a
//! 2-COLA: an array of level L holds 2^L sealed chunks' worth of entries,
//! and two arrays of one level merge into one of the next. Entries are
//! moved by reference (shared data), so a merge copies no key or value.
//! Each array keeps a [`HeadTree`] of its keys' heads: a search reads a
//! few cache lines of heads, then compares entries only where heads tie.

use std::ops::Bound;

use super::key::{key_head16, MemKey, MemOp};
use crate::entry::Stamp;
use crate::head_tree::HeadTree;

/// A sorted, immutable run of memtable entries.
#[derive(Debug)]
pub(crate) struct SortedArray {
    pub level: u32,
    pub entries: Vec<(MemKey, MemOp)>,
    heads: HeadTree,
}

impl SortedArray {
    /// An array of `entries`, which must be in internal order.
    pub(crate) fn new(level: u32, entries: Vec<(MemKey, MemOp)>) -> SortedArray {
        let heads = HeadTree::new(entries.iter().map(|(k, _)| k.head()));
        SortedArray { level, entries, heads }
    }

    /// The first entry at or after (`le` false) or after (`le` true)
    /// (key, stamp): entries outside the key's run of equal heads are
    /// settled by the heads alone.
    fn bound(&self, key: &[u8], stamp: Stamp, le: bool) -> usize {
        let head = key_head16(key);
        let (lo, hi) = self.heads.equal_range(head);
        let tied = &self.entries[lo..hi];
        lo + tied.partition_point(|(k, _)| {
            let o = k.cmp_to(head, key, stamp);
            o.is_lt() || (le && o.is_eq())
        })
    }

    /// Index of the first entry not before (key, stamp).
    pub(crate) fn lower_bound(&self, key: &[u8], stamp: Stamp) -> usize {
        self.bound(key, stamp, false)
    }

    /// Index of the first entry after (key, stamp).
    pub(crate) fn upper_bound(&self, key: &[u8], stamp: Stamp) -> usize {
        self.bound(key, stamp, true)
    }

    /// The index range of entries within user-key bounds.
    pub(crate) fn span(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> (usize, usize) {
        let newest = Stamp { seq: u64::MAX, sub: u32::MAX };
        let oldest = Stamp { seq: 0, sub: 0 };
        let lo = match start {
            Bound::Included(k) => self.lower_bound(k, newest),
            Bound::Excluded(k) => self.upper_bound(k, oldest),
            Bound::Unbounded => 0,
        };
        let hi = match end {
            Bound::Included(k) => self.upper_bound(k, oldest),
            Bound::Excluded(k) => self.lower_bound(k, newest),
            Bound::Unbounded => self.entries.len(),
        };
        (lo, hi.max(lo))
    }
}

/// Merges two sorted arrays into one of the next level.
pub(crate) fn merge(a: &SortedArray, b: &SortedArray) -> SortedArray {
    let mut out = Vec::with_capacity(a.entries.len() + b.entries.len());
    let (mut i, mut j) = (0, 0);
    while i < a.entries.len() && j < b.entries.len() {
        if a.entries[i].0 < b.entries[j].0 {
            out.push(a.entries[i].clone());
            i += 1;
        } else {
            out.push(b.entries[j].clone());
            j += 1;
        }
    }
    out.extend_from_slice(&a.entries[i..]);
    out.extend_from_slice(&b.entries[j..]);
    SortedArray::new(a.level.max(b.level) + 1, out)
}
