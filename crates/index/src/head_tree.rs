//! A static search tree over sorted 16-byte key heads, laid out in 64-byte
//! lines so that a search reads one cache line per level.
//!
//! A key's head is its first 16 bytes, big-endian and zero padded
//! ([`crate::memtable::key_head16`]): unequal heads order keys as their
//! bytes do, equal heads say nothing. Sixteen bytes, because store keys
//! begin with a map byte and a big-endian object id, so the first 8 bytes
//! of the keys of every object below 2^56 tie.
//!
//! Level 0 holds the heads, four to a line; each level above holds the last
//! head of every line below, up to a single line. A search descends from
//! the top line, and the upper levels stay in cache, so a search over a
//! million heads misses the cache a few times where a binary search over
//! the keys themselves misses about twenty (and dereferences keys besides).

use crate::huge::{region_bytes_of, HugeSlice, RegionFill};
use crate::prefetch::prefetch;

/// Heads per line: 4 × 16 bytes = one cache line.
pub(crate) const FANOUT: usize = 4;

/// One cache line of heads; unused slots hold `u128::MAX`.
#[repr(align(64))]
#[derive(Clone, Copy, Debug)]
struct Line([u128; FANOUT]);

/// See the module doc.
#[derive(Debug, Default)]
pub(crate) struct HeadTree {
    /// `levels[0]` holds every head; `levels[j + 1]` line `i` holds the
    /// last head of each line of `levels[j]` from line `FANOUT × i` on.
    /// The last level is one line; no levels when there are no heads.
    levels: Vec<HugeSlice<Line>>,
    len: usize,
}

impl HeadTree {
    /// Builds the tree over `heads`, which must be sorted.
    pub(crate) fn new(heads: impl ExactSizeIterator<Item = u128>) -> HeadTree {
        HeadTree::new_in(heads, None)
    }

    /// Bytes a tree over `len` heads takes of a region (see `huge`).
    pub(crate) fn region_bytes(len: usize) -> usize {
        let mut lines = len.div_ceil(FANOUT);
        let mut bytes = 0;
        while lines > 0 {
            bytes += region_bytes_of::<Line>(lines);
            lines = if lines == 1 { 0 } else { lines.div_ceil(FANOUT) };
        }
        bytes
    }

    /// As [`HeadTree::new`], its levels built in `fill`'s region (huge
    /// pages) while there is room.
    pub(crate) fn new_in(heads: impl ExactSizeIterator<Item = u128>, mut fill: Option<&mut RegionFill>) -> HeadTree {
        let len = heads.len();
        let mut levels: Vec<HugeSlice<Line>> = Vec::new();
        let mut current = HugeSlice::filled(fill.as_deref_mut(), len.div_ceil(FANOUT), Line([u128::MAX; FANOUT]));
        for (i, h) in heads.enumerate() {
            if let Some(line) = current.get_mut(i / FANOUT) {
                line.0[i % FANOUT] = h;
            }
        }
        while !current.is_empty() {
            let top = current.len() == 1;
            let lines = if top { 0 } else { current.len().div_ceil(FANOUT) };
            let mut above = HugeSlice::filled(fill.as_deref_mut(), lines, Line([u128::MAX; FANOUT]));
            for (l, c) in above.iter_mut().zip(current.chunks(FANOUT)) {
                for (slot, below) in l.0.iter_mut().zip(c) {
                    *slot = below.0[FANOUT - 1];
                }
            }
            levels.push(current);
            if top {
                break;
            }
            current = above;
        }
        HeadTree { levels, len }
    }

    /// The number of heads.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Head `i` (`i < len()`).
    pub(crate) fn get(&self, i: usize) -> u128 {
        self.levels[0][i / FANOUT].0[i % FANOUT]
    }

    /// The first position whose head is >= `head` (len() if none).
    pub(crate) fn first_at_least(&self, head: u128) -> usize {
        self.first_at_least_touching(head, |_| ())
    }

    /// [`HeadTree::first_at_least`], calling `touch(first)` once the
    /// bottom line the search reads is known (before it has loaded), with
    /// the position of that line's first head: the caller starts loading
    /// what it reads next for one of those [`FANOUT`] positions (a block's
    /// handle), and that miss overlaps the bottom line's.
    ///
    /// A line's slots point at [`FANOUT`] consecutive lines of the level
    /// below; the search starts loading all of them with the line itself,
    /// so whichever the comparison picks is already loading: a level's
    /// miss overlaps the next one's, where a plain descent waits for each
    /// level in turn (a quarter of a point get's time, in perf).
    pub(crate) fn first_at_least_touching(&self, head: u128, mut touch: impl FnMut(usize)) -> usize {
        let mut at = 0;
        for depth in (0..self.levels.len()).rev() {
            match self.visit(depth, at, head, &mut touch) {
                Some(below) => at = below,
                None => return self.len,
            }
        }
        at.min(self.len)
    }

    /// One level of a search: reads line `at` of level `depth`, starting
    /// to load what the search reads next (see
    /// [`HeadTree::first_at_least_touching`]), and gives the position the
    /// search takes on the level below; None past the level's last line
    /// (padding above: every head is smaller).
    fn visit(&self, depth: usize, at: usize, head: u128, touch: &mut impl FnMut(usize)) -> Option<usize> {
        let line = self.levels.get(depth)?.get(at)?;
        match depth.checked_sub(1).and_then(|below| self.levels.get(below)) {
            Some(below) => below.iter().skip(at * FANOUT).take(FANOUT).for_each(prefetch),
            None => touch(at * FANOUT),
        }
        Some(at * FANOUT + line.0.iter().filter(|&&h| h < head).count())
    }

    /// [`HeadTree::first_at_least_touching`] in several trees, each for
    /// its own head (`searches[i]`, None for none), into `out[i]`: the
    /// searches take their levels in turn, so one tree's misses at a level
    /// overlap the others' instead of each search waiting for the one
    /// before. `touch(i, first)` is called as `touch(first)` is for one.
    pub(crate) fn first_at_least_each(
        searches: &[Option<(&HeadTree, u128)>],
        mut touch: impl FnMut(usize, usize),
        out: &mut [usize],
    ) {
        /// A search that ran past a level's last line: every head is smaller.
        const PAST: usize = usize::MAX;
        out.iter_mut().for_each(|at| *at = 0);
        let levels = searches.iter().flatten().map(|(tree, _)| tree.levels.len()).max().unwrap_or(0);
        for step in 0..levels {
            for (i, (search, at)) in searches.iter().zip(out.iter_mut()).enumerate() {
                let Some((tree, head)) = search else { continue };
                // Every search starts at its tree's top: one of fewer levels
                // is done sooner.
                let Some(depth) = (levels - 1 - step).checked_sub(levels - tree.levels.len()) else { continue };
                if *at != PAST {
                    *at = tree.visit(depth, *at, *head, &mut |first| touch(i, first)).unwrap_or(PAST);
                }
            }
        }
        for (search, at) in searches.iter().zip(out.iter_mut()) {
            if let Some((tree, _)) = search {
                *at = (*at).min(tree.len);
            }
        }
    }

    /// [`HeadTree::first_at_least`] of every head of `heads`, into `out`
    /// (replaced): the searches descend together, a level at a time, so
    /// the lines one level misses for different heads load in parallel
    /// instead of one search's misses waiting for the previous search's.
    pub(crate) fn first_at_least_many(&self, heads: &[u128], out: &mut Vec<usize>) {
        /// A search that ran past the last line: every head is smaller.
        const PAST: usize = usize::MAX;
        out.clear();
        out.resize(heads.len(), 0);
        for level in self.levels.iter().rev() {
            for (at, &head) in out.iter_mut().zip(heads) {
                if *at == PAST {
                    continue;
                }
                *at = match level.get(*at) {
                    Some(line) => *at * FANOUT + line.0.iter().filter(|&&h| h < head).count(),
                    None => PAST,
                };
            }
        }
        for at in out.iter_mut() {
            *at = (*at).min(self.len);
        }
    }

    /// Memory held.
    pub(crate) fn size_bytes(&self) -> usize {
        self.levels.iter().map(|l| l.size_bytes()).sum()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Every size around line and level boundaries, with runs of equal
    /// heads and the largest head, against a plain partition.
    #[test]
    fn searches_agree_with_a_plain_partition() {
        for n in (0..=90).chain([255, 256, 257, 1023, 1024, 1025]) {
            let heads: Vec<u128> =
                (0..n as u128).map(|i| if i + 2 >= n as u128 { u128::MAX } else { i / 3 * 10 }).collect();
            let tree = HeadTree::new(heads.iter().copied());
            assert_eq!(tree.len(), n);
            let mut probes: Vec<u128> =
                heads.iter().flat_map(|&h| [h, h.saturating_sub(1), h.saturating_add(1)]).collect();
            probes.extend([0, u128::MAX, 5]);
            for &p in &probes {
                let lo = heads.partition_point(|&h| h < p);
                let hi = heads.partition_point(|&h| h <= p);
                assert_eq!(tree.first_at_least(p), lo, "n {n} probe {p}");
                assert_eq!(p.checked_add(1).map_or(n, |next| tree.first_at_least(next)), hi, "n {n} probe {p}");
            }
            let mut many = vec![7];
            tree.first_at_least_many(&probes, &mut many);
            let one: Vec<usize> = probes.iter().map(|&p| heads.partition_point(|&h| h < p)).collect();
            assert_eq!(many, one, "n {n}: together as one by one");
            for (i, &h) in heads.iter().enumerate() {
                assert_eq!(tree.get(i), h);
            }
        }
    }

    proptest::proptest! {
        /// Any sorted heads (few distinct values, so long runs tie), any
        /// probe: the tree agrees with a plain partition.
        #[test]
        fn agrees_with_a_plain_partition_on_random_heads(
            mut heads in proptest::collection::vec(0u128..40, 0..700),
            probes in proptest::collection::vec(0u128..42, 1..40),
        ) {
            heads.sort_unstable();
            let tree = HeadTree::new(heads.iter().copied());
            for p in probes {
                let lo = heads.partition_point(|&h| h < p);
                let hi = heads.partition_point(|&h| h <= p);
                proptest::prop_assert_eq!(tree.first_at_least(p), lo);
                proptest::prop_assert_eq!(tree.first_at_least(p + 1), hi);
            }
        }
    }
}
