//! Bloom filters over the user keys of a run.
//!
//! Layout: the bit array, then the probe count as u8, then a crc32c of both.
//! A key's 64-bit hash (xxh3) gives every probe, so one hash serves every
//! run a lookup consults.
//!
//! Runs written by this build use the cache-local layout (run feature
//! [`super::RUN_FEATURE_LOCAL_FILTER`]): the upper half of the hash picks
//! one 64-byte line and all `k` probes fall inside it, so a lookup that
//! passes the filter costs one cache miss rather than `k`. Runs without the
//! feature use the classic layout (probes anywhere in the array), still read.

use crate::codec::{check_trailing_crc, crc, put_u32};
use crate::huge::{region_bytes_of, HugeSlice, RegionFill};

/// Bytes per line of the cache-local layout: one cache line.
const LINE_BYTES: usize = 64;
const LINE_BITS: u32 = 512;

/// Hash of a user key, computed once per lookup.
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// Where a filter's probes fall.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Double hashing over the whole array (runs without the feature bit).
    Classic,
    /// Every probe inside one 64-byte line.
    Local,
}

/// Classic probes: double hashing, each probe mapped onto `[0, nbits)` by
/// multiply-shift (no division).
fn classic_probes(hash: u64, k: u32, nbits: u64) -> impl Iterator<Item = u64> {
    let delta = hash.rotate_right(21) | 1;
    (0..u64::from(k)).map(move |i| {
        let h = hash.wrapping_add(i.wrapping_mul(delta));
        ((u128::from(h) * u128::from(nbits)) >> 64) as u64
    })
}

/// The line a key's probes use: multiply-shift of the hash's upper half.
fn local_line(hash: u64, lines: usize) -> usize {
    (((hash >> 32) * lines as u64) >> 32) as usize
}

/// Bit positions within the line: the top 9 bits of a 32-bit value that a
/// multiplicative step (golden ratio) remixes after each probe.
fn local_probes(hash: u64, k: u32) -> impl Iterator<Item = u32> {
    let mut h = hash as u32;
    (0..k).map(move |_| {
        let bit = h >> (32 - 9);
        h = h.wrapping_mul(0x9e37_79b9);
        bit
    })
}

/// The number of probes for a bits-per-key budget: ln 2 × bits per key
/// minimises false positives.
fn probe_count(bits_per_key: u32) -> u32 {
    ((f64::from(bits_per_key) * 0.69).round() as u32).clamp(1, 30)
}

/// Hashes a builder gathers before setting their bits in line order (512
/// KiB). On the bench VM a filter of 2M keys at 14 bits each costs about
/// 56 ns a key built in batches this size (as in batches of 256K), 79 in
/// batches of 16K and 121 set one key at a time.
const PENDING_HASHES: usize = 65_536;

/// Builds a cache-local filter sized for an expected number of keys.
///
/// Hashes are gathered and their bits set a batch at a time, in line
/// order: set as they came, every key of a filter larger than the CPU's
/// caches was a cache (and TLB) miss, which profiled as most of a large
/// run's writing (a bulk create of 4M files: 19% of every thread's time).
/// In line order the lines are visited in address order, a few per page.
/// The bits set, and so the filter, are the same in either order.
pub(crate) struct BloomBuilder {
    bits: Vec<u8>,
    k: u32,
    pending: Vec<u64>,
    /// The radix passes' other buffer, as long as `pending`.
    scratch: Vec<u64>,
}

impl BloomBuilder {
    /// `expected_keys` may overestimate (a merge dedupes keys): that only
    /// lowers the false-positive rate.
    pub(crate) fn new(expected_keys: u64, bits_per_key: u32) -> Self {
        let nbits = expected_keys.saturating_mul(u64::from(bits_per_key)).max(u64::from(LINE_BITS));
        let lines = nbits.div_ceil(u64::from(LINE_BITS)) as usize;
        let pending = Vec::with_capacity(PENDING_HASHES.min(usize::try_from(expected_keys).unwrap_or(usize::MAX)));
        BloomBuilder { bits: vec![0; lines * LINE_BYTES], k: probe_count(bits_per_key), pending, scratch: Vec::new() }
    }

    pub(crate) fn add(&mut self, hash: u64) {
        self.pending.push(hash);
        if self.pending.len() >= PENDING_HASHES {
            self.set_pending();
        }
    }

    /// Sets the bits of the gathered hashes. Ordered by their top 16
    /// bits, they are in line order to within a line per 65,536th of the
    /// filter: the line is a monotonic function of the upper half. Two
    /// radix passes of 8 bits order them in linear time (a comparison sort
    /// of the 64K hashes took a tenth of a bulk create's run writing).
    fn set_pending(&mut self) {
        order_by_top_bits(&mut self.pending, &mut self.scratch);
        let lines = self.bits.len() / LINE_BYTES;
        for &hash in &self.pending {
            let at = local_line(hash, lines) * LINE_BYTES;
            let line = &mut self.bits[at..at + LINE_BYTES];
            for bit in local_probes(hash, self.k) {
                line[(bit / 8) as usize] |= 1 << (bit % 8);
            }
        }
        self.pending.clear();
    }

    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.set_pending();
        let mut out = self.bits;
        out.push(self.k as u8);
        let c = crc(&out);
        put_u32(&mut out, c);
        out
    }
}

/// Orders `hashes` by their top 16 bits (stable least-significant-digit
/// radix passes over bits 48-55, then 56-63), `scratch` the other buffer.
fn order_by_top_bits(hashes: &mut Vec<u64>, scratch: &mut Vec<u64>) {
    for shift in [48, 56] {
        let digit = |h: u64| usize::from((h >> shift) as u8);
        let mut starts = [0usize; 256];
        for &h in hashes.iter() {
            starts[digit(h)] += 1;
        }
        let mut sum = 0;
        for s in starts.iter_mut() {
            (*s, sum) = (sum, sum + *s);
        }
        scratch.clear();
        scratch.resize(hashes.len(), 0);
        for &h in hashes.iter() {
            let d = digit(h);
            // starts[d] < hashes.len(): the counts sum to it.
            if let Some(slot) = scratch.get_mut(starts[d]) {
                *slot = h;
            }
            starts[d] += 1;
        }
        std::mem::swap(hashes, scratch);
    }
}

/// One line of a cache-local filter, aligned so that it is exactly one
/// cache line (a byte vector's lines would straddle two).
#[repr(align(64))]
#[derive(Clone, Copy, Debug)]
struct Line([u8; LINE_BYTES]);

/// A filter's bits in its layout's shape.
#[derive(Debug)]
enum Bits {
    Classic(Vec<u8>),
    Local(HugeSlice<Line>),
}

/// A verified filter.
#[derive(Debug)]
pub(crate) struct Bloom {
    bits: Bits,
    k: u32,
}

impl Bloom {
    #[cfg(test)]
    pub(crate) fn decode(raw: &[u8], layout: Layout) -> Result<Bloom, String> {
        Bloom::decode_in(raw, layout, None)
    }

    /// Bytes a filter section of `raw_len` bytes may take of a region.
    pub(crate) fn region_bytes(raw_len: usize) -> usize {
        region_bytes_of::<Line>(raw_len / LINE_BYTES)
    }

    /// As [`Bloom::decode`], a cache-local filter's lines built in `fill`'s
    /// region (huge pages) if there is room.
    pub(crate) fn decode_in(raw: &[u8], layout: Layout, fill: Option<&mut RegionFill>) -> Result<Bloom, String> {
        let body = check_trailing_crc(raw)?;
        let (&k, bytes) = body.split_last().ok_or("filter block is empty")?;
        if bytes.is_empty() || !(1..=30).contains(&k) {
            return Err(format!("filter has {} bytes and {k} probes", bytes.len()));
        }
        let bits = match layout {
            Layout::Classic => Bits::Classic(bytes.to_vec()),
            Layout::Local => {
                if !bytes.len().is_multiple_of(LINE_BYTES) {
                    return Err(format!("cache-local filter of {} bytes is not whole 64-byte lines", bytes.len()));
                }
                let mut lines = HugeSlice::filled(fill, bytes.len() / LINE_BYTES, Line([0; LINE_BYTES]));
                for (line, c) in lines.iter_mut().zip(bytes.chunks_exact(LINE_BYTES)) {
                    line.0.copy_from_slice(c);
                }
                Bits::Local(lines)
            }
        };
        Ok(Bloom { bits, k: u32::from(k) })
    }

    /// False means the key is certainly absent.
    pub(crate) fn may_contain(&self, hash: u64) -> bool {
        match &self.bits {
            Bits::Local(lines) => {
                let Some(line) = lines.get(local_line(hash, lines.len())) else { return true };
                local_probes(hash, self.k).all(|bit| line.0[(bit / 8) as usize] & (1 << (bit % 8)) != 0)
            }
            Bits::Classic(bytes) => {
                let nbits = bytes.len() as u64 * 8;
                classic_probes(hash, self.k, nbits).all(|bit| bytes[(bit / 8) as usize] & (1 << (bit % 8)) != 0)
            }
        }
    }

    /// Starts loading the line a lookup of `hash` will probe. A lookup
    /// prefetches the lines of all the runs it consults before probing
    /// any, so their cache misses overlap instead of queueing. A prefetch
    /// rather than a read of the line: a read that misses holds up the
    /// instructions behind it until it retires (a get's CPU 2.5% lower
    /// with the prefetch, eight alternating pairs of `read_profile`).
    pub(crate) fn prefetch(&self, hash: u64) {
        if let Bits::Local(lines) = &self.bits {
            if let Some(line) = lines.get(local_line(hash, lines.len())) {
                crate::prefetch::prefetch(line);
            }
        }
    }

    pub(crate) fn size_bytes(&self) -> usize {
        match &self.bits {
            Bits::Local(lines) => lines.size_bytes(),
            Bits::Classic(bytes) => bytes.len(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn false_positive_rate(f: &Bloom, n: u64) -> f64 {
        let fp = (n..n * 11).filter(|i| f.may_contain(key_hash(&i.to_le_bytes()))).count();
        fp as f64 / (10 * n) as f64
    }

    #[test]
    fn no_false_negatives_and_few_false_positives() {
        let n = 50_000u64;
        for (bits_per_key, bound) in [(10, 0.015), (14, 0.004)] {
            let mut b = BloomBuilder::new(n, bits_per_key);
            for i in 0..n {
                b.add(key_hash(&i.to_le_bytes()));
            }
            let f = Bloom::decode(&b.finish(), Layout::Local).unwrap();
            for i in 0..n {
                assert!(f.may_contain(key_hash(&i.to_le_bytes())));
            }
            let rate = false_positive_rate(&f, n);
            assert!(rate < bound, "{bits_per_key} bits/key: false positive rate {rate}");
        }
    }

    /// A filter built on huge pages answers as one on the heap.
    #[test]
    fn a_filter_in_a_region_answers_as_on_the_heap() {
        let n = 400_000u64;
        let mut b = BloomBuilder::new(n, 14);
        for i in 0..n {
            b.add(key_hash(&i.to_le_bytes()));
        }
        let raw = b.finish();
        let heap = Bloom::decode(&raw, Layout::Local).unwrap();
        let probes: Vec<u64> = (0..2 * n).map(|i| key_hash(&i.to_le_bytes())).collect();
        let before: Vec<bool> = probes.iter().map(|&h| heap.may_contain(h)).collect();
        let mut fill = RegionFill::new(Bloom::region_bytes(raw.len())).unwrap();
        let f = Bloom::decode_in(&raw, Layout::Local, Some(&mut fill)).unwrap();
        assert!(matches!(&f.bits, Bits::Local(lines) if lines.in_region()));
        assert!(matches!(&heap.bits, Bits::Local(lines) if !lines.in_region()));
        let after: Vec<bool> = probes.iter().map(|&h| f.may_contain(h)).collect();
        assert_eq!(before, after);
        assert!(after[..n as usize].iter().all(|&b| b));
    }

    /// The filter as bits set one key at a time, in the order given.
    fn set_one_by_one(hashes: &[u64], expected_keys: u64, bits_per_key: u32) -> Vec<u8> {
        let b = BloomBuilder::new(expected_keys, bits_per_key);
        let (mut bits, k) = (b.bits, b.k);
        let lines = bits.len() / LINE_BYTES;
        for &hash in hashes {
            let at = local_line(hash, lines) * LINE_BYTES;
            for bit in local_probes(hash, k) {
                bits[at + (bit / 8) as usize] |= 1 << (bit % 8);
            }
        }
        bits.push(k as u8);
        let c = crc(&bits);
        put_u32(&mut bits, c);
        bits
    }

    /// Batching the bits in line order changes nothing in the filter, for
    /// batches cut anywhere (fewer keys than a batch, exactly one, several
    /// and a remainder), repeated keys, and more keys than expected.
    #[test]
    fn batched_bits_make_the_same_filter() {
        for (keys, expected, bits_per_key) in [
            (0u64, 1u64, 10u32),
            (100, 100, 10),
            (PENDING_HASHES as u64, PENDING_HASHES as u64, 14),
            (3 * PENDING_HASHES as u64 + 17, 2 * PENDING_HASHES as u64, 14),
        ] {
            let hashes: Vec<u64> = (0..keys).map(|i| key_hash(&(i % 1000 * 7 + i).to_le_bytes())).collect();
            let mut b = BloomBuilder::new(expected, bits_per_key);
            for &h in &hashes {
                b.add(h);
            }
            assert_eq!(b.finish(), set_one_by_one(&hashes, expected, bits_per_key), "{keys} keys");
        }
    }

    #[test]
    fn radix_passes_order_by_the_top_bits_and_keep_every_hash() {
        let mut hashes: Vec<u64> = (0..5000u64).map(|i| key_hash(&i.to_le_bytes())).collect();
        hashes.extend([u64::MAX, 0, 1 << 48, 1 << 56]);
        let mut sorted = hashes.clone();
        sorted.sort_unstable();
        let mut scratch = Vec::new();
        order_by_top_bits(&mut hashes, &mut scratch);
        assert!(hashes.windows(2).all(|w| w[0] >> 48 <= w[1] >> 48));
        hashes.sort_unstable();
        assert_eq!(hashes, sorted);
    }

    /// Filters of runs written before the cache-local layout still answer.
    #[test]
    fn classic_filters_still_read() {
        let n = 20_000u64;
        let k = probe_count(10);
        let mut bits = vec![0u8; (n * 10).div_ceil(8) as usize];
        let nbits = bits.len() as u64 * 8;
        for i in 0..n {
            for bit in classic_probes(key_hash(&i.to_le_bytes()), k, nbits) {
                bits[(bit / 8) as usize] |= 1 << (bit % 8);
            }
        }
        bits.push(k as u8);
        let c = crc(&bits);
        put_u32(&mut bits, c);
        let f = Bloom::decode(&bits, Layout::Classic).unwrap();
        assert!((0..n).all(|i| f.may_contain(key_hash(&i.to_le_bytes()))));
        assert!(false_positive_rate(&f, n) < 0.015);
    }

    #[test]
    fn corrupt_filter_is_refused() {
        let mut b = BloomBuilder::new(10, 10);
        b.add(1);
        let mut raw = b.finish();
        raw[0] ^= 1;
        assert!(Bloom::decode(&raw, Layout::Local).is_err());
        assert!(Bloom::decode(&[], Layout::Local).is_err());
        // A local filter must be whole lines.
        let mut odd = vec![0u8; 65];
        odd.push(7);
        let c = crc(&odd);
        put_u32(&mut odd, c);
        assert!(Bloom::decode(&odd, Layout::Local).is_err());
        assert!(Bloom::decode(&odd, Layout::Classic).is_ok());
    }
}
