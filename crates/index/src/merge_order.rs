//! The sorted order of a sequence made of a few sorted stretches, found
//! without sorting it: a bulk create's batch is its new onodes by id, then
//! its new dentries by name, then the directory's own update, and a stable
//! sort of its 2M operations (merging those stretches, moving each) was a
//! tenth of its ingest. Here each stretch is found with one comparison per
//! item, then the stretches are merged by galloping: the least head's
//! stretch gives up, in one piece, every item before the next least head,
//! found by an exponential search.

use std::ops::Range;

/// Ranges of `items` that, taken in turn, visit them in the order a
/// stable sort by `less` (a strict total order) would: each range lies
/// within one stretch of `items` whose items increase by `less`. None when
/// `items` holds more than `max_stretches` such stretches (the caller
/// sorts instead).
pub(crate) fn merged_ranges<T>(
    items: &[T],
    less: impl Fn(&T, &T) -> bool,
    max_stretches: usize,
) -> Option<Vec<Range<usize>>> {
    let mut heads: Vec<Range<usize>> = Vec::new();
    let mut start = 0;
    for (i, pair) in items.windows(2).enumerate() {
        if !less(&pair[0], &pair[1]) {
            if heads.len() == max_stretches {
                return None;
            }
            heads.push(start..i + 1);
            start = i + 1;
        }
    }
    if start < items.len() {
        if heads.len() == max_stretches {
            return None;
        }
        heads.push(start..items.len());
    }
    let mut out = Vec::new();
    loop {
        // The stretches whose heads are least and second least.
        let (mut first, mut second): (Option<usize>, Option<usize>) = (None, None);
        for (s, r) in heads.iter().enumerate() {
            if r.is_empty() {
                continue;
            }
            let head = &items[r.start];
            match first {
                Some(f) if !less(head, &items[heads[f].start]) => {
                    if second.is_none_or(|n| less(head, &items[heads[n].start])) {
                        second = Some(s);
                    }
                }
                _ => {
                    second = first;
                    first = Some(s);
                }
            }
        }
        let Some(f) = first else { break };
        let Some(n) = second else {
            out.push(heads[f].clone());
            break;
        };
        let bound = &items[heads[n].start];
        let run = heads[f].clone();
        // Gallop: the first item of the stretch not before `bound` lies
        // within the window that doubles until it passes one.
        let mut step = 1;
        while run.start + step < run.end && less(&items[run.start + step], bound) {
            step *= 2;
        }
        let window = run.start..(run.start + step + 1).min(run.end);
        let taken = items[window].partition_point(|x| less(x, bound)).max(1);
        out.push(run.start..run.start + taken);
        heads[f].start += taken;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The visit order of `merged_ranges`, against a stable sort's.
    fn check(items: &[(u32, u32)]) {
        let less = |a: &(u32, u32), b: &(u32, u32)| a.0 < b.0 || (a.0 == b.0 && a.1 > b.1);
        let mut sorted = items.to_vec();
        sorted.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let ranges = merged_ranges(items, less, usize::MAX).unwrap();
        let visited: Vec<(u32, u32)> = ranges.iter().flat_map(|r| items[r.clone()].iter().copied()).collect();
        assert_eq!(visited, sorted, "{items:?}");
        for r in &ranges {
            assert!(items[r.clone()].windows(2).all(|w| less(&w[0], &w[1])), "a range increases");
        }
    }

    #[test]
    fn ranges_visit_items_in_sorted_order() {
        // (key, position): positions increase, as a batch's sub-stamps do.
        let with_positions =
            |keys: &[u32]| -> Vec<(u32, u32)> { keys.iter().enumerate().map(|(i, &k)| (k, i as u32)).collect() };
        check(&[]);
        check(&with_positions(&[5]));
        check(&with_positions(&[1, 2, 3]));
        // Onodes, dentries, then the directory's own key, as a bulk create.
        let mut keys: Vec<u32> = (100..1100).collect();
        keys.extend(2000..3000);
        keys.extend([7, 7, 2500]);
        check(&with_positions(&keys));
        // Interleaved stretches and repeated keys.
        let mut keys: Vec<u32> = (0..500).map(|i| i * 2).collect();
        keys.extend((0..500).map(|i| i * 2 + 1));
        keys.extend((0..300).map(|i| i * 3));
        check(&with_positions(&keys));
        check(&with_positions(&[3, 2, 1, 1, 0]));
        let mut x = 12345u32;
        let random: Vec<u32> = (0..200)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x % 50
            })
            .collect();
        let less = |a: &(u32, u32), b: &(u32, u32)| a.0 < b.0 || (a.0 == b.0 && a.1 > b.1);
        assert!(merged_ranges(&with_positions(&random), less, 8).is_none(), "too many stretches");
        check(&with_positions(&random));
    }
}
