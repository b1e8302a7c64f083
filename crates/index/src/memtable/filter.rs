//! A bloom filter over the keys of one memtable, set by the writer as it
//! inserts, so a get for a key the memtable lacks skips its search.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bits per expected key.
const BITS_PER_KEY: u64 = 10;
/// Probes per key.
const PROBES: u64 = 6;

pub(crate) struct MemFilter {
    words: Vec<AtomicU64>,
    nbits: u64,
}

impl MemFilter {
    pub(crate) fn new(expected_keys: u64) -> Self {
        let words = (expected_keys.max(64) * BITS_PER_KEY).div_ceil(64);
        MemFilter { words: (0..words).map(|_| AtomicU64::new(0)).collect(), nbits: words * 64 }
    }

    fn probes(&self, hash: u64) -> impl Iterator<Item = u64> + '_ {
        let delta = hash.rotate_right(21) | 1;
        (0..PROBES).map(move |i| {
            let h = hash.wrapping_add(i.wrapping_mul(delta));
            ((u128::from(h) * u128::from(self.nbits)) >> 64) as u64
        })
    }

    /// Sets the key's bits. The entry becomes visible only after the
    /// writer publishes its sequence number (a release store), so a reader
    /// that can see the entry also sees these bits.
    pub(crate) fn add(&self, hash: u64) {
        for bit in self.probes(hash) {
            self.words[(bit / 64) as usize].fetch_or(1 << (bit % 64), Ordering::Relaxed);
        }
    }

    pub(crate) fn may_contain(&self, hash: u64) -> bool {
        self.probes(hash).all(|bit| self.words[(bit / 64) as usize].load(Ordering::Relaxed) & (1 << (bit % 64)) != 0)
    }

    pub(crate) fn size_bytes(&self) -> usize {
        self.words.len() * 8
    }
}
