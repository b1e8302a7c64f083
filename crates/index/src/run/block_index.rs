//! The block index of an open run: the last key of every data block and
//! where the block lives. A point lookup takes the few blocks its key's
//! slot names in a [`RadixTable`] and scans their 16-byte heads; where the
//! slot names many (keys whose bits after their common prefix cluster), or
//! for a small index, it searches the heads in a [`HeadTree`] (a few cache
//! lines). Full keys are compared only among blocks whose heads tie.

use crate::codec::Decoder;
use crate::head_tree::{HeadTree, FANOUT as HEADS_PER_LINE};
use crate::huge::{region_bytes_of, HugeSlice, RegionFill};
use crate::memtable::key_head16;
use crate::prefetch::prefetch;
use crate::MAX_KEY_BYTES;

use super::radix_table::RadixTable;
use super::BlockHandle;

/// The fewest bytes an entry takes: an empty key's length, the offset and
/// the length.
const MIN_ENTRY_BYTES: usize = 1 + 8 + 4;

/// The most blocks a radix slot may name for a lookup to scan their heads
/// (two lines of heads); more, and it searches the head tree.
const MAX_SCANNED_HEADS: usize = 8;

/// Indexes [`BlockIndex::find_each`] searches together, at most (more are
/// taken in further rounds).
const FIND_EACH_AT_ONCE: usize = 16;

/// The block index of one run.
#[derive(Debug)]
pub(crate) struct BlockIndex {
    heads: HeadTree,
    radix: RadixTable,
    keys: Vec<u8>,
    key_ends: Vec<u32>,
    handles: HugeSlice<BlockHandle>,
}

impl BlockIndex {
    /// Decodes the block index section's body; blocks must lie end to end
    /// from offset 0 and end by `blocks_end` (where the filter starts).
    #[cfg(test)]
    pub(crate) fn decode(body: &[u8], blocks_end: u64) -> Result<BlockIndex, String> {
        BlockIndex::decode_in(body, blocks_end, None)
    }

    /// Bytes the lookup arrays of the index in `body` may take of a
    /// region (see `huge`): 0 for a body too short to say.
    pub(crate) fn region_bytes(body: &[u8]) -> usize {
        let Ok(count) = Decoder::new(body).u32("block count") else { return 0 };
        // At most one entry per MIN_ENTRY_BYTES of the body, as decode checks.
        let count = (count as usize).min(body.len() / MIN_ENTRY_BYTES);
        HeadTree::region_bytes(count) + RadixTable::region_bytes(count) + region_bytes_of::<BlockHandle>(count)
    }

    /// As [`BlockIndex::decode`], what a lookup reads (the radix table,
    /// the head tree, the blocks' handles) built in `fill`'s region (huge
    /// pages) while there is room; the keys, read only where heads tie,
    /// stay on the heap.
    pub(crate) fn decode_in(
        body: &[u8],
        blocks_end: u64,
        mut fill: Option<&mut RegionFill>,
    ) -> Result<BlockIndex, String> {
        let mut d = Decoder::new(body);
        let count = d.u32("block count")?;
        let count = d.count(count.into(), MIN_ENTRY_BYTES, "block count")?;
        let mut idx = BlockIndex {
            heads: HeadTree::default(),
            radix: RadixTable::default(),
            keys: Vec::new(),
            key_ends: Vec::with_capacity(count),
            handles: HugeSlice::filled(fill.as_deref_mut(), count, BlockHandle { offset: 0, len: 0 }),
        };
        let mut next_offset = 0u64;
        for i in 0..count {
            let key = d.length_prefixed(MAX_KEY_BYTES, "index key")?;
            let offset = d.u64("block offset")?;
            let len = d.u32("block length")?;
            if offset != next_offset || offset + u64::from(len) > blocks_end || len < 8 {
                return Err(format!(
                    "index entry {i}: block at {offset}+{len} is not where blocks end ({next_offset})"
                ));
            }
            if i > 0 && key < idx.key(i - 1) {
                return Err(format!("index entry {i} is out of order"));
            }
            next_offset = offset + u64::from(len);
            idx.keys.extend_from_slice(key);
            idx.key_ends.push(idx.keys.len() as u32);
            if let Some(h) = idx.handles.get_mut(i) {
                *h = BlockHandle { offset, len };
            }
        }
        if d.remaining() != 0 {
            return Err(format!("{} trailing bytes after the block index", d.remaining()));
        }
        idx.radix =
            RadixTable::new_in(count, |i| idx.key(i), |i| idx.handles[i], MAX_SCANNED_HEADS, fill.as_deref_mut());
        idx.heads = HeadTree::new_in((0..count).map(|i| key_head16(idx.key(i))), fill);
        Ok(idx)
    }

    pub(crate) fn len(&self) -> usize {
        self.handles.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }

    pub(crate) fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.key_ends[i - 1] as usize };
        &self.keys[start..self.key_ends[i] as usize]
    }

    pub(crate) fn handle(&self, i: usize) -> BlockHandle {
        self.handles[i]
    }

    /// The first block whose last key is >= `key` (== len() if none).
    pub(crate) fn find(&self, key: &[u8]) -> usize {
        let head = key_head16(key);
        let lo = match self.radix.candidates(key, self.len()) {
            Some((lo, hi)) if hi - lo <= MAX_SCANNED_HEADS => {
                self.touch_handles(lo);
                // Blocks before `lo` have smaller keys, and block `hi` (if
                // any) a larger one, so a head at least the key's.
                (lo..hi).find(|&i| self.heads.get(i) >= head).unwrap_or(hi)
            }
            _ => self.heads.first_at_least_touching(head, |first| self.touch_handles(first)),
        };
        self.past_ties(lo, head, key)
    }

    /// [`BlockIndex::find`], with the found block's place (None past the
    /// last block): from the key's radix slot alone where it places its
    /// blocks (one line where the heads and the handles are two lines
    /// read after it), else from the search and the handles.
    pub(crate) fn find_placed(&self, key: &[u8]) -> (usize, Option<BlockHandle>) {
        if let Some(placed) = self.radix.place(key, self.len()) {
            return placed;
        }
        let i = self.find(key);
        (i, self.handles.get(i).copied())
    }

    /// Whether [`BlockIndex::find`] of `key` scans a radix slot's heads.
    #[cfg(test)]
    fn scans_a_slot(&self, key: &[u8]) -> bool {
        self.radix.candidates(key, self.len()).is_some_and(|(lo, hi)| hi - lo <= MAX_SCANNED_HEADS)
    }

    /// [`BlockIndex::find`] in several indexes, each for its own key
    /// (`searches[i]`, None for none), into `out[i]`, with the head
    /// searches made together ([`HeadTree::first_at_least_each`]): a scan
    /// positions a cursor in every run, and their misses then overlap.
    pub(crate) fn find_each(searches: &[Option<(&BlockIndex, &[u8])>], out: &mut [usize]) {
        let mut trees: [Option<(&HeadTree, u128)>; FIND_EACH_AT_ONCE] = [None; FIND_EACH_AT_ONCE];
        for (chunk, out) in searches.chunks(FIND_EACH_AT_ONCE).zip(out.chunks_mut(FIND_EACH_AT_ONCE)) {
            for (tree, search) in trees.iter_mut().zip(chunk) {
                *tree = search.map(|(index, key)| (&index.heads, key_head16(key)));
            }
            let touch = |i: usize, first: usize| {
                if let Some((index, _)) = chunk[i] {
                    index.touch_handles(first);
                }
            };
            HeadTree::first_at_least_each(&trees[..chunk.len()], touch, out);
            for (at, search) in out.iter_mut().zip(chunk) {
                if let Some((index, key)) = search {
                    *at = index.past_ties(*at, key_head16(key), key);
                }
            }
        }
    }

    /// Starts loading the handles of the blocks from `first` to the end
    /// of its head-tree line, so a read of the found block's handle finds
    /// it loaded.
    fn touch_handles(&self, first: usize) {
        let last = (first + HEADS_PER_LINE - 1).min(self.handles.len().saturating_sub(1));
        [first, last].iter().filter_map(|&i| self.handles.get(i)).for_each(prefetch);
    }

    /// From `lo`, a block whose head is >= `head` (or the end) with every
    /// block before it holding a smaller key than `key`, the first whose
    /// last key is >= `key`: only blocks whose heads tie with the key's
    /// need their keys compared.
    fn past_ties(&self, lo: usize, head: u128, key: &[u8]) -> usize {
        if lo >= self.len() || self.heads.get(lo) != head {
            return lo;
        }
        let (mut lo, mut hi) = (lo, head.checked_add(1).map_or(self.len(), |next| self.heads.first_at_least(next)));
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.key(mid) < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// [`BlockIndex::find`] of every key of `keys`, into `out` (replaced),
    /// with the head searches made together
    /// ([`HeadTree::first_at_least_many`]): a sorted multi-get's keys,
    /// scattered over a large run, each miss the cache at every level of
    /// the tree, and their misses then overlap.
    pub(crate) fn find_many(&self, keys: &[&[u8]], out: &mut Vec<usize>) {
        let heads: Vec<u128> = keys.iter().map(|k| key_head16(k)).collect();
        self.heads.first_at_least_many(&heads, out);
        for ((at, key), &head) in out.iter_mut().zip(keys).zip(&heads) {
            *at = self.past_ties(*at, head, key);
        }
    }

    /// Memory held (counted against the metadata budget).
    pub(crate) fn size_bytes(&self) -> usize {
        self.heads.size_bytes()
            + self.radix.size_bytes()
            + self.keys.len()
            + self.key_ends.len() * 4
            + self.handles.size_bytes()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// An encoded index of one 100-byte block per key, end to end.
    fn body(keys: &[Vec<u8>]) -> Vec<u8> {
        let mut body = Vec::new();
        crate::codec::put_u32(&mut body, keys.len() as u32);
        for (i, k) in keys.iter().enumerate() {
            crate::codec::put_bytes(&mut body, k);
            crate::codec::put_u64(&mut body, i as u64 * 100);
            crate::codec::put_u32(&mut body, 100);
        }
        body
    }

    fn index(keys: &[Vec<u8>]) -> BlockIndex {
        BlockIndex::decode(&body(keys), keys.len() as u64 * 100).unwrap()
    }

    fn check_against_plain_search(keys: &[Vec<u8>], extra_probes: &[Vec<u8>]) {
        let idx = index(keys);
        let plain = |key: &[u8]| keys.partition_point(|k| k.as_slice() < key);
        let mut probes: Vec<Vec<u8>> = keys.to_vec();
        probes.extend(keys.iter().map(|k| [k.as_slice(), b"\0"].concat()));
        probes.extend(keys.iter().filter(|k| !k.is_empty()).map(|k| k[..k.len() - 1].to_vec()));
        probes.extend(extra_probes.iter().cloned());
        for p in &probes {
            let want = plain(p);
            assert_eq!(idx.find(p), want, "{} keys, probe {p:?}", keys.len());
            let place = (want < keys.len()).then(|| BlockHandle { offset: want as u64 * 100, len: 100 });
            assert_eq!(idx.find_placed(p), (want, place), "{} keys, probe {p:?}", keys.len());
        }
        let refs: Vec<&[u8]> = probes.iter().map(Vec::as_slice).collect();
        let mut many = Vec::new();
        idx.find_many(&refs, &mut many);
        let plain_all: Vec<usize> = refs.iter().map(|p| plain(p)).collect();
        assert_eq!(many, plain_all, "{} keys: found together as one by one", keys.len());
    }

    /// The tree search agrees with a plain binary search over keys,
    /// including long runs of keys sharing their first 8 or 16 bytes.
    #[test]
    fn find_agrees_with_a_plain_search() {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for i in 0..700u32 {
            // Groups of 50 keys share an 8-byte head, groups of 10 a 16-byte prefix.
            let mut k = format!("{:08}{:08}", i / 50 * 50, i / 10 * 10).into_bytes();
            k.extend_from_slice(&i.to_be_bytes());
            keys.push(k);
        }
        keys.sort();
        let extra = [vec![], b"0".to_vec(), b"zzzzzzzzzz".to_vec(), b"00000050".to_vec(), vec![0xff; 20]];
        check_against_plain_search(&keys, &extra);
        // Every size around the line and level boundaries.
        for n in (1..=200).chain([511, 512, 513, 576, 640]) {
            check_against_plain_search(&keys[..n], &extra);
        }
    }

    /// Keys of every length from 0 to 17 bytes, including ones made of
    /// 0x00 and 0xff bytes, where padding and the largest head tie.
    #[test]
    fn short_keys_and_extreme_bytes() {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for len in 0..=17usize {
            keys.push(vec![0; len]);
            keys.push(vec![0xff; len]);
            keys.push((0..len as u8).collect());
        }
        keys.sort();
        keys.dedup();
        check_against_plain_search(&keys, &[vec![0xff; 30], vec![0, 0xff]]);
    }

    /// Searches of several indexes made together (of different depths,
    /// some empty, some slots without a search) find what one search of
    /// each finds.
    #[test]
    fn find_each_agrees_with_find() {
        let keys: Vec<Vec<u8>> = (0..3000u32).map(|i| format!("{:016}{i:04}", i / 7 * 7).into_bytes()).collect();
        let indexes: Vec<BlockIndex> = [0usize, 1, 5, 64, 65, 700, 3000]
            .iter()
            .enumerate()
            .map(|(j, &n)| index(&keys.iter().skip(j).step_by(j + 1).take(n).cloned().collect::<Vec<_>>()))
            .collect();
        let probes: Vec<Vec<u8>> = keys.iter().step_by(97).cloned().chain([vec![], vec![0xff; 24]]).collect();
        for probe in &probes {
            let mut searches: Vec<Option<(&BlockIndex, &[u8])>> =
                indexes.iter().map(|i| Some((i, probe.as_slice()))).collect();
            // Slots without a search, and more indexes than one round takes.
            searches.insert(2, None);
            searches.extend(indexes.iter().map(|i| Some((i, &probe[..probe.len().min(9)]))));
            searches.extend(indexes.iter().map(|i| Some((i, probe.as_slice()))));
            let mut out = vec![usize::MAX; searches.len()];
            BlockIndex::find_each(&searches, &mut out);
            for (search, &at) in searches.iter().zip(&out) {
                if let Some((index, key)) = search {
                    assert_eq!(at, index.find(key), "probe {probe:?}");
                }
            }
        }
    }

    /// Random keys (as hashed keys are): most lookups scan one radix
    /// slot's heads, and find what a plain search finds.
    #[test]
    fn random_keys_are_found_through_radix_slots() {
        let mix = |mut z: u64| {
            z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z ^ (z >> 31)
        };
        let mut keys: Vec<Vec<u8>> =
            (0..3000u64).map(|i| [mix(i).to_be_bytes(), mix(i ^ 0x5555).to_be_bytes()].concat()).collect();
        keys.sort();
        let probes: Vec<Vec<u8>> = (0..3000u64).map(|i| mix(i + 1_000_000).to_be_bytes().to_vec()).collect();
        check_against_plain_search(&keys, &probes);
        let idx = index(&keys);
        let scanned = keys.iter().chain(&probes).filter(|p| idx.scans_a_slot(p)).count();
        assert!(scanned > 5900, "{scanned} of 6000 lookups scanned a slot");
    }

    /// Built on huge pages, the lookup arrays (radix table, head tree,
    /// handles) answer as they do on the heap.
    #[test]
    fn an_index_in_a_region_finds_the_blocks_one_on_the_heap_finds() {
        let mix = |z: u64| (z ^ (z >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9).rotate_left(29);
        let mut keys: Vec<Vec<u8>> = (0..40_000u64).map(|i| mix(i).to_be_bytes().to_vec()).collect();
        keys.sort();
        keys.dedup();
        let heap = index(&keys);
        let probes: Vec<Vec<u8>> = (0..20_000u64).map(|i| mix(i + 7_000_000).to_be_bytes().to_vec()).collect();
        let before: Vec<usize> = keys.iter().chain(&probes).map(|p| heap.find(p)).collect();
        let handles: Vec<BlockHandle> = (0..heap.len()).map(|i| heap.handle(i)).collect();
        let body = body(&keys);
        let region = BlockIndex::region_bytes(&body);
        let mut fill = RegionFill::new(region).unwrap();
        let idx = BlockIndex::decode_in(&body, keys.len() as u64 * 100, Some(&mut fill)).unwrap();
        assert!(idx.handles.in_region() && !heap.handles.in_region());
        // Every array fit: the slack is the rounding up to a huge page.
        let used = region.next_multiple_of(2 << 20) - fill.slack();
        let arrays = idx.handles.size_bytes() + idx.heads.size_bytes() + idx.radix.size_bytes();
        assert!(used >= arrays && used <= region, "used {used} of {region}, arrays {arrays}");
        let after: Vec<usize> = keys.iter().chain(&probes).map(|p| idx.find(p)).collect();
        assert_eq!(before, after);
        assert!((0..idx.len()).all(|i| idx.handle(i) == handles[i]));
    }

    #[test]
    fn an_index_without_blocks_finds_nothing() {
        let idx = index(&[]);
        assert_eq!(idx.find(b"any"), 0);
        assert_eq!(idx.len(), 0);
    }
}
