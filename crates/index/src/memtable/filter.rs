//! A bloom filter over the keys of one memtable, set by the writer as it
//! inserts, so a get for a key the memtable lacks skips its search.
//!
//! Cache-local, as the runs' filters are: the hash's upper half picks one
//! 64-byte line (eight words) and every probe falls inside it, so a probe
//! of a key costs one cache miss rather than one per probe. (With probes
//! spread over the whole array, a 64 MiB memtable's filter of about 900 KB
//! missed the cache six times per get: about a sixth of a trees get
//! answered from a memtable, in perf.)

use std::sync::atomic::{AtomicU64, Ordering};

/// Bits per expected key.
const BITS_PER_KEY: u64 = 10;
/// Probes per key.
const PROBES: u32 = 6;
/// Words per line: 8 × 8 bytes, one cache line.
const LINE_WORDS: usize = 8;

/// One cache line of the filter.
#[repr(align(64))]
struct Line([AtomicU64; LINE_WORDS]);

pub(crate) struct MemFilter {
    lines: Vec<Line>,
}

/// The bits a key sets in its line, as one mask per word: the top 9 bits
/// of a 32-bit value that a multiplicative step (golden ratio) remixes
/// after each probe, as the runs' filters do.
fn line_masks(hash: u64) -> [u64; LINE_WORDS] {
    let mut masks = [0u64; LINE_WORDS];
    let mut h = hash as u32;
    for _ in 0..PROBES {
        let bit = h >> (32 - 9);
        masks[(bit / 64) as usize] |= 1 << (bit % 64);
        h = h.wrapping_mul(0x9e37_79b9);
    }
    masks
}

/// A key's probe of memtable filters, its bits worked out once: a get
/// asks two filters (the memtable's, its skip list's) with one probe.
pub(crate) struct FilterProbe {
    hash: u64,
    masks: [u64; LINE_WORDS],
}

impl FilterProbe {
    pub(crate) fn new(hash: u64) -> FilterProbe {
        FilterProbe { hash, masks: line_masks(hash) }
    }
}

impl MemFilter {
    pub(crate) fn new(expected_keys: u64) -> Self {
        let bits = expected_keys.max(64) * BITS_PER_KEY;
        let lines = bits.div_ceil(64 * LINE_WORDS as u64) as usize;
        MemFilter { lines: (0..lines).map(|_| Line(Default::default())).collect() }
    }

    /// The line of a key's probes: multiply-shift of the hash's upper half.
    fn line(&self, hash: u64) -> &Line {
        let i = (((hash >> 32) * self.lines.len() as u64) >> 32) as usize;
        &self.lines[i]
    }

    /// Sets the key's bits. The entry becomes visible only after the
    /// writer publishes its sequence number (a release store), so a reader
    /// that can see the entry also sees these bits.
    pub(crate) fn add(&self, hash: u64) {
        let line = self.line(hash);
        for (word, mask) in line.0.iter().zip(line_masks(hash)) {
            if mask != 0 && word.load(Ordering::Relaxed) & mask != mask {
                word.fetch_or(mask, Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn may_contain(&self, hash: u64) -> bool {
        self.may_contain_probe(&FilterProbe::new(hash))
    }

    /// [`MemFilter::may_contain`] of the probe's key.
    pub(crate) fn may_contain_probe(&self, probe: &FilterProbe) -> bool {
        let line = self.line(probe.hash);
        line.0.iter().zip(probe.masks).all(|(word, mask)| word.load(Ordering::Relaxed) & mask == mask)
    }

    pub(crate) fn size_bytes(&self) -> usize {
        self.lines.len() * std::mem::size_of::<Line>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::bloom::key_hash;

    /// Every key added is found; keys never added mostly are not (10 bits
    /// per key, 6 probes in one line: about 1%, checked loosely).
    #[test]
    fn finds_every_key_and_few_others() {
        let filter = MemFilter::new(10_000);
        for i in 0..10_000u32 {
            filter.add(key_hash(format!("key-{i}").as_bytes()));
        }
        for i in 0..10_000u32 {
            assert!(filter.may_contain(key_hash(format!("key-{i}").as_bytes())), "key-{i} lost");
        }
        let false_positives =
            (0..100_000u32).filter(|i| filter.may_contain(key_hash(format!("other-{i}").as_bytes()))).count();
        assert!(false_positives < 3_000, "{false_positives} false positives in 100,000");
        assert!(false_positives > 0, "a filter this full must err sometimes");
    }

    /// The smallest filter (64 keys' worth: two lines) holds what it is
    /// given, and a key's bits all lie in its one line.
    #[test]
    fn a_key_sets_bits_in_one_line_only() {
        let filter = MemFilter::new(1);
        assert_eq!(filter.size_bytes(), 128);
        let hash = key_hash(b"only");
        filter.add(hash);
        assert!(filter.may_contain(hash));
        let set: Vec<u32> =
            filter.lines.iter().map(|l| l.0.iter().map(|w| w.load(Ordering::Relaxed).count_ones()).sum()).collect();
        assert_eq!(set.iter().filter(|&&n| n > 0).count(), 1, "bits per line: {set:?}");
        assert!((1..=PROBES).contains(&set.iter().sum()), "bits per line: {set:?}");
    }
}
