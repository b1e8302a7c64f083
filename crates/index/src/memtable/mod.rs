//! The memtable: the newest writes, in memory, in a write-optimized shape.
//!
//! Inserts go into a small concurrent skip list (`recent`). Every
//! [`SEAL_ENTRIES`] entries it is sealed into an immutable sorted array,
//! and arrays of equal level merge pairwise (a 2-COLA), so an insert costs
//! a search of a cache-resident skip list plus a few sequential merge
//! steps, rather than a search of one large skip list that misses the
//! cache at every level. Readers take a consistent view (skip lists plus
//! arrays) and never block the writer. A bloom filter over the memtable's
//! keys lets a get for an absent key skip it.
//!
//! A memtable made with deferred seals (the index's active memtable when
//! it has a background flusher) only swaps a full skip list for an empty
//! one on the writer's thread: the full one stays in the view, read as it
//! is, until [`Memtable::seal_pending`] (the flusher) turns it into an
//! array, and the old lists and arrays are freed there too. Building and
//! merging the array and freeing the list were a tenth of a create's
//! work on the writer's thread. At most [`MAX_PENDING`] lists wait: past
//! that (a flusher busy writing a run) the writer seals them itself.
//!
//! Writers are serialized by the index (one batch at a time, in sequence
//! order); readers ignore entries above their read sequence number, which
//! is how a batch becomes visible all at once.

mod arena;
mod filter;
mod key;
mod sorted;

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use crossbeam_skiplist::SkipMap;
use parking_lot::RwLock;

use crate::entry::{Entry, Kind, Op, RangeTombstone, Stamp};
use filter::{FilterProbe, MemFilter};
pub(crate) use key::{key_head16, to_op, MemKey, MemOp};
pub(crate) use sorted::SortedArray;

/// Most entries in the skip list before it is sealed into a sorted array
/// (fewer for small memtables, so each holds several arrays). Small
/// enough that the skip list (about 250 bytes an entry, half a megabyte
/// in all) stays in a core's cache while the writer's other work passes
/// through it: an insert's search loads a node at each step, and a writer
/// that also copies file data (16-128 KiB per operation in a file server)
/// evicts a larger list between inserts, so most steps miss. The cost is
/// sequential: each entry is merged about twice more on its way to the
/// largest array, and a read searches at most two more arrays.
const SEAL_ENTRIES: usize = 2048;

/// Most full skip lists a view holds waiting for their seal: each is a
/// search for every read that passes its filter.
const MAX_PENDING: usize = 2;

/// A consistent view of a memtable's entries. Its sources hold disjoint
/// spans of the memtable's batches, in order: the arrays oldest first (a
/// seal merges the new array only with the newest ones, of equal level),
/// then the full skip lists waiting for their seal, oldest first, then the
/// skip list, newest. A point read takes them newest first and stops at
/// the first that holds the key.
pub(crate) struct View {
    pub recent: Arc<SkipMap<MemKey, MemOp>>,
    /// A filter of the keys in `recent` only: a get for a key sealed into
    /// an array skips the skip list's search (a pointer chase per level).
    recent_filter: Arc<MemFilter>,
    /// Full skip lists not yet sealed, oldest first.
    pub pending: Vec<Arc<Pending>>,
    pub arrays: Vec<Arc<SortedArray>>,
}

/// A full skip list waiting for its seal, with its filter and the bytes
/// of its keys and payloads.
pub(crate) struct Pending {
    pub list: Arc<SkipMap<MemKey, MemOp>>,
    filter: Arc<MemFilter>,
    bytes: usize,
}

impl View {
    fn empty(seal_entries: usize) -> View {
        View {
            recent: Arc::new(SkipMap::new()),
            recent_filter: Arc::new(MemFilter::new(seal_entries as u64)),
            pending: Vec::new(),
            arrays: Vec::new(),
        }
    }
}

/// The newest version of a key a memtable holds at a read point, its
/// payload borrowed from the memtable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Newest<'a> {
    /// No version is visible here: older sources decide.
    Absent,
    /// A put of these bytes: the read's answer.
    Put(&'a [u8]),
    /// A delete: the key is absent.
    Delete,
    /// A merge operand: the read must fold the key's versions.
    Merge,
}

/// One memtable. Holds exactly the batches from `first_seq` to `last_seq`.
pub(crate) struct Memtable {
    view: RwLock<Arc<View>>,
    filter: MemFilter,
    tombstones: RwLock<Vec<RangeTombstone>>,
    /// Whether `tombstones` holds any: a get then skips its lock.
    has_tombstones: AtomicBool,
    size_bytes: AtomicUsize,
    /// Key and payload bytes in the skip list (a bound on the chunk its
    /// small entries are sealed into).
    recent_bytes: AtomicUsize,
    entries: AtomicUsize,
    seal_entries: usize,
    /// Whether a full skip list waits for [`Memtable::seal_pending`]
    /// rather than being sealed by the writer.
    defer_seals: bool,
    /// Where large entries keep their bytes (see [`arena`]); None for a
    /// memtable below [`arena::MIN_ARENA_BUDGET`].
    arena: Option<arena::EntryArena>,
    /// Held while a view's arrays change (a seal, a consolidation): the
    /// writer only swaps skip lists, so whoever holds it may build new
    /// arrays from a view and install them in the current one.
    arrays_lock: parking_lot::Mutex<()>,
    /// The first sequence number this memtable may hold.
    first_seq: u64,
    /// Highest sequence number applied (`first_seq - 1` when none).
    last_seq: AtomicU64,
}

impl Memtable {
    /// An empty memtable for batches from `first_seq` on, sized for
    /// `budget_bytes` of entries, sealing its skip lists on the writer's
    /// thread.
    #[cfg(test)]
    pub(crate) fn new(first_seq: u64, budget_bytes: usize) -> Self {
        Self::with_deferred_seals(first_seq, budget_bytes, false)
    }

    /// As [`Memtable::new`]; with `defer_seals`, a full skip list waits
    /// for [`Memtable::seal_pending`] (see the module doc).
    pub(crate) fn with_deferred_seals(first_seq: u64, budget_bytes: usize, defer_seals: bool) -> Self {
        let seal_entries = (budget_bytes / 96 / 64).clamp(4, SEAL_ENTRIES);
        Memtable {
            view: RwLock::new(Arc::new(View::empty(seal_entries))),
            // Every entry is charged at least 96 bytes.
            filter: MemFilter::new((budget_bytes / 96) as u64 + 1),
            tombstones: RwLock::new(Vec::new()),
            has_tombstones: AtomicBool::new(false),
            size_bytes: AtomicUsize::new(0),
            recent_bytes: AtomicUsize::new(0),
            entries: AtomicUsize::new(0),
            seal_entries,
            defer_seals,
            arena: (budget_bytes >= arena::MIN_ARENA_BUDGET).then(arena::EntryArena::default),
            arrays_lock: parking_lot::Mutex::new(()),
            first_seq,
            last_seq: AtomicU64::new(first_seq.saturating_sub(1)),
        }
    }

    pub(crate) fn first_seq(&self) -> u64 {
        self.first_seq
    }

    /// Adds one point write (`operator` only for merges); `hash` is the
    /// key's hash. Callers serialize writers. True if it left a full skip
    /// list for [`Memtable::seal_pending`].
    pub(crate) fn insert(
        &self,
        key: &[u8],
        hash: u64,
        payload: &[u8],
        stamp: Stamp,
        kind: Kind,
        operator: u32,
    ) -> bool {
        let regions_before = self.arena.as_ref().map_or(0, arena::EntryArena::region_bytes);
        let entry = MemKey::new_in(self.arena.as_ref(), key, payload, stamp);
        // Writers are serialized, so a region opened now is this entry's.
        let regions_opened = self.arena.as_ref().map_or(0, arena::EntryArena::region_bytes) - regions_before;
        let charge = entry.charge() + regions_opened;
        self.recent_bytes.fetch_add(key.len() + payload.len(), AtomicOrdering::Relaxed);
        let view = self.view.read();
        view.recent.insert(entry, MemOp { kind, operator });
        view.recent_filter.add(hash);
        self.filter.add(hash);
        self.size_bytes.fetch_add(charge, AtomicOrdering::Relaxed);
        self.entries.fetch_add(1, AtomicOrdering::Relaxed);
        let full = view.recent.len() >= self.seal_entries;
        drop(view);
        if !full {
            return false;
        }
        let pending = self.set_aside_recent();
        if self.defer_seals && pending <= MAX_PENDING {
            return true;
        }
        self.seal_pending();
        false
    }

    /// Swaps the skip list for an empty one, keeping the full one in the
    /// view as pending; returns how many are pending. Readers holding the
    /// old view keep reading it unchanged.
    fn set_aside_recent(&self) -> usize {
        let bytes = self.recent_bytes.swap(0, AtomicOrdering::Relaxed);
        let fresh = View::empty(self.seal_entries);
        let mut current = self.view.write();
        let mut pending = current.pending.clone();
        pending.push(Arc::new(Pending { list: current.recent.clone(), filter: current.recent_filter.clone(), bytes }));
        let n = pending.len();
        let view = Arc::new(View { pending, arrays: current.arrays.clone(), ..fresh });
        let old = std::mem::replace(&mut *current, view);
        drop(current);
        drop(old);
        n
    }

    /// Whether full skip lists wait for [`Memtable::seal_pending`].
    pub(crate) fn has_pending(&self) -> bool {
        !self.view.read().pending.is_empty()
    }

    /// Seals every pending skip list into a sorted array, merging arrays
    /// of equal level, oldest first. Safe beside the writer and readers:
    /// each view installed holds the same entries as the one it replaces.
    /// The lists and arrays it replaces are freed on the calling thread
    /// (unless a reader still holds them).
    pub(crate) fn seal_pending(&self) {
        let _arrays = self.arrays_lock.lock();
        loop {
            let old = self.view();
            let Some(oldest) = old.pending.first().cloned() else { return };
            let mut new = Arc::new(SortedArray::sealed(&oldest.list, oldest.bytes));
            let mut arrays = old.arrays.clone();
            while let Some(pos) = arrays.iter().position(|a| a.level == new.level) {
                let other = arrays.remove(pos);
                new = Arc::new(sorted::merge(&other, &new));
            }
            arrays.push(new);
            let mut current = self.view.write();
            // The writer only appends to `pending` and swaps `recent`;
            // arrays change only under `arrays_lock`, held here.
            debug_assert!(current.pending.first().is_some_and(|p| Arc::ptr_eq(p, &oldest)));
            let view = Arc::new(View {
                recent: current.recent.clone(),
                recent_filter: current.recent_filter.clone(),
                pending: current.pending[1..].to_vec(),
                arrays,
            });
            let replaced = std::mem::replace(&mut *current, view);
            drop(current);
            drop(replaced);
        }
    }

    /// Merges the sorted arrays of the current view into one when it holds
    /// at least `min_arrays` (2 or more), so a scan positions one array
    /// instead of each and a point read searches one. Only slots move
    /// (64 bytes an entry), never a key or a value. The skip list is left
    /// as it is: the writer may be inserting into it. Installs the merged
    /// array only if no seal replaced the view meanwhile (a seal's view
    /// holds every entry, so losing the race loses nothing but this
    /// work), and says whether it did. Safe beside the writer and readers:
    /// the view holds the same entries before and after.
    pub(crate) fn consolidate(&self, min_arrays: usize) -> bool {
        let _arrays = self.arrays_lock.lock();
        let old = self.view();
        let n = old.arrays.len();
        if n < min_arrays.max(2) {
            return false;
        }
        // Newest first, so each merge adds the next older (larger) array
        // once: about twice the entries' slots copied in all.
        let mut merged = sorted::merge(&old.arrays[n - 2], &old.arrays[n - 1]);
        for older in old.arrays[..n - 2].iter().rev() {
            merged = sorted::merge(older, &merged);
        }
        let mut current = self.view.write();
        if !Arc::ptr_eq(&current, &old) {
            return false;
        }
        *current = Arc::new(View {
            recent: old.recent.clone(),
            recent_filter: old.recent_filter.clone(),
            pending: old.pending.clone(),
            arrays: vec![Arc::new(merged)],
        });
        true
    }

    /// Adds a range tombstone. Callers serialize writers.
    pub(crate) fn insert_tombstone(&self, t: RangeTombstone) {
        let charge = t.start.len() + t.end.len() + 96;
        self.tombstones.write().push(t);
        // Set before the batch's sequence number is published (a release
        // store): a reader whose read point covers the tombstone sees it.
        self.has_tombstones.store(true, AtomicOrdering::Release);
        self.size_bytes.fetch_add(charge, AtomicOrdering::Relaxed);
    }

    /// Records that every batch up to `seq` is applied.
    pub(crate) fn set_last_seq(&self, seq: u64) {
        self.last_seq.store(seq, AtomicOrdering::Release);
    }

    pub(crate) fn last_seq(&self) -> u64 {
        self.last_seq.load(AtomicOrdering::Acquire)
    }

    /// Gives the region this (frozen) memtable's arena prepared for its
    /// next large entries to `next`, the memtable that replaces it.
    pub(crate) fn hand_spare_to(&self, next: &Memtable) {
        if let (Some(from), Some(to)) = (&self.arena, &next.arena) {
            from.hand_over(to);
        }
    }

    /// Bytes charged to the memtable budget (entries and the filter).
    pub(crate) fn size_bytes(&self) -> usize {
        self.size_bytes.load(AtomicOrdering::Relaxed)
    }

    /// Memory held, including the filter.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.size_bytes() + self.filter.size_bytes()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0 && self.tombstones.read().is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.load(AtomicOrdering::Relaxed)
    }

    /// The entries as of now.
    pub(crate) fn view(&self) -> Arc<View> {
        self.view.read().clone()
    }

    /// Versions of `key` (whose hash is `hash`) visible at `read_seq`,
    /// newest first, appended to `out`, down to the newest one that is not
    /// a merge operand: nothing older can change a read. Sources are taken
    /// newest first, each cut at its own first such version, and the
    /// search ends with the first source that holds one. Without the cut, a
    /// key rewritten N times (a directory's onode, once per create) cost
    /// O(N) per read.
    pub(crate) fn versions(&self, key: &[u8], hash: u64, read_seq: u64, out: &mut Vec<(Stamp, Op)>) {
        if self.may_hold(hash) {
            Self::versions_in(&self.view.read(), key, hash, read_seq, out);
        }
    }

    /// Whether a key of hash `hash` may have versions here (false: it
    /// certainly has none).
    pub(crate) fn may_hold(&self, hash: u64) -> bool {
        self.entries.load(AtomicOrdering::Relaxed) != 0 && self.filter.may_contain(hash)
    }

    /// Whether any range tombstone was added (a point read may then need
    /// to weigh one against the key's versions).
    pub(crate) fn has_tombstones(&self) -> bool {
        self.has_tombstones.load(AtomicOrdering::Acquire)
    }

    /// As [`Memtable::versions`], through `view` (taken once for the keys
    /// of a sorted multi-get), for a key that [`Memtable::may_hold`].
    pub(crate) fn versions_in(view: &View, key: &[u8], hash: u64, read_seq: u64, out: &mut Vec<(Stamp, Op)>) {
        let from = Stamp { seq: read_seq, sub: u32::MAX };
        let before = out.len();
        let mut settled = false;
        let lists = std::iter::once((&view.recent, &view.recent_filter))
            .chain(view.pending.iter().rev().map(|p| (&p.list, &p.filter)));
        for (list, filter) in lists {
            if settled {
                break;
            }
            if !filter.may_contain(hash) {
                continue;
            }
            for e in list.range(MemKey::probe(key, from)..) {
                if e.key().key() != key {
                    break;
                }
                let op = to_op(e.key(), *e.value());
                settled = !matches!(op, Op::Merge { .. });
                out.push((e.key().stamp, op));
                if settled {
                    break;
                }
            }
        }
        for a in view.arrays.iter().rev() {
            if settled {
                break;
            }
            let mut i = a.lower_bound(key, from);
            while i < a.len() && a.key(i) == key {
                let (stamp, op) = a.version(i);
                settled = !matches!(op, Op::Merge { .. });
                out.push((stamp, op));
                if settled {
                    break;
                }
                i += 1;
            }
        }
        // Already newest first by the sources' order; the sort keeps a
        // read right should that order ever change.
        out[before..].sort_by_key(|v| std::cmp::Reverse(v.0));
    }

    /// Calls `f` with the newest version of `key` (whose hash is `hash`)
    /// visible at `read_seq`, its payload borrowed: a point read copies a
    /// value out once, and takes no reference count on the view (it holds
    /// the view's lock for the search, which a seal waits on).
    pub(crate) fn newest<T>(&self, key: &[u8], hash: u64, read_seq: u64, f: impl FnOnce(Newest<'_>) -> T) -> T {
        let filter_probe = FilterProbe::new(hash);
        if self.entries.load(AtomicOrdering::Relaxed) == 0 || !self.filter.may_contain_probe(&filter_probe) {
            return f(Newest::Absent);
        }
        let view = self.view.read();
        let from = Stamp { seq: read_seq, sub: u32::MAX };
        let lists = std::iter::once((&view.recent, &view.recent_filter))
            .chain(view.pending.iter().rev().map(|p| (&p.list, &p.filter)));
        for (list, filter) in lists {
            if filter.may_contain_probe(&filter_probe) {
                let probe = MemKey::probe(key, from);
                if let Some(e) = list.lower_bound(Bound::Included(&probe)) {
                    if e.key().key() == key {
                        return f(newest_of(e.key().payload(), *e.value()));
                    }
                }
            }
        }
        for a in view.arrays.iter().rev() {
            let i = a.lower_bound(key, from);
            if let Some((payload, op)) = a.payload_and_op(i).filter(|_| a.key(i) == key) {
                return f(newest_of(payload, op));
            }
        }
        f(Newest::Absent)
    }

    /// The newest tombstone stamp covering `key` visible at `read_seq`.
    pub(crate) fn covering_tombstone(&self, key: &[u8], read_seq: u64) -> Option<Stamp> {
        if !self.has_tombstones.load(AtomicOrdering::Acquire) {
            return None;
        }
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
}

/// What a version doing `op` with `payload` tells a point read.
fn newest_of(payload: &[u8], op: MemOp) -> Newest<'_> {
    match op.kind {
        Kind::Put => Newest::Put(payload),
        Kind::Delete => Newest::Delete,
        Kind::Merge => Newest::Merge,
    }
}

fn probe(key: &[u8], stamp: Stamp) -> MemKey {
    MemKey::new(key, &[], stamp)
}

/// Up to `limit` entries of a skip list after `after` (exclusive; from the
/// start of the range when None), in the given direction, within
/// `[start, end]`. Iterators refill from here, so they never borrow the
/// skip list across calls.
pub(crate) fn skiplist_chunk(
    map: &SkipMap<MemKey, MemOp>,
    start: Bound<&[u8]>,
    end: Bound<&[u8]>,
    after: Option<(&[u8], Stamp)>,
    forward: bool,
    limit: usize,
    out: &mut Vec<Entry>,
) {
    let newest = Stamp { seq: u64::MAX, sub: u32::MAX };
    let oldest = Stamp { seq: 0, sub: 0 };
    let lo: Bound<MemKey> = match (forward, after) {
        (true, Some((k, s))) => Bound::Excluded(probe(k, s)),
        _ => match start {
            Bound::Included(k) => Bound::Included(probe(k, newest)),
            Bound::Excluded(k) => Bound::Excluded(probe(k, oldest)),
            Bound::Unbounded => Bound::Unbounded,
        },
    };
    let hi: Bound<MemKey> = match (forward, after) {
        (false, Some((k, s))) => Bound::Excluded(probe(k, s)),
        _ => match end {
            Bound::Included(k) => Bound::Included(probe(k, oldest)),
            Bound::Excluded(k) => Bound::Excluded(probe(k, newest)),
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
    let range = map.range((lo, hi));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::bloom::key_hash;

    fn put(m: &Memtable, key: &[u8], seq: u64, kind: Kind) {
        m.insert(key, key_hash(key), b"v", Stamp { seq, sub: 0 }, kind, 0);
    }

    /// A read of a key rewritten many times stops at its newest full
    /// version, in the skip list and in sealed arrays alike, and keeps the
    /// merge operands above it.
    #[test]
    fn versions_stop_at_the_newest_settling_version() {
        let m = Memtable::new(1, 1 << 20);
        let key = b"dir-onode";
        let mut seq = 1;
        for _ in 0..500 {
            put(&m, key, seq, Kind::Put);
            seq += 1;
        }
        for _ in 0..3 {
            put(&m, key, seq, Kind::Merge);
            seq += 1;
        }
        let mut out = Vec::new();
        m.versions(key, key_hash(key), u64::MAX, &mut out);
        let kinds: Vec<bool> = out.iter().map(|(_, op)| matches!(op, Op::Merge { .. })).collect();
        assert_eq!(kinds[..4], [true, true, true, false], "three operands, then the newest put");
        assert_eq!(out[3].0.seq, 500);
        // Each source (the skip list, each sealed array) stops at its own
        // newest put: at most one more version per array, not all 500.
        assert!(!m.view().arrays.is_empty(), "the test must reach sealed arrays");
        assert!(out.len() <= 4 + m.view().arrays.len(), "{} versions read", out.len());
        // At an older read point the newest visible put is the answer.
        out.clear();
        m.versions(key, key_hash(key), 250, &mut out);
        assert_eq!(out[0].0.seq, 250);
        assert!(out.len() <= 1 + m.view().arrays.len(), "{} versions read", out.len());
    }

    /// A memtable of a large budget keeps its large entries' bytes in its
    /// regions, a small one on the heap; either way every version reads
    /// back as written from the skip list, sealed arrays and their merges,
    /// and after the memtable that placed them is gone.
    #[test]
    fn large_entries_live_in_regions_and_read_back_through_seals_and_merges() {
        for budget in [arena::MIN_ARENA_BUDGET, arena::MIN_ARENA_BUDGET - 1] {
            let m = Memtable::new(1, budget);
            let value = |i: u64| vec![(i % 251) as u8; 4000 + (i % 7) as usize * 100];
            for seq in 1..=(3 * SEAL_ENTRIES as u64 + 5) {
                let key = format!("object-{:05}", seq % 3001);
                m.insert(key.as_bytes(), key_hash(key.as_bytes()), &value(seq), Stamp { seq, sub: 0 }, Kind::Put, 0);
                m.set_last_seq(seq);
            }
            let view = m.view();
            assert!(!view.arrays.is_empty(), "the test must reach sealed arrays");
            let recent_in_region = view.recent.iter().all(|e| e.key().shared().is_some_and(|b| b.in_region()));
            assert_eq!(recent_in_region, budget >= arena::MIN_ARENA_BUDGET, "budget {budget}");
            drop(view);
            let check = |m: &Memtable| {
                for seq in [1u64, 2, 3000, 3001, 3002, 3 * SEAL_ENTRIES as u64 + 5] {
                    let key = format!("object-{:05}", seq % 3001);
                    let (k, h) = (key.as_bytes(), key_hash(key.as_bytes()));
                    // The newest version at or below `seq` is `seq`'s own.
                    let got = m.newest(k, h, seq, |n| match n {
                        Newest::Put(p) => p.to_vec(),
                        other => panic!("{key} at {seq}: {other:?}"),
                    });
                    assert_eq!(got, value(seq), "{key} at {seq}");
                }
            };
            check(&m);
            // Arrays built from these entries outlive the memtable.
            let arrays = m.view().arrays.clone();
            drop(m);
            let kept: usize = arrays.iter().map(|a| a.len()).sum();
            assert!(kept >= SEAL_ENTRIES, "{kept} entries kept");
            assert!((0..arrays[0].len()).all(|i| arrays[0].payload_and_op(i).is_some_and(|(p, _)| p.len() >= 4000)));
        }
    }

    /// Large entries in regions are charged by their regions, whole: the
    /// budget counts what is mapped, never less than the entries' bytes.
    #[test]
    fn regions_are_charged_whole_to_the_budget() {
        let m = Memtable::new(1, arena::MIN_ARENA_BUDGET);
        let value = vec![7u8; 3000];
        let mut entry_bytes = 0;
        for seq in 1..=1000u64 {
            let key = format!("k{seq:06}");
            m.insert(key.as_bytes(), key_hash(key.as_bytes()), &value, Stamp { seq, sub: 0 }, Kind::Put, 0);
            entry_bytes += key.len() + value.len();
        }
        let regions = m.arena.as_ref().map_or(0, arena::EntryArena::region_bytes);
        // 1,000 entries of 3,007 bytes: 697 fill a region, the rest open a second.
        assert_eq!(regions, 2 * crate::huge::HUGE_BYTES);
        assert_eq!(m.size_bytes(), regions + 1000 * 96);
        assert!(m.size_bytes() >= entry_bytes);
    }

    /// With deferred seals, full skip lists wait in the view (no more than
    /// `MAX_PENDING`), every read sees their entries as before they were
    /// set aside, and sealing them later changes no read.
    #[test]
    fn pending_skip_lists_are_read_and_then_sealed() {
        // 4 entries per seal.
        let sync = Memtable::new(1, 1 << 10);
        let deferred = Memtable::with_deferred_seals(1, 1 << 10, true);
        let mut left = Vec::new();
        for seq in 1..=10u64 {
            let key = format!("key-{:02}", seq * 3 % 7);
            for m in [&sync, &deferred] {
                let to_seal = m.insert(
                    key.as_bytes(),
                    key_hash(key.as_bytes()),
                    &seq.to_le_bytes(),
                    Stamp { seq, sub: 0 },
                    Kind::Put,
                    0,
                );
                if std::ptr::eq(m, &deferred) {
                    left.push(to_seal);
                }
            }
        }
        assert_eq!(left.iter().filter(|&&s| s).count(), 2, "two full lists left for the flusher: {left:?}");
        assert_eq!(deferred.view().pending.len(), 2);
        assert!(deferred.view().arrays.is_empty(), "nothing sealed on the writer's thread");
        assert!(sync.view().pending.is_empty() && !sync.view().arrays.is_empty());
        let check = |m: &Memtable| {
            assert_eq!(scan(m), scan(&sync));
            for k in 0..8u64 {
                let key = format!("key-{k:02}");
                for read_seq in 0..=11 {
                    let (h, k) = (key_hash(key.as_bytes()), key.as_bytes());
                    let got = m.newest(k, h, read_seq, |n| format!("{n:?}"));
                    assert_eq!(got, sync.newest(k, h, read_seq, |n| format!("{n:?}")), "{key} at {read_seq}");
                    let (mut a, mut b) = (Vec::new(), Vec::new());
                    m.versions(k, h, read_seq, &mut a);
                    sync.versions(k, h, read_seq, &mut b);
                    assert_eq!(a.first(), b.first(), "{key} at {read_seq}");
                }
            }
        };
        check(&deferred);
        // A third full list is one too many: the writer seals them all.
        for seq in 11..=14u64 {
            let key = format!("key-{:02}", seq * 3 % 7);
            sync.insert(
                key.as_bytes(),
                key_hash(key.as_bytes()),
                &seq.to_le_bytes(),
                Stamp { seq, sub: 0 },
                Kind::Put,
                0,
            );
            assert!(!deferred.insert(
                key.as_bytes(),
                key_hash(key.as_bytes()),
                &seq.to_le_bytes(),
                Stamp { seq, sub: 0 },
                Kind::Put,
                0
            ));
        }
        assert!(deferred.view().pending.is_empty());
        check(&deferred);
        for seq in 15..=20u64 {
            let key = format!("key-{:02}", seq * 3 % 7);
            for m in [&sync, &deferred] {
                m.insert(
                    key.as_bytes(),
                    key_hash(key.as_bytes()),
                    &seq.to_le_bytes(),
                    Stamp { seq, sub: 0 },
                    Kind::Put,
                    0,
                );
            }
        }
        assert_eq!(deferred.view().pending.len(), 2);
        check(&deferred);
        deferred.seal_pending();
        assert!(deferred.view().pending.is_empty());
        check(&deferred);
        assert!(deferred.consolidate(2) || deferred.view().arrays.len() < 2);
        check(&deferred);
    }

    /// A key and its versions, newest first.
    type Group = (Vec<u8>, Vec<(Stamp, Op)>);

    /// Every entry of `m`, in the order a scan merges them (the internal
    /// order: key, then newest first).
    fn scan(m: &Memtable) -> Vec<Group> {
        let sources = crate::iter::memtable_sources(m, &Bound::Unbounded, &Bound::Unbounded, true);
        let mut merge = crate::iter::MergeIter::new(sources, true);
        let mut out = Vec::new();
        let mut versions = Vec::new();
        while let Some(key) = merge.next_group(&mut versions).expect("a memtable read cannot fail") {
            out.push((key, versions.clone()));
        }
        out
    }

    /// Merging a memtable's arrays into one keeps every entry and the
    /// order a scan sees them in, leaves the skip list alone, and the
    /// seals after it go on merging levels into the merged array.
    #[test]
    fn consolidating_keeps_every_entry_in_one_array() {
        // 4 entries per seal.
        let m = Memtable::new(1, 1 << 10);
        let mut seq = 1u64;
        let mut write = |m: &Memtable, n: u64| {
            for _ in 0..n {
                let key = format!("key-{:03}", seq * 7 % 40);
                let kind = if seq.is_multiple_of(5) { Kind::Delete } else { Kind::Put };
                m.insert(key.as_bytes(), key_hash(key.as_bytes()), &seq.to_le_bytes(), Stamp { seq, sub: 0 }, kind, 0);
                seq += 1;
            }
        };
        write(&m, 30);
        let arrays = m.view().arrays.len();
        assert!(arrays >= 3, "the test must reach several arrays: {arrays}");
        assert!(!m.view().recent.is_empty(), "and entries in the skip list");
        let before = scan(&m);
        assert!(!m.consolidate(arrays + 1), "fewer arrays than asked for");
        assert!(m.consolidate(2));
        assert_eq!(m.view().arrays.len(), 1);
        assert_eq!(scan(&m), before);
        assert!(!m.consolidate(2), "one array is left as it is");
        write(&m, 37);
        let after = scan(&m);
        assert_eq!(after.iter().map(|(_, v)| v.len()).sum::<usize>(), 67, "every version is kept");
        assert!(m.consolidate(2) || m.view().arrays.len() < 2);
        assert_eq!(scan(&m), after);
    }

    proptest::proptest! {
        /// Writes of a few keys over many seals (a 4-entry skip list), and
        /// at every read point the newest version `newest` borrows is the
        /// newest a model of every write holds at that point, in the skip
        /// list or in any array.
        #[test]
        fn newest_is_the_models_newest_at_every_read_point(
            writes in proptest::collection::vec((0u8..6, 0u8..3, proptest::prelude::any::<u8>()), 1..120),
            merges in proptest::collection::vec(proptest::prelude::any::<bool>(), 120),
            seals in proptest::collection::vec(0u8..4, 120),
            defer in proptest::prelude::any::<bool>(),
        ) {
            // 4 entries per seal: budget / 96 / 64 below 4.
            let m = Memtable::with_deferred_seals(1, 1 << 10, defer);
            let key = |k: u8| format!("a-key-sharing-its-first-32-bytes-{k}").into_bytes();
            let mut model: Vec<(Vec<u8>, u64, Kind, Vec<u8>)> = Vec::new();
            for (seq, (k, kind, v)) in (1u64..).zip(&writes) {
                let kind = [Kind::Put, Kind::Delete, Kind::Merge][*kind as usize];
                let key = key(*k);
                m.insert(&key, key_hash(&key), &[*v], Stamp { seq, sub: 0 }, kind, 0);
                model.push((key, seq, kind, vec![*v]));
                // Arrays merged into one now and then, between seals.
                if merges[seq as usize % merges.len()] {
                    m.consolidate(2);
                }
                // Deferred seals done now and then (or left to the writer
                // once too many wait).
                if seals[seq as usize % seals.len()] == 0 {
                    m.seal_pending();
                }
                let most = if defer { MAX_PENDING } else { 0 };
                proptest::prop_assert!(m.view().pending.len() <= most, "{} lists pending", m.view().pending.len());
            }
            let set_aside = !m.view().arrays.is_empty() || !m.view().pending.is_empty();
            proptest::prop_assert!(set_aside || writes.len() < 4, "the test must reach arrays or pending lists");
            for read_seq in 0..=writes.len() as u64 + 1 {
                for k in 0u8..7 {
                    let key = key(k);
                    let want = model.iter().rev().find(|(mk, seq, _, _)| *mk == key && *seq <= read_seq).map(
                        |(_, _, kind, v)| match kind {
                            Kind::Put => Newest::Put(v),
                            Kind::Delete => Newest::Delete,
                            Kind::Merge => Newest::Merge,
                        },
                    );
                    let got = m.newest(&key, key_hash(&key), read_seq, |n| format!("{n:?}"));
                    proptest::prop_assert_eq!(got, format!("{:?}", want.unwrap_or(Newest::Absent)), "{} at {}", k, read_seq);
                }
            }
        }
    }
}
