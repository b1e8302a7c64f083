//! Hole punching: which freed ranges to punch, and how fast.

use std::time::Instant;

use larder_io::RangeSet;

/// A token bucket of bytes: refills at `rate` bytes per second up to
/// `capacity`; starts full at the first refill.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    rate: u64,
    capacity: u64,
    tokens: u64,
    last: Option<Instant>,
}

impl TokenBucket {
    /// A bucket refilling at `rate` bytes/s holding at most `capacity`.
    pub(crate) fn new(rate: u64, capacity: u64) -> TokenBucket {
        TokenBucket { rate, capacity, tokens: 0, last: None }
    }

    /// Adds the tokens earned since the last refill (clock going backwards
    /// earns nothing) and returns the tokens available.
    pub(crate) fn refill(&mut self, now: Instant) -> u64 {
        match self.last {
            None => {
                self.tokens = self.capacity;
                self.last = Some(now);
            }
            Some(last) => {
                let nanos = now.saturating_duration_since(last).as_nanos();
                let earned = u128::from(self.rate) * nanos / 1_000_000_000;
                if earned > 0 {
                    // Only move the clock when tokens were earned, so
                    // frequent calls do not round every interval down to 0.
                    self.tokens =
                        u64::try_from(u128::from(self.tokens) + earned).unwrap_or(u64::MAX).min(self.capacity);
                    self.last = Some(now);
                }
            }
        }
        self.tokens
    }

    /// Spends `n` tokens (the caller checked they are available).
    pub(crate) fn spend(&mut self, n: u64) {
        self.tokens = self.tokens.saturating_sub(n);
    }
}

/// Picks ranges to punch from each container's punch candidates: only
/// ranges of at least `min_blocks` (smaller ones wait to coalesce with
/// neighbouring frees), largest first (most space per call), then by
/// container and address for determinism, within a budget of
/// `budget_blocks`. A range larger than the remaining budget is cut to it
/// if the cut is still at least `min_blocks`.
pub(crate) fn plan<'a>(
    candidates: impl Iterator<Item = (u64, &'a RangeSet)>,
    min_blocks: u64,
    mut budget_blocks: u64,
) -> Vec<(u64, u64, u64)> {
    let mut all: Vec<(u64, u64, u64)> = candidates
        .flat_map(|(id, set)| set.iter().filter(|(s, e)| e - s >= min_blocks).map(move |(s, e)| (id, s, e)))
        .collect();
    all.sort_by_key(|&(id, s, e)| (std::cmp::Reverse(e - s), id, s));
    let mut out = Vec::new();
    for (id, s, e) in all {
        let take = (e - s).min(budget_blocks);
        if take < min_blocks || take == 0 {
            break;
        }
        out.push((id, s, s + take));
        budget_blocks -= take;
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn bucket_starts_full_and_refills_at_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(1000, 2000);
        assert_eq!(b.refill(t0), 2000);
        b.spend(2000);
        assert_eq!(b.refill(t0), 0);
        assert_eq!(b.refill(t0 + Duration::from_millis(500)), 500);
        assert_eq!(b.refill(t0 + Duration::from_secs(10)), 2000);
        assert_eq!(b.refill(t0), 2000, "a clock going backwards earns nothing");
    }

    #[test]
    fn plan_prefers_large_ranges_and_respects_budget() {
        let mut a = RangeSet::default();
        a.insert(0, 4);
        a.insert(10, 30);
        let mut b = RangeSet::default();
        b.insert(0, 1);
        b.insert(5, 15);
        let sets = [(0, &a), (1, &b)];
        assert_eq!(plan(sets.iter().map(|&(i, s)| (i, s)), 2, 100), vec![(0, 10, 30), (1, 5, 15), (0, 0, 4)]);
        assert_eq!(plan(sets.iter().map(|&(i, s)| (i, s)), 2, 25), vec![(0, 10, 30), (1, 5, 10)]);
        assert_eq!(plan(sets.iter().map(|&(i, s)| (i, s)), 8, 21), vec![(0, 10, 30)]);
    }
}
