//! The profiling examples' load: the index suite's random keys (C32), so
//! their figures compare with the bench's.

use larder_index::{Index, WriteBatch};

/// A 64-bit mixer (splitmix64's finaliser): the load's keys and the
/// reads' draws.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Key `i` of the load: 16 random-looking bytes.
pub fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&mix64(i).to_be_bytes());
    k[8..].copy_from_slice(&mix64(i ^ 0x5555).to_be_bytes());
    k
}

/// Puts keys 0..n with 100-byte values into `index`, 1,000 a batch, and
/// flushes.
pub fn load(index: &Index, n: u64) -> Result<(), larder_index::IndexError> {
    let value = [7u8; 100];
    let mut seq = 0;
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let mut batch = WriteBatch::new();
        for &i in chunk {
            batch.put(key(i), value);
        }
        seq += 1;
        index.write(seq, &batch)?;
    }
    index.flush()
}
