//! A set of `u64` positions kept as disjoint, non-adjacent half-open
//! ranges: the space manager's per-container block states (frees waiting
//! to be released, punch candidates, punched space, possible holes) and the
//! simulated storage's byte ranges of files on no written block.

use std::collections::BTreeMap;

/// Disjoint, non-adjacent `[start, end)` ranges, keyed by start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeSet {
    ranges: BTreeMap<u64, u64>,
    total: u64,
}

impl RangeSet {
    /// Positions in the set.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The ranges in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.iter().map(|(&s, &e)| (s, e))
    }

    /// Adds `[start, end)`, merging with overlapping and adjacent ranges so
    /// neighbouring frees coalesce into one range.
    pub fn insert(&mut self, mut start: u64, mut end: u64) {
        if start >= end {
            return;
        }
        // A range ending at or after `start` and starting at or before `end`
        // touches the new one; the first candidate may start before it.
        if let Some((&s, &e)) = self.ranges.range(..=start).next_back() {
            if e >= start {
                start = s;
                end = end.max(e);
                self.ranges.remove(&s);
                self.total -= e - s;
            }
        }
        while let Some((&s, &e)) = self.ranges.range(start..=end).next() {
            end = end.max(e);
            self.ranges.remove(&s);
            self.total -= e - s;
        }
        self.ranges.insert(start, end);
        self.total += end - start;
    }

    /// Removes `[start, end)` (parts not in the set are ignored).
    pub fn remove(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let hit: Vec<(u64, u64)> = self.overlapping(start, end).collect();
        for (s, e) in hit {
            self.ranges.remove(&s);
            self.total -= e - s;
            if s < start {
                self.ranges.insert(s, start);
                self.total += start - s;
            }
            if e > end {
                self.ranges.insert(end, e);
                self.total += e - end;
            }
        }
    }

    /// The ranges that share at least one position with `[start, end)`.
    pub fn overlapping(&self, start: u64, end: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let first = self.ranges.range(..=start).next_back().filter(|(_, &e)| e > start).map(|(&s, &e)| (s, e));
        // `lo <= end` always, so the range below cannot panic.
        let lo = start.saturating_add(1).min(end);
        let rest = self.ranges.range(lo..end).map(|(&s, &e)| (s, e));
        first.into_iter().chain(rest).filter(move |&(s, e)| s < end && e > start)
    }

    /// Whether any position of `[start, end)` is in the set.
    pub fn intersects(&self, start: u64, end: u64) -> bool {
        self.overlapping(start, end).next().is_some()
    }

    /// The first `len`-long range inside `[start, end)` whose start is
    /// `start` plus a multiple of `align` and that misses the set.
    pub fn first_gap(&self, start: u64, end: u64, len: u64, align: u64) -> Option<u64> {
        let mut pos = start;
        for (s, e) in self.overlapping(start, end) {
            if pos.checked_add(len)? <= s {
                break;
            }
            if e > pos {
                // Round up to the next aligned start past this range.
                pos = start + (e - start).div_ceil(align) * align;
            }
        }
        (pos.checked_add(len)? <= end).then_some(pos)
    }

    /// The parts of `[0, limit)` not in the set.
    pub fn gaps(&self, limit: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut pos = 0;
        for (s, e) in self.iter() {
            if s >= limit {
                break;
            }
            if s > pos {
                out.push((pos, s));
            }
            pos = pos.max(e);
        }
        if pos < limit {
            out.push((pos, limit));
        }
        out
    }

    /// The ranges in both sets.
    pub fn intersection(&self, other: &RangeSet) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        for (s, e) in self.iter() {
            for (os, oe) in other.overlapping(s, e) {
                out.push((s.max(os), e.min(oe)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn insert_merges_and_remove_splits() {
        let mut r = RangeSet::default();
        r.insert(10, 20);
        r.insert(30, 40);
        r.insert(20, 30);
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![(10, 40)]);
        r.insert(5, 12);
        r.insert(39, 50);
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![(5, 50)]);
        r.remove(20, 25);
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![(5, 20), (25, 50)]);
        assert_eq!(r.total(), 40);
        assert!(r.intersects(19, 21) && !r.intersects(20, 25) && r.intersects(0, 6));
        assert_eq!(r.gaps(60), vec![(0, 5), (20, 25), (50, 60)]);
        r.insert(0, 100);
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![(0, 100)]);
        assert_eq!(r.total(), 100);
    }

    /// The simulated storage's uses: empty ranges, touching ranges, and
    /// half-open overlap tests.
    #[test]
    fn empty_ranges_add_nothing_and_ends_are_open() {
        let mut set = RangeSet::default();
        set.insert(10, 20);
        set.insert(30, 40);
        set.insert(5, 5);
        assert_eq!(set.iter().collect::<Vec<_>>(), [(10, 20), (30, 40)], "an empty range adds nothing");
        set.insert(20, 30);
        assert_eq!(set.iter().collect::<Vec<_>>(), [(10, 40)], "touching ranges merge");
        set.insert(0, 2);
        assert_eq!(set.iter().collect::<Vec<_>>(), [(0, 2), (10, 40)]);
        set.remove(15, 25);
        assert_eq!(set.iter().collect::<Vec<_>>(), [(0, 2), (10, 15), (25, 40)]);
        set.remove(0, 12);
        assert_eq!(set.iter().collect::<Vec<_>>(), [(12, 15), (25, 40)]);
        assert!(set.intersects(14, 16));
        assert!(!set.intersects(15, 25), "half-open: neither end is in");
        assert!(set.intersects(0, 100));
    }

    #[test]
    fn first_gap_respects_alignment() {
        let mut r = RangeSet::default();
        r.insert(0, 3);
        r.insert(9, 10);
        assert_eq!(r.first_gap(0, 16, 4, 4), Some(4));
        assert_eq!(r.first_gap(0, 16, 5, 4), Some(4));
        assert_eq!(r.first_gap(0, 16, 6, 4), None);
        assert_eq!(r.first_gap(0, 16, 2, 2), Some(4));
        assert_eq!(r.first_gap(0, 16, 1, 1), Some(3));
        assert_eq!(r.first_gap(8, 16, 4, 4), Some(12));
        assert_eq!(RangeSet::default().first_gap(8, 16, 8, 8), Some(8));
    }
}
