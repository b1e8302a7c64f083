//! One buffer of zeros, aligned for direct writes, shared by every
//! zero-fill (log segments, containers): a direct write from it needs no
//! aligned bounce copy, and no fill allocates a buffer of its own.

use std::sync::OnceLock;

use crate::storage::DIRECT_ALIGN;

/// Bytes of [`zeros`]: the largest zero-fill write it serves.
pub const ZEROS_BYTES: usize = 1 << 20;

static BUFFER: OnceLock<Vec<u8>> = OnceLock::new();

/// [`ZEROS_BYTES`] zeros starting at a [`DIRECT_ALIGN`] boundary (made on
/// first use and kept; its pages stay untouched until read).
pub fn zeros() -> &'static [u8] {
    let buffer = BUFFER.get_or_init(|| vec![0u8; ZEROS_BYTES + DIRECT_ALIGN]);
    // Always answered for a byte pointer; were it not, the slice would
    // start unaligned and a direct write of it would be bounced.
    let start = buffer.as_ptr().align_offset(DIRECT_ALIGN).min(DIRECT_ALIGN);
    &buffer[start..start + ZEROS_BYTES]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeros_are_aligned_zeros_of_their_size() {
        let z = zeros();
        assert_eq!(z.len(), ZEROS_BYTES);
        assert_eq!(z.as_ptr() as usize % DIRECT_ALIGN, 0);
        assert!(z.iter().all(|&b| b == 0));
    }
}
