//! The `manifest` target with the body length (bytes 12..16) and trailing
//! crc32c of the input recomputed first, so mutations get past the checksum
//! to the field checks and the re-encode round trip. See fuzz/README.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = larder_index::fuzzing::manifest_crc_fixed(data);
});
