//! Maps and sets keyed by numbers one side of the protocol handed out or
//! computed itself (handles, inode numbers, page indexes), hashed with one
//! multiply instead of SipHash: a request (server) or a cached call
//! (client) looks several of them up, and SipHash's resistance to chosen
//! keys buys nothing here, since the keys stored are never ones the other
//! side picked (a client only makes the server look numbers up, which adds
//! nothing to any table).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A map keyed by a handle, inode number or page index.
pub type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// A set of inode numbers.
pub type IdSet = HashSet<u64, BuildHasherDefault<IdHasher>>;

/// Hashes one `u64` by a multiply with an odd constant (the golden
/// ratio's), folding the high half down so that the table's low index
/// bits and its high control bits both vary with every bit of the key.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed; any other input still hashes, slowly.
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        let product = u128::from(self.0 ^ n) * 0x9e37_79b9_7f4a_7c15;
        self.0 = (product as u64) ^ ((product >> 64) as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_numbers_spread_over_low_and_high_bits() {
        let hash = |n: u64| {
            let mut h = IdHasher::default();
            h.write_u64(n);
            h.finish()
        };
        let low: HashSet<u64> = (1..=1024).map(|n| hash(n) & 1023).collect();
        let high: HashSet<u64> = (1..=1024).map(|n| hash(n) >> 57).collect();
        assert!(low.len() > 600, "low bits took {} of 1024 values", low.len());
        assert_eq!(high.len(), 128, "every 7-bit control value occurs");
    }

    #[test]
    fn a_map_finds_what_it_holds() {
        let mut map: IdMap<u64> = IdMap::default();
        for n in 0..10_000u64 {
            map.insert(n * 4096, n);
        }
        assert!((0..10_000u64).all(|n| map.get(&(n * 4096)) == Some(&n)));
        assert_eq!(map.get(&1), None);
    }
}
