//! A first-level table over a block index's keys (the last key of each
//! block): the bits that follow the keys' common prefix pick a slot, and
//! the slot names the blocks whose keys have those bits. A point lookup
//! reads one line of the table and then the few heads of its slot, where
//! the head tree's descent waits on a line per level or two (the levels
//! under the cached top miss the cache for a large run's index).
//!
//! A slot of at most [`FOLDED`] blocks also carries the 32 bits after the
//! slot's of each block's key, and where those blocks and the next lie in
//! the file: a lookup there finds its block's place in the slot's line,
//! without waiting on the heads and the handles (a dependent miss fewer
//! on the way to the data block).
//!
//! Built when a run is opened, from the index's keys: nothing on disk.

use std::cmp::Ordering;

use crate::huge::{region_bytes_of, HugeSlice, RegionFill};

use super::BlockHandle;

/// Blocks an index needs for a table: a smaller one's head tree is a few
/// lines, in cache.
pub(crate) const MIN_BLOCKS: usize = 64;

/// The most bits a slot takes (32 bytes a slot: 32 MiB at most).
const MAX_BITS: u32 = 20;

/// Blocks a slot places by itself, at most: a lookup whose slot holds
/// the keys of at most this many blocks finds its block's place in the
/// slot (one line) instead of in the heads and handles after it.
const FOLDED: usize = 3;

/// Bits of [`Slot::start`] that hold the slot's first block.
const START_BITS: u32 = 28;

/// [`Slot::start`]'s bits that hold the slot's first block.
const START_MASK: u32 = (1 << START_BITS) - 1;

/// [`Slot::start`]'s high bits for a slot that does not place its blocks.
const NOT_FOLDED: u32 = 0xf;

/// One slot: where its blocks begin and, for a slot of at most
/// [`FOLDED`] blocks, what a lookup needs to choose among them and find
/// the chosen one in the file. Two to a cache line.
#[repr(C, align(32))]
#[derive(Clone, Copy, Debug)]
struct Slot {
    /// Where block `start` begins in the run file (when it exists).
    offset: u64,
    /// The first block whose key's slot is at least this one (low
    /// [`START_BITS`] bits); above them, how many blocks' keys lie in this
    /// slot, or [`NOT_FOLDED`] (more than [`FOLDED`], or a length too
    /// large for `lens`).
    start: u32,
    /// The 32 bits after the slot's of each of those blocks' keys.
    heads: [u32; FOLDED],
    /// The lengths of those blocks and of the block after them (0 for a
    /// block past the index's last).
    lens: [u16; FOLDED + 1],
}

/// See the module doc. Empty (no slots) for a small index.
#[derive(Debug, Default)]
pub(crate) struct RadixTable {
    /// The bytes every key of the index begins with (the first and the
    /// last key's common prefix).
    prefix: Vec<u8>,
    /// Bits of a key after the prefix that pick its slot (0: no table).
    bits: u32,
    /// `2^bits + 1` slots, the last one's start the block count.
    slots: HugeSlice<Slot>,
}

impl RadixTable {
    /// The table over `len` sorted keys, `key(i)` the i-th (about one slot
    /// per key: floor(log2(len)) bits); none (empty) unless most keys lie
    /// in slots of at most `narrow` keys, the slots a lookup would use
    /// (keys whose bits after the prefix cluster, as decimal digits do,
    /// leave most slots empty and a few wide).
    #[cfg(test)]
    pub(crate) fn new<'k>(len: usize, key: impl Fn(usize) -> &'k [u8], narrow: usize) -> RadixTable {
        let handle = |i: usize| BlockHandle { offset: i as u64 * 100, len: 100 };
        RadixTable::new_in(len, key, handle, narrow, None)
    }

    /// Bits of the table over `len` keys (0: none).
    fn bits_for(len: usize) -> u32 {
        if !(MIN_BLOCKS..1 << START_BITS).contains(&len) {
            return 0;
        }
        (usize::BITS - 1 - len.leading_zeros()).min(MAX_BITS)
    }

    /// Bytes a table over `len` keys may take of a region (see `huge`).
    pub(crate) fn region_bytes(len: usize) -> usize {
        match RadixTable::bits_for(len) {
            0 => 0,
            bits => region_bytes_of::<Slot>((1 << bits) + 1),
        }
    }

    /// As [`RadixTable::new`], `handle(i)` block `i`'s place in the file,
    /// the slots built in `fill`'s region (huge pages) if there is room.
    pub(crate) fn new_in<'k>(
        len: usize,
        key: impl Fn(usize) -> &'k [u8],
        handle: impl Fn(usize) -> BlockHandle,
        narrow: usize,
        fill: Option<&mut RegionFill>,
    ) -> RadixTable {
        let bits = RadixTable::bits_for(len);
        if bits == 0 {
            return RadixTable::default();
        }
        let (first, last) = (key(0), key(len - 1));
        let common = first.iter().zip(last).take_while(|(a, b)| a == b).count();
        let slots = 1usize << bits;
        let mut table = RadixTable { prefix: first[..common].to_vec(), bits, slots: HugeSlice::default() };
        // A slot's width is the count of keys in it, and keys in order
        // have slots in order: the widths are the lengths of the runs of
        // equal slots (empty slots add nothing), counted before the table
        // is built.
        let (mut in_narrow, mut run) = (0, 1);
        for i in 1..=len {
            if i < len && table.slot(key(i)) == table.slot(key(i - 1)) {
                run += 1;
                continue;
            }
            if run <= narrow {
                in_narrow += run;
            }
            run = 1;
        }
        if in_narrow * 2 < len {
            return RadixTable::default();
        }
        let empty = Slot { offset: 0, start: len as u32, heads: [0; FOLDED], lens: [0; FOLDED + 1] };
        let mut table_slots = HugeSlice::filled(fill, slots + 1, empty);
        let mut next = 0;
        for i in 0..len {
            let slot = table.slot(key(i));
            while next <= slot {
                if let Some(s) = table_slots.get_mut(next) {
                    s.start = i as u32;
                }
                next += 1;
            }
        }
        for s in 0..slots {
            let (start, end) = (table_slots[s].start as usize, table_slots[s + 1].start as usize);
            let folded = table.fold(start, end, len, &key, &handle);
            if let Some(slot) = table_slots.get_mut(s) {
                *slot = folded;
            }
        }
        table.slots = table_slots;
        table
    }

    /// Slot of blocks `start..end` (their keys' slot), of `len`: placed
    /// ([`FOLDED`] blocks at most, lengths fitting `u16`) or not.
    fn fold<'k>(
        &self,
        start: usize,
        end: usize,
        len: usize,
        key: &impl Fn(usize) -> &'k [u8],
        handle: &impl Fn(usize) -> BlockHandle,
    ) -> Slot {
        let mut slot = Slot { offset: 0, start: start as u32, heads: [0; FOLDED], lens: [0; FOLDED + 1] };
        let width = end - start;
        let fits = width <= FOLDED && (start..=end.min(len - 1)).all(|i| handle(i).len <= u32::from(u16::MAX));
        if !fits {
            slot.start |= NOT_FOLDED << START_BITS;
            return slot;
        }
        slot.start |= (width as u32) << START_BITS;
        if start < len {
            slot.offset = handle(start).offset;
        }
        for (j, i) in (start..end).enumerate() {
            slot.heads[j] = self.head_bits(key(i));
        }
        for (j, i) in (start..=end.min(len - 1)).enumerate() {
            slot.lens[j] = handle(i).len as u16;
        }
        slot
    }

    /// The 64 bits of `key` after the prefix, zero padded.
    fn after_prefix(&self, key: &[u8]) -> u64 {
        let rest = key.get(self.prefix.len()..).unwrap_or_default();
        let mut bytes = [0u8; 8];
        let n = rest.len().min(8);
        bytes[..n].copy_from_slice(&rest[..n]);
        u64::from_be_bytes(bytes)
    }

    /// The 32 bits of `key` after its slot's (`bits` of at most 22 leave
    /// them within the 64 after the prefix). Keys in order have (slot,
    /// these bits) in order; keys unequal there are unequal, and order as
    /// them.
    fn head_bits(&self, key: &[u8]) -> u32 {
        ((self.after_prefix(key) << self.bits) >> 32) as u32
    }

    /// The slot of `key`, which begins with the prefix: its `bits` bits
    /// after it, zero padded. Keys in order have slots in order.
    fn slot(&self, key: &[u8]) -> usize {
        (self.after_prefix(key) >> (64 - self.bits)) as usize
    }

    /// Blocks `lo..=hi` of an index of `len`: the first whose key is >=
    /// `key` is one of them (`hi` when none of `lo..hi` is). None without
    /// a table.
    pub(crate) fn candidates(&self, key: &[u8], len: usize) -> Option<(usize, usize)> {
        if self.bits == 0 {
            return None;
        }
        // Every key of the index begins with the prefix: a key that does
        // not sorts before them all or after them all.
        let n = key.len().min(self.prefix.len());
        match key[..n].cmp(&self.prefix[..n]) {
            Ordering::Less => return Some((0, 0)),
            Ordering::Greater => return Some((len, len)),
            Ordering::Equal if n < self.prefix.len() => return Some((0, 0)),
            Ordering::Equal => {}
        }
        // Blocks of a lower slot have smaller keys, of a higher one larger.
        let slot = self.slot(key);
        let start = |s: usize| self.slots.get(s).map_or(len, |b| (b.start & START_MASK) as usize);
        Some((start(slot), start(slot + 1)))
    }

    /// Where the first block whose key is >= `key` lies, when `key`'s slot
    /// says so by itself: that block and its place (None past the last of
    /// `len` blocks). None without a table, for a key outside the prefix,
    /// a slot that does not place its blocks, or a key whose bits tie with
    /// a block's in the slot (the caller then searches the heads).
    pub(crate) fn place(&self, key: &[u8], len: usize) -> Option<(usize, Option<BlockHandle>)> {
        if self.bits == 0 || !key.starts_with(&self.prefix) {
            return None;
        }
        let slot = self.slots.get(self.slot(key))?;
        let width = (slot.start >> START_BITS) as usize;
        if width > FOLDED {
            return None;
        }
        let head = self.head_bits(key);
        // Blocks of the slot whose bits are below the key's hold smaller
        // keys; the block after them (the next slot's first) larger ones.
        let mut j = 0;
        while j < width && slot.heads[j] < head {
            j += 1;
        }
        if j < width && slot.heads[j] == head {
            return None;
        }
        let at = (slot.start & START_MASK) as usize + j;
        if at >= len {
            return Some((len, None));
        }
        let offset = slot.offset + slot.lens[..j].iter().map(|&l| u64::from(l)).sum::<u64>();
        Some((at, Some(BlockHandle { offset, len: u32::from(slot.lens[j]) })))
    }

    /// Memory held.
    pub(crate) fn size_bytes(&self) -> usize {
        self.prefix.len() + self.slots.len() * std::mem::size_of::<Slot>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first key >= each probe lies within the candidates, for keys
    /// with and without a long common prefix, short keys, and probes
    /// outside the keys' prefix.
    fn check(keys: &[Vec<u8>], probes: &[Vec<u8>]) -> usize {
        check_placed(keys, probes).0
    }

    /// Blocks of lengths 100 to 999 end to end, one in 50 of `long`.
    fn handles(n: usize, long: u32) -> Vec<BlockHandle> {
        let mut offset = 0;
        (0..n)
            .map(|i| {
                let len = if i % 50 == 7 { long } else { 100 + (i as u32 * 37) % 900 };
                offset += u64::from(len);
                BlockHandle { offset: offset - u64::from(len), len }
            })
            .collect()
    }

    /// As [`check`], and every lookup a slot places itself finds the block
    /// a plain search finds, at its place: says how many searches had at
    /// most 4 candidates, and how many the slots placed.
    fn check_placed(keys: &[Vec<u8>], probes: &[Vec<u8>]) -> (usize, usize) {
        check_placed_with(keys, probes, &handles(keys.len(), 321))
    }

    fn check_placed_with(keys: &[Vec<u8>], probes: &[Vec<u8>], handles: &[BlockHandle]) -> (usize, usize) {
        let table = RadixTable::new_in(keys.len(), |i| &keys[i], |i| handles[i], usize::MAX, None);
        assert!(table.bits > 0 || keys.len() < MIN_BLOCKS);
        let (mut narrow, mut placed) = (0, 0);
        for p in probes.iter().chain(keys) {
            let want = keys.partition_point(|k| k.as_slice() < p.as_slice());
            if let Some((at, h)) = table.place(p, keys.len()) {
                assert_eq!((at, h), (want, handles.get(want).copied()), "probe {p:?}");
                placed += 1;
            }
            let Some((lo, hi)) = table.candidates(p, keys.len()) else { continue };
            assert!(lo <= want && want <= hi, "probe {p:?}: {want} outside {lo}..={hi}");
            narrow += usize::from(hi - lo <= 4);
        }
        (narrow, placed)
    }

    fn mix(mut z: u64) -> u64 {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z ^ (z >> 31)
    }

    #[test]
    fn candidates_hold_the_answer() {
        // Random 16-byte keys: nearly every slot holds one or two.
        let mut keys: Vec<Vec<u8>> =
            (0..5000u64).map(|i| [mix(i).to_be_bytes(), mix(i + 7).to_be_bytes()].concat()).collect();
        keys.sort();
        let probes: Vec<Vec<u8>> = (0..5000u64).map(|i| mix(i + 99_999).to_be_bytes().to_vec()).collect();
        let (narrow, placed) = check_placed(&keys, &probes);
        assert!(narrow > 9500, "only {narrow} of 10000 searches had at most 4 candidates");
        // The keys themselves tie with their own blocks' bits; nearly
        // every probe between them is placed.
        assert!(placed > 4500, "only {placed} of 5000 probes were placed by their slot");
        // A long shared prefix, keys of every length after it, and probes
        // before, inside and after the prefix.
        let mut keys: Vec<Vec<u8>> = (0..700u64)
            .map(|i| [b"shared-prefix/".as_slice(), &mix(i).to_be_bytes()[..(i % 9) as usize]].concat())
            .collect();
        keys.sort();
        keys.dedup();
        let probes =
            [&b""[..], b"a", b"shared", b"shared-prefix/", b"shared-prefix0", b"shared-prefix/\xff\xff", b"zzz"]
                .iter()
                .map(|p| p.to_vec())
                .collect::<Vec<_>>();
        check(&keys, &probes);
        // Keys that tie in their first bytes after the prefix: wide slots.
        let keys: Vec<Vec<u8>> =
            (0..300u32).map(|i| [vec![1, 2, 3], vec![0; 9], i.to_be_bytes().to_vec()].concat()).collect();
        check(&keys, &[vec![1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 5], vec![1, 2, 4], vec![1, 2]]);
    }

    /// A slot with a block too long for its lengths does not place its
    /// blocks (the search takes the heads), and the others still do.
    #[test]
    fn a_block_too_long_for_a_slot_is_found_by_the_heads() {
        let mut keys: Vec<Vec<u8>> = (0..3000u64).map(|i| mix(i).to_be_bytes().to_vec()).collect();
        keys.sort();
        let probes: Vec<Vec<u8>> = (0..3000u64).map(|i| mix(i + 5_000).to_be_bytes().to_vec()).collect();
        let long = handles(keys.len(), u32::from(u16::MAX) + 1);
        let (_, placed) = check_placed_with(&keys, &probes, &long);
        let (_, all) = check_placed(&keys, &probes);
        assert!(placed < all && placed > all / 2, "placed {placed} with long blocks, {all} without");
    }

    /// Keys that tie in the 32 bits after their slot's are left to the
    /// heads: the slot cannot order them.
    #[test]
    fn keys_tying_in_the_slots_bits_are_not_placed() {
        let keys: Vec<Vec<u8>> =
            (0..256u64).map(|i| [(i << 56).to_be_bytes(), [7; 8], i.to_be_bytes()].concat()).collect();
        let table = RadixTable::new(keys.len(), |i| &keys[i], usize::MAX);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(table.place(k, keys.len()), None, "key {i}");
            let after = [k.as_slice(), b"\0"].concat();
            assert_eq!(table.place(&after, keys.len()), None, "after key {i}");
        }
        let (_, placed) = check_placed(&keys, &[vec![0x80, 0, 0, 0, 0, 9]]);
        assert_eq!(placed, 0);
    }

    /// Too few keys: no table, and the search takes the head tree.
    #[test]
    fn a_small_index_has_no_table() {
        let keys: Vec<Vec<u8>> = (0..MIN_BLOCKS as u32 - 1).map(|i| i.to_be_bytes().to_vec()).collect();
        assert_eq!(RadixTable::new(keys.len(), |i| &keys[i], usize::MAX).candidates(b"x", keys.len()), None);
    }

    /// Keys whose bytes after the prefix are decimal digits (YCSB's) use
    /// few slots, each wide: no table; random keys keep theirs.
    #[test]
    fn clustered_keys_get_no_table() {
        let mut digits: Vec<Vec<u8>> = (0..5000u64).map(|i| format!("user{}", mix(i)).into_bytes()).collect();
        digits.sort();
        assert_eq!(RadixTable::new(digits.len(), |i| &digits[i], 8).bits, 0);
        let mut random: Vec<Vec<u8>> = (0..5000u64).map(|i| mix(i).to_be_bytes().to_vec()).collect();
        random.sort();
        assert!(RadixTable::new(random.len(), |i| &random[i], 8).bits > 0);
    }

    proptest::proptest! {
        /// Any sorted keys over a small alphabet, any probe.
        #[test]
        fn candidates_hold_the_answer_for_random_keys(
            keys in proptest::collection::btree_set(proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 0x7f, 0x80, 0xff]), 0..6), 64..300),
            probes in proptest::collection::vec(proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 0x7f, 0x80, 0xff]), 0..7), 1..40),
        ) {
            let keys: Vec<Vec<u8>> = keys.into_iter().collect();
            check_placed(&keys, &probes);
        }
    }
}
