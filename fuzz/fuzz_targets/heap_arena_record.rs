//! A heap arena record (an 8-byte little-endian key, then the record's
//! bytes): arbitrary bytes must be accepted or refused, never panic, and an
//! accepted record must re-encode to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = larder_heap::arena::fuzzing::record(data);
});
