//! The `manifest` target with the body length (bytes 12..16) and trailing
//! crc32c of the input recomputed first, so mutations get past the checksum
//! to the field checks and the re-encode round trip. See fuzz/README.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut m = data.to_vec();
    if m.len() >= 20 {
        let body = (m.len() - 20) as u32;
        m[12..16].copy_from_slice(&body.to_le_bytes());
        let at = m.len() - 4;
        let c = crc32c::crc32c(&m[..at]);
        m[at..].copy_from_slice(&c.to_le_bytes());
    }
    let _ = larder_index::fuzzing::manifest(&m);
});
