//! Immutable sorted arrays of memtable entries, merged pairwise as in a
//! 2-COLA: an array of level L holds 2^L sealed chunks' worth of entries,
//! and two arrays of one level merge into one of the next.
//!
//! An array's entries are [`Slot`]s, plain data saying where a key and its
//! payload lie in byte chunks that the array shares with the arrays it was
//! merged from. Sealing copies the skip list's small entries into one
//! chunk, and keeps each large one's allocation as a chunk of its own (see
//! [`OWN_CHUNK_BYTES`]); a merge copies slots and clones chunk handles
//! (a handful, plus one per large entry), never a key
//! or value, and touches no per-entry reference count. (Entries holding
//! their own reference-counted allocations cost a cache miss per entry per
//! merge, and another per entry when the merged arrays were dropped: half
//! of a memtable insert in a profile of creates through the mount.)
//!
//! Each array keeps a [`HeadTree`] of its keys' heads: a search reads a
//! few cache lines of heads, then compares entries only where heads tie,
//! and there by the keys' tails ([`key_tail16`], the next 16 bytes)
//! before the keys themselves: a long run of equal heads has a
//! [`HeadTree`] of its tails, so its search reads a few lines too. Keys that share their first 16 bytes are common:
//! a tree's entries begin with 10 bytes of map, record kind and tree id,
//! so `obj/0000123` and its 10,000 neighbours all tie on `obj/00`; with a
//! search of the tie by the keys' bytes, a get answered from a memtable
//! spent 40% of its time in memcmp and the cache misses on those bytes.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

use crossbeam_skiplist::SkipMap;

use super::arena::SharedBytes;
use super::key::{key_head16, key_tail16, op_of, op_ref_of, MemKey, MemOp};
#[cfg(test)]
use crate::entry::Entry;
use crate::entry::{Kind, Op, OpRef, Stamp};
use crate::head_tree::HeadTree;

/// Entries of at least this many bytes (key and payload) are not copied
/// when sealed: their skip-list allocation becomes a chunk of its own.
/// Copying a 4 KiB value twice more (into the chunk, then the chunk into
/// its shared allocation), into freshly mapped pages each time, was a
/// seventh of a durable 4 KiB put's CPU, two thirds of it page faults;
/// a large entry's handle costs a merge one count update per entry,
/// small beside its bytes.
pub(crate) const OWN_CHUNK_BYTES: usize = 1024;

// An entry that large must have a shared allocation to keep as a chunk.
const _: () = assert!(OWN_CHUNK_BYTES > super::key::INLINE_BYTES);

/// Where one entry lies and what it does, in 64 bytes: a merge copies
/// every slot of both arrays into fresh memory, so their size is most of
/// a merge's cost (with 80-byte slots, merges were a sixth of the
/// writer's CPU in a profile of creates, 6 points of it page faults on
/// the merged array).
#[derive(Clone, Copy, Debug)]
struct Slot {
    head: u128,
    /// The key's bytes 16 to 32 (see [`key_tail16`]).
    tail: u128,
    /// The stamp's sequence number and sub-sequence, apart so no padding
    /// follows them.
    seq: u64,
    sub: u32,
    /// Index in the array's chunks.
    chunk: u32,
    /// The key's length in the low [`KEY_LEN_BITS`] bits, the entry's
    /// [`Kind`] above them.
    key_len_and_kind: u32,
    /// The key starts here in the chunk; the payload follows it up to `end`.
    offset: u32,
    end: u32,
    /// A merge operand's operator (see [`MemOp`]).
    operator: u32,
}

/// Bits of [`Slot::key_len_and_kind`] holding the key's length.
const KEY_LEN_BITS: u32 = 30;

// Every key in a memtable was checked against the limit when written.
const _: () = assert!(crate::MAX_KEY_BYTES < 1 << KEY_LEN_BITS);
// A chunk's offsets fit a slot's: one entry's bytes, or a sealing's small
// entries (at most a sealing's count of entries below OWN_CHUNK_BYTES).
const _: () = assert!(crate::MAX_KEY_BYTES + crate::MAX_VALUE_BYTES <= u32::MAX as usize);
const _: () = assert!(super::SEAL_ENTRIES * OWN_CHUNK_BYTES <= u32::MAX as usize);

impl Slot {
    /// Entry `k` doing `op`, whose bytes lie at `offset..end` of chunk
    /// `chunk`.
    fn new(k: &MemKey, op: MemOp, chunk: usize, offset: usize, end: usize) -> Slot {
        Slot {
            head: k.head(),
            tail: k.tail(),
            seq: k.stamp.seq,
            sub: k.stamp.sub,
            chunk: chunk as u32,
            key_len_and_kind: k.key().len() as u32 | (op.kind as u32) << KEY_LEN_BITS,
            offset: offset as u32,
            end: end as u32,
            operator: op.operator,
        }
    }

    fn stamp(&self) -> Stamp {
        Stamp { seq: self.seq, sub: self.sub }
    }

    fn key_len(&self) -> usize {
        (self.key_len_and_kind & ((1 << KEY_LEN_BITS) - 1)) as usize
    }

    fn op(&self) -> MemOp {
        let kind = match self.key_len_and_kind >> KEY_LEN_BITS {
            k if k == Kind::Delete as u32 => Kind::Delete,
            k if k == Kind::Merge as u32 => Kind::Merge,
            _ => Kind::Put,
        };
        MemOp { kind, operator: self.operator }
    }

    /// The key's bytes in the chunk.
    fn key_range(&self) -> std::ops::Range<usize> {
        self.offset as usize..self.offset as usize + self.key_len()
    }

    /// The payload's bytes in the chunk.
    fn payload_range(&self) -> std::ops::Range<usize> {
        self.offset as usize + self.key_len()..self.end as usize
    }
}

/// A sorted, immutable run of memtable entries.
#[derive(Debug)]
pub(crate) struct SortedArray {
    pub level: u32,
    slots: Vec<Slot>,
    chunks: Vec<SharedBytes>,
    heads: HeadTree,
    /// A tree of the tails of each run of at least [`TAIL_TREE_MIN`]
    /// equal heads, by the run's first position.
    tails: Vec<(usize, HeadTree)>,
}

/// Runs of equal heads at least this long get a [`HeadTree`] of their
/// tails; shorter ones are searched by a partition of their slots.
const TAIL_TREE_MIN: usize = 32;

/// Trees of the tails of each long run of equal heads in `slots`.
fn tail_trees(slots: &[Slot]) -> Vec<(usize, HeadTree)> {
    let mut out = Vec::new();
    let mut lo = 0;
    while lo < slots.len() {
        let head = slots[lo].head;
        let len = slots[lo..].iter().take_while(|s| s.head == head).count();
        if len >= TAIL_TREE_MIN {
            out.push((lo, HeadTree::new(slots[lo..lo + len].iter().map(|s| s.tail))));
        }
        lo += len;
    }
    out
}

impl SortedArray {
    /// A level-0 array of the skip list's entries: the small ones' bytes
    /// copied into one chunk (of about `bytes_hint` bytes, an upper
    /// bound), each large one's allocation shared as a chunk of its own.
    pub(crate) fn sealed(recent: &SkipMap<MemKey, MemOp>, bytes_hint: usize) -> SortedArray {
        let mut small = Vec::with_capacity(bytes_hint.min(recent.len() * OWN_CHUNK_BYTES));
        let mut chunks = vec![SharedBytes::from(Arc::<[u8]>::from(&[][..]))];
        let mut slots = Vec::with_capacity(recent.len());
        for e in recent.iter() {
            let (k, op) = (e.key(), *e.value());
            let (chunk, offset, end) = if let Some(own) = k.shared().filter(|d| d.len() >= OWN_CHUNK_BYTES) {
                chunks.push(own.clone());
                (chunks.len() - 1, 0, own.len())
            } else {
                let offset = small.len();
                small.extend_from_slice(k.data());
                (0, offset, small.len())
            };
            slots.push(Slot::new(k, op, chunk, offset, end));
        }
        // One more copy, so that reads reach the bytes through one pointer.
        chunks[0] = SharedBytes::from(Arc::<[u8]>::from(small));
        Self::new(0, slots, chunks)
    }

    fn new(level: u32, slots: Vec<Slot>, chunks: Vec<SharedBytes>) -> SortedArray {
        let heads = HeadTree::new(slots.iter().map(|s| s.head));
        let tails = tail_trees(&slots);
        SortedArray { level, slots, chunks, heads, tails }
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    fn key_of(&self, s: &Slot) -> &[u8] {
        self.chunks.get(s.chunk as usize).and_then(|c| c.get(s.key_range())).unwrap_or_default()
    }

    fn payload_of(&self, s: &Slot) -> &[u8] {
        self.chunks.get(s.chunk as usize).and_then(|c| c.get(s.payload_range())).unwrap_or_default()
    }

    /// Entry `i`'s key (empty past the end).
    pub(crate) fn key(&self, i: usize) -> &[u8] {
        self.slots.get(i).map_or(&[], |s| self.key_of(s))
    }

    /// Entry `i`'s stamp and operation; `i` must be below [`Self::len`].
    pub(crate) fn version(&self, i: usize) -> (Stamp, Op) {
        let s = &self.slots[i];
        (s.stamp(), op_of(self.payload_of(s), s.op()))
    }

    /// Entry `i`'s payload and operation (None past the end).
    pub(crate) fn payload_and_op(&self, i: usize) -> Option<(&[u8], MemOp)> {
        let s = self.slots.get(i)?;
        Some((self.payload_of(s), s.op()))
    }

    /// Entry `i`'s stamp and operation, borrowed (None past the end).
    pub(crate) fn version_ref(&self, i: usize) -> Option<(Stamp, OpRef<'_>)> {
        let s = self.slots.get(i)?;
        Some((s.stamp(), op_ref_of(self.payload_of(s), s.op())))
    }

    /// Entry `i` as an owned entry; `i` must be below [`Self::len`].
    #[cfg(test)]
    pub(crate) fn entry(&self, i: usize) -> Entry {
        let (stamp, op) = self.version(i);
        Entry { key: self.key(i).to_vec(), stamp, op }
    }

    /// Orders slot `s` of this array against a bare (key, stamp) whose
    /// head and tail are given, as [`MemKey::cmp_to`] does.
    fn cmp_to(&self, s: &Slot, (head, tail): (u128, u128), key: &[u8], stamp: Stamp) -> Ordering {
        s.head
            .cmp(&head)
            .then(s.tail.cmp(&tail))
            .then_with(|| self.key_of(s).cmp(key))
            .then_with(|| stamp.cmp(&s.stamp()))
    }

    /// The first entry at or after (`le` false) or after (`le` true)
    /// (key, stamp). The head tree gives the first entry of the key's head,
    /// and in a long run of equal heads the run's tail tree the first of
    /// its tail: every entry before that is before the key. From there a
    /// galloping search of the slots finds the end, a slot or two later
    /// unless many entries share the key's first 32 bytes. (Finding both
    /// ends of the run of equal heads, then of equal tails, descended
    /// each tree twice: 28 lines and about 500 instructions of a trees get
    /// of 1,700, in callgrind.)
    fn bound(&self, key: &[u8], stamp: Stamp, le: bool) -> usize {
        let head = key_head16(key);
        let tail = key_tail16(key);
        let lo = self.heads.first_at_least(head);
        let mut from = lo;
        if self.slots.get(lo).is_some_and(|s| s.head == head) {
            if let Ok(at) = self.tails.binary_search_by_key(&lo, |(start, _)| *start) {
                from = lo + self.tails[at].1.first_at_least(tail);
            }
        }
        let before = |s: &Slot| {
            let o = self.cmp_to(s, (head, tail), key, stamp);
            o.is_lt() || (le && o.is_eq())
        };
        gallop(&self.slots, from, before)
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
            Bound::Unbounded => self.slots.len(),
        };
        (lo, hi.max(lo))
    }
}

/// The first position at or after `from` whose slot is not `before`,
/// given that every slot before `from` is and that `before` holds for a
/// prefix of the slots: steps of 1, 2, 4... until one lands past the
/// prefix, then a binary search of the last step.
fn gallop(slots: &[Slot], from: usize, before: impl Fn(&Slot) -> bool) -> usize {
    let mut lo = from;
    match slots.get(lo) {
        Some(s) if before(s) => {}
        _ => return lo,
    }
    let mut step = 1;
    loop {
        // slots[lo] is before: the answer lies in (lo, lo + step].
        let end = (lo + step).min(slots.len());
        match slots.get(end) {
            Some(s) if before(s) => {
                lo = end;
                step *= 2;
            }
            _ => return lo + 1 + slots[lo + 1..end].partition_point(&before),
        }
    }
}

/// Merges two sorted arrays into one of the next level: `b`'s chunks
/// follow `a`'s, so `b`'s slots move up by `a`'s chunk count.
pub(crate) fn merge(a: &SortedArray, b: &SortedArray) -> SortedArray {
    let shift = a.chunks.len() as u32;
    let moved = |s: &Slot| Slot { chunk: s.chunk + shift, ..*s };
    let mut out = Vec::with_capacity(a.slots.len() + b.slots.len());
    let (mut i, mut j) = (0, 0);
    while let (Some(x), Some(y)) = (a.slots.get(i), b.slots.get(j)) {
        if a.cmp_to(x, (y.head, y.tail), b.key_of(y), y.stamp()).is_lt() {
            out.push(*x);
            i += 1;
        } else {
            out.push(moved(y));
            j += 1;
        }
    }
    out.extend_from_slice(&a.slots[i..]);
    out.extend(b.slots[j..].iter().map(moved));
    let chunks = a.chunks.iter().chain(&b.chunks).cloned().collect();
    SortedArray::new(a.level.max(b.level) + 1, out, chunks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::Kind;

    /// A slot is one cache line and gives back the stamp, key length,
    /// kind and operator it was made with, at the limits of each.
    #[test]
    fn slots_are_64_bytes_and_keep_what_they_hold() {
        assert_eq!(std::mem::size_of::<Slot>(), 64);
        let kinds = [Kind::Put, Kind::Delete, Kind::Merge];
        for (kind, key_len, operator) in
            [(0, 0, 0), (1, crate::MAX_KEY_BYTES, u32::MAX), (2, 17, 5), (2, crate::MAX_KEY_BYTES, 0)]
        {
            let op = MemOp { kind: kinds[kind], operator };
            let stamp = Stamp { seq: u64::MAX - kind as u64, sub: u32::MAX - 1 };
            let end = key_len + 300;
            let key = vec![b'k'; key_len];
            let slot = Slot::new(&MemKey::new(&key, &[], stamp), op, 3, 100, 100 + end);
            assert_eq!((slot.stamp(), slot.key_len(), slot.op()), (stamp, key_len, op));
            assert_eq!((slot.key_range(), slot.payload_range()), (100..100 + key_len, 100 + key_len..100 + end));
        }
    }

    fn mem(key: &[u8], payload: &[u8], seq: u64) -> (MemKey, MemOp) {
        (MemKey::new(key, payload, Stamp { seq, sub: 0 }), MemOp { kind: Kind::Put, operator: 0 })
    }

    fn sealed(entries: Vec<(MemKey, MemOp)>) -> SortedArray {
        let map = SkipMap::new();
        for (k, op) in entries {
            map.insert(k, op);
        }
        SortedArray::sealed(&map, 0)
    }

    /// Merged arrays keep the skip list's order (keys sharing their first
    /// 16 bytes included, newer versions first) and each entry's own bytes,
    /// small ones copied and large ones in chunks of their own.
    #[test]
    fn merges_keep_the_internal_order_and_every_entrys_bytes() {
        let long = |i: u32| format!("a-key-sharing-its-head-{i:04}").into_bytes();
        let mut all = Vec::new();
        let mut arrays = Vec::new();
        for part in 0..4u64 {
            let entries: Vec<_> = (0..50u32)
                .map(|i| {
                    let key = if i % 2 == 0 { long(i * 7 % 40) } else { vec![(i % 256) as u8; (i % 5) as usize] };
                    // Every third value large enough to be its own chunk.
                    let mut value = format!("value {part} {i}").into_bytes();
                    if i % 3 == 0 {
                        value.resize(OWN_CHUNK_BYTES + i as usize, (i % 251) as u8);
                    }
                    mem(&key, &value, part * 100 + u64::from(i))
                })
                .collect();
            all.extend(entries.iter().cloned());
            arrays.push(sealed(entries));
        }
        assert_eq!(arrays[0].chunks.len(), 1 + 17, "one chunk for the small entries, one per large one");
        let [a, b, c, d] = &arrays[..] else { panic!("four arrays") };
        let merged = merge(&merge(a, b), &merge(c, d));
        assert_eq!(merged.level, 2);
        all.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(merged.len(), all.len());
        for (i, (k, _)) in all.iter().enumerate() {
            let e = merged.entry(i);
            assert_eq!((e.key.as_slice(), e.stamp), (k.key(), k.stamp), "entry {i}");
            assert_eq!(e.op, Op::Put(k.payload().to_vec()), "entry {i}");
            assert_eq!(merged.lower_bound(k.key(), k.stamp), i, "search for entry {i}");
        }
    }

    proptest::proptest! {
        /// Keys in long runs of equal heads (a shared 16-byte prefix) and
        /// of equal tails (a shared 32-byte one), short keys among them,
        /// several versions each, sealed and merged: every search, for keys
        /// present or not, lands where a partition of the sorted entries
        /// does, by the tail trees or without them.
        #[test]
        fn searches_agree_with_a_sorted_model(
            suffixes in proptest::collection::vec(
                (0u8..3, proptest::collection::vec(0u8..3, 0..20), 1u64..4),
                1..300,
            ),
            probes in proptest::collection::vec((0u8..3, proptest::collection::vec(0u8..3, 0..20), 0u64..5), 1..60),
        ) {
            let prefixes: [&[u8]; 3] = [b"", b"a-shared-head-16", b"a-shared-head-16and-a-shared-tail"];
            let key = |p: u8, rest: &[u8]| {
                let mut k = prefixes[p as usize].to_vec();
                k.extend_from_slice(rest);
                k
            };
            let mut model: Vec<(Vec<u8>, Stamp)> = Vec::new();
            let mut arrays = Vec::new();
            for (chunk_no, chunk) in suffixes.chunks(64).enumerate() {
                let mut entries = Vec::new();
                for (i, (p, rest, versions)) in chunk.iter().enumerate() {
                    for v in 0..*versions {
                        let seq = (chunk_no * 1000 + i * 4) as u64 + v;
                        let k = key(*p, rest);
                        if model.iter().any(|(mk, ms)| *mk == k && ms.seq == seq) {
                            continue;
                        }
                        model.push((k.clone(), Stamp { seq, sub: 0 }));
                        entries.push(mem(&k, b"v", seq));
                    }
                }
                arrays.push(sealed(entries));
            }
            let mut merged = arrays.pop().unwrap_or_else(|| sealed(Vec::new()));
            while let Some(a) = arrays.pop() {
                merged = merge(&a, &merged);
            }
            let internal = |k: &[u8], s: Stamp| MemKey::new(k, &[], s);
            model.sort_by_key(|m| internal(&m.0, m.1));
            proptest::prop_assert_eq!(merged.len(), model.len());
            for (p, rest, seq) in probes.iter().chain(suffixes.iter()) {
                let k = key(*p, rest);
                let probe = internal(&k, Stamp { seq: *seq, sub: 0 });
                let lower = model.partition_point(|m| internal(&m.0, m.1) < probe);
                let upper = model.partition_point(|m| internal(&m.0, m.1) <= probe);
                proptest::prop_assert_eq!(merged.lower_bound(&k, probe.stamp), lower);
                proptest::prop_assert_eq!(merged.upper_bound(&k, probe.stamp), upper);
            }
        }
    }
}
