//! A binary buddy allocator over the 4 KiB blocks of one container.

use std::collections::BTreeSet;

/// Free space of one container as buddy free lists.
///
/// Invariants (checked by [`Buddy::check`], run after every change in debug
/// and test builds):
/// 1. `free[o]` holds starts of free blocks of `2^o` blocks, each aligned to
///    `2^o` and inside the container;
/// 2. no two free blocks (of any orders) share a block;
/// 3. no block in `free[o]` has its buddy (`start ^ 2^o`) in `free[o]` too:
///    two free buddies are always merged, so a set of free blocks has
///    exactly one representation (the largest aligned pieces), which makes
///    free space comparable after a rebuild;
/// 4. `free_blocks` is the sum of the free blocks' sizes (free + allocated
///    = the whole container is checked by the owner, which counts the rest).
///
/// Unlike a textbook buddy allocator, callers take and return arbitrary
/// block ranges ([`Buddy::take_range`], [`Buddy::free_range`]): an
/// allocation of `n` blocks takes exactly `n`, and the unused tail of its
/// power-of-two chunk stays on the free lists as smaller buddies, so there
/// is no 2x internal fragmentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Buddy {
    /// Blocks in the container (a power of two).
    blocks: u64,
    /// `log2(blocks)`: the order of the whole container.
    max_order: u32,
    /// Free lists, by order. Ordered sets keep allocation deterministic and
    /// lowest-address first.
    free: Vec<BTreeSet<u64>>,
    free_blocks: u64,
}

/// `ceil(log2(n))` for `n >= 1`.
pub(crate) fn ceil_log2(n: u64) -> u32 {
    if n <= 1 {
        0
    } else {
        64 - (n - 1).leading_zeros()
    }
}

impl Buddy {
    /// A container of `blocks` (a power of two) with every block allocated.
    pub(crate) fn all_allocated(blocks: u64) -> Buddy {
        let max_order = blocks.trailing_zeros();
        Buddy { blocks, max_order, free: vec![BTreeSet::new(); max_order as usize + 1], free_blocks: 0 }
    }

    /// A container of `blocks` with every block free.
    #[cfg(test)]
    pub(crate) fn all_free(blocks: u64) -> Buddy {
        let mut b = Buddy::all_allocated(blocks);
        b.free_range(0, blocks);
        b
    }

    /// Free blocks.
    pub(crate) fn free_blocks(&self) -> u64 {
        self.free_blocks
    }

    /// The order of the whole container.
    pub(crate) fn max_order(&self) -> u32 {
        self.max_order
    }

    /// Starts of the free blocks of order `order`, lowest first.
    pub(crate) fn free_of_order(&self, order: u32) -> impl Iterator<Item = u64> + '_ {
        self.free.get(order as usize).into_iter().flatten().copied()
    }

    /// The free blocks (as `(order, start)`) sharing a block with `[start,
    /// end)`, by order. An iterator: `any_free` stops at the first, and no
    /// caller pays for a vector (frees and allocations ask on every call).
    fn overlapping(&self, start: u64, end: u64) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.free.iter().enumerate().flat_map(move |(o, list)| {
            let size = 1u64 << o;
            // A block of this order overlaps iff it starts in (start - size, end).
            let lo = (start + 1).saturating_sub(size);
            list.range(lo..end.max(lo)).map(move |&s| (o as u32, s))
        })
    }

    /// Whether any block of `[start, end)` is free.
    pub(crate) fn any_free(&self, start: u64, end: u64) -> bool {
        self.overlapping(start, end).next().is_some()
    }

    /// Whether every block of `[start, end)` is free.
    pub(crate) fn all_free_in(&self, start: u64, end: u64) -> bool {
        covered(self.overlapping(start, end), start, end) == end - start
    }

    /// Adds one aligned block, merging it with its buddy while that is free.
    fn insert_block(&mut self, mut order: u32, mut start: u64) {
        self.free_blocks += 1 << order;
        while order < self.max_order {
            let buddy = start ^ (1 << order);
            if !self.free[order as usize].remove(&buddy) {
                break;
            }
            start = start.min(buddy);
            order += 1;
        }
        self.free[order as usize].insert(start);
    }

    /// Adds `[start, end)` as the largest aligned pieces, merging buddies.
    fn insert_range(&mut self, mut start: u64, end: u64) {
        while start < end {
            let align = if start == 0 { self.max_order } else { start.trailing_zeros().min(self.max_order) };
            let fit = 63 - (end - start).leading_zeros();
            let order = align.min(fit);
            self.insert_block(order, start);
            start += 1 << order;
        }
    }

    /// Returns allocated blocks `[start, end)` to the free lists. The caller
    /// has checked that none of them is free (`!any_free`).
    pub(crate) fn free_range(&mut self, start: u64, end: u64) {
        debug_assert!(!self.any_free(start, end), "free_range of free blocks [{start}, {end})");
        self.insert_range(start, end);
    }

    /// Takes the free blocks `[start, end)` off the free lists, putting back
    /// the parts of split blocks outside the range. Returns false, changing
    /// nothing, unless every block of the range is free.
    pub(crate) fn take_range(&mut self, start: u64, end: u64) -> bool {
        if start >= end || end > self.blocks {
            return false;
        }
        // One walk of the free lists serves both the check and the take.
        let found: Vec<(u32, u64)> = self.overlapping(start, end).collect();
        if covered(found.iter().copied(), start, end) != end - start {
            return false;
        }
        for (o, s) in found {
            self.free[o as usize].remove(&s);
            self.free_blocks -= 1 << o;
            let e = s + (1 << o);
            if s < start {
                self.insert_range(s, start);
            }
            if e > end {
                self.insert_range(end, e);
            }
        }
        true
    }

    /// The free space as merged `[start, end)` ranges, ascending.
    pub(crate) fn free_ranges(&self) -> Vec<(u64, u64)> {
        let mut all: Vec<(u64, u64)> =
            self.free.iter().enumerate().flat_map(|(o, l)| l.iter().map(move |&s| (s, s + (1 << o)))).collect();
        all.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(all.len());
        for (s, e) in all {
            match out.last_mut() {
                Some(last) if last.1 == s => last.1 = e,
                _ => out.push((s, e)),
            }
        }
        out
    }

    /// Checks invariants 1-4; returns the first one broken.
    pub(crate) fn check(&self) -> Result<(), String> {
        let mut all = Vec::new();
        let mut sum = 0u64;
        for (o, list) in self.free.iter().enumerate() {
            let size = 1u64 << o;
            for &s in list {
                if s % size != 0 || s + size > self.blocks {
                    return Err(format!("free block {s} of order {o} is misaligned or out of range"));
                }
                if o < self.max_order as usize && list.contains(&(s ^ size)) {
                    return Err(format!("free block {s} of order {o} and its buddy are both free, unmerged"));
                }
                all.push((s, s + size));
                sum += size;
            }
        }
        all.sort_unstable();
        if let Some(w) = all.windows(2).find(|w| w[0].1 > w[1].0) {
            return Err(format!("free blocks {:?} and {:?} overlap", w[0], w[1]));
        }
        if sum != self.free_blocks {
            return Err(format!("free lists hold {sum} blocks, counted {}", self.free_blocks));
        }
        Ok(())
    }
}

/// Blocks of `[start, end)` the free blocks `found` (as `(order, start)`,
/// disjoint) cover.
fn covered(found: impl Iterator<Item = (u32, u64)>, start: u64, end: u64) -> u64 {
    found.map(|(o, s)| (s + (1 << o)).min(end) - s.max(start)).sum()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn take_and_free_keep_canonical_form() {
        let mut b = Buddy::all_free(16);
        assert_eq!(b.free_of_order(4).collect::<Vec<_>>(), vec![0]);
        assert!(b.take_range(0, 3));
        b.check().unwrap();
        // The tail of the 4-block chunk stays free as [3,4) and [4,8), [8,16).
        assert_eq!(b.free_ranges(), vec![(3, 16)]);
        assert_eq!(b.free_of_order(0).collect::<Vec<_>>(), vec![3]);
        assert_eq!(b.free_blocks(), 13);
        assert!(!b.take_range(2, 4), "a range with an allocated block is refused");
        assert!(b.take_range(5, 6));
        b.check().unwrap();
        b.free_range(0, 3);
        b.free_range(5, 6);
        b.check().unwrap();
        assert_eq!(b, Buddy::all_free(16));
    }

    #[test]
    fn any_free_and_all_free_in() {
        let mut b = Buddy::all_allocated(8);
        b.free_range(2, 4);
        assert!(b.any_free(3, 5) && !b.any_free(4, 8) && !b.any_free(0, 2));
        assert!(b.all_free_in(2, 4) && !b.all_free_in(1, 4));
        assert_eq!(ceil_log2(1), 0);
        assert_eq!(ceil_log2(3), 2);
        assert_eq!(ceil_log2(4), 2);
        assert_eq!(ceil_log2(5), 3);
    }
}
