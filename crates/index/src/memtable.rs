//! The memtable: a concurrent skip list of internal entries plus the range
//! tombstones of the batches it holds.
//!
//! Writers are serialized by the index (one batch at a time, in sequence
//! order); readers run concurrently and ignore entries above their read
//! sequence number, which is how a batch becomes visible all at once.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtomicOrdering};

use crossbeam_skiplist::SkipMap;
use parking_lot::RwLock;

use crate::entry::{Entry, Kind, Op, RangeTombstone, Stamp};

/// Bytes charged per entry beyond its key and payload (skip-list node,
/// allocation, stamp), so the budget tracks real memory.
const ENTRY_OVERHEAD_BYTES: usize = 96;

/// A memtable entry: key and payload in one allocation, and the key's first
/// 8 bytes inline (big-endian, zero-padded) so most comparisons during a
/// skip-list search never touch the allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
struct MemKey {
    head: u64,
    key_len: u32,
    data: Box<[u8]>,
    stamp: Stamp,
}

fn key_head(key: &[u8]) -> u64 {
    let mut h = [0u8; 8];
    let n = key.len().min(8);
    h[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(h)
}

impl MemKey {
    fn new(key: &[u8], payload: &[u8], stamp: Stamp) -> MemKey {
        let mut data = Vec::with_capacity(key.len() + payload.len());
        data.extend_from_slice(key);
        data.extend_from_slice(payload);
        MemKey { head: key_head(key), key_len: key.len() as u32, data: data.into_boxed_slice(), stamp }
    }

    fn key(&self) -> &[u8] {
        &self.data[..self.key_len as usize]
    }

    fn payload(&self) -> &[u8] {
        &self.data[self.key_len as usize..]
    }
}

impl Ord for MemKey {
    fn cmp(&self, other: &Self) -> Ordering {
        // Equal heads say nothing (a shorter key is zero-padded); unequal
        // heads order the keys as the bytes would.
        self.head.cmp(&other.head).then_with(|| self.key().cmp(other.key())).then_with(|| other.stamp.cmp(&self.stamp))
    }
}

/// What an entry does, beside its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MemOp {
    kind: Kind,
    operator: u32,
}

fn to_op(k: &MemKey, op: MemOp) -> Op {
    match op.kind {
        Kind::Put => Op::Put(k.payload().to_vec()),
        Kind::Delete => Op::Delete,
        Kind::Merge => Op::Merge { operator: op.operator, operand: k.payload().to_vec() },
    }
}

/// A probe for searches: sorts before every version of `key` not newer than `stamp`.
fn probe(key: &[u8], stamp: Stamp) -> MemKey {
    MemKey::new(key, &[], stamp)
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// One memtable. Holds exactly the batches from `first_seq` to `last_seq`.
pub(crate) struct Memtable {
    map: SkipMap<MemKey, MemOp>,
    tombstones: RwLock<Vec<RangeTombstone>>,
    size_bytes: AtomicUsize,
    /// The first sequence number this memtable may hold.
    first_seq: u64,
    /// Highest sequence number applied (`first_seq - 1` when none).
    last_seq: AtomicU64,
}

impl Memtable {
    /// An empty memtable for batches from `first_seq` on.
    pub(crate) fn new(first_seq: u64) -> Self {
        Memtable {
            map: SkipMap::new(),
            tombstones: RwLock::new(Vec::new()),
            size_bytes: AtomicUsize::new(0),
            first_seq,
            last_seq: AtomicU64::new(first_seq.saturating_sub(1)),
        }
    }

    pub(crate) fn first_seq(&self) -> u64 {
        self.first_seq
    }

    /// Adds one point write (`operator` only for merges). Callers
    /// serialize writers.
    pub(crate) fn insert(&self, key: &[u8], payload: &[u8], stamp: Stamp, kind: Kind, operator: u32) {
        let charge = key.len() + payload.len() + ENTRY_OVERHEAD_BYTES;
        self.map.insert(MemKey::new(key, payload, stamp), MemOp { kind, operator });
        self.size_bytes.fetch_add(charge, AtomicOrdering::Relaxed);
    }

    /// Adds a range tombstone. Callers serialize writers.
    pub(crate) fn insert_tombstone(&self, t: RangeTombstone) {
        let charge = t.start.len() + t.end.len() + ENTRY_OVERHEAD_BYTES;
        self.tombstones.write().push(t);
        self.size_bytes.fetch_add(charge, AtomicOrdering::Relaxed);
    }

    /// Records that every batch up to `seq` is applied.
    pub(crate) fn set_last_seq(&self, seq: u64) {
        self.last_seq.store(seq, AtomicOrdering::Release);
    }

    pub(crate) fn last_seq(&self) -> u64 {
        self.last_seq.load(AtomicOrdering::Acquire)
    }

    pub(crate) fn size_bytes(&self) -> usize {
        self.size_bytes.load(AtomicOrdering::Relaxed)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty() && self.tombstones.read().is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Versions of `key` visible at `read_seq`, newest first, appended to `out`.
    pub(crate) fn versions(&self, key: &[u8], read_seq: u64, out: &mut Vec<(Stamp, Op)>) {
        for e in self.map.range(probe(key, Stamp { seq: read_seq, sub: u32::MAX })..) {
            if e.key().key() != key {
                break;
            }
            out.push((e.key().stamp, to_op(e.key(), *e.value())));
        }
    }

    /// The newest tombstone stamp covering `key` visible at `read_seq`.
    pub(crate) fn covering_tombstone(&self, key: &[u8], read_seq: u64) -> Option<Stamp> {
        let ts = self.tombstones.read();
        if ts.is_empty() {
            return None;
        }
        crate::entry::max_covering(ts.iter(), key, read_seq)
    }

    /// Copies of the tombstones visible at `read_seq` that overlap the range.
    pub(crate) fn tombstones_in(&self, start: Bound<&[u8]>, end: Bound<&[u8]>, read_seq: u64) -> Vec<RangeTombstone> {
        self.tombstones.read().iter().filter(|t| t.stamp.seq <= read_seq && t.overlaps(start, end)).cloned().collect()
    }

    /// All tombstones (for a flush).
    pub(crate) fn all_tombstones(&self) -> Vec<RangeTombstone> {
        self.tombstones.read().clone()
    }

    /// Up to `limit` entries after `after` (exclusive; from the start of the
    /// range when None), in the given direction, within `[start, end]`.
    /// The iterator refills from here, so it never borrows the skip list.
    pub(crate) fn chunk(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        after: Option<(&[u8], Stamp)>,
        forward: bool,
        limit: usize,
        out: &mut Vec<Entry>,
    ) {
        let lo: Bound<MemKey> = match (forward, after) {
            (true, Some((k, s))) => Bound::Excluded(probe(k, s)),
            _ => match start {
                // Newest version of the start key sorts first.
                Bound::Included(k) => Bound::Included(probe(k, Stamp { seq: u64::MAX, sub: u32::MAX })),
                // Past the oldest version of the excluded key.
                Bound::Excluded(k) => Bound::Excluded(probe(k, Stamp { seq: 0, sub: 0 })),
                Bound::Unbounded => Bound::Unbounded,
            },
        };
        let hi: Bound<MemKey> = match (forward, after) {
            (false, Some((k, s))) => Bound::Excluded(probe(k, s)),
            _ => match end {
                Bound::Included(k) => Bound::Included(probe(k, Stamp { seq: 0, sub: 0 })),
                Bound::Excluded(k) => Bound::Excluded(probe(k, Stamp { seq: u64::MAX, sub: u32::MAX })),
                Bound::Unbounded => Bound::Unbounded,
            },
        };
        let empty = match (&lo, &hi) {
            (Bound::Included(a), Bound::Included(b)) => a > b,
            (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => a >= b,
            _ => false,
        };
        if empty {
            return;
        }
        let range = self.map.range((lo, hi));
        let to_entry = |e: crossbeam_skiplist::map::Entry<'_, MemKey, MemOp>| Entry {
            key: e.key().key().to_vec(),
            stamp: e.key().stamp,
            op: to_op(e.key(), *e.value()),
        };
        if forward {
            out.extend(range.take(limit).map(to_entry));
        } else {
            out.extend(range.rev().take(limit).map(to_entry));
        }
    }
}
