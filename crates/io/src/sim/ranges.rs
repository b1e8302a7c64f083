//! Sets of byte ranges (sorted, disjoint, half-open) for the holes the
//! simulation tracks per file.

/// Adds `[start, end)` to a sorted set of disjoint ranges.
pub(super) fn add_range(set: &mut Vec<(u64, u64)>, start: u64, end: u64) {
    if start >= end {
        return;
    }
    let (mut s, mut e) = (start, end);
    set.retain(|&(a, b)| {
        if b < s || a > e {
            return true;
        }
        s = s.min(a);
        e = e.max(b);
        false
    });
    let at = set.partition_point(|&(a, _)| a < s);
    set.insert(at, (s, e));
}

/// Removes `[start, end)` from a sorted set of disjoint ranges.
pub(super) fn remove_range(set: &mut Vec<(u64, u64)>, start: u64, end: u64) {
    if start >= end {
        return;
    }
    let mut out = Vec::with_capacity(set.len() + 1);
    for &(a, b) in set.iter() {
        if b <= start || a >= end {
            out.push((a, b));
            continue;
        }
        if a < start {
            out.push((a, start));
        }
        if b > end {
            out.push((end, b));
        }
    }
    *set = out;
}

/// Whether two half-open ranges share a byte.
pub(super) fn meets((a, b): (u64, u64), (start, end): (u64, u64)) -> bool {
    a < end && start < b
}

/// Whether `[start, end)` meets a range of the set.
pub(super) fn overlaps(set: &[(u64, u64)], start: u64, end: u64) -> bool {
    set.iter().any(|&r| meets(r, (start, end)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adding_merges_touching_and_overlapping_ranges_and_removing_splits() {
        let mut set = Vec::new();
        add_range(&mut set, 10, 20);
        add_range(&mut set, 30, 40);
        add_range(&mut set, 5, 5);
        assert_eq!(set, [(10, 20), (30, 40)], "an empty range adds nothing");
        add_range(&mut set, 20, 30);
        assert_eq!(set, [(10, 40)], "touching ranges merge");
        add_range(&mut set, 0, 2);
        assert_eq!(set, [(0, 2), (10, 40)]);
        remove_range(&mut set, 15, 25);
        assert_eq!(set, [(0, 2), (10, 15), (25, 40)]);
        remove_range(&mut set, 0, 12);
        assert_eq!(set, [(12, 15), (25, 40)]);
        assert!(overlaps(&set, 14, 16));
        assert!(!overlaps(&set, 15, 25), "half-open: neither end is in");
        assert!(overlaps(&set, 0, 100));
    }
}
