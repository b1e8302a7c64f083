//! Bloom filters over the user keys of a run.
//!
//! Layout: the bit array, then the probe count as u8, then a crc32c of both.
//! A key's 64-bit hash (xxh3) gives the probe sequence by double hashing,
//! so one hash serves every run a lookup consults.

use crate::codec::{check_trailing_crc, crc, put_u32};

/// Hash of a user key, computed once per lookup.
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// The bit positions a key sets: double hashing, each probe mapped onto
/// `[0, nbits)` by multiply-shift (no division).
fn probes(hash: u64, k: u32, nbits: u64) -> impl Iterator<Item = u64> {
    let delta = hash.rotate_right(21) | 1;
    (0..u64::from(k)).map(move |i| {
        let h = hash.wrapping_add(i.wrapping_mul(delta));
        ((u128::from(h) * u128::from(nbits)) >> 64) as u64
    })
}

/// Builds a filter sized for an expected number of keys.
pub(crate) struct BloomBuilder {
    bits: Vec<u8>,
    k: u32,
}

impl BloomBuilder {
    /// `expected_keys` may overestimate (a merge dedupes keys): that only
    /// lowers the false-positive rate.
    pub(crate) fn new(expected_keys: u64, bits_per_key: u32) -> Self {
        let nbits = (expected_keys.saturating_mul(u64::from(bits_per_key))).max(64);
        let nbytes = nbits.div_ceil(8) as usize;
        // ln 2 * bits per key probes minimise false positives.
        let k = ((f64::from(bits_per_key) * 0.69).round() as u32).clamp(1, 30);
        BloomBuilder { bits: vec![0; nbytes], k }
    }

    pub(crate) fn add(&mut self, hash: u64) {
        let nbits = self.bits.len() as u64 * 8;
        for bit in probes(hash, self.k, nbits) {
            self.bits[(bit / 8) as usize] |= 1 << (bit % 8);
        }
    }

    pub(crate) fn finish(self) -> Vec<u8> {
        let mut out = self.bits;
        out.push(self.k as u8);
        let c = crc(&out);
        put_u32(&mut out, c);
        out
    }
}

/// A verified filter.
#[derive(Debug)]
pub(crate) struct Bloom {
    bits: Vec<u8>,
    k: u32,
}

impl Bloom {
    pub(crate) fn decode(raw: &[u8]) -> Result<Bloom, String> {
        let body = check_trailing_crc(raw)?;
        let (&k, bits) = body.split_last().ok_or("filter block is empty")?;
        if bits.is_empty() || !(1..=30).contains(&k) {
            return Err(format!("filter has {} bytes and {k} probes", bits.len()));
        }
        Ok(Bloom { bits: bits.to_vec(), k: u32::from(k) })
    }

    /// False means the key is certainly absent.
    pub(crate) fn may_contain(&self, hash: u64) -> bool {
        let nbits = self.bits.len() as u64 * 8;
        probes(hash, self.k, nbits).all(|bit| self.bits[(bit / 8) as usize] & (1 << (bit % 8)) != 0)
    }

    pub(crate) fn size_bytes(&self) -> usize {
        self.bits.len()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_about_one_percent_false_positives() {
        let n = 20_000u64;
        let mut b = BloomBuilder::new(n, 10);
        for i in 0..n {
            b.add(key_hash(&i.to_le_bytes()));
        }
        let f = Bloom::decode(&b.finish()).unwrap();
        for i in 0..n {
            assert!(f.may_contain(key_hash(&i.to_le_bytes())));
        }
        let fp = (n..n * 6).filter(|i| f.may_contain(key_hash(&i.to_le_bytes()))).count();
        let rate = fp as f64 / (5 * n) as f64;
        assert!(rate < 0.02, "false positive rate {rate}");
    }

    #[test]
    fn corrupt_filter_is_refused() {
        let mut b = BloomBuilder::new(10, 10);
        b.add(1);
        let mut raw = b.finish();
        raw[0] ^= 1;
        assert!(Bloom::decode(&raw).is_err());
        assert!(Bloom::decode(&[]).is_err());
    }
}
