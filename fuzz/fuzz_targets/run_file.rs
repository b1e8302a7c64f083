//! Feeds arbitrary bytes to the decoder of a whole run file (footer, meta,
//! filter, index, tombstones, every data block); it must accept or reject
//! them, never panic. See fuzz/README.md.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = larder_index::fuzzing::run_file(data);
});
