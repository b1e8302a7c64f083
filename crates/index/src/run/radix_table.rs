//! A first-level table over a block index's keys (the last key of each
//! block): the bits that follow the keys' common prefix pick a slot, and
//! the slot names the blocks whose keys have those bits. A point lookup
//! reads one line of the table and then the few heads of its slot, where
//! the head tree's descent waits on a line per level or two (the levels
//! under the cached top miss the cache for a large run's index).
//!
//! Built when a run is opened, from the index's keys: nothing on disk.

use std::cmp::Ordering;

use crate::huge::{region_bytes_of, HugeSlice, RegionFill};

/// Blocks an index needs for a table: a smaller one's head tree is a few
/// lines, in cache.
pub(crate) const MIN_BLOCKS: usize = 64;

/// The most bits a slot takes (4 bytes a slot: 16 MiB at most).
const MAX_BITS: u32 = 22;

/// See the module doc. Empty (no slots) for a small index.
#[derive(Debug, Default)]
pub(crate) struct RadixTable {
    /// The bytes every key of the index begins with (the first and the
    /// last key's common prefix).
    prefix: Vec<u8>,
    /// Bits of a key after the prefix that pick its slot (0: no table).
    bits: u32,
    /// `starts[s]`: the first block whose key's slot is at least `s`;
    /// `2^bits + 1` of them, the last the block count.
    starts: HugeSlice<u32>,
}

impl RadixTable {
    /// The table over `len` sorted keys, `key(i)` the i-th (about one slot
    /// per key: floor(log2(len)) bits); none (empty) unless most keys lie
    /// in slots of at most `narrow` keys, the slots a lookup would use
    /// (keys whose bits after the prefix cluster, as decimal digits do,
    /// leave most slots empty and a few wide).
    #[cfg(test)]
    pub(crate) fn new<'k>(len: usize, key: impl Fn(usize) -> &'k [u8], narrow: usize) -> RadixTable {
        RadixTable::new_in(len, key, narrow, None)
    }

    /// Bits of the table over `len` keys (0: none).
    fn bits_for(len: usize) -> u32 {
        if len < MIN_BLOCKS || len > u32::MAX as usize {
            return 0;
        }
        (usize::BITS - 1 - len.leading_zeros()).min(MAX_BITS)
    }

    /// Bytes a table over `len` keys may take of a region (see `huge`).
    pub(crate) fn region_bytes(len: usize) -> usize {
        match RadixTable::bits_for(len) {
            0 => 0,
            bits => region_bytes_of::<u32>((1 << bits) + 1),
        }
    }

    /// As [`RadixTable::new`], the slots' starts built in `fill`'s region
    /// (huge pages) if there is room.
    pub(crate) fn new_in<'k>(
        len: usize,
        key: impl Fn(usize) -> &'k [u8],
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
        let mut table = RadixTable { prefix: first[..common].to_vec(), bits, starts: HugeSlice::default() };
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
        let mut starts = HugeSlice::filled(fill, slots + 1, len as u32);
        let mut next = 0;
        for i in 0..len {
            let slot = table.slot(key(i));
            while next <= slot {
                if let Some(s) = starts.get_mut(next) {
                    *s = i as u32;
                }
                next += 1;
            }
        }
        table.starts = starts;
        table
    }

    /// The slot of `key`, which begins with the prefix: its `bits` bits
    /// after it, zero padded. Keys in order have slots in order.
    fn slot(&self, key: &[u8]) -> usize {
        let rest = key.get(self.prefix.len()..).unwrap_or_default();
        let mut bytes = [0u8; 8];
        let n = rest.len().min(8);
        bytes[..n].copy_from_slice(&rest[..n]);
        (u64::from_be_bytes(bytes) >> (64 - self.bits)) as usize
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
        let start = |s: usize| self.starts.get(s).map_or(len, |&b| b as usize);
        Some((start(slot), start(slot + 1)))
    }

    /// Memory held.
    pub(crate) fn size_bytes(&self) -> usize {
        self.prefix.len() + self.starts.len() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first key >= each probe lies within the candidates, for keys
    /// with and without a long common prefix, short keys, and probes
    /// outside the keys' prefix.
    fn check(keys: &[Vec<u8>], probes: &[Vec<u8>]) -> usize {
        let table = RadixTable::new(keys.len(), |i| &keys[i], usize::MAX);
        assert!(table.bits > 0 || keys.len() < MIN_BLOCKS);
        let mut narrow = 0;
        for p in probes.iter().chain(keys) {
            let want = keys.partition_point(|k| k.as_slice() < p.as_slice());
            let Some((lo, hi)) = table.candidates(p, keys.len()) else { continue };
            assert!(lo <= want && want <= hi, "probe {p:?}: {want} outside {lo}..={hi}");
            narrow += usize::from(hi - lo <= 4);
        }
        narrow
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
        let narrow = check(&keys, &probes);
        assert!(narrow > 9500, "only {narrow} of 10000 searches had at most 4 candidates");
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
            check(&keys, &probes);
        }
    }
}
