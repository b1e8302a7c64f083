//! The `data_block` target with the input's trailing crc32c recomputed
//! first, so mutations get past the checksum to the offset table and entry
//! decoding. See fuzz/README.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = larder_index::fuzzing::data_block_crc_fixed(data);
});
