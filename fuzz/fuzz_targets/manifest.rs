//! Feeds arbitrary bytes to the decoder of a manifest (ManifestState::decode plus its re-encode round trip);
//! it must accept or reject them, never panic. See fuzz/README.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = larder_index::fuzzing::manifest(data);
});
