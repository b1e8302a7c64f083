//! The `data_block` target with the input's trailing crc32c recomputed
//! first, so mutations get past the checksum to the offset table and entry
//! decoding. See fuzz/README.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut b = data.to_vec();
    if b.len() >= 4 {
        let at = b.len() - 4;
        let c = crc32c::crc32c(&b[..at]);
        b[at..].copy_from_slice(&c.to_le_bytes());
    }
    let _ = larder_index::fuzzing::data_block(&b);
});
