//! A read-only view of a store's index for the layers above: they read
//! the maps (point reads, scans, snapshots, counters) while every write,
//! flush and ingest stays with the store, which orders them with its log.

use std::ops::Bound;

use larder_index::{Index, IndexStats, Iter, Result, Snapshot};

/// The store's index, for reads (see [`crate::Store::index`]).
#[derive(Clone, Copy, Debug)]
pub struct IndexView<'a> {
    index: &'a Index,
}

impl<'a> IndexView<'a> {
    pub(crate) fn new(index: &'a Index) -> IndexView<'a> {
        IndexView { index }
    }

    /// The value of `key`, or None.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.index.get(key)
    }

    /// The value of `key` copied into `out` (true), or false and `out`
    /// left as it was (see [`larder_index::Index::get_into`]). After an
    /// error `out` may hold anything.
    pub fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        self.index.get_into(key, out)
    }

    /// The values of `keys`, in their order (see
    /// [`larder_index::Index::get_many`]).
    pub fn get_many<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        self.index.get_many(keys)
    }

    /// Live keys between `start` and `end`, forward or backward.
    pub fn range(&self, start: Bound<&[u8]>, end: Bound<&[u8]>, forward: bool) -> Result<Iter> {
        self.index.range(start, end, forward)
    }

    /// Every live key, forward or backward.
    pub fn iter(&self, forward: bool) -> Result<Iter> {
        self.index.iter(forward)
    }

    /// Live keys starting with `prefix`, forward or backward.
    pub fn prefix(&self, prefix: &[u8], forward: bool) -> Result<Iter> {
        self.index.prefix(prefix, forward)
    }

    /// A consistent view as of now; later commits stay invisible to it.
    pub fn snapshot(&self) -> Snapshot {
        self.index.snapshot()
    }

    /// The index's counters.
    pub fn stats(&self) -> IndexStats {
        self.index.stats()
    }

    /// Highest sequence number (LSN) whose batches are in durable runs.
    pub fn durable_seq(&self) -> u64 {
        self.index.durable_seq()
    }

    /// Highest sequence number (LSN) applied.
    pub fn last_seq(&self) -> u64 {
        self.index.last_seq()
    }

    /// Why the index refuses writes, if it does (the store's own first
    /// failure is in [`crate::Store::health`]).
    pub fn poisoned(&self) -> Option<String> {
        self.index.poisoned()
    }
}
