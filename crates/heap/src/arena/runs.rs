//! The arena's claimed ranges and its free page runs.
//!
//! Free runs are never stored: they are the claimed ranges minus the small
//! spans and large blocks, rebuilt by `Arena::load`. In memory they are
//! kept twice, by offset (to coalesce neighbours) and by (length, offset)
//! (best fit, lowest offset first among equals), so taking and giving a run
//! is O(log runs).

use std::collections::{BTreeMap, BTreeSet};

/// The byte ranges the arena claimed from its object: sorted, disjoint and
/// never adjacent (adjacent claims merge), each a whole number of pages.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Claimed {
    ranges: Vec<(u64, u64)>,
}

impl Claimed {
    /// Ranges as given; the caller checked they are canonical.
    pub(crate) fn from_ranges(ranges: Vec<(u64, u64)>) -> Claimed {
        Claimed { ranges }
    }

    pub(crate) fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }

    /// Adds `[start, start + len)`, merging it with adjacent ranges.
    /// Returns false (and changes nothing) if it overlaps a claimed range
    /// or wraps around.
    pub(crate) fn add(&mut self, start: u64, len: u64) -> bool {
        let Some(end) = start.checked_add(len) else { return false };
        let at = self.ranges.partition_point(|&(s, _)| s < start);
        if at > 0 {
            let (s, l) = self.ranges[at - 1];
            if s + l > start {
                return false;
            }
        }
        if let Some(&(s, _)) = self.ranges.get(at) {
            if s < end {
                return false;
            }
        }
        let merges_before = at > 0 && {
            let (s, l) = self.ranges[at - 1];
            s + l == start
        };
        let merges_after = self.ranges.get(at).is_some_and(|&(s, _)| s == end);
        match (merges_before, merges_after) {
            (true, true) => {
                let (_, after_len) = self.ranges.remove(at);
                self.ranges[at - 1].1 += len + after_len;
            }
            (true, false) => self.ranges[at - 1].1 += len,
            (false, true) => {
                self.ranges[at].0 = start;
                self.ranges[at].1 += len;
            }
            (false, false) => self.ranges.insert(at, (start, len)),
        }
        true
    }

    /// Whether `[offset, offset + len)` lies inside one claimed range.
    pub(crate) fn contains(&self, offset: u64, len: u64) -> bool {
        let Some(end) = offset.checked_add(len) else { return false };
        let at = self.ranges.partition_point(|&(s, _)| s <= offset);
        at > 0 && {
            let (s, l) = self.ranges[at - 1];
            end <= s + l
        }
    }

    /// Whether `[offset, offset + len)` shares a byte with a claimed range
    /// (an empty range: whether `offset` is a claimed byte).
    pub(crate) fn touches(&self, offset: u64, len: u64) -> bool {
        let end = offset.saturating_add(len.max(1));
        let at = self.ranges.partition_point(|&(s, _)| s < end);
        at > 0 && {
            let (s, l) = self.ranges[at - 1];
            s + l > offset
        }
    }
}

/// Free page runs: `(offset, len)`, disjoint, never adjacent.
#[derive(Debug, Default)]
pub(crate) struct FreeRuns {
    by_offset: BTreeMap<u64, u64>,
    by_size: BTreeSet<(u64, u64)>,
}

impl FreeRuns {
    /// Frees `[offset, offset + len)`, merging it with adjacent free runs.
    pub(crate) fn insert(&mut self, mut offset: u64, mut len: u64) {
        if let Some((&before, &before_len)) = self.by_offset.range(..offset).next_back() {
            if before + before_len == offset {
                self.remove(before, before_len);
                offset = before;
                len += before_len;
            }
        }
        if let Some(&after_len) = self.by_offset.get(&(offset + len)) {
            self.remove(offset + len, after_len);
            len += after_len;
        }
        self.by_offset.insert(offset, len);
        self.by_size.insert((len, offset));
    }

    fn remove(&mut self, offset: u64, len: u64) {
        self.by_offset.remove(&offset);
        self.by_size.remove(&(len, offset));
    }

    /// Takes `len` bytes from the start of the smallest run that holds
    /// them (lowest offset among equals).
    pub(crate) fn take(&mut self, len: u64) -> Option<u64> {
        let &(run_len, offset) = self.by_size.range((len, 0)..).next()?;
        self.remove(offset, run_len);
        if run_len > len {
            self.by_offset.insert(offset + len, run_len - len);
            self.by_size.insert((run_len - len, offset + len));
        }
        Some(offset)
    }

    /// Runs in offset order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.by_offset.iter().map(|(&o, &l)| (o, l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_merge_when_adjacent_and_refuse_overlaps() {
        let mut claimed = Claimed::default();
        assert!(claimed.add(8192, 4096));
        assert!(claimed.add(0, 4096));
        assert!(claimed.add(4096, 4096));
        assert_eq!(claimed.ranges(), &[(0, 12_288)]);
        assert!(claimed.add(20_480, 4096));
        assert!(!claimed.add(8192, 8192), "overlaps the end of the first range");
        assert!(!claimed.add(16_384, 8192), "overlaps the second range");
        assert!(!claimed.add(u64::MAX - 4095, 8192), "wraps around");
        assert_eq!(claimed.ranges(), &[(0, 12_288), (20_480, 4096)]);
        assert!(claimed.contains(4096, 8192) && !claimed.contains(8192, 8192));
        assert!(claimed.touches(12_287, 0) && !claimed.touches(12_288, 0) && claimed.touches(12_000, 10_000));
        assert!(!claimed.touches(12_288, 8192) && claimed.touches(12_288, 8193));
    }

    #[test]
    fn free_runs_coalesce_and_take_the_best_fit() {
        let mut runs = FreeRuns::default();
        runs.insert(0, 4096);
        runs.insert(8192, 4096);
        runs.insert(32_768, 16_384);
        runs.insert(65_536, 8192);
        assert_eq!(runs.take(8192), Some(65_536), "the smallest run that fits");
        assert_eq!(runs.take(4096), Some(0), "the lowest among equals");
        runs.insert(4096, 4096);
        assert_eq!(runs.iter().collect::<Vec<_>>(), vec![(4096, 8192), (32_768, 16_384)], "merged with the run after");
        runs.insert(12_288, 20_480);
        assert_eq!(runs.iter().collect::<Vec<_>>(), vec![(4096, 45_056)], "merged on both sides");
        assert_eq!(runs.take(65_536), None);
    }
}
